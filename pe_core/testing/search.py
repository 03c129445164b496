"""``check_encoding``: every property of :mod:`pe_core.testing.checks` under Hypothesis.

Each property runs as its own Hypothesis search over positions (and ``d``), so one
failure does not hide another, and the report lists every failing property with its
minimised counterexample. Needs Hypothesis (the ``test`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
    raise ImportError("check_encoding needs hypothesis: pip install 'pe-core[test]'") from exc

from pe_core._schedule import check_d
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.testing._base import _describe_spec
from pe_core.testing.checks import (
    PROPERTIES,
    EncodingFunction,
    check_agreement,
    check_bounded,
    check_linear_relation,
    check_relative_dot,
    check_uniqueness,
)
from pe_core.testing.references import uniqueness_window
from pe_core.testing.strategies import (
    _as_position_array,
    dims,
    float_positions,
    int_positions,
    position_arrays,
)
from pe_core.typing import PresetLike

__all__ = ["check_encoding"]


def check_encoding(
    fn: EncodingFunction,
    spec: Spec | PresetLike | None = None,
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
    element = int_positions(max_position)
    if fractional:
        element = st.one_of(element, float_positions(float(min(2**20, max_position))))
    arrays = position_arrays(element)
    shift_limit = min(2**20, max_position)

    def table_check(check: Callable[..., Any]) -> Callable[[st.DataObject], None]:
        def body(data: st.DataObject) -> None:
            d_ = data.draw(d_strategy, label="d")
            check(fn, spec, d_, data.draw(arrays, label="positions"), atol)

        body.__name__ = check.__name__.removeprefix("check_")  # Hypothesis prints this name
        return body

    def uniqueness(data: st.DataObject) -> None:
        d_ = data.draw(d_strategy, label="d")
        window, _ = uniqueness_window(d_, spec)
        top = min(window, max_position + 1) - 1
        if top < 1:
            return
        distinct = st.lists(st.integers(0, top), min_size=2, max_size=16, unique=True)
        positions = data.draw(distinct.map(_as_position_array), label="positions")
        check_uniqueness(fn, spec, d_, positions, atol=atol)

    def relative_draw(data: st.DataObject) -> tuple[int, int, st.SearchStrategy[int]] | None:
        """``d``, ``k`` and the positions ``p`` with ``p`` and ``p + k`` in range."""
        d_ = data.draw(d_strategy, label="d")
        if d_ % 2 and spec.odd_d == "truncate":
            return None  # the cut removed a partner: no relative property to check
        k = data.draw(st.integers(-shift_limit, shift_limit), label="k")
        return d_, k, int_positions(max_position - max(0, k), min_value=max(0, -k))

    def linear_relation(data: st.DataObject) -> None:
        if (drawn := relative_draw(data)) is None:
            return
        d_, k, element = drawn
        positions = data.draw(position_arrays(element), label="positions")
        if fractional and data.draw(st.booleans(), label="fractional"):
            positions = positions + data.draw(st.floats(0, 1, exclude_max=True), label="fraction")
        check_linear_relation(fn, spec, d_, positions, k, atol)

    def relative_dot(data: st.DataObject) -> None:
        if (drawn := relative_draw(data)) is None:
            return
        d_, k, element = drawn
        p1, p2 = data.draw(element, label="p1"), data.draw(element, label="p2")
        check_relative_dot(fn, spec, d_, p1, p2, k, atol)

    bodies = (table_check(check_bounded), table_check(check_agreement), uniqueness)
    tests = dict(zip(PROPERTIES, (*bodies, linear_relation, relative_dot), strict=True))
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
        raised = "" if isinstance(exc, AssertionError) else f"fn raised {type(exc).__name__}: "
        lines += ["", f"[{name}] {raised}{exc}"]
        notes = [n for n in getattr(exc, "__notes__", ()) if n.strip()]
        if notes:
            lines.append("  minimised by Hypothesis:")
            lines.extend(f"    {line}" for note in notes for line in note.splitlines())
    return "\n".join(lines)
