"""The ``dynamic`` rope_type: dynamic NTK, a base that grows with the sequence length."""

from __future__ import annotations

import numpy as np

from pe_core._scaling._common import _base_inv_freq, _factor, _max_positions, _require
from pe_core._scaling._types import RopeScalingType, ScalingInputs


def _dynamic(a: ScalingInputs) -> tuple[np.ndarray, float]:
    config, params, theta, dim, seq_len = a.config, a.params, a.theta, a.rotary_dim, a.seq_len
    factor = _factor(_require(params, "factor", "dynamic"), "dynamic")
    if dim <= 2:
        raise ValueError(
            f"rope_type 'dynamic' needs rotary_dim > 2 (exponent dim/(dim-2)), got {dim}."
        )
    max_pos = _max_positions(config, "dynamic", params)
    length = max_pos if seq_len is None else max(seq_len, max_pos)
    base = theta * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(base, dim), 1.0


#: The ``dynamic`` entry of :data:`pe_core.rope_scaling.SCALING_TYPES`.
SCALING_TYPE = RopeScalingType(_dynamic, required=("factor",), needs_seq_len=True)
