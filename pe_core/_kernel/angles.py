"""The one place where angles ``pos * w`` are computed: exactly, on any backend.

Every widely used implementation forms ``pos * w`` in float32 and loses the angle at
large positions (about 1e-3 rad at 1e4, 0.1 at 1e6). pe_core never does. It works in
*turns* (``t = pos * w / 2pi``), where only the fractional part matters, and lets
32-bit integer arithmetic do the reduction exactly:

1. The frequency in turns ``f = w / 2pi`` is worked out exactly once per frequency
   (Python integers, with as many bits of ``1/2pi`` as the frequency's size needs)
   and split as ``frac(f) = F / 2**32 + g`` with ``F`` a 32-bit integer and
   ``|g| <= 2**-33``; the same for ``frac(2**32 * f)``.
2. For an integer position ``p`` with ``|p| < 2**31``, ``p * F`` in int32 arithmetic
   wraps modulo ``2**32``: that *is* ``frac(p * F / 2**32)``, exactly, for free.
   The small rest ``p * g`` (at most 1/4 turn) is a float product with an error
   below ``2**-26`` turns.
3. Integer positions beyond ``2**31`` (int64, uint32, uint64) are split
   ``p = h * 2**32 + l`` with ``l`` the signed low 32 bits (``|l| <= 2**31``,
   ``|h| <= 2**31``) and both parts go through step 2 (with the constants of
   ``2**32 * f`` for ``h``): every int64 is exact. uint64 values from ``2**63`` on
   arrive as ``p - 2**64`` (int64) plus the constant ``frac(2**64 * f)``.
   A fractional position ``x`` is ``n + u`` with ``n = floor(x)``: ``n`` goes through
   steps 2-3 and ``u * f`` is added as a float (exact enough while
   ``f <= FRACTION_MAX_TURNS``).
4. The turns are reduced to ``[-1/2, 1/2]`` and multiplied by ``2pi``.

The result: the angle in ``[-pi, pi]`` within about 3e-7 rad in float32 for every
int64/uint64 position and every float position below ``2**63`` (``2**31`` where the
backend has no int64: JAX without x64), and within 1e-15 rad in float64 — without
float64 on the device, in a handful of elementwise operations that compilers fuse.
The caller takes sin/cos of it.

Outside that range the kernel never returns a plausible wrong number: float positions
``|x| >= 2**63`` (or NaN, inf), and fractional positions for a frequency faster than
:data:`FRACTION_MAX_TURNS`, give NaN. Positions known on the host never reach that
NaN: :func:`exact_turns` reduces any finite position exactly with Python integers
(see :mod:`pe_core._kernel.host_tables`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from pe_core._kernel.compiled import compiled
from pe_core_backends import HOST, Namespace

#: Integer positions are split at 2**32 when they may not fit in int32.
_SPLIT_BITS = 32

#: Largest ``|f|`` (turns per position) for which a fractional part ``u`` of a position
#: is folded in as a float product ``u * f`` (per working precision): its rounding
#: error is then below about ``2**-25`` turns in float32 and ``2**-44`` in float64. A
#: frequency of more than half a turn per position is beyond the Nyquist limit of
#: integer positions anyway; fractional positions at such frequencies give NaN on a
#: device and are reduced exactly (:func:`exact_turns`) on the host.
FRACTION_MAX_TURNS = {"float32": 0.5, "float64": 512.0}

#: Bits of accuracy of every per-frequency constant (turns, absolute).
_GUARD_BITS = 96


@functools.lru_cache(maxsize=16)
def inv_2pi_fixed(bits: int) -> int:
    """``floor(2**bits / (2*pi))`` (off by at most one), from Python integers only.

    pi comes from Machin's formula ``pi = 16 atan(1/5) - 4 atan(1/239)`` in fixed
    point with guard bits; a test compares it with mpmath.

    >>> inv_2pi_fixed(240) == 281202444046886069876999276679073999814216481505385157414353423865411502
    True
    """
    prec = bits + 80
    one = 1 << prec

    def arctan_inv(x: int) -> int:  # atan(1/x) * 2**prec, error below a unit per term
        total = term = one // x
        x2, n, sign = x * x, 3, -1
        while term:
            term //= x2
            total += sign * (term // n)
            n, sign = n + 2, -sign
        return total

    pi_fixed = 16 * arctan_inv(5) - 4 * arctan_inv(239)  # pi * 2**prec, error < 2**12
    return (1 << (bits + prec)) // (2 * pi_fixed)


def _inv_2pi(magnitude_bits: int) -> Fraction:
    """``1/2pi`` to at least ``magnitude_bits + _GUARD_BITS`` bits after the point."""
    bits = _inv_2pi_bits(magnitude_bits)
    return Fraction(inv_2pi_fixed(bits), 1 << bits)


def _inv_2pi_bits(magnitude_bits: int) -> int:
    """The bits of :func:`_inv_2pi` for a product of ``magnitude_bits`` bits."""
    return max(256, -(-(magnitude_bits + _GUARD_BITS) // 256) * 256)


def _dyadic(v: int | float) -> tuple[int, int]:
    """``v = a / 2**s`` in lowest terms (``a`` odd or ``s == 0``): a float or int."""
    a, den = v.as_integer_ratio()
    return a, den.bit_length() - 1


def _dyadic_turns(x: int | float, omega: float) -> tuple[int, int]:
    """:func:`turns_fraction` as ``(c, S)``, the value ``c / 2**S``: the same numbers
    in Python integers (``x * omega`` in lowest terms sets the precision, as there)."""
    (a1, s1), (a2, s2) = _dyadic(x), _dyadic(omega)
    a, s = a1 * a2, s1 + s2
    if a == 0:
        return 0, 256
    k = min(s, (a & -a).bit_length() - 1)  # lowest terms
    a, s = a >> k, s - k
    n_bits = _inv_2pi_bits(max(0, abs(a).bit_length() - s))
    # m - round(m / 2**shift) * 2**shift, half to even (as ``round`` of a Fraction)
    m, shift = a * inv_2pi_fixed(n_bits), s + n_bits
    return m - (_round_half_even(m, shift) << shift), shift


def _round_half_even(m: int, shift: int) -> int:
    """``round(m / 2**shift)``, half to even."""
    if shift <= 0:
        return m << -shift
    q = m >> shift
    rest, half = m - (q << shift), 1 << (shift - 1)
    return q + 1 if rest > half or (rest == half and q & 1) else q


def _ratio(c: int, shift: int) -> float:
    return c / (1 << shift)  # int / int: correctly rounded, as Fraction.__float__


def _split_dyadic(c: int, shift: int, bits: int) -> tuple[int, float]:
    """:func:`_split_word` of ``c / 2**shift``."""
    word = _round_half_even(c, shift - bits)
    rest = _ratio(c - (word << (shift - bits)), shift)
    return (word - 2**bits if word >= 2 ** (bits - 1) else word), rest


def _bit_size(q: Fraction) -> int:
    """An upper bound of ``log2 |q|`` (0 for ``|q| < 1``)."""
    return max(0, abs(q.numerator).bit_length() - q.denominator.bit_length() + 1)


def turns_fraction(x: int | float | Fraction, omega: float) -> Fraction:
    """``x * omega / 2pi`` reduced to ``[-1/2, 1/2]`` turns, within ``2**-96``.

    ``x`` and ``omega`` are taken as the exact numbers they are (any finite size).

    >>> t = float(turns_fraction(3, 1.0))
    >>> abs(t - math.remainder(3, 2 * math.pi) / (2 * math.pi)) < 1e-16
    True
    >>> -0.5 <= float(turns_fraction(2**1000, 1e300)) <= 0.5  # any size, exactly
    True
    """
    product = Fraction(x) * Fraction(omega)
    return _centered(product * _inv_2pi(_bit_size(product)))


@dataclass(frozen=True)
class TurnConstants:
    """Per-frequency constants of the exact reduction (plain Python numbers).

    ``words[k]`` is the signed 32-bit integer ``F`` and ``rests[k]`` the float ``g``
    with ``frac(scale_k * f) = F / 2**32 + g`` for ``scale_0 = 1`` and
    ``scale_1 = 2**32``; ``f`` is the frequency in turns (a float); ``wrap64`` is
    ``frac(2**64 * f)`` (for uint64 positions from ``2**63`` on); ``offset_turns`` is
    ``frac(offset * f)``. Plain tuples, so tracing compilers see constants.
    """

    words: tuple[tuple[int, ...], tuple[int, ...]]
    rests: tuple[tuple[float, ...], tuple[float, ...]]
    f: tuple[float, ...]
    wrap64: tuple[float, ...]
    offset_turns: tuple[float, ...] | None


def _centered(x: Fraction) -> Fraction:
    return x - round(x)


def turn_constant_fields(omegas: tuple[Any, ...], offset: int | float = 0) -> tuple:
    """The fields of :class:`TurnConstants` for ``omegas``, uncached: each frequency
    may be a float or an exact :class:`~fractions.Fraction` (any precision), and the
    reduction is exact for the number it is.

    >>> from fractions import Fraction
    >>> fields = turn_constant_fields((Fraction(1, 3),))
    >>> abs(fields[2][0] - 1 / (6 * math.pi)) < 1e-17
    True
    """
    return _cached_turn_constant_fields.__wrapped__(omegas, offset)


def _turn_constant_fields(*args: Any) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_turn_constant_fields(*args)


@functools.lru_cache(maxsize=256)
def _cached_turn_constant_fields(omegas: tuple[float, ...], offset: int | float) -> tuple:
    dyadic = all(type(v) in (int, float) for v in (*omegas, offset))
    rows: list[tuple[Any, ...]] = []  # per omega: f, wrap64, offset turns, (word, rest) x 2
    places = [1 << (_SPLIT_BITS * k) for k in (0, 1)]  # of the position's two words
    for omega in omegas:
        if dyadic:  # the same numbers in Python integers: about 30x quicker
            a, s = _dyadic(omega)
            n_bits = _inv_2pi_bits(max(0, abs(a).bit_length() - s))
            f_omega = a * inv_2pi_fixed(n_bits) / (1 << (s + n_bits))
            turns = [_ratio(*_dyadic_turns(v, omega)) for v in (1 << 64, offset)]
            splits = [_split_dyadic(*_dyadic_turns(w, omega), 32) for w in places]
        else:
            f_omega = float(Fraction(omega) * _inv_2pi(_bit_size(Fraction(omega))))
            turns = [float(turns_fraction(v, omega)) for v in (1 << 64, offset)]
            splits = [_split_word(turns_fraction(w, omega), 32) for w in places]
        rows.append((f_omega, *turns, *splits[0], *splits[1]))
    f, wrap, shift, w0, r0, w1, r1 = (
        (tuple(c) for c in zip(*rows, strict=True)) if rows else [()] * 7
    )
    return (w0, w1), (r0, r1), f, wrap, shift if offset else None


@functools.lru_cache(maxsize=64)
def word64_constants(omegas: tuple[float, ...]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The constants of the one-word reduction of int64 positions (plain Python numbers).

    ``frac(f) = F / 2**64 + g`` for each frequency in turns ``f = w / 2pi``, with ``F``
    a signed 64-bit integer and ``|g| <= 2**-65`` (``f`` worked out to ``2**-160``).
    For an int64 position ``p``, ``p * F`` in int64 arithmetic wraps modulo ``2**64``:
    that is ``frac(p * F / 2**64)``, exactly; the rest ``p * g`` is at most 1/4 turn, a
    float product with an error below ``2**-26`` turns in float32 (``2**-54`` in
    float64). So ``turns = wrap(p * F) / 2**64 + p * g`` for every int64 ``p``, in
    three elementwise operations on a backend with int64 (the turns then lie within
    ``[-3/4, 3/4]``; sin and cos take them as they are).

    >>> from fractions import Fraction
    >>> words, rests = word64_constants((1.0,))
    >>> p = 10**15
    >>> wrapped = (p * words[0] + 2**63) % 2**64 - 2**63  # int64 wrap-around
    >>> t = wrapped / 2**64 + p * rests[0]
    >>> bool(abs(t - float(turns_fraction(p, 1.0))) < 1e-12)
    True
    """
    splits = [
        _split_word(_centered(Fraction(w) * _inv_2pi(_bit_size(Fraction(w)) + 64)), 64)
        for w in omegas
    ]
    return tuple(word for word, _ in splits), tuple(rest for _, rest in splits)


