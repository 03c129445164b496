"""NaViT's fractional buckets (Idefics2, Idefics3, SmolVLM): the host tables of
bucket indices that reproduce transformers' float32 rounding, and the patch ids
gathered from them on any backend.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core_backends import Namespace


def _torch_arange_float32(start: float, end: float, step: float, vector_width: int) -> np.ndarray:
    """``torch.arange(start, end, step)`` in float32 as PyTorch's CPU kernel rounds it.

    The length is ``ceil((end - start) / step)``; values are ``start + step * i`` in
    float64 rounded to float32, except in the vectorised part of the loop (blocks of
    ``2 * vector_width``), where each vector of ``vector_width`` values starts from its
    first value rounded to float32 and adds ``j * step`` in float64 before rounding
    again (``Vectorized<float>::arange(base, step)``). ``vector_width=0``: no vectors.
    """
    size = max(math.ceil((end - start) / step), 0)
    index = np.arange(size, dtype=np.float64)
    serial = (start + step * index).astype(np.float32)
    if vector_width == 0:
        return serial
    vectorised = (size // (2 * vector_width)) * (2 * vector_width)
    i = np.arange(vectorised)
    first = i - i % vector_width
    base = (start + step * first.astype(np.float64)).astype(np.float32).astype(np.float64)
    serial[:vectorised] = (base + (i - first) * step).astype(np.float32)
    return serial


@functools.lru_cache(maxsize=64)
def navit_table(
    num_patches_per_side: int, max_patches: int, rule: str, vector_width: int
) -> tuple[tuple[int, ...], ...]:
    n = num_patches_per_side
    rows: list[tuple[int, ...]] = [(0,) * max_patches]  # an image of no patches: all padding
    index = np.arange(max_patches)
    if rule == "exact":
        for count in range(1, max_patches + 1):
            rows.append(tuple(int(v) for v in np.minimum(index * n // count, n - 1)))
        return tuple(rows)
    boundaries = _torch_arange_float32(1 / n, 1.0, 1 / n, vector_width)
    ceiling = np.float32(1.0 - 1e-6)
    for count in range(1, max_patches + 1):
        if rule == "transformers":
            step = np.float32(1.0) / np.float32(count)
            coords = np.minimum(index.astype(np.float32) * step, ceiling)
        else:  # transformers4: torch.arange(0, 1 - 1e-6, 1 / count) per image, where
            # count is a 0-d integer tensor: the step is 1 / count rounded to float32
            step64 = float(np.float32(1.0) / np.float32(count))
            inside = _torch_arange_float32(0.0, 1 - 1e-6, step64, vector_width)
            coords = np.full(max_patches, ceiling, dtype=np.float32)
            coords[: min(len(inside), max_patches)] = inside[:max_patches]
        # torch.bucketize(coords, boundaries, right=True): boundaries <= coordinate
        buckets = np.searchsorted(boundaries, coords, side="right")
        rows.append(tuple(int(v) for v in buckets))
    return tuple(rows)


def _navit_rows(n: int, size: int, rule: str, width: int) -> tuple[tuple[int, ...], ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return navit_table(n, size, rule, width)


def patch_ids(
    xp: Namespace, mask: Any, kind: str, n: int, rule: str, width: int, wide: str, dtype: Any
) -> Any:
    """``bucket(i, h) * n + bucket(j, w)`` per patch of a ``(batch, max_h, max_w)``
    mask, 0 on padding, as ``(batch, max_h * max_w)``."""
    max_h, max_w = int(mask.shape[1]), int(mask.shape[2])
    keep = mask if kind == "bool" else mask != 0
    heights = xp.sum(keep[:, :, 0], 1, dtype)  # (batch,)
    widths = xp.sum(keep[:, 0, :], 1, dtype)
    rows = xp.take(_table(xp, n, max_h, rule, width, wide, mask), heights, axis=0)
    cols = xp.take(_table(xp, n, max_w, rule, width, wide, mask), widths, axis=0)
    ids = xp.expand_dims(rows * n, 2) + xp.expand_dims(cols, 1)  # (batch, max_h, max_w)
    return xp.where(xp.merge_last_two(keep), xp.merge_last_two(ids), 0)


def _table(xp: Namespace, n: int, size: int, rule: str, width: int, wide: str, like: Any) -> Any:
    """The ``(size + 1, size)`` bucket table as an array of ``xp`` beside ``like``."""
    key = ("navit_buckets", n, size, rule, width)

    def build() -> np.ndarray:
        return np.array(navit_table(n, size, rule, width), dtype=wide)

    if xp.is_tracing() or xp.is_traced(like):
        # a constant of the traced program, from plain Python data
        rows = xp.host_constant(_navit_rows, n, size, rule, width)
        return xp.asarray(rows, dtype=xp.dtype(wide), like=like)
    return device_tables.cached(xp, key, like, wide, build, private=True)
