"""The frequency schedule: from ``(d, spec)`` to angular frequencies in float64."""

from __future__ import annotations

import functools
import math

import numpy as np

from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import PresetLike
from pe_core.validation import positive_int
from pe_core_backends import Namespace


def check_d(d: object, spec: Spec) -> int:
    """Validate the feature count ``d`` against ``spec`` and return it as an ``int``.

    Examples
    --------
    >>> check_d(4, Spec())
    4
    >>> check_d(5, Spec())
    Traceback (most recent call last):
    ...
    ValueError: d must be even for a Spec with odd_d='raise'. Received: d=5. Use an even d, or Spec(odd_d='zero_pad') to append a zero column.
    """
    if spec.axes > 1:  # N-D: d splits between the axes (pe_core.nd)
        from pe_core.nd import check_nd_d

        return check_nd_d(d, spec)
    d = positive_int(d, "d", what="the number of features")
    if d % 2 and spec.odd_d == "raise":
        raise ValueError(
            f"d must be even for a Spec with odd_d='raise'. Received: d={d}. Use an even d, "
            "or Spec(odd_d='zero_pad') to append a zero column."
        )
    n_pairs = d // 2
    if spec.frequencies is not None and len(spec.frequencies) != n_pairs:
        raise ValueError(
            f"Spec.frequencies has {len(spec.frequencies)} entries but d={d} needs "
            f"d // 2 = {n_pairs} (one per sin/cos pair)."
        )
    return d


def frequencies(d: int, spec: Spec | PresetLike | None = None) -> np.ndarray:
    """Angular frequencies (radians per position) of the ``d // 2`` sin/cos pairs.

    Parameters
    ----------
    d : int
        Number of features of the encoding.
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or a preset name; the ``"vaswani"`` preset by default.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d // 2,)``; pair ``i`` is ``sin/cos(pos * w[i])``.
        For an N-D spec (``axes > 1``), the frequencies every axis shares, one per
        pair of an axis (see :func:`pe_core.nd.axis_pairs`).

    Examples
    --------
    >>> import numpy as np
    >>> w = frequencies(8)
    >>> bool(np.allclose(w, 10000.0 ** (-np.arange(0, 8, 2) / 8)))
    True
    >>> round(float(frequencies(8, "tensor2tensor")[-1]), 12)  # i/(d/2-1): the slowest is 1/base
    0.0001
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    if spec.axes > 1:
        from pe_core.nd import axis_pairs

        n_pairs = axis_pairs(d, spec)
        return np.array(omegas(2 * n_pairs, spec.replace(axes=1, odd_d="raise")), np.float64)
    return np.array(omegas(d, spec), dtype=np.float64)


def omegas(d: int, spec: Spec, xp: Namespace | None = None) -> tuple[float, ...]:
    """The frequencies of a validated ``(d, spec)`` as a tuple of Python floats.

    With a backend namespace ``xp`` the schedule is evaluated through
    :meth:`~pe_core_backends.Namespace.host_constant`, so compiled callers see a constant.
    """
    args = (d, spec.base, spec.min_timescale, spec.denominator, spec.frequencies)
    if xp is None:
        return _schedule(*args)
    return xp.host_constant(_schedule, *args)


def _schedule(*args: object) -> tuple[float, ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_schedule(*args)


@functools.lru_cache(maxsize=512)
def _cached_schedule(
    d: int,
    base: float,
    min_timescale: float,
    denominator: str,
    explicit: tuple[float, ...] | None,
) -> tuple[float, ...]:
    n_pairs = d // 2
    if explicit is not None:
        return tuple(explicit)
    log_ratio = math.log(base / min_timescale)
    if denominator == "d":
        exponents = [2.0 * i / (2 * n_pairs) for i in range(n_pairs)]  # the even part of d
    else:
        exponents = [i / max(n_pairs - 1, 1) for i in range(n_pairs)]
    return tuple(math.exp(-e * log_ratio) / min_timescale for e in exponents)
