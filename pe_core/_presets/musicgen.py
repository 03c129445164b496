"""The ``musicgen`` preset: MusicGen's sinusoidal positions, the cosines first."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(
        denominator="half_minus_one",
        layout="split",
        order="cos_sin",
        odd_d="zero_pad",
        name="musicgen",
    ),
    source=(
        "transformers MusicgenSinusoidalPositionalEmbedding and "
        "MusicgenMelodySinusoidalPositionalEmbedding ([cos | sin], log(10000) / "
        "(d/2 - 1)); diffusers get_timestep_embedding with flip_sin_to_cos=True, "
        "downscale_freq_shift=1 (d >= 4)"
    ),
    order=110,
)
