"""Checks and choices shared by the position-id rules: each input as an array of the
backend it computes on, its dtype kind, the output integer dtype (int64, or int32 where
the backend has no int64 now), and the checks of host values.

The eager path is a few dict lookups per call (an array of a class and dtype seen
before); anything else (Python data, ``backend=``, a trace) takes the general path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core.typing import BackendLike
from pe_core.validation import int32_values
from pe_core_backends import Namespace, backend_of, canonical_backend, get_namespace


def _namespace(
    obj: Any, backend: BackendLike | None, what: str
) -> tuple[Namespace, Any, np.ndarray | None]:
    """``(namespace, array, host values)``: ``obj`` as an array of the backend it
    computes on, and its values as NumPy when they are on the host for checking (NumPy
    and Python input; ``None`` for a framework's array, whose values are not read)."""
    source = backend_of(obj)
    if source is None:
        if isinstance(obj, (bool, np.bool_)) or np.ndim(obj) == 0:
            raise TypeError(f"{what} must be an array. Received: {obj!r}")
        obj = np.asarray(obj)
        if obj.size == 0 and obj.dtype.kind == "f":
            obj = obj.astype(np.int64)  # an empty list
        source = "numpy"
    xp = _lookup(source)
    values = obj if xp.numpy_arrays else None
    if values is not None and (values.dtype == object or values.dtype.kind not in "biuf"):
        raise TypeError(
            f"{what} must be an array of booleans or integers. Received dtype: {values.dtype}"
        )
    if backend is not None:
        target = _lookup(canonical_backend(backend))
        if target is not xp:
            if values is None:
                raise TypeError(
                    f"{what} is a {xp.name} array and backend={target.name!r} was asked for: "
                    "pe_core does not move a framework's array to another framework (that "
                    "would read it back to the host). Pass a NumPy array, or call with "
                    "backend=None."
                )
            return target, target.asarray(_fit_host(values, target, what)), values
    return xp, obj, values


#: array class -> its backend's namespace, whether its values are on the host, its
#: dtypes' kinds (dtypes that passed the host check) and the output dtype where the
#: backend's int64 support cannot change (``None`` otherwise): filled by eager calls
_CLASSES: dict[type, tuple[Namespace, bool, dict[Any, str], tuple[str, Any] | None]] = {}


def inputs(
    obj: Any, backend: BackendLike | None, what: str
) -> tuple[Namespace, Any, np.ndarray | None, str, str, Any]:
    """``(namespace, array, host values, kind, output dtype name, output dtype)``: what
    :func:`_namespace`, the dtype's kind (not yet checked against what the caller allows:
    :func:`allow` does) and :func:`wide_dtype` give, in one pass.

    An eager call with an array of a class and dtype seen before takes a few dict
    lookups; anything else (Python data, ``backend=``, a trace) the general path.
    """
    if backend is None:
        entry = _CLASSES.get(type(obj))
        if entry is not None:
            xp, on_host, kinds, out = entry
            if not xp.is_tracing():
                kind = kinds.get(obj.dtype)
                if kind is not None:
                    if out is None:
                        out = wide_dtype(xp)
                    return xp, obj, obj if on_host else None, kind, out[0], out[1]
    xp, arr, host = _namespace(obj, backend, what)
    kind = xp.kind(xp.dtype_of(arr))
    if not xp.is_tracing():
        if backend is None and arr is obj:
            source = backend_of(obj)
            if source is not None and _lookup(source) is xp:
                entry = _CLASSES.get(type(obj))
                if entry is None:
                    # the base class's int64 support is static (JAX's follows its x64 flag)
                    static = type(xp).supports is Namespace.supports
                    entry = (xp, host is not None, {}, wide_dtype(xp) if static else None)
                    _CLASSES[type(obj)] = entry
                entry[2][obj.dtype] = kind
    wide, dtype = wide_dtype(xp)
    return xp, arr, host, kind, wide, dtype


def allow(xp: Namespace, x: Any, kind: str, what: str, allowed: str = "bool or int") -> None:
    """Refuse a dtype kind other than ``allowed`` (``"bool or int"`` or ``"int"``)."""
    if kind != "int" and (kind != "bool" or allowed == "int"):
        wanted = "booleans or integers" if "bool" in allowed else "integers"
        raise TypeError(f"{what} must be an array of {wanted}. Received dtype: {xp.dtype_of(x)}")


def _fit_host(values: np.ndarray, xp: Namespace, what: str) -> np.ndarray:
    """Host integers as int64, or int32 where ``xp`` has no int64 (JAX without x64)."""
    if values.dtype.kind not in "iu" or xp.supports("int64"):
        return values
    return int32_values(values, xp.name, what)


_WIDE: dict[tuple[Namespace, bool], tuple[str, Any]] = {}


def wide_dtype(xp: Namespace) -> tuple[str, Any]:
    """The output dtype: int64, or int32 where the backend has no int64 now (JAX
    without x64), as ``(name, dtype object)``."""
    if xp.is_tracing():
        name = "int64" if xp.supports("int64") else "int32"
        return name, xp.dtype(name)
    key = (xp, xp.supports("int64"))
    wide = _WIDE.get(key)
    if wide is None:
        name = "int64" if key[1] else "int32"
        wide = _WIDE[key] = (name, xp.dtype(name))
    return wide


#: backend name -> its namespace (the registry's lookup imports on every call)
_NAMESPACES: dict[str, Namespace] = {}


def _lookup(name: str) -> Namespace:
    xp = _NAMESPACES.get(name)
    if xp is None:
        xp = get_namespace(name)
        if not xp.is_tracing():
            _NAMESPACES[name] = xp
    return xp


def check_fits(xp: Namespace, wide: str, what: str, *values: int) -> None:
    """Refuse results that the output dtype cannot hold (int32 on JAX without x64)."""
    info = np.iinfo(wide)
    for value in values:
        if not info.min <= value <= info.max:
            hint = " (enable jax_enable_x64 for int64)" if wide == "int32" else ""
            raise ValueError(
                f"{what} reaches {value}, which does not fit in {wide}, the output dtype of "
                f"backend {xp.name!r} (from {info.min} to {info.max}){hint}."
            )


def check_binary(values: np.ndarray, what: str) -> None:
    """Host masks hold 0 and 1 only (the first other value is named)."""
    # integers: as unsigned of the same width, a negative value is above 1 too
    if values.dtype.kind == "b" or not (values.view(f"u{values.dtype.itemsize}") > 1).any():
        return
    bad = (values != 0) & (values != 1)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{what} must hold 0 (padding) and 1 (tokens) only. Received: {values[index].item()!r} "
            f"at index {index}"
        )


def check_rank(x: Any, what: str, ranks: tuple[int, ...] | int, shape_text: str) -> Any:
    """``x.shape`` (a size may be ``None`` in a TensorFlow trace), its rank checked."""
    shape = x.shape
    if not (len(shape) >= ranks if isinstance(ranks, int) else len(shape) in ranks):
        raise ValueError(f"{what} must have shape {shape_text}. Received: shape {tuple(shape)}")
    return shape
