"""The ``positional_encodings_1d`` preset: the PyPI positional-encodings 1-D encoding."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(odd_d="truncate", name="positional_encodings_1d"),
    source=(
        "PyPI positional-encodings PositionalEncoding1D (torch and TF): an odd channel "
        "count is computed at ceil(ch / 2) * 2 channels and cut to ch"
    ),
    order=130,
)
