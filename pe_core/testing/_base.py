"""What every check shares: the protocols of the code under test, the failure it raises,
and the helpers that measure errors and word the failure."""

from __future__ import annotations

import math
from typing import Any, NoReturn, Protocol

import numpy as np

from pe_core.spec import Spec
from pe_core.typing import ArrayLike
from pe_core_backends import backend_of, get_namespace


class EncodingFunction(Protocol):
    """What the encoding checks call: ``fn(positions, d)`` -> array ``positions.shape + (d,)``.

    ``positions`` is a NumPy array (int64 for integer positions, float64 or float32
    for fractional ones). The result may be any array-like, or a JAX, PyTorch or
    TensorFlow array; it is converted to NumPy before comparing.
    """

    def __call__(self, positions: np.ndarray, d: int) -> ArrayLike: ...


class RopeFunction(Protocol):
    """What the RoPE checks call: ``fn(x, positions)`` -> ``x`` rotated, same shape.

    ``x`` is a NumPy float array of shape ``(n, head_dim)`` (``(..., n, head_dim)`` if
    you pass one) and ``positions`` a NumPy array of shape ``(n,)``: vector ``i`` is
    at position ``positions[i]``. The result may come from any backend.
    """

    def __call__(self, x: np.ndarray, positions: np.ndarray) -> ArrayLike: ...


class PropertyFailure(AssertionError):
    """A property does not hold: the :class:`AssertionError` every ``check_*`` raises.

    Attributes
    ----------
    name : str
        The property, e.g. ``"agreement"``.
    error : float
        The largest deviation measured (``inf`` for NaN or infinite values).
    tolerance : float
        What the check allowed.
    worst : str or None
        Where the deviation is largest, in words.

    Examples
    --------
    >>> import numpy as np
    >>> try:
    ...     check_bounded(lambda p, d: np.full(p.shape + (d,), 2.0), None, 4, [0])
    ... except PropertyFailure as failure:
    ...     print(failure.name, failure.error, failure.tolerance)
    bounded 1.0 1e-05
    """

    def __init__(
        self, message: str, *, name: str, error: float, tolerance: float, worst: str | None
    ) -> None:
        super().__init__(message)
        self.name, self.error, self.tolerance, self.worst = name, error, tolerance, worst


for _public in (EncodingFunction, RopeFunction, PropertyFailure):
    _public.__module__ = "pe_core.testing.checks"  # their public home, named in tracebacks
del _public


def _to_numpy(out: Any) -> np.ndarray:
    name = backend_of(out)
    values = get_namespace(name).to_numpy(out) if name is not None else np.asarray(out)
    return np.asarray(values, dtype=np.float64)


def _describe_spec(spec: Spec) -> str:
    return repr(spec) if spec.name is None else f"{spec!r} (preset {spec.name!r})"


def _fail(
    prop: str,
    summary: str,
    error: float,
    tolerance: float,
    worst: str | None = None,
    context: dict[str, Any] | None = None,
    **details: Any,
) -> NoReturn:
    """Raise :class:`PropertyFailure`: the summary line, then context, worst and details."""
    lines = [f"property {prop!r} failed: {summary}"]
    items = {**(context or {}), **({"worst": worst} if worst is not None else {}), **details}
    for key, value in items.items():
        if isinstance(value, np.ndarray):
            value = np.array2string(value, precision=8, threshold=40, max_line_width=100)
        lines.append(f"  {key.replace('_', ' ')}: {value}")
    raise PropertyFailure(
        "\n".join(lines), name=prop, error=error, tolerance=tolerance, worst=worst
    )


def _encoding_context(spec: Spec, d: int) -> dict[str, Any]:
    return {"spec": _describe_spec(spec), "d": d}


def _evaluate(
    fn: EncodingFunction, positions: np.ndarray, d: int, prop: str, spec: Spec
) -> np.ndarray:
    """Call ``fn`` and check the shape of what it returns."""
    out = _to_numpy(fn(positions, d))
    expected_shape = positions.shape + (d,)
    if out.shape != expected_shape:
        summary = f"fn(positions, d) returned shape {out.shape}; expected {expected_shape}"
        _fail(prop, summary, math.inf, 0.0, None, _encoding_context(spec, d), positions=positions)
    return out


def _evaluate_shifted(
    fn: EncodingFunction, positions: np.ndarray, ks: np.ndarray, d: int, prop: str, spec: Spec
) -> np.ndarray:
    """``fn`` at ``positions + k`` for every ``k`` (:func:`_shifted`), one call, checked."""
    moved = _shifted(positions, ks)
    return _evaluate(fn, moved.reshape(-1), d, prop, spec).reshape(moved.shape + (d,))


def _where(positions: np.ndarray, index: tuple[int, ...], d: int, spec: Spec) -> str:
    """``position 3 (index 3), feature 1 = cos(pos * w[0])``: where ``index`` of a table is."""
    return f"{_position_at(positions, index[:-1])}, {_feature_name(index[-1], d, spec)}"


def _position_at(positions: np.ndarray, index: tuple[int, ...]) -> str:
    """``position 3 (index 3)``: the position at ``index`` of ``positions``."""
    return f"position {_item(positions[index])!r} (index {_index_text(index)})"


def _feature_name(j: int, d: int, spec: Spec) -> str:
    n_pairs = (d + 1) // 2 if spec.odd_d == "truncate" else d // 2
    if j >= 2 * n_pairs:
        return f"feature {j} (the zero pad column)"
    names = ("cos", "sin") if spec.order == "cos_sin" else ("sin", "cos")
    if spec.layout == "interleaved":
        pair, func = j // 2, names[j % 2]
    else:
        pair, func = j % n_pairs, names[j // n_pairs]
    return f"feature {j} = {func}(pos * w[{pair}])"


def _item(value: Any) -> Any:
    """A NumPy scalar as a plain Python number (so messages read ``1``, not ``np.int64(1)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _index_text(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else str(index)


def _worst(err: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))


def _beyond(err: np.ndarray, tolerance: float) -> tuple[float, tuple[int, ...] | None]:
    """The largest of ``err``, and where it is when it is beyond ``tolerance`` (else None)."""
    error = _largest(err)
    return error, None if error <= tolerance else _worst(err)


def _abs_error(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    err = np.abs(got - expected)
    err[~np.isfinite(err)] = np.inf
    return err


def _largest(err: np.ndarray) -> float:
    return float(np.max(err)) if err.size else 0.0


def _shifts(k: Any) -> np.ndarray:
    """``k`` as a 1-D array of shifts (one scalar or a sequence)."""
    ks = np.atleast_1d(np.asarray(k))
    if ks.ndim != 1 or ks.dtype.kind not in "iuf":
        raise ValueError(f"k must be a number or a 1-D sequence of numbers. Received: {k!r}")
    return ks


def _shifted(positions: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """``positions + k`` for every ``k``: shape ``(len(ks),) + positions.shape``."""
    return positions[None, ...] + ks.reshape((-1,) + (1,) * positions.ndim)


def _library_and_dtype(out: Any) -> tuple[str | None, str]:
    """``("torch", "float32")``: an array's library and dtype (``None`` and the Python type
    for anything else)."""
    name = backend_of(out)
    return (name, type(out).__name__ if name is None else get_namespace(name).dtype_of(out))


def _array_kind(out: Any) -> str:
    """``"torch float32"``: the library and dtype of an array (or its Python type)."""
    name, dtype = _library_and_dtype(out)
    return dtype if name is None else f"{name} {dtype}"
