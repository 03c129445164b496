"""The ``tensor2tensor_2d`` preset: tensor2tensor's 2-D timing signal.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(..., axes)``, one 1-D encoding per axis.
"""

from pe_core._presets import Preset
from pe_core._presets.tensor2tensor import PRESET as _LINE

PRESET = Preset(
    spec=_LINE.spec.replace(axes=2, name="tensor2tensor_2d"),
    source=(
        "tensor2tensor common_attention.add_timing_signal_nd on [batch, h, w, channels] "
        "(min_timescale=1, max_timescale=1e4; channels // 4 pairs per axis)"
    ),
    order=70,
)
