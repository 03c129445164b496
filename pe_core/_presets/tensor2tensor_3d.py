"""The ``tensor2tensor_3d`` preset: tensor2tensor's 3-D timing signal.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(..., axes)``, one 1-D encoding per axis.
"""

from pe_core._presets import Preset
from pe_core._presets.tensor2tensor_2d import PRESET as _PLANE

PRESET = Preset(
    spec=_PLANE.spec.replace(axes=3, name="tensor2tensor_3d"),
    source=(
        "tensor2tensor common_attention.add_timing_signal_nd on [batch, t, h, w, channels] "
        "(channels // 6 pairs per axis)"
    ),
    order=80,
)
