"""The ``vaswani`` preset: the textbook encoding (Vaswani et al. 2017)."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(name="vaswani"),
    source=(
        "Attention Is All You Need; the textbook PyTorch PositionalEncoding modules; "
        "Hugging Face DistilBERT create_sinusoidal_embeddings; keras-hub "
        "SinePositionEncoding; PyPI positional-encodings PositionalEncoding1D (even d)"
    ),
    order=10,
)
