"""The position-id rules on any backend's namespace, after the faces' checks: masks,
padded token ids, packed sequences and table cells (NaViT's buckets:
:mod:`pe_core._position_ids.navit`). Every size comes from static shapes and no value
is read back to the host, so each rule traces under ``jax.jit``, ``torch.compile`` and
``tf.function``.
"""

from __future__ import annotations

from typing import Any

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
    """TAPAS's count that restarts in every cell (same column and row id), capped, in
    memory proportional to the output: a stable sort by (column, row) gathers each
    cell's tokens in order, and a running maximum over the places where the sorted
    cell changes finds each token's first."""
    # in the wide dtype, a cast that keeps equal ids equal (all the sort must keep)
    column, row = xp.astype(types[..., 1], dtype), xp.astype(types[..., 2], dtype)
    order = xp.argsort(row, -1)
    order = xp.take_along_axis(order, xp.argsort(xp.take_along_axis(column, order, -1), -1), -1)
    column, row = xp.take_along_axis(column, order, -1), xp.take_along_axis(row, order, -1)
    places = xp.arange(seq, dtype, like=types)
    before = xp.where(places > 0, places - 1, 0)  # each sorted place's predecessor (0: itself)
    changed = (column != xp.take(column, before, -1)) | (row != xp.take(row, before, -1))
    start = xp.cummax(xp.where(changed, places, 0))  # the sorted place where the cell starts
    first = xp.take_along_axis(order, start, -1)  # its first token, in sorted order
    first = xp.take_along_axis(first, xp.argsort(order, -1), -1)  # back in token order
    out = places - xp.astype(first, dtype)
    if cap is not None and cap < seq - 1:  # ids never exceed seq - 1 otherwise
        out = xp.fill_where(out, out > cap, cap)
    return out
