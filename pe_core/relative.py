"""The linear relation ``PE(pos + k) = M_k @ PE(pos)``: the matrix and its action.

For each sin/cos pair with frequency ``w``, the angle-addition formulas give

    sin((p + k) w) =  cos(k w) sin(p w) + sin(k w) cos(p w)
    cos((p + k) w) = -sin(k w) sin(p w) + cos(k w) cos(p w)

a 2x2 rotation by ``k w`` that does not involve ``p``. ``M_k`` places these rotations
block-diagonally in the spec's layout. Its angles use the same exact kernel as
:func:`~pe_core.encode`, so large ``k`` is as exact as large positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core.angles import exact_cos_sin
from pe_core.frequency import check_d, omegas
from pe_core.host_tables import host_sin_cos
from pe_core.layout import assemble, disassemble
from pe_core.placement import Positions, prepare_positions
from pe_core.positions import check_request_size, choose_backend, resolve_dtype
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import Array, ArrayLike, BackendLike, DTypeLike, PresetLike
from pe_core_backends import backend_of, get_namespace


def _shift_angles(xp: Any, shifts: Positions, d: int, spec: Spec, working: str) -> tuple[Any, Any]:
    """cos and sin of ``k * w`` for every pair, exact, where ``k`` lives.

    Host shifts (validated: NaN and inf raise) are reduced exactly on the host, any
    finite size included (:func:`~pe_core.host_tables.host_sin_cos`); shifts on an
    accelerator are not read: invalid ones give NaN.
    """
    freqs = omegas(d, spec, xp)
    if shifts.placement != "host":
        return exact_cos_sin(xp, shifts.array, freqs, working=working)
    assert shifts.host is not None and shifts.max_abs is not None
    table = host_sin_cos(
        shifts.host,
        freqs,
        offset=0,
        layout="split",
        working=working,
        max_abs=shifts.max_abs,
    )
    table = np.asarray(table, dtype=working).reshape(*shifts.shape, 2, len(freqs))
    wdtype = xp.dtype(working)
    cos = xp.asarray(np.ascontiguousarray(table[..., 1, :]), dtype=wdtype, like=shifts.array)
    sin = xp.asarray(np.ascontiguousarray(table[..., 0, :]), dtype=wdtype, like=shifts.array)
    return cos, sin


def relative_matrix(
    k: ArrayLike,
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> Array:
    """The ``(d, d)`` matrix ``M_k`` with ``PE(pos + k) = M_k @ PE(pos)``.

    Parameters
    ----------
    k : int, float or array
        The shift. An array of shape ``K`` gives a stack of shape ``K + (d, d)``. For a
        spec with ``axes > 1``, shape ``K + (axes,)``: one shift per coordinate, and a
        block-diagonal matrix (see :mod:`pe_core.nd`).
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name (the offset plays no role: shifts are relative).
    backend, dtype
        As for :func:`~pe_core.encode`.

    Returns
    -------
    array
        Block-diagonal rotations, orthogonal, with ``M_a @ M_b = M_(a+b)`` and
        ``M_(-k) = M_k.T``. For odd ``d`` with zero padding the padded feature maps
        to itself.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import encode
    >>> M = relative_matrix(5, 8)
    >>> bool(np.allclose(M @ encode(3, 8), encode(8, 8), atol=1e-6))
    True
    >>> bool(np.allclose(M @ M.T, np.eye(8), atol=1e-6))
    True
    """
    spec = resolve_spec(spec)
    if spec.axes > 1:  # N-D: k is (..., axes); block-diagonal per axis (pe_core.nd)
        from pe_core.nd import relative_matrix_nd

        return relative_matrix_nd(k, d, spec, backend, dtype)
    d = check_d(d, spec)
    xp, source = choose_backend(k, backend)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    working = "float64" if out_name == "float64" else "float32"
    shifts = prepare_positions(k, xp, source, what="k")
    n_shifts = math.prod(shifts.shape) if all(isinstance(n, int) for n in shifts.shape) else None
    check_request_size(
        None if n_shifts is None else n_shifts * d * d,
        out_name,
        what="relative_matrix",
        n_pairs=d // 2,
        extra_bytes=2 * 8 * d * d,  # the two (d, d) structure matrices
        host_output=shifts.placement == "host",
    )
    cos_k, sin_k = _shift_angles(xp, shifts, d, spec, working)
    odd = bool(d % 2)
    diagonal = assemble(xp, cos_k, cos_k, spec.layout, pad=1.0 if odd else None)
    off_diagonal = assemble(xp, sin_k, -sin_k, spec.layout, pad=0.0 if odd else None)
    eye, partner = _structure(d, spec.layout)
    wdtype = xp.dtype(working)
    eye = xp.asarray(eye.astype(working), dtype=wdtype, like=cos_k)
    partner = xp.asarray(partner.astype(working), dtype=wdtype, like=cos_k)
    matrix = xp.expand_dims(diagonal, -1) * eye + xp.expand_dims(off_diagonal, -1) * partner
    if out_name != working:
        matrix = xp.astype(matrix, out_dtype)
    return matrix


def _structure(d: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Identity, and the 0/1 matrix linking each sin slot with its cos slot."""
    n_pairs = d // 2
    sin_slot, cos_slot = disassemble(get_namespace("numpy"), np.arange(d), layout, n_pairs)
    partner = np.zeros((d, d))
    partner[sin_slot, cos_slot] = 1.0
    partner[cos_slot, sin_slot] = 1.0
    return np.eye(d), partner


