"""The values the checks compare against, restated from the definitions (not pe_core's code).

* :func:`reference_encoding`: the sinusoidal encoding in float64 NumPy;
* :func:`exact_encoding`: the same from mpmath, exact to float64 rounding at any
  position (needs mpmath, the ``test`` extra);
* :func:`reference_rope`: the rotary embedding (``apply_rope``) in float64 NumPy;
* :func:`uniqueness_window`: how far apart positions may be for their encodings to
  stay distinct (see :func:`~pe_core.testing.check_uniqueness`).

Nothing here needs Hypothesis.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core._schedule import check_d
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import ArrayLike, PresetLike, RopeLayout

__all__ = ["exact_encoding", "reference_encoding", "reference_rope", "uniqueness_window"]

#: The pair layouts of :func:`reference_rope` (those of :func:`pe_core.apply_rope`).
ROPE_LAYOUTS: tuple[str, ...] = ("half", "interleaved")


def _resolved(spec: Any, d: int) -> tuple[Spec, int]:
    """The spec ``spec`` names and ``d`` checked against it."""
    spec = resolve_spec(spec)
    return spec, check_d(d, spec)


def reference_frequencies(d: int, spec: Spec) -> np.ndarray:
    """The frequency schedule of ``spec`` restated from the :class:`~pe_core.Spec` docstring.

    >>> reference_frequencies(8, resolve_spec("vaswani")).tolist()  # 10000 ** (-2i / 8)
    [1.0, 0.1, 0.01, 0.001]
    """
    n_pairs = _width(d, spec) // 2
    if spec.frequencies is not None:
        return np.asarray(spec.frequencies, dtype=np.float64)
    i = np.arange(n_pairs, dtype=np.float64)
    exponents = 2.0 * i / (2 * n_pairs) if spec.denominator == "d" else i / max(n_pairs - 1, 1)
    return np.power(spec.min_timescale / spec.base, exponents) / spec.min_timescale


def _width(d: int, spec: Spec) -> int:
    """The features before the cut: ``odd_d="truncate"`` encodes ``ceil(d / 2)`` pairs."""
    return d + 1 if d % 2 and spec.odd_d == "truncate" else d


def _lay_out(sin: np.ndarray, cos: np.ndarray, d: int, spec: Spec) -> np.ndarray:
    """sin/cos of shape ``(..., pairs)`` as the spec's ``(..., d)`` table: its layout,
    its order (``"cos_sin"``: the cosine first in every pair or half), then a zero
    column (an odd ``d``) or the cut to ``d`` features (``odd_d="truncate"``)."""
    first, second = (cos, sin) if spec.order == "cos_sin" else (sin, cos)
    if spec.layout == "interleaved":
        pairs = np.stack([first, second], axis=-1)
        table = pairs.reshape(*pairs.shape[:-2], 2 * pairs.shape[-2])
    else:
        table = np.concatenate([first, second], axis=-1)
    if table.shape[-1] > d:
        return table[..., :d]
    if d % 2:
        table = np.concatenate([table, np.zeros(table.shape[:-1] + (1,))], axis=-1)
    return table


def reference_encoding(pos: ArrayLike, d: int, spec: Spec | PresetLike | None = None) -> np.ndarray:
    """The encoding restated in float64 NumPy: ``sin/cos((pos + offset) * w)``.

    The angle ``(pos + offset) * w`` is formed in float64 and handed to ``np.sin`` and
    ``np.cos``, so its error is about ``|angle| * 2**-53``: below 1e-8 for positions up
    to ``2**24``, far below any float32 tolerance, but it grows with the position
    (about 1e-4 at ``2**40``). :func:`pe_core.encode` does not form this product at
    all; it reduces the angle exactly (see :mod:`pe_core._kernel.angles`), so for large
    positions compare against :func:`exact_encoding` instead.

    Parameters
    ----------
    pos : array-like
        Positions of any shape (ints or floats).
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.

    Returns
    -------
    numpy.ndarray
        float64, shape ``shape(pos) + (d,)``, in the spec's layout (a zero last
        column for odd ``d`` with ``odd_d="zero_pad"``).

    Examples
    --------
    >>> pe = reference_encoding([0, 1], 4)
    >>> [round(float(v), 4) for v in pe[1]]  # sin 1, cos 1, sin 0.01, cos 0.01
    [0.8415, 0.5403, 0.01, 1.0]
    >>> reference_encoding([1], 5, "flax").shape
    (1, 5)
    """
    spec, d = _resolved(spec, d)
    w = reference_frequencies(d, spec)
    positions = np.asarray(pos, dtype=np.float64)
    angles = (positions[..., None] + spec.offset) * w
    return _lay_out(np.sin(angles), np.cos(angles), d, spec)


def exact_encoding(
    pos: ArrayLike,
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    frequencies: ArrayLike | None = None,
) -> np.ndarray:
    """The encoding from mpmath: ``sin/cos((pos + offset) * w)``, exact to float64 rounding.

    Each position and each frequency ``w`` is taken as the exact binary number it is,
    their product is formed exactly and mpmath reduces it: every value is the float64
    nearest to the true one, whatever the size of the position (``2**60``, ``1e300``).
    This is the reference for large positions, where :func:`reference_encoding`'s
    float64 angle loses digits. It is slow (one mpmath call per value): use it on
    grids of a few thousand values.

    Parameters
    ----------
    pos : array-like
        Positions of any shape (ints or floats).
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.
    frequencies : array-like, optional
        The ``d // 2`` float64 frequencies to take as exact. By default the spec's
        schedule restated in float64 (:func:`reference_encoding`'s); float64 schedules
        computed another way may differ from it in the last bit, which moves the angle
        at position ``p`` by about ``p * w * 2**-52``: below 1e-8 up to ``2**24``, but
        about 1e-3 at ``2**40``. For such positions pass the implementation's own
        frequencies (e.g. :func:`pe_core.frequencies`).

    Returns
    -------
    numpy.ndarray
        float64, shape ``shape(pos) + (d,)``, in the spec's layout.

    Raises
    ------
    ImportError
        Without mpmath (``pip install 'pe-core[test]'``).

    Examples
    --------
    >>> import numpy as np
    >>> big = exact_encoding([2**40], 4)
    >>> bool(np.all(np.abs(big) <= 1)), big.shape
    (True, (1, 4))
    >>> bool(np.allclose(exact_encoding([3, 7.5], 6), reference_encoding([3, 7.5], 6), atol=1e-15))
    True
    >>> half = Spec(offset=0.5)  # a fractional offset
    >>> bool(np.allclose(exact_encoding([3, 7.5], 6, half), reference_encoding([3.5, 8], 6)))
    True
    """
    try:
        import mpmath
    except ImportError as exc:
        raise ImportError(
            "exact_encoding needs mpmath: pip install 'pe-core[test]' (or pip install mpmath)"
        ) from exc
    spec, d = _resolved(spec, d)
    w = reference_frequencies(d, spec) if frequencies is None else np.asarray(frequencies)
    w = w.astype(np.float64).reshape(-1)
    pairs = _width(d, spec) // 2
    if w.size != pairs:
        raise ValueError(f"frequencies must hold {pairs} values (one per pair). Received: {w.size}")
    positions = np.asarray(pos)
    weights = [mpmath.mpf(float(v)) for v in w]  # exact: a float64 fits any precision >= 53
    values: list[tuple[Any, Any]] = []  # cos, sin of every (position, frequency)
    for position in positions.reshape(-1).tolist():
        value, offset, bits = _shifted_position(position, spec.offset)
        with mpmath.workprec(bits):
            shifted = mpmath.mpf(value) + offset
            values.extend(mpmath.cos_sin(shifted * wi) for wi in weights)  # reduced by mpmath
    table = np.array(values, dtype=np.float64).reshape(positions.shape + (w.size, 2))
    return _lay_out(table[..., 1], table[..., 0], d, spec)


def _shifted_position(value: Any, offset: float) -> tuple[int | float, float, int]:
    """``(value, offset)`` to add in mpmath, and the working precision that keeps the
    angle ``(value + offset) * w`` exact or, for a fractional position or offset, within
    ``2**-100`` of exact. Integer positions and offsets are added here, exactly."""
    integral = isinstance(value, int) or float(value).is_integer()
    if integral and isinstance(offset, int):
        shifted = int(value) + offset
        return shifted, 0, max(shifted.bit_length(), 1) + 53 + 24
    if integral:  # a fractional offset: the integer exactly, with room for the fraction
        return int(value), offset, max(abs(int(value)).bit_length(), 53) + 53 + 100
    return float(value), offset, 53 + 53 + 100


def reference_rope(
    x: ArrayLike,
    pos: ArrayLike,
    *,
    base: float = 10000.0,
    layout: RopeLayout = "half",
    rotary_dim: int | None = None,
) -> np.ndarray:
    """The rotary embedding restated in float64 NumPy (what :func:`pe_core.apply_rope` computes).

    Pair ``j`` of the first ``rotary_dim`` features turns by ``pos * w_j`` with
    ``w_j = base ** (-2j / rotary_dim)``: ``a' = a cos - b sin``, ``b' = b cos + a sin``,
    where the pair ``(a, b)`` is features ``(j, j + rotary_dim / 2)`` for
    ``layout="half"`` and ``(2j, 2j + 1)`` for ``"interleaved"``; the other features
    pass through. The angle is formed in float64 (error about ``|angle| * 2**-53``:
    fine up to about ``2**30``).

    Parameters
    ----------
    x : array-like
        Shape ``(..., seq, head_dim)``, ``head_dim`` even.
    pos : array-like
        Positions broadcasting against ``x.shape[:-1]``.
    base : float
        ``rope_theta``.
    layout : {"half", "interleaved"}
        How features pair up.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features; ``head_dim`` by default.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``x``.

    Examples
    --------
    >>> y = reference_rope([[1.0, 0.0]], [0.5])  # one pair, w = 1: turned by 0.5 rad
    >>> [round(float(v), 4) for v in y[0]]  # cos 0.5, sin 0.5
    [0.8776, 0.4794]
    """
    values = np.asarray(x, dtype=np.float64)
    head_dim = values.shape[-1]
    r = head_dim if rotary_dim is None else rotary_dim
    if layout not in ROPE_LAYOUTS:
        raise ValueError(f"Unknown layout {layout!r}. Expected one of: {', '.join(ROPE_LAYOUTS)}.")
    if r % 2 or not 2 <= r <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in [2, head_dim={head_dim}]. Received: {r!r}"
        )
    w = np.power(float(base), -np.arange(0, r, 2, dtype=np.float64) / r)
    angles = np.asarray(pos, dtype=np.float64)[..., None] * w
    cos, sin = np.cos(angles), np.sin(angles)
    if layout == "half":
        first, second = slice(0, r // 2), slice(r // 2, r)
    else:
        first, second = slice(0, r, 2), slice(1, r, 2)
    shape = np.broadcast_shapes(values.shape[:-1], angles.shape[:-1]) + (head_dim,)
    out = np.broadcast_to(values, shape).copy()
    a, b = out[..., first].copy(), out[..., second].copy()
    out[..., first] = a * cos - b * sin
    out[..., second] = b * cos + a * sin
    return out


def uniqueness_window(d: int, spec: Spec | PresetLike | None = None) -> tuple[int, float]:
    """``(N, bound)``: any ``N`` consecutive integer positions have encodings at least
    ``bound`` apart.

    ``N = floor(2*pi / w_min)`` and ``bound = 2*sin(w_min/2)``, with ``w_min`` the
    smallest nonzero frequency (see :func:`~pe_core.testing.check_uniqueness` for the
    derivation). ``N`` is 0 when no frequency is nonzero.

    >>> n, bound = uniqueness_window(8)
    >>> n, round(bound, 6)  # w_min = 1e-3: the wavelength is 2000*pi positions
    (6283, 0.001)
    """
    spec, d = _resolved(spec, d)
    w = reference_frequencies(d, spec)
    w = w[w > 0]
    if w.size == 0:
        return 0, 0.0
    w_min = float(np.min(w))
    if w_min >= 2 * math.pi:
        return 1, 0.0
    return math.floor(2 * math.pi / w_min), 2 * math.sin(w_min / 2)
