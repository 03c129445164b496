"""Calls a type checker must refuse: every line marked ``# error`` is one, and no other.

Read by mypy and pyright (``python tests/typing_user/check.py``); never run.
"""

from __future__ import annotations

import numpy as np
import torch

import pe_core
from pe_core.layers.torch import FourierFeatures, RotaryEmbedding


def mistakes(x: torch.Tensor, table: torch.Tensor) -> None:
    pe_core.apply_rope(x, range(3), layout="interleave")  # error
    pe_core.apply_rope(x, range(3), section_layout="contiguos", sections=(2, 2))  # error
    pe_core.apply_rope(x, range(3), rotary_features="lats")  # error
    pe_core.apply_rope(x, range(3), scaling={1: 2.0})  # error
    pe_core.apply_rope(x, range(3), scaling=[("rope_type", "linear")])  # error
    pe_core.RopeSpec(layout="neox")  # error
    pe_core.rope_frequencies([("head_dim", 8)])  # error
    pe_core.fourier_features(x, np.ones((8, 4)), order="sincos")  # error
    pe_core.resample_pos_embed(table, 3, interpolation="bicubicc")  # error
    pe_core.t5_relative_bucket(x, arithmetic="float64")  # error
    RotaryEmbedding(8, layout="neox")  # error
    FourierFeatures(2, 4, order="cos")  # error
    wrong: torch.Tensor = pe_core.encode([0, 1], 8)  # error
    also_wrong: np.ndarray = pe_core.encode(x, 8)  # error
    del wrong, also_wrong
