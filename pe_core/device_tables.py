"""A bounded cache of host-built tables placed on accelerators.

Positions the host already knows (a Python ``range``, a NumPy array, a layer's ``int``
offset) give tables that can be built exactly on the host. For arrays on an
accelerator that table must cross to the device, which costs a transfer per call;
this cache keeps the placed copy, keyed by ``(backend, device, dtype, key)``, and
evicts the least recently used entries beyond a byte budget
(:data:`DEFAULT_BUDGET_BYTES`, see :func:`set_budget`). Host (CPU) arrays never go
through it: building their tables afresh is as fast as copying them.

>>> import numpy as np
>>> from pe_core import device_tables
>>> device_tables.stats()["budget_bytes"] == device_tables.DEFAULT_BUDGET_BYTES
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from pe_core.tables import contiguous_start
from pe_core_backends import Namespace

#: The default byte budget of the cache (all devices together).
DEFAULT_BUDGET_BYTES = 256 * 2**20

_lock = threading.Lock()
_entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
_state = {"budget": DEFAULT_BUDGET_BYTES, "bytes": 0, "hits": 0, "misses": 0}


def set_budget(n_bytes: int) -> None:
    """Set the cache's byte budget (0 disables caching); evicts down to it now.

    >>> set_budget(DEFAULT_BUDGET_BYTES)
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 0:
        raise ValueError(
            f"the budget must be an integer number of bytes >= 0. Received: {n_bytes!r}"
        )
    with _lock:
        _state["budget"] = n_bytes
        _evict()


def clear() -> None:
    """Drop every cached table.

    >>> clear(); stats()["entries"]
    0
    """
    with _lock:
        _entries.clear()
        _state["bytes"] = 0


def stats() -> dict[str, int]:
    """Entries, bytes held, budget, hits and misses so far."""
    with _lock:
        return {
            "entries": len(_entries),
            "bytes": _state["bytes"],
            "budget_bytes": _state["budget"],
            "hits": _state["hits"],
            "misses": _state["misses"],
        }


def cached(
    xp: Namespace,
    key: Hashable,
    like: Any,
    dtype_name: str,
    build: Callable[[], np.ndarray],
    *,
    private: bool = False,
) -> Any:
    """The table ``build()`` (a NumPy array) on ``like``'s device as ``dtype_name``.

    ``key`` must identify the table's values completely (positions, frequencies,
    layout...). Built and moved once per ``(backend, device, dtype, key)``. Tables
    handed to users are copies on mutable backends (a device-side copy, no transfer),
    so writing into one cannot change the cache; ``private=True`` skips the copy for
    internal use.
    """
    full_key = (xp.name, xp.device_key(like), dtype_name, key)
    with _lock:
        hit = _entries.get(full_key)
        if hit is not None:
            _entries.move_to_end(full_key)
            _state["hits"] += 1
            return hit[0] if private or not xp.mutable else xp.copy(hit[0])
        _state["misses"] += 1
    table = xp.from_host(build(), like=like)
    if xp.dtype_of(table) != dtype_name:
        table = xp.astype(table, xp.dtype(dtype_name))
    size = int(np.prod(xp.shape(table))) * _itemsize(dtype_name)
    with _lock:
        if size <= _state["budget"]:
            _entries[full_key] = (table, size)
            _state["bytes"] += size
            _evict()
    return table if private or not xp.mutable else xp.copy(table)


def values_key(values: np.ndarray) -> tuple[Any, ...]:
    """A hashable key for host positions: a run by its ends, small arrays by content.

    >>> values_key(np.arange(3, 7))
    ('run', 3, (4,))
    """
    start = contiguous_start(values)
    if start is not None:
        return ("run", start, values.shape)
    if values.size <= 4096:
        return ("values", values.dtype.str, values.shape, values.tobytes())
    return ("unique", object())  # large and irregular: never reused


def _itemsize(dtype_name: str) -> int:
    return 8 if dtype_name.endswith("64") else 2 if dtype_name.endswith("16") else 4


def _evict() -> None:
    while _state["bytes"] > _state["budget"] and _entries:
        _, (_, size) = _entries.popitem(last=False)
        _state["bytes"] -= size
