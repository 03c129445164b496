"""The one place where angles ``pos * w`` are computed: exactly, on any backend.

Every widely used implementation forms ``pos * w`` in float32 and loses the angle at
large positions (about 1e-3 rad at 1e4, 0.1 at 1e6). pe_core never does. It works in
*turns* (``t = pos * w / 2pi``), where only the fractional part matters, and lets
32-bit integer arithmetic do the reduction exactly:

1. The frequency in turns ``f = w / 2pi`` is worked out exactly once per frequency
   (Python integers; 1/2pi to 240 bits) and split as ``f = F / 2**32 + g`` with
   ``F`` a 32-bit integer and ``|g| <= 2**-33``.
2. For an integer position ``p`` with ``|p| < 2**31``, ``p * F`` in int32 arithmetic
   wraps modulo ``2**32``: that *is* ``frac(p * F / 2**32)``, exactly, for free.
   The small rest ``p * g`` (at most 1/4 turn) is a float product with an error
   below ``2**-26`` turns.
3. Integer positions beyond ``2**31`` (int64) are split ``p = h * 2**24 + l`` and both
   parts go through step 2 (with the constants of ``2**24 * f`` for ``h``).
   A fractional position ``x`` is ``n + u`` with ``n = floor(x)``: ``n`` goes through
   step 2 and ``u * f`` is added as a float.
4. The turns are reduced to ``[-1/2, 1/2]`` and multiplied by ``2pi``.

The result: the angle in ``[-pi, pi]`` within about 3e-7 rad in float32 for every
integer position below ``2**55`` (and every float32 position below ``2**31``), and
within 1e-15 rad in float64 — without float64 on the device, in a handful of
elementwise operations that compilers fuse. The caller takes sin/cos of it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pe_core_backends import Namespace

#: floor(2**240 / (2*pi)): 1/(2*pi) in fixed point, far beyond float64.
_INV_2PI_Q = 281202444046886069876999276679073999814216481505385157414353423865411502
_INV_2PI = Fraction(_INV_2PI_Q, 2**240)

#: Integer positions split at 2**24 when they may not fit in int32.
_SPLIT = 2**24


@dataclass(frozen=True)
class TurnConstants:
    """Per-frequency constants of the exact reduction (plain Python numbers).

    ``words[k]`` is the signed 32-bit integer ``F`` and ``rests[k]`` the float ``g``
    with ``frac(scale_k * f) = F / 2**32 + g`` for ``scale_0 = 1`` and
    ``scale_1 = 2**24``; ``f`` is the frequency in turns; ``offset_turns`` is
    ``frac(offset * f)``. Plain tuples, so tracing compilers see constants.
    """

    words: tuple[tuple[int, ...], tuple[int, ...]]
    rests: tuple[tuple[float, ...], tuple[float, ...]]
    f: tuple[float, ...]
    offset_turns: tuple[float, ...] | None


def _centered(x: Fraction) -> Fraction:
    return x - round(x)


def _turn_constant_fields(*args: Any) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_turn_constant_fields(*args)


@functools.lru_cache(maxsize=256)
def _cached_turn_constant_fields(omegas: tuple[float, ...], offset: float) -> tuple:
    words: tuple[list[int], list[int]] = ([], [])
    rests: tuple[list[float], list[float]] = ([], [])
    f_list, offset_list = [], []
    offset_q = Fraction(offset)
    for omega in omegas:
        f = Fraction(omega) * _INV_2PI
        f_list.append(float(f))
        offset_list.append(float(_centered(offset_q * f)))
        for k, scale in enumerate((1, _SPLIT)):
            v = _centered(f * scale)  # in [-1/2, 1/2]
            word = round(v * 2**32)
            rest = v - Fraction(word, 2**32)
            if word >= 2**31:  # keep the signed int32 range; frac is unchanged
                word -= 2**32
            words[k].append(word)
            rests[k].append(float(rest))
    return (
        (tuple(words[0]), tuple(words[1])),
        (tuple(rests[0]), tuple(rests[1])),
        tuple(f_list),
        tuple(offset_list) if offset else None,
    )


def reduced_turns(
    xp: Namespace,
    positions: Any,
    omegas: tuple[float, ...],
    *,
    offset: float = 0,
    working: str = "float32",
    max_abs_position: float | None = None,
    poison: bool = False,
) -> Any:
    """Turns ``(positions + offset) * omegas / 2pi`` reduced to ``[-1/2, 1/2]``.

    Parameters
    ----------
    xp : Namespace
        Backend namespace of ``positions``.
    positions : array
        Integer or floating positions, any shape ``S`` (already validated).
    omegas : tuple of float
        Angular frequencies (static).
    offset : float
        Static offset added to every position, folded in exactly.
    working : {"float32", "float64"}
        Precision of the float arithmetic and of the result.
    max_abs_position : float, optional
        A known bound on ``|positions|``; below ``2**31`` int64 positions take the
        single-word path. ``None`` (values unknown, e.g. traced) assumes the worst.
    poison : bool
        Give NaN turns for positions outside the exact range (NaN, inf, ``|p| >=
        2**55``, or ``>= 2**31`` where the backend has no int64) instead of a wrong
        number: the policy for values that are not read on the host (device arrays,
        traced values). It costs a few operations on the positions (not per frequency).

    Returns
    -------
    array
        Shape ``S + (len(omegas),)`` in the working dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> t = reduced_turns(get_namespace("numpy"), np.array([10**7]), (1.0,))
    >>> bool(abs(t[0, 0] - math.remainder(10**7, 2 * math.pi) / (2 * math.pi)) < 1e-7)
    True
    """
    consts = TurnConstants(*xp.host_constant(_turn_constant_fields, omegas, float(offset)))
    wdtype = xp.dtype(working)
    dtype_name = xp.dtype_of(positions)
    fits_int32 = max_abs_position is not None and max_abs_position < 2**31

    bad = None  # where poison applies: a boolean array of the positions' shape
    if xp.kind(dtype_name) == "int":
        integer, fraction = positions, None
        wide = dtype_name in ("int64", "uint32", "uint64") and not fits_int32
        if poison and wide:
            top = xp.bitwise_right_shift(integer, 55)  # 0 or -1 inside the exact range
            bad = (top != 0) & (top != -1)
    else:
        integer = xp.floor(positions)
        fraction = xp.astype(positions - integer, wdtype)
        # Integers beyond int32 are split into two words where the backend has int64.
        wide = not fits_int32 and xp.supports("int64") and dtype_name != "float16"
        limit = _SPLIT * 2.0**31 if wide else 2.0**31
        if poison and not fits_int32 and dtype_name != "float16":
            bad = ~(xp.abs(positions) < limit)  # NaN compares False: bad
        elif poison:
            bad = ~(xp.abs(positions) < 2.0**31)  # NaN and inf
        if bad is not None:
            integer = xp.where(bad, xp.zeros_like(integer), integer)
        integer = xp.astype(integer, xp.dtype("int64" if wide else "int32"))

    if wide:
        high = xp.bitwise_right_shift(integer, 24)  # _SPLIT = 2**24
        low = xp.bitwise_and(integer, _SPLIT - 1)
        turns = _word_turns(xp, low, consts, 0, wdtype) + _frac(
            xp, _word_turns(xp, high, consts, 1, wdtype, bad=bad)
        )
    else:
        turns = _word_turns(xp, integer, consts, 0, wdtype, bad=bad)
    if fraction is not None:
        turns = turns + xp.expand_dims(fraction, -1) * _const(xp, consts.f, wdtype, positions)
    if consts.offset_turns is not None:
        turns = turns + _const(xp, consts.offset_turns, wdtype, positions)
    return _frac(xp, turns)


def reduced_angles(xp: Namespace, positions: Any, omegas: tuple[float, ...], **kwargs: Any) -> Any:
    """:func:`reduced_turns` times ``2pi``: the angles reduced to ``[-pi, pi]``.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> a = reduced_angles(get_namespace("numpy"), np.array([10**7]), (1.0,))
    >>> bool(abs(a[0, 0] - math.remainder(10**7, 2 * math.pi)) < 1e-6)
    True
    """
    return reduced_turns(xp, positions, omegas, **kwargs) * (2.0 * math.pi)


def exact_cos_sin(
    xp: Namespace,
    positions: Any,
    omegas: tuple[float, ...],
    *,
    working: str = "float32",
    scale: float = 1.0,
    max_abs_position: float | None = None,
) -> tuple[Any, Any]:
    """``scale * cos`` and ``scale * sin`` of ``positions * omegas``, exactly reduced.

    Positions outside the exact range give NaN (``poison`` of :func:`reduced_turns`).
    Eager calls on a backend whose compiled functions keep a bounded number of
    executables (JAX) run as one compiled kernel: op by op, every eager operation
    would be compiled once per shape and kept for the life of the process.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> c, s = exact_cos_sin(get_namespace("numpy"), np.array([10**7]), (1.0,))
    >>> bool(abs(s[0, 0] - math.sin(10**7)) < 1e-6)
    True
    """
    if xp.bounded_compiles and not xp.is_traced(positions):
        return _compiled_cos_sin(xp.name, omegas, working, scale)(positions)
    return _cos_sin(xp, positions, omegas, working, scale, max_abs_position)


def _cos_sin(
    xp: Namespace,
    positions: Any,
    omegas: tuple[float, ...],
    working: str,
    scale: float,
    max_abs_position: float | None,
) -> tuple[Any, Any]:
    angles = reduced_angles(
        xp, positions, omegas, working=working, max_abs_position=max_abs_position, poison=True
    )
    cos, sin = xp.cos(angles), xp.sin(angles)
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos, sin


@functools.lru_cache(maxsize=32)
def _compiled_cos_sin(backend: str, omegas: tuple[float, ...], working: str, scale: float) -> Any:
    from pe_core_backends import get_namespace

    xp = get_namespace(backend)
    return xp.compile(lambda p: _cos_sin(xp, p, omegas, working, scale, None))


#: sin(2 pi r) = r * P(r^2) and cos(2 pi r) = Q(r^2) on |r| <= 1/8 turn: least-squares
#: minimax fits, errors 2.4e-9 and 4.7e-11 (far below float32 rounding); see the tests.
_SIN_TURNS = (6.283185287866783, -41.34166263239512, 81.59255339778366, -75.40206062005021)
_COS_TURNS = (
    0.9999999999525998,
    -19.739208650355213,
    64.93931620741353,
    -85.44285199808235,
    59.220402799665415,
)


def sin_cos_turns(xp: Namespace, turns: Any) -> tuple[Any, Any]:
    """``sin`` and ``cos`` of ``2pi * turns`` for float32 ``turns`` in ``[-1/2, 1/2]``.

    The quarter-turn is taken out exactly (``r = t - q/4`` is exact in binary), then
    short polynomials in ``r`` give both values with no library call: all
    multiply-adds, which compilers fuse and vectorise (XLA's own float32 sin/cos on
    CPU cost about as much as the whole of the rest of the kernel). Accurate to about
    1e-7.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> t = np.linspace(-0.5, 0.5, 1001, dtype=np.float32)
    >>> s, c = sin_cos_turns(get_namespace("numpy"), t)
    >>> bool(np.abs(s - np.sin(2 * np.pi * t.astype(np.float64))).max() < 2e-7)
    True
    """
    quarter = xp.round(turns * 4.0)
    r = turns - quarter * 0.25
    u = r * r
    a0, a1, a2, a3 = _SIN_TURNS
    b0, b1, b2, b3, b4 = _COS_TURNS
    s = r * (a0 + u * (a1 + u * (a2 + u * a3)))
    c = b0 + u * (b1 + u * (b2 + u * (b3 + u * b4)))
    q = xp.bitwise_and(xp.astype(quarter, xp.dtype("int32")), 3)  # quadrant 0..3
    swap = xp.bitwise_and(q, 1) == 1
    sin_sign = 1.0 - xp.astype(xp.bitwise_and(q, 2), turns.dtype)  # + for q in {0, 1}
    cos_sign = 1.0 - xp.astype(xp.bitwise_and(q + 1, 2), turns.dtype)  # + for q in {0, 3}
    return xp.where(swap, c, s) * sin_sign, xp.where(swap, s, c) * cos_sign


def _word_turns(
    xp: Namespace, p: Any, consts: TurnConstants, k: int, wdtype: Any, bad: Any = None
) -> Any:
    """``p * frac(scale_k * f)`` modulo 1 for integer ``|p| < 2**31``, in (-3/4, 3/4).

    Where ``bad`` (positions' shape) is true the result is NaN.
    """
    p32 = xp.expand_dims(xp.astype(p, xp.dtype("int32")), -1)
    wrapped = p32 * xp.asarray(consts.words[k], dtype=xp.dtype("int32"), like=p)
    # int32 -> float keeps 24 bits: split the wrapped word so both halves convert exactly.
    top = xp.bitwise_right_shift(wrapped, 16)  # floor(wrapped / 2**16)
    bottom = xp.bitwise_and(wrapped, 0xFFFF)
    coarse = xp.astype(top, wdtype) * 2.0**-16
    scale = xp.astype(p32, wdtype)
    if bad is not None:  # NaN enters through the (positions-sized) multiplier
        scale = xp.where(xp.expand_dims(bad, -1), scale * float("nan"), scale)
    fine = xp.astype(bottom, wdtype) * 2.0**-32 + scale * _const(xp, consts.rests[k], wdtype, p)
    return coarse + fine


def _const(xp: Namespace, values: tuple[float, ...], wdtype: Any, like: Any) -> Any:
    return xp.asarray(values, dtype=wdtype, like=like)


def _frac(xp: Namespace, x: Any) -> Any:
    return x - xp.round(x)
