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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pe_core.testing import _encodings, _rotary
from pe_core.testing._base import EncodingFunction, PropertyFailure, RopeFunction
from pe_core.testing._encodings import *  # noqa: F403 (the names of its __all__)
from pe_core.testing._rotary import *  # noqa: F403 (the names of its __all__)

__all__ = ["PROPERTIES", "CheckOutcome", "EncodingFunction", "PropertyFailure", "RopeFunction"]
__all__ += ["run_check"]
__all__ += _encodings.__all__
__all__ += _rotary.__all__


#: The property names :func:`~pe_core.testing.check_encoding` runs, in order.
PROPERTIES: tuple[str, ...] = (
    "bounded",
    "agreement",
    "uniqueness",
    "linear relation",
    "relative dot",
)


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
    """The message of ``exc`` on one line (its lines joined), or its type's name.

    >>> _one_line(ValueError("positions out of range\\n  found 1e+300 at index 0"))
    'positions out of range found 1e+300 at index 0'
    """
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return " ".join(lines) or type(exc).__name__
