"""What a type checker infers for pe_core's results: each line states it.

Read by mypy and pyright (``python tests/typing_user/check.py`` runs both and wants no
error here), and run with ``python tests/typing_user/user_script.py``, which checks each
stated type against the result's type when the code runs. Not a test module (pytest does
not collect this folder): it imports every framework.
"""

from __future__ import annotations

from typing import Any, TypeVar, assert_type

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
import torch
from transformers import LlamaConfig, PretrainedConfig

import pe_core
from pe_core import position_ids
from pe_core.layers.torch import RotaryEmbedding

T = TypeVar("T")


def same(value: T, kind: type) -> T:
    """``value``, after checking that it is a ``kind`` when the code runs."""
    assert isinstance(value, kind), (type(value), kind)
    return value


def host_inputs() -> None:
    """Python data and NumPy arrays compute on NumPy, or on ``backend=``.

    An array in gives its own type back (the type variable keeps NumPy's shape and
    dtype parameters, so the arrays here are declared ``np.ndarray``). Python data gives
    a NumPy array where the function has no ``backend=`` and where ``encode`` or a
    factory of sizes is called without one, and ``Any`` where ``backend=`` could choose.
    """
    pos: np.ndarray = np.arange(3)
    x: np.ndarray = np.ones((3, 8), np.float32)
    same(assert_type(pe_core.encode([0, 1, 2], 8), np.ndarray), np.ndarray)
    same(assert_type(pe_core.encode(range(3), 8), np.ndarray), np.ndarray)
    same(assert_type(pe_core.encode(pos, 8, backend="numpy"), np.ndarray), np.ndarray)
    same(assert_type(pe_core.encode(2, 8, backend="torch"), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.encode(range(3), 8, backend="jax"), jax.Array), jax.Array)
    same(assert_type(pe_core.encode(range(3), 8, backend="tf"), tf.Tensor), tf.Tensor)
    same(assert_type(pe_core.apply_rope(x, pos), np.ndarray), np.ndarray)
    same(assert_type(pe_core.apply_rope((x, x), pos), tuple[np.ndarray, ...]), tuple)
    same(assert_type(pe_core.alibi_bias(4, 4, 2), np.ndarray), np.ndarray)
    same(assert_type(pe_core.alibi_bias(4, 4, 2, backend="pytorch"), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.t5_relative_bucket(pos), np.ndarray), np.ndarray)
    same(assert_type(pe_core.t5_bucket_matrix(4, 4, backend="jax"), jax.Array), jax.Array)
    table: np.ndarray = np.zeros((32, 2), np.float32)
    same(assert_type(pe_core.t5_relative_bias(4, 4, table), np.ndarray), np.ndarray)
    same(assert_type(pe_core.timestep_embedding(pos, 8), np.ndarray), np.ndarray)
    freqs: np.ndarray = np.ones((2, 4))
    same(assert_type(pe_core.fourier_features(x[:, :2], freqs), np.ndarray), np.ndarray)
    same(assert_type(pe_core.grid((2, 3)), np.ndarray), np.ndarray)
    same(assert_type(pe_core.grid_encoding(8, (2, 2), backend="torch"), torch.Tensor), torch.Tensor)
    grid_table: np.ndarray = np.zeros((1, 5, 8))
    same(assert_type(pe_core.resample_pos_embed(grid_table, 3), np.ndarray), np.ndarray)
    input_ids: np.ndarray = np.ones((1, 3), np.int64)
    ids, deltas = pe_core.mrope_position_ids(input_ids)
    same(assert_type(ids, np.ndarray), np.ndarray)
    same(assert_type(deltas, np.ndarray), np.ndarray)
    same(assert_type(position_ids.from_attention_mask([[1, 1, 0]]), Any), np.ndarray)
    same(assert_type(position_ids.from_input_ids([[5, 6, 1]], 1), Any), np.ndarray)
    same(assert_type(position_ids.from_attention_mask(input_ids), np.ndarray), np.ndarray)
    same(assert_type(pe_core.relative_position_index(2), np.ndarray), np.ndarray)
    bias_table: np.ndarray = np.zeros((pe_core.num_relative_distance(2), 2))
    same(assert_type(pe_core.relative_position_bias(bias_table, 2), np.ndarray), np.ndarray)
    same(assert_type(pe_core.binary_encode(pos, 4), np.ndarray), np.ndarray)
    same(assert_type(pe_core.normalized_positions(4, backend="tf"), tf.Tensor), tf.Tensor)
    same(assert_type(pe_core.transformer_xl_embedding(3, 8), np.ndarray), np.ndarray)
    inv_freq, attention_factor = pe_core.rope_frequencies({"head_dim": 8, "rope_theta": 1e4})
    same(assert_type(inv_freq, np.ndarray), np.ndarray)
    same(assert_type(attention_factor, float), float)


