"""``RotaryEmbedding(trainable_frequencies=True)`` in PyTorch and Flax NNX (the Keras
layer is checked in ``tests/test_layers_keras.py``, in its per-backend runs).

At initialisation the trainable layer rotates as the fixed one within the float32
bound of :mod:`pe_core.trainable`; its frequencies are a parameter that gradients
reach and an optimiser step changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from pe_core.layers import RotaryEmbeddingConfig


def _bound(x: np.ndarray, max_angle: float) -> float:
    return float(np.abs(x).max()) * 2 * (2 * 2.0**-24 * max_angle + 8 * 2.0**-24)


def test_config_checks_and_initial_values() -> None:
    config = RotaryEmbeddingConfig(
        8, base=100.0, rotary_dim=4, trainable_frequencies=True, frequency_heads=3
    )
    assert config.initial_frequencies().shape == (3, 2)
    np.testing.assert_array_equal(config.initial_frequencies()[1], np.float32([1.0, 0.1]))
    assert config.rotary_config()["trainable_frequencies"] is True
    assert "trainable_frequencies" not in RotaryEmbeddingConfig(8).rotary_config()
    with pytest.raises(ValueError, match="frequency_heads applies to trainable"):
        RotaryEmbeddingConfig(8, frequency_heads=2)
    with pytest.raises(TypeError, match="trainable_frequencies must be True or False"):
        RotaryEmbeddingConfig(8, trainable_frequencies=1)
    with pytest.raises(ValueError, match="frequency_heads must be an integer >= 1"):
        RotaryEmbeddingConfig(8, trainable_frequencies=True, frequency_heads=0)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    with pytest.raises(ValueError, match="attention factor"):
        RotaryEmbeddingConfig(8, scaling=yarn, trainable_frequencies=True).initial_frequencies()


def test_torch_layer() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbedding

    rng = np.random.default_rng(0)
    q, k = (torch.tensor(v, dtype=torch.float32) for v in rng.standard_normal((2, 2, 3, 6, 8)))
    fixed = RotaryEmbedding(8, rotary_dim=6)
    learned = RotaryEmbedding(8, rotary_dim=6, trainable_frequencies=True, frequency_heads=3)
    assert list(learned.state_dict()) == ["frequencies"]
    assert tuple(learned.frequencies.shape) == (3, 3)
    for a, b in zip(fixed(q, k, offset=40), learned(q, k, offset=40), strict=True):
        torch.testing.assert_close(b, a, atol=_bound(q.numpy(), 46.0), rtol=0)
    optimiser = torch.optim.SGD(learned.parameters(), lr=0.1)
    qr, kr = learned(q, k)
    (qr * kr).sum().backward()
    assert learned.frequencies.grad is not None and learned.frequencies.grad.abs().sum() > 0
    before = learned(q, k)[0].detach()
    optimiser.step()
    assert not torch.equal(learned(q, k)[0].detach(), before)
    # traced positions (per-example offsets) take the same route
    offsets = torch.tensor([0, 5])
    qo, _ = learned(q, k, offset=offsets)
    torch.testing.assert_close(qo[1], learned(q, k, offset=5)[0][1], atol=1e-6, rtol=0)


def test_flax_nnx_layer() -> None:
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    from pe_core.layers.flax import RotaryEmbedding

    jnp = jax.numpy
    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.standard_normal((1, 2, 5, 8)), jnp.float32)
    fixed = RotaryEmbedding(8)
    learned = RotaryEmbedding(8, trainable_frequencies=True, frequency_heads=2)
    np.testing.assert_allclose(
        np.asarray(learned(q, q)[0]), np.asarray(fixed(q, q)[0]), atol=_bound(np.asarray(q), 4.0)
    )

    def loss(model: RotaryEmbedding) -> jax.Array:
        a, b = model(q, q, offset=3)
        return jnp.sum(a * b[..., ::-1])

    grads = nnx.grad(loss)(learned)
    assert grads.frequencies[...].shape == (2, 4)
    assert float(jnp.abs(grads.frequencies[...]).sum()) > 0
    jitted = nnx.jit(loss)(learned)
    np.testing.assert_allclose(float(jitted), float(loss(learned)), rtol=1e-6)
