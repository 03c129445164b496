"""The properties as plain functions: fixed inputs in, the measured error out.

Each ``check_*`` function takes the code under test (a callable) and fixed inputs,
returns the largest deviation it measured (a float, in the unit of its tolerance) and
raises :class:`PropertyFailure`, an :class:`AssertionError`, when that deviation is
beyond the tolerance, with a message naming the property, the inputs, the worst
position and the error. Nothing here needs Hypothesis, so the checks run in any test
suite, in a script, or in ``pe-core check``.

* Encodings, ``fn(positions, d)`` (:class:`EncodingFunction`): :func:`check_bounded`,
  :func:`check_agreement` (float64 or mpmath reference), :func:`check_uniqueness`,
  :func:`check_linear_relation`, :func:`check_relative_dot`, :func:`check_shift`.
* Rotary embeddings, ``fn(x, positions)`` (:class:`RopeFunction`):
  :func:`check_rope_agreement`, :func:`check_rope_relative_scores`,
  :func:`check_rope_norm`.
* Any computation, ``fn(backend)``: :func:`check_cross_backend_agreement`.

:func:`run_check` runs one of them and reports how it ended (:class:`CheckOutcome`:
``"PASS"``, ``"FAIL"`` or ``"ERROR"``) instead of raising, for a runner that goes on to
the next check (``pe-core check`` is one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

import numpy as np

from pe_core._schedule import check_d
from pe_core.presets import resolve_spec
from pe_core.relative import relative_matrix
from pe_core.spec import Spec
from pe_core.testing.references import (
    exact_encoding,
    reference_encoding,
    reference_frequencies,
    reference_rope,
    uniqueness_window,
)
from pe_core.typing import Array, ArrayLike, PresetLike, RopeLayout
from pe_core_backends import backend_of, get_namespace

__all__ = [
    "PROPERTIES",
    "CheckOutcome",
    "EncodingFunction",
    "PropertyFailure",
    "RopeFunction",
    "check_agreement",
    "check_bounded",
    "check_cross_backend_agreement",
    "check_linear_relation",
    "check_relative_dot",
    "check_rope_agreement",
    "check_rope_norm",
    "check_rope_relative_scores",
    "check_shift",
    "check_uniqueness",
    "run_check",
]

#: The property names :func:`~pe_core.testing.check_encoding` runs, in order.
PROPERTIES: tuple[str, ...] = (
    "bounded",
    "agreement",
    "uniqueness",
    "linear relation",
    "relative dot",
)


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
        self.name = name
        self.error = error
        self.tolerance = tolerance
        self.worst = worst


# -- shared helpers -------------------------------------------------------------


def _to_numpy(out: Any) -> np.ndarray:
    name = backend_of(out)
    values = get_namespace(name).to_numpy(out) if name is not None else np.asarray(out)
    return np.asarray(values, dtype=np.float64)


def _describe_spec(spec: Spec) -> str:
    text = repr(spec)
    return text if spec.name is None else f"{text} (preset {spec.name!r})"


def _fail(
    prop: str,
    summary: str,
    *,
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
        _fail(
            prop,
            f"fn(positions, d) returned shape {out.shape}; expected {expected_shape}",
            error=math.inf,
            tolerance=0.0,
            context=_encoding_context(spec, d),
            positions=positions,
        )
    return out


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


def _k_text(ks: np.ndarray, index: int) -> str:
    return f"k={_item(ks[index])!r}"


# -- encodings ----------------------------------------------------------------------


def check_bounded(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None,
    d: int,
    positions: ArrayLike,
    atol: float = 1e-5,
) -> float:
    """Every value of ``fn(positions, d)`` is finite and in ``[-1 - atol, 1 + atol]``.

    Sines and cosines cannot leave ``[-1, 1]``; an overflowing angle (NaN), a wrong
    scale or an unnormalised table can.

    Returns
    -------
    float
        How far the largest ``|value|`` exceeds 1 (0 when none does).

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_bounded(lambda p, d: pe_core.encode(p, d), None, 8, np.array([0, 2**24]))
    0.0
    >>> check_bounded(lambda p, d: 2 * pe_core.encode(p, d), None, 8, np.array([0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'bounded' failed: a value of fn(positions, d) is outside [-1, 1]: 2.0 (atol 1e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "bounded", spec)
    excess = np.abs(got) - 1.0
    excess[~np.isfinite(excess)] = np.inf
    error = max(0.0, _largest(excess))
    if not error <= atol:
        index = _worst(excess)
        _fail(
            "bounded",
            f"a value of fn(positions, d) is outside [-1, 1]: {_item(got[index])!r} "
            f"(atol {atol:g})",
            error=error,
            tolerance=atol,
            worst=f"position {_item(positions[index[:-1]])!r} (index {_index_text(index[:-1])}), "
            f"{_feature_name(index[-1], d, spec)}",
            context=_encoding_context(spec, d),
            positions=positions,
        )
    return error


def check_agreement(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None,
    d: int,
    positions: ArrayLike,
    atol: float = 1e-5,
    *,
    reference: str | Any = "float64",
) -> float:
    """``fn(positions, d)`` equals a reference encoding within ``atol``.

    Parameters
    ----------
    fn : callable
        ``fn(positions, d)`` (see :class:`EncodingFunction`).
    spec : Spec or str
        The spec ``fn`` claims to implement (``None``: ``"vaswani"``).
    d : int
        Number of features.
    positions : array-like
        The positions to compare at.
    atol : float
        Allowed absolute error per value.
    reference : {"float64", "mpmath"} or array-like
        ``"float64"``: :func:`~pe_core.testing.reference_encoding` (fine up to about
        ``2**24``); ``"mpmath"``: :func:`~pe_core.testing.exact_encoding` (exact at
        any position; needs mpmath, and is slow on large grids); or the expected table
        itself, of shape ``positions.shape + (d,)`` (e.g. an ``exact_encoding``
        computed once and reused for several functions).

    Returns
    -------
    float
        The largest absolute error.

    Raises
    ------
    AssertionError
        :class:`PropertyFailure`, naming the worst position and feature, expected vs
        got, and the max error.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> error = check_agreement(lambda p, d: pe_core.encode(p, d), "vaswani", 8, np.arange(4))
    >>> error < 1e-7
    True
    >>> check_agreement(lambda p, d: pe_core.encode(p + 1, d), "vaswani", 8, np.arange(4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'agreement' failed: fn(positions, d) differs from the float64 reference by up to 0.956 (atol 1e-05)
    ...

    Against mpmath, up to ``2**24`` with the spec's schedule, and beyond with the
    implementation's own float64 frequencies (see
    :func:`~pe_core.testing.exact_encoding`):

    >>> from pe_core.testing import exact_encoding
    >>> error = check_agreement(lambda p, d: pe_core.encode(p, d), None, 8, [2**24 - 1, -12345],
    ...                         1e-6, reference="mpmath")
    >>> big = np.array([10**9, -(2**40) + 3, 2**62 + 1])
    >>> exact = exact_encoding(big, 8, frequencies=pe_core.frequencies(8))
    >>> error = check_agreement(lambda p, d: pe_core.encode(p, d), None, 8, big, 1e-6,
    ...                         reference=exact)
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "agreement", spec)
    label, expected = _reference_table(reference, positions, d, spec)
    err = _abs_error(got, expected)
    error = _largest(err)
    if not error <= atol:
        index = _worst(err)
        _fail(
            "agreement",
            f"fn(positions, d) differs from the {label} reference by up to {error:.3g} "
            f"(atol {atol:g})",
            error=error,
            tolerance=atol,
            worst=f"position {_item(positions[index[:-1]])!r} (index {_index_text(index[:-1])}), "
            f"{_feature_name(index[-1], d, spec)}: expected {_item(expected[index])!r}, "
            f"got {_item(got[index])!r}",
            context=_encoding_context(spec, d),
            positions=positions,
        )
    return error


def _reference_table(
    reference: str | Any, positions: np.ndarray, d: int, spec: Spec
) -> tuple[str, np.ndarray]:
    if isinstance(reference, str):
        if reference == "float64":
            return "float64", reference_encoding(positions, d, spec)
        if reference == "mpmath":
            return "mpmath", exact_encoding(positions, d, spec)
        raise ValueError(
            f"Unknown reference {reference!r}. Expected 'float64', 'mpmath' or an array."
        )
    expected = np.asarray(reference, dtype=np.float64)
    if expected.shape != positions.shape + (d,):
        raise ValueError(
            f"reference has shape {expected.shape}; expected positions.shape + (d,) = "
            f"{positions.shape + (d,)}"
        )
    return "given", expected


def check_uniqueness(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None,
    d: int,
    positions: ArrayLike = None,
    *,
    atol: float = 1e-5,
) -> float:
    """Distinct integer positions less than one longest wavelength apart get distinct encodings.

    For positions ``p, q`` with ``delta = p - q``, each sin/cos pair of frequency ``w``
    contributes ``(sin pw - sin qw)**2 + (cos pw - cos qw)**2 = 2 - 2 cos(delta w)
    = 4 sin(delta w / 2)**2``, so

        ||PE(p) - PE(q)|| = 2 * sqrt(sum_i sin(delta w_i / 2)**2) >= 2 |sin(delta w_min / 2)|

    (the zero pad column of odd ``d`` adds nothing). Let ``N = floor(2*pi / w_min)``,
    the longest wavelength in whole positions. For an integer ``0 < |delta| < N``,
    ``|delta| w_min / 2`` lies in ``[w_min/2, pi - w_min/2]`` (because
    ``(N - 1) w_min <= 2 pi - w_min``), where ``sin >= sin(w_min / 2)``. Hence any
    distinct integer positions inside a window of ``N`` consecutive integers, e.g.
    ``[0, N)``, are at least ``2 sin(w_min / 2)`` apart. The check asserts that the
    closest pair among ``positions`` is at least ``max(bound - atol, bound / 2)``
    apart. Zero frequencies carry no position information and are left out of
    ``w_min``.

    Parameters
    ----------
    positions : array-like of int, optional
        Distinct integers spanning fewer than ``N`` (see
        :func:`~pe_core.testing.uniqueness_window`); by default the first 64 and last
        64 of ``[0, N)`` and 128 in between.

    Returns
    -------
    float
        How far the closest pair falls short of the bound (0 when it does not).

    Raises
    ------
    AssertionError
        :class:`PropertyFailure`, naming the closest pair, their distance and the bound.
    ValueError
        If ``positions`` are not distinct integers within one window of ``N``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_uniqueness(lambda p, d: pe_core.encode(p, d), "vaswani", 8)
    0.0
    >>> check_uniqueness(lambda p, d: np.ones(p.shape + (d,)), "vaswani", 8, [3, 5])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'uniqueness' failed: positions 3 and 5 have encodings 0 apart; they must be at least 0.001 apart (2*sin(w_min/2) with w_min=0.001, less atol 1e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    window, bound = uniqueness_window(d, spec)
    positions = _unique_positions(positions, window)
    if positions.size < 2 or window < 2:
        return 0.0
    got = _evaluate(fn, positions, d, "uniqueness", spec)
    closest, pair = _closest_pair(got)
    threshold = max(bound - atol, bound / 2)
    shortfall = max(0.0, bound - closest)
    if closest < threshold:
        p, q = (int(positions[k]) for k in pair)
        w_min = 2 * math.asin(bound / 2)
        _fail(
            "uniqueness",
            f"positions {p} and {q} have encodings {closest:.3g} apart; they must be at least "
            f"{bound:.3g} apart (2*sin(w_min/2) with w_min={w_min:.3g}, less atol {atol:g})",
            error=shortfall,
            tolerance=bound - threshold,
            worst=f"positions {p} and {q}",
            context=_encoding_context(spec, d),
            encoding_of_first=got[pair[0]],
            encoding_of_second=got[pair[1]],
            positions=positions,
        )
    return shortfall


def _unique_positions(positions: Any, window: int) -> np.ndarray:
    if positions is None:
        return _default_unique_positions(window)
    positions = np.asarray(positions)
    if positions.size < 2 or window < 2:
        return positions
    if positions.dtype.kind not in "iu":
        raise ValueError(
            f"check_uniqueness needs integer positions. Received dtype: {positions.dtype}"
        )
    positions = positions.reshape(-1)
    if np.unique(positions).size != positions.size:
        raise ValueError(f"check_uniqueness needs distinct positions. Received: {positions}")
    span = int(positions.max()) - int(positions.min())
    if span >= window:
        raise ValueError(
            f"check_uniqueness needs positions spanning fewer than N = {window} (one longest "
            f"wavelength). Received positions spanning {span}."
        )
    return positions


def _closest_pair(table: np.ndarray) -> tuple[float, tuple[int, int]]:
    closest, pair = math.inf, (0, 1)
    for i in range(len(table) - 1):
        distances = np.sqrt(np.sum((table[i + 1 :] - table[i]) ** 2, axis=-1))
        distances[~np.isfinite(distances)] = 0.0  # NaN distinguishes nothing
        j = int(np.argmin(distances))
        if distances[j] < closest:
            closest, pair = float(distances[j]), (i, i + 1 + j)
    return closest, pair


def _default_unique_positions(window: int) -> np.ndarray:
    if window <= 256:
        return np.arange(window, dtype=np.int64)
    middle = np.linspace(64, window - 65, 128).round().astype(np.int64)
    edges = np.concatenate([np.arange(64), np.arange(window - 64, window)])
    return np.unique(np.concatenate([edges, middle]))


def check_linear_relation(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None,
    d: int,
    positions: ArrayLike,
    k: ArrayLike,
    atol: float = 1e-5,
) -> float:
    """``fn(p + k) == relative_matrix(k) @ fn(p)``: a shift is a fixed rotation.

    Both sides carry ``fn``'s error, and ``M_k`` mixes each sin/cos pair, so the
    tolerance is ``3 * atol`` (``(1 + sqrt 2) * atol`` suffices when ``fn`` is within
    ``atol`` of exact). ``k`` may be one shift or a 1-D sequence of them (every
    position with every shift; ``fn`` then gets the shifted positions flattened).

    Returns
    -------
    float
        The largest ``|fn(p + k) - M_k fn(p)|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> _ = check_linear_relation(lambda p, d: pe_core.encode(p, d), None, 8, np.arange(3), 1000)
    >>> _ = check_linear_relation(lambda p, d: pe_core.encode(p, d), None, 8, [0.5, 7], [-3, 10**6])
    >>> swapped = lambda p, d: pe_core.encode(p, d)[..., [1, 0, 3, 2]]
    >>> check_linear_relation(swapped, None, 4, np.arange(3), 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'linear relation' failed: fn(p + k) differs from relative_matrix(k) @ fn(p) by up to 1.68 (tolerance 3e-05) for k=1
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions, ks = np.asarray(positions), _shifts(k)
    here = _evaluate(fn, positions, d, "linear relation", spec)
    moved = _shifted(positions, ks)
    shifted = _evaluate(fn, moved.reshape(-1), d, "linear relation", spec).reshape(
        moved.shape + (d,)
    )
    matrices = np.asarray(relative_matrix(ks, d, spec, backend="numpy", dtype="float64"))
    predicted = np.einsum("...j,mij->m...i", here, matrices.reshape(ks.shape + (d, d)))
    err = _abs_error(shifted, predicted)
    error, tolerance = _largest(err), 3 * atol
    if not error <= tolerance:
        index = _worst(err)
        _fail(
            "linear relation",
            f"fn(p + k) differs from relative_matrix(k) @ fn(p) by up to {error:.3g} "
            f"(tolerance {tolerance:g}) for {_k_text(ks, index[0])}",
            error=error,
            tolerance=tolerance,
            worst=f"p={_item(positions[index[1:-1]])!r}, {_feature_name(index[-1], d, spec)}: "
            f"relative_matrix(k) @ fn(p) gives {_item(predicted[index])!r}, fn(p + k) gives "
            f"{_item(shifted[index])!r}",
            context=_encoding_context(spec, d),
            positions=positions,
        )
    return error


def check_relative_dot(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None,
    d: int,
    p1: ArrayLike,
    p2: ArrayLike,
    k: ArrayLike,
    atol: float = 1e-5,
    *,
    exact: bool = False,
) -> float:
    """``fn(p)·fn(p + k)`` is the same for ``p = p1`` and ``p = p2``.

    Exactly, ``PE(p)·PE(p + k) = sum_i cos(k w_i)``, which does not involve ``p``:
    attention can read relative offsets from dot products. ``p1`` and ``p2`` may be
    scalars or equal-length 1-D arrays (compared pairwise); ``k`` one shift or a 1-D
    sequence. The dot product sums ``d`` products, so the tolerance is
    ``2 * atol * sqrt(d)``. With ``exact=True`` every dot product must also equal
    ``sum_i cos(k w_i)`` (with the spec's frequencies), which a scaled encoding fails.

    Returns
    -------
    float
        The largest difference between the dot products at ``p1`` and ``p2`` (and,
        with ``exact``, from ``sum_i cos(k w_i)``).

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> _ = check_relative_dot(lambda p, d: pe_core.encode(p, d), None, 16, 0, 12345, 7)
    >>> scaled = lambda p, d: pe_core.encode(p, d) * (1 + p[..., None] / 10)
    >>> check_relative_dot(scaled, None, 4, 0, 10, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'relative dot' failed: fn(p)·fn(p + k) is 1.69 at p=0 but 6.47 at p=10 for k=1 (exact: sum cos(k w_i) = 1.54; tolerance 4e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    first, second = np.broadcast_arrays(np.atleast_1d(p1), np.atleast_1d(p2))
    positions = np.concatenate([first.reshape(-1), second.reshape(-1)])
    ks, n = _shifts(k), first.size
    here = _evaluate(fn, positions, d, "relative dot", spec)
    moved = _shifted(positions, ks)
    there = _evaluate(fn, moved.reshape(-1), d, "relative dot", spec).reshape(moved.shape + (d,))
    dots = np.sum(here[None] * there, axis=-1)  # (len(ks), 2n)
    exact_dots = np.sum(np.cos(ks[:, None] * reference_frequencies(d, spec)), axis=-1)
    diff = _abs_error(dots[:, :n], dots[:, n:])
    off = _abs_error(dots, exact_dots[:, None]) if exact else np.zeros(0)
    error, tolerance = max(_largest(diff), _largest(off)), 2 * atol * math.sqrt(d)
    if not _largest(diff) <= tolerance:
        m, i = _worst(diff)
        _fail(
            "relative dot",
            f"fn(p)·fn(p + k) is {dots[m, i]:.3g} at p={_item(positions[i])!r} but "
            f"{dots[m, n + i]:.3g} at p={_item(positions[n + i])!r} for {_k_text(ks, m)} "
            f"(exact: sum cos(k w_i) = {exact_dots[m]:.3g}; tolerance {tolerance:.2g})",
            error=error,
            tolerance=tolerance,
            worst=f"p={_item(positions[i])!r} and p={_item(positions[n + i])!r}, {_k_text(ks, m)}",
            context=_encoding_context(spec, d),
        )
    if not _largest(off) <= tolerance:
        m, i = _worst(off)
        _fail(
            "relative dot",
            f"fn(p)·fn(p + k) is {dots[m, i]:.3g} at p={_item(positions[i])!r} for "
            f"{_k_text(ks, m)}, but exactly sum cos(k w_i) = {exact_dots[m]:.3g} "
            f"(tolerance {tolerance:.2g})",
            error=error,
            tolerance=tolerance,
            worst=f"p={_item(positions[i])!r}, {_k_text(ks, m)}",
            context=_encoding_context(spec, d),
        )
    return error


def check_shift(
    fn: EncodingFunction,
    shift_fn: Callable[[Array, ArrayLike], Array],
    spec: Spec | PresetLike | None,
    d: int,
    positions: ArrayLike,
    k: ArrayLike,
    atol: float = 1e-5,
) -> float:
    """``shift_fn(fn(p), k) == fn(p + k)``, in the library and dtype of ``fn(p)``.

    For code that moves encodings along without recomputing them (a KV cache, a
    sliding window), like :func:`pe_core.shift`. ``shift_fn(encoding, k)`` gets
    ``fn``'s own output (not a NumPy copy) and one shift ``k`` at a time; its result
    must be an array of the same library and dtype. As for
    :func:`check_linear_relation`, the tolerance is ``3 * atol``.

    Returns
    -------
    float
        The largest ``|shift_fn(fn(p), k) - fn(p + k)|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> encode = lambda p, d: pe_core.encode(p, d)
    >>> _ = check_shift(encode, pe_core.shift, None, 8, np.arange(4), [1, -50, 10**6])
    >>> widened = lambda pe, k: pe_core.shift(pe, k).astype("float64")
    >>> check_shift(encode, widened, None, 8, np.arange(4), 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'shift' failed: shift_fn(fn(p), k) returned a numpy float64 array for a numpy float32 input
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions, ks = np.asarray(positions), _shifts(k)
    context = _encoding_context(spec, d)
    native = fn(positions, d)
    kind = _array_kind(native)
    moved = _shifted(positions, ks)
    expected = _evaluate(fn, moved.reshape(-1), d, "shift", spec).reshape(moved.shape + (d,))
    error, tolerance = 0.0, 3 * atol
    for m, shift_k in enumerate(ks.tolist()):
        out = shift_fn(native, shift_k)
        if _array_kind(out) != kind:
            _fail(
                "shift",
                f"shift_fn(fn(p), k) returned a {_array_kind(out)} array for a {kind} input",
                error=math.inf,
                tolerance=tolerance,
                worst=f"k={shift_k!r}",
                context=context,
            )
        got = _to_numpy(out)
        if got.shape != expected[m].shape:
            _fail(
                "shift",
                f"shift_fn(fn(p), k) returned shape {got.shape}; expected {expected[m].shape}",
                error=math.inf,
                tolerance=tolerance,
                context=context,
            )
        err = _abs_error(got, expected[m])
        if _largest(err) > error:
            error = _largest(err)
        if not error <= tolerance:
            index = _worst(err)
            _fail(
                "shift",
                f"shift_fn(fn(p), k) differs from fn(p + k) by up to {error:.3g} "
                f"(tolerance {tolerance:g}) for k={shift_k!r}",
                error=error,
                tolerance=tolerance,
                worst=f"p={_item(positions[index[:-1]])!r}, {_feature_name(index[-1], d, spec)}: "
                f"shift_fn gives {_item(got[index])!r}, fn(p + k) gives "
                f"{_item(expected[m][index])!r}",
                context=context,
                positions=positions,
            )
    return error


def _library_and_dtype(out: Any) -> tuple[str | None, str]:
    """``("torch", "float32")``: an array's library and dtype (``None`` and the Python type
    for anything else)."""
    name = backend_of(out)
    if name is None:
        return None, type(out).__name__
    return name, get_namespace(name).dtype_of(out)


def _array_kind(out: Any) -> str:
    """``"torch float32"``: the library and dtype of an array (or its Python type)."""
    name, dtype = _library_and_dtype(out)
    return dtype if name is None else f"{name} {dtype}"


# -- across backends ------------------------------------------------------------------


def check_cross_backend_agreement(
    fn: Callable[[str], Array], backends: Sequence[str], *, atol: float = 0.0
) -> float:
    """``fn(backend)`` gives the same numbers on every backend, within ``atol``.

    ``fn(name)`` computes something on backend ``name`` (``"numpy"``, ``"jax"``,
    ``"torch"``, ``"tensorflow"``) and must return an array of that backend; every
    result must have the shape and dtype of the first backend's and be within ``atol``
    of it. ``atol=0`` asks for the same bits.

    Returns
    -------
    float
        The largest difference from the first backend's result.

    Examples
    --------
    >>> import pe_core
    >>> from pe_core_backends import installed_backends
    >>> check_cross_backend_agreement(
    ...     lambda b: pe_core.encode(range(100), 16, backend=b), installed_backends())
    0.0
    """
    names = list(backends)
    if not names:
        raise ValueError("check_cross_backend_agreement needs at least one backend.")
    prop, error = "cross-backend agreement", 0.0
    first: tuple[str, str, np.ndarray] | None = None  # backend, dtype, values
    for name in names:
        out = fn(name)
        library, dtype = _library_and_dtype(out)
        if library != name:
            summary = f"fn({name!r}) returned a {_array_kind(out)} array; expected a {name} array"
            _fail(prop, summary, error=math.inf, tolerance=atol)
        values = _to_numpy(out)
        if first is None:
            first = (name, dtype, values)
            continue
        base_name, base_dtype, base = first
        if (dtype, values.shape) != (base_dtype, base.shape):
            summary = (
                f"fn({name!r}) returned {name} {dtype} of shape {values.shape}; "
                f"fn({base_name!r}) returned {base_name} {base_dtype} of shape {base.shape}"
            )
            _fail(prop, summary, error=math.inf, tolerance=atol)
        err = _abs_error(values, base)
        error = max(error, _largest(err))
        if not _largest(err) <= atol:
            index = _worst(err)
            _fail(
                prop,
                f"fn({name!r}) differs from fn({base_name!r}) by up to {_largest(err):.3g} "
                f"(atol {atol:g})",
                error=error,
                tolerance=atol,
                worst=f"index {_index_text(index)}: {base_name} gives {_item(base[index])!r}, "
                f"{name} gives {_item(values[index])!r}",
            )
    return error


# -- rotary embeddings ----------------------------------------------------------------


def _rope_context(base: float, layout: str, rotary_dim: int | None) -> dict[str, Any]:
    return {"rope": f"base={base!r}, layout={layout!r}, rotary_dim={rotary_dim!r}"}


def _call_rope(fn: RopeFunction, x: np.ndarray, positions: np.ndarray, prop: str) -> np.ndarray:
    out = _to_numpy(fn(x, positions))
    if out.shape != x.shape:
        _fail(
            prop,
            f"fn(x, positions) returned shape {out.shape}; expected x's shape {x.shape}",
            error=math.inf,
            tolerance=0.0,
        )
    return out


def check_rope_agreement(
    fn: RopeFunction,
    x: ArrayLike,
    positions: ArrayLike,
    *,
    base: float = 10000.0,
    layout: RopeLayout = "half",
    rotary_dim: int | None = None,
    atol: float = 1e-5,
) -> float:
    """``fn(x, positions)`` equals the rotary embedding restated in float64, within ``atol``.

    The reference is :func:`~pe_core.testing.reference_rope` with the same ``base``,
    ``layout`` and ``rotary_dim``. ``atol`` is absolute: choose it for the size of
    ``x`` (values in ``[-1, 1]`` and float32 output: 1e-6).

    Returns
    -------
    float
        The largest absolute error.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> x = np.random.default_rng(0).uniform(-1, 1, (5, 8)).astype(np.float32)
    >>> rope = lambda x, p: pe_core.apply_rope(x, p, layout="interleaved")
    >>> error = check_rope_agreement(rope, x, [0, 1, 7, 10**6, 2**24], layout="interleaved")
    >>> check_rope_agreement(rope, x, [0, 1, 7, 10**6, 2**24])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope agreement' failed: fn(x, positions) differs from the float64 reference by up to ... (atol 1e-05)
    ...
    """
    x, positions = np.asarray(x), np.asarray(positions)
    expected = reference_rope(x, positions, base=base, layout=layout, rotary_dim=rotary_dim)
    got = _call_rope(fn, x, positions, "rope agreement")
    err = _abs_error(got, expected)
    error = _largest(err)
    if not error <= atol:
        index = _worst(err)
        pos = np.broadcast_to(positions, x.shape[:-1])[index[:-1]]
        _fail(
            "rope agreement",
            f"fn(x, positions) differs from the float64 reference by up to {error:.3g} "
            f"(atol {atol:g})",
            error=error,
            tolerance=atol,
            worst=f"position {_item(pos)!r} (index {_index_text(index[:-1])}), feature "
            f"{index[-1]}: expected {_item(expected[index])!r}, got {_item(got[index])!r}",
            context=_rope_context(base, layout, rotary_dim),
            positions=positions,
        )
    return error


def check_rope_relative_scores(
    fn: RopeFunction,
    queries: ArrayLike,
    keys: ArrayLike,
    query_positions: ArrayLike,
    key_positions: ArrayLike,
    shifts: ArrayLike,
    *,
    atol: float = 1e-5,
) -> float:
    """Attention scores depend on the offset only: moving both positions by ``t`` keeps them.

    For each row ``i``, the score ``<fn(q_i, m_i), fn(k_i, n_i)>`` must not change when
    ``m_i`` and ``n_i`` both move by each shift ``t``, within ``atol * |q_i| |k_i|``
    (RoPE rotates both vectors, so the score depends on ``m - n`` alone, whatever the
    frequencies, layout or scaling).

    Parameters
    ----------
    fn : callable
        ``fn(x, positions)`` (see :class:`RopeFunction`).
    queries, keys : array-like
        Shape ``(n, head_dim)``.
    query_positions, key_positions : array-like
        Shape ``(n,)`` (or scalars): where each query and key sits.
    shifts : int or sequence of int
        The moves ``t`` to try.
    atol : float
        Allowed change of a score, relative to ``|q_i| |k_i|``.

    Returns
    -------
    float
        The largest change of a score, divided by ``|q_i| |k_i|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 4, 16)).astype(np.float32)
    >>> m, n = np.array([0, 5, 100, 2**20]), np.array([3, 5, 0, 17])
    >>> rope = lambda x, p: pe_core.apply_rope(x, p)
    >>> _ = check_rope_relative_scores(rope, q, k, m, n, [1, -9, 65536])
    >>> additive = lambda x, p: x + pe_core.encode(p, 16)  # absolute, not relative
    >>> check_rope_relative_scores(additive, q, k, m, n, [1, -9, 65536])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope relative scores' failed: ...
    ...
    """
    q, k = np.asarray(queries), np.asarray(keys)
    if q.ndim != 2 or q.shape != k.shape:
        raise ValueError(
            f"queries and keys must have the same shape (n, head_dim). Received: {q.shape} "
            f"and {k.shape}"
        )
    m = np.broadcast_to(np.asarray(query_positions), q.shape[:1])
    n = np.broadcast_to(np.asarray(key_positions), q.shape[:1])
    ts = np.concatenate([[0], _shifts(shifts)]).astype(np.result_type(m, n, _shifts(shifts)))
    prop = "rope relative scores"
    count = ts.size
    rq = _call_rope(fn, np.concatenate([q] * count), _shifted(m, ts).reshape(-1), prop)
    rk = _call_rope(fn, np.concatenate([k] * count), _shifted(n, ts).reshape(-1), prop)
    scores = np.sum(rq * rk, axis=-1).reshape(count, -1)
    scale = np.linalg.norm(q.astype(np.float64), axis=-1) * np.linalg.norm(
        k.astype(np.float64), axis=-1
    )
    change = _abs_error(scores[1:], scores[:1]) / np.where(scale > 0, scale, 1.0)
    error = _largest(change)
    if not error <= atol:
        t, i = _worst(change)
        _fail(
            prop,
            f"<fn(q, m + t), fn(k, n + t)> is {scores[t + 1, i]:.6g} but <fn(q, m), fn(k, n)> "
            f"is {scores[0, i]:.6g} for m={_item(m[i])!r}, n={_item(n[i])!r}, "
            f"t={_item(ts[t + 1])!r}: the score changed by {error:.3g} x |q||k| "
            f"(atol {atol:g})",
            error=error,
            tolerance=atol,
            worst=f"row {i}, t={_item(ts[t + 1])!r}",
        )
    return error


def check_rope_norm(
    fn: RopeFunction, x: ArrayLike, positions: ArrayLike, *, atol: float = 1e-5
) -> float:
    """Rotations keep lengths: ``|fn(x, p)_i| == |x_i|`` for every vector, within ``atol * |x_i|``.

    Holds for plain RoPE at any base, layout or partial ``rotary_dim``; scaling types
    with an attention factor (yarn, longrope) multiply every length by that factor.

    Returns
    -------
    float
        The largest ``| |fn(x, p)_i| - |x_i| | / |x_i|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    >>> _ = check_rope_norm(lambda x, p: pe_core.apply_rope(x, p), x, [0, 3, 10**5, 2**24])
    >>> check_rope_norm(lambda x, p: 1.01 * x, x, [0, 3, 10**5, 2**24])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope norm' failed: |fn(x, p)| is ... but |x| is ... at position ...: a rotation keeps lengths (relative change 0.01; atol 1e-05)
    ...
    """
    x, positions = np.asarray(x), np.asarray(positions)
    got = _call_rope(fn, x, positions, "rope norm")
    before = np.linalg.norm(x.astype(np.float64), axis=-1)
    after = np.linalg.norm(got, axis=-1)
    change = _abs_error(after, before) / np.where(before > 0, before, 1.0)
    error = _largest(change)
    if not error <= atol:
        index = _worst(change)
        pos = np.broadcast_to(positions, x.shape[:-1])[index]
        _fail(
            "rope norm",
            f"|fn(x, p)| is {after[index]:.6g} but |x| is {before[index]:.6g} at position "
            f"{_item(pos)!r} (index {_index_text(index)}): a rotation keeps lengths (relative "
            f"change {error:.3g}; atol {atol:g})",
            error=error,
            tolerance=atol,
            worst=f"position {_item(pos)!r} (index {_index_text(index)})",
        )
    return error


# -- running a check ------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOutcome:
    """How one run of a check ended, as :func:`run_check` reports it.

    Attributes
    ----------
    status : {"PASS", "FAIL", "ERROR"}
        ``"PASS"``: the property holds; ``"FAIL"``: the check raised
        :class:`PropertyFailure`; ``"ERROR"``: it raised another exception (the code
        under test crashed, or returned something the check cannot read).
    error : float
        The deviation measured: what the check returned, or the failure's ``error``;
        ``nan`` for ``"ERROR"`` (nothing was measured).
    message : str
        One line: empty for a pass, ``"error 2 > tolerance 1e-05; worst: ..."`` for a
        failure, ``"RuntimeError: ..."`` for an error.

    Examples
    --------
    >>> CheckOutcome("PASS", 0.0)
    CheckOutcome(status='PASS', error=0.0, message='')
    """

    status: Literal["PASS", "FAIL", "ERROR"]
    error: float
    message: str = ""


def run_check(check: Callable[[], float]) -> CheckOutcome:
    """Run ``check()``, one check with its arguments bound, and report how it ended.

    A :class:`PropertyFailure` is a ``"FAIL"`` (with the measured error, the tolerance
    and the worst place), any other exception an ``"ERROR"`` (with its type and message
    on one line); neither is raised. ``KeyboardInterrupt`` and ``SystemExit`` still are.

    Parameters
    ----------
    check : callable
        ``check() -> float``: a ``check_*`` call with its arguments bound
        (:func:`functools.partial` or a ``lambda``), or several of them returning the
        largest error.

    Returns
    -------
    CheckOutcome

    Examples
    --------
    >>> import functools, numpy as np, pe_core
    >>> encode = lambda p, d: pe_core.encode(p, d)
    >>> run_check(functools.partial(check_bounded, encode, None, 8, np.arange(4)))
    CheckOutcome(status='PASS', error=0.0, message='')
    >>> doubled = lambda p, d: 2 * pe_core.encode(p, d)
    >>> outcome = run_check(functools.partial(check_bounded, doubled, None, 8, np.arange(4)))
    >>> outcome.status, outcome.message
    ('FAIL', 'error 1 > tolerance 1e-05; worst: position 0 (index 0), feature 1 = cos(pos * w[0])')
    >>> run_check(lambda: check_bounded(encode, None, 7, np.arange(4)))  # doctest: +ELLIPSIS
    CheckOutcome(status='ERROR', error=nan, message="ValueError: d must be even ...")
    """
    try:
        error = check()
    except PropertyFailure as failure:
        worst = f"; worst: {failure.worst}" if failure.worst else ""
        message = f"error {failure.error:.3g} > tolerance {failure.tolerance:g}{worst}"
        return CheckOutcome("FAIL", failure.error, message)
    except Exception as exc:
        return CheckOutcome("ERROR", math.nan, f"{type(exc).__name__}: {_one_line(exc)}")
    return CheckOutcome("PASS", error)


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (its lines joined), or its type's name."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return " ".join(lines) or type(exc).__name__
