"""The position-id rules on any backend's namespace, after the faces' checks: masks,
padded token ids, packed sequences and table cells (NaViT's buckets:
:mod:`pe_core._position_ids.navit`). Every size comes from static shapes and no value
is read back to the host, so each rule traces under ``jax.jit``, ``torch.compile`` and
``tf.function``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core_backends import Namespace


def attention_mask_ids(xp: Namespace, mask: Any, kind: str, padding_value: int, dtype: Any) -> Any:
    """Generation's rule: ``cumsum(mask) - 1`` on tokens, ``padding_value`` on padding."""
    padding = ~mask if kind == "bool" else mask == 0
    return xp.fill_where(xp.cumsum(mask, -1, dtype) - 1, padding, padding_value)


def input_ids_ids(xp: Namespace, ids: Any, pad: int, past: int, dtype: Any) -> Any:
    """RoBERTa's rule: tokens count from ``pad + past + 1``, padding gets ``pad``."""
    keep = ids != pad
    return xp.fill_where(xp.cumsum(keep, -1, dtype) + (pad + past), ~keep, pad)


def cu_seqlens_ids(xp: Namespace, cu: Any, total: int, wide: str, dtype: Any, checked: bool) -> Any:
    """The place of every token in its packed sequence. Unless ``checked`` (on the host),
    the value checks run on the device: ``-1`` everywhere if they fail."""
    if xp.dtype_of(cu) != wide:
        cu = xp.astype(cu, dtype)
    tokens = xp.arange(total, dtype, like=cu)
    index = xp.searchsorted(cu, tokens, side="right") - 1
    if not checked:  # checked on the host, cu_seqlens starts at 0 and index is >= 0
        index = xp.where(index >= 0, index, 0)  # < 0 only where cu_seqlens[0] > 0: flagged
    if xp.dtype_of(index) != wide:
        index = xp.astype(index, dtype)
    out = tokens - xp.take(cu, index, axis=0)
    if checked:
        return out
    # The value checks, on the device: no synchronisation, -1 everywhere if they fail.
    bad = xp.sum(cu[1:] < cu[:-1], 0, dtype) + xp.astype(cu[0] != 0, dtype)
    return xp.where(bad == 0, out, -1)


def table_cell_ids(xp: Namespace, types: Any, seq: int, cap: int | None, dtype: Any) -> Any:
    """TAPAS's count that restarts in every cell (same column and row id), capped."""
    column, row = types[..., 1], types[..., 2]
    same = (xp.expand_dims(column, -1) == xp.expand_dims(column, -2)) & (
        xp.expand_dims(row, -1) == xp.expand_dims(row, -2)
    )  # (..., seq, seq): token i and token j share a cell
    # the first token of i's cell: the number of tokens before the first match
    first = xp.sum(xp.cumsum(same, -1, dtype) == 0, -1, dtype)
    out = xp.arange(seq, dtype, like=types) - first
    if cap is not None and cap < seq - 1:  # ids never exceed seq - 1 otherwise
        out = xp.fill_where(out, out > cap, cap)
    return out


def table_cell_ids_host(types: np.ndarray, cap: int | None, dtype: Any) -> np.ndarray:
    """:func:`table_cell_ids` for NumPy, in memory and time proportional to the
    output: a stable sort by (column, row) gathers each cell, whose first token is the
    first of its group."""
    column, row = types[..., 1], types[..., 2]
    seq = column.shape[-1]
    lead = column.shape[:-1]
    column, row = column.reshape(-1, seq), row.reshape(-1, seq)
    order = np.lexsort((row, column), axis=-1)  # stable: a cell's tokens stay in order
    sorted_column = np.take_along_axis(column, order, -1)
    sorted_row = np.take_along_axis(row, order, -1)
    start = np.ones(order.shape, bool)
    start[:, 1:] = (sorted_column[:, 1:] != sorted_column[:, :-1]) | (
        sorted_row[:, 1:] != sorted_row[:, :-1]
    )
    places = np.arange(seq, dtype=np.int64)
    group = np.maximum.accumulate(np.where(start, places, 0), axis=-1)
    first = np.empty(order.shape, np.int64)
    np.put_along_axis(first, order, np.take_along_axis(order, group, -1), -1)
    out = places - first
    if cap is not None and cap < seq - 1:
        out = np.minimum(out, cap)
    return out.reshape(*lead, seq).astype(dtype, copy=False)
