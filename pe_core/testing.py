"""Property tests for any sinusoidal positional encoding: yours or pe_core's.

This module is the public test toolkit (it needs Hypothesis, the ``test`` extra;
``import pe_core`` never loads it). It holds

* Hypothesis strategies for the inputs: :func:`specs`, :func:`dims`,
  :func:`int_positions`, :func:`float_positions`, :func:`position_arrays`;
* :func:`reference_encoding`, the formula restated in float64 NumPy;
* one function per property, each raising :class:`AssertionError` with a message
  naming the property, the spec, ``d``, the offending positions and the error:
  :func:`check_agreement`, :func:`check_bounded`, :func:`check_uniqueness`,
  :func:`check_linear_relation`, :func:`check_relative_dot`;
* :func:`check_encoding`, which runs every property under Hypothesis against a
  function ``fn(positions, d)`` and reports the minimised counterexamples.

>>> import pe_core
>>> from pe_core.testing import check_encoding
>>> check_encoding(lambda p, d: pe_core.encode(p, d), "vaswani", max_examples=5)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import numpy as np

try:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
    raise ImportError("pe_core.testing needs hypothesis: pip install 'pe-core[test]'") from exc

from pe_core.frequency import check_d
from pe_core.host_reads import HostReadError, forbid_host_reads
from pe_core.presets import PRESETS, resolve_spec
from pe_core.relative import relative_matrix
from pe_core.spec import Spec
from pe_core_backends import backend_of, get_namespace

__all__ = [
    "PROPERTIES",
    "EncodingFunction",
    "HostReadError",
    "check_agreement",
    "check_bounded",
    "check_encoding",
    "check_linear_relation",
    "check_relative_dot",
    "check_uniqueness",
    "dims",
    "float_positions",
    "forbid_host_reads",
    "int_positions",
    "position_arrays",
    "reference_encoding",
    "specs",
    "uniqueness_window",
]

#: The property names :func:`check_encoding` runs, in order.
PROPERTIES: tuple[str, ...] = (
    "bounded",
    "agreement",
    "uniqueness",
    "linear relation",
    "relative dot",
)


class EncodingFunction(Protocol):
    """What the checks call: ``fn(positions, d)`` -> array of shape ``positions.shape + (d,)``.

    ``positions`` is a NumPy array (int64 for integer positions, float64 for
    fractional ones). The result may be any array-like, or a JAX, PyTorch or
    TensorFlow array; it is converted to NumPy before comparing.
    """

    def __call__(self, positions: np.ndarray, d: int) -> Any: ...


# -- strategies ---------------------------------------------------------------


def specs(*, presets: bool = True, explicit_frequencies: bool = True) -> st.SearchStrategy[Spec]:
    """Valid :class:`~pe_core.Spec` objects: the presets and random ones.

    Random specs draw ``base`` in ``[10, 1e6]``, ``min_timescale`` from
    ``{1, 0.5, 2}``, both denominators, both layouts, both odd-``d`` policies, an
    integer ``offset`` in ``[-2, 4]`` and, sometimes, explicit frequencies (1 to 8
    of them in ``[1e-4, 3]`` radians per position). Pair with :func:`dims` to get a
    ``d`` the spec accepts.

    Parameters
    ----------
    presets : bool
        Include the entries of :data:`~pe_core.PRESETS`.
    explicit_frequencies : bool
        Sometimes give ``Spec.frequencies`` instead of the geometric schedule.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(specs())
    ... def test_spec_is_hashable(spec):
    ...     assert hash(spec) == hash(spec.replace())
    >>> test_spec_is_hashable()
    """
    freqs: st.SearchStrategy[tuple[float, ...] | None] = st.none()
    if explicit_frequencies:
        freqs = st.one_of(
            st.none(),
            st.lists(
                st.floats(1e-4, 3.0, allow_nan=False, allow_infinity=False),
                min_size=1,
                max_size=8,
            ).map(tuple),
        )
    random_specs = st.builds(
        Spec,
        base=st.floats(10.0, 1e6, allow_nan=False, allow_infinity=False),
        min_timescale=st.sampled_from((1.0, 0.5, 2.0)),
        denominator=st.sampled_from(("d", "half_minus_one")),
        frequencies=freqs,
        layout=st.sampled_from(("interleaved", "split")),
        offset=st.integers(-2, 4),
        odd_d=st.sampled_from(("raise", "zero_pad")),
    )
    if not presets:
        return random_specs
    return st.one_of(st.sampled_from(tuple(PRESETS.values())), random_specs)


def dims(
    spec: Spec | str | None = None, *, min_d: int = 2, max_d: int = 64
) -> st.SearchStrategy[int]:
    """Feature counts ``d`` that ``spec`` accepts, in ``[min_d, max_d]``.

    Even ``d`` only, unless ``spec.odd_d == "zero_pad"``; with explicit
    ``Spec.frequencies`` the one or two ``d`` that match their count.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(dims("vaswani", max_d=16))
    ... def test_even(d):
    ...     assert d % 2 == 0 and 2 <= d <= 16
    >>> test_even()

    To draw a spec and a matching ``d`` together:

    >>> spec_and_d = specs().flatmap(lambda s: dims(s).map(lambda d: (s, d)))
    """
    spec = resolve_spec(spec)
    odd_ok = spec.odd_d == "zero_pad"
    if spec.frequencies is not None:
        n_pairs = len(spec.frequencies)
        choices = (2 * n_pairs, 2 * n_pairs + 1) if odd_ok else (2 * n_pairs,)
        return st.sampled_from(choices)
    if odd_ok:
        return st.integers(min_d, max_d)
    low, high = (min_d + 1) // 2, max_d // 2
    if low > high:
        raise ValueError(f"No even d in [{min_d}, {max_d}] for spec {spec!r}.")
    return st.integers(low, high).map(lambda n: 2 * n)


def int_positions(max_value: int = 2**24, *, min_value: int = 0) -> st.SearchStrategy[int]:
    """Integer positions in ``[min_value, max_value]`` (token indices).

    >>> from hypothesis import find
    >>> find(int_positions(), lambda p: p > 1000)
    1001
    """
    return st.integers(min_value, max_value)


def float_positions(max_abs: float = 2**20) -> st.SearchStrategy[float]:
    """Finite float positions in ``[-max_abs, max_abs]`` (fractional and negative ones).

    >>> from hypothesis import find
    >>> find(float_positions(), lambda p: p < -1.5)
    -2.0
    """
    return st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False)


def position_arrays(
    elements: st.SearchStrategy[float] | None = None, *, min_size: int = 1, max_size: int = 8
) -> st.SearchStrategy[np.ndarray]:
    """1-D NumPy arrays of positions: int64 when every element is an int, else float64.

    Parameters
    ----------
    elements : strategy, optional
        Strategy for one position; :func:`int_positions` by default.
    min_size, max_size : int
        Bounds on the array length.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(position_arrays(), lambda a: a.size >= 2).dtype
    dtype('int64')
    """
    elements = int_positions() if elements is None else elements
    return st.lists(elements, min_size=min_size, max_size=max_size).map(_as_position_array)


def _as_position_array(values: list[float]) -> np.ndarray:
    if all(isinstance(v, (int, np.integer)) for v in values):
        return np.asarray(values, dtype=np.int64)
    return np.asarray(values, dtype=np.float64)


# -- the float64 reference ----------------------------------------------------


def _reference_frequencies(d: int, spec: Spec) -> np.ndarray:
    """The frequency schedule restated from the :class:`~pe_core.Spec` docstring."""
    n_pairs = d // 2
    if spec.frequencies is not None:
        return np.asarray(spec.frequencies, dtype=np.float64)
    i = np.arange(n_pairs, dtype=np.float64)
    exponents = 2.0 * i / (2 * n_pairs) if spec.denominator == "d" else i / max(n_pairs - 1, 1)
    return np.power(spec.min_timescale / spec.base, exponents) / spec.min_timescale


def reference_encoding(pos: Any, d: int, spec: Spec | str | None = None) -> np.ndarray:
    """The encoding restated in float64 NumPy: ``sin/cos((pos + offset) * w)``.

    The angle ``(pos + offset) * w`` is formed in float64 and handed to ``np.sin`` and
    ``np.cos``, so its error is about ``|angle| * 2**-53``: below 1e-8 for the positions
    these checks draw (up to ``2**24``), far below any float32 tolerance, but it grows
    with the position (about 1e-4 at ``2**40``). :func:`pe_core.encode` does not form
    this product at all; it reduces the angle exactly (see :mod:`pe_core.angles`), so
    for large positions compare against an exact reference (e.g. mpmath) instead.

    Parameters
    ----------
    pos : array-like
        Positions of any shape (ints or floats).
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.

    Returns
    -------
    numpy.ndarray
        float64, shape ``shape(pos) + (d,)``, in the spec's layout (a zero last
        column for odd ``d`` with ``odd_d="zero_pad"``).

    Examples
    --------
    >>> pe = reference_encoding([0, 1], 4)
    >>> [round(float(v), 4) for v in pe[1]]  # sin 1, cos 1, sin 0.01, cos 0.01
    [0.8415, 0.5403, 0.01, 1.0]
    >>> reference_encoding([1], 5, "flax").shape
    (1, 5)
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    w = _reference_frequencies(d, spec)
    positions = np.asarray(pos, dtype=np.float64)
    angles = (positions[..., None] + spec.offset) * w
    sin, cos = np.sin(angles), np.cos(angles)
    if spec.layout == "interleaved":
        table = np.stack([sin, cos], axis=-1).reshape(positions.shape + (2 * w.size,))
    else:
        table = np.concatenate([sin, cos], axis=-1)
    if d % 2:
        table = np.concatenate([table, np.zeros(positions.shape + (1,))], axis=-1)
    return table


