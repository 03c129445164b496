"""The engine behind :func:`pe_core.timestep_embedding`: diffusion timestep embeddings.

One embedding is ``sin`` and ``cos`` of ``t * W_i`` for ``W_i = scale * w_i`` and
``w_i = exp(-ln(max_period) * i / (half - downscale_freq_shift))``. Everything here is
built on the exact reduction of :mod:`pe_core._kernel.angles`; what is particular to
timesteps is how ``t * W_i`` is kept exact:

* ``W_i`` is never a float64 rounding: it is worked out once per configuration with
  :mod:`decimal` (as many digits as the timesteps' size needs, 192 bits at least)
  and held as an exact dyadic :class:`~fractions.Fraction`, ``scale`` included.
  The kernel's per-frequency constants take such a rational as it is
  (:func:`~pe_core._kernel.angles.turn_constant_fields`): the reduction of
  ``t * W_i`` is then exact for every integer ``t`` of int64/uint64.
* A fractional timestep ``t`` is folded into the kernel as ``t * 2**K`` (exact:
  a power of two) against the frequencies ``W_i / 2**K``, with ``K`` the least
  that brings every frequency to at most half a turn per unit: the kernel's
  fractional step (``u * f`` with ``|f| <= 1/2``) is then exact to float rounding,
  at ``scale=1000`` too (QwenImage, AuraFlow: ``W_0 = 1000`` rad per unit, 159 turns).
* Integer timesteps in host memory within ``[0, TIMESTEP_TABLE_ROWS)`` (the steps of
  DDPM-style schedulers) are rows of a cached table of the timesteps ``0 .. rows - 1``
  (:func:`table_for`), built once per configuration by the float64 pass below:
  every row is bit for bit the row that pass computes for that timestep alone.
* Timesteps known on the host take the float64 pass of the small calls where the
  turns ``|t| * max|W| / 2pi`` stay below
  :data:`~pe_core._kernel.routes.SMALL_MAX_TURNS` (the float64 product's and the
  frequency's rounding to float64: below 1e-8 rad in all); others the NumPy kernel
  in float64, and the few it cannot take (``|t| * 2**K >= 2**63``) are reduced with
  Python integers (:func:`~pe_core._kernel.angles.exact_turns`).
"""

from __future__ import annotations

import decimal
import functools
import math
import threading
from collections import OrderedDict
from fractions import Fraction
from typing import Any, NamedTuple, cast

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import (
    FRACTION_MAX_TURNS,
    exact_turns,
    reduced_turns,
    sin_cos_turns,
    turn_constant_fields,
)
from pe_core._kernel.inputs import (
    check_request_size,
    choose_backend,
    resolve_dtype,
    working_dtype,
)
from pe_core._kernel.placement import Positions, host_view, prepare_positions
from pe_core._kernel.routes import (
    FEW_POSITIONS,
    MAX_KERNEL_FLOAT,
    SMALL_MAX_TURNS,
    TIMESTEP_TABLE_MIN_ROWS,
    TIMESTEP_TABLE_ROWS,
)
from pe_core.validation import finite_real, positive_int
from pe_core_backends import Namespace, backend_of, get_namespace

#: Largest ``|scale| * w_i`` accepted, in radians per timestep unit: beyond it the
#: frequencies alias at every integer timestep and are a configuration error
#: (diffusers' float32 turns them into inf and NaN).
MAX_FREQUENCY = 2.0**40

#: Significant bits of the exact frequencies for the device kernel (timesteps
#: ``|t * 2**K| < 2**63``: the angle's error stays below ``2**-40`` rad).
DEVICE_BITS = 192

_TWO_PI = 2.0 * math.pi

#: The NumPy namespace (host computations), looked up once.
_NUMPY = get_namespace("numpy")


class Plan(NamedTuple):
    """A validated configuration and its host-side numbers."""

    dim: int
    half: int
    flip: bool
    shift: float
    scale: float
    max_period: float
    turns: tuple[float, ...]  #: ``W_i / 2pi`` rounded to float64 (the small calls)
    max_turns: float  #: ``max |W_i| / 2pi``
    fraction_bits: int  #: ``K``: fractional timesteps enter the kernel as ``t * 2**K``

    @property
    def key(self) -> tuple[int, float, float, float]:
        return (self.half, self.shift, self.scale, self.max_period)


