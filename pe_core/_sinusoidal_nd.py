"""The N-D sinusoidal engine: one exact 1-D encoding per coordinate axis.

Built on :func:`~pe_core._sinusoidal.encode_1d` (the 1-D engine never calls back):
the coordinates' last axis is split into one 1-D call per axis, in the spec's
``axis_order`` and with the widths of its ``axis_shares``, and the blocks are joined
(side by side, or their sines then their cosines for ``axis_layout="split"``) with the
zero columns or the truncation of ``odd_d`` (see :mod:`pe_core.nd` for the
conventions).
"""

from __future__ import annotations

from typing import Any

from pe_core._kernel.inputs import as_positions
from pe_core._schedule import axis_blocks, check_nd_d
from pe_core._sinusoidal import anchor_backend, check_out, encode_1d
from pe_core.spec import Spec
from pe_core_backends import HOST, backend_of, get_namespace


def coordinates(coords: Any, spec: Spec, what: str = "coordinates") -> tuple[Any, str | None]:
    """``coords`` as an array of its own backend (NumPy for Python values), checked to
    hold ``spec.axes`` coordinates on its last axis."""
    source = backend_of(coords)
    if source is None:
        coords = as_positions(coords, HOST, None, what=what)
    xp = get_namespace(source or "numpy")
    shape = xp.shape(coords)
    if not shape or shape[-1] != spec.axes:
        raise ValueError(
            f"{what} for a Spec with axes={spec.axes} must have a last axis of size "
            f"{spec.axes} (one coordinate per axis). Received shape: {tuple(shape)}"
        )
    return coords, source


def encode_nd(
    coords: Any,
    d: int,
    spec: Spec,
    backend: str | None = None,
    dtype: Any = None,
    out: Any = None,
    like: Any = None,
    check_values: bool = False,
) -> Any:
    """:func:`~pe_core.encode` for a spec with ``axes > 1`` (it calls this).

    One exact 1-D encoding per coordinate axis, concatenated in the spec's
    ``axis_order``; then the zero columns or the truncation of ``odd_d``.
    """
    d = check_nd_d(d, spec)
    layout, extra = axis_blocks(d, spec)
    if backend is None and backend_of(coords) is None:  # Python values follow like / out
        backend = anchor_backend(like, out)
    coords, _ = coordinates(coords, spec)
    if out is not None:  # backend, dtype and like follow out where the caller gave none
        out_backend = backend_of(out)
        if out_backend is None:
            raise TypeError(
                f"out must be a NumPy array or a torch tensor. Received: {type(out).__name__}"
            )
        backend = out_backend if backend is None else backend
        dtype = out.dtype if dtype is None else dtype
        like = out if like is None else like
    blocks = [
        encode_1d(
            coords[..., b.axis], 2 * b.pairs, b.spec, backend, dtype, None, like, check_values
        )
        for b in layout
    ]
    xp = get_namespace(backend_of(blocks[0]) or "numpy")
    if spec.axis_layout == "split":
        blocks = group_halves(blocks, [block.pairs for block in layout])
    # side by side, then the zero columns of "zero_pad" or the first d features of "truncate"
    if extra > 0:
        blocks = blocks + [xp.zeros_like(blocks[0][..., :1])] * extra
    table = xp.concat(blocks, axis=-1)
    if extra < 0:
        table = table[..., :d]
    if out is None:
        return table
    check_out(xp, out, xp.shape(table), xp.dtype_of(table))
    if not xp.mutable:
        raise TypeError(f"out must be a NumPy array or a torch tensor. Received: {type(out)}")
    return xp.copy_into(out, table)


def group_halves(blocks: list[Any], pairs: list[int]) -> list[Any]:
    """``axis_layout="split"``: the first half of every block (``pairs[b]`` features
    each: the sines, or the cosines with ``order="cos_sin"``), then every second half."""
    firsts = [block[..., :n] for block, n in zip(blocks, pairs, strict=True)]
    seconds = [block[..., n : 2 * n] for block, n in zip(blocks, pairs, strict=True)]
    return firsts + seconds
