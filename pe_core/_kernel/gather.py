"""Angle addition by lookup, for arbitrary integer positions.

:mod:`pe_core._kernel.tables` builds a run of consecutive positions as one broadcast product
of two small tables. Positions that are *not* one run (a permutation, per-example
offsets ``offsets[:, None] + arange(n)``, left padding, packed sequences) can use the
same identity row by row. With ``lo = min(positions)`` and ``B`` a power of two near
``sqrt(max - lo + 1)``, every position is ``p = lo + a*B + b`` with ``0 <= b < B``, so

    e^{i (p + offset) w} = e^{i (lo + aB + offset) w} * e^{i b w}
                         = start[a] * step[b]

for two small tables: ``start`` (``A = ceil((max - lo + 1) / B)`` rows) and ``step``
(``B`` rows), both computed exactly on the host in float64 by
:func:`~pe_core._kernel.angles.reduced_angles` (the offset folded into ``start`` exactly) and
rounded once to complex64 (complex128 for float64 work). Each output row is then the
complex product of two gathered table rows: no transcendental per element, and every
entry within about 1.5e-7 of the true value in float32 (each factor is off by at most
half an ulp per component, the product adds a few roundings).

The real and imaginary parts of the product *are* the output's pairs in memory. For
``sin`` and ``cos`` pairs (the interleaved encoding ``[sin, cos, ...]``) the factors are
``sin(Aw) + i cos(Aw)`` and ``cos(bw) - i sin(bw)``, whose product is
``sin((A + b)w) + i cos((A + b)w)``; for ``[cos, sin]`` pairs (rotary embeddings) they
are plain ``e^{iAw}`` and ``e^{ibw}``.

Rows are processed in chunks: the two gathered operands of a chunk live in small
scratch buffers (a few hundred KiB, in cache) and are multiplied straight into the
output's complex view, so the peak memory is the output plus a little.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core._kernel.angles import block_shape, start_table, step_table
from pe_core._kernel.routes import (
    GATHER_MAX_ABS,
    GATHER_MIN_PAIRS,
    GATHER_MIN_ROWS,
    GATHER_TABLE_FRACTION,
)
from pe_core.rope_layout import TABLE_LAYOUTS
from pe_core_backends import Namespace

#: Bytes of each gathered operand per chunk (cache-sized).
CHUNK_BYTES = 512 * 1024
FORMS = ("sin_cos", "cos_sin")
LAYOUTS = TABLE_LAYOUTS  # one definition: pe_core.rope_layout


def gather_plan(values: np.ndarray, n_pairs: int) -> tuple[int, int, int] | None:
    """``(lo, A, B)`` for host positions ``values``, or None when the lookup does not apply.

    It does not apply to fractional or non-finite values, to too few rows
    (:data:`~pe_core._kernel.routes.GATHER_MIN_ROWS`,
    :data:`~pe_core._kernel.routes.GATHER_MIN_PAIRS`), or to positions spread so widely that the
    two tables would not be small next to the output (``A + B > n_rows / 4``).

    >>> gather_plan(np.random.default_rng(0).permutation(8192), 512)
    (0, 64, 128)
    >>> gather_plan(np.arange(8192) + 0.5, 512) is None  # fractional
    True
    >>> gather_plan(np.arange(256) * 10**6, 512) is None  # too wide
    True
    """
    n_rows = int(values.size)
    if n_pairs <= 0 or n_rows < GATHER_MIN_ROWS or n_rows * n_pairs < GATHER_MIN_PAIRS:
        return None
    kind = values.dtype.kind
    if kind not in "iuf":
        return None
    flat = values.reshape(-1)
    if kind == "f" and not (np.isfinite(flat).all() and (np.mod(flat, 1) == 0).all()):
        return None
    lo, hi = int(flat.min()), int(flat.max())  # exact for the integral floats left
    if max(abs(lo), abs(hi)) > GATHER_MAX_ABS:
        return None
    blocks, block = block_shape(hi - lo + 1)
    if (blocks + block) * GATHER_TABLE_FRACTION > n_rows:
        return None
    return lo, blocks, block


def gathered_unit_complex(
    xp: Namespace,
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float = 0,
    working: str = "float32",
    form: str = "sin_cos",
    layout: str = "interleaved",
    like: Any = None,
    out: Any = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Any:
    """Sin/cos pairs of ``(values + offset) * omegas`` by table lookup, or None.

    Parameters
    ----------
    xp : Namespace
        Backend to compute on; must be mutable (NumPy, PyTorch), else None is returned.
    values : numpy.ndarray
        Host positions, any shape, integer dtype or float dtype with integer values;
        row ``r`` of the result is position ``values.reshape(-1)[r]``.
    omegas : tuple of float
        Angular frequencies ``w`` (``n`` of them).
    offset : float
        Added to every position, folded into the table exactly (fractional allowed).
    working : {"float32", "float64"}
        Dtype of the result.
    form : {"sin_cos", "cos_sin"}
        Pairs ``[sin, cos]`` (sinusoidal encodings) or ``[cos, sin]`` (rotary).
    layout : {"interleaved", "split"}
        ``interleaved``: row ``[x0, y0, x1, y1, ...]`` for pairs ``(x, y)``;
        ``split``: ``[x0, x1, ... | y0, y1, ...]``.
    like : array, optional
        Results are placed on the device of ``like`` (torch).
    out : array, optional
        Real array of the working dtype, shape ``(n_rows, m)`` with ``m >= 2n`` and
        unit stride along the last axis, written in place and returned. Columns from
        ``2n`` on are set to zero (the constant column of odd ``d``).
    chunk_bytes : int
        Bytes of each gathered operand per chunk of rows.

    Returns
    -------
    array or None
        ``(n_rows, 2n)`` (or ``out``); None when the lookup does not apply (immutable
        backend, non-integer or non-finite values, too few rows, positions spread too
        widely: see :func:`gather_plan`) and the caller computes directly.

    Examples
    --------
    >>> from pe_core_backends import get_namespace
    >>> xp = get_namespace("numpy")
    >>> positions = np.random.default_rng(0).permutation(4096)
    >>> w = (1.0, 0.01, 1e-4) * 8
    >>> pairs = gathered_unit_complex(xp, positions, w)
    >>> pairs.shape, pairs.dtype
    ((4096, 48), dtype('float32'))
    >>> angles = positions[:, None] * np.array(w)
    >>> bool(np.abs(pairs[:, 0::2] - np.sin(angles)).max() < 3e-7)
    True
    >>> bool(np.abs(pairs[:, 1::2] - np.cos(angles)).max() < 3e-7)
    True
    >>> gathered_unit_complex(xp, positions + 0.5, w) is None  # fractional: compute directly
    True
    """
    if form not in FORMS:
        raise ValueError(f"Unknown form {form!r}. Expected one of: {', '.join(FORMS)}.")
    if layout not in LAYOUTS:
        raise ValueError(f"Unknown layout {layout!r}. Expected one of: {', '.join(LAYOUTS)}.")
    if working not in ("float32", "float64"):
        raise ValueError(f"working must be 'float32' or 'float64'. Received: {working!r}")
    if not xp.mutable:
        return None
    values = np.asarray(values)
    n_pairs = len(omegas)
    plan = gather_plan(values, n_pairs)
    if plan is None:
        return None
    lo, blocks, block = plan
    n_rows = int(values.size)
    real = xp.dtype(working)
    if out is None:
        out = xp.empty((n_rows, 2 * n_pairs), real, like=like)
    else:
        shape = xp.shape(out)
        if len(shape) != 2 or shape[0] != n_rows or shape[1] < 2 * n_pairs:
            raise ValueError(f"out must have shape ({n_rows}, >= {2 * n_pairs}). Received: {shape}")
        if xp.dtype_of(out) != working:
            raise ValueError(f"out must have dtype {working}. Received: {xp.dtype_of(out)}")
        if shape[1] > 2 * n_pairs:
            extra = (n_rows, shape[1] - 2 * n_pairs)
            xp.copy_into(out[:, 2 * n_pairs :], xp.zeros(extra, real, like=out))
    starts = xp.asarray(
        start_table(lo, blocks, block, tuple(omegas), offset, working, form), like=like
    )
    steps = xp.asarray(step_table(block, tuple(omegas), working, form), like=like)

    row_bytes = n_pairs * (8 if working == "float32" else 16)
    # Chunks of at most a quarter of the rows: the scratch stays below half the output.
    rows = max(1, min(chunk_bytes // row_bytes, -(-n_rows // 4)))
    scratch_a = xp.complex_view(xp.empty((rows, 2 * n_pairs), real, like=like))
    scratch_b = xp.complex_view(xp.empty((rows, 2 * n_pairs), real, like=like))
    direct = layout == "interleaved" and xp.shape(out)[1] == 2 * n_pairs
    target: Any = xp.complex_view(out) if direct else None
    indices = _index_source(xp, values.reshape(-1), lo, block, rows, like)

    for r0 in range(0, n_rows, rows):
        r1 = min(n_rows, r0 + rows)
        a, b = indices(r0, r1)
        first = xp.take_rows(starts, a, out=scratch_a[: r1 - r0])
        second = xp.take_rows(steps, b, out=scratch_b[: r1 - r0])
        if direct:
            xp.multiply_into(first, second, target[r0:r1])
            continue
        product = xp.view_as_real(xp.multiply_into(first, second, first))  # (m, n, 2)
        if layout == "interleaved":
            xp.copy_into(out[r0:r1, : 2 * n_pairs], xp.merge_last_two(product))
        else:
            xp.copy_into(out[r0:r1, :n_pairs], product[..., 0])
            xp.copy_into(out[r0:r1, n_pairs : 2 * n_pairs], product[..., 1])
    return out


def _index_source(
    xp: Namespace, flat: np.ndarray, lo: int, block: int, rows: int, like: Any
) -> Callable[[int, int], tuple[Any, Any]]:
    """``(r0, r1) -> (a, b)``: table rows of positions ``flat[r0:r1]`` on the backend.

    On the host the indices are made chunk by chunk (no full-size index arrays); for an
    accelerator they are made and sent once.
    """
    shift = block.bit_length() - 1

    def host(r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
        rel = flat[r0:r1].astype(np.int64)
        rel -= lo
        high = rel >> shift
        rel &= block - 1
        return high, rel

    if like is not None and xp.on_accelerator(like) and flat.size > rows:
        a_all, b_all = host(0, flat.size)
        a_all, b_all = xp.asarray(a_all, like=like), xp.asarray(b_all, like=like)
        return lambda r0, r1: (a_all[r0:r1], b_all[r0:r1])

    def chunk(r0: int, r1: int) -> tuple[Any, Any]:
        high, low = host(r0, r1)
        return xp.asarray(high, like=like), xp.asarray(low, like=like)

    return chunk
