"""One validated RoPE call: its configuration, its checks and its cos/sin.

:func:`rope_factors` validates one 1-D call of :func:`~pe_core.apply_rope` (the
configuration, ``x``, the positions, classified once) and builds its ``cos``/``sin``:
exact on the host for positions the host knows (placed through
:mod:`pe_core.device_tables`), from the exact integer kernel where the positions live
otherwise. The argument checks here are the ones every RoPE route uses: the general
route, the decode-step lane (:mod:`pe_core._rope_lane`) and N-D RoPE
(:mod:`pe_core.rope_nd`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import exact_cos_sin
from pe_core._kernel.host_tables import host_sin_cos, small_call_fits
from pe_core._kernel.inputs import check_request_size, working_dtype
from pe_core._kernel.placement import Positions, prepare_positions
from pe_core._kernel.rope_factors import small_cos_sin
from pe_core.rope_layout import LAYOUTS
from pe_core.rope_scaling import needs_seq_len, scaling_rope_type
from pe_core.rope_spec import RopeSpec, rope_constants
from pe_core.rope_spec import scaling_for_layer as _scaling_for_layer
from pe_core.validation import broadcasts_into, choice, finite_real, is_integer, known_size
from pe_core_backends import (
    Namespace,
    backend_of,
    canonical_backend,
    check_foreign,
    from_dlpack,
    get_namespace,
    is_dlpack,
)


def configuration(spec: RopeSpec | None, *config: Any) -> tuple[float, str, int | None, Any]:
    """``(base, layout, rotary_dim, scaling)`` from ``spec`` or the plain arguments
    ``config`` (``(base, layout, rotary_dim, scaling, layer_type)``), the scaling reduced
    to ``layer_type``'s rope of a model config."""
    base, layout, rotary_dim, scaling, layer_type = config
    if spec is not None:
        base, layout, rotary_dim, scaling, layer_type = unpack_spec(spec, *config)
    if layer_type is not None or (scaling is not None and not isinstance(scaling, Mapping)):
        scaling = _scaling_for_layer(scaling, layer_type)
    return base, layout, rotary_dim, scaling


def all_none(*values: object) -> bool:
    return all(value is None for value in values)


def each(rotate: Callable[[Any], Any], x: Any) -> Any:
    """``rotate(x)``, or the tuple of ``rotate(item)`` for a tuple or list ``x``."""
    return tuple(rotate(item) for item in x) if isinstance(x, (tuple, list)) else rotate(x)


def rope_factors(x: Any, pos: Any, *config: Any) -> tuple[Namespace, Any, Any, Any, str, int, str]:
    """Validate one 1-D call and build its ``cos``/``sin`` (prepare → plan); ``config`` is
    ``(base, layout, rotary_dim, scaling, backend, check_values)``."""
    _, _, _, scaling, _, check_values = config
    xp, x, positions, layout, head_dim, rotary_dim, base = check_call(
        x, pos, "apply_rope", 0, *config
    )
    check_broadcast(positions.shape, xp.shape(x))
    seq_len = None
    if needs_seq_len(scaling):
        seq_len = seq_len_of(xp, positions, str(scaling_rope_type(scaling)), check_values)
    inv_freq, attention_factor = xp.host_constant(
        rope_constants, scaling, base, head_dim, rotary_dim, seq_len
    )
    rotary_dim = 2 * len(inv_freq)
    working = rotation_dtype(xp, x, positions)
    route = factors_route(xp, positions, inv_freq, working, x)
    if route == "small":
        # a few positions off an accelerator (decode steps): one float64 pass, no cache
        assert positions.host is not None
        cos, sin = small_cos_sin(positions.host, inv_freq, attention_factor)
        cos, sin = xp.from_host(cos, like=x), xp.from_host(sin, like=x)
    elif route == "host_table":
        cos, sin = host_factors(xp, positions, inv_freq, attention_factor, working, x)
    else:
        cos, sin = exact_cos_sin(
            xp, positions.array, inv_freq, working=working, scale=attention_factor
        )
    return xp, x, cos, sin, layout, rotary_dim, working


def check_call(
    x: Any, pos: Any, what: str, trailing: int, *config: Any
) -> tuple[Namespace, Any, Positions, str, int, int | None, float]:
    """The checks every RoPE route shares, in order, for ``config`` as in
    :func:`rope_factors`: ``(xp, x, positions, layout, head_dim, rotary_dim, base)``,
    ``x`` on its namespace, ``pos`` classified (its last ``trailing`` axes not counted
    in the early size check of ``what``)."""
    base, layout, rotary_dim, _, backend, check_values = config
    layout = check_layout(layout)
    xp, x = as_input(x, backend)
    xp.check_known_rank(x, "x")
    shape = xp.shape(x)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = check_head_dim(shape[-1])
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    base = check_base(base)
    check_size(xp, x, pos, what, trailing)
    positions = classify(pos, xp, check_values, xp.is_traced(x), x)
    return xp, x, positions, layout, head_dim, rotary_dim, base