#: Plans by their exact argument tuple, for arguments of the plain types only
#: (``int``, ``bool``, ``float``): a call with those skips validation.
_PLANS: dict[tuple[Any, ...], Plan] = {}
_PLAIN = (int, float)


def cached_plan(dim: Any, flip: Any, shift: Any, scale: Any, max_period: Any) -> Plan | None:
    """The plan of plain, already validated arguments, else ``None``."""
    if (
        type(dim) is not int
        or type(flip) is not bool
        or type(shift) not in _PLAIN
        or type(scale) not in _PLAIN
        or type(max_period) not in _PLAIN
    ):
        return None
    return _PLANS.get((dim, flip, shift, scale, max_period))


def make_plan(
    dim: Any, flip: Any, shift: Any, scale: Any, max_period: Any, xp: Namespace = _NUMPY
) -> Plan:
    """Validate the configuration (every degenerate one refused by name) and plan it;
    the numbers come through ``xp.host_constant`` (constants to a tracing compiler)."""
    found = cached_plan(dim, flip, shift, scale, max_period)
    if found is not None:
        return found
    d = positive_int(dim, "embedding_dim", minimum=2, what="at least one sin/cos pair")
    if not isinstance(flip, (bool, np.bool_)):
        raise TypeError(f"flip_sin_to_cos must be a bool. Received: {flip!r}")
    shift_f = finite_real(shift, "downscale_freq_shift")
    scale_f = finite_real(scale, "scale")
    period = finite_real(max_period, "max_period", greater_than=0)
    half = d // 2
    if half == shift_f:
        raise ValueError(
            f"embedding_dim // 2 must differ from downscale_freq_shift: the frequency "
            f"exponents divide by their difference (diffusers gives NaN). Received: "
            f"embedding_dim={d} (// 2 = {half}), downscale_freq_shift={shift!r}"
        )
    log_max = _log_max_frequency(half, shift_f, scale_f, period)
    if log_max > math.log(MAX_FREQUENCY):
        raise ValueError(
            "the fastest frequency |scale| * exp(-ln(max_period) * i / (embedding_dim // 2 "
            f"- downscale_freq_shift)) must be at most 2**40 rad per timestep; these "
            f"arguments give about exp({log_max:.4g}) (embedding_dim={d}, "
            f"downscale_freq_shift={shift!r}, scale={scale!r}, max_period={max_period!r})."
        )
    turns, max_turns, k = xp.host_constant(_plan_numbers, half, shift_f, scale_f, period)
    plan = Plan(d, half, bool(flip), shift_f, scale_f, period, turns, max_turns, k)
    plain = type(dim) is int and type(flip) is bool
    if plain and not xp.is_tracing() and len(_PLANS) < 256:
        _PLANS[(dim, flip, shift, scale, max_period)] = plan
    return plan


def _plan_numbers(half: int, shift: float, scale: float, period: float) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_plan_numbers(half, shift, scale, period)


@functools.lru_cache(maxsize=64)
def _cached_plan_numbers(half: int, shift: float, scale: float, period: float) -> tuple:
    """``W_i / 2pi`` as floats, their largest magnitude, and ``K``."""
    exact = exact_frequencies(half, shift, scale, period, DEVICE_BITS)
    turns = tuple(float(w) / _TWO_PI for w in exact)
    max_turns = max(map(abs, turns), default=0.0)
    return turns, max_turns, _fraction_bits(max_turns)


def _turn_array(plan: Plan) -> np.ndarray:
    """``plan.turns`` as a float64 NumPy array (one per configuration)."""
    found = _TURN_ARRAYS.get(plan.key)
    if found is None:
        if len(_TURN_ARRAYS) >= 256:
            _TURN_ARRAYS.clear()
        found = _TURN_ARRAYS[plan.key] = np.array(plan.turns, np.float64)
    return found


_TURN_ARRAYS: dict[tuple[int, float, float, float], np.ndarray] = {}


def _log_max_frequency(half: int, shift: float, scale: float, period: float) -> float:
    """``ln max_i |scale * w_i|`` (``-inf`` for ``scale == 0``)."""
    if scale == 0:
        return -math.inf
    rate = -math.log(period) / (half - shift)  # ln w_i = rate * i
    return math.log(abs(scale)) + max(0.0, rate * (half - 1))


