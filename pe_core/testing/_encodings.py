"""The properties of encodings ``fn(positions, d)`` (see :mod:`pe_core.testing.checks`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core.relative import relative_matrix
from pe_core.spec import Spec
from pe_core.testing._base import (
    EncodingFunction,
    _abs_error,
    _array_kind,
    _beyond,
    _encoding_context,
    _evaluate,
    _evaluate_shifted,
    _fail,
    _feature_name,
    _item,
    _largest,
    _shifts,
    _to_numpy,
    _where,
    _worst,
)
from pe_core.testing.references import (
    _resolved,
    exact_encoding,
    reference_encoding,
    reference_frequencies,
    uniqueness_window,
)
from pe_core.typing import Array, ArrayLike, PresetLike

__all__ = ["check_agreement", "check_bounded", "check_linear_relation", "check_relative_dot"]
__all__ += ["check_shift", "check_uniqueness"]


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
    spec, d = _resolved(spec, d)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "bounded", spec)
    excess = _abs_error(got, np.zeros(())) - 1.0  # |value| - 1, inf for NaN or inf
    error = max(0.0, _largest(excess))
    if not error <= atol:
        index = _worst(excess)
        summary = f"a value of fn(positions, d) is outside [-1, 1]: {_item(got[index])!r} "
        summary += f"(atol {atol:g})"
        worst, context = _where(positions, index, d, spec), _encoding_context(spec, d)
        _fail("bounded", summary, error, atol, worst, context, positions=positions)
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
    spec, d = _resolved(spec, d)
    positions = np.asarray(positions)
    got = _evaluate(fn, positions, d, "agreement", spec)
    label, expected = _reference_table(reference, positions, d, spec)
    error, index = _beyond(_abs_error(got, expected), atol)
    if index is not None:
        summary = f"fn(positions, d) differs from the {label} reference by up to {error:.3g} "
        summary += f"(atol {atol:g})"
        worst = f"{_where(positions, index, d, spec)}: expected {_item(expected[index])!r}, "
        worst += f"got {_item(got[index])!r}"
        context = _encoding_context(spec, d)
        _fail("agreement", summary, error, atol, worst, context, positions=positions)
    return error


def _reference_table(
    reference: str | Any, positions: np.ndarray, d: int, spec: Spec
) -> tuple[str, np.ndarray]:
    if isinstance(reference, str):
        tables = {"float64": reference_encoding, "mpmath": exact_encoding}
        if reference in tables:
            return reference, tables[reference](positions, d, spec)
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
    spec, d = _resolved(spec, d)
    window, bound = uniqueness_window(d, spec)
    positions = _unique_positions(positions, window)
    if positions.size < 2 or window < 2:
        return 0.0
    got = _evaluate(fn, positions, d, "uniqueness", spec)
    closest, pair = math.inf, (0, 1)  # the closest pair of encodings
    for i in range(len(got) - 1):
        distances = np.sqrt(np.sum((got[i + 1 :] - got[i]) ** 2, axis=-1))
        distances[~np.isfinite(distances)] = 0.0  # NaN distinguishes nothing
        j = int(np.argmin(distances))
        if distances[j] < closest:
            closest, pair = float(distances[j]), (i, i + 1 + j)
    threshold = max(bound - atol, bound / 2)
    shortfall = max(0.0, bound - closest)
    if closest < threshold:
        p, q = (int(positions[k]) for k in pair)
        w_min = 2 * math.asin(bound / 2)
        worst, context = f"positions {p} and {q}", _encoding_context(spec, d)
        summary = f"{worst} have encodings {closest:.3g} apart; they must be at least {bound:.3g} "
        summary += f"apart (2*sin(w_min/2) with w_min={w_min:.3g}, less atol {atol:g})"
        first, second = (got[k] for k in pair)
        kw = dict(encoding_of_first=first, encoding_of_second=second, positions=positions)
        _fail("uniqueness", summary, shortfall, bound - threshold, worst, context, **kw)
    return shortfall


def _unique_positions(positions: Any, window: int) -> np.ndarray:
    if positions is None:  # the first and last 64 of [0, N) and 128 in between
        if window <= 256:
            return np.arange(window, dtype=np.int64)
        middle = np.linspace(64, window - 65, 128).round().astype(np.int64)
        edges = np.concatenate([np.arange(64), np.arange(window - 64, window)])
        return np.unique(np.concatenate([edges, middle]))
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
    spec, d = _resolved(spec, d)
    positions, ks = np.asarray(positions), _shifts(k)
    here = _evaluate(fn, positions, d, "linear relation", spec)
    shifted = _evaluate_shifted(fn, positions, ks, d, "linear relation", spec)
    matrices = np.asarray(relative_matrix(ks, d, spec, backend="numpy", dtype="float64"))
    predicted = np.einsum("...j,mij->m...i", here, matrices.reshape(ks.shape + (d, d)))
    tolerance = 3 * atol
    error, index = _beyond(_abs_error(shifted, predicted), tolerance)
    if index is not None:
        summary = f"fn(p + k) differs from relative_matrix(k) @ fn(p) by up to {error:.3g} "
        summary += f"(tolerance {tolerance:g}) for k={_item(ks[index[0]])!r}"
        worst = f"p={_item(positions[index[1:-1]])!r}, {_feature_name(index[-1], d, spec)}: "
        worst += f"relative_matrix(k) @ fn(p) gives {_item(predicted[index])!r}, fn(p + k) gives "
        worst += f"{_item(shifted[index])!r}"
        context = _encoding_context(spec, d)
        _fail("linear relation", summary, error, tolerance, worst, context, positions=positions)
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
    spec, d = _resolved(spec, d)
    first, second = np.broadcast_arrays(np.atleast_1d(p1), np.atleast_1d(p2))
    positions = np.concatenate([first.reshape(-1), second.reshape(-1)])
    ks, n = _shifts(k), first.size
    here = _evaluate(fn, positions, d, "relative dot", spec)
    there = _evaluate_shifted(fn, positions, ks, d, "relative dot", spec)
    dots = np.sum(here[None] * there, axis=-1)  # (len(ks), 2n)
    exact_dots = np.sum(np.cos(ks[:, None] * reference_frequencies(d, spec)), axis=-1)
    diff = _abs_error(dots[:, :n], dots[:, n:])
    off = _abs_error(dots, exact_dots[:, None]) if exact else np.zeros(0)
    error, tolerance = max(_largest(diff), _largest(off)), 2 * atol * math.sqrt(d)
    for table in (diff, off):
        if not _largest(table) <= tolerance:
            m, i = _worst(table)
            at, k_text = f"p={_item(positions[i])!r}", f"k={_item(ks[m])!r}"
            if table is diff:
                other = f"p={_item(positions[n + i])!r}"
                summary = f"fn(p)·fn(p + k) is {dots[m, i]:.3g} at {at} but {dots[m, n + i]:.3g} "
                summary += f"at {other} for {k_text} (exact: sum cos(k w_i) = {exact_dots[m]:.3g}; "
                worst = f"{at} and {other}, {k_text}"
            else:
                summary = f"fn(p)·fn(p + k) is {dots[m, i]:.3g} at {at} for {k_text}, but exactly "
                summary += f"sum cos(k w_i) = {exact_dots[m]:.3g} ("
                worst = f"{at}, {k_text}"
            summary += f"tolerance {tolerance:.2g})"
            _fail("relative dot", summary, error, tolerance, worst, _encoding_context(spec, d))
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
    spec, d = _resolved(spec, d)
    positions, ks = np.asarray(positions), _shifts(k)
    context = _encoding_context(spec, d)
    native = fn(positions, d)
    kind = _array_kind(native)
    expected = _evaluate_shifted(fn, positions, ks, d, "shift", spec)
    error, tolerance = 0.0, 3 * atol
    for m, shift_k in enumerate(ks.tolist()):
        out = shift_fn(native, shift_k)
        if _array_kind(out) != kind:
            summary = f"shift_fn(fn(p), k) returned a {_array_kind(out)} array for a {kind} input"
            _fail("shift", summary, math.inf, tolerance, f"k={shift_k!r}", context)
        got = _to_numpy(out)
        if got.shape != expected[m].shape:
            summary = f"shift_fn(fn(p), k) returned shape {got.shape}; expected {expected[m].shape}"
            _fail("shift", summary, math.inf, tolerance, None, context)
        largest, index = _beyond(_abs_error(got, expected[m]), tolerance)
        error = max(error, largest)
        if index is not None:
            summary = f"shift_fn(fn(p), k) differs from fn(p + k) by up to {error:.3g} "
            summary += f"(tolerance {tolerance:g}) for k={shift_k!r}"
            worst = f"p={_item(positions[index[:-1]])!r}, {_feature_name(index[-1], d, spec)}: "
            worst += f"shift_fn gives {_item(got[index])!r}, fn(p + k) gives "
            worst += f"{_item(expected[m][index])!r}"
            _fail("shift", summary, error, tolerance, worst, context, positions=positions)
    return error
