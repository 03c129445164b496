"""Funnel Transformer's positions and relative distances, on the host (its positions
fix the sizes of its tables)."""

from __future__ import annotations

import numbers

import numpy as np

from pe_core._index.place import host_table
from pe_core_backends import backend_of


def int_list(value: object, name: str) -> tuple[int, ...]:
    """A sequence of Python (or NumPy) integers as a tuple of ints; host data only."""
    message = f"{name} must be a non-empty sequence of integers (host data). Received: {value!r}"
    source = None if isinstance(value, np.ndarray) else backend_of(value)
    if source is not None:
        raise TypeError(
            f"{name} must be host integers (a list, range or NumPy array): Funnel's positions "
            f"fix the sizes of its tables. Received a {source} array"
        )
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(message)
    items = list(value.tolist() if isinstance(value, np.ndarray) else value)
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Integral):
            raise TypeError(message)
    if not items:
        raise ValueError(message)
    values = tuple(int(item) for item in items)
    if not -(2**63) <= min(values) <= max(values) < 2**63:
        raise ValueError(
            f"{name} must fit in int64 (from {-(2**63)} to {2**63 - 1}). Received values from "
            f"{min(values)} to {max(values)}"
        )
    return values


def check_block(block: int, separate_cls: bool) -> None:
    """With ``separate_cls`` the class token of block ``b`` sits at ``1 - 2**b``, which
    must fit in int64: ``b <= 63``."""
    if separate_cls and block > 63:
        raise ValueError(
            "block_index must be at most 63 with separate_cls=True (the class token's "
            f"position 1 - 2**block_index must fit in int64). Received: {block}"
        )


def pool(pos: tuple[int, ...], block: int, separate_cls: bool, truncate: bool) -> tuple[int, ...]:
    """Funnel's ``stride_pool_pos``, on a tuple of ints."""
    if not separate_cls:
        return pos[::2]
    kept = pos[1:-1] if truncate else pos[1:]
    return (1 - 2**block,) + kept[::2]


@host_table("funnel_block")
def block_positions(n: int, block: int, sep: bool, trunc: bool) -> np.ndarray:
    """``range(n)`` pooled once per block up to ``block``."""
    pos = tuple(range(n))
    for b in range(1, block + 1):
        if not sep and len(pos) == 1:
            break  # [0] pools to itself
        pos = pool(pos, b, sep, trunc)
    return np.array(pos, dtype=np.int64)


@host_table("funnel")
def relative_host(
    pos: tuple[int, ...], stride: int, pooled: tuple[int, ...], shift: int
) -> np.ndarray:
    max_dist = pooled[0] - pos[0] + shift * len(pooled) * stride
    min_dist = pooled[0] - pos[-1]
    return np.arange(max_dist, min_dist - 1, -stride, dtype=np.int64)
