"""Fast tables for runs of consecutive positions, by the angle-addition formulas.

A table of ``N`` consecutive positions ``start, start + 1, ...`` is what models build
most often. Writing row ``t = a*B + b`` as block ``a`` plus offset ``b``,

    sin((s + aB + b) w) + i cos((s + aB + b) w)
        = [sin((s + aB) w) + i cos((s + aB) w)] * [cos(b w) - i sin(b w)]

so the whole table is one broadcast complex product of a ``(A, n)`` table of block
starts and a ``(B, n)`` table of offsets, with ``A*B >= N`` and both near ``sqrt(N)``.
The product's real and imaginary parts *are* the interleaved ``[sin, cos]`` layout in
memory. Both small tables are computed exactly on the host in float64 (by
:func:`~pe_core._kernel.angles.reduced_angles`) and rounded once, so every entry of the result
is within about 2.5e-7 of the true value in float32: no transcendental per element,
a few multiply-adds instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core._kernel.angles import block_shape, start_table, step_table
from pe_core._kernel.compiled import compiled
from pe_core_backends import Namespace


def contiguous_start(values: np.ndarray | None) -> int | None:
    """``start`` if ``values`` (flattened) are ``start, start + 1, ...`` integers, else None.

    >>> contiguous_start(np.arange(5, 9)), contiguous_start(np.array([0, 2]))
    (5, None)
    """
    if values is None or values.size == 0:
        return None
    flat = values.reshape(-1)
    first = flat[0]
    if values.dtype.kind == "f" and not float(first).is_integer():
        return None
    if abs(float(first)) + flat.size > 2**52:
        return None
    if flat.size > 1 and not np.array_equal(
        np.diff(flat), np.ones(flat.size - 1, dtype=flat.dtype)
    ):
        return None
    return int(first)


def offset_table(block: int, omegas: tuple[float, ...], working: str) -> np.ndarray:
    """``cos(b w) - i sin(b w)`` for the offsets ``b = 0 .. block - 1`` (``(block, P)``
    complex, exact angles; cached): the lookup route's step rows."""
    return step_table(block, omegas, working, "sin_cos")


def _combine(xp: Namespace, starts: Any, offsets: Any, n_rows: int, layout: str) -> Any:
    blocks, n_pairs = xp.shape(starts)
    block = xp.shape(offsets)[0]
    pairs = xp.view_as_real(xp.expand_dims(starts, 1) * xp.expand_dims(offsets, 0))
    pairs = xp.reshape(pairs, (blocks * block, n_pairs, 2))[:n_rows]
    if layout == "interleaved":
        return xp.reshape(pairs, (n_rows, 2 * n_pairs))
    return xp.concat([pairs[..., 0], pairs[..., 1]], axis=-1)


def table_sin_cos(
    xp: Namespace,
    start: int,
    n_rows: int,
    omegas: tuple[float, ...],
    *,
    offset: int | float,
    layout: str,
    working: str,
    like: Any = None,
    out: Any = None,
) -> Any:
    """The ``(n_rows, 2 * len(omegas))`` table of positions ``start ...`` in ``layout``.

    With ``out`` (a mutable backend's contiguous float array of that shape, interleaved
    layout, whole blocks) the product is written straight into it.
    """
    blocks, block = block_shape(n_rows)
    # sin(aw) + i cos(aw) at the block starts: the lookup route's start rows
    starts = xp.asarray(
        start_table(start, blocks, block, omegas, offset, working, "sin_cos"), like=like
    )
    offsets = xp.asarray(offset_table(block, omegas, working), like=like)
    if out is not None and layout == "interleaved" and blocks * block == n_rows:
        target = xp.reshape(xp.complex_view(out), (blocks, block, len(omegas)))
        xp.multiply_into(xp.expand_dims(starts, 1), xp.expand_dims(offsets, 0), target)
        return out
    table = compiled(xp.name, _combine, n_rows, layout)(starts, offsets)
    return table if out is None else xp.copy_into(out, table)
