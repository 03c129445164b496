"""The ``cogvideox`` preset: CogVideoX's 3-D sin-cos table (frame, row, column).

An N-D preset (:mod:`pe_core.nd`) with a width per axis: coordinates ``(t, h, w)``; a
quarter of the features encode the frame, then three eighths the column and three
eighths the row, each block MAE's ``[sin | cos]``.
"""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(
        layout="split", axes=3, axis_order=(0, 2, 1), axis_shares=(2, 3, 3), name="cogvideox"
    ),
    source=(
        "diffusers get_3d_sincos_pos_embed (CogVideoX, ConsisID CogVideoXPatchEmbed) on "
        "(t, h, w) coordinates, d divisible by 16; its interpolation scales through "
        "pe_core.grid_encoding(interpolation_scale=(temporal, spatial, spatial))"
    ),
    order=140,
)
