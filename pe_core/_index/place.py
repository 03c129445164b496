"""Integer inputs, and host tables handed over as arrays of a backend.

The tables are built on the host from Python sizes by the functions registered with
:func:`host_table` (by name, so ``torch.compile`` can embed one as a constant) and placed
as int64 arrays (int32 where that is the backend's widest integer) by :func:`table`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core._kernel.inputs import _host_numpy, choose_backend
from pe_core.validation import check_elements, is_integer
from pe_core_backends import HOST, backend_of, canonical_backend, get_namespace

#: The host tables, by name (see :func:`table`).
TABLES: dict[str, Callable[..., np.ndarray]] = {}


def host_table(name: str) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Register a host table builder under ``name``."""

    def register(build: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        TABLES[name] = build
        return build

    return register


def window(value: object, name: str = "window_size") -> tuple[int, int]:
    """``(height, width)`` from an int or a pair of ints, each >= 1."""
    message = (
        f"{name} must be an integer >= 1 or a pair of them (height, width). Received: {value!r}"
    )
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(message)
        items = tuple(value)
    else:
        items = (value, value)
    for item in items:
        if not is_integer(item):
            raise TypeError(message)
        if item < 1:
            raise ValueError(message)
    return int(items[0]), int(items[1])


def int_namespace(backend: Any, like: Any) -> Any:
    """The namespace of ``backend``, else of ``like``, else NumPy."""
    if backend is None and like is not None:
        backend = backend_of(like)
    return choose_backend(None, backend)[0]


def wide(xp: Any) -> str:
    """The integer dtype of the results: int64, int32 where the backend has no int64."""
    return "int64" if xp.supports("int64") else "int32"


def place(xp: Any, host: np.ndarray, like: Any = None, what: str = "the table") -> Any:
    """A host integer table as an array of ``xp`` (int64, or int32 where that is the
    widest; values that do not fit are refused)."""
    name = wide(xp)
    if name == "int32" and host.size:
        info = np.iinfo(np.int32)
        if host.min() < info.min or host.max() > info.max:
            raise ValueError(
                f"{what} does not fit in int32, the widest integer of backend {xp.name!r} now "
                f"(enable jax_enable_x64 for int64). Received values from {host.min()} to "
                f"{host.max()}"
            )
    return xp.from_host(np.array(host, dtype=name), like=like)  # a writable, contiguous copy


def anchor(xp: Any, like: Any) -> Any:
    """``like`` when it is an array of ``xp`` (whose device a new table follows)."""
    return like if like is not None and backend_of(like) == xp.name else None


def build(
    what: str, n: int, kind: str, args: tuple[Any, ...], backend: Any, like: Any, dtype: Any = None
) -> Any:
    """The plan of every host-table face: its size checked (:func:`check_size`), then
    the table ``kind`` on ``backend`` (else ``like``'s, else NumPy) beside ``like``, as
    :func:`table` gives it."""
    xp = int_namespace(backend, like)
    check_size(n, what)
    if dtype == "float64" and not xp.supports("float64"):
        raise ValueError(f"backend {xp.name!r} has no float64 now. Received: dtype={dtype!r}")
    return table(xp, kind, args, anchor(xp, like), dtype)


def learned_table(table: Any, backend: Any) -> tuple[Any, Any, tuple[Any, ...]]:
    """``(namespace, array, shape)`` of a learned table (any backend, Python data as
    NumPy), on ``backend`` when the caller names it (a ``Parameter`` under
    ``torch.compile``)."""
    source = canonical_backend(backend) if backend is not None else backend_of(table)
    if source is None:
        table, source = np.asarray(table), "numpy"
    return get_namespace(source), table, tuple(table.shape)


def _host_values(kind: str, *args: Any) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """The table ``kind`` as plain Python data: its shape and its values."""
    built = TABLES[kind](*args)
    return tuple(int(n) for n in built.shape), tuple(built.ravel().tolist())


def table(xp: Any, kind: str, args: tuple[Any, ...], like: Any, dtype: str | None = None) -> Any:
    """The host table ``TABLES[kind](*args)`` as an array of ``xp``: integers as
    :func:`place` gives them, or ``dtype``. While a compiler traces (``torch.compile``)
    the table is built once, outside the trace, and embedded as a constant."""
    if not xp.is_tracing():
        host = TABLES[kind](*args)
        if dtype is None:
            return place(xp, host, like)
        return xp.from_host(np.array(host, dtype=dtype), like=like)
    shape, values = xp.host_constant(_host_values, kind, *args)
    name = dtype or wide(xp)
    if name == "int32" and values and (min(values) < -(2**31) or max(values) >= 2**31):
        raise ValueError(
            f"the table does not fit in int32, the widest integer of backend {xp.name!r} now "
            "(enable jax_enable_x64 for int64)"
        )
    return xp.reshape(xp.asarray(values, dtype=xp.dtype(name), like=like), shape)


#: The size check of every index table (int64, 24 bytes per element with temporaries).
check_size = check_elements


def _holds_bool(obj: Any) -> bool:
    """Whether a (nested) list or tuple holds a Python bool."""
    if isinstance(obj, bool):
        return True
    return isinstance(obj, (list, tuple)) and any(_holds_bool(v) for v in obj)


def _check_unsigned(values: np.ndarray, what: str) -> None:
    """Host unsigned integers must fit in int64 (named otherwise, not wrapped)."""
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        raise ValueError(
            f"{what} must fit in int64 (at most {2**63 - 1}). Received a value of "
            f"{values.max()} ({values.dtype})"
        )


def as_integers(obj: Any, xp: Any, what: str, *, uint64: bool = False) -> Any:
    """``obj`` (Python integers, NumPy or any backend's integer array) as an integer
    array of ``xp``: int32 or int64 (int64 for host input, int32 on JAX without x64).

    Host values that do not fit are refused with the value named, never wrapped;
    ``uint64=True`` keeps NumPy uint64 values (from 2**63 on) as uint64 for a NumPy
    ``xp`` (for callers that compute them exactly). A framework's unsigned array that
    the result dtype might not hold (uint64; uint32 where the widest is int32) is
    refused: its values are not read back to check them."""
    source = backend_of(obj)
    if source is None:
        array = np.asarray(obj)
        if array.dtype.kind == "b" or _holds_bool(obj):
            raise TypeError(f"{what} must be integers, not booleans. Received: {obj!r}")
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype == object and all(is_integer(v) for v in array.reshape(-1).tolist()):
            raise ValueError(
                f"{what} must fit in int64 (from {-(2**63)} to {2**63 - 1}). Received "
                f"values from {min(array.reshape(-1).tolist())} to "
                f"{max(array.reshape(-1).tolist())}"
            )
        if array.dtype.kind not in "iu":
            raise TypeError(f"{what} must be integers. Received dtype: {array.dtype}")
        source = HOST.name
        obj = array
    if source != xp.name or xp.numpy_arrays:
        values = _host_numpy(obj, source, what) if source != HOST.name else np.asarray(obj)
        if values.dtype.kind not in "iu":
            raise TypeError(f"{what} must be integers. Received dtype: {values.dtype}")
        if uint64 and xp.numpy_arrays and values.dtype == np.uint64:
            return values
        _check_unsigned(values, what)
        if xp.numpy_arrays and values.dtype in (np.int32, np.int64) and source == HOST.name:
            return values
        return place(xp, values.astype(np.int64), what=what)
    name = xp.dtype_of(obj)
    if xp.kind(name) != "int":
        raise TypeError(f"{what} must be integers. Received dtype: {name}")
    if name in ("int32", "int64"):
        return obj
    if name == "uint64" or (name == "uint32" and wide(xp) == "int32"):
        raise TypeError(
            f"{what} must be signed integers (or unsigned ones narrower than "
            f"{wide(xp)}) on backend {xp.name!r}: a {name} array may hold values beyond "
            f"{wide(xp)}, which pe_core does not read back from the device to check. "
            f"Convert it to {wide(xp)}."
        )
    return xp.astype(obj, xp.dtype(wide(xp)))


def as_mask(mask: Any, xp: Any, index: Any) -> Any:
    """``mask`` (host data or an array of ``xp``, the shape of ``index``) as bools of ``xp``."""
    if backend_of(mask) is None:
        mask = xp.asarray(np.asarray(mask))
    elif backend_of(mask) != xp.name:
        raise TypeError(
            f"mask must be on the backend of residue_index ({xp.name!r}). "
            f"Received a {backend_of(mask)} array"
        )
    if tuple(mask.shape) != tuple(index.shape):
        raise ValueError(
            "mask must have the shape of residue_index. Received: "
            f"{tuple(mask.shape)} and {tuple(index.shape)}"
        )
    return mask if xp.kind(xp.dtype_of(mask)) == "bool" else mask != 0
