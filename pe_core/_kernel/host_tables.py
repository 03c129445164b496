"""sin/cos tables of positions known on the host, by the cheapest exact route.

:func:`host_sin_cos` picks one of five routes for positions whose values are on the
host (NumPy, Python values, CPU tensors), all within about 2.5e-7 of the true value in
float32 and exact to float64 rounding in float64:

* **small calls** (a few thousand sin/cos pairs): the angle in turns in float64,
  reduced to ``[-1/2, 1/2]`` exactly, then vectorised float32 ``sin`` and ``cos``
  (float64 for float64 results and results rounded once to float16/bfloat16) written
  into their output slots. Integer positions below ``2**26`` take
  ``p * frac(w / 2pi)`` as two products, the first exact (error about 1e-16 turns);
  fractional ones one product ``p * w / 2pi`` below ``2**24 / 2pi`` turns (error below
  2e-9 rad; ``2**12`` turns and 6e-12 where rounded once). A few NumPy calls: what
  decode steps and small encodes need.
* **small integer positions that repeat** (integer timesteps, at least a few thousand
  pairs): rows of a cached table of the positions ``0 .. N - 1`` built by the small-call
  pass, so each row holds that pass's numbers (:func:`rows_sin_cos`).
* **runs of consecutive positions**: :mod:`pe_core._kernel.tables` (angle addition, one
  complex product per element).
* **any other integer positions**: :mod:`pe_core._kernel.gather` (angle addition by lookup),
  in NumPy whichever backend asks.
* **the rest** (large fractional inputs, float64 tables): the exact per-element
  kernel of :mod:`pe_core._kernel.angles`, evaluated in NumPy; the positions it cannot take
  (floats beyond ``2**63``, fractional positions at frequencies above half a turn
  per position) are reduced exactly with Python integers
  (:func:`~pe_core._kernel.angles.exact_turns`). Every finite position is exact.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from pe_core._kernel.angles import FRACTION_MAX_TURNS, exact_turns, reduced_turns, turns_fraction
from pe_core._kernel.features import assemble
from pe_core._kernel.gather import gather_plan, gathered_unit_complex
from pe_core._kernel.routes import (
    MAX_KERNEL_FLOAT,
    ROWS_MAX,
    ROWS_MAX_BYTES,
    ROWS_MIN_PAIRS,
    RUN_MIN_PAIRS,
    RUN_MIN_ROWS,
    SMALL_MAX_INTEGER,
    SMALL_MAX_PAIRS,
    SMALL_MAX_TURNS,
    SMALL_MAX_TURNS_ROUNDED,
    SMALL_RUN_ROWS,
    TABLE_MIN_PAIRS,
    TABLE_MIN_ROWS,
)
from pe_core._kernel.tables import contiguous_start, offset_table, table_sin_cos
from pe_core_backends import HOST, Namespace

_TWO_PI = 2.0 * math.pi


#: ``_turn_frequencies`` by the identity of the frequency tuple (the callers hold
#: one tuple per schedule, from caches): no hashing of a long tuple per call.
_TURNS_BY_ID: dict[int, tuple[tuple[float, ...], Any]] = {}


def _turn_frequencies(
    omegas: tuple[float, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_turn_frequencies_of`, looked up by the tuple's identity first."""
    hit = _TURNS_BY_ID.get(id(omegas))
    if hit is not None and hit[0] is omegas:
        return hit[1]
    result = _turn_frequencies_of(omegas)
    if len(_TURNS_BY_ID) >= 256:
        _TURNS_BY_ID.clear()
    _TURNS_BY_ID[id(omegas)] = (omegas, result)  # holds the tuple: its id stays unique
    return result


