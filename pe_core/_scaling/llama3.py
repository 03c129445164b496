"""The ``llama3`` rope_type: Llama 3.1's smooth band between kept and divided frequencies."""

from __future__ import annotations

import math

import numpy as np

from pe_core._scaling._common import (
    _base_inv_freq,
    _factor,
    _original_max_positions,
    _real,
    _require,
)
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _llama3(a: ScalingInputs) -> tuple[np.ndarray, float]:
    config, params, theta, dim, nested = a.config, a.params, a.theta, a.rotary_dim, a.nested
    factor = _factor(_require(params, "factor", "llama3"), "llama3")

    def read(key: str, minimum: float | None = None) -> float:
        return _real(_require(params, key, "llama3"), key, rope_type="llama3", minimum=minimum)

    low_freq_factor = read("low_freq_factor", minimum=0)
    high_freq_factor = read("high_freq_factor")
    if high_freq_factor < low_freq_factor:
        raise ValueError(
            "high_freq_factor for rope_type 'llama3' must be >= low_freq_factor, got "
            f"high_freq_factor={high_freq_factor!r}, low_freq_factor={low_freq_factor!r}."
        )
    old_context_len = _original_max_positions(config, params, "llama3", nested)

    inv_freq = _base_inv_freq(theta, dim)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    if high_freq_factor == low_freq_factor:  # Llama 4: a step, no smooth band
        return np.where(wavelen >= low_freq_wavelen, inv_freq / factor, inv_freq), 1.0
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama), 1.0


#: The ``llama3`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(
    _llama3,
    required=("factor", "low_freq_factor", "high_freq_factor"),
    optional=("original_max_position_embeddings",),
)
