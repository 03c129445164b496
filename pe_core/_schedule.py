"""A spec's numbers: the frequency schedule and how ``d`` features split.

``(d, spec)`` in, plain Python numbers out: the validated feature count
(:func:`check_d`), the angular frequencies of its sin/cos pairs (:func:`omegas`) and,
for an N-D spec, the pairs every axis gets (:func:`split`, :func:`axis_pairs`). The
1-D and N-D engines and the public faces all read these; nothing here computes an
encoding.
"""

from __future__ import annotations

import functools
import math

from pe_core.presets import resolve_spec
from pe_core.spec import Spec
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
    if spec.axes > 1:  # N-D: d splits between the axes
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


#: (d, spec) -> split's result; a plain dict, so that compilers tracing a call
#: (torch.compile) read it like any global instead of stepping into a cache wrapper.
_SPLITS: dict[tuple[int, Spec], tuple[int, int, Spec]] = {}


def split(d: int, spec: Spec) -> tuple[int, int, Spec]:
    """``(pairs per axis, zero columns appended, the 1-D spec of one axis)``; a negative
    count of zero columns is the number of features truncated."""
    found = _SPLITS.get((d, spec))
    if found is None:
        if len(_SPLITS) >= 256:
            _SPLITS.clear()
        found = _SPLITS[(d, spec)] = _new_split(d, spec)
    return found


def _new_split(d: int, spec: Spec) -> tuple[int, int, Spec]:
    k = spec.axes
    n, rest = divmod(d, 2 * k)
    if rest and spec.odd_d == "raise":
        raise ValueError(
            f"d must be a multiple of 2 * axes = {2 * k} for a Spec with axes={k} and "
            f"odd_d='raise' (every axis gets the same number of sin/cos pairs). Received: "
            f"d={d}. Use a multiple of {2 * k}, or Spec(odd_d='zero_pad') to append zero "
            "columns, or Spec(odd_d='truncate') to round up and keep the first d features."
        )
    if rest and spec.odd_d == "truncate":
        n += 1
    if n == 0:
        raise ValueError(
            f"d={d} is too small for axes={k}: every axis needs at least one sin/cos pair "
            f"(d >= {2 * k})."
        )
    if spec.frequencies is not None and len(spec.frequencies) != n:
        raise ValueError(
            f"Spec.frequencies has {len(spec.frequencies)} entries but d={d} with axes={k} "
            f"gives every axis {n} sin/cos pairs (one frequency per pair, shared by the axes)."
        )
    axis_spec = spec.replace(axes=1, axis_order="forward", odd_d="raise")
    return n, d - 2 * k * n, axis_spec


def check_nd_d(d: object, spec: Spec) -> int:
    """Validate ``d`` for an N-D ``spec`` (``spec.axes > 1``) and return it as an int.

    >>> check_nd_d(8, Spec(axes=2))
    8
    >>> check_nd_d(6, Spec(axes=2))
    Traceback (most recent call last):
    ...
    ValueError: d must be a multiple of 2 * axes = 4 for a Spec with axes=2 and odd_d='raise' (every axis gets the same number of sin/cos pairs). Received: d=6. Use a multiple of 4, or Spec(odd_d='zero_pad') to append zero columns, or Spec(odd_d='truncate') to round up and keep the first d features.
    """
    d = positive_int(d, "d", what="the number of features")
    split(d, spec)
    return d


def axis_pairs(d: int, spec: Spec | str | None = None) -> int:
    """The number of sin/cos pairs each axis gets from ``d`` features.

    Parameters
    ----------
    d : int
        Number of features of the N-D encoding.
    spec : Spec or str, optional
        A spec or preset name; with ``axes == 1`` this is ``d // 2``.

    Returns
    -------
    int
        ``n``: every axis is encoded with ``2 * n`` features and the frequencies of
        ``pe_core.frequencies(2 * n, spec)`` (see the module docstring for how an
        indivisible ``d`` is handled).

    Examples
    --------
    >>> axis_pairs(768, "mae_2d")
    192
    >>> axis_pairs(10, "positional_encodings_2d")  # ceil(10 / 4) pairs, truncated to 10
    3
    >>> axis_pairs(10, "tensor2tensor_2d")  # 10 // 4 pairs and two zero columns
    2
    """
    spec = resolve_spec(spec)
    if spec.axes == 1:
        return check_d(d, spec) // 2
    return split(check_nd_d(d, spec), spec)[0]


def axis_of_block(spec: Spec) -> list[int]:
    """The coordinate each block of features encodes, in feature order."""
    axes = list(range(spec.axes))
    return axes[::-1] if spec.axis_order == "reversed" else axes
