"""The ``positional_encodings_3d`` preset: the PyPI positional-encodings 3-D encoding.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(..., axes)``, one 1-D encoding per axis.
"""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(odd_d="truncate", axes=3, name="positional_encodings_3d"),
    source=(
        "PyPI positional-encodings PositionalEncoding3D (channel-last, torch and TF): "
        "ceil(ch / 6) pairs per axis, truncated to ch"
    ),
    order=100,
)
