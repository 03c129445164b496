"""Host tables of the window families (Swin/BEiT, SwinV2, clipped, LeViT) and ESMFold's
bins (on the device: the residue indices are data)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from pe_core._index.place import host_table


@host_table("window")
@functools.lru_cache(maxsize=32)
def window_index(height: int, width: int, prefix: int) -> np.ndarray:
    """Swin's index of a ``height x width`` window, BEiT's with ``prefix`` (a class token)."""
    grid_rows, grid_cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    rows, cols = grid_rows.reshape(-1), grid_cols.reshape(-1)  # row-major tokens
    d_row = rows[:, None] - rows[None, :] + (height - 1)
    d_col = cols[:, None] - cols[None, :] + (width - 1)
    index = d_row * (2 * width - 1) + d_col
    if prefix:
        distances = (2 * height - 1) * (2 * width - 1)
        n = height * width + 1
        full = np.empty((n, n), dtype=np.int64)
        full[1:, 1:] = index
        full[0, :] = distances  # class token to every token
        full[:, 0] = distances + 1  # every token to the class token
        full[0, 0] = distances + 2  # class token to itself
        index = full
    index = index.astype(np.int64)
    index.setflags(write=False)
    return index


@host_table("swinv2")
@functools.lru_cache(maxsize=32)
def coords_table(height: int, width: int, scale: tuple[int, int]) -> np.ndarray:
    """SwinV2's log-spaced coordinates, float64."""
    axes = []
    for size, pre in zip((height, width), scale, strict=True):
        offsets = np.arange(-(size - 1), size, dtype=np.float64)
        if pre > 1:
            offsets = offsets / (pre - 1)
        x = offsets * 8.0
        axes.append(np.sign(x) * np.log2(np.abs(x) + 1.0) / 3.0)  # log2(8) = 3
    dy, dx = np.meshgrid(axes[0], axes[1], indexing="ij")
    table = np.stack([dy, dx], axis=-1)
    table.setflags(write=False)
    return table


@host_table("clipped")
def clipped_host(
    q_len: int, k_len: int, left: int, right: int, shift: int, reverse: bool
) -> np.ndarray:
    distance = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]
    if reverse:
        distance = -distance
    return np.clip(distance, -left, right) + shift


@host_table("levit")
def levit_host(res: int, step: int, out: int) -> np.ndarray:
    qy, qx = (
        a.reshape(-1) * step for a in np.meshgrid(np.arange(out), np.arange(out), indexing="ij")
    )
    ky, kx = (a.reshape(-1) for a in np.meshgrid(np.arange(res), np.arange(res), indexing="ij"))
    return np.abs(qy[:, None] - ky[None, :]) * res + np.abs(qx[:, None] - kx[None, :])


def esmfold_bins(xp: Any, index: Any, size: int, mask: Any) -> Any:
    """``clip(r_j - r_i, -size, size) + size + 1``, 0 where ``mask`` (bools of ``xp``,
    or ``None``) excludes either residue.

    The difference is taken in the indices' dtype, where it wraps beyond its range; the
    direction comes from comparing the indices, so a wrapped difference (which then has
    the wrong sign) is clipped to the right end."""
    right, left = xp.expand_dims(index, -2), xp.expand_dims(index, -1)
    diff = right - left  # wraps only where |r_j - r_i| leaves the dtype: beyond size
    limit = xp.zeros_like(diff) + size
    above = xp.where((diff > 0) & (diff < size), diff, limit)  # r_j > r_i
    below = xp.where((diff < 0) & (diff > -size), diff, -limit)  # r_j < r_i
    diff = xp.where(right > left, above, xp.where(right < left, below, diff)) + (size + 1)
    if mask is None:
        return diff
    keep = xp.expand_dims(mask, -2) & xp.expand_dims(mask, -1)
    return xp.where(keep, diff, xp.zeros_like(diff))