def shift(encoding: Array, k: ArrayLike, spec: Spec | PresetLike | None = None) -> Array:
    """Apply ``M_k`` to encodings without recomputing them from positions.

    Parameters
    ----------
    encoding : array
        Encodings of shape ``(..., d)`` from any backend, in the layout of ``spec``.
    k : int, float or array
        The shift; an array broadcasts against the leading axes ``(...)``. For a spec
        with ``axes > 1``, shape ``(..., axes)``: one shift per coordinate.
    spec : Spec or str, optional
        The spec the encodings were made with.

    Returns
    -------
    array
        ``PE(pos + k)`` where ``encoding`` is ``PE(pos)``, same backend and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import encode
    >>> pe = encode(np.arange(4), 6)
    >>> bool(np.allclose(shift(pe, 100), encode(np.arange(4) + 100, 6), atol=1e-6))
    True
    """
    spec = resolve_spec(spec)
    if spec.axes > 1:  # N-D: k is (..., axes); each axis's block shifts (pe_core.nd)
        from pe_core.nd import shift_nd

        return shift_nd(encoding, k, spec)
    source = backend_of(encoding)
    if source is None:
        encoding = np.asarray(encoding)
        source = "numpy"
    xp = get_namespace(source)
    dtype_name = xp.dtype_of(encoding)
    if xp.kind(dtype_name) != "float":
        raise TypeError(f"encoding must be a floating array. Received dtype: {dtype_name}")
    shape = xp.shape(encoding)
    if not shape:
        raise ValueError("encoding must have at least one axis (the features).")
    d = check_d(shape[-1], spec)
    shifts = prepare_positions(k, xp, backend_of(k), what="k")
    k_shape = shifts.shape
    try:
        np.broadcast_shapes(k_shape, shape[:-1])
    except ValueError:
        raise ValueError(
            f"k of shape {k_shape} does not broadcast against the leading axes "
            f"{shape[:-1]} of encoding {shape}."
        ) from None
    working = "float64" if dtype_name == "float64" else "float32"
    cos_k, sin_k = _shift_angles(xp, shifts, d, spec, working)
    wdtype = xp.dtype(working)
    values = xp.astype(encoding, wdtype) if dtype_name != working else encoding
    s, c = disassemble(xp, values, spec.layout, d // 2)
    new_s = s * cos_k + c * sin_k
    new_c = c * cos_k - s * sin_k
    out = assemble(xp, new_s, new_c, spec.layout)
    if d % 2:
        lead = xp.shape(out)[:-1]
        out = xp.concat([out, xp.broadcast_to(values[..., d - 1 :], (*lead, 1))], axis=-1)
    if dtype_name != working:
        out = xp.astype(out, encoding.dtype)
    return out
