"""A spec's numbers: the frequency schedule and how ``d`` features split.

``(d, spec)`` in, plain Python numbers out: the validated feature count
(:func:`check_d`), the angular frequencies of its sin/cos pairs (:func:`omegas`) and,
for an N-D spec, the pairs every axis gets (:func:`axis_blocks`, :func:`axis_pairs`). The
1-D and N-D engines and the public faces all read these; nothing here computes an
encoding.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

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
    n_pairs = computed_width(d, spec) // 2
    if spec.frequencies is not None and len(spec.frequencies) != n_pairs:
        rule = "ceil(d / 2)" if n_pairs * 2 > d else "d // 2"
        raise ValueError(
            f"Spec.frequencies has {len(spec.frequencies)} entries but d={d} needs "
            f"{rule} = {n_pairs} (one per sin/cos pair)."
        )
    return d


def computed_width(d: int, spec: Spec) -> int:
    """The features a 1-D ``(d, spec)`` computes before any cut: ``d + 1`` for an odd
    ``d`` with ``odd_d="truncate"`` (``ceil(d / 2)`` pairs, the first ``d`` kept), else
    ``d``.

    >>> computed_width(7, Spec(odd_d="truncate")), computed_width(7, Spec(odd_d="zero_pad"))
    (8, 7)
    """
    return d + 1 if d % 2 and spec.odd_d == "truncate" and spec.axes == 1 else d


def omegas(d: int, spec: Spec, xp: Namespace | None = None) -> tuple[float, ...]:
    """The frequencies of a validated ``(d, spec)`` as a tuple of Python floats.

    With a backend namespace ``xp`` the schedule is evaluated through
    :meth:`~pe_core_backends.Namespace.host_constant`, so compiled callers see a constant.
    """
    width = computed_width(d, spec)
    args = (width, spec.base, spec.min_timescale, spec.denominator, spec.frequencies)
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


class Block(NamedTuple):
    """One block of an N-D encoding: the coordinate it encodes, its sin/cos pairs, and
    the 1-D spec that encodes it (``axes=1``, the spec's schedule, layout and order)."""

    axis: int
    pairs: int
    spec: Spec


#: (d, spec) -> axis_blocks's result; a plain dict, so that compilers tracing a call
#: (torch.compile) read it like any global instead of stepping into a cache wrapper.
_SPLITS: dict[tuple[int, Spec], tuple[tuple[Block, ...], int]] = {}


def axis_blocks(d: int, spec: Spec) -> tuple[tuple[Block, ...], int]:
    """The blocks of a validated N-D ``(d, spec)`` in feature order, and the zero
    columns appended (negative: the features truncated).

    >>> blocks, extra = axis_blocks(32, Spec(axes=3, axis_shares=(2, 3, 3), axis_order=(0, 2, 1)))
    >>> [(b.axis, b.pairs) for b in blocks], extra
    ([(0, 4), (2, 6), (1, 6)], 0)
    """
    found = _SPLITS.get((d, spec))
    if found is None:
        if len(_SPLITS) >= 256:
            _SPLITS.clear()
        found = _SPLITS[(d, spec)] = _new_split(d, spec)
    return found


def _new_split(d: int, spec: Spec) -> tuple[tuple[Block, ...], int]:
    k = spec.axes
    shares = spec.axis_shares or (1,) * k
    unit = 2 * sum(shares)
    n, rest = divmod(d, unit)
    if rest and spec.odd_d == "raise":
        if spec.axis_shares is None:
            raise ValueError(
                f"d must be a multiple of 2 * axes = {2 * k} for a Spec with axes={k} and "
                f"odd_d='raise' (every axis gets the same number of sin/cos pairs). "
                f"Received: d={d}. Use a multiple of {2 * k}, or Spec(odd_d='zero_pad') to "
                "append zero columns, or Spec(odd_d='truncate') to round up and keep the "
                "first d features."
            )
        raise ValueError(
            f"d must be a multiple of 2 * sum(axis_shares) = {unit} for a Spec with "
            f"axis_shares={shares} and odd_d='raise' (axis a gets n * axis_shares[a] "
            f"sin/cos pairs). Received: d={d}. Use a multiple of {unit}, or "
            "Spec(odd_d='zero_pad') or Spec(odd_d='truncate')."
        )
    if rest and spec.odd_d == "truncate":
        n += 1
    if n == 0:
        raise ValueError(
            f"d={d} is too small for axes={k}: every axis needs at least one sin/cos pair "
            f"(d >= {unit})."
        )
    if spec.frequencies is not None and len(spec.frequencies) != n * shares[0]:
        raise ValueError(
            f"Spec.frequencies has {len(spec.frequencies)} entries but d={d} with axes={k} "
            f"gives every axis {n * shares[0]} sin/cos pairs (one frequency per pair, "
            "shared by the axes)."
        )
    one_axis = one_axis_spec(spec)
    blocks = tuple(Block(a, n * shares[a], one_axis) for a in axis_of_block(spec))
    return blocks, d - unit * n


def one_axis_spec(spec: Spec) -> Spec:
    """The 1-D spec that encodes one axis of an N-D ``spec``: its schedule, layout,
    order and offset, one axis, ``odd_d="raise"``.

    >>> one_axis_spec(Spec(axes=3, axis_shares=(2, 3, 3), order="cos_sin")).order
    'cos_sin'
    """
    return spec.replace(
        axes=1, axis_order="forward", odd_d="raise", axis_shares=None, axis_layout="blocks"
    )


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
    axis_blocks(d, spec)
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
        return computed_width(check_d(d, spec), spec) // 2
    if spec.axis_shares is not None and len(set(spec.axis_shares)) > 1:
        raise ValueError(
            f"The axes of a Spec with axis_shares={spec.axis_shares} have different "
            "numbers of pairs; pe_core.nd.axis_widths(d, spec) gives each axis's width."
        )
    blocks, _ = axis_blocks(check_nd_d(d, spec), spec)
    return blocks[0].pairs


def axis_widths(d: int, spec: Spec | str | None = None) -> tuple[int, ...]:
    """The features of every coordinate axis of an N-D encoding, in coordinate order.

    Parameters
    ----------
    d : int
        Number of features of the N-D encoding.
    spec : Spec or str
        A spec or preset name with ``axes > 1``.

    Returns
    -------
    tuple of int
        ``2 * pairs`` of every coordinate axis (before any zero columns or truncation
        of ``odd_d``); each axis is the 1-D encoding of that many features.

    Examples
    --------
    >>> axis_widths(64, "cogvideox")  # (t, h, w): a quarter, then three eighths twice
    (16, 24, 24)
    >>> axis_widths(768, "mae_2d")
    (384, 384)
    """
    spec = resolve_spec(spec)
    if spec.axes == 1:
        raise ValueError(f"axis_widths needs a Spec with axes > 1. Received: axes={spec.axes}")
    blocks, _ = axis_blocks(check_nd_d(d, spec), spec)
    widths = {b.axis: 2 * b.pairs for b in blocks}
    return tuple(widths[a] for a in range(spec.axes))


def axis_of_block(spec: Spec) -> list[int]:
    """The coordinate each block of features encodes, in feature order."""
    axes = list(range(spec.axes))
    if isinstance(spec.axis_order, tuple):
        return list(spec.axis_order)
    return axes[::-1] if spec.axis_order == "reversed" else axes
