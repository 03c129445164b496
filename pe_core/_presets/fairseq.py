"""The ``fairseq`` preset: fairseq's sinusoidal positional embedding."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(
        denominator="half_minus_one", layout="split", offset=2, odd_d="zero_pad", name="fairseq"
    ),
    source=(
        "fairseq SinusoidalPositionalEmbedding with padding_idx=1: the first token "
        "reads table row padding_idx + 1 = 2"
    ),
    order=30,
)
