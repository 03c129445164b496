"""The ``mae_2d`` preset: MAE's 2-D sin-cos grid.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(..., axes)``, one 1-D encoding per axis.
"""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(layout="split", axes=2, axis_order="reversed", name="mae_2d"),
    source=(
        "MAE util/pos_embed.get_2d_sincos_pos_embed (rows after the cls row), also in DiT; "
        "diffusers get_2d_sincos_pos_embed with base_size and interpolation_scale through "
        "pe_core.grid_encoding. The first half of the features encodes the column"
    ),
    order=60,
)