def _split_word(v: Fraction, bits: int) -> tuple[int, float]:
    """``v`` (turns in ``[-1/2, 1/2]``) as a signed ``bits``-bit word ``F`` and the float
    rest ``g``: ``frac(v) = F / 2**bits + g`` (the signed range keeps ``frac``)."""
    word = round(v * 2**bits)
    rest = float(v - Fraction(word, 2**bits))
    return (word - 2**bits if word >= 2 ** (bits - 1) else word), rest


def reduced_turns(
    xp: Namespace,
    positions: Any,
    omegas: tuple[float, ...],
    *,
    offset: int | float = 0,
    working: str = "float32",
    max_abs_position: float | None = None,
    poison: bool = True,
    constants: tuple | None = None,
    quarters: tuple[int, ...] | None = None,
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
    offset : int or float
        Static offset added to every position, folded in exactly (a Python int of
        any size stays exact).
    working : {"float32", "float64"}
        Precision of the float arithmetic and of the result.
    max_abs_position : float, optional
        A known bound on ``|positions|``; below ``2**31`` wide integer positions take
        the single-word path. ``None`` (values unknown, e.g. traced) assumes the worst.
    poison : bool
        Give NaN turns for float positions outside the exact range (NaN, inf,
        ``|x| >= 2**63``, or ``>= 2**31`` where the backend has no int64) instead of
        a wrong number. ``False`` promises there are none (skips a few operations on
        the positions). Fractional positions at frequencies above
        :data:`FRACTION_MAX_TURNS` give NaN either way.
    constants : tuple, optional
        The fields of :class:`TurnConstants` already worked out (by
        :func:`turn_constant_fields`, perhaps of exact rational frequencies); then
        ``omegas`` and ``offset`` are not read.
    quarters : tuple of int, optional
        Quarter turns (0 to 3) added to each column exactly (in the integer word):
        ``sin`` of a column with one quarter turn is the ``cos`` of its angle.

    Returns
    -------
    array
        Shape ``S + (len(omegas),)`` in the working dtype.

    Examples
    --------
    >>> from pe_core_backends import get_namespace
    >>> t = reduced_turns(get_namespace("numpy"), np.array([10**7]), (1.0,))
    >>> bool(abs(t[0, 0] - math.remainder(10**7, 2 * math.pi) / (2 * math.pi)) < 1e-7)
    True
    """
    if constants is None:
        constants = xp.host_constant(_turn_constant_fields, omegas, offset)
    consts = TurnConstants(*constants)
    wdtype = xp.dtype(working)
    dtype_name = xp.dtype_of(positions)
    fits_int32 = max_abs_position is not None and max_abs_position < 2**31

    # bad: where poison applies (a boolean array of the positions' shape); wrapped: uint64
    # positions from 2**63 on (read as p - 2**64)
    bad = fraction = wrapped = None
    wide = False
    if xp.kind(dtype_name) == "int":
        integer = positions
        if dtype_name == "uint64":
            integer = xp.astype(positions, xp.dtype("int64"))  # two's complement wrap
            wrapped = integer < 0
            wide = True
        elif dtype_name in ("int64", "uint32") and not fits_int32:
            wide = True
            if dtype_name == "uint32" and xp.supports("int64"):
                integer = xp.astype(positions, xp.dtype("int64"))
    else:
        integer = xp.floor(positions)
        fraction = xp.astype(positions - integer, wdtype)
        if not fits_int32:
            # Integers beyond int32 are split into two words where the backend has int64.
            wide = xp.supports("int64") and dtype_name != "float16"
            limit = 2.0**63 if wide else 2.0**31
            if poison:
                bad = ~(xp.abs(positions) < limit)  # NaN compares False: bad
                integer = xp.where(bad, xp.zeros_like(integer), integer)
        integer = xp.astype(integer, xp.dtype("int64" if wide else "int32"))

    int32 = xp.dtype("int32")
    words: tuple[tuple[Any, Any, int], ...]
    if wide:
        if xp.dtype_of(integer) == "uint32":  # no int64 here (JAX without x64)
            low = xp.astype(integer, int32)  # wraps: the signed low 32 bits
            high = xp.astype(xp.bitwise_right_shift(integer, 31), int32)  # low wrapped
            words = ((low, xp.astype(low, wdtype), 0), (high, xp.astype(high, wdtype), 1))
        else:
            # int32 words (the signed low 32 bits and floor(p / 2**32)): every operation
            # on them vectorises, where int64 ones may not
            low, upper = xp.int64_words(integer)
            carry = xp.astype(low < 0, int32)  # 1 where the low word wrapped negative
            # high = upper + carry, |high| <= 2**31: int32 wraps at 2**31 (the same
            # product modulo 2**32), the float keeps its value
            high = (upper + carry, xp.astype(upper, wdtype) + xp.astype(carry, wdtype), 1)
            words = ((low, xp.astype(low, wdtype), 0), high)
    else:
        words = ((xp.astype(integer, int32), xp.astype(integer, wdtype), 0),)
    turns = _word_turns(xp, words, consts, wdtype, bad=bad, quarters=quarters)
    if wrapped is not None:
        shift = xp.astype(xp.expand_dims(wrapped, -1), wdtype)
        turns = turns + shift * _const(xp, consts.wrap64, wdtype, positions)
    if fraction is not None:
        turns = _add_fraction(xp, turns, fraction, consts.f, working, wdtype, positions)
    if consts.offset_turns is not None:
        turns = turns + _const(xp, consts.offset_turns, wdtype, positions)
    return turns - xp.round(turns)


def _add_fraction(
    xp: Namespace,
    turns: Any,
    fraction: Any,
    f: tuple[float, ...],
    working: str,
    wdtype: Any,
    like: Any,
) -> Any:
    """``turns + fraction * f``; NaN where a fraction meets a frequency it cannot take."""
    fast = tuple(abs(v) > FRACTION_MAX_TURNS[working] for v in f)
    kept = tuple(0.0 if is_fast else v for v, is_fast in zip(f, fast, strict=True))
    turns = turns + xp.expand_dims(fraction, -1) * _const(xp, kept, wdtype, like)
    if not any(fast):
        return turns
    columns = xp.asarray(list(fast), like=like)
    inexact = xp.expand_dims(fraction != 0, -1) & columns
    return xp.where(inexact, turns * float("nan"), turns)


def reduced_angles(xp: Namespace, positions: Any, omegas: tuple[float, ...], **kwargs: Any) -> Any:
    """:func:`reduced_turns` times ``2pi``: the angles reduced to ``[-pi, pi]``.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> a = reduced_angles(get_namespace("numpy"), np.array([10**7]), (1.0,))
    >>> bool(abs(a[0, 0] - math.remainder(10**7, 2 * math.pi)) < 1e-6)
    True
    """
    return reduced_turns(xp, positions, omegas, **kwargs) * (2.0 * math.pi)


def exact_turns(values: Any, omegas: tuple[float, ...], *, offset: int | float = 0) -> np.ndarray:
    """Turns ``(values + offset) * omegas / 2pi`` in ``[-1/2, 1/2]``, exactly, on the host.

    Python integers throughout: any finite position of any dtype (int64, uint64, a
    float32 up to 3.4e38, a float64 up to 1.8e308), any finite offset and frequency.
    Within ``2**-64`` turns before the float64 rounding of the result. A Python loop
    over the distinct positions and the frequencies: the host's route for the few
    positions the array kernel (:func:`reduced_turns`) gives NaN for.

    Parameters
    ----------
    values : numpy.ndarray
        Finite integer or float positions, any shape ``S``.
    omegas : tuple of float
        Angular frequencies (finite, any size).
    offset : int or float
        Added to every position exactly.

    Returns
    -------
    numpy.ndarray
        float64, shape ``S + (len(omegas),)``.

    Examples
    --------
    >>> t = exact_turns(np.array([1e300]), (1.0,))  # sin(1e300) = sin(2pi t)
    >>> bool(abs(t[0, 0]) <= 0.5)
    True
    >>> bool(abs(exact_turns(np.array([7]), (1.0,))[0, 0] - math.remainder(7, 2 * math.pi)
    ...          / (2 * math.pi)) < 1e-16)
    True
    """
    values = np.asarray(values)
    out = np.empty((values.size, len(omegas)), np.float64)
    if values.size and omegas:
        unique, inverse = np.unique(values.reshape(-1), return_inverse=True)
        shifted = [Fraction(v) + Fraction(offset) for v in unique.tolist()]
        weights = [Fraction(w) for w in omegas]
        # common power-of-two denominators: x + offset = A / 2**s, w = B / 2**t
        s = max(q.denominator.bit_length() - 1 for q in shifted)
        t = max(q.denominator.bit_length() - 1 for q in weights)
        a_list = [q.numerator << (s - q.denominator.bit_length() + 1) for q in shifted]
        b_list = [q.numerator << (t - q.denominator.bit_length() + 1) for q in weights]
        size = max(abs(a).bit_length() for a in a_list) + max(b.bit_length() for b in b_list)
        bits = max(256, -(-(max(0, size - s - t) + _GUARD_BITS) // 64) * 64)
        inverse_2pi = inv_2pi_fixed(bits)  # turn = A * B * inverse_2pi / 2**k
        k = s + t + bits
        mask, half = (1 << k) - 1, 1 << (k - 1)
        table = np.empty((len(a_list), len(b_list)), np.float64)
        for j, b in enumerate(b_list):
            factor = b * inverse_2pi
            column = table[:, j]
            for i, a in enumerate(a_list):
                r = (a * factor) & mask  # the fractional part, in units of 2**-k
                if r >= half:
                    r -= 1 << k
                drop = max(0, r.bit_length() - 62)  # keep 62 significant bits
                column[i] = math.ldexp(r >> drop, drop - k)
        out = table[inverse.reshape(-1)]
    return out.reshape(*values.shape, len(omegas))


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

    Positions outside the exact range give NaN (``poison`` of :func:`reduced_turns`);
    callers with host positions use :func:`exact_turns` for those.
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
        return compiled(xp.name, _cos_sin, omegas, working, scale, None)(positions)
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
    xp: Namespace,
    words: tuple[tuple[Any, Any, int], ...],
    consts: TurnConstants,
    wdtype: Any,
    bad: Any = None,
    quarters: tuple[int, ...] | None = None,
) -> Any:
    """``sum(p * frac(scale_k * f))`` (plus ``quarters / 4``) modulo 1 over ``words`` ``(p32, pf, k)``: an
    integer ``|p| <= 2**31`` as int32 (wrapped modulo ``2**32``) and as a float, in
    ``(-1.01, 1.01)``.

    The 32-bit words ``p * F_k`` are summed in int32 arithmetic, which wraps modulo
    ``2**32`` like each product: one exact integer for every word, converted once; the
    small rests ``p * g_k`` are float products. Where ``bad`` (positions' shape) is
    true the result is NaN.
    """
    int32 = xp.dtype("int32")
    wrapped = None
    fine = None
    for p32, pf, k in words:
        product = xp.expand_dims(p32, -1) * xp.asarray(consts.words[k], dtype=int32, like=p32)
        wrapped = product if wrapped is None else wrapped + product
        scale = xp.expand_dims(pf, -1)
        if bad is not None and k == words[-1][2]:  # NaN enters through a multiplier
            scale = xp.where(xp.expand_dims(bad, -1), scale * float("nan"), scale)
        rest = scale * _const(xp, consts.rests[k], wdtype, p32)
        fine = rest if fine is None else fine + rest
    assert wrapped is not None and fine is not None  # at least one word
    if quarters is not None:  # a quarter turn is 2**30 in the word: exact, wrapping
        shift = [(q % 4) * 2**30 - (2**32 if q % 4 > 1 else 0) for q in quarters]
        wrapped = wrapped + xp.asarray(shift, dtype=int32, like=wrapped)
    # int32 -> float keeps 24 bits: split the wrapped word so both halves convert exactly.
    top = xp.bitwise_right_shift(wrapped, 16)  # floor(wrapped / 2**16)
    bottom = xp.bitwise_and(wrapped, 0xFFFF)
    coarse = xp.astype(top, wdtype) * 2.0**-16
    return coarse + (xp.astype(bottom, wdtype) * 2.0**-32 + fine)


def _const(xp: Namespace, values: tuple[float, ...], wdtype: Any, like: Any) -> Any:
    return xp.asarray(values, dtype=wdtype, like=like)


# -- exact unit-complex tables on the host (the angle-addition routes) -----------------


def _unit_complex(angles: np.ndarray, *, conj: bool, form: str, working: str) -> np.ndarray:
    """``sin + i cos`` (``cos - i sin`` when ``conj``) or ``cos + i sin``, rounded once."""
    table = np.empty(angles.shape, np.complex128)
    sin, cos = np.sin(angles), np.cos(angles)
    if form == "cos_sin":
        table.real, table.imag = cos, sin
    elif conj:
        table.real, table.imag = cos, -sin
    else:
        table.real, table.imag = sin, cos
    return table.astype(np.complex64 if working == "float32" else np.complex128)


def block_shape(n_rows: int) -> tuple[int, int]:
    """``(A, B)``: ``B`` a power of two near ``sqrt(n_rows)``, ``A = ceil(n_rows / B)``.

    >>> block_shape(8192)
    (64, 128)
    """
    block = 1 << max(0, (math.isqrt(max(n_rows, 1)) - 1).bit_length())
    return -(-n_rows // block), block


@functools.lru_cache(maxsize=64)
def step_table(block: int, omegas: tuple[float, ...], working: str, form: str) -> np.ndarray:
    """The ``(B, n)`` table of ``e^{ibw}`` (``cos - i sin`` for form ``"sin_cos"``)."""
    angles = reduced_angles(HOST, np.arange(block, dtype=np.int64), omegas, working="float64")
    return _unit_complex(angles, conj=True, form=form, working=working)


@functools.lru_cache(maxsize=64)
def start_table(
    lo: int,
    blocks: int,
    block: int,
    omegas: tuple[float, ...],
    offset: int | float,
    working: str,
    form: str,
) -> np.ndarray:
    """The ``(A, n)`` table at positions ``lo + a*B + offset`` (``sin + i cos`` or ``e^{i.}``)."""
    starts = lo + block * np.arange(blocks, dtype=np.int64)
    angles = reduced_angles(HOST, starts, omegas, offset=offset, working="float64")
    return _unit_complex(angles, conj=False, form=form, working=working)
