"""A bounded cache of host-built tables placed on accelerators.

Positions the host already knows (a Python ``range``, a NumPy array, a layer's ``int``
offset) give tables that can be built exactly on the host. For arrays on an
accelerator that table must cross to the device, which costs a transfer per call;
this cache keeps the placed copy, keyed by ``(backend, device, dtype, key)``, and
evicts the least recently used entries beyond a byte budget
(:data:`DEFAULT_BUDGET_BYTES`, see :func:`set_budget`) or beyond
:data:`MAX_ENTRIES` entries (one-off keys such as decode-step positions must not
fill the budget with stale tables). Large tables of CPU arrays do not go through it
(building them afresh is as fast as copying them); small ones do, so that the query
and the key of one decode step share their factors.

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

from pe_core._kernel.tables import contiguous_start
from pe_core_backends import Namespace

#: The default byte budget of the cache (all devices together).
DEFAULT_BUDGET_BYTES = 256 * 2**20

#: Most entries held at once, whatever their size.
MAX_ENTRIES = 64

#: Largest position arrays keyed by their content (see :func:`values_key`).
MAX_KEYED_VALUES = 4096

_lock = threading.Lock()
_entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
#: What :func:`stats` reports besides the number of entries (in its order).
_state = {"bytes": 0, "budget_bytes": DEFAULT_BUDGET_BYTES, "hits": 0, "misses": 0}


def set_budget(n_bytes: int) -> None:
    """Set the cache's byte budget (0 disables caching); evicts down to it now.

    >>> set_budget(DEFAULT_BUDGET_BYTES)
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 0:
        raise ValueError(
            f"the budget must be an integer number of bytes >= 0. Received: {n_bytes!r}"
        )
    with _lock:
        _state["budget_bytes"] = n_bytes
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
        return {"entries": len(_entries), **_state}


def cached(
    xp: Namespace,
    key: Hashable | None,
    like: Any,
    dtype_name: str,
    build: Callable[[], np.ndarray | tuple[np.ndarray, ...]],
    *,
    private: bool = False,
) -> Any:
    """The table ``build()`` on ``like``'s device as ``dtype_name``.

    ``build`` returns a NumPy array, or a tuple of them (placed one by one: slicing a
    placed table would be a device operation per call). ``key`` must identify the
    values completely (positions, frequencies, layout...); built and moved once per
    ``(backend, device, dtype, key)``. ``key=None`` (values never asked for again)
    places the table without storing it. Tables handed to users are copies on
    mutable backends (a device-side copy, no transfer), so writing into one cannot
    change the cache; ``private=True`` skips the copy for internal use.
    """
    full_key = None if key is None else (xp.name, xp.device_key(like), dtype_name, key)
    with _lock:
        hit = None if full_key is None else _entries.get(full_key)
        if hit is not None:
            _entries.move_to_end(full_key)
            _state["hits"] += 1
            return hit[0] if private else _handed_out(xp, hit[0])
        _state["misses"] += 1
    built = build()
    parts = built if isinstance(built, tuple) else (built,)
    placed = tuple(place(xp, part, like, dtype_name) for part in parts)
    table = placed if isinstance(built, tuple) else placed[0]
    size = sum(part.size for part in parts) * _itemsize(dtype_name)
    if full_key is not None:
        with _lock:
            if size <= _state["budget_bytes"]:
                _entries[full_key] = (table, size)
                _state["bytes"] += size
                _evict()
    return table if private else _handed_out(xp, table)


def cached_at(
    xp: Namespace,
    values: np.ndarray,
    key: tuple[Any, ...],
    like: Any,
    dtype_name: str,
    build: Callable[[], np.ndarray | tuple[np.ndarray, ...]],
    *,
    private: bool = False,
) -> Any:
    """:func:`cached` for the table of host positions ``values``, keyed by ``key[0]``,
    their :func:`values_key`, then ``key[1:]``: kept on an accelerator (``like``'s), and
    elsewhere for up to :data:`MAX_KEYED_VALUES` values (a decode step's positions);
    other tables are placed without storing them."""
    keep = (like is not None and xp.on_accelerator(like)) or values.size <= MAX_KEYED_VALUES
    found = values_key(values) if keep else None
    full_key = None if found is None else (key[0], found, *key[1:])
    return cached(xp, full_key, like, dtype_name, build, private=private)


def place(xp: Namespace, table: np.ndarray, like: Any, dtype_name: str) -> Any:
    """A host table as ``xp``'s array of dtype ``dtype_name`` on ``like``'s device."""
    placed = xp.from_host(table, like=like)
    if xp.dtype_of(placed) != dtype_name:
        placed = xp.astype(placed, xp.dtype(dtype_name))
    return placed


def _handed_out(xp: Namespace, table: Any) -> Any:
    if not xp.mutable:
        return table
    if isinstance(table, tuple):
        return tuple(xp.copy(part) for part in table)
    return xp.copy(table)


def values_key(values: np.ndarray) -> tuple[Any, ...] | None:
    """A hashable key for host positions: small arrays by content, long runs by their
    ends, ``None`` for large irregular ones (not worth keeping: rarely asked for again).

    >>> values_key(np.arange(3, 10_003))
    ('run', 3, (10000,))
    >>> values_key(np.random.default_rng(0).permutation(10_000)) is None
    True
    """
    if values.size <= MAX_KEYED_VALUES:  # cheaper than looking for a run
        return ("values", values.dtype.str, values.shape, values.tobytes())
    start = contiguous_start(values)
    if start is not None:
        return ("run", start, values.shape)
    return None


def _itemsize(dtype_name: str) -> int:
    return 8 if dtype_name.endswith("64") else 2 if dtype_name.endswith("16") else 4


def _evict() -> None:
    while _entries and (_state["bytes"] > _state["budget_bytes"] or len(_entries) > MAX_ENTRIES):
        _, (_, size) = _entries.popitem(last=False)
        _state["bytes"] -= size
