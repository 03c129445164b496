"""The 1-D sinusoidal engine behind :func:`pe_core.encode`.

One call: prepare (validate the arguments, classify the positions once with
:func:`~pe_core._kernel.placement.prepare_positions`) -> run (the host route, the
device kernel or the traced kernel, from the placement and the namespace's
capabilities). :func:`few_integer_positions` is the decode-step lane: the same float64
pass for the calls models make most, without the general validation.

N-D encodings are built on :func:`encode_1d` (:mod:`pe_core._sinusoidal_nd`); nothing
here dispatches to them.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import (
    FRACTION_MAX_TURNS,
    reduced_turns,
    sin_cos_turns,
    turn_constant_fields,
)
from pe_core._kernel.compiled import compiled
from pe_core._kernel.features import assemble, disassemble
from pe_core._kernel.host_tables import (
    few_integer_sin_cos,
    host_route,
    host_sin_cos,
    rows_sin_cos,
    small_sin_cos,
)
from pe_core._kernel.inputs import (
    check_request_size,
    choose_backend,
    known_size,
    resolve_dtype,
    working_dtype,
)
from pe_core._kernel.placement import Positions, host_view, prepare_positions
from pe_core._kernel.routes import BUILDS_MIN_PAIRS, FEW_POSITIONS
from pe_core._schedule import check_d, computed_width, omegas
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core_backends import (
    HOST,
    Namespace,
    any_dtensor,
    backend_of,
    encode_on_shards,
    get_namespace,
)


def encode_1d(
    pos: Any,
    d: Any,
    spec: Spec,
    backend: str | None = None,
    dtype: Any = None,
    out: Any = None,
    like: Any = None,
    check_values: bool = False,
    what: str = "pos",
) -> Any:
    """:func:`~pe_core.encode` for a resolved 1-D ``spec``: prepare once, then run
    (``what`` names the positions in errors: ``"timesteps"`` for timestep embeddings)."""
    if backend is dtype is out is like is None and not check_values:
        table = few_spec_positions(pos, d, spec)
        if table is not None:
            return table
    if any_dtensor(pos, out, like):  # torch.distributed.tensor: on the local shard
        return encode_on_shards(
            lambda p, lk: encode_1d(p, d, spec, backend, dtype, None, lk, check_values, what),
            pos,
            out=out,
            like=like,
            what=what,
        )
    if spec.order == "sin_cos" and spec.odd_d != "truncate":
        return _run(_prepare(pos, d, spec, backend, dtype, out, like, check_values, what))
    # order="cos_sin" or odd_d="truncate": the sin-first table of the computed width
    # (:func:`~pe_core._schedule.computed_width`) by the same routes, its slots swapped,
    # then cut to ``d`` features. The swap and the cut move values only: every value is
    # the one the sin-first table holds.
    d = check_d(d, spec)
    width = computed_width(d, spec)
    _, _, dtype, like = _choose_namespace(pos, backend, dtype, out, like, what)
    request = _prepare(
        pos, width, spec._sin_first_spec(), backend, dtype, None, like, check_values, what
    )
    table = _run(request)
    if spec.order == "cos_sin":
        n = width // 2
        sin, cos = disassemble(request.xp, table, spec.layout, n)
        table = assemble(request.xp, cos, sin, spec.layout, pad=0.0 if width % 2 else None)
    if width != d:
        table = table[..., :d]
    if out is None:
        return table
    check_out(request.xp, out, (*request.positions.shape, d), request.out_name)
    return request.xp.copy_into(out, table)


class _Request(NamedTuple):
    """One validated call of :func:`encode`: where to compute, on what, into what."""

    xp: Namespace
    positions: Positions
    freqs: tuple[float, ...]
    spec: Spec
    d: int
    out_name: str
    like: Any
    out: Any


def _prepare(
    pos: Any,
    d: Any,
    spec: Spec,
    backend: str | None,
    dtype: Any,
    out: Any,
    like: Any,
    check_values: bool,
    what: str = "pos",
) -> _Request:
    """Validate the arguments and classify the positions, once."""
    d = check_d(d, spec)
    xp, source, dtype, like = _choose_namespace(pos, backend, dtype, out, like, what)
    out_name, _ = resolve_dtype(xp, dtype)
    face = "encode" if what == "pos" else "timestep_embedding"
    n_pos = known_size(pos)
    if n_pos is not None:  # before reading the positions (maybe a broadcast view)
        device = source is not None and get_namespace(source).on_accelerator(pos)
        check_request_size(n_pos * d, out_name, what=face, n_pairs=d // 2, host_output=not device)
    named = "positions" if what == "pos" else what  # encode's errors say "positions"
    positions = prepare_positions(pos, xp, source, check_values=check_values, what=named)
    shape = positions.shape  # sizes may be None while tracing
    n_rows = math.prod(shape) if all(isinstance(n, int) for n in shape) else None
    check_request_size(
        None if n_rows is None else n_rows * d,
        out_name,
        what=face,
        n_pairs=d // 2,
        host_output=positions.placement == "host",
    )
    if out is not None:
        check_out(xp, out, (*shape, d), out_name)
    if positions.placement == "host" and like is None:
        like = positions.array
    return _Request(xp, positions, omegas(d, spec, xp), spec, d, out_name, like, out)


def _choose_namespace(
    pos: Any, backend: str | None, dtype: Any, out: Any, like: Any, what: str
) -> tuple[Namespace, str | None, Any, Any]:
    """The backend to compute on: ``backend``, else the positions', else ``like``'s or
    ``out``'s (for host positions), else NumPy; the positions' own backend; and
    ``dtype`` and ``like``, taken from a checked ``out`` where the caller gave none."""
    source = backend_of(pos)
    if backend is None and source is None:
        backend = anchor_backend(like, out)
    xp, source = choose_backend(pos, backend, source=source, what=what)
    if out is not None:
        if backend_of(out) != xp.name or not xp.mutable:
            raise TypeError(
                "out must be a NumPy array or a torch tensor on the backend computed on "
                f"({xp.name}). Received: {type(out).__name__}"
            )
        dtype = out.dtype if dtype is None else dtype
        like = out if like is None else like
    return xp, source, dtype, like


def anchor_backend(like: Any, out: Any) -> str | None:
    """The backend of ``like``, else of ``out``: where Python positions are encoded."""
    anchors = (backend_of(a) for a in (like, out) if a is not None)
    return next((name for name in anchors if name is not None), None)


def _run(request: _Request) -> Any:
    """Host positions: the cheapest exact host route; positions on a device or traced:
    the exact kernel where they live."""
    if request.positions.placement == "host":
        return _host_encode(*request)  # into ``out`` where given
    xp, positions, freqs, spec, d, out_name, _, out = request
    array, working = positions.array, working_dtype(out_name, xp, round_once=True)
    route = device_route(xp, positions)
    static = (freqs, spec.offset, spec.layout, working, d)
    if route == "kernel":
        traced = positions.placement == "traced"  # (no *static: autograph's calls)
        table = _kernel(xp, array, freqs, spec.offset, spec.layout, working, d, traced=traced)
    elif route == "compiled_traced" or xp.bounded_compiles:
        # Traced by tf.function, perhaps without XLA: run the kernel as one XLA call. Or
        # eager on a device with exact shapes: any padding or slicing here would be an
        # eager operation, itself compiled once per shape and never freed.
        table = compiled(xp.name, _traced_kernel, *static)(array)
    else:
        # Eager JAX/TensorFlow on a device: one compiled kernel instead of an op-by-op
        # dispatch, positions padded to a power-of-two length: few shapes, few traces
        shape = positions.shape
        n_rows = math.prod(shape)
        flat = xp.reshape(array, (n_rows,))
        bucket = max(8, 1 << max(0, n_rows - 1).bit_length())
        if bucket > n_rows:
            flat = xp.concat([flat, xp.zeros((bucket - n_rows,), flat.dtype, like=flat)], 0)
        table = xp.reshape(compiled(xp.name, _traced_kernel, *static)(flat)[:n_rows], (*shape, d))
    if out_name != working:
        table = xp.astype(table, xp.dtype(out_name))
    return xp.copy_into(out, table) if out is not None else table


def few_integer_positions(pos: Any, d: Any) -> Any | None:
    """The default encoding of a few integer positions, or ``None``.

    The lane of the calls models make most (a decode step, a short prompt): float32
    output of the default spec for up to :data:`~pe_core._kernel.routes.FEW_POSITIONS` integer positions of
    magnitude below :data:`~pe_core._kernel.routes.SMALL_MAX_INTEGER`, given as a NumPy
    array or as an array another backend can show the host without a copy or a
    synchronisation (:meth:`~pe_core_backends.Namespace.host_view`: a CPU tensor), built
    by the same float64 pass as the general host route
    (:func:`~pe_core._kernel.host_tables.few_integer_sin_cos`) without its dispatch. Anything else
    returns ``None`` and takes the general route.
    """
    values, xp = host_view(pos)
    if values is None or values.dtype.kind not in "iu" or not 0 < values.size <= FEW_POSITIONS:
        return None
    if type(d) is not int or d < 2 or d % 2:
        return None
    table = few_integer_sin_cos(values, _default_omegas(d))  # the default layout
    if table is None:
        return None
    if values.ndim != 1:
        table = table.reshape(*values.shape, d)
    return table if xp is None else xp.from_host(table, like=pos)


def few_spec_positions(pos: Any, d: Any, spec: Spec) -> Any | None:
    """The float32 table of a few host positions for any resolved 1-D ``spec`` (explicit
    frequencies, ``order="cos_sin"``: timestep embeddings), or ``None``.

    The lane of the per-step calls diffusion models make (one or a few timesteps, every
    denoising step): the positions as :func:`few_integer_positions` reads them (a NumPy
    array or a CPU tensor, without a copy), at most
    :data:`~pe_core._kernel.routes.FEW_POSITIONS` of them, integer or float, an even
    ``d``, no offset. It takes exactly the calls the general host route would send to
    its one float64 pass or its cached rows of it
    (:func:`~pe_core._kernel.host_tables.host_route` is asked),
    and writes each value in its final slot (no second pass to swap sin and cos): the
    general route's bits, without its dispatch. NaN, infinite and oversized positions
    are left to the general route, which refuses or redoes them.
    """
    values, xp = host_view(pos)
    if values is None or values.dtype.kind not in "iuf" or not 0 < values.size <= FEW_POSITIONS:
        return None
    if values.dtype == np.float16:  # the general route warns about their precision
        return None
    if type(d) is not int or d < 2 or d % 2 or spec.offset != 0:
        return None
    if values.dtype.kind != "f" and values.size <= 8:  # Python's max: quicker here
        max_abs = float(max(abs(v) for v in values.ravel().tolist()))
    else:  # NaN propagates through NumPy's max
        max_abs = float(np.max(np.abs(values)))
    if not max_abs < 2.0**53:  # NaN, inf and huge values: the general route
        return None
    freqs = omegas(d, spec)
    route, _ = host_route(
        values,
        freqs,
        offset=0,
        layout=spec.layout,
        working="float32",
        max_abs=max_abs,
        rounded_once=False,
        mutable=True,
    )
    if route == "rows":
        table = rows_sin_cos(values, freqs, offset=0, layout=spec.layout, order=spec.order)
    elif route == "small":
        table = small_sin_cos(values, freqs, offset=0, layout=spec.layout, order=spec.order)
    else:
        return None
    if values.ndim != 1:
        table = table.reshape(*values.shape, d)
    return table if xp is None else xp.from_host(table, like=pos)


_DEFAULT_SPEC = resolve_spec(None)


@functools.lru_cache(maxsize=64)
def _default_omegas(d: int) -> tuple[float, ...]:
    return omegas(check_d(d, _DEFAULT_SPEC), _DEFAULT_SPEC)


def _host_encode(
    xp: Namespace,
    positions: Positions,
    freqs: tuple[float, ...],
    spec: Spec,
    d: int,
    out_name: str,
    like: Any,
    out: Any,
) -> Any:
    """Positions known on the host: the cheapest exact route, then onto ``xp``."""
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    if like is not None and xp.on_accelerator(like):
        # the host table on like's accelerator, built and moved once per key
        host_name = working_dtype(out_name, xp, round_once=True)
        table = device_tables.cached_at(
            xp,
            values,
            ("encode", freqs, spec.offset, spec.layout, d),
            like,
            out_name,
            lambda: _host_encode(HOST, positions, freqs, spec, d, host_name, None, None),
        )
        return xp.copy_into(out, table) if out is not None else table
    # torch builds large run tables with its own (threaded) kernels; other tables are NumPy's
    builds = xp.builds_tables and values.size * len(freqs) >= BUILDS_MIN_PAIRS
    table = host_sin_cos(
        values,
        freqs,
        offset=spec.offset,
        layout=spec.layout,
        working=working_dtype(out_name, xp, round_once=True),
        max_abs=max_abs,
        xp=xp if builds else None,
        like=like,
        rounded_once=out_name in ("float16", "bfloat16"),
    )
    if d % 2:  # the zero column of odd_d="zero_pad", on the backend that built the table
        bxp = get_namespace(backend_of(table) or "numpy")
        table = bxp.concat(
            [table, bxp.zeros((bxp.shape(table)[0], 1), table.dtype, like=table)], -1
        )
    shape = (*positions.shape, d)
    if not isinstance(table, np.ndarray):  # built by the backend itself
        table = xp.reshape(table, shape)
        if xp.dtype_of(table) != out_name:
            table = xp.astype(table, xp.dtype(out_name))
    elif xp.numpy_arrays:
        if out is not None:
            out[...] = table.reshape(shape)
            return out
        return table.reshape(shape).astype(xp.dtype(out_name), copy=False)
    else:  # float16/bfloat16: the framework rounds the float64 table once, as it always did
        if out_name in ("float32", "float64"):
            table = table.astype(out_name, copy=False)
        table = device_tables.place(xp, table.reshape(shape), like, out_name)
    return xp.copy_into(out, table) if out is not None else table


def device_route(xp: Namespace, positions: Positions) -> str:
    """The route of positions on a device or traced (rows of
    :data:`~pe_core._kernel.routes.ROUTES`): ``"compiled_traced"`` where the compiler
    tracing them runs the kernel as one call (``Namespace.compile_when_traced``),
    ``"compiled_eager"`` for eager positions on an accelerator of a compiling backend,
    else ``"kernel"``."""
    if positions.placement == "traced" and xp.compile_when_traced:
        return "compiled_traced"
    if positions.placement == "device" and xp.compiles:
        return "compiled_eager"
    return "kernel"


#: The largest ``k`` of the fractional step's ``x * 2**k`` (``scale=1000`` timesteps take
#: 9): a frequency that needs more (``1e10`` rad per unit and beyond) leaves fractional
#: positions NaN in its columns rather than shrink every position's exact range.
_MAX_FRACTION_SHIFT = 24


def _kernel(
    xp: Namespace,
    positions: Any,
    freqs: tuple[float, ...],
    offset: float,
    layout: str,
    working: str,
    d: int,
    *,
    traced: bool,
) -> Any:
    """The exact per-element kernel: reduced turns, then sin/cos, then the layout.

    Positions outside the kernel's exact range (NaN, inf, floats ``|x| >= 2**63``) give
    NaN rows. Float positions meet frequencies beyond the kernel's fractional step
    (:data:`~pe_core._kernel.angles.FRACTION_MAX_TURNS`: ``scale=1000`` timesteps) as
    ``x * 2**k`` against ``f / 2**k`` (both exact), with ``k`` the least that brings
    every frequency within it, up to :data:`_MAX_FRACTION_SHIFT` (positions then keep an
    exact range of ``2**(63 - k)``); beyond it, fractional positions give NaN in the
    columns of frequencies faster than the step, and integral ones stay exact.
    """
    if xp.kind(xp.dtype_of(positions)) == "float":
        fastest = max(freqs, default=0.0) / (2.0 * math.pi) * (1 + 2.0**-40)
        k = max(0, math.ceil(math.log2(fastest / FRACTION_MAX_TURNS[working]))) if fastest else 0
        if 0 < k <= _MAX_FRACTION_SHIFT:
            positions, freqs = positions * 2.0**k, tuple(f / 2**k for f in freqs)
            offset = offset * 2**k
    if traced and not xp.traced_polynomials and d % 2 == 0:
        # A compiler fuses everything: one sin per feature, cos columns a quarter turn
        # ahead (added exactly to the integer word), each feature in its own column:
        # one contiguous, vectorised loop, no interleaving stores.
        n, interleaved = len(freqs), layout == "interleaved"
        columns = tuple(i // 2 if interleaved else i % n for i in range(2 * n))
        quarters = tuple(i % 2 if interleaved else i // n for i in range(2 * n))
        constants = xp.host_constant(_column_constants, freqs, offset, columns)
        turns = reduced_turns(
            xp, positions, freqs, working=working, constants=constants, quarters=quarters
        )
        return xp.sin(turns * (2.0 * math.pi))
    turns = reduced_turns(xp, positions, freqs, offset=offset, working=working, poison=True)
    if traced and working == "float32" and xp.traced_polynomials:
        # A compiler fuses everything: polynomial sin/cos beat the library's here.
        sin, cos = sin_cos_turns(xp, turns)
    else:
        angles = turns * (2.0 * math.pi)
        sin, cos = xp.sin(angles), xp.cos(angles)
    return assemble(xp, sin, cos, layout, pad=0.0 if d % 2 else None)


def _column_constants(*args: Any) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_column_constants(*args)


@functools.lru_cache(maxsize=64)
def _cached_column_constants(
    freqs: tuple[float, ...], offset: float, columns: tuple[int, ...]
) -> tuple:
    """The turn constants of ``freqs`` (:func:`~pe_core._kernel.angles.turn_constant_fields`)
    with one entry per output column: column ``j`` takes frequency ``columns[j]``."""
    words, rests, *others = turn_constant_fields(freqs, offset)  # others: f, wrap64, offset

    def pick(values: tuple | None) -> tuple | None:
        return None if values is None else tuple(values[j] for j in columns)

    return (tuple(map(pick, words)), tuple(map(pick, rests)), *map(pick, others))


#: :func:`_kernel` as a compiler traces it (the kernel of :func:`compiled`).
_traced_kernel = functools.partial(_kernel, traced=True)


def check_out(xp: Namespace, out: Any, shape: tuple[int, ...], dtype_name: str) -> None:
    if xp.shape(out) != shape or xp.dtype_of(out) != dtype_name:
        raise ValueError(
            f"out must have shape {shape} and dtype {dtype_name}. "
            f"Received: shape {xp.shape(out)}, dtype {xp.dtype_of(out)}"
        )
