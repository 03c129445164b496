"""``encode``: the sinusoidal encoding of any positions on any backend."""

from __future__ import annotations

import functools
import math
from typing import Any

from pe_core.angles import reduced_turns, sin_cos_turns
from pe_core.frequency import check_d, omegas
from pe_core.layout import assemble
from pe_core.positions import (
    as_positions,
    check_finite,
    choose_backend,
    fits_backend,
    resolve_dtype,
)
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.tables import MIN_PAIRS, contiguous_start, table_sin_cos
from pe_core_backends import Namespace, backend_of, get_namespace


def encode(
    pos: Any,
    d: int,
    *,
    spec: Spec | str | None = None,
    backend: str | None = None,
    dtype: Any = None,
    out: Any = None,
) -> Any:
    """Sinusoidal positional encoding of ``pos`` with ``d`` features.

    Parameters
    ----------
    pos : int, float, sequence, range or array
        Positions of any shape; integer or floating (fractional and negative
        positions are valid). Arrays may come from NumPy, JAX, PyTorch or TensorFlow.
    d : int
        Number of features.
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or a preset name (see :data:`~pe_core.PRESETS`);
        ``"vaswani"`` by default.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute. ``None`` follows the type of ``pos`` (a torch tensor gives a
        torch tensor on the same device); Python values give NumPy.
    dtype : str or dtype, optional
        Output dtype, float32 by default (or ``out``'s dtype); float64, float16 and
        bfloat16 where the backend has them. The angle is always computed exactly
        (see :mod:`pe_core.angles`); a low-precision dtype only rounds the result.
    out : array, optional
        A NumPy array or torch tensor of shape ``shape(pos) + (d,)`` to write into
        (for callers who refill a buffer); it is returned.

    Returns
    -------
    array
        Shape ``shape(pos) + (d,)``, values in ``[-1, 1]``.

    Notes
    -----
    Positions whose values are known (not traced) and form a run of consecutive
    integers, such as ``range(n)`` or ``offset + arange(n)``, take the table path of
    :mod:`pe_core.tables` (a few multiply-adds per element instead of sin and cos);
    any other positions take the exact per-element kernel of :mod:`pe_core.angles`.
    Both are within 1e-6 of the true value in float32.

    Examples
    --------
    >>> import numpy as np
    >>> pe = encode(range(3), 4)
    >>> pe.shape, pe.dtype
    ((3, 4), dtype('float32'))
    >>> [round(float(v), 3) for v in pe[1]]  # [sin 1, cos 1, sin .01, cos .01]
    [0.841, 0.54, 0.01, 1.0]
    >>> bool(abs(encode(10**6, 2)[0] - np.sin(10**6)) < 1e-6)  # exact at large positions
    True
    >>> buffer = np.empty((4096, 64), np.float32)
    >>> encode(range(4096), 64, out=buffer) is buffer
    True
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    if out is not None and backend is None and backend_of(pos) is None:
        backend = backend_of(out)
    xp, source = choose_backend(pos, backend)
    if source in (None, "numpy") and xp.name != "numpy" and out is None:
        host = as_positions(pos, get_namespace("numpy"), source)
        if not fits_backend(host, xp):
            # e.g. float64 positions for JAX without x64: encode exactly on the host
            # rather than let the conversion round them.
            name, _ = resolve_dtype(xp, dtype)
            table = encode(host, d, spec=spec, dtype="float64" if name == "float64" else "float32")
            return xp.astype(xp.asarray(table), xp.dtype(name))
        pos, source = host, "numpy"
    positions = as_positions(pos, xp, source)
    if out is not None:
        _check_out_backend(xp, out)
        if dtype is None:
            dtype = out.dtype
    out_name, out_dtype = resolve_dtype(xp, dtype)
    shape = xp.shape(positions)  # sizes may be None while tracing
    if out is not None:
        _check_out(xp, out, (*shape, d), out_name)
    values = xp.concrete(positions)
    working = "float64" if out_name == "float64" else "float32"
    if out_name in ("float16", "bfloat16") and values is not None and xp.supports("float64"):
        # Eager calls round the float64 result once, so even values near zero are the
        # exact value rounded to the output dtype (float32's ~1e-7 absolute error would
        # be many ulps there). Traced calls and JAX without x64 compute in float32.
        working = "float64"
    max_abs = check_finite(xp, positions, values=values)
    freqs = omegas(d, spec, xp)
    n_rows = math.prod(shape) if values is not None else None
    start = None
    if n_rows is not None and n_rows >= 64 and n_rows * len(freqs) >= MIN_PAIRS:
        start = contiguous_start(values)

    if start is not None:
        direct = out is not None and out_name == working and d % 2 == 0
        table = table_sin_cos(
            xp,
            start,
            n_rows,
            freqs,
            offset=spec.offset,
            layout=spec.layout,
            working=working,
            like=positions,
            out=xp.reshape(out, (n_rows, d)) if direct else None,
        )
        if direct:
            return out
        table = xp.reshape(table, (*shape, 2 * len(freqs)))
        if d % 2:
            table = xp.concat([table, xp.zeros((*shape, 1), table.dtype, like=table)], -1)
    else:
        max_abs_position = None if max_abs is None else max_abs + 1.0
        if values is None and xp.name == "tensorflow":
            # Traced by tf.function, perhaps without XLA: run the kernel as one XLA call.
            kernel = _compiled_kernel(xp.name, freqs, spec.offset, spec.layout, working, d, False)
            table = kernel(positions)
        elif values is not None and xp.compiles and (xp.name == "jax" or n_rows >= 4096):
            # Eager JAX/TensorFlow: one compiled kernel instead of an op-by-op dispatch,
            # on positions padded to a power-of-two length (few shapes, few compiles).
            fits = max_abs_position is not None and max_abs_position < 2**31
            kernel = _compiled_kernel(xp.name, freqs, spec.offset, spec.layout, working, d, fits)
            flat = xp.reshape(positions, (n_rows,))
            bucket = max(8, 1 << (n_rows - 1).bit_length())
            if bucket > n_rows:
                flat = xp.concat([flat, xp.zeros((bucket - n_rows,), flat.dtype, like=flat)], 0)
            table = xp.reshape(kernel(flat)[:n_rows], (*shape, d))
        else:
            table = _kernel(
                xp,
                positions,
                freqs,
                spec.offset,
                spec.layout,
                working,
                d,
                max_abs_position,
                traced=values is None,
            )
    if out_name != working:
        table = xp.astype(table, out_dtype)
    if out is not None:
        return xp.copy_into(out, table)
    return table


def _kernel(
    xp: Namespace,
    positions: Any,
    freqs: tuple[float, ...],
    offset: float,
    layout: str,
    working: str,
    d: int,
    max_abs_position: float | None,
    *,
    traced: bool,
) -> Any:
    """The exact per-element kernel: reduced turns, then sin/cos, then the layout."""
    turns = reduced_turns(
        xp, positions, freqs, offset=offset, working=working, max_abs_position=max_abs_position
    )
    if traced and working == "float32":
        # A compiler fuses everything: polynomial sin/cos beat the library's here.
        sin, cos = sin_cos_turns(xp, turns)
    else:
        angles = turns * (2.0 * math.pi)
        sin, cos = xp.sin(angles), xp.cos(angles)
    return assemble(xp, sin, cos, layout, pad=0.0 if d % 2 else None)


@functools.lru_cache(maxsize=128)
def _compiled_kernel(
    backend: str,
    freqs: tuple[float, ...],
    offset: float,
    layout: str,
    working: str,
    d: int,
    fits_int32: bool,
) -> Any:
    xp = get_namespace(backend)
    bound = 2.0**31 - 1 if fits_int32 else None
    return xp.compile(
        lambda p: _kernel(xp, p, freqs, offset, layout, working, d, bound, traced=True)
    )


def _check_out_backend(xp: Namespace, out: Any) -> None:
    if backend_of(out) != xp.name or not xp.mutable:
        raise TypeError(
            "out must be a NumPy array or a torch tensor on the backend computed on "
            f"({xp.name}). Received: {type(out).__name__}"
        )


def _check_out(xp: Namespace, out: Any, shape: tuple[int, ...], dtype_name: str) -> None:
    if xp.shape(out) != shape or xp.dtype_of(out) != dtype_name:
        raise ValueError(
            f"out must have shape {shape} and dtype {dtype_name}. "
            f"Received: shape {xp.shape(out)}, dtype {xp.dtype_of(out)}"
        )
