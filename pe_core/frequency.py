"""The frequency schedule: from ``(d, spec)`` to angular frequencies in float64."""

from __future__ import annotations

import math
import numbers

import numpy as np

from pe_core.presets import resolve_spec
from pe_core.spec import Spec


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
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):
        raise TypeError(f"d must be a positive integer (the number of features). Received: {d!r}")
    d = int(d)
    if d <= 0:
        raise ValueError(f"d must be a positive integer (the number of features). Received: d={d}")
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


def frequencies(d: int, spec: Spec | str | None = None) -> np.ndarray:
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
    return np.array(omegas(d, spec), dtype=np.float64)


_OMEGAS: dict[tuple[int, Spec], tuple[float, ...]] = {}


def omegas(d: int, spec: Spec) -> tuple[float, ...]:
    """The frequencies of a validated ``(d, spec)`` as a tuple of Python floats.

    Cached in a plain dict so that compiled code sees a constant.
    """
    key = (d, spec)
    cached = _OMEGAS.get(key)
    if cached is None:
        cached = _OMEGAS[key] = _schedule(d, spec)
    return cached


def _schedule(d: int, spec: Spec) -> tuple[float, ...]:
    n_pairs = d // 2
    if spec.frequencies is not None:
        return tuple(spec.frequencies)
    log_ratio = math.log(spec.base / spec.min_timescale)
    if spec.denominator == "d":
        exponents = [2.0 * i / (2 * n_pairs) for i in range(n_pairs)]  # the even part of d
    else:
        exponents = [i / max(n_pairs - 1, 1) for i in range(n_pairs)]
    return tuple(math.exp(-e * log_ratio) / spec.min_timescale for e in exponents)