def backend_names(name: str) -> None:
    """A backend only known when the code runs: the result is ``Any``."""
    same(assert_type(pe_core.encode([0, 1], 8, backend=name), Any), np.ndarray)
    same(assert_type(pe_core.alibi_bias(4, 4, 2, backend=name), Any), np.ndarray)


def torch_inputs(t: torch.Tensor, x: torch.Tensor) -> None:
    """A ``torch.Tensor`` in, a ``torch.Tensor`` out."""
    same(assert_type(pe_core.encode(t, 8), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.apply_rope(x, t), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.apply_rope((x, x), t), tuple[torch.Tensor, ...]), tuple)
    same(assert_type(pe_core.apply_rope([x, x], t), tuple[torch.Tensor, ...]), tuple)
    same(assert_type(pe_core.timestep_embedding(t, 8), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.t5_relative_bucket(t), torch.Tensor), torch.Tensor)
    same(
        assert_type(pe_core.fourier_features(x[:, :2], torch.ones(2, 4)), torch.Tensor),
        torch.Tensor,
    )
    table = torch.zeros(1, 5, 8)
    same(assert_type(pe_core.resample_pos_embed(table, 3), torch.Tensor), torch.Tensor)
    ids, deltas = pe_core.mrope_position_ids(torch.tensor([[1, 2, 3]]))
    same(assert_type(ids, torch.Tensor), torch.Tensor)
    same(assert_type(deltas, torch.Tensor), torch.Tensor)
    mask = torch.tensor([[1, 1, 0]])
    same(assert_type(position_ids.from_attention_mask(mask), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.binary_encode(t, 4), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.vjepa2_rope(torch.ones(3, 12), t), torch.Tensor), torch.Tensor)


def jax_inputs(t: jax.Array, x: jax.Array) -> None:
    """A ``jax.Array`` in, a ``jax.Array`` out."""
    same(assert_type(pe_core.encode(t, 8), jax.Array), jax.Array)
    same(assert_type(pe_core.apply_rope(x, t), jax.Array), jax.Array)
    same(assert_type(pe_core.timestep_embedding(t, 8), jax.Array), jax.Array)
    same(assert_type(pe_core.resample_pos_embed(jnp.zeros((1, 5, 8)), 3), jax.Array), jax.Array)
    same(
        assert_type(position_ids.from_cu_seqlens(jnp.array([0, 2, 5]), total_length=5), jax.Array),
        jax.Array,
    )


def tf_inputs(t: tf.Tensor, x: tf.Tensor) -> None:
    """A ``tf.Tensor`` in, a ``tf.Tensor`` out (mypy reads tensorflow as ``Any``)."""
    same(assert_type(pe_core.encode(t, 8), tf.Tensor), tf.Tensor)
    same(assert_type(pe_core.apply_rope(x, t), tf.Tensor), tf.Tensor)
    same(assert_type(pe_core.timestep_embedding(t, 8), tf.Tensor), tf.Tensor)


def configs(config: PretrainedConfig, x: torch.Tensor) -> None:
    """A transformers ``PretrainedConfig`` wherever a config mapping goes."""
    same(assert_type(pe_core.apply_rope(x, range(3), scaling=config), torch.Tensor), torch.Tensor)
    same(assert_type(pe_core.rope_frequencies(config)[0], np.ndarray), np.ndarray)
    spec = pe_core.RopeSpec(scaling=config, layout="interleaved")
    same(assert_type(pe_core.apply_rope(x, range(3), spec=spec), torch.Tensor), torch.Tensor)
    same(RotaryEmbedding(8, scaling=config), RotaryEmbedding)
    params = {"rope_type": "linear", "factor": 2.0}
    same(assert_type(pe_core.apply_rope(x, range(3), scaling=params), torch.Tensor), torch.Tensor)


if __name__ == "__main__":
    host_inputs()
    backend_names("numpy")
    torch_inputs(torch.arange(3), torch.ones(3, 8))
    jax_inputs(jnp.arange(3), jnp.ones((3, 8)))
    tf_inputs(tf.range(3), tf.ones((3, 8)))
    llama = LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=16,
    )
    configs(llama, torch.ones(3, 8))
    print("the stated types are the runtime types")
