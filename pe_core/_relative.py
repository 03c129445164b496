"""The relative engine: the matrices ``M_k`` and their action, 1-D and N-D.

The 1-D functions (:func:`relative_matrix_1d`, :func:`shift_1d`) take a resolved spec
with ``axes == 1``; the N-D ones (:func:`relative_matrix_nd`, :func:`shift_nd`) are
built on them, one block per coordinate axis. :mod:`pe_core.relative` is the public
face that chooses between them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core._kernel.angles import exact_cos_sin
from pe_core._kernel.features import assemble, disassemble
from pe_core._kernel.inputs import check_request_size, choose_backend, resolve_dtype, working_dtype
from pe_core._kernel.placement import Positions, prepare_positions
from pe_core._rope_call import host_cos_sin
from pe_core._schedule import Block, axis_blocks, check_d, check_nd_d, omegas
from pe_core._sinusoidal_nd import coordinates, group_halves
from pe_core.spec import Spec
from pe_core.validation import known_size
from pe_core_backends import HOST, backend_of, get_namespace


def _on_backend(encoding: Any) -> tuple[Any, Any]:
    """The namespace of ``encoding`` and the array (host data as NumPy)."""
    source = backend_of(encoding)
    return (HOST, np.asarray(encoding)) if source is None else (get_namespace(source), encoding)


def _shift_angles(xp: Any, shifts: Positions, d: int, spec: Spec, working: str) -> tuple[Any, Any]:
    """cos and sin of ``k * w`` for every pair, exact, where ``k`` lives.

    Host shifts (validated: NaN and inf raise) are reduced exactly on the host, any
    finite size included (:func:`~pe_core._kernel.host_tables.host_sin_cos`); shifts on an
    accelerator are not read: invalid ones give NaN.
    """
    freqs = omegas(d, spec, xp)
    if shifts.placement != "host":
        return exact_cos_sin(xp, shifts.array, freqs, working=working)
    assert shifts.host is not None and shifts.max_abs is not None
    cos, sin = host_cos_sin(shifts.host, freqs, 1.0, working, shifts.max_abs, False)
    wdtype, like = xp.dtype(working), shifts.array
    return xp.asarray(cos, dtype=wdtype, like=like), xp.asarray(sin, dtype=wdtype, like=like)


def _structure(d: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Identity, and the 0/1 matrix linking each sin slot with its cos slot."""
    sin_slot, cos_slot = disassemble(HOST, np.arange(d), layout, d // 2)
    partner = np.zeros((d, d))
    partner[sin_slot, cos_slot] = 1.0
    partner[cos_slot, sin_slot] = 1.0
    return np.eye(d), partner


def _check_relative(d: int, spec: Spec) -> tuple[tuple[Block, ...], int]:
    blocks, extra = axis_blocks(check_nd_d(d, spec), spec)
    if extra < 0:
        raise ValueError(
            f"Spec(odd_d='truncate') with d={d} and axes={spec.axes} drops the last "
            f"{-extra} feature(s) of the last block, so no matrix maps PE(x) to PE(x + t). "
            f"Use a d that is a multiple of {2 * sum(spec.axis_shares or (1,) * spec.axes)}."
        )
    return blocks, extra


def relative_matrix_nd(
    k: Any, d: int, spec: Spec, backend: str | None = None, dtype: Any = None
) -> Any:
    """:func:`~pe_core.relative_matrix` for a spec with ``axes > 1`` (it calls this).

    ``k`` has shape ``(..., axes)``; the result ``(..., d, d)`` is block-diagonal, the
    1-D rotation of shift ``k[..., a]`` in the block of axis ``a``, the identity on the
    zero-padding columns (with ``axis_layout="split"``, the same matrix with its rows
    and columns in the spec's feature order).
    """
    layout, extra = _check_relative(d, spec)
    k, _ = coordinates(k, spec, what="k")
    blocks = [
        relative_matrix_1d(k[..., block.axis], 2 * block.pairs, block.spec, backend, dtype)
        for block in layout
    ]
    xp = get_namespace(backend_of(blocks[0]) or "numpy")
    lead = xp.shape(blocks[0])[:-2]
    rows = []
    for b, block in enumerate(blocks):
        width = 2 * layout[b].pairs
        row = [
            block if c == b else _zeros(xp, blocks[0], (*lead, width, 2 * other.pairs))
            for c, other in enumerate(layout)
        ]
        if extra:
            row.append(_zeros(xp, blocks[0], (*lead, width, extra)))
        rows.append(xp.concat(row, axis=-1))
    matrix = xp.concat(rows, axis=-2)
    if extra:
        corner = np.zeros((extra, d))
        corner[:, d - extra :] = np.eye(extra)
        bottom = xp.asarray(corner, dtype=matrix.dtype, like=matrix)
        matrix = xp.concat([matrix, xp.broadcast_to(bottom, (*lead, extra, d))], axis=-2)
    if spec.axis_layout == "split":  # rows and columns into the spec's feature order
        matrix = _regroup(xp, matrix, layout, extra, axis=-1)
        matrix = _regroup(xp, matrix, layout, extra, axis=-2)
    return matrix


def _zeros(xp: Any, like: Any, shape: tuple[int, ...]) -> Any:
    return xp.zeros(shape, like.dtype, like=like)


def _regroup(xp: Any, array: Any, layout: tuple[Block, ...], extra: int, axis: int) -> Any:
    """Block-ordered features along ``axis`` (-1 or -2) in ``axis_layout="split"``
    order: every block's first half, then every block's second half, then the pad."""
    moved = array if axis == -1 else xp.matrix_transpose(array)
    parts, start = [], 0
    for block in layout:
        parts.append(moved[..., start : start + 2 * block.pairs])
        start += 2 * block.pairs
    grouped = group_halves(parts, [block.pairs for block in layout])
    if extra:
        grouped.append(moved[..., start:])
    out = xp.concat(grouped, axis=-1)
    return out if axis == -1 else xp.matrix_transpose(out)


def _ungroup(xp: Any, array: Any, layout: tuple[Block, ...]) -> tuple[list[Any], int]:
    """Inverse of :func:`_regroup` on the last axis: the blocks, and where the pad starts."""
    half = sum(block.pairs for block in layout)
    blocks, start = [], 0
    for block in layout:
        n = block.pairs
        first = array[..., start : start + n]
        second = array[..., half + start : half + start + n]
        blocks.append(xp.concat([first, second], axis=-1))
        start += n
    return blocks, 2 * half


def shift_nd(encoding: Any, k: Any, spec: Spec) -> Any:
    """:func:`~pe_core.shift` for a spec with ``axes > 1`` (it calls this): each
    axis's block is shifted by ``k[..., a]``; zero-padding columns stay as they are."""
    xp, encoding = _on_backend(encoding)
    shape = xp.shape(encoding)
    if not shape:
        raise ValueError("encoding must have at least one axis (the features).")
    layout, extra = _check_relative(shape[-1], spec)
    k, _ = coordinates(k, spec, what="k")
    if spec.axis_layout == "split":
        pieces, end = _ungroup(xp, encoding, layout)
    else:
        pieces, end = [], 0
        for block in layout:
            pieces.append(encoding[..., end : end + 2 * block.pairs])
            end += 2 * block.pairs
    parts = [
        shift_1d(piece, k[..., block.axis], block.spec)
        for piece, block in zip(pieces, layout, strict=True)
    ]
    if spec.axis_layout == "split":
        parts = group_halves(parts, [block.pairs for block in layout])
    if extra:
        parts.append(encoding[..., end:])
    return xp.concat(parts, axis=-1)


def _check_cut(d: int, spec: Spec) -> None:
    if d % 2 and spec.odd_d == "truncate":
        raise ValueError(
            f"Spec(odd_d='truncate') with d={d} drops the cosine of the last pair (or its "
            "sine, cos first), so no matrix maps PE(p) to PE(p + k). Use an even d."
        )


def relative_matrix_1d(
    k: Any, d: Any, spec: Spec, backend: str | None = None, dtype: Any = None
) -> Any:
    """:func:`~pe_core.relative_matrix` for a resolved 1-D ``spec``."""
    d = check_d(d, spec)
    _check_cut(d, spec)
    xp, source = choose_backend(k, backend)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    working = working_dtype(out_name)
    shifts = prepare_positions(k, xp, source, what="k")
    n_shifts = known_size(shifts)  # None while sizes are unknown (traced)
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
    # the first slot of a pair holds the cosine with "cos_sin"
    pair = (-sin_k, sin_k) if spec.order == "cos_sin" else (sin_k, -sin_k)
    off_diagonal = assemble(xp, *pair, spec.layout, pad=0.0 if odd else None)
    eye, partner = _structure(d, spec.layout)
    wdtype = xp.dtype(working)
    eye = xp.asarray(eye.astype(working), dtype=wdtype, like=cos_k)
    partner = xp.asarray(partner.astype(working), dtype=wdtype, like=cos_k)
    matrix = xp.expand_dims(diagonal, -1) * eye + xp.expand_dims(off_diagonal, -1) * partner
    if out_name != working:
        matrix = xp.astype(matrix, out_dtype)
    return matrix


def shift_1d(encoding: Any, k: Any, spec: Spec) -> Any:
    """:func:`~pe_core.shift` for a resolved 1-D ``spec``."""
    xp, encoding = _on_backend(encoding)
    dtype_name = xp.dtype_of(encoding)
    if xp.kind(dtype_name) != "float":
        raise TypeError(f"encoding must be a floating array. Received dtype: {dtype_name}")
    shape = xp.shape(encoding)
    if not shape:
        raise ValueError("encoding must have at least one axis (the features).")
    d = check_d(shape[-1], spec)
    _check_cut(d, spec)
    shifts = prepare_positions(k, xp, backend_of(k), what="k")
    try:
        np.broadcast_shapes(shifts.shape, shape[:-1])
    except ValueError:
        raise ValueError(
            f"k of shape {shifts.shape} does not broadcast against the leading axes "
            f"{shape[:-1]} of encoding {shape}."
        ) from None
    working = working_dtype(dtype_name)
    cos_k, sin_k = _shift_angles(xp, shifts, d, spec, working)
    values = xp.astype(encoding, xp.dtype(working)) if dtype_name != working else encoding
    s, c = disassemble(xp, values, spec.layout, d // 2)
    if spec.order == "cos_sin":
        s, c = c, s
    new_s, new_c = s * cos_k + c * sin_k, c * cos_k - s * sin_k
    out = assemble(
        xp, *((new_c, new_s) if spec.order == "cos_sin" else (new_s, new_c)), spec.layout
    )
    if d % 2:
        lead = xp.shape(out)[:-1]
        out = xp.concat([out, xp.broadcast_to(values[..., d - 1 :], (*lead, 1))], axis=-1)
    if dtype_name != working:
        out = xp.astype(out, encoding.dtype)
    return out
