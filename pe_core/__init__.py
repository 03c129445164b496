"""pe_core: Transformer positional encodings, exact and identical on every backend.

``import pe_core`` loads NumPy only; JAX, PyTorch and TensorFlow are imported the
first time they are used.

>>> import pe_core
>>> pe_core.encode([0, 1, 2], 8).shape
(3, 8)
"""

from pe_core.encoding import encode
from pe_core.frequency import frequencies
from pe_core.positions import LowPrecisionPositionsWarning
from pe_core.presets import PRESET_SOURCES, PRESETS
from pe_core.relative import relative_matrix, shift
from pe_core.spec import Spec

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "PRESET_SOURCES",
    "LowPrecisionPositionsWarning",
    "Spec",
    "encode",
    "frequencies",
    "relative_matrix",
    "shift",
]
