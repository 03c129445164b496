"""The ``default`` rope_type: plain RoPE, ``theta ** (-2j / rotary_dim)``."""

from __future__ import annotations

import numpy as np

from pe_core._scaling._common import _base_inv_freq
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _default(a: ScalingInputs) -> tuple[np.ndarray, float]:
    return _base_inv_freq(a.theta, a.rotary_dim), 1.0


#: The ``default`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(_default)
