"""The ``tensor2tensor`` preset: tensor2tensor's timing signal."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(denominator="half_minus_one", layout="split", odd_d="zero_pad", name="tensor2tensor"),
    source=(
        "tensor2tensor common_attention.get_timing_signal_1d (min_timescale=1, "
        "max_timescale=1e4, start_index=0)"
    ),
    order=20,
)