def _fraction_bits(max_turns: float) -> int:
    """The least ``K >= 0`` with ``max_turns / 2**K`` at most half a turn (a margin
    for the float64 estimate)."""
    limit = FRACTION_MAX_TURNS["float32"]
    k = 0
    while max_turns * (1 + 2.0**-40) / 2.0**k > limit:
        k += 1
    return k


@functools.lru_cache(maxsize=64)
def exact_frequencies(
    half: int, shift: float, scale: float, max_period: float, bits: int
) -> tuple[Fraction, ...]:
    """``scale * exp(-ln(max_period) * i / (half - shift))`` for ``i < half``, each a
    dyadic fraction within ``2**-bits`` (relative) of the true value.

    >>> w = exact_frequencies(2, 0.0, 1.0, 10000.0, 192)
    >>> w[0], abs(float(w[1]) - 0.01) < 1e-18
    (Fraction(1, 1), True)
    """
    digits = math.ceil(bits * math.log10(2)) + len(str(half)) + 10
    with decimal.localcontext() as ctx:
        ctx.prec = digits
        ctx.Emax, ctx.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
        ratio = (-decimal.Decimal(max_period).ln() / (half - decimal.Decimal(shift))).exp()
        w = decimal.Decimal(scale)
        out = []
        for _ in range(half):
            out.append(_dyadic(Fraction(w), bits))
            w *= ratio
    return tuple(out)


def _dyadic(q: Fraction, bits: int) -> Fraction:
    """``q`` rounded to ``bits`` significant bits (a power-of-two denominator)."""
    if q == 0:
        return Fraction(0)
    shift = bits - (abs(q.numerator).bit_length() - q.denominator.bit_length())
    if shift >= 0:
        return Fraction(round(q * (1 << shift)), 1 << shift)
    return Fraction(round(q / (1 << -shift)) << -shift)


def _device_fields(key: tuple[int, float, float, float], k: int) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_device_fields(key, k)


@functools.lru_cache(maxsize=64)
def _cached_device_fields(key: tuple[int, float, float, float], k: int) -> tuple:
    """The kernel's constants of the exact frequencies ``W_i / 2**k``."""
    exact = exact_frequencies(*key, DEVICE_BITS)
    return turn_constant_fields(tuple(w / (1 << k) for w in exact))


# -- the calls ---------------------------------------------------------------------------


def few_timesteps(timesteps: Any, plan: Plan) -> Any | None:
    """The float32 embedding of host timesteps the lane takes, or ``None``.

    Integer timesteps in ``[0, TIMESTEP_TABLE_ROWS)`` given as a Python ``int``, a
    NumPy array or an array the host reads without a copy (a CPU tensor) are rows of
    the configuration's table (:func:`table_for`), once it is built; up to
    :data:`~pe_core._kernel.routes.FEW_POSITIONS` other such timesteps, finite,
    within the small calls' turns, take the float64 pass of :func:`_small_table`
    with no other dispatch. Anything else gives ``None`` and takes :func:`embed`.
    """
    if type(timesteps) is int:
        entry = table_for(plan, 1, timesteps, timesteps)
        return None if entry is None else entry.host[timesteps].copy()
    values, xp = host_view(timesteps)
    if values is None or values.dtype.kind not in "iuf" or values.dtype.itemsize < 4:
        return None
    n = values.size
    if n == 0:
        return None
    listed = values.ravel().tolist() if n <= FEW_POSITIONS else None
    if values.dtype.kind != "f":
        if listed is None:
            low, high = int(values.min()), int(values.max())
        else:
            low, high = min(listed), max(listed)
        entry = table_for(plan, n, low, high)
        if entry is not None:
            return _gather(entry, values, xp, timesteps, plan)
    if listed is None:
        return None
    total = math.fsum(map(abs, listed))  # inf or NaN for a non-finite value
    if not total * plan.max_turns <= SMALL_MAX_TURNS:
        return None
    table = _small_table(values, listed, plan)
    if values.ndim != 1:
        table = table.reshape(*values.shape, plan.dim)
    return table if xp is None else xp.from_host(table, like=timesteps)


# -- the table of integer timesteps ------------------------------------------------------

#: Most bytes the cached tables hold together (float32 ``(rows, dim)`` host tables; the
#: CPU framework arrays made from them share their memory), and most tables held: the
#: least recently used go first. ``64 MiB`` holds three tables of 4096 rows at
#: ``dim=1280``, or twelve of 1024 rows.
TABLE_BUDGET_BYTES = 64 * 2**20
TABLE_MAX_ENTRIES = 16


