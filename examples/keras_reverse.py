"""Reverse a sequence of tokens with a small Keras 3 Transformer encoder.

Reversing needs to know where each token is: a Transformer without position
information is permutation-equivariant (permute the input tokens and its outputs
permute the same way), so the output at position ``i`` can depend only on token ``i``
and on the unordered set of all tokens, never on which token sits at ``LENGTH - 1 - i``.
With :class:`pe_core.layers.keras.SinusoidalEncoding` added to the token embeddings the
same model learns the task; without it, it cannot (``use_position=False``).

Runs on any Keras backend; this script picks JAX unless ``KERAS_BACKEND`` is set
(``KERAS_BACKEND=tensorflow python examples/keras_reverse.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import time

import keras
import numpy as np

from pe_core.layers.keras import SinusoidalEncoding

VOCAB = 10
LENGTH = 10
D_MODEL = 64
HEADS = 4
LAYERS = 2
BATCH = 64


def make_batch(rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Random token sequences and their reversals, each ``(batch, LENGTH)``."""
    tokens = rng.integers(0, VOCAB, size=(batch, LENGTH)).astype("int32")
    return tokens, np.ascontiguousarray(tokens[:, ::-1])


def build_model(use_position: bool = True) -> keras.Model:
    """Embedding (+ sinusoidal encoding) -> Transformer encoder -> per-position logits."""
    tokens = keras.Input((LENGTH,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, D_MODEL)(tokens)
    if use_position:
        x = SinusoidalEncoding(D_MODEL)(x)
    for _ in range(LAYERS):  # post-norm blocks, as torch.nn.TransformerEncoderLayer
        attended = keras.layers.MultiHeadAttention(HEADS, D_MODEL // HEADS)(x, x)
        x = keras.layers.LayerNormalization()(x + attended)
        hidden = keras.layers.Dense(4 * D_MODEL, activation="relu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(D_MODEL)(hidden))
    return keras.Model(tokens, keras.layers.Dense(VOCAB)(x))


def main(steps: int = 500, use_position: bool = True, seed: int = 0) -> dict:
    """Train for ``steps`` and return ``{"losses", "accuracy", "sequence_accuracy", "seconds"}``.

    ``accuracy`` is the fraction of output tokens right on 2000 fresh sequences,
    ``sequence_accuracy`` the fraction of sequences reversed without a mistake.
    """
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    model = build_model(use_position)
    warmup = max(1, steps // 10)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, max(1, steps - warmup), warmup_target=2e-3, warmup_steps=warmup
    )
    model.compile(
        keras.optimizers.AdamW(schedule),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    start = time.perf_counter()
    losses = []
    for _ in range(steps):
        tokens, target = make_batch(rng, BATCH)
        losses.append(float(model.train_on_batch(tokens, target)))
    tokens, target = make_batch(np.random.default_rng(seed + 1), 2000)
    right = model.predict(tokens, batch_size=500, verbose=0).argmax(-1) == target
    return {
        "losses": losses,
        "accuracy": float(right.mean()),
        "sequence_accuracy": float(right.all(-1).mean()),
        "seconds": time.perf_counter() - start,
    }


if __name__ == "__main__":
    print(f"Keras backend: {keras.backend.backend()}")
    for use_position in (True, False):
        result = main(use_position=use_position)
        label = "with SinusoidalEncoding   " if use_position else "without position encoding"
        print(
            f"{label}: token accuracy {result['accuracy']:.3f}, "
            f"sequence accuracy {result['sequence_accuracy']:.3f} "
            f"({result['seconds']:.1f} s)"
        )
