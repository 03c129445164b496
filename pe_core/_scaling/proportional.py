"""The ``proportional`` rope_type: Gemma 4's partial rotation over the whole head, divided by ``factor``."""

from __future__ import annotations

import numpy as np

from pe_core._scaling._common import _factor
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _proportional(a: ScalingInputs) -> tuple[np.ndarray, float]:
    """transformers' ``_compute_proportional_rope_parameters`` (Gemma 4 full attention)."""
    params, theta, head_dim, pairs = a.params, a.theta, a.head_dim, a.pairs
    if head_dim % 2:
        raise ValueError(
            f"rope_type 'proportional' rotates the whole head in pairs; head_dim={head_dim} is odd."
        )
    factor = params.get("factor")
    factor = 1.0 if factor is None else _factor(factor, "proportional")
    exponents = np.arange(0, 2 * pairs, 2, dtype=np.int64).astype(np.float64) / head_dim
    inv_freq = np.zeros(head_dim // 2, dtype=np.float64)
    inv_freq[:pairs] = 1.0 / (theta**exponents)
    return inv_freq / factor, 1.0


#: The ``proportional`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(_proportional, optional=("factor",))