class Table(NamedTuple):
    """A cached table: the rows of the timesteps ``0 .. rows - 1``, float32."""

    host: np.ndarray  #: ``(rows, dim)`` float32
    placed: dict[str, Any]  #: backend name -> that backend's CPU array of ``host``


_TABLES: OrderedDict[tuple[Any, ...], Table] = OrderedDict()
#: Rows asked for so far per configuration without a table that covers them.
_DEMAND: dict[tuple[Any, ...], int] = {}
_TABLE_LOCK = threading.Lock()


def table_for(plan: Plan, n: int, low: int, high: int) -> Table | None:
    """The cached table that holds the timesteps ``low .. high`` (integers), else ``None``.

    A configuration's table has :data:`~pe_core._kernel.routes.TIMESTEP_TABLE_MIN_ROWS`
    rows when ``high`` is below that, else
    :data:`~pe_core._kernel.routes.TIMESTEP_TABLE_ROWS`; it is built (by
    :func:`_small_pass`, the route these timesteps take without it) once the calls
    of this configuration have asked for as many rows (``n`` per call) as it has, so
    that a few timesteps per call keep the float64 pass until building pays. Only
    where every row is inside the small calls' turns, so that each row is the one
    that pass gives.

    >>> plan = make_plan(8, True, 0.0, 1.0, 10000.0)
    >>> table_for(plan, 1, 0, 5) is None  # one row asked for: not built yet
    True
    >>> table_for(plan, 2000, 0, 999).host.shape
    (1024, 8)
    """
    if low < 0 or high >= TIMESTEP_TABLE_ROWS:
        return None
    key = (plan.key, plan.dim, plan.flip)
    with _TABLE_LOCK:
        found = _TABLES.get(key)
        if found is not None and high < found.host.shape[0]:
            _TABLES.move_to_end(key)
            return found
        rows = TIMESTEP_TABLE_MIN_ROWS if high < TIMESTEP_TABLE_MIN_ROWS else TIMESTEP_TABLE_ROWS
        if not rows * plan.max_turns <= SMALL_MAX_TURNS:
            return None
        demand = _DEMAND.get(key, 0) + n
        if demand < rows:
            if len(_DEMAND) >= 256:
                _DEMAND.clear()
            _DEMAND[key] = demand
            return None
    host = _small_pass(np.arange(rows, dtype=np.int64), plan)
    entry = Table(host, {})
    with _TABLE_LOCK:
        _DEMAND.pop(key, None)
        if host.nbytes <= TABLE_BUDGET_BYTES:
            _TABLES[key] = entry
            _TABLES.move_to_end(key)
            held = sum(t.host.nbytes for t in _TABLES.values())
            while held > TABLE_BUDGET_BYTES or len(_TABLES) > TABLE_MAX_ENTRIES:
                _, dropped = _TABLES.popitem(last=False)
                held -= dropped.host.nbytes
    return entry


def clear_tables() -> None:
    """Drop the cached tables and what was asked for so far."""
    with _TABLE_LOCK:
        _TABLES.clear()
        _DEMAND.clear()


def _gather(entry: Table, values: np.ndarray, xp: Namespace | None, like: Any, plan: Plan) -> Any:
    """The rows ``values`` of ``entry``: NumPy for NumPy timesteps (``xp`` None), else
    ``xp``'s array, gathered from its CPU array of the table (made once)."""
    if xp is None:
        return np.take(entry.host, values, axis=0)
    table = entry.placed.get(xp.name)
    if table is None:
        table = entry.placed[xp.name] = xp.from_host(entry.host, like=like)
    index = xp.from_host(values.reshape(-1).astype(np.int64, copy=False), like=like)
    out = xp.take_rows(table, index)
    return out if values.ndim == 1 else xp.reshape(out, (*values.shape, plan.dim))


