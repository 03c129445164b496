"""The plan of an N-D rotation, as plain Python data cached per configuration: which
axis each rotary pair follows, each pair's frequency (the 1-D schedule, each axis's own
schedule, or explicit values) and the attention factor.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

from pe_core.rope_scaling import rope_frequencies
from pe_core.rope_spec import config_for, freeze, rope_constants


@functools.lru_cache(maxsize=128)
def pair_axes(sections: tuple[int, ...], section_layout: str) -> tuple[int, ...]:
    k, n = len(sections), sum(sections)
    if section_layout in ("contiguous", "blocks"):
        return tuple(a for a, s in enumerate(sections) for _ in range(s))
    axes = tuple(j % k if j % k and j < k * sections[j % k] else 0 for j in range(n))
    counts = tuple(axes.count(a) for a in range(k))
    if counts != sections:
        raise ValueError(
            f"sections={sections} cannot be interleaved: the rule 'pair j follows axis "
            f"j % {k} while j < {k} * s_(j % {k}), else axis 0' gives {counts} pairs per axis. "
            f"Each axis a >= 1 needs {k} * s_a <= sum(sections) + a, and axis 0 the rest."
        )
    return axes


def plan(scaling: Any, *args: Any) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result;
    # it freezes scaling on the host (a hashable cache key), never traced.
    return _cached_plan(freeze(scaling) if scaling is not None else None, *args)


@functools.lru_cache(maxsize=256)
def _cached_plan(
    frozen: Any,
    base: float,
    head_dim: int,
    rotary_dim: int | None,
    sections: tuple[int, ...],
    section_layout: str,
    frequencies: Any,
) -> tuple:
    """``(omegas, axes, axis_omegas, runs, attention_factor)`` as plain Python data.

    ``omegas[j]`` and ``axes[j]`` are pair ``j``'s frequency and axis; ``axis_omegas[a]``
    are axis ``a``'s frequencies in pair order; ``runs`` are ``(axis, start, stop)``
    slices of those per-axis tables that, concatenated, give the pairs in order.
    """
    axes = pair_axes(sections, section_layout)
    omegas, attention_factor = _pair_frequencies(
        frozen, base, head_dim, rotary_dim, sections, axes, frequencies
    )
    axis_omegas = tuple(
        tuple(w for w, b in zip(omegas, axes, strict=True) if b == a) for a in range(len(sections))
    )
    return tuple(omegas), axes, axis_omegas, _runs(axes, len(sections)), float(attention_factor)


def _pair_frequencies(
    frozen: Any,
    base: float,
    head_dim: int,
    rotary_dim: int | None,
    sections: tuple[int, ...],
    axes: tuple[int, ...],
    frequencies: Any,
) -> tuple[tuple[float, ...], float]:
    """``(frequency of every pair in pair order, attention factor)`` for ``frequencies=``
    ``None`` (the 1-D schedule over ``rotary_dim``, scaled by ``frozen``), ``"per_axis"``
    or explicit values."""
    n = sum(sections)
    if frequencies is None:
        omegas, attention_factor = rope_constants(frozen, base, head_dim, rotary_dim, None)
        if len(omegas) != n:
            raise ValueError(
                f"sections={sections} hold {n} rotary pairs, but the rotary dimension is "
                f"{2 * len(omegas)} ({len(omegas)} pairs): sum(sections) must be "
                "rotary_dim / 2 (rotary_dim is head_dim unless given)."
            )
        return omegas, attention_factor
    dim = head_dim if rotary_dim is None else rotary_dim
    if 2 * n != dim:
        raise ValueError(
            f"sections={sections} hold {n} rotary pairs, but rotary_dim is {dim}: "
            "sum(sections) must be rotary_dim / 2 (rotary_dim is head_dim unless given)."
        )
    if frequencies == "per_axis":
        per_axis, attention_factor = per_axis_frequencies(frozen, base, sections)
        # per_axis[a] is axis a's schedule: hand its entries out in pair order
        counters = [iter(values) for values in per_axis]
        return tuple(next(counters[a]) for a in axes), attention_factor
    if frozen is not None:
        raise ValueError(
            "scaling does not apply to explicit frequencies: scale them yourself, "
            "or use frequencies=None or 'per_axis'."
        )
    if len(frequencies) != n:
        raise ValueError(
            f"frequencies has {len(frequencies)} entries; expected one per rotary pair: "
            f"sum(sections) = {n}."
        )
    return frequencies, 1.0


def _runs(axes: tuple[int, ...], k: int) -> tuple[tuple[int, int, int], ...]:
    """``(axis, start, stop)`` slices of the per-axis tables that, concatenated, give the
    pairs in order."""
    runs, taken = [], [0] * k
    for a, group in itertools.groupby(axes):
        size = len(list(group))
        runs.append((a, taken[a], taken[a] + size))
        taken[a] += size
    return tuple(runs)


def per_axis_frequencies(
    frozen: Any, base: float, sections: tuple[int, ...]
) -> tuple[list[tuple[float, ...]], float]:
    """Each axis's own 1-D schedule over ``2 * s_a`` features, and the attention factor."""
    params = None if frozen is None else _per_axis_scaling(frozen)
    out: list[tuple[float, ...]] = []
    attention = 1.0
    for s in sections:
        if s == 0:
            out.append(())
            continue
        inv_freq, attention = rope_frequencies(config_for(params, base, 2 * s, 2 * s))
        out.append(tuple(float(v) for v in inv_freq))
    return out, float(attention)


def _per_axis_scaling(scaling: Any) -> dict[str, Any]:
    """The rope-parameters dict of ``frequencies="per_axis"`` (not a model config)."""
    if not isinstance(scaling, Mapping):  # a FrozenMapping: read as a mapping
        raise TypeError(f"scaling must be a mapping. Received: {type(scaling).__name__}")
    if "rope_type" not in scaling and "type" not in scaling:
        raise ValueError(
            "frequencies='per_axis' takes scaling as a rope-parameters dict (with "
            "'rope_type'), e.g. {'rope_type': 'linear', 'factor': 2.0}, not a whole "
            "model config: each axis gets its own rotary dimension 2 * s_a."
        )
    params = dict(scaling)
    if "partial_rotary_factor" in params:
        raise ValueError(
            "frequencies='per_axis' does not take partial_rotary_factor: give rotary_dim= instead."
        )
    return params