def rotation_dtype(xp: Namespace, x: Any, positions: Positions) -> str:
    """The dtype ``x`` is rotated in: float16/bfloat16 ``x`` at host positions in float64,
    rounded once, where :func:`host_float64` allows it."""
    round_once = positions.placement == "host" and host_float64(xp, x)
    return working_dtype(xp.dtype_of(x), xp, round_once=round_once)


def check_size(xp: Namespace, x: Any, pos: Any, what: str, trailing: int = 0) -> None:
    """Refuse, from the shapes alone and before ``pos`` is read, a RoPE call whose output
    (``x``'s shape) or cos/sin (float64 on the host: a pair per position and pair of
    features) cannot fit in memory; traced calls are not checked."""
    if xp.is_traced(x):
        return
    shape = xp.shape(x)
    n_out = math.prod(shape)
    n_tables = (known_size(pos, trailing) or 1) * shape[-1]
    check_request_size(
        max(n_out, n_tables), xp.dtype_of(x), what=what, extra_bytes=16 * n_tables, like=x
    )


def classify(pos: Any, xp: Namespace, check_values: bool, tracing: bool, like: Any) -> Positions:
    """The positions ``pos`` of a call on ``xp``, converted and classified
    (:func:`~pe_core._kernel.placement.prepare_positions`)."""
    return prepare_positions(
        pos, xp, backend_of(pos), what="pos", check_values=check_values, tracing=tracing, like=like
    )


def factors_route(
    xp: Namespace, positions: Positions, inv_freq: tuple[float, ...], working: str, x: Any
) -> str:
    """The route of a RoPE call's cos/sin (rows of :data:`~pe_core._kernel.routes.ROUTES`
    after the decode-step lane): ``"small"`` (one float64 pass, no cache) for a few
    host positions and float32 ``x`` off accelerators, ``"host_table"`` for other host
    positions, ``"kernel"`` for positions on an accelerator or traced."""
    if positions.placement != "host":
        return "kernel"
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    if (
        working == "float32"
        and xp.dtype_of(x) not in ("float16", "bfloat16")
        and not xp.on_accelerator(x)
        and small_call_fits(
            values.size, len(inv_freq), max_abs, 0, inv_freq, integral=values.dtype.kind in "iu"
        )
    ):
        return "small"
    return "host_table"


def host_float64(xp: Namespace, x: Any) -> bool:
    """Whether a float16/bfloat16 ``x`` is rotated in float64 (eager, off accelerators,
    where the backend has float64): then within one ulp of the exact result. Traced
    and accelerator calls rotate in float32 (see :doc:`precision`)."""
    return xp.supports("float64") and not xp.on_accelerator(x) and not xp.is_traced(x)


def seq_len_of(xp: Namespace, positions: Positions, rope_type: str, check_values: bool) -> int:
    """``max(pos) + 1``, transformers' context length for ``dynamic``/``longrope``."""
    values = positions.host
    if values is None and positions.placement == "device" and check_values:
        values = xp.to_numpy(positions.array)  # the caller accepted a synchronisation
    if values is None:
        raise ValueError(
            f"scaling with rope_type {rope_type!r} chooses its frequencies from "
            "seq_len = max(pos) + 1, which is unknown for traced positions and is not "
            "read back from positions on an accelerator. Pass positions the host knows "
            "(a range, a NumPy array), check_values=True (reads them: synchronises), "
            "or a rope_type that does not depend on the sequence length (e.g. "
            "'linear', 'yarn', 'llama3')."
        )
    return max(1, math.floor(float(values.max())) + 1) if values.size else 1


