"""DTensor inputs (``torch.distributed.tensor``): computed on the local shard, no communication.

A DTensor is a global tensor laid out over a device mesh: each mesh dimension either
shards one tensor dimension (``Shard(dim)``, ``torch.chunk`` pieces, the last ones
shorter or empty when the length does not divide) or replicates it (``Replicate()``).
A positional encoding needs nothing from another rank: row ``p`` depends on ``p``
alone. So each call here takes this rank's local tensor (``to_local()``), works out the
global index range it covers from the mesh coordinate and the placements, restricts
global positions to that range, computes on the local pieces, and wraps the result
with ``DTensor.from_local(..., run_check=False)`` with the input's placements, global
shape and a stride in the local tensor's axis order (contiguous for contiguous inputs). No collective is called.

Nothing here imports torch: a DTensor can only exist once ``torch.distributed.tensor``
has been imported, so the module is looked up in :data:`sys.modules` at call time.

>>> is_dtensor([0, 1]), any_dtensor(None, (1, 2))
(False, False)
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "any_dtensor",
    "encode_on_shards",
    "is_dtensor",
    "map_shards",
    "rope_on_shards",
    "shard_ranges",
]

_MODULE = "torch.distributed.tensor"

#: (start, length) of a local shard along one global dimension.
Range = tuple[int, int]


def is_dtensor(obj: Any) -> bool:
    """Whether ``obj`` is a DTensor (without importing torch)."""
    modules = sys.modules
    return _MODULE in modules and isinstance(obj, modules[_MODULE].DTensor)


def any_dtensor(*objs: Any) -> bool:
    """Whether any of ``objs`` (or an item of a tuple/list among them) is a DTensor."""
    modules = sys.modules
    if _MODULE not in modules:
        return False
    cls = modules[_MODULE].DTensor
    return any(
        isinstance(obj, cls)
        or (isinstance(obj, (tuple, list)) and any(isinstance(item, cls) for item in obj))
        for obj in objs
    )


def shard_ranges(t: Any, what: str = "x") -> tuple[Range, ...]:
    """``(start, length)`` per dimension of the global index range this rank's local
    shard of DTensor ``t`` covers.

    Each mesh dimension, in order, splits the range it shards the way ``Shard`` does
    (``torch.chunk``: pieces of ``ceil(n / mesh_size)``, the last ones shorter or empty).

    Raises
    ------
    ValueError
        For a placement other than ``Shard(dim)`` or ``Replicate()`` (a ``Partial`` sum,
        a strided shard), or a rank outside the mesh.
    """
    module = sys.modules[_MODULE]
    mesh = t.device_mesh
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        raise ValueError(f"{what} is a DTensor on a device mesh this rank is not part of.")
    ndim = len(t.shape)
    ranges = [(0, int(size)) for size in t.shape]
    for mesh_dim, placement in enumerate(t.placements):
        if type(placement) is module.Replicate:
            continue
        if type(placement) is not module.Shard:
            raise ValueError(
                f"{what} is a DTensor placed with {placement!r}; pe_core computes on DTensors "
                "whose placements are Shard(dim) or Replicate() (redistribute a Partial sum "
                f"first: {what}.redistribute(placements=[Replicate()])). "
                f"Received placements: {tuple(t.placements)!r}"
            )
        dim = placement.dim % ndim
        start, length = ranges[dim]
        pieces, index = mesh.size(mesh_dim), coordinate[mesh_dim]
        chunk = -(-length // pieces)
        low = min(index * chunk, length)
        high = min(low + chunk, length)
        ranges[dim] = (start + low, high - low)
    local = tuple(int(size) for size in t.to_local().shape)
    if local != tuple(length for _, length in ranges):  # a layout this module does not know
        raise ValueError(
            f"{what} is a DTensor whose local shard {local} does not match its placements "
            f"{tuple(t.placements)!r} and global shape {tuple(t.shape)}: pe_core cannot tell "
            "which global positions it holds."
        )
    return tuple(ranges)


def _global_stride(local: Any, shape: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
    """``local`` (made contiguous unless it is a permutation of a contiguous tensor, such
    as a transposed view) and the stride of ``shape`` laid out in the same axis order."""
    ndim = len(shape)
    order = sorted(range(ndim), key=lambda dim: -int(local.stride(dim)))  # outermost first
    if not local.permute(order).is_contiguous():
        local, order = local.contiguous(), list(range(ndim))
    stride, step = [0] * ndim, 1
    for dim in reversed(order):
        stride[dim] = step
        step *= max(int(shape[dim]), 1)
    return local, tuple(stride)


def _wrap(local: Any, ref: Any, shape: Sequence[int], what: str) -> Any:
    """``local`` as a DTensor on ``ref``'s mesh with ``ref``'s placements and ``shape``."""
    torch = sys.modules["torch"]
    if not isinstance(local, torch.Tensor):
        raise TypeError(
            f"{what} is a DTensor, so the call computes on PyTorch: leave backend= unset "
            f"(or 'torch'). The local result was a {type(local).__name__}."
        )
    module = sys.modules[_MODULE]
    local, stride = _global_stride(local, shape)
    return module.DTensor.from_local(
        local,
        ref.device_mesh,
        ref.placements,
        run_check=False,
        shape=torch.Size(shape),
        stride=stride,
    )


def map_shards(fn: Callable[[Any, tuple[Range, ...]], Any], x: Any, what: str = "x") -> Any:
    """``fn(x.to_local(), ranges)`` as a DTensor placed like ``x``, of ``x``'s global shape.

    ``fn`` must return a tensor of the local shard's shape (layers adding an encoding to
    ``x`` use it: the ranges give the shard's global positions and features).
    """
    ranges = shard_ranges(x, what)
    local = fn(x.to_local(), ranges)
    return _wrap(local, x, tuple(x.shape), what)


def encode_on_shards(
    fn: Callable[[Any, Any], Any],
    pos: Any,
    *,
    out: Any = None,
    like: Any = None,
    what: str = "pos",
) -> Any:
    """``fn(local_pos, local_like)`` of DTensor positions, computed on the local shard: a
    DTensor placed like ``pos`` (its sharded dimensions keep their placement; the feature
    axis is whole). A DTensor ``like`` is passed as its local tensor; ``what`` names the
    positions in errors (``"timesteps"``).

    Raises
    ------
    TypeError
        ``pos`` is not a DTensor (another argument is), or ``out`` is given.
    ValueError
        As :func:`shard_ranges`; ``pos`` sharded along the coordinate axis of an N-D spec.
    """
    if out is not None:  # a DTensor, or a plain buffer the result could not be
        raise TypeError(
            f"out= cannot be used with DTensor {what}: leave it unset, and the result is a "
            f"DTensor placed like {what}. Received out of type {type(out).__name__}."
        )
    if not is_dtensor(pos):
        raise TypeError(
            f"pe_core computes DTensor results from DTensor positions: pass {what} as "
            "a DTensor on the mesh (or plain positions and a plain like=)."
        )
    ranges = shard_ranges(pos, what)
    # the dimensions whose local range is not the whole global extent
    sharded = [dim for dim, r in enumerate(ranges) if r != (0, int(pos.shape[dim]))]
    try:
        local = fn(pos.to_local(), like.to_local() if is_dtensor(like) else like)
    except ValueError as exc:
        if sharded and sharded[-1] == len(ranges) - 1:  # the error saw the local shape
            raise ValueError(
                f"{exc} ({what} is a DTensor sharded along its last axis, and this is its "
                f"local shard; its global shape is {tuple(pos.shape)}: an N-D spec's "
                "coordinate axis must not be sharded)"
            ) from exc
        raise
    shape = [int(size) for size in getattr(local, "shape", ())]
    for dim in sharded:
        if dim >= len(shape) - 1:
            raise ValueError(
                f"{what} is sharded along dimension {dim}, the coordinate axis of an N-D "
                "spec; shard the positions along their leading axes only. Received "
                f"placements: {tuple(pos.placements)!r}"
            )
        shape[dim] = int(pos.shape[dim])
    return _wrap(local, pos, shape, what)


def rope_on_shards(fn: Callable[[Any, Any], Any], x: Any, pos: Any) -> Any:
    """``fn(local_x, local_pos)`` for DTensor ``x`` (or a tuple of them) and global
    positions ``pos``: a DTensor placed like ``x``.

    ``pos`` holds global positions broadcasting against ``x.shape[:-1]``: a Python value,
    a plain array, or a DTensor on ``x``'s mesh (replicated, or sharded as ``x`` along
    the axes it shares with it). Its axes that ``x`` shards are cut to this rank's range.

    Raises
    ------
    TypeError
        ``pos`` is a DTensor and ``x`` is not.
    ValueError
        ``x`` sharded along ``head_dim``; positions that do not broadcast against
        ``x.shape[:-1]``; DTensor positions sharded otherwise than ``x``.
    """
    if isinstance(x, (tuple, list)):
        return tuple(rope_on_shards(fn, item, pos) for item in x)
    if not is_dtensor(x):
        raise TypeError(
            "pos is a DTensor but x is not: pass x as a DTensor on the same mesh, or plain "
            "positions (e.g. pos.full_tensor()) with a plain x."
        )
    ranges = shard_ranges(x, "x")
    if ranges and ranges[-1] != (0, int(x.shape[-1])):
        raise ValueError(
            "x is sharded along its last axis (head_dim), whose pairs rotate together; "
            f"shard batch, heads or sequence instead. Received placements: {tuple(x.placements)!r}"
        )
    local_pos = localise(pos, ranges[:-1], tuple(int(s) for s in x.shape[:-1]), x.device_mesh)
    return _wrap(fn(x.to_local(), local_pos), x, tuple(x.shape), "x")


def localise(pos: Any, ranges: Sequence[Range], shape: Sequence[int], mesh: Any) -> Any:
    """Global positions ``pos`` (broadcasting against ``shape``) restricted to ``ranges``,
    the local shard's ranges of ``shape``; ``mesh``: the DTensor's mesh.

    >>> localise(range(8), [(4, 4)], (8,), None)
    range(4, 8)
    >>> localise(np.arange(6).reshape(2, 3), [(0, 2), (2, 1)], (2, 3), None).tolist()
    [[2], [5]]
    >>> localise(7, [(4, 4)], (8,), None)
    7
    """
    if isinstance(pos, numbers.Number):
        return pos
    if is_dtensor(pos):
        if pos.device_mesh != mesh:
            raise ValueError("pos is a DTensor on another device mesh than x.")
        pos_ranges = shard_ranges(pos, "pos")
        pos_shape = tuple(int(s) for s in pos.shape)
        local = pos.to_local()
    else:
        local = np.asarray(pos) if isinstance(pos, (list, tuple)) else pos
        sizes = (len(pos),) if isinstance(pos, range) else getattr(local, "shape", ())
        pos_shape = tuple(int(s) for s in sizes)
        pos_ranges = tuple((0, size) for size in pos_shape)
    lead = len(shape) - len(pos_shape)
    if lead < 0 or any(p not in (1, n) for p, n in zip(pos_shape, shape[lead:], strict=True)):
        raise ValueError(
            f"positions of shape {pos_shape} do not broadcast against x.shape[:-1] = "
            f"{tuple(shape)} (the global shape; pass global positions)."
        )
    index: list[slice] = []
    for j, size in enumerate(pos_shape):
        want, have = ranges[lead + j], pos_ranges[j]
        if size == 1 or have == want:
            index.append(slice(None))
        elif have == (0, size):  # whole along this axis: cut this rank's range
            index.append(slice(want[0], want[0] + want[1]))
        else:
            raise ValueError(
                f"pos is a DTensor sharded along axis {j} otherwise than x (local range "
                f"{have} of positions, {want} of x); lining them up would need communication. "
                "Pass positions replicated, or sharded exactly as x."
            )
    if all(item == slice(None) for item in index):
        return local
    return local[index[0]] if isinstance(local, range) else local[tuple(index)]
