"""sin/cos tables of positions known on the host, by the cheapest exact route.

:func:`host_sin_cos` picks one of four routes for positions whose values are on the
host (NumPy, Python values, CPU tensors), all within about 2.5e-7 of the true value in
float32 and exact to float64 rounding in float64:

* **small calls** (a few thousand sin/cos pairs, ``|p| <= 2**24``, float32 work):
  the angle in turns ``p * w / 2pi`` in float64, off by at most about 2e-9 rad;
  reduced to ``[-1/2, 1/2]`` turns exactly, then vectorised float32 ``sin`` and
  ``cos`` (float64 where the result is rounded once to float16/bfloat16), written
  into their output slots. A few NumPy calls: what decode steps and small encodes
  need.
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

_TWO_PI = 2.0 * math.pi


@functools.lru_cache(maxsize=256)
def _turn_frequencies(omegas: tuple[float, ...]) -> np.ndarray:
    """``w / 2pi``: turns per position, in float64."""
    return np.asarray(omegas, dtype=np.float64) / (2.0 * math.pi)


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

    Only for the inputs :func:`small_call_fits` accepts. The angle in turns,
    ``p * w / 2pi``, is formed in float64 (error below 1e-9 turns for
    ``|p| <= 2**24``) and reduced to ``[-1/2, 1/2]`` exactly; float32 sin and cos of
    the reduced angle then give float32 results within 3e-7 (NumPy's vectorised
    float32 sin and cos are 15x faster than float64's), written straight into their
    slots of the output. With
    ``rounded_once`` the float64 sin is returned instead (for float16/bfloat16
    output, rounded once from it).

    >>> t = small_sin_cos(np.array([1, 2]), (1.0,), offset=0, layout="interleaved")
    >>> t.dtype, bool(np.allclose(t, [[np.sin(1), np.cos(1)], [np.sin(2), np.cos(2)]]))
    (dtype('float32'), True)
    """
    n_pairs = len(omegas)
    flat = values.reshape(-1, 1).astype(np.float64)
    if offset:
        flat += offset
    turns = flat * _turn_frequencies(omegas)
    turns -= np.rint(turns)  # exact: the reduced turn in [-1/2, 1/2]
    turns *= _TWO_PI
    angles = turns if rounded_once else turns.astype(np.float32)
    out = np.empty((flat.shape[0], 2 * n_pairs), angles.dtype)
    if layout == "interleaved":
        sin_slots, cos_slots = out[:, 0::2], out[:, 1::2]
    else:
        sin_slots, cos_slots = out[:, :n_pairs], out[:, n_pairs:]
    np.sin(angles, out=sin_slots)
    np.cos(angles, out=cos_slots)
    return out


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
    n_rows, n_pairs = values.size, len(omegas)
    if working == "float32" and small_call_fits(n_rows, n_pairs, max_abs, offset):
        return small_sin_cos(
            values, omegas, offset=offset, layout=layout, rounded_once=rounded_once
        )
    numpy = get_namespace("numpy")
    xp = numpy if xp is None else xp
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
