"""The ``positional_encodings_2d`` preset: the PyPI positional-encodings 2-D encoding.

An N-D preset (:mod:`pe_core.nd`): coordinates ``(..., axes)``, one 1-D encoding per axis.
"""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(odd_d="truncate", axes=2, name="positional_encodings_2d"),
    source=(
        "PyPI positional-encodings PositionalEncoding2D (channel-last, torch and TF): "
        "ceil(ch / 4) pairs per axis, truncated to ch"
    ),
    order=90,
)
