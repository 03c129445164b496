"""The ``diffusers_flip_sin_to_cos`` preset: diffusers' cos-first sinusoid tables."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(layout="split", order="cos_sin", odd_d="zero_pad", name="diffusers_flip_sin_to_cos"),
    source=(
        "diffusers get_timestep_embedding with flip_sin_to_cos=True, downscale_freq_shift=0, "
        "scale=1, max_period=10000 (Timesteps(d, True, 0): DiT, PixArt, SD3, Flux time "
        "projections); get_1d_sincos_pos_embed_from_grid with flip_sin_to_cos=True "
        "(SkyReels-V2, even d)"
    ),
    order=120,
)
