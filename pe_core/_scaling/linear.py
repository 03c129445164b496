"""The ``linear`` rope_type: position interpolation, the plain frequencies divided by ``factor``."""

from __future__ import annotations

import numpy as np

from pe_core._scaling._common import _base_inv_freq, _factor, _require
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _linear(a: ScalingInputs) -> tuple[np.ndarray, float]:
    factor = _factor(_require(a.params, "factor", "linear"), "linear")
    return _base_inv_freq(a.theta, a.rotary_dim) / factor, 1.0


#: The ``linear`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(_linear, required=("factor",))
