"""The engine of :func:`pe_core.rope_cos_sin`: RoPE's cos/sin tables, laid out.

One call: choose the backend and dtype, classify the positions once
(:func:`~pe_core._kernel.placement.prepare_positions`), read the frequencies
(:meth:`~pe_core.RopeSpec.constants`: :func:`~pe_core.rope_spec.rope_constants`, the
one way every RoPE route reads them),
then the route :func:`~pe_core.apply_rope` takes for its own factors:

* host positions: the exact host table (:func:`~pe_core._kernel.host_tables.host_sin_cos`,
  float64 rounded once for float64, float16 and bfloat16 results), laid out on the
  host and placed through :mod:`pe_core.device_tables` (kept on accelerators, and for
  small position arrays);
* positions on a device or traced: the exact integer kernel
  (:func:`~pe_core._kernel.angles.exact_cos_sin`) where they live, no host read; as
  one compiled program for eager JAX and TensorFlow.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import exact_cos_sin
from pe_core._kernel.compiled import compiled
from pe_core._kernel.inputs import resolve_dtype, working_dtype
from pe_core._kernel.placement import Positions, prepare_positions
from pe_core._rope_call import host_cos_sin, seq_len_of
from pe_core.rope_spec import RopeSpec
from pe_core_backends import HOST, Namespace

__all__ = ["TableRope", "cos_sin_tables", "frequency_tables", "spread"]


class TableRope(NamedTuple):
    """The rope of one call, validated on the host (a compiler embeds it whole)."""

    head_dim: int
    spec: RopeSpec
    layout: str  # "half", "interleaved" or "half_width"
    seq_len_type: str | None  # the rope type if it needs the sequence length
    constants: tuple[tuple[float, ...], float] | None  # (inv_freq, factor) when it does not


def cos_sin_tables(
    xp: Namespace, source: str | None, pos: Any, rope: TableRope, dtype: Any, check_values: bool
) -> tuple[Any, Any]:
    """``(cos, sin)`` of ``pos`` (of backend ``source``) on ``xp``, for ``rope``."""
    out_name, _ = resolve_dtype(xp, dtype)
    positions = prepare_positions(pos, xp, source, what="positions", check_values=check_values)
    if rope.constants is not None:
        inv_freq, factor = rope.constants
    else:  # dynamic, longrope: from max(pos) + 1, which only host positions give
        assert rope.seq_len_type is not None
        seq_len = seq_len_of(xp, positions, rope.seq_len_type, check_values)
        inv_freq, factor = rope.spec.constants(rope.head_dim, seq_len)
    return placed_tables(xp, positions, inv_freq, factor, rope.layout, out_name)


def frequency_tables(
    xp: Namespace, pos: Any, inv_freq: tuple[float, ...], factor: float, layout: str, dtype: Any
) -> tuple[Any, Any]:
    """``factor * cos`` and ``factor * sin`` of ``pos * inv_freq`` (float64 frequencies
    given by the caller: an integration restating its library's own formula), by the
    routes of :func:`cos_sin_tables`; ``pos`` an array of ``xp``."""
    out_name, _ = resolve_dtype(xp, dtype)
    positions = prepare_positions(pos, xp, xp.name, what="positions")
    return placed_tables(xp, positions, inv_freq, factor, layout, out_name)


def placed_tables(
    xp: Namespace,
    positions: Positions,
    inv_freq: tuple[float, ...],
    factor: float,
    layout: str,
    out_name: str,
) -> tuple[Any, Any]:
    """The tables of classified ``positions``: host positions, the exact host table,
    laid out on the host, placed once; others, the exact kernel where they live."""
    if positions.placement == "host":
        values, max_abs = positions.host, positions.max_abs
        assert values is not None and max_abs is not None
        like = positions.array  # a framework array on the CPU: its device; else None
        working = working_dtype(out_name, xp, round_once=True)

        def build() -> tuple[np.ndarray, np.ndarray]:
            rounded_once = out_name != "float32"
            cos, sin = host_cos_sin(values, inv_freq, factor, working, max_abs, rounded_once)
            cos, sin = spread(HOST, cos, layout), spread(HOST, sin, layout)
            return np.ascontiguousarray(cos), np.ascontiguousarray(sin)

        key = ("rope_tables", inv_freq, factor, layout)
        return device_tables.cached_at(xp, values, key, like, out_name, build)
    working = working_dtype(out_name)
    static = (inv_freq, factor, layout, working, out_name)
    if xp.bounded_compiles and not xp.is_traced(positions.array):
        # eager JAX / TensorFlow: one compiled program, not a compile per eager op
        return compiled(xp.name, _device_tables, *static)(positions.array)
    return _device_tables(xp, positions.array, *static)


def spread(xp: Namespace, half: Any, layout: str) -> Any:
    """One column per frequency (``(..., n)``) in the table ``layout``: ``cat(f, f)``
    (``"half"``), each column twice in a row (``"interleaved"``), or as is.

    >>> from pe_core_backends import get_namespace
    >>> spread(get_namespace("numpy"), np.array([[1.0, 2.0]]), "interleaved").tolist()
    [[1.0, 1.0, 2.0, 2.0]]
    """
    if layout == "half":
        return xp.concat([half, half], -1)
    if layout == "interleaved":
        return xp.merge_last_two(xp.stack([half, half], -1))
    return half


def _device_tables(
    xp: Namespace,
    positions: Any,
    inv_freq: tuple[float, ...],
    factor: float,
    layout: str,
    working: str,
    out_name: str,
) -> tuple[Any, Any]:
    """Positions on a device or traced: the exact kernel where they live."""
    cos, sin = exact_cos_sin(xp, positions, inv_freq, working=working, scale=factor)
    cos, sin = spread(xp, cos, layout), spread(xp, sin, layout)
    if out_name != working:
        cos, sin = xp.astype(cos, xp.dtype(out_name)), xp.astype(sin, xp.dtype(out_name))
    return cos, sin
