"""sin/cos tables of positions known on the host, by the cheapest exact route.

:func:`host_sin_cos` picks one of four routes for positions whose values are on the
host (NumPy, Python values, CPU tensors), all within about 2.5e-7 of the true value in
float32 and exact to float64 rounding in float64:

* **small calls** (a few thousand sin/cos pairs, ``|p| <= 2**24``, float32 work):
  the angle ``p * w + phase`` in float64 (``cos(t) = sin(t + pi/2)``), off by at most
  ``2**24 * 2**-53`` (2e-9 rad) plus one rounding of ``pi/2``; reduced to
  ``[-pi, pi]`` in float64, then one vectorised float32 ``sin`` (or float64 ``sin``
  where the result is rounded once to float16/bfloat16). A few NumPy calls: what
  decode steps and small encodes need.
* **runs of consecutive positions**: :mod:`pe_core.tables` (angle addition, one
  complex product per element).
* **any other integer positions**: :mod:`pe_core.gather` (angle addition by lookup).
* **the rest** (large fractional inputs, float64 tables): the exact per-element
  kernel of :mod:`pe_core.angles`, evaluated in NumPy.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from pe_core.angles import reduced_turns
from pe_core.gather import gather_plan, gathered_unit_complex
from pe_core.layout import assemble
from pe_core.tables import MIN_PAIRS, contiguous_start, table_sin_cos
from pe_core_backends import Namespace, get_namespace

#: Largest ``|position + offset|`` of the float64 small-call route (see the module notes).
SMALL_MAX_POSITION = 2.0**24

#: Most sin/cos pairs in one call of the small-call route.
SMALL_MAX_PAIRS = 16_384

_INV_2PI = 1.0 / (2.0 * math.pi)
_TWO_PI = 2.0 * math.pi


@functools.lru_cache(maxsize=256)
def _phase_plan(omegas: tuple[float, ...], layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-column frequency and phase: column ``j`` holds ``sin(p * w[j] + phase[j])``."""
    w = np.asarray(omegas, dtype=np.float64)
    quarter = np.full(len(omegas), math.pi / 2)
    zero = np.zeros(len(omegas))
    if layout == "interleaved":
        return np.repeat(w, 2), np.stack([zero, quarter], axis=-1).reshape(-1)
    return np.concatenate([w, w]), np.concatenate([zero, quarter])


def small_call_fits(n_rows: int, n_pairs: int, max_abs: float, offset: float) -> bool:
    """Whether :func:`small_sin_cos` is exact enough and cheaper than the other routes."""
    return n_rows * n_pairs <= SMALL_MAX_PAIRS and max_abs + abs(offset) <= SMALL_MAX_POSITION


def small_sin_cos(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: float,
    layout: str,
    rounded_once: bool = False,
) -> np.ndarray:
    """``(n_rows, 2 * len(omegas))`` sin/cos pairs in ``layout`` from one float64 pass.

    Only for the inputs :func:`small_call_fits` accepts. The angle ``p * w + phase``
    is formed in float64 (error <= 4e-9 rad) and reduced to ``[-pi, pi]`` in float64;
    float32 sin of the reduced angle then gives float32 results within 3e-7
    (NumPy's vectorised float32 sin is 15x faster than float64's). With
    ``rounded_once`` the float64 sin is returned instead (for float16/bfloat16
    output, rounded once from it).

    >>> t = small_sin_cos(np.array([1, 2]), (1.0,), offset=0, layout="interleaved")
    >>> t.dtype, bool(np.allclose(t, [[np.sin(1), np.cos(1)], [np.sin(2), np.cos(2)]]))
    (dtype('float32'), True)
    """
    w, phase = _phase_plan(omegas, layout)
    flat = values.reshape(-1, 1).astype(np.float64)
    if offset:
        flat += offset
    angles = flat * w
    angles += phase
    if rounded_once:
        return np.sin(angles, out=angles)
    turns = angles * _INV_2PI
    np.rint(turns, out=turns)
    turns *= _TWO_PI
    angles -= turns
    reduced = angles.astype(np.float32)
    return np.sin(reduced, out=reduced)


def host_sin_cos(
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: float,
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
        A backend that builds large tables itself (``Namespace.builds_tables``:
        torch, TensorFlow), on the device of ``like``; NumPy by default. Small calls
        and the per-element kernel are always NumPy.

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
    numpy = get_namespace("numpy")
    xp = numpy if xp is None else xp
    n_rows, n_pairs = values.size, len(omegas)
    if working == "float32" and small_call_fits(n_rows, n_pairs, max_abs, offset):
        return small_sin_cos(
            values, omegas, offset=offset, layout=layout, rounded_once=rounded_once
        )
    start = None
    if n_rows >= 64 and n_rows * n_pairs >= MIN_PAIRS:
        start = contiguous_start(values)
    if start is not None:
        return table_sin_cos(
            xp,
            start,
            n_rows,
            omegas,
            offset=offset,
            layout=layout,
            working=working,
            like=like,
        )
    gathered = _gathered(
        xp, values, omegas, offset=offset, layout=layout, working=working, like=like
    )
    if gathered is not None:
        return gathered
    turns = reduced_turns(
        numpy,
        values.reshape(-1),
        omegas,
        offset=offset,
        working=working,
        max_abs_position=max_abs + 1.0,
    )
    angles = turns * (2.0 * math.pi)
    return assemble(numpy, np.sin(angles), np.cos(angles), layout)


def _gathered(
    xp: Namespace,
    values: np.ndarray,
    omegas: tuple[float, ...],
    *,
    offset: float,
    layout: str,
    working: str,
    like: Any,
) -> Any:
    """The lookup route of :mod:`pe_core.gather`, or None where it does not apply."""
    if not xp.mutable or gather_plan(values, len(omegas)) is None:
        return None
    target = xp.empty((values.size, 2 * len(omegas)), xp.dtype(working), like=like)
    return gathered_unit_complex(
        xp,
        values,
        omegas,
        offset=offset,
        working=working,
        form="sin_cos",
        layout=layout,
        like=like,
        out=target,
    )
