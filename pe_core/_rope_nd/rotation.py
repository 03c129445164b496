"""The N-D rotation: cos and sin of every pair from its axis's coordinate (the exact
kernel on the device, or host tables placed on ``x``'s device), then the same
:meth:`~pe_core_backends.Namespace.rotate_pairs` as 1-D RoPE (or one rotate-half per
axis's block).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import exact_cos_sin
from pe_core._kernel.host_tables import host_sin_cos
from pe_core._kernel.placement import Positions
from pe_core_backends import Namespace


def rotate(
    xp: Namespace,
    x: Any,
    positions: Positions,
    plan: tuple,
    working: str,
    layout: str,
    section_layout: str,
    sections: tuple[int, ...],
) -> Any:
    """``x`` rotated by the pairs' angles of ``positions`` under ``plan``; ``working``
    is the host tables' dtype for host positions, the kernel's otherwise."""
    if positions.placement == "host":
        cos, sin = _host_factors(xp, positions, plan, working, x)
    else:
        cos, sin = _device_factors(xp, positions, plan, working)
    if section_layout == "blocks" and layout == "half":
        return _rotate_blocks(xp, x, cos, sin, sections, working)
    return xp.rotate_pairs(x, cos, sin, layout, 2 * len(plan[0]), working)


def _rotate_blocks(
    xp: Namespace, x: Any, cos: Any, sin: Any, sections: tuple[int, ...], working: str
) -> Any:
    """``section_layout="blocks"`` with the half layout: each axis's block of ``2 * s_a``
    features rotated by its own rotate-half; the features after them pass through."""
    parts, start, pair = [], 0, 0
    for s in sections:
        if s:
            block = x[..., start : start + 2 * s]
            factors = cos[..., pair : pair + s], sin[..., pair : pair + s]
            parts.append(xp.rotate_pairs(block, *factors, "half", 2 * s, working))
            start, pair = start + 2 * s, pair + s
    if start < xp.shape(x)[-1]:
        parts.append(x[..., start:])
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=-1)


def _device_factors(xp: Namespace, positions: Positions, plan: tuple, working: str) -> tuple:
    """cos and sin of device or traced positions, by the exact kernel, axis by axis."""
    _, _, axis_omegas, runs, attention_factor = plan
    tables = {
        a: exact_cos_sin(xp, positions.array[..., a], w, working=working, scale=attention_factor)
        for a, w in enumerate(axis_omegas)
        if w
    }
    if len(runs) == 1:
        return tables[runs[0][0]]
    return tuple(  # cos, then sin: the per-axis tables' runs in pair order
        xp.concat([_part(tables[a][i], p, q, len(axis_omegas[a])) for a, p, q in runs], axis=-1)
        for i in (0, 1)
    )


def _part(table: Any, start: int, stop: int, size: int) -> Any:
    return table if (start, stop) == (0, size) else table[..., start:stop]


def _host_factors(
    xp: Namespace, positions: Positions, plan: tuple, working: str, x: Any
) -> tuple[Any, Any]:
    """cos and sin of host positions, built exactly on the host axis by axis and placed
    on ``x``'s device (through :mod:`pe_core.device_tables`, as for 1-D RoPE)."""
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    omegas, axes, axis_omegas, _, attention_factor = plan
    rounded_once = xp.dtype_of(x) in ("float16", "bfloat16")
    lead = values.shape[:-1]

    def build() -> tuple[np.ndarray, np.ndarray]:
        cos = np.empty((*lead, len(omegas)), dtype=np.float64)
        sin = np.empty_like(cos)
        where = np.asarray(axes)
        for a, axis_w in enumerate(axis_omegas):
            if not axis_w:
                continue
            table = host_sin_cos(
                np.ascontiguousarray(values[..., a]),
                axis_w,
                offset=0.0,
                layout="split",
                working=working,
                max_abs=max_abs,
                rounded_once=rounded_once,
            )
            table = np.asarray(table).reshape(*lead, 2, len(axis_w))
            sin[..., where == a] = table[..., 0, :]
            cos[..., where == a] = table[..., 1, :]
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor
        return cos.astype(working), sin.astype(working)

    key = ("rope_nd", omegas, axes, attention_factor, rounded_once)
    return device_tables.cached_at(xp, values, key, x, working, build, private=True)
