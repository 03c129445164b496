"""Hypothesis strategies for the inputs of the checks: specs, feature counts, positions.

:func:`specs`, :func:`dims`, :func:`int_positions`, :func:`float_positions` and
:func:`position_arrays` draw plain data (NumPy arrays, ints, specs) for your own
``@given`` tests around the checks of :mod:`pe_core.testing.checks`. This module needs
Hypothesis (the ``test`` extra); ``import pe_core.testing`` loads it only when one of
these names is used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
    raise ImportError(
        "pe_core.testing's strategies and check_encoding need hypothesis: "
        "pip install 'pe-core[test]'"
    ) from exc

from pe_core.presets import PRESETS, resolve_spec
from pe_core.spec import Spec
from pe_core.typing import PresetLike

__all__ = ["dims", "float_positions", "int_positions", "position_arrays", "specs"]


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
        Include the 1-D entries (``axes == 1``) of :data:`~pe_core.PRESETS`.
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
        finite = st.floats(1e-4, 3.0, allow_nan=False, allow_infinity=False)
        freqs = st.one_of(st.none(), st.lists(finite, min_size=1, max_size=8).map(tuple))
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
    one_axis = tuple(spec for spec in PRESETS.values() if spec.axes == 1)
    return st.one_of(st.sampled_from(one_axis), random_specs)


def dims(
    spec: Spec | PresetLike | None = None, *, min_d: int = 2, max_d: int = 64
) -> st.SearchStrategy[int]:
    """Feature counts ``d`` that ``spec`` accepts, in ``[min_d, max_d]``.

    Even ``d`` only, unless ``spec.odd_d`` is ``"zero_pad"`` or ``"truncate"``; with explicit
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
    if spec.frequencies is not None:
        n = 2 * len(spec.frequencies)  # "truncate": ceil(d / 2) pairs
        return st.sampled_from(
            {"zero_pad": (n, n + 1), "truncate": (n - 1, n)}.get(spec.odd_d, (n,))
        )
    if spec.odd_d in ("zero_pad", "truncate"):
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


def _as_position_array(values: Sequence[float]) -> np.ndarray:
    if all(isinstance(v, (int, np.integer)) for v in values):
        return np.asarray(values, dtype=np.int64)
    return np.asarray(values, dtype=np.float64)