def host_cos_sin(
    values: np.ndarray,
    inv_freq: tuple[float, ...],
    factor: float,
    working: str,
    max_abs: float,
    rounded_once: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``(cos, sin)``, each ``values.shape + (len(inv_freq),)``, of host positions:
    :func:`~pe_core._kernel.host_tables.host_sin_cos` (split layout), times ``factor``,
    in ``working``, contiguous."""
    table = host_sin_cos(
        values,
        inv_freq,
        offset=0.0,
        layout="split",
        working=working,
        max_abs=max_abs,
        rounded_once=rounded_once,
    )
    table = np.asarray(table).reshape(*values.shape, 2, len(inv_freq))
    if factor != 1.0:
        table = table * factor
    table = table.astype(working, copy=False)
    return np.ascontiguousarray(table[..., 1, :]), np.ascontiguousarray(table[..., 0, :])


def host_factors(
    xp: Namespace,
    positions: Positions,
    inv_freq: tuple[float, ...],
    attention_factor: float,
    working: str,
    x: Any,
) -> tuple[Any, Any]:
    """``cos`` and ``sin`` of host positions, on ``x``'s backend and device.

    Built exactly on the host (:func:`~pe_core._kernel.host_tables.host_sin_cos`, split
    layout: ``[sin | cos]``) and placed through :mod:`pe_core.device_tables`: kept on
    an accelerator, and for small position arrays everywhere (the query and the key
    of a decode step share them).
    """
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    rounded_once = xp.dtype_of(x) in ("float16", "bfloat16")

    def build() -> tuple[np.ndarray, np.ndarray]:
        # small calls for float16/bfloat16 x: float64 cos/sin, rounded once (the
        # rotation nearly cancels in places, where float32's error would show)
        return host_cos_sin(values, inv_freq, attention_factor, working, max_abs, rounded_once)

    key = ("rope", inv_freq, attention_factor, rounded_once)
    return device_tables.cached_at(xp, values, key, x, working, build, private=True)


def unpack_spec(spec: object, *config: Any) -> tuple[float, str, int | None, Any, None]:
    """``(base, layout, rotary_dim, scaling, None)`` of ``spec`` (scaling reduced to its
    layer type); the plain arguments ``config`` (``(base, layout, rotary_dim, scaling,
    layer_type)``) must keep their defaults."""
    base, layout, rotary_dim, scaling, layer_type = config
    if not isinstance(spec, RopeSpec):
        raise TypeError(f"spec must be a RopeSpec or None. Received: {spec!r}")
    given = {"base": base != 10000.0, "layout": layout != "half"}
    given |= {"rotary_dim": rotary_dim is not None, "scaling": scaling is not None}
    given["layer_type"] = layer_type is not None
    for name, is_given in given.items():
        if is_given:
            raise ValueError(
                f"Pass the rope configuration either as spec= or as {name}=, not both (spec "
                "already holds base, layout, rotary_dim, scaling and layer_type)."
            )
    return spec.base, spec.layout, spec.rotary_dim, spec.resolved_scaling, None


def check_layout(layout: object) -> str:
    return choice(layout, "layout", LAYOUTS)


def as_input(x: Any, backend: str | None) -> tuple[Namespace, Any]:
    source = backend_of(x)
    if source is None:
        check_foreign(x, backend, what="x")
        if isinstance(x, (bool, numbers.Number)):
            raise TypeError(
                f"x must be an array of shape (..., seq, head_dim). Received: {type(x).__name__}"
            )
        if is_dlpack(x):  # e.g. CuPy: imported by the backend computed on
            source = canonical_backend(backend) if backend is not None else "numpy"
            x = from_dlpack(x, source, what="x")
        else:
            x, source = np.asarray(x), "numpy"
    name = canonical_backend(backend) if backend is not None else source
    xp = get_namespace(name)
    if name != source:
        values = get_namespace(source).concrete(x)
        if values is None:
            raise TypeError(
                f"x is a traced {source} value and cannot be moved to backend {name!r}; "
                "call with backend=None (or the same backend) inside compiled code."
            )
        x = xp.asarray(values)
    dtype_name = xp.dtype_of(x)
    if xp.kind(dtype_name) != "float":
        raise TypeError(
            "x must be a floating array (float16, bfloat16, float32 or float64). "
            f"Received dtype: {dtype_name}"
        )
    return xp, x


def check_head_dim(head_dim: int) -> int:
    if head_dim is None:  # unknown in a traced graph (tf.function signatures)
        raise ValueError(
            "head_dim (the last axis of x) must be known when tracing (other axes may be "
            f"unknown or symbolic). Received: head_dim={head_dim!r}"
        )
    if head_dim < 2 or head_dim % 2:
        raise ValueError(
            "head_dim (the last axis of x) must be even and >= 2: RoPE rotates pairs of "
            f"features. Received: head_dim={head_dim}"
        )
    return head_dim


def check_rotary_dim(rotary_dim: object, head_dim: int) -> int | None:
    if rotary_dim is None:
        return None
    if not is_integer(rotary_dim):
        raise TypeError(f"rotary_dim must be an integer or None. Received: {rotary_dim!r}")
    value = int(rotary_dim)  # type: ignore[call-overload]
    if value % 2 or not 2 <= value <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in [2, head_dim={head_dim}]. Received: {value}"
        )
    return value


def check_base(base: object) -> float:
    if type(base) is float and 1.0 < base < math.inf:  # the common case, checked cheaply
        return base
    return finite_real(base, "base (rope_theta)", greater_than=1)


def check_broadcast(pos_shape: tuple[int, ...], x_shape: tuple[int, ...]) -> None:
    lead = tuple(x_shape[:-1])
    if not broadcasts_into(pos_shape, lead):
        raise ValueError(
            f"pos of shape {pos_shape} does not broadcast against x.shape[:-1] = {lead} "
            f"(x has shape {tuple(x_shape)} = (..., seq, head_dim)). Give positions of "
            "shape (seq,), (batch, 1, seq) or any shape that broadcasts to x.shape[:-1] "
            "without adding axes."
        )
