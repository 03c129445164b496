"""The N-D layers: SinusoidalPatchEncoding and RotaryEmbeddingND in PyTorch and Flax.

Their numbers are ``pe_core.encode(pe_core.grid(shape), d, spec=...)`` and
``pe_core.apply_rope(x, coords, sections=...)`` (whose own parity with MAE, Qwen2-VL
and friends is tested with those functions). The Keras twins are tested in the
per-backend subprocesses of tests/test_layers_relative.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

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
    checks = {"atol": 1e-6, "rtol": 1e-7, "backend": "torch", "dtype": "float32"}
    want = x.numpy() + expected_patch("mae_2d").reshape(12, D)
    assert_close(layer(x), want, **checks)
    spatial = SinusoidalPatchEncoding(D)(x.reshape(2, *GRID, D))  # Spec(axes=2) by default
    want = x.numpy().reshape(2, *GRID, D) + expected_patch(pe_core.Spec(axes=2))
    assert_close(spatial, want, **checks)
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
    want = expected_rope(q.numpy(), coords)
    assert_close(q1, want, atol=1e-6, rtol=1e-7, backend="torch", dtype="float32")
    moved = torch.as_tensor(coords + np.array([100, -7]))
    q2, k2 = rope(q, k, positions=moved)
    assert_close(q1 @ k1.mT, q2 @ k2.mT, atol=1e-4, rtol=1e-7)  # torch float32 both
    with pytest.raises(ValueError, match="13 tokens but grid_shape"):
        rope(torch.zeros(1, 13, 8), torch.zeros(1, 13, 8))


@pytest.mark.slow
def test_torch_layers_compile_without_graph_breaks() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbeddingND, SinusoidalPatchEncoding

    x = torch.randn(2, 12, D)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="mae_2d")
    compiled = torch.compile(layer, fullgraph=True)
    assert_close(compiled(x), layer(x), atol=1e-6, rtol=1e-7, backend="torch")
    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=GRID)
    q = x[..., :8]
    compiled_rope = torch.compile(rope, fullgraph=True)
    assert_close(compiled_rope(q, q)[1], rope(q, q)[1], atol=1e-6, rtol=1e-7, backend="torch")


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
    checks = {"atol": 1e-6, "rtol": 1e-7, "backend": "jax", "dtype": "float32"}
    want = x + expected_patch("tensor2tensor_2d").reshape(12, D)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="tensor2tensor_2d")
    assert_close(nnx.jit(lambda m, x: m(x))(layer, x), want, **checks)
    linen = LinenSinusoidalPatchEncoding(D, grid_shape=GRID, spec="tensor2tensor_2d")
    got = jax.jit(lambda x: linen.apply({}, x))(x)
    assert_close(got, want, **checks)

    q = np.random.default_rng(1).standard_normal((2, 12, 8)).astype(np.float32)
    coords = pe_core.grid(GRID).reshape(12, 2)
    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=GRID)
    got_q, _ = jax.jit(lambda q: rope(q, q))(q)
    assert_close(got_q, expected_rope(q, coords), **checks)
    linen_rope = LinenRotaryEmbeddingND(8, (2, 2), frequencies="per_axis")
    got_q, _ = jax.jit(lambda q, c: linen_rope.apply({}, q, q, c))(q, coords.astype(np.int32))
    assert_close(got_q, expected_rope(q, coords), **checks)


def test_eager_flax_patch_encoding_places_its_table_once(placements: list) -> None:
    pytest.importorskip("flax")
    import jax.numpy as jnp

    from pe_core.layers.flax import LinenSinusoidalPatchEncoding, SinusoidalPatchEncoding

    moved = placements
    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 12, D)), dtype=jnp.float32)
    layer = SinusoidalPatchEncoding(D, grid_shape=GRID, spec="mae_2d")
    linen = LinenSinusoidalPatchEncoding(D, grid_shape=GRID, spec="mae_2d")
    outputs = [layer(x), layer(x), linen.apply({}, x)]
    assert moved == [(12, D)]  # the flattened grid, built and moved once
    want = np.asarray(x, dtype=np.float64) + expected_patch("mae_2d").reshape(12, D)
    for got in outputs:
        assert_close(got, want, atol=1e-6, backend="jax", dtype="float32")
    spatial = layer(x.reshape(2, *GRID, D))  # the grid itself: another table
    assert moved == [(12, D), (*GRID, D)]
    assert_close(spatial, want.reshape(2, *GRID, D), atol=1e-6, backend="jax", dtype="float32")