def uniqueness_window(d: int, spec: Spec | str | None = None) -> tuple[int, float]:
    """``(N, bound)``: any ``N`` consecutive integer positions have encodings at least
    ``bound`` apart.

    ``N = floor(2*pi / w_min)`` and ``bound = 2*sin(w_min/2)``, with ``w_min`` the
    smallest nonzero frequency (see :func:`check_uniqueness` for the derivation).
    ``N`` is 0 when no frequency is nonzero.

    >>> n, bound = uniqueness_window(8)
    >>> n, round(bound, 6)  # w_min = 1e-3: the wavelength is 2000*pi positions
    (6283, 0.001)
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    w = _reference_frequencies(d, spec)
    w = w[w > 0]
    if w.size == 0:
        return 0, 0.0
    w_min = float(np.min(w))
    if w_min >= 2 * math.pi:
        return 1, 0.0
    return math.floor(2 * math.pi / w_min), 2 * math.sin(w_min / 2)


# -- the properties -----------------------------------------------------------


def _to_numpy(out: Any) -> np.ndarray:
    name = backend_of(out)
    values = get_namespace(name).to_numpy(out) if name is not None else np.asarray(out)
    return np.asarray(values, dtype=np.float64)


def _evaluate(
    fn: EncodingFunction, positions: np.ndarray, d: int, prop: str, spec: Spec
) -> np.ndarray:
    """Call ``fn`` and check the shape of what it returns."""
    out = _to_numpy(fn(positions, d))
    expected_shape = positions.shape + (d,)
    if out.shape != expected_shape:
        _fail(
            prop,
            spec,
            d,
            f"fn(positions, d) returned shape {out.shape}; expected {expected_shape}",
            positions=positions,
        )
    return out


def _describe_spec(spec: Spec) -> str:
    text = repr(spec)
    return text if spec.name is None else f"{text} (preset {spec.name!r})"


def _fail(prop: str, spec: Spec, d: int, summary: str, **details: Any) -> NoReturn:
    lines = [f"property {prop!r} failed: {summary}", f"  spec: {_describe_spec(spec)}", f"  d: {d}"]
    for key, value in details.items():
        if isinstance(value, np.ndarray):
            value = np.array2string(value, precision=8, threshold=40, max_line_width=100)
        lines.append(f"  {key.replace('_', ' ')}: {value}")
    raise AssertionError("\n".join(lines))


def _feature_name(j: int, d: int, spec: Spec) -> str:
    n_pairs = d // 2
    if j >= 2 * n_pairs:
        return f"feature {j} (the zero pad column)"
    if spec.layout == "interleaved":
        pair, func = j // 2, ("sin", "cos")[j % 2]
    else:
        pair, func = j % n_pairs, ("sin", "cos")[j // n_pairs]
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


def check_agreement(
    fn: EncodingFunction, spec: Spec | str | None, d: int, positions: Any, atol: float = 1e-5
) -> None:
    """``fn(positions, d)`` equals :func:`reference_encoding` within ``atol``.

    Raises
    ------
    AssertionError
        Naming the worst position and feature, expected vs got, and the max error.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_agreement(lambda p, d: pe_core.encode(p, d), "vaswani", 8, np.arange(4))
    >>> check_agreement(lambda p, d: pe_core.encode(p + 1, d), "vaswani", 8, np.arange(4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: property 'agreement' failed: fn(positions, d) differs from the float64 reference by up to 0.956 (atol 1e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "agreement", spec)
    expected = reference_encoding(positions, d, spec)
    err = _abs_error(got, expected)
    if err.size and not float(np.max(err)) <= atol:
        index = _worst(err)
        _fail(
            "agreement",
            spec,
            d,
            f"fn(positions, d) differs from the float64 reference by up to {float(err[index]):.3g} "
            f"(atol {atol:g})",
            worst=f"position {_item(positions[index[:-1]])!r} (index {_index_text(index[:-1])}), "
            f"{_feature_name(index[-1], d, spec)}: expected {_item(expected[index])!r}, "
            f"got {_item(got[index])!r}",
            positions=positions,
        )


def check_bounded(
    fn: EncodingFunction, spec: Spec | str | None, d: int, positions: Any, atol: float = 1e-5
) -> None:
    """Every value of ``fn(positions, d)`` is finite and in ``[-1 - atol, 1 + atol]``.

    Sines and cosines cannot leave ``[-1, 1]``; an overflowing angle (NaN), a wrong
    scale or an unnormalised table can.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_bounded(lambda p, d: pe_core.encode(p, d), None, 8, np.array([0, 2**24]))
    >>> check_bounded(lambda p, d: 2 * pe_core.encode(p, d), None, 8, np.array([0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: property 'bounded' failed: a value of fn(positions, d) is outside [-1, 1]: 2.0 (atol 1e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "bounded", spec)
    excess = np.abs(got) - 1.0
    excess[~np.isfinite(excess)] = np.inf
    if excess.size and not float(np.max(excess)) <= atol:
        index = _worst(excess)
        _fail(
            "bounded",
            spec,
            d,
            f"a value of fn(positions, d) is outside [-1, 1]: {_item(got[index])!r} "
            f"(atol {atol:g})",
            worst=f"position {_item(positions[index[:-1]])!r} (index {_index_text(index[:-1])}), "
            f"{_feature_name(index[-1], d, spec)}",
            positions=positions,
        )


def check_uniqueness(
    fn: EncodingFunction,
    spec: Spec | str | None,
    d: int,
    positions: Any = None,
    *,
    atol: float = 1e-5,
) -> None:
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
        Distinct integers spanning fewer than ``N`` (see :func:`uniqueness_window`);
        by default the first 64 and last 64 of ``[0, N)`` and 128 in between.

    Raises
    ------
    AssertionError
        Naming the closest pair, their distance and the bound.
    ValueError
        If ``positions`` are not distinct integers within one window of ``N``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_uniqueness(lambda p, d: pe_core.encode(p, d), "vaswani", 8)
    >>> check_uniqueness(lambda p, d: np.ones(p.shape + (d,)), "vaswani", 8, [3, 5])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: property 'uniqueness' failed: positions 3 and 5 have encodings 0 apart; they must be at least 0.001 apart (2*sin(w_min/2) with w_min=0.001, less atol 1e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    window, bound = uniqueness_window(d, spec)
    if positions is None:
        positions = _default_unique_positions(window)
    positions = np.asarray(positions)
    if positions.size < 2 or window < 2:
        return
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
    got = _evaluate(fn, positions, d, "uniqueness", spec)
    threshold = max(bound - atol, bound / 2)
    closest, pair = math.inf, (0, 1)
    for i in range(positions.size - 1):
        distances = np.sqrt(np.sum((got[i + 1 :] - got[i]) ** 2, axis=-1))
        distances[~np.isfinite(distances)] = 0.0  # NaN distinguishes nothing
        j = int(np.argmin(distances))
        if distances[j] < closest:
            closest, pair = float(distances[j]), (i, i + 1 + j)
    if closest < threshold:
        p, q = (int(positions[k]) for k in pair)
        w_min = 2 * math.asin(bound / 2)
        _fail(
            "uniqueness",
            spec,
            d,
            f"positions {p} and {q} have encodings {closest:.3g} apart; they must be at least "
            f"{bound:.3g} apart (2*sin(w_min/2) with w_min={w_min:.3g}, less atol {atol:g})",
            encoding_of_first=got[pair[0]],
            encoding_of_second=got[pair[1]],
            positions=positions,
        )


def _default_unique_positions(window: int) -> np.ndarray:
    if window <= 256:
        return np.arange(window, dtype=np.int64)
    middle = np.linspace(64, window - 65, 128).round().astype(np.int64)
    edges = np.concatenate([np.arange(64), np.arange(window - 64, window)])
    return np.unique(np.concatenate([edges, middle]))


def check_linear_relation(
    fn: EncodingFunction,
    spec: Spec | str | None,
    d: int,
    positions: Any,
    k: int,
    atol: float = 1e-5,
) -> None:
    """``fn(p + k) == relative_matrix(k) @ fn(p)``: a shift is a fixed rotation.

    Both sides carry ``fn``'s error, and ``M_k`` mixes each sin/cos pair, so the
    tolerance is ``3 * atol`` (``(1 + sqrt 2) * atol`` suffices when ``fn`` is within
    ``atol`` of exact).

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_linear_relation(lambda p, d: pe_core.encode(p, d), None, 8, np.arange(3), 1000)
    >>> swapped = lambda p, d: pe_core.encode(p, d)[..., [1, 0, 3, 2]]
    >>> check_linear_relation(swapped, None, 4, np.arange(3), 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: property 'linear relation' failed: fn(p + k) differs from relative_matrix(k) @ fn(p) by up to 1.68 (tolerance 3e-05) for k=1
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    positions = np.asarray(positions)
    shifted = _evaluate(fn, positions + k, d, "linear relation", spec)
    matrix = np.asarray(relative_matrix(k, d, spec, backend="numpy", dtype="float64"))
    predicted = _evaluate(fn, positions, d, "linear relation", spec) @ matrix.T
    err = _abs_error(shifted, predicted)
    tolerance = 3 * atol
    if err.size and not float(np.max(err)) <= tolerance:
        index = _worst(err)
        _fail(
            "linear relation",
            spec,
            d,
            f"fn(p + k) differs from relative_matrix(k) @ fn(p) by up to {float(err[index]):.3g} "
            f"(tolerance {tolerance:g}) for k={k}",
            worst=f"p={_item(positions[index[:-1]])!r}, {_feature_name(index[-1], d, spec)}: "
            f"relative_matrix(k) @ fn(p) gives {_item(predicted[index])!r}, fn(p + k) gives "
            f"{_item(shifted[index])!r}",
            positions=positions,
        )


def check_relative_dot(
    fn: EncodingFunction,
    spec: Spec | str | None,
    d: int,
    p1: Any,
    p2: Any,
    k: int,
    atol: float = 1e-5,
) -> None:
    """``fn(p)·fn(p + k)`` is the same for ``p = p1`` and ``p = p2``.

    Exactly, ``PE(p)·PE(p + k) = sum_i cos(k w_i)``, which does not involve ``p``:
    attention can read relative offsets from dot products. ``p1`` and ``p2`` may be
    scalars or equal-length 1-D arrays (compared pairwise). The dot product sums
    ``d`` products, so the tolerance is ``2 * atol * sqrt(d)``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_relative_dot(lambda p, d: pe_core.encode(p, d), None, 16, 0, 12345, 7)
    >>> scaled = lambda p, d: pe_core.encode(p, d) * (1 + p[..., None] / 10)
    >>> check_relative_dot(scaled, None, 4, 0, 10, 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: property 'relative dot' failed: fn(p)·fn(p + k) is 1.69 at p=0 but 6.47 at p=10 for k=1 (exact: sum cos(k w_i) = 1.54; tolerance 4e-05)
    ...
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    first, second = np.broadcast_arrays(np.atleast_1d(p1), np.atleast_1d(p2))
    positions = np.concatenate([first.reshape(-1), second.reshape(-1)])
    here = _evaluate(fn, positions, d, "relative dot", spec)
    there = _evaluate(fn, positions + k, d, "relative dot", spec)
    dots = np.sum(here * there, axis=-1)
    n = first.size
    diff = np.abs(dots[:n] - dots[n:])
    diff[~np.isfinite(diff)] = np.inf
    tolerance = 2 * atol * math.sqrt(d)
    if diff.size and not float(np.max(diff)) <= tolerance:
        i = int(np.argmax(diff))
        exact = float(np.sum(np.cos(k * _reference_frequencies(d, spec))))
        _fail(
            "relative dot",
            spec,
            d,
            f"fn(p)·fn(p + k) is {dots[i]:.3g} at p={_item(positions[i])!r} but {dots[n + i]:.3g} "
            f"at p={_item(positions[n + i])!r} for k={k} (exact: sum cos(k w_i) = {exact:.3g}; "
            f"tolerance {tolerance:.2g})",
        )


# -- everything under Hypothesis ----------------------------------------------


def check_encoding(
    fn: EncodingFunction,
    spec: Spec | str | None = None,
    *,
    d: int | None = None,
    max_examples: int = 50,
    atol: float = 1e-5,
    max_position: int = 2**24,
    fractional: bool = True,
    seed: int | None = None,
) -> None:
    """Run every property on ``fn`` under Hypothesis; raise with the minimised failures.

    The properties, in order: ``bounded`` (:func:`check_bounded`), ``agreement`` with
    the float64 reference (:func:`check_agreement`), ``uniqueness``
    (:func:`check_uniqueness`), ``linear relation`` (:func:`check_linear_relation`)
    and ``relative dot`` (:func:`check_relative_dot`). Each runs as its own Hypothesis
    search over positions (and ``d`` when not given), so one failure does not hide
    another; every failing property is reported.

    Parameters
    ----------
    fn : callable
        ``fn(positions: numpy.ndarray, d: int) -> array-like`` of shape
        ``positions.shape + (d,)`` (see :class:`EncodingFunction`). Positions arrive as
        1-D int64 or float64 NumPy arrays; add ``spec.offset`` yourself.
    spec : Spec or str, optional
        The spec ``fn`` claims to implement, or a preset name; ``"vaswani"`` by default.
    d : int, optional
        Test this ``d`` only; by default Hypothesis draws it (:func:`dims`, up to 64).
    max_examples : int
        Hypothesis examples per property.
    atol : float
        Allowed absolute error per feature (1e-5 suits float32 output).
    max_position : int
        Largest integer position drawn (``2**24`` by default).
    fractional : bool
        Also draw fractional and negative positions (float64, ``|p| <= 2**20``).
    seed : int, optional
        Fix Hypothesis' random seed.

    Raises
    ------
    AssertionError
        Listing each failing property with its minimised counterexample (and
        Hypothesis' "Falsifying example" notes). An exception raised by ``fn`` counts
        as a failure of the property being checked.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> check_encoding(lambda p, d: pe_core.encode(p, d, spec="fairseq"), "fairseq", max_examples=5)
    >>> whisper = lambda p, d: pe_core.encode(p, d, spec="whisper")
    >>> check_encoding(whisper, "vaswani", d=8, max_examples=5, seed=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: check_encoding: 2 of 5 properties failed for fn=<lambda> ('agreement', 'linear relation'); ...
    """
    spec = resolve_spec(spec)
    if d is not None:
        d = check_d(d, spec)
    if max_position < 1:
        raise ValueError(f"max_position must be >= 1. Received: {max_position!r}")
    d_strategy = st.just(d) if d is not None else dims(spec, max_d=64)
    float_limit = float(min(2**20, max_position))
    element = int_positions(max_position)
    if fractional:
        element = st.one_of(element, float_positions(float_limit))
    arrays = position_arrays(element)
    shift_limit = min(2**20, max_position)

    def bounded(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        check_bounded(fn, spec, d_, data.draw(arrays, label="positions"), atol)

    def agreement(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        check_agreement(fn, spec, d_, data.draw(arrays, label="positions"), atol)

    def uniqueness(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        window, _ = uniqueness_window(d_, spec)
        top = min(window, max_position + 1) - 1
        if top < 1:
            return
        positions = data.draw(
            st.lists(st.integers(0, top), min_size=2, max_size=16, unique=True).map(
                _as_position_array
            ),
            label="positions",
        )
        check_uniqueness(fn, spec, d_, positions, atol=atol)

    def linear_relation(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        k = data.draw(st.integers(-shift_limit, shift_limit), label="k")
        low, high = max(0, -k), max_position - max(0, k)
        positions = data.draw(
            position_arrays(int_positions(high, min_value=low)), label="positions"
        )
        if fractional and data.draw(st.booleans(), label="fractional"):
            positions = positions + data.draw(st.floats(0, 1, exclude_max=True), label="fraction")
        check_linear_relation(fn, spec, d_, positions, k, atol)

    def relative_dot(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        k = data.draw(st.integers(-shift_limit, shift_limit), label="k")
        low, high = max(0, -k), max_position - max(0, k)
        p1 = data.draw(int_positions(high, min_value=low), label="p1")
        p2 = data.draw(int_positions(high, min_value=low), label="p2")
        check_relative_dot(fn, spec, d_, p1, p2, k, atol)

    tests: dict[str, Callable[[st.DataObject], None]] = {
        "bounded": bounded,
        "agreement": agreement,
        "uniqueness": uniqueness,
        "linear relation": linear_relation,
        "relative dot": relative_dot,
    }
    config = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=[phase for phase in Phase if phase is not Phase.explain],  # no "explanation" noise
    )
    failures: list[tuple[str, BaseException]] = []
    for name, body in tests.items():
        run = given(st.data())(body)
        if seed is not None:
            run = hypothesis_seed(seed)(run)
        try:
            config(run)()
        except Exception as exc:
            failures.append((name, exc))
    if failures:
        raise AssertionError(_failure_report(fn, spec, d, atol, failures)) from failures[0][1]


def _failure_report(
    fn: Any, spec: Spec, d: int | None, atol: float, failures: list[tuple[str, BaseException]]
) -> str:
    names = ", ".join(repr(name) for name, _ in failures)
    fn_name = getattr(fn, "__qualname__", None) or repr(fn)
    lines = [
        f"check_encoding: {len(failures)} of {len(PROPERTIES)} properties failed for "
        f"fn={fn_name} ({names}); spec {_describe_spec(spec)}, "
        f"d={'drawn' if d is None else d}, atol={atol:g}."
    ]
    for name, exc in failures:
        lines.append("")
        if isinstance(exc, AssertionError):
            lines.append(f"[{name}] {exc}")
        else:
            lines.append(f"[{name}] fn raised {type(exc).__name__}: {exc}")
        notes = [n for n in getattr(exc, "__notes__", ()) if n.strip()]
        if notes:
            lines.append("  minimised by Hypothesis:")
            lines.extend(f"    {line}" for note in notes for line in note.splitlines())
    return "\n".join(lines)
