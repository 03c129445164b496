"""The backend-neutral description of a sinusoidal encoding.

A :class:`Spec` is plain, frozen, hashable data: it can key caches and be a static
argument under ``jax.jit``. It never holds arrays.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from pe_core.rope_layout import TABLE_LAYOUTS
from pe_core.typing import AxisLayout, AxisOrder, Denominator, OddDPolicy, SinCosOrder
from pe_core.typing import TableLayout as Layout
from pe_core.validation import choice, is_integer, positive_int

_DENOMINATORS = ("d", "half_minus_one")
_LAYOUTS = TABLE_LAYOUTS  # one definition: pe_core.rope_layout
_ODD_D = ("raise", "zero_pad", "truncate")
_AXIS_ORDERS = ("forward", "reversed")
_ORDERS = ("sin_cos", "cos_sin")
_AXIS_LAYOUTS = ("blocks", "split")


@dataclass(frozen=True)
class Spec:
    """How positions become sin/cos features.

    Parameters
    ----------
    base : float
        The maximum timescale (10000 in "Attention Is All You Need"). The slowest
        feature pair has a wavelength of about ``2*pi*base`` positions.
    min_timescale : float
        The minimum timescale (1.0 everywhere in practice): the fastest pair
        turns ``1/min_timescale`` radians per position.
    denominator : {"d", "half_minus_one"}
        Spacing of the geometric schedule. With ``n = d // 2`` pairs, pair ``i`` has
        angular frequency ``(1/min_timescale) * (min_timescale/base) ** e_i`` where
        ``e_i = 2*i/d`` for ``"d"`` (the paper, PyTorch tutorials, keras-hub) and
        ``e_i = i/max(n - 1, 1)`` for ``"half_minus_one"`` (tensor2tensor, fairseq,
        whisper, flax), which makes the slowest pair exactly ``1/base``.
    frequencies : tuple of float, optional
        Explicit angular frequencies (radians per position), one per sin/cos pair.
        Overrides the geometric schedule; ``d // 2`` must equal its length.
    layout : {"interleaved", "split"}
        ``"interleaved"`` gives ``[sin w0, cos w0, sin w1, cos w1, ...]``;
        ``"split"`` gives ``[sin w0, sin w1, ... | cos w0, cos w1, ...]``.
    offset : int or float
        Added to every position before encoding (fairseq with ``padding_idx=1``
        starts at 2). Integers (of any size; NumPy integers too) are kept as exact
        Python ints, so integer positions stay exact.
    odd_d : {"raise", "zero_pad", "truncate"}
        What an odd ``d`` does: raise; encode ``d - 1`` features and append a
        zero column (``"zero_pad"``: tensor2tensor, fairseq, flax); or encode the
        ``d + 1`` features of ``ceil(d / 2)`` pairs, with the schedule of ``d + 1``
        features, and keep the first ``d`` (``"truncate"``: positional-encodings'
        ``PositionalEncoding1D``). With ``axes > 1`` it decides what a ``d`` that is
        not a multiple of ``2 * axes`` does: raise; ``"zero_pad"`` gives every axis
        ``d // (2 * axes)`` pairs and appends the remaining zero columns
        (tensor2tensor ``add_timing_signal_nd``); ``"truncate"`` gives every axis
        ``ceil(d / (2 * axes))`` pairs and keeps the first ``d`` features
        (positional-encodings). See :mod:`pe_core.nd`.
    axes : int
        Number of coordinate axes (1: sequences; 2: images; 3: video or volumes).
        With ``axes > 1`` :func:`~pe_core.encode` reads the last axis of its
        positions as the coordinates and concatenates one encoding per axis, each
        with this spec's schedule and layout (see :mod:`pe_core.nd`).
    axis_order : {"forward", "reversed"} or tuple of int
        Order of the per-axis blocks when ``axes > 1``: coordinate 0 first, or the last
        coordinate first (MAE, whose first half of the features encodes the column),
        or a permutation of ``range(axes)`` naming the coordinate of every block in
        feature order (CogVideoX: ``(0, 2, 1)`` for the frame, then the column, then
        the row of ``(t, h, w)`` coordinates). Lists are stored as tuples.
    order : {"sin_cos", "cos_sin"}
        Which function comes first: ``"sin_cos"`` as in the paper, or ``"cos_sin"``
        (MusicGen; diffusers ``flip_sin_to_cos=True``). With ``layout="interleaved"``
        it orders each pair, ``[cos w0, sin w0, cos w1, sin w1, ...]``; with
        ``"split"`` the halves, ``[cos w0, cos w1, ... | sin w0, sin w1, ...]``. A zero
        column of ``odd_d="zero_pad"`` stays last.
    axis_shares : tuple of int, optional
        With ``axes > 1``: the relative width of every coordinate's block, one
        positive int per coordinate (in coordinate order, whatever ``axis_order``).
        With ``S = sum(axis_shares)`` and ``n = d // (2 * S)`` (``odd_d`` rounds as
        for equal widths), coordinate ``a`` gets ``n * axis_shares[a]`` pairs, with
        the schedule of a 1-D encoding of that width (CogVideoX ``(2, 3, 3)``: a
        quarter of the features for the frame, three eighths for the row and for the
        column). ``None`` (the default) gives every axis the same width. Not with
        explicit ``frequencies`` unless the shares are equal.
    axis_layout : {"blocks", "split"}
        With ``axes > 1``: one contiguous block per axis (``"blocks"``, the default), or
        the sines of every block, then their cosines (``"split"``, for ``layout="split"``
        only: timm ``build_sincos2d_pos_embed`` with ``interleave_sin_cos=False``,
        ``[sin h | sin w | cos h | cos w]``; ``order="cos_sin"`` puts the cosines first).

    Examples
    --------
    >>> spec = Spec(layout="split", denominator="half_minus_one")
    >>> spec.layout
    'split'
    >>> hash(spec) == hash(Spec(layout="split", denominator="half_minus_one"))
    True
    >>> Spec(base=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: Spec.base must be a finite number > 0 (a timescale). Received: -1.0

    The cosines first, and positional-encodings' odd ``d``:

    >>> import pe_core
    >>> [round(float(v), 3) for v in pe_core.encode([1], 4, spec=Spec(order="cos_sin"))[0]]
    [0.54, 0.841, 1.0, 0.01]
    >>> pe_core.encode([1], 5, spec=Spec(odd_d="truncate")).shape  # 3 pairs, cut to 5
    (1, 5)

    A width per axis (CogVideoX: a quarter for the frame, three eighths for the column
    and for the row):

    >>> video = Spec(layout="split", axes=3, axis_shares=(2, 3, 3), axis_order=(0, 2, 1))
    >>> pe_core.nd.axis_widths(64, video)
    (16, 24, 24)
    >>> Spec(axes=2, axis_order=(0, 0))
    Traceback (most recent call last):
    ...
    ValueError: Spec.axis_order must be a permutation of range(axes) = (0, 1) (every coordinate once). Received: (0, 0)
    """

    base: float = 10000.0
    min_timescale: float = 1.0
    denominator: Denominator = "d"
    frequencies: tuple[float, ...] | None = None
    layout: Layout = "interleaved"
    offset: float = 0
    odd_d: OddDPolicy = "raise"
    axes: int = 1
    axis_order: AxisOrder | tuple[int, ...] = "forward"
    order: SinCosOrder = "sin_cos"
    axis_shares: tuple[int, ...] | None = None
    axis_layout: AxisLayout = "blocks"
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # One step per group of fields, in this order (the first bad field is reported).
        self._set("base", _timescale("base", self.base))
        self._set("min_timescale", _timescale("min_timescale", self.min_timescale))
        if self.min_timescale > self.base:
            raise ValueError(
                "Spec.min_timescale must not exceed Spec.base. "
                f"Received: min_timescale={self.min_timescale!r}, base={self.base!r}"
            )
        choice(self.denominator, "Spec.denominator", _DENOMINATORS)
        choice(self.layout, "Spec.layout", _LAYOUTS)
        choice(self.odd_d, "Spec.odd_d", _ODD_D)
        self._set("axes", positive_int(self.axes, "Spec.axes", what="coordinate axes"))
        self._set("axis_order", _axis_order(self.axis_order, self.axes))
        self._set("offset", _offset(self.offset))
        if self.frequencies is not None:
            self._set("frequencies", _frequencies(self.frequencies))
        choice(self.order, "Spec.order", _ORDERS)
        if self.axis_shares is not None:
            self._set("axis_shares", _axis_shares(self.axis_shares, self.axes, self.frequencies))
        choice(self.axis_layout, "Spec.axis_layout", _AXIS_LAYOUTS)
        if self.axis_layout == "split" and (self.layout != "split" or self.axes == 1):
            raise ValueError(
                "Spec.axis_layout='split' puts the sines of every axis before their "
                "cosines: it needs layout='split' and axes > 1. Received: "
                f"layout={self.layout!r}, axes={self.axes}"
            )
        # The sin-first spec the 1-D engine computes a cos-first or truncated table from,
        # made here once (not while a compiler traces a call).
        plain = self.order == "sin_cos" and self.odd_d != "truncate"
        odd_d = "raise" if self.odd_d == "truncate" else self.odd_d
        self._set("_sin_first", self if plain else self.replace(order="sin_cos", odd_d=odd_d))

    def _set(self, attr: str, value: object) -> None:
        """Store a validated (converted) field of the frozen dataclass."""
        object.__setattr__(self, attr, value)

    def _sin_first_spec(self) -> Spec:
        """This spec with ``order="sin_cos"`` and without the cut of ``odd_d="truncate"``."""
        found: Spec = self.__dict__["_sin_first"]
        return found

    def replace(self, **changes: object) -> Spec:
        """A copy with some fields changed (validated again).

        >>> Spec().replace(offset=2).offset
        2
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        if "name" not in changes:
            values["name"] = None
        return Spec(**values)


def _timescale(attr: str, value: object) -> float:
    """``Spec.base`` or ``Spec.min_timescale`` as a finite float > 0 (a ValueError for
    any other value, non-numbers too); ``1 / min_timescale`` must be a finite float64."""
    real = _real(value)
    if real is None or not real > 0 or (attr == "min_timescale" and 1 / real > _MAX):
        inverse = ", whose inverse is a finite float64" if attr == "min_timescale" else ""
        raise ValueError(
            f"Spec.{attr} must be a finite number > 0 (a timescale{inverse}). Received: {value!r}"
        )
    return real


def _offset(offset: object) -> int | float:
    """An integer offset as an exact Python int (any size), else a finite float."""
    if is_integer(offset):
        return int(offset)  # type: ignore[call-overload]
    real = _real(offset)
    if real is None:
        raise ValueError(
            "Spec.offset must be a finite number: an integer (any size, kept exact) or a "
            "finite float. "
            f"Received: {offset!r}"
        )
    return real


def _frequencies(freqs: object) -> tuple[float, ...]:
    """Explicit frequencies as a non-empty tuple of finite floats >= 0 (a TypeError for
    anything but a flat sequence of real numbers)."""
    if type(freqs) is tuple and freqs and all(type(w) is float for w in freqs):
        if all(0.0 <= w <= _MAX for w in freqs):  # Python floats: the quick check
            return freqs
    if isinstance(freqs, (str, bytes)) or not isinstance(freqs, Iterable):
        raise TypeError(
            f"Spec.frequencies must be a sequence of floats or None. Received: {freqs!r}"
        )
    items = tuple(freqs)
    for i, w in enumerate(items):
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(
                "Spec.frequencies must be a flat sequence of numbers (radians per "
                f"position). Received: item {i} = {w!r}"
            )
    if not items:
        raise ValueError("Spec.frequencies must not be empty.")
    reals = [_real(w) for w in items]
    bad = [w for w, real in zip(items, reals, strict=True) if real is None or real < 0]
    if bad:
        raise ValueError(
            "Spec.frequencies must be finite and >= 0 (radians per position, within "
            f"float64). Received: {bad[0]!r}"
        )
    return tuple(float(w) for w in items)


def _axis_order(value: object, axes: int) -> str | tuple[int, ...]:
    """``"forward"``, ``"reversed"`` or a permutation of ``range(axes)`` (as a tuple)."""
    if isinstance(value, str):
        choice(value, "Spec.axis_order", _AXIS_ORDERS)
        return value
    if not isinstance(value, Iterable) or isinstance(value, bytes):
        raise TypeError(
            "Spec.axis_order must be 'forward', 'reversed' or a permutation of "
            f"range(axes) as a tuple of ints. Received: {value!r}"
        )
    items = tuple(value)
    if not all(is_integer(i) for i in items):
        raise TypeError(
            f"Spec.axis_order must be a tuple of ints (a permutation of range(axes)). "
            f"Received: {value!r}"
        )
    perm = tuple(int(i) for i in items)
    if sorted(perm) != list(range(axes)):
        raise ValueError(
            f"Spec.axis_order must be a permutation of range(axes) = {tuple(range(axes))} "
            f"(every coordinate once). Received: {value!r}"
        )
    return perm


def _axis_shares(
    value: object, axes: int, frequencies: tuple[float, ...] | None
) -> tuple[int, ...]:
    """One positive int per coordinate axis, as a tuple."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"Spec.axis_shares must be a tuple of ints (one per axis) or None. Received: {value!r}"
        )
    items = tuple(value)
    if not all(is_integer(i) for i in items):
        raise TypeError(f"Spec.axis_shares must be a tuple of ints. Received: {value!r}")
    shares = tuple(int(i) for i in items)
    if axes == 1 or len(shares) != axes or min(shares) < 1:
        raise ValueError(
            f"Spec.axis_shares must hold one int >= 1 per coordinate axis (axes={axes} > 1). "
            f"Received: {value!r}"
        )
    if frequencies is not None and len(set(shares)) > 1:
        raise ValueError(
            "Spec.axis_shares gives the axes different widths, so explicit frequencies "
            f"(one per pair, shared by the axes) cannot apply. Received: {value!r}"
        )
    return shares


_MAX = 1.7976931348623157e308  # the largest float64


def _real(value: object) -> float | None:
    """``value`` as a finite Python float, or None (bools, non-numbers, inf, NaN, and
    numbers beyond float64, e.g. ``10**400``). NumPy scalars are accepted."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        result = float(value)
    except (OverflowError, ValueError):
        return None
    return result if math.isfinite(result) else None
