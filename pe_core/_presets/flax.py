"""The ``flax`` preset: the flax examples' sinusoidal init."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(denominator="half_minus_one", layout="split", odd_d="zero_pad", name="flax"),
    source=("flax examples (wmt, lm1b) sinusoidal_init (min_scale=1, max_scale=1e4)"),
    order=50,
)