def _small_table(values: np.ndarray, listed: list[Any], plan: Plan) -> np.ndarray:
    """The float32 ``(n, dim)`` table from one float64 pass (turns ``t * W / 2pi`` below
    :data:`~pe_core._kernel.routes.SMALL_MAX_TURNS`, reduced exactly, then float32
    sin and cos straight into their slots)."""
    n = len(listed)
    if n == 1:
        turns = _turn_array(plan) * float(listed[0])
    else:
        turns = np.multiply.outer(values.reshape(n).astype(np.float64), _turn_array(plan))
    turns -= np.rint(turns)  # exact: the reduced turn in [-1/2, 1/2]
    angles = np.empty(turns.shape, np.float32)
    np.multiply(turns, _TWO_PI, out=angles, casting="same_kind")  # rounded once
    out = np.empty((n, plan.dim), np.float32)
    sin_slots, cos_slots = _slots(out, plan)
    np.sin(angles, out=sin_slots)
    np.cos(angles, out=cos_slots)
    return out


def _slots(out: np.ndarray, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """The sin and cos columns of ``out`` (diffusers' order); the odd column zeroed."""
    half = plan.half
    if plan.dim % 2:
        out[..., -1] = 0.0
    first, second = out[..., :half], out[..., half : 2 * half]
    return (second, first) if plan.flip else (first, second)


def embed(timesteps: Any, plan: Plan, backend: str | None, dtype: Any) -> Any:
    """The general call: classify the timesteps once, then the host or kernel route."""
    source = backend_of(timesteps)
    xp, source = choose_backend(timesteps, backend, source=source, what="timesteps")
    out_name, _ = resolve_dtype(xp, dtype)
    positions = prepare_positions(timesteps, xp, source, what="timesteps")
    shape = positions.shape
    if all(isinstance(n, int) for n in shape):
        n_rows = math.prod(shape)
        check_request_size(
            n_rows * plan.dim,
            out_name,
            what="timestep_embedding",
            n_pairs=plan.half,
            host_output=positions.placement == "host",
        )
    if positions.placement == "host":
        return _host_embed(xp, positions, plan, out_name)
    return _device_embed(xp, positions, plan, out_name)


def host_route(
    values: np.ndarray, max_abs: float, plan: Plan, out_name: str
) -> tuple[str, Table | None]:
    """The route of validated host timesteps (a row of the route table) and, for
    ``"table"``, the table.

    >>> plan = make_plan(8, True, 0.0, 1.0, 10000.0)
    >>> host_route(np.array([0.5]), 0.5, plan, "float32")
    ('small', None)
    >>> host_route(np.array([3]), 3.0, plan, "float64")
    ('exact_kernel', None)
    """
    if out_name != "float32":
        return "exact_kernel", None
    if values.dtype.kind in "iu" and values.size and max_abs < TIMESTEP_TABLE_ROWS:
        entry = table_for(plan, values.size, int(values.min()), int(max_abs))
        if entry is not None:
            return "table", entry
    if max_abs * plan.max_turns <= SMALL_MAX_TURNS:
        return "small", None
    return "exact_kernel", None


def _host_embed(xp: Namespace, positions: Positions, plan: Plan, out_name: str) -> Any:
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    like = positions.array  # the framework array the values were read from, if any
    flat = values.reshape(-1)
    route, entry = host_route(flat, max_abs, plan, out_name)
    if entry is not None:
        table = np.take(entry.host, flat, axis=0)
    elif route == "small":
        table = _small_pass(flat, plan)
    else:
        turns = host_turns(flat, plan, max_abs)
        angles = turns * _TWO_PI
        if out_name == "float32":
            angles = angles.astype(np.float32)
        table = np.empty((flat.size, plan.dim), angles.dtype)
        sin_slots, cos_slots = _slots(table, plan)
        np.sin(angles, out=sin_slots)
        np.cos(angles, out=cos_slots)
    table = table.reshape(*positions.shape, plan.dim)
    if xp.numpy_arrays:
        return table if out_name == table.dtype.name else xp.astype(table, xp.dtype(out_name))
    return device_tables.place(xp, table, like, out_name)


#: Elements per block of :func:`_small_pass` (its float64 temporaries stay in cache).
_BLOCK_ELEMENTS = 16_384


def _small_pass(flat: np.ndarray, plan: Plan) -> np.ndarray:
    """:func:`_small_table` of any number of timesteps: the same operations on blocks of
    rows, so that the float64 temporaries stay in cache (large batches)."""
    n, half = flat.size, plan.half
    rows = max(1, _BLOCK_ELEMENTS // max(half, 1))
    if n <= rows:
        listed = flat.tolist() if n == 1 else [None] * n
        return _small_table(flat, listed, plan)
    values = flat.astype(np.float64).reshape(n, 1)
    freqs = _turn_array(plan)
    out = np.empty((n, plan.dim), np.float32)
    sin_slots, cos_slots = _slots(out, plan)
    turns = np.empty((rows, half), np.float64)
    nearest = np.empty((rows, half), np.float64)
    angles = np.empty((rows, half), np.float32)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        k = stop - start
        t, r, a = turns[:k], nearest[:k], angles[:k]
        np.multiply(values[start:stop], freqs, out=t)
        np.rint(t, out=r)
        t -= r  # exact: the reduced turn in [-1/2, 1/2]
        np.multiply(t, _TWO_PI, out=a, casting="same_kind")
        np.sin(a, out=sin_slots[start:stop])
        np.cos(a, out=cos_slots[start:stop])
    return out


def host_turns(flat: np.ndarray, plan: Plan, max_abs: float) -> np.ndarray:
    """The reduced turns ``(n, half)`` of finite host timesteps, exact for every one:
    the NumPy kernel in float64, and Python integers where it gives NaN."""
    numpy = _NUMPY
    is_float = flat.dtype.kind == "f"
    k = plan.fraction_bits if is_float else 0
    scaled = flat.astype(np.float64) * 2.0**k if k else flat
    bound = max_abs * 2.0**k + 1.0
    fields = _device_fields(plan.key, k)
    if not bound < MAX_KERNEL_FLOAT:
        scaled = np.where(np.abs(scaled) < MAX_KERNEL_FLOAT, scaled, 0.0) if is_float else scaled
    turns = reduced_turns(
        numpy, scaled, (), working="float64", max_abs_position=bound, constants=fields
    )
    if is_float and not bound < MAX_KERNEL_FLOAT:
        rows = ~(np.abs(flat) * 2.0**k < MAX_KERNEL_FLOAT)
        if rows.any():
            bits = DEVICE_BITS + 64 * math.ceil(math.log2(max_abs + 1.0) / 64)
            exact = exact_frequencies(*plan.key, bits)
            # exact_turns reads each frequency as a dyadic rational: Fractions as they are
            turns[rows] = exact_turns(flat[rows], cast("tuple[float, ...]", exact))
    return turns


def _device_embed(xp: Namespace, positions: Positions, plan: Plan, out_name: str) -> Any:
    """Timesteps on a device or traced: the exact kernel where they live."""
    array = positions.array
    working = working_dtype(out_name, xp, round_once=True)
    is_float = xp.kind(xp.dtype_of(array)) == "float"
    k = plan.fraction_bits if is_float else 0
    compiled = (positions.placement == "traced" and xp.compile_when_traced) or (
        positions.placement == "device" and xp.compiles
    )
    config = (plan.key, plan.dim, plan.flip, k, working)
    if compiled:
        table = _compiled_kernel(xp.name, config)(array)
    else:
        table = _kernel(xp, array, config, traced=positions.placement == "traced")
    if out_name != working:
        table = xp.astype(table, xp.dtype(out_name))
    return table


def _kernel(xp: Namespace, array: Any, config: tuple, *, traced: bool) -> Any:
    """sin/cos of the exactly reduced turns of ``array * 2**k`` at ``W_i / 2**k``, in
    diffusers' order (``config``: plan key, dim, flip, k, working dtype)."""
    key, dim, flip, k, working = config
    fields = xp.host_constant(_device_fields, key, k)
    positions = array * 2.0**k if k else array
    turns = reduced_turns(xp, positions, (), working=working, poison=True, constants=fields)
    if traced and working == "float32" and xp.traced_polynomials:
        sin, cos = sin_cos_turns(xp, turns)
    else:
        angles = turns * _TWO_PI
        sin, cos = xp.sin(angles), xp.cos(angles)
    parts = [cos, sin] if flip else [sin, cos]
    if dim % 2:
        # a slice, not xp.zeros(shape): sizes may be unknown (a shape-generic graph)
        parts.append(xp.zeros_like(sin[..., :1]))
    return xp.concat(parts, -1)


@functools.lru_cache(maxsize=32)
def _compiled_kernel(backend: str, config: tuple) -> Any:
    xp = get_namespace(backend)
    return xp.compile(lambda p: _kernel(xp, p, config, traced=True))


def namespace_for(timesteps: Any, backend: str | None) -> Namespace:
    """The namespace a call computes on (``backend``, else the timesteps')."""
    return choose_backend(timesteps, backend, what="timesteps")[0]