@functools.lru_cache(maxsize=256)
def _turn_frequencies_of(
    omegas: tuple[float, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``w / 2pi`` (turns per position) and ``frac(w / 2pi)``, alone and as ``hi + lo``.

    ``hi`` is a multiple of ``2**-27`` (so ``p * hi`` is exact for ``|p| < 2**26``) and
    ``|lo| <= 2**-28``; the fractions come from the exact reduction of
    :mod:`pe_core._kernel.angles`. All float64.
    """
    fractions = [turns_fraction(1, w) for w in omegas]
    high = [Fraction(round(v * 2**27), 2**27) for v in fractions]
    low = [float(v - h) for v, h in zip(fractions, high, strict=True)]
    f = np.array([w / _TWO_PI for w in omegas], np.float64)
    phi = np.array([float(v) for v in fractions], np.float64)
    return f, phi, np.array([float(h) for h in high]), np.array(low)


def _is_integer(value: int | float) -> bool:
    return isinstance(value, int) or float(value).is_integer()


def small_call_fits(
    n_rows: int,
    n_pairs: int,
    max_abs: float,
    offset: int | float,
    omegas: tuple[float, ...] = (1.0,),
    *,
    working: str = "float32",
    rounded_once: bool = False,
    integral: bool = False,
) -> bool:
    """Whether :func:`small_sin_cos` is exact enough and cheaper than the other routes.

    ``integral``: the positions are integers (an integer dtype) and ``offset`` is
    an integer; such positions take the split product (error about 1e-16 turns)
    below :data:`~pe_core._kernel.routes.SMALL_MAX_INTEGER`, at most
    :data:`~pe_core._kernel.routes.SMALL_MAX_PAIRS` pairs (beyond, the lookup route is
    cheaper). Other positions, of any count, take one float64 product, for
    float32 work below :data:`~pe_core._kernel.routes.SMALL_MAX_TURNS` turns and for results rounded once to
    float16/bfloat16 below :data:`~pe_core._kernel.routes.SMALL_MAX_TURNS_ROUNDED`.

    >>> small_call_fits(1, 64, 1000.0, 0, integral=True), small_call_fits(1, 64, 2.0**30, 0)
    (True, False)
    >>> small_call_fits(1, 1, 3.5, 0, (1e100,))  # 1e100 rad per position: exact route
    False
    """
    if abs(offset) >= SMALL_MAX_INTEGER:
        return False
    reach = max_abs + abs(offset)
    if integral:
        return reach < SMALL_MAX_INTEGER and n_rows * n_pairs <= SMALL_MAX_PAIRS
    if working == "float64" and not rounded_once:
        return False
    turns = reach * max(map(abs, omegas), default=0.0) / _TWO_PI
    return turns <= (SMALL_MAX_TURNS_ROUNDED if rounded_once else SMALL_MAX_TURNS)


def small_sin_cos(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float,
    layout: str,
    rounded_once: bool = False,
    order: str = "sin_cos",
) -> np.ndarray:
    """``(n_rows, 2 * len(omegas))`` sin/cos pairs in ``layout`` from one float64 pass
    (``order="cos_sin"``: each cos in its sin's slot and the other way round).

    Only for the inputs :func:`small_call_fits` accepts. The angle in turns is formed
    in float64 (integer positions: ``p * frac(w / 2pi)``, with ``rounded_once`` as two
    products, the first exact, error about 1e-16 turns, else one, error below
    ``2**-28`` turns; other positions: ``p * w / 2pi``, error below 1e-9 turns) and reduced to ``[-1/2, 1/2]`` exactly; float32 sin and cos of the
    reduced angle then give float32 results within 3e-7 (NumPy's vectorised float32
    sin and cos are 15x faster than float64's), written straight into their slots of
    the output. With ``rounded_once`` the float64 sin is returned instead (for
    float64 output, and float16/bfloat16 output rounded once from it).

    >>> t = small_sin_cos(np.array([1, 2]), (1.0,), offset=0, layout="interleaved")
    >>> t.dtype, bool(np.allclose(t, [[np.sin(1), np.cos(1)], [np.sin(2), np.cos(2)]]))
    (dtype('float32'), True)
    """
    n_pairs = len(omegas)
    angles = small_angles(values, omegas, offset=offset, rounded_once=rounded_once)
    out = np.empty((angles.shape[0], 2 * n_pairs), angles.dtype)
    if layout == "interleaved":
        sin_slots, cos_slots = out[:, 0::2], out[:, 1::2]
    else:
        sin_slots, cos_slots = out[:, :n_pairs], out[:, n_pairs:]
    if order == "cos_sin":
        sin_slots, cos_slots = cos_slots, sin_slots
    np.sin(angles, out=sin_slots)
    np.cos(angles, out=cos_slots)
    return out


def few_integer_sin_cos(values: np.ndarray, omegas: tuple[float, ...]) -> np.ndarray | None:
    """:func:`small_sin_cos` of a few integer positions, interleaved, in fewer steps.

    The same numbers as :func:`host_sin_cos` gives these positions (``offset=0``,
    ``layout="interleaved"``, float32: the same float64 operations in the same order as
    :func:`small_sin_cos`, or the angle-addition tables for a run of at least
    :data:`~pe_core._kernel.routes.RUN_MIN_ROWS` rows and :data:`~pe_core._kernel.routes.RUN_MIN_PAIRS` pairs), for the calls whose cost
    is their dispatch (a decode step, a short prompt): one pass over the values checks
    the domain, and a single position multiplies the frequencies as a Python int.
    ``None`` outside :func:`small_call_fits`' integral domain. (Handing the non-run
    case to :func:`small_sin_cos` costs about 10% at one position: its general
    branches.) A test keeps both routes equal value for value.

    >>> t = few_integer_sin_cos(np.array([3, 5]), (1.0, 0.5))
    >>> bool(np.array_equal(t, small_sin_cos(np.array([3, 5]), (1.0, 0.5), offset=0,
    ...                                      layout="interleaved")))
    True
    >>> few_integer_sin_cos(np.array([2**40]), (1.0,)) is None
    True
    """
    listed = values.ravel().tolist()
    n, n_pairs = len(listed), len(omegas)
    if not n or n * n_pairs > SMALL_MAX_PAIRS:
        return None
    first = listed[0]
    if (
        n >= RUN_MIN_ROWS
        and n * n_pairs >= RUN_MIN_PAIRS
        and listed[-1] - first == n - 1
        and listed == list(range(first, first + n))
        and abs(first) + n < 2**52
    ):  # a run: the angle-addition tables (exact at any start)
        return run_sin_cos(first, n, omegas)
    if max(listed) >= SMALL_MAX_INTEGER or min(listed) <= -SMALL_MAX_INTEGER:
        return None
    phi = _turn_frequencies(omegas)[1]
    if n == 1:
        turns = phi * float(listed[0])  # exact: |p| < 2**26
    else:
        turns = values.reshape(n, 1).astype(np.float64) * phi
    turns -= np.rint(turns)  # exact: the reduced turn in [-1/2, 1/2]
    turns *= _TWO_PI  # the product in float64, rounded once to float32
    angles = turns.astype(np.float32)
    out = np.empty((n, 2 * n_pairs), np.float32)
    np.sin(angles, out=out[:, 0::2])
    np.cos(angles, out=out[:, 1::2])
    return out


def run_sin_cos(start: int, n_rows: int, omegas: tuple[float, ...]) -> np.ndarray:
    """The interleaved float32 table of the positions ``start, ..., start + n_rows - 1``.

    A few rows (at most :data:`~pe_core._kernel.routes.SMALL_RUN_ROWS`) near the origin (``|start|`` and the last
    position below :data:`~pe_core._kernel.routes.SMALL_MAX_INTEGER`): the start row from one float64 pass
    (``sin + i cos`` of the exactly reduced angle), times the cached ``cos - i sin`` of
    the offsets ``0 .. n_rows - 1`` (:func:`~pe_core._kernel.tables.offset_table`): one complex
    multiply, whose real and imaginary parts are the interleaved sin and cos. Within
    about 2e-7 of the exact values. Other runs take :func:`~pe_core._kernel.tables.table_sin_cos`.

    >>> t = run_sin_cos(1000, 20, (1.0, 0.01))
    >>> t.shape, bool(np.allclose(t[:, 0], np.sin(np.arange(1000, 1020)), atol=3e-7))
    ((20, 4), True)
    """
    if n_rows > SMALL_RUN_ROWS or abs(start) + n_rows >= SMALL_MAX_INTEGER:
        table: np.ndarray = table_sin_cos(
            HOST, start, n_rows, omegas, offset=0, layout="interleaved", working="float32"
        )
        return table
    turns = _turn_frequencies(omegas)[1] * float(start)  # exact: |start| < 2**26
    turns -= np.rint(turns)
    turns *= _TWO_PI
    first = np.empty(len(omegas), np.complex64)
    first.real, first.imag = np.sin(turns), np.cos(turns)
    rows = np.multiply(first, offset_table(n_rows, omegas, "float32"))
    return rows.view(np.float32).reshape(n_rows, 2 * len(omegas))


def small_angles(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float = 0,
    rounded_once: bool = False,
) -> np.ndarray:
    """The reduced angles ``(n_rows, len(omegas))`` in ``[-pi, pi]`` of
    :func:`small_sin_cos`: float32, or float64 with ``rounded_once``.

    Only for the inputs :func:`small_call_fits` accepts.

    >>> a = small_angles(np.array([1, 7]), (1.0,))
    >>> a.dtype, bool(np.allclose(a[:, 0], [1.0, 7.0 - 2 * np.pi]))
    (dtype('float32'), True)
    """
    f, phi, high, low = _turn_frequencies(omegas)
    flat = values.reshape(-1, 1).astype(np.float64)
    if offset:
        flat += offset
    if values.dtype.kind not in "iu" or not _is_integer(offset):
        turns = flat * f
    elif rounded_once:  # float64 results: the split product, about 1e-16 turns
        turns = flat * high  # exact
        turns -= np.rint(turns)
        turns += flat * low
    else:  # float32 results: one product, below 2**-28 turns
        turns = flat * phi
    turns -= np.rint(turns)  # exact: the reduced turn in [-1/2, 1/2]
    turns *= _TWO_PI  # the product in float64 (then rounded once to float32)
    return turns if rounded_once else turns.astype(np.float32)


def host_sin_cos(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float,
    layout: str,
    working: str,
    max_abs: float,
    xp: Namespace | None = None,
    like: Any = None,
    rounded_once: bool = False,
) -> Any:
    """The ``(n_rows, 2 * len(omegas))`` sin/cos table of host ``values``.

    Parameters
    ----------
    values : numpy.ndarray
        Validated positions (any shape; flattened in C order).
    omegas : tuple of float
        Angular frequencies.
    offset : float
        Added to every position (exactly).
    layout : {"interleaved", "split"}
        ``[s0, c0, s1, c1, ...]`` or ``[s0, s1, ... | c0, c1, ...]``.
    working : {"float32", "float64"}
        Precision of the result.
    max_abs : float
        ``max |values|`` (already known to the caller).
    xp, like : optional
        A backend that builds large run tables itself (``Namespace.builds_tables``:
        torch), on the device of ``like``; NumPy by default. Every other route (small
        calls, the lookup of other integer positions, the per-element kernel) is
        always NumPy, so positions that are not a run give the same bits whichever
        backend asks.

    Returns
    -------
    array
        ``working`` dtype (float64 with ``rounded_once``); NumPy, or ``xp``'s array
        for large tables.

    Examples
    --------
    >>> t = host_sin_cos(np.arange(5, 9), (1.0,), offset=0, layout="split",
    ...                  working="float32", max_abs=8.0)
    >>> bool(np.allclose(t, np.stack([np.sin(np.arange(5, 9)), np.cos(np.arange(5, 9))], -1)))
    True
    """
    n_rows = values.size
    rounded_once = rounded_once or working == "float64"
    xp = HOST if xp is None else xp
    route, start = host_route(
        values,
        omegas,
        offset=offset,
        layout=layout,
        working=working,
        max_abs=max_abs,
        rounded_once=rounded_once,
        mutable=HOST.mutable,  # the lookup is NumPy's whichever backend asks
    )
    if route == "small":
        return small_sin_cos(
            values, omegas, offset=offset, layout=layout, rounded_once=rounded_once
        )
    if route == "rows":
        return rows_sin_cos(values, omegas, offset=offset, layout=layout)
    if route == "run_start_row":
        return run_sin_cos(start, n_rows, omegas)
    if route == "run_tables":
        return table_sin_cos(
            xp, start, n_rows, omegas, offset=offset, layout=layout, working=working, like=like
        )
    if route == "gather":  # on the host: its complex product rounds as NumPy's does
        gathered = gathered_unit_complex(
            HOST,
            values,
            omegas,
            offset=offset,
            working=working,
            form="sin_cos",
            layout=layout,
            out=np.empty((n_rows, 2 * len(omegas)), np.dtype(working)),
        )
        if gathered is not None:  # None where the lookup does not apply
            return gathered
    turns = host_turns(values.reshape(-1), omegas, offset=offset, working=working, max_abs=max_abs)
    angles = turns * (2.0 * math.pi)
    return assemble(HOST, np.sin(angles), np.cos(angles), layout)


def host_route(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float,
    layout: str,
    working: str,
    max_abs: float,
    rounded_once: bool,
    mutable: bool,
) -> tuple[str, int]:
    """The route :func:`host_sin_cos` takes for host ``values``, and a run's first
    position (0 for routes other than runs).

    The rows of :data:`~pe_core._kernel.routes.ROUTES` for host positions, tried in
    order: a run of consecutive positions (``"run_start_row"`` for a few interleaved
    float32 rows, else ``"run_tables"``), ``"rows"`` (:func:`rows_fit`), ``"small"``, ``"gather"`` (a mutable
    backend), ``"exact_kernel"``. ``rounded_once`` is true for float64 work.

    >>> host_route(np.arange(5), (1.0,), offset=0, layout="split", working="float32",
    ...            max_abs=4.0, rounded_once=False, mutable=True)
    ('small', 0)
    >>> host_route(np.arange(100, 116), (1.0,) * 128, offset=0, layout="interleaved",
    ...            working="float32", max_abs=115.0, rounded_once=False, mutable=True)
    ('run_start_row', 100)
    """
    n_rows, n_pairs = values.size, len(omegas)
    start = _run_start(values, n_pairs, rounded_once)
    if start is not None:
        few = offset == 0 and layout == "interleaved" and working == "float32"
        return ("run_start_row" if few and n_rows <= SMALL_RUN_ROWS else "run_tables"), start
    integral = values.dtype.kind in "iu" and _is_integer(offset)
    if integral and working == "float32" and not rounded_once:
        if rows_fit(values, n_pairs, max_abs, offset):
            return "rows", 0
    if small_call_fits(
        n_rows,
        n_pairs,
        max_abs,
        offset,
        omegas,
        working=working,
        rounded_once=rounded_once,
        integral=integral,
    ):
        return "small", 0
    if mutable and gather_plan(values, n_pairs) is not None:
        return "gather", 0
    return "exact_kernel", 0


def rows_fit(values: np.ndarray, n_pairs: int, max_abs: float, offset: int | float) -> bool:
    """Whether integer ``values`` take a cached table of the positions ``0 .. N - 1``
    (:func:`rows_sin_cos`): at least :data:`~pe_core._kernel.routes.ROWS_MIN_PAIRS`
    pairs, every ``position + offset`` in ``[0, ROWS_MAX)``, the table at most
    :data:`~pe_core._kernel.routes.ROWS_MAX_BYTES`.

    >>> rows_fit(np.array([0, 999] * 8), 160, 999.0, 0), rows_fit(np.array([5]), 8, 5.0, 0)
    (True, False)
    """
    if values.size * n_pairs < ROWS_MIN_PAIRS or max_abs + abs(offset) >= ROWS_MAX:
        return False
    if _row_count(int(max_abs) + int(offset)) * n_pairs * 8 > ROWS_MAX_BYTES:
        return False
    return int(values.min()) + int(offset) >= 0


def rows_sin_cos(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float,
    layout: str,
    order: str = "sin_cos",
) -> np.ndarray:
    """The float32 rows of integer ``values`` looked up in the cached table of the
    positions ``0 .. N - 1`` (``N`` a power of two from 1024), built once per schedule
    and layout by :func:`small_sin_cos`: each row holds the numbers the one float64 pass
    gives that position (integer timesteps in ``[0, 1000)``, embedded every denoising
    step, are one lookup); ``order="cos_sin"`` as in :func:`small_sin_cos`.

    >>> t = rows_sin_cos(np.array([3, 5]), (1.0, 0.5), offset=0, layout="split")
    >>> bool(np.array_equal(t, small_sin_cos(np.array([3, 5]), (1.0, 0.5), offset=0,
    ...                                      layout="split")))
    True
    """
    flat = values.reshape(-1)
    if offset:
        flat = flat + int(offset)
    table = _row_table(omegas, layout, order, _row_count(int(flat.max(initial=0))))
    return table[flat]


def _row_count(largest: int) -> int:
    return max(1024, 1 << largest.bit_length())


@functools.lru_cache(maxsize=8)
def _row_table(omegas: tuple[float, ...], layout: str, order: str, n_rows: int) -> np.ndarray:
    table = small_sin_cos(np.arange(n_rows), omegas, offset=0, layout=layout, order=order)
    table.flags.writeable = False
    return table


def _run_start(values: np.ndarray, n_pairs: int, rounded_once: bool) -> int | None:
    """The first position if ``values`` are a run worth the angle-addition tables:
    small runs (:data:`~pe_core._kernel.routes.RUN_MIN_ROWS`, :data:`~pe_core._kernel.routes.RUN_MIN_PAIRS`) for float32 results, and
    large ones (:data:`~pe_core._kernel.routes.TABLE_MIN_ROWS`,
    :data:`~pe_core._kernel.routes.TABLE_MIN_PAIRS`) always."""
    n_rows = values.size
    small_run = not rounded_once and n_rows >= RUN_MIN_ROWS and n_rows * n_pairs >= RUN_MIN_PAIRS
    large_run = n_rows >= TABLE_MIN_ROWS and n_rows * n_pairs >= TABLE_MIN_PAIRS
    return contiguous_start(values) if small_run or large_run else None


def host_turns(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: int | float = 0,
    working: str = "float64",
    max_abs: float | None = None,
) -> np.ndarray:
    """Reduced turns of finite host positions, exact for every one of them.

    The array kernel (:func:`~pe_core._kernel.angles.reduced_turns`) in NumPy; the entries it
    gives NaN for (floats beyond ``2**63``, fractional positions at very fast
    frequencies) are redone by the float64 kernel, whose fractional step is wider
    (``scale=1000`` timesteps), and what is still NaN with Python integers
    (:func:`~pe_core._kernel.angles.exact_turns`).

    >>> t = host_turns(np.array([3.0, 1e300]), (1.0,))
    >>> bool(abs(t[0, 0] - math.remainder(3, 2 * math.pi) / (2 * math.pi)) < 1e-16)
    True
    >>> bool(np.isfinite(t).all())
    True
    """
    bound = None if max_abs is None else max_abs + 1.0

    def kernel(x: np.ndarray, precision: str) -> np.ndarray:
        return reduced_turns(
            HOST, x, omegas, offset=offset, working=precision, max_abs_position=bound
        )

    if values.dtype.kind == "f" and working != "float64" and _may_miss(omegas, working, max_abs):
        if not _may_miss(omegas, "float64", max_abs):  # the float64 step takes them all
            return kernel(values, "float64").astype(working)
    turns = kernel(values, working)
    if values.dtype.kind != "f" or not _may_miss(omegas, working, max_abs):
        return turns  # the kernel computes every such position: no NaN to look for
    # the float64 kernel's fractional step is wider; Python integers take what is left
    for redo in ("float64", "exact") if working != "float64" else ("exact",):
        missing = np.isnan(turns)
        if missing.any():
            rows = missing.reshape(-1, len(omegas)).any(axis=-1).reshape(values.shape)
            x = values[rows]
            again = exact_turns(x, omegas, offset=offset) if redo == "exact" else kernel(x, redo)
            turns[rows] = again.astype(turns.dtype)
    return turns


def _may_miss(omegas: tuple[float, ...], working: str, max_abs: float | None) -> bool:
    """Whether the kernel may give NaN for finite float positions (see host_turns)."""
    if max_abs is None or max_abs >= MAX_KERNEL_FLOAT:
        return True
    limit = FRACTION_MAX_TURNS[working] * _TWO_PI
    return any(abs(w) > limit for w in omegas)
