"""``encode``: the sinusoidal encoding of any positions on any backend."""

from __future__ import annotations

from typing import Any

from pe_core.angles import reduced_angles
from pe_core.frequency import check_d, omegas
from pe_core.layout import assemble
from pe_core.positions import as_positions, check_finite, choose_backend, resolve_dtype
from pe_core.presets import resolve_spec
from pe_core.spec import Spec


def encode(
    pos: Any,
    d: int,
    *,
    spec: Spec | str | None = None,
    backend: str | None = None,
    dtype: Any = None,
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
        Output dtype, float32 by default; float64, float16 and bfloat16 where the
        backend has them. The angle is always computed exactly (see
        :mod:`pe_core.angles`); a low-precision dtype only rounds the result.

    Returns
    -------
    array
        Shape ``shape(pos) + (d,)``, values in ``[-1, 1]``.

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
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    xp, source = choose_backend(pos, backend)
    positions = as_positions(pos, xp, source)
    max_abs = check_finite(xp, positions)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    working = "float64" if out_name == "float64" else "float32"
    angles = reduced_angles(
        xp,
        positions,
        omegas(d, spec, xp),
        offset=spec.offset,
        working=working,
        max_abs_position=None if max_abs is None else max_abs + 1.0,
    )
    table = assemble(xp, xp.sin(angles), xp.cos(angles), spec.layout, pad=0.0 if d % 2 else None)
    if out_name != working:
        table = xp.astype(table, out_dtype)
    return table
