"""The textbook sinusoidal table, transcribed to every backend (float32).

The reference is the ``PositionalEncoding`` found in tutorials and textbooks::

    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)

Every function here keeps its arithmetic: ``div_term`` is computed in float32 by
``exp``, the integer positions are converted to float32 and multiplied by it in
float32 (torch's type promotion of ``int64 * float32``), and sin/cos are taken of
that float32 product (twice, as in the original). Each ``*_table(n, d)`` returns
the ``(n, d)`` float32 table; the ``*_table_at(positions, d)`` variants take the
positions as an array (as given: int64, or bfloat16/float16 to show what rounding
positions does) so that accuracy can be sampled at large positions.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np


def _scale(d: int) -> float:
    return -(math.log(10000.0) / d)


# --------------------------------------------------------------------------- numpy
def numpy_table_at(positions: Any, d: int, out: np.ndarray | None = None) -> np.ndarray:
    """The textbook table at ``positions`` (1-D); ``out`` reuses an output buffer."""
    position = np.asarray(positions)[:, None].astype(np.float32)  # torch: int64 -> float32
    div_term = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(_scale(d)))
    if out is None:
        pe = np.zeros((position.shape[0], d), dtype=np.float32)
        pe[:, 0::2] = np.sin(position * div_term)
        pe[:, 1::2] = np.cos(position * div_term)
        return pe
    np.sin(position * div_term, out=out[:, 0::2])
    np.cos(position * div_term, out=out[:, 1::2])
    return out


def numpy_table(n: int, d: int, out: np.ndarray | None = None) -> np.ndarray:
    return numpy_table_at(np.arange(0, n), d, out=out)


def numpy_table_float64(positions: Any, d: int) -> np.ndarray:
    """Same formula entirely in float64 (not the textbook; a point of comparison)."""
    position = np.asarray(positions, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d, 2, dtype=np.float64) * _scale(d))
    pe = np.zeros((position.shape[0], d), dtype=np.float64)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


# --------------------------------------------------------------------------- torch
def torch_table_at(position: Any, d: int, out: Any = None) -> Any:
    """The seed code verbatim, with ``position`` given as a 1-D tensor."""
    import torch

    position = position.unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * _scale(d))
    if out is None:
        pe = torch.zeros(position.shape[0], d)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        return pe
    torch.sin(position * div_term, out=out[:, 0::2])
    torch.cos(position * div_term, out=out[:, 1::2])
    return out


def torch_table(n: int, d: int, out: Any = None) -> Any:
    import torch

    return torch_table_at(torch.arange(0, n), d, out=out)


# --------------------------------------------------------------------------- jax
@functools.cache
def _jax_fns() -> tuple[Any, Any]:
    import jax
    import jax.numpy as jnp

    def at(position: Any, d: int) -> Any:
        position = position[:, None]
        div_term = jnp.exp(jnp.arange(0, d, 2) * _scale(d))  # float32
        pe = jnp.zeros((position.shape[0], d), dtype=jnp.float32)
        pe = pe.at[:, 0::2].set(jnp.sin(position * div_term))
        pe = pe.at[:, 1::2].set(jnp.cos(position * div_term))
        return pe

    def table(n: int, d: int) -> Any:
        return at(jnp.arange(0, n), d)

    return (
        jax.jit(table, static_argnums=(0, 1)),
        jax.jit(at, static_argnums=(1,)),
    )


def jax_table(n: int, d: int) -> Any:
    """Under ``jax.jit`` (``n`` and ``d`` static); the caller blocks on the result."""
    return _jax_fns()[0](n, d)


def jax_table_at(position: Any, d: int) -> Any:
    return _jax_fns()[1](position, d)


# --------------------------------------------------------------------------- tensorflow
def _tf_at(position: Any, d: int) -> Any:
    import tensorflow as tf

    position = tf.cast(position[:, None], tf.float32)
    div_term = tf.exp(tf.range(0, d, 2, dtype=tf.float32) * _scale(d))
    # TensorFlow has no item assignment: interleave sin/cos as pe[:, 0::2] / pe[:, 1::2].
    pe = tf.stack([tf.sin(position * div_term), tf.cos(position * div_term)], axis=-1)
    return tf.reshape(pe, [-1, d])


@functools.cache
def _tf_table_fn(d: int) -> Any:
    import tensorflow as tf

    # n is a tensor argument, so grappler cannot constant-fold the whole table away.
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def table(n: Any) -> Any:
        return _tf_at(tf.range(0, n), d)

    return table


@functools.cache
def _tf_at_fn(d: int) -> Any:
    import tensorflow as tf

    return tf.function(lambda position: _tf_at(position, d))


def tf_table(n: int, d: int) -> Any:
    """Under ``tf.function`` (one trace per ``d``)."""
    import tensorflow as tf

    return _tf_table_fn(d)(tf.constant(n, dtype=tf.int32))


def tf_table_at(position: Any, d: int) -> Any:
    return _tf_at_fn(d)(position)


TABLES = {
    "numpy": numpy_table,
    "torch": torch_table,
    "jax": jax_table,
    "tensorflow": tf_table,
}
