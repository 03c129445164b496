"""The ``longrope`` rope_type: LongRoPE (Phi-3), per-pair short and long factors.

PhiMoE (Phi-3.5-MoE) adds ``short_mscale`` and ``long_mscale``: with both keys, cos and
sin are multiplied by ``long_mscale`` when ``seq_len > original_max_position_embeddings``
and by ``short_mscale`` otherwise, in place of the ``attention_factor`` (transformers'
``PhimoeRotaryEmbedding.forward``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pe_core._scaling._common import _context_factor, _is_real, _real, _require
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _factor_list(params: Mapping[str, Any], key: str, dim: int) -> np.ndarray:
    raw = _require(params, key, "longrope")
    expected = (
        f"{key} for rope_type 'longrope' must be a list of rotary_dim // 2 = {dim // 2} "
        "finite numbers > 0"
    )
    if isinstance(raw, (str, bytes, Mapping)) or not hasattr(raw, "__len__"):
        raise ValueError(f"{expected}, got {type(raw).__name__} {raw!r}.")
    if any(
        isinstance(v, (bool, np.bool_)) or not _is_real(v)
        for v in np.ravel(np.asarray(raw, dtype=object))
    ):
        raise ValueError(f"{expected}, got a non-number in {raw!r}.")
    values = np.asarray(raw, dtype=np.float64)
    if values.shape != (dim // 2,):
        raise ValueError(f"{expected}, got shape {values.shape}.")
    if not np.all(np.isfinite(values)) or not np.all(values > 0):
        bad = int(np.argmin(np.isfinite(values) & (values > 0)))
        raise ValueError(f"{expected}, got {key}[{bad}] = {values[bad]!r}.")
    return values


def _longrope(a: ScalingInputs) -> tuple[np.ndarray, float]:
    params, theta, dim, seq_len = a.params, a.theta, a.rotary_dim, a.seq_len
    short_factor = _factor_list(params, "short_factor", dim)
    long_factor = _factor_list(params, "long_factor", dim)
    original, factor = _context_factor(a, "longrope")

    attention_factor = params.get("attention_factor")
    mscale = _mscale(params, attention_factor, seq_len is not None and seq_len > original)
    if mscale is not None:
        attention_factor = mscale
    elif attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original))
    attention_factor = _real(attention_factor, "attention_factor", rope_type="longrope", minimum=0)

    ext_factors = long_factor if seq_len and seq_len > original else short_factor
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim
    return 1.0 / (ext_factors * theta**exponents), attention_factor


def _mscale(params: Mapping[str, Any], attention_factor: Any, long: bool) -> float | None:
    """PhiMoE's ``long_mscale`` (``long``) or ``short_mscale``; ``None`` without them."""
    given = [key for key in ("short_mscale", "long_mscale") if params.get(key) is not None]
    if not given:
        return None
    if len(given) == 1:
        missing = "long_mscale" if given == ["short_mscale"] else "short_mscale"
        raise ValueError(
            f"rope_type 'longrope' takes short_mscale and long_mscale together (PhiMoE), "
            f"but {missing} is missing. Received: {given[0]}={params[given[0]]!r}"
        )
    if attention_factor is not None:
        raise ValueError(
            "rope_type 'longrope' takes either attention_factor or short_mscale and "
            "long_mscale (PhiMoE: they replace it), not both. Received: "
            f"attention_factor={attention_factor!r}"
        )
    short, long_ = (
        _real(params[key], key, rope_type="longrope", minimum=0)
        for key in ("short_mscale", "long_mscale")
    )
    return long_ if long else short


#: The ``longrope`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(
    _longrope,
    required=("short_factor", "long_factor"),
    optional=(
        "factor",
        "attention_factor",
        "original_max_position_embeddings",
        "short_mscale",
        "long_mscale",
    ),
    needs_seq_len=True,
)
