"""Turning what users pass as positions into a validated backend array.

Shared by :func:`~pe_core.encode`, :func:`~pe_core.relative_matrix` and
:func:`~pe_core.shift`: backend inference, conversion between frameworks, and the
checks that keep a bad position from becoming a silent wrong answer.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from pe_core.validation import (  # noqa: F401  (re-exported: the engines import them here)
    BYTES_PER_PAIR,
    available_memory,
    check_request_size,
    known_size,
)
from pe_core_backends import (
    FLOAT_DTYPES,
    Namespace,
    backend_of,
    canonical_backend,
    check_foreign,
    get_namespace,
)

_LOW_PRECISION = ("float16", "bfloat16")


class LowPrecisionPositionsWarning(UserWarning):
    """Positions arrived as float16/bfloat16: they were rounded before pe_core saw them."""


_UNSET: Any = object()


def choose_backend(
    obj: Any, backend: str | None, *, source: str | None = _UNSET, what: str = "input"
) -> tuple[Namespace, str | None]:
    """The namespace to compute in, and the backend ``obj`` already lives on
    (``source``, if the caller has looked it up already); ``what`` names ``obj`` in the
    error for a lazy or foreign array (:func:`pe_core_backends.check_foreign`)."""
    if source is _UNSET:
        source = backend_of(obj)
    if source is None and obj is not None:  # refuse lazy and foreign arrays, naming them
        check_foreign(obj, backend, what=what)
    name = canonical_backend(backend) if backend is not None else (source or "numpy")
    return get_namespace(name), source


def as_positions(obj: Any, xp: Namespace, source: str | None, *, what: str = "positions") -> Any:
    """Convert ``obj`` to a validated integer or float array of backend ``xp``.

    Python ints, floats, sequences and ranges become NumPy first (float64 for
    fractional values, so no precision is lost before the exact angle kernel).
    """
    if source is None:
        if isinstance(obj, range):
            array = range_array(obj, what)
        else:
            if isinstance(obj, bool) or (
                isinstance(obj, (list, tuple)) and any(isinstance(v, bool) for v in flat_items(obj))
            ):
                raise TypeError(
                    f"{what} must be integers or floats, not booleans. Received: {obj!r}"
                )
            check_foreign(obj, xp.name, what=what)  # never compute a lazy array
            try:
                array = np.asarray(obj)
            except (ValueError, OverflowError) as exc:
                raise TypeError(f"{what} must be numbers of one shape. Received: {obj!r}") from exc
            array = _exact_python_ints(obj, array, what)
        source, obj = "numpy", array
    if source != xp.name:
        obj = xp.asarray(_host_numpy(obj, source, what))
    xp.check_known_rank(obj, what)
    dtype_name = xp.dtype_of(obj)
    if xp.kind(dtype_name) not in ("int", "float"):
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


def range_array(positions: range, what: str = "positions") -> np.ndarray:
    """A range's values, exactly: int64, or uint64 where they reach ``2**63``.

    ``start + step * i`` is formed modulo ``2**64`` in uint64 (exact, since every value
    lies in ``[-2**63, 2**64)``); a range with values outside that domain, or with
    negative values and values from ``2**63`` on (no NumPy integer dtype holds both),
    is refused.

    >>> range_array(range(2**63 - 1, 2**63 + 1)).tolist()
    [9223372036854775807, 9223372036854775808]
    >>> range_array(range(-2, 1)).dtype
    dtype('int64')
    >>> range_array(range(-1, 2**63 + 1, 2**63 + 1))
    Traceback (most recent call last):
    ...
    ValueError: positions (a range) must lie in [-2**63, 2**63) or in [0, 2**64) (int64 or uint64); range(-1, 9223372036854775809, 9223372036854775809) runs from -1 to 9223372036854775808.
    """
    n = len(positions)
    check_request_size(n, "float64", what=f"{what} (a range)")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    first, last = positions[0], positions[-1]
    low, high = min(first, last), max(first, last)
    if low >= -(2**63) and high < 2**63:
        dtype: Any = np.int64
    elif low >= 0 and high < 2**64:
        dtype = np.uint64
    else:
        raise ValueError(
            f"{what} (a range) must lie in [-2**63, 2**63) or in [0, 2**64) (int64 or "
            f"uint64); {positions!r} runs from {low} to {high}."
        )
    steps = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        values = np.uint64(positions.start % 2**64) + steps * np.uint64(positions.step % 2**64)
    return values if dtype is np.uint64 else values.view(np.int64)


def _exact_python_ints(obj: Any, array: np.ndarray, what: str) -> np.ndarray:
    """``array``, or a sequence of Python ints in ``[0, 2**64)`` that reaches ``2**63`` as
    uint64 (NumPy would store it as float64, rounded); refuse Python ints that NumPy
    cannot hold exactly (no silent rounding).

    NumPy gives ``object`` for ints beyond int64/uint64 and float64 for a list mixing
    negative ints with ints from ``2**63`` on, or ints with floats.
    """
    if array.dtype.kind not in "fO":
        return array
    items = flat_items(obj)
    if isinstance(obj, (list, tuple)) and python_ints(items):
        if all(0 <= int(v) < 2**64 for v in items):
            return np.asarray(obj, dtype=np.uint64)
    ints = [v for v in items if isinstance(v, numbers.Integral) and not isinstance(v, np.generic)]
    for v in ints:
        if not -(2**63) <= int(v) < 2**64:
            raise ValueError(
                f"{what} must be integers in [-2**63, 2**64) (int64 or uint64) or floats; "
                f"found the Python int {v!r}. Pass float({v!r}) to encode the nearest "
                "float64 position, which pe_core encodes exactly."
            )
    if array.dtype.kind == "f":
        for v in ints:
            if abs(int(v)) > 2**53 and float(v) != v:
                raise ValueError(
                    f"{what} mix integers and floats (or negative integers and integers "
                    f">= 2**63), which NumPy stores as float64: the integer {v!r} would be "
                    f"rounded to {float(v)!r}. Pass integers in [-2**63, 2**63) only, or "
                    "an int64/uint64 array."
                )
    return array


def fits_backend(values: np.ndarray, xp: Namespace) -> bool:
    """Whether host ``values`` keep their exact value in ``xp``'s narrower dtypes.

    JAX without x64 turns float64 into float32 and int64 into int32 (wrapping).
    """
    if values.dtype.kind == "f" and values.dtype.itemsize > 4 and not xp.supports("float64"):
        finite = values[np.isfinite(values)]
        with np.errstate(over="ignore"):  # beyond float32: inf, which differs
            narrowed = finite.astype(np.float32)
        return bool(np.array_equal(narrowed.astype(values.dtype), finite))
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
    name = default if dtype is None else xp.dtype_name(dtype)
    if name not in FLOAT_DTYPES:
        raise ValueError(
            f"dtype must be a floating dtype, one of: {', '.join(FLOAT_DTYPES)}. "
            f"Received: {dtype!r}"
        )
    return name, xp.dtype(name)


def working_dtype(out_name: str, xp: Namespace | None = None, *, round_once: bool = False) -> str:
    """The dtype a result of dtype ``out_name`` is computed in: the one rule of pe_core.

    float64 for float64 results; with ``round_once``, also for float16/bfloat16 results
    where ``xp`` has float64 (computed in float64 and rounded once: within one ulp);
    float32 otherwise.

    >>> working_dtype("float64"), working_dtype("bfloat16"), working_dtype("float16")
    ('float64', 'float32', 'float32')
    >>> from pe_core_backends import get_namespace
    >>> working_dtype("bfloat16", get_namespace("numpy"), round_once=True)
    'float64'
    """
    if out_name == "float64":
        return "float64"
    if round_once and out_name in _LOW_PRECISION and xp is not None and xp.supports("float64"):
        return "float64"
    return "float32"


def _host_numpy(obj: Any, source: str, what: str) -> np.ndarray:
    values = get_namespace(source).concrete(obj)
    if values is None:
        raise TypeError(
            f"{what} is a traced {source} value and cannot be moved to another backend; "
            "call with backend=None (or the same backend) inside compiled code."
        )
    return values


def flat_items(obj: Any) -> list[Any]:
    """The leaves of nested lists and tuples; ``[obj]`` for anything else."""
    if isinstance(obj, (list, tuple)):
        return [v for item in obj for v in flat_items(item)]
    return [obj]


def python_ints(items: list[Any]) -> bool:
    """Whether ``items`` is not empty and holds integers only (booleans are not)."""
    return bool(items) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in items
    )
