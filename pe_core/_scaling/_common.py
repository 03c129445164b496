"""Checks and config reads the RoPE scaling types share (and :mod:`pe_core.rope_scaling`).

Private: the numbers every ``rope_type`` validates the same way (finite reals, normal
factors, even rotary dims), its required keys, the context lengths of a config and the
plain RoPE frequencies the types start from.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from pe_core._scaling._types import MissingRopeKeyError, ScalingInputs
from pe_core.validation import positive_int

#: Top-level synonyms of older configs: (current key, legacy key), read as one value
#: (a disagreement is an error). GPT-NeoX/Pythia: ``rotary_pct``, ``rotary_emb_base``;
#: GPT-J/GPT-2/CodeGen: ``n_embd``, ``n_head``, ``n_positions``.
_SYNONYMS = {
    "partial_rotary_factor": "rotary_pct",
    "rope_theta": "rotary_emb_base",
    "hidden_size": "n_embd",
    "num_attention_heads": "n_head",
    "max_position_embeddings": "n_positions",
}


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _real(
    value: Any,
    name: str,
    *,
    rope_type: str | None = None,
    minimum: float | None = None,
) -> float:
    """Return ``value`` as a finite float, or raise naming ``name`` (and the rope_type)."""
    where = f" for rope_type '{rope_type}'" if rope_type else ""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise ValueError(f"{name}{where} must be a finite real number, got {value!r}.")
    out = float(value)
    if minimum is not None and out <= minimum:
        raise ValueError(f"{name}{where} must be > {minimum:g}, got {value!r}.")
    return out


def _require(params: Mapping[str, Any], key: str, rope_type: str) -> Any:
    """Fetch a key a rope_type cannot do without; missing or None raises MissingRopeKeyError."""
    if params.get(key) is None:
        raise MissingRopeKeyError(
            f"rope_type '{rope_type}' requires the key '{key}' in rope_parameters/rope_scaling, "
            f"but it is missing. Present keys: {sorted(params)}."
        )
    return params[key]


def _top(config: Mapping[str, Any], key: str) -> Any:
    """A top-level value, read under its current and its legacy name (they must agree)."""
    value = config.get(key)
    legacy = _SYNONYMS.get(key)
    if legacy is None or config.get(legacy) is None:
        return value
    old = config[legacy]
    if value is not None and value != old:
        raise ValueError(
            f"Conflicting keys: {key}={value!r} and {legacy}={old!r} (the legacy name of "
            f"{key}) disagree. Remove one of them or make them equal."
        )
    return old


def _max_positions(
    config: Mapping[str, Any], rope_type: str, params: Mapping[str, Any] | None = None
) -> int:
    """``max_position_embeddings`` of the config (or of the rope dict; both must agree)."""
    value = _top(config, "max_position_embeddings")
    inner = None if params is None else params.get("max_position_embeddings")
    if value is not None and inner is not None and value != inner:
        raise ValueError(
            f"Conflicting keys: max_position_embeddings={value!r} in the config and "
            f"{inner!r} in the rope parameters disagree."
        )
    value = inner if value is None else value
    if value is None:
        raise MissingRopeKeyError(
            f"rope_type '{rope_type}' requires the key 'max_position_embeddings' in the config, "
            "but it is missing."
        )
    return positive_int(value, "max_position_embeddings")


def _original_max_positions(
    config: Mapping[str, Any], params: Mapping[str, Any], rope_type: str, nested: bool
) -> int:
    """Pre-training context length, with transformers v5 ``standardize_rope_params`` priority.

    1. a top-level ``original_max_position_embeddings`` (Phi-3 style) wins, except
       for per-layer (nested) rope parameters, where transformers ignores it;
    2. then the one inside the rope dict;
    3. else ``max_position_embeddings``.
    """
    for source in (params,) if nested else (config, params):
        if source.get("original_max_position_embeddings") is not None:
            return positive_int(
                source["original_max_position_embeddings"], "original_max_position_embeddings"
            )
    return _max_positions(config, rope_type, params)


def _base_inv_freq(theta: float, dim: int) -> np.ndarray:
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim
    return 1.0 / (theta**exponents)


def _factor(value: Any, rope_type: str, name: str = "factor") -> float:
    """A scaling factor: finite, > 0 and a normal float (its inverse stays finite)."""
    out = _real(value, name, rope_type=rope_type, minimum=0)
    if out < sys.float_info.min:
        raise ValueError(
            f"{name} for rope_type '{rope_type}' must be > 0 and a normal float "
            f"(>= {sys.float_info.min!r}), got {value!r}."
        )
    return out


def _context_factor(a: ScalingInputs, rope_type: str) -> tuple[int, float]:
    """``(original context length, factor)`` of ``yarn`` and ``longrope``: a ``factor``
    of ``None`` is the ratio of the two context lengths (Phi-3, transformers v5)."""
    original = _original_max_positions(a.config, a.params, rope_type, a.nested)
    factor = a.params.get("factor")
    if factor is None:
        factor = _max_positions(a.config, rope_type, a.params) / original
    return original, _factor(factor, rope_type)
