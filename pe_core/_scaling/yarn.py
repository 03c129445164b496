"""The ``yarn`` rope_type: YaRN, a ramp between interpolated and extrapolated frequencies."""

from __future__ import annotations

import math

import numpy as np

from pe_core._scaling._common import _context_factor, _real
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn(a: ScalingInputs) -> tuple[np.ndarray, float]:
    params, theta, dim = a.params, a.theta, a.rotary_dim
    original, factor = _context_factor(a, "yarn")

    attention_factor = params.get("attention_factor")
    mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(
                factor, _real(mscale, "mscale", rope_type="yarn")
            ) / _yarn_mscale(factor, _real(mscale_all_dim, "mscale_all_dim", rope_type="yarn"))
        else:
            attention_factor = _yarn_mscale(factor)
    attention_factor = _real(attention_factor, "attention_factor", rope_type="yarn", minimum=0)

    beta_fast = _real(params.get("beta_fast") or 32, "beta_fast", rope_type="yarn", minimum=0)
    beta_slow = _real(params.get("beta_slow") or 1, "beta_slow", rope_type="yarn", minimum=0)
    truncate = params.get("truncate", True)
    if truncate is not None and not isinstance(truncate, (bool, np.bool_)):
        raise ValueError(
            f"truncate for rope_type 'yarn' must be true, false or null, got {truncate!r}."
        )

    def correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers: prevent a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    weight = 1.0 - ramp  # of the extrapolated (unscaled) frequencies
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq = 1.0 / (factor * pos_freqs) * (1.0 - weight) + 1.0 / pos_freqs * weight
    return inv_freq, attention_factor


#: The ``yarn`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(
    _yarn,
    required=("factor",),
    optional=(
        "original_max_position_embeddings",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
    ),
)
