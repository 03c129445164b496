"""Turning what users pass as positions into a validated backend array.

Shared by :func:`~pe_core.encode`, :func:`~pe_core.relative_matrix` and
:func:`~pe_core.shift`: backend inference, conversion between frameworks, and the
checks that keep a bad position from becoming a silent wrong answer.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pe_core_backends import FLOAT_DTYPES, Namespace, backend_of, canonical_backend, get_namespace

_LOW_PRECISION = ("float16", "bfloat16")


class LowPrecisionPositionsWarning(UserWarning):
    """Positions arrived as float16/bfloat16: they were rounded before pe_core saw them."""


_UNSET: Any = object()


def choose_backend(
    obj: Any, backend: str | None, *, source: str | None = _UNSET
) -> tuple[Namespace, str | None]:
    """The namespace to compute in, and the backend ``obj`` already lives on
    (``source``, if the caller has looked it up already)."""
    if source is _UNSET:
        source = backend_of(obj)
    name = canonical_backend(backend) if backend is not None else (source or "numpy")
    return get_namespace(name), source


def as_positions(obj: Any, xp: Namespace, source: str | None, *, what: str = "positions") -> Any:
    """Convert ``obj`` to a validated integer or float array of backend ``xp``.

    Python ints, floats, sequences and ranges become NumPy first (float64 for
    fractional values, so no precision is lost before the exact angle kernel).
    """
    if source is None:
        if isinstance(obj, range):
            array = np.arange(obj.start, obj.stop, obj.step, dtype=np.int64)
        else:
            if isinstance(obj, bool) or (
                isinstance(obj, (list, tuple)) and any(isinstance(v, bool) for v in _flat(obj))
            ):
                raise TypeError(
                    f"{what} must be integers or floats, not booleans. Received: {obj!r}"
                )
            try:
                array = np.asarray(obj)
            except (ValueError, OverflowError) as exc:
                raise TypeError(f"{what} must be numbers of one shape. Received: {obj!r}") from exc
        source, obj = "numpy", array
    if source != xp.name:
        obj = xp.asarray(_host_numpy(obj, source, what))
    dtype_name = xp.dtype_of(obj)
    kind = xp.kind(dtype_name)
    if kind not in ("int", "float"):
        allowed = "integer or floating dtypes"
        raise TypeError(f"{what} must have {allowed}. Received dtype: {dtype_name}")
    if dtype_name in _LOW_PRECISION:
        warnings.warn(
            f"{what} arrived as {dtype_name}: they were already rounded (every integer above "
            f"{256 if dtype_name == 'bfloat16' else 2048} is not representable), so their "
            "encodings are exact for the rounded positions only. Pass integer or float32 "
            "positions; keep low precision for the output (dtype=...).",
            LowPrecisionPositionsWarning,
            stacklevel=3,
        )
        obj = xp.astype(obj, xp.dtype("float32"))
    return obj


def fits_backend(values: np.ndarray, xp: Namespace) -> bool:
    """Whether host ``values`` keep their exact value in ``xp``'s narrower dtypes.

    JAX without x64 turns float64 into float32 and int64 into int32 (wrapping).
    """
    if values.dtype.kind == "f" and values.dtype.itemsize > 4 and not xp.supports("float64"):
        finite = values[np.isfinite(values)]
        return bool(np.array_equal(finite.astype(np.float32).astype(values.dtype), finite))
    if values.dtype.kind in "iu" and values.dtype.itemsize > 4 and not xp.supports("int64"):
        info = np.iinfo(np.int32)
        return values.size == 0 or bool(info.min <= values.min() and values.max() <= info.max)
    return True


def check_finite(
    xp: Namespace, positions: Any, *, what: str = "positions", values: Any = "unset"
) -> float | None:
    """Raise on NaN/inf; return ``max |position|`` when the values are known now.

    ``values`` may pass in ``xp.concrete(positions)`` when the caller already has it.
    """
    if isinstance(values, str):
        values = xp.concrete(positions)
    if values is None:
        return None
    if values.size == 0:
        return 0.0
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{what} must be finite; found {values[index]!r} at index {index} "
                f"({int(bad.sum())} non-finite value(s) in all)."
            )
    return float(np.max(np.abs(values.astype(np.float64))))


def resolve_dtype(xp: Namespace, dtype: Any, *, default: str = "float32") -> tuple[str, Any]:
    """Canonical name and backend object of the requested output dtype."""
    if dtype is None:
        name = default
    else:
        name = xp.dtype_name(dtype)
        if name not in FLOAT_DTYPES:
            raise ValueError(
                f"dtype must be a floating dtype, one of: {', '.join(FLOAT_DTYPES)}. "
                f"Received: {dtype!r}"
            )
    return name, xp.dtype(name)


def _host_numpy(obj: Any, source: str, what: str) -> np.ndarray:
    values = get_namespace(source).concrete(obj)
    if values is None:
        raise TypeError(
            f"{what} is a traced {source} value and cannot be moved to another backend; "
            "call with backend=None (or the same backend) inside compiled code."
        )
    return values


def _flat(seq: Any) -> Any:
    for item in seq:
        if isinstance(item, (list, tuple)):
            yield from _flat(item)
        else:
            yield item
