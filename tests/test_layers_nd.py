"""The N-D layers: SinusoidalPatchEncoding and RotaryEmbeddingND in PyTorch and Flax.

Their numbers are ``pe_core.encode(pe_core.grid(shape), d, spec=...)`` and
``pe_core.apply_rope(x, coords, sections=...)`` (whose own parity with MAE, Qwen2-VL
and friends is tested with those functions). The Keras twins are tested in the
per-backend subprocesses of tests/test_layers_relative.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import pe_core

GRID = (3, 4)
D = 16


def expected_patch(spec: str | pe_core.Spec) -> np.ndarray:
    return pe_core.encode(pe_core.grid(GRID), D, spec=spec, dtype="float64")


def expected_rope(x: np.ndarray, coords: np.ndarray) -> np.ndarray:
    return pe_core.apply_rope(x, coords, sections=(2, 2), frequencies="per_axis")


def test_torch_patch_encoding_flat_and_spatial_and_compiled() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import SinusoidalPatchEncoding

    x = torch.randn(2, 12, D)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="mae_2d")
    want = x.numpy() + expected_patch("mae_2d").reshape(12, D)
    np.testing.assert_allclose(layer(x).numpy(), want, atol=1e-6)
    spatial = SinusoidalPatchEncoding(D)(x.reshape(2, *GRID, D))  # Spec(axes=2) by default
    want = x.numpy().reshape(2, *GRID, D) + expected_patch(pe_core.Spec(axes=2))
    np.testing.assert_allclose(spatial.numpy(), want, atol=1e-6)
    with pytest.raises(ValueError, match="need a grid_shape"):
        SinusoidalPatchEncoding(D)(x)
    with pytest.raises(ValueError, match="12 patch tokens but the grid"):
        layer(x, grid_shape=(2, 2))
    with pytest.raises(ValueError, match="The spec encodes 2 coordinate axes"):
        SinusoidalPatchEncoding(D, spec="mae_2d")(torch.zeros(1, 2, 2, 2, D))


def test_torch_rope_nd_follows_the_grid_and_positions() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbeddingND

    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=GRID)
    q, k = torch.randn(2, 2, 3, 12, 8).unbind(0)
    coords = pe_core.grid(GRID).reshape(12, 2)
    q1, k1 = rope(q, k)
    np.testing.assert_allclose(q1.numpy(), expected_rope(q.numpy(), coords), atol=1e-6)
    moved = torch.as_tensor(coords + np.array([100, -7]))
    q2, k2 = rope(q, k, positions=moved)
    np.testing.assert_allclose((q1 @ k1.mT).numpy(), (q2 @ k2.mT).numpy(), atol=1e-4)
    with pytest.raises(ValueError, match="13 tokens but grid_shape"):
        rope(torch.zeros(1, 13, 8), torch.zeros(1, 13, 8))


@pytest.mark.slow
def test_torch_layers_compile_without_graph_breaks() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbeddingND, SinusoidalPatchEncoding

    x = torch.randn(2, 12, D)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="mae_2d")
    compiled = torch.compile(layer, fullgraph=True)
    np.testing.assert_allclose(compiled(x).numpy(), layer(x).numpy(), atol=1e-6)
    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=GRID)
    q = x[..., :8]
    compiled_rope = torch.compile(rope, fullgraph=True)
    np.testing.assert_allclose(compiled_rope(q, q)[1].numpy(), rope(q, q)[1].numpy(), atol=1e-6)


def test_flax_layers_under_jit() -> None:
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    from pe_core.layers.flax import (
        LinenRotaryEmbeddingND,
        LinenSinusoidalPatchEncoding,
        RotaryEmbeddingND,
        SinusoidalPatchEncoding,
    )

    x = np.random.default_rng(0).standard_normal((2, 12, D)).astype(np.float32)
    want = x + expected_patch("tensor2tensor_2d").reshape(12, D)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="tensor2tensor_2d")
    np.testing.assert_allclose(np.asarray(nnx.jit(lambda m, x: m(x))(layer, x)), want, atol=1e-6)
    linen = LinenSinusoidalPatchEncoding(D, grid_shape=GRID, spec="tensor2tensor_2d")
    got = jax.jit(lambda x: linen.apply({}, x))(x)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-6)

    q = np.random.default_rng(1).standard_normal((2, 12, 8)).astype(np.float32)
    coords = pe_core.grid(GRID).reshape(12, 2)
    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=GRID)
    got_q, _ = jax.jit(lambda q: rope(q, q))(q)
    np.testing.assert_allclose(np.asarray(got_q), expected_rope(q, coords), atol=1e-6)
    linen_rope = LinenRotaryEmbeddingND(8, (2, 2), frequencies="per_axis")
    got_q, _ = jax.jit(lambda q, c: linen_rope.apply({}, q, q, c))(q, coords.astype(np.int32))
    np.testing.assert_allclose(np.asarray(got_q), expected_rope(q, coords), atol=1e-6)
