"""pe_core: Transformer positional encodings, exact and identical on every backend.

``import pe_core`` loads NumPy only; JAX, PyTorch and TensorFlow are imported the
first time they are used, and the framework layers live in ``pe_core.layers.torch``,
``pe_core.layers.flax`` and ``pe_core.layers.keras``.

>>> import pe_core
>>> pe_core.encode([0, 1, 2], 8).shape
(3, 8)
"""

from pe_core import position_ids
from pe_core._kernel.inputs import LowPrecisionPositionsWarning
from pe_core.alibi import alibi_bias, alibi_slopes
from pe_core.codes import binary_encode, learned_table_init, normalized_positions
from pe_core.encoding import encode
from pe_core.fourier import (
    box_fourier_embedding,
    fourier_features,
    perceiver_fourier_features,
    perceiver_positions,
)
from pe_core.frequency import frequencies
from pe_core.funnel import funnel_position_embeds
from pe_core.nd import grid, grid_encoding
from pe_core.presets import PRESET_SOURCES, PRESETS
from pe_core.relative import relative_matrix, shift
from pe_core.relative_index import (
    clipped_relative_position,
    deberta_log_bucket,
    deberta_relative_position,
    esmfold_relative_bins,
    funnel_block_positions,
    funnel_pooled_positions,
    funnel_relative_positions,
    levit_attention_offsets,
    num_relative_distance,
    relative_position_bias,
    relative_position_index,
    swinv2_coords_table,
)
from pe_core.resample import resample_pos_embed
from pe_core.rope import apply_rope
from pe_core.rope_layout import rope_permutation
from pe_core.rope_nd import mrope_position_ids, rope_sections
from pe_core.rope_scaling import ntk_aware_base, rope_frequencies, xpos_scale
from pe_core.rope_spec import RopeSpec
from pe_core.rope_tables import rope_cos_sin
from pe_core.rope_variants import llama4_attention_scales, vjepa2_rope
from pe_core.spec import Spec
from pe_core.t5 import t5_bucket_matrix, t5_relative_bias, t5_relative_bucket
from pe_core.timestep import timestep_embedding
from pe_core.trainable import apply_rope_mixed, rope_angles, rope_mixed_angles
from pe_core.transformer_xl import transformer_xl_embedding

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "PRESET_SOURCES",
    "LowPrecisionPositionsWarning",
    "RopeSpec",
    "Spec",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "apply_rope_mixed",
    "binary_encode",
    "box_fourier_embedding",
    "clipped_relative_position",
    "deberta_log_bucket",
    "deberta_relative_position",
    "encode",
    "esmfold_relative_bins",
    "fourier_features",
    "frequencies",
    "funnel_block_positions",
    "funnel_pooled_positions",
    "funnel_position_embeds",
    "funnel_relative_positions",
    "grid",
    "grid_encoding",
    "learned_table_init",
    "levit_attention_offsets",
    "llama4_attention_scales",
    "mrope_position_ids",
    "normalized_positions",
    "ntk_aware_base",
    "num_relative_distance",
    "perceiver_fourier_features",
    "perceiver_positions",
    "position_ids",
    "relative_matrix",
    "relative_position_bias",
    "relative_position_index",
    "resample_pos_embed",
    "rope_angles",
    "rope_cos_sin",
    "rope_frequencies",
    "rope_mixed_angles",
    "rope_permutation",
    "rope_sections",
    "shift",
    "swinv2_coords_table",
    "t5_bucket_matrix",
    "t5_relative_bias",
    "t5_relative_bucket",
    "timestep_embedding",
    "transformer_xl_embedding",
    "vjepa2_rope",
    "xpos_scale",
]
