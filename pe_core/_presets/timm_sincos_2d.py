"""The ``timm_sincos_2d`` preset: timm's 2-D sin-cos table, sines of both axes first.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(h, w)``; the features are
``[sin h | sin w | cos h | cos w]`` (``axis_layout="split"``).
"""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(layout="split", axes=2, axis_layout="split", name="timm_sincos_2d"),
    source=(
        "timm layers.pos_embed_sincos.build_sincos2d_pos_embed(feat_shape, dim) with its "
        "defaults (temperature=10000, reverse_coord=False, interleave_sin_cos=False); "
        "reverse_coord=True is axis_order='reversed', interleave_sin_cos=True is "
        "axis_layout='blocks', temperature is base"
    ),
    order=150,
)
