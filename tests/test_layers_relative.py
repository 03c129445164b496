"""The relative-bias layers: T5RelativeBias and AlibiBias in PyTorch, Flax and Keras.

T5's layers are compared with transformers' ``T5Attention.compute_bias`` given the same
table; ALiBi's with keras-hub's ``AlibiBias``, restated line by line below
(keras_hub/src/layers/modeling/alibi_bias.py) since keras-hub is optional. Keras runs
its ``inner`` tests in one subprocess per backend (``KERAS_BACKEND``), as
tests/test_layers_keras.py does.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal
from reference import hf_t5_compute_bias

INNER = os.environ.get("PE_CORE_KERAS_INNER")
inner = pytest.mark.skipif(not INNER, reason="runs in the per-backend subprocess")
outer = pytest.mark.skipif(bool(INNER), reason="the outer tests")


def keras_hub_slopes(num_heads: int, alibi_bias_max: float) -> list[float]:
    """keras-hub ``AlibiBias._get_slopes``."""

    def get_slopes_power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - math.log2(alibi_bias_max))))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return get_slopes_power_of_2(num_heads)
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + keras_hub_slopes(2 * closest_power_of_2, alibi_bias_max)[0::2][
            : num_heads - closest_power_of_2
        ]
    )


def keras_hub_alibi(scores: np.ndarray, alibi_bias_max: float) -> np.ndarray:
    """keras-hub ``AlibiBias.call`` in NumPy float64."""
    num_heads, key_length = scores.shape[-3], scores.shape[-1]
    slopes = np.asarray(keras_hub_slopes(num_heads, alibi_bias_max))[:, None]
    seq_range = np.arange(1 - key_length, 1)[None, :].astype(np.float64)
    alibi_bias = (slopes * seq_range)[None, :, None, :]
    return scores + alibi_bias


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


TABLE = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
CASES = [(5, 5, 0, False), (1, 9, 8, True), (3, 200, 150, False), (7, 7, 0, True)]


# --------------------------------------------------------------------------- PyTorch


@outer
@pytest.mark.parametrize(("q_len", "k_len", "offset", "is_decoder"), CASES)
def test_torch_t5_bias_is_compute_bias(q_len, k_len, offset, is_decoder) -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import T5RelativeBias

    layer = T5RelativeBias(4, bidirectional=not is_decoder)
    layer.load_state_dict({"relative_attention_bias.weight": torch.as_tensor(TABLE)})
    expected = hf_t5_compute_bias(TABLE, q_len, k_len, offset, is_decoder)
    with torch.no_grad():
        assert_equal(layer(q_len, k_len, offset), expected, backend="torch")
        assert_equal(layer(q_len, k_len, torch.tensor(offset)), expected, backend="torch")


@outer
@pytest.mark.slow
def test_torch_bias_layers_compile_without_graph_breaks() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import AlibiBias, T5RelativeBias

    layer = T5RelativeBias(4)
    with torch.no_grad():
        compiled = torch.compile(layer, fullgraph=True)
        for offset in (0, 7):
            got = compiled(3, 9, torch.tensor(offset))
            assert_equal(got, layer(3, 9, offset), backend="torch")
    alibi = AlibiBias(6, alibi_bias_max=4.5)
    assert_equal(torch.compile(lambda: alibi(6, 6), fullgraph=True)(), alibi(6, 6), backend="torch")


@outer
def test_torch_t5_gradient_reaches_the_table() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import T5RelativeBias

    layer = T5RelativeBias(4)
    layer(3, 6, offset=torch.tensor([0, 2])).square().sum().backward()
    grad = layer.relative_attention_bias.weight.grad
    assert grad is not None and torch.count_nonzero(grad) > 0
    used = set(
        np.unique(
            np.concatenate(
                [__import__("pe_core").t5_bucket_matrix(3, 6, offset=o).ravel() for o in (0, 2)]
            )
        ).tolist()
    )
    assert set(torch.nonzero(grad.abs().sum(1)).ravel().tolist()) == used


@outer
@pytest.mark.parametrize(("n_heads", "alibi_bias_max"), [(8, 8), (12, 8), (4, 16), (6, 4.5)])
def test_torch_alibi_is_keras_hubs_under_a_causal_mask(n_heads, alibi_bias_max) -> None:
    torch = pytest.importorskip("torch")
    from pe_core import alibi_slopes
    from pe_core.layers.torch import AlibiBias

    assert_close(
        alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max),
        keras_hub_slopes(n_heads, alibi_bias_max),
        atol=0,
        rtol=1e-14,
    )
    scores = np.random.default_rng(n_heads).standard_normal((2, n_heads, 6, 6))
    layer = AlibiBias(n_heads, alibi_bias_max=alibi_bias_max)
    ours = scores + layer(6, 6, like=torch.zeros(1, dtype=torch.float64)).numpy()
    theirs = keras_hub_alibi(scores, alibi_bias_max)
    causal = np.tril(np.ones((6, 6), bool))
    want = softmax(np.where(causal, theirs, -np.inf))
    assert_close(softmax(ours), want, atol=1e-12, rtol=1e-7)
    one_step = layer(1, 6, like=torch.zeros(1, dtype=torch.float64))
    want = keras_hub_alibi(np.zeros((1, n_heads, 1, 6)), alibi_bias_max)
    assert_close(one_step, want, atol=0, rtol=1e-7, backend="torch", dtype="float64")


# --------------------------------------------------------------------------- Flax


@outer
@pytest.mark.parametrize(("q_len", "k_len", "offset", "is_decoder"), CASES)
def test_flax_t5_bias_is_compute_bias_under_jit(q_len, k_len, offset, is_decoder) -> None:
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    from pe_core.layers.flax import LinenT5RelativeBias, T5RelativeBias

    expected = hf_t5_compute_bias(TABLE, q_len, k_len, offset, is_decoder)
    layer = T5RelativeBias(4, bidirectional=not is_decoder, rngs=nnx.Rngs(0))
    layer.relative_attention_bias.embedding[...] = jax.numpy.asarray(TABLE)
    run = nnx.jit(lambda m, off: m(q_len, k_len, off))
    assert_equal(run(layer, jax.numpy.asarray(offset)), expected, backend="jax")
    linen = LinenT5RelativeBias(4, bidirectional=not is_decoder)
    params = {"params": {"relative_attention_bias": jax.numpy.asarray(TABLE)}}
    got = jax.jit(lambda p, off: linen.apply(p, q_len, k_len, off))(params, offset)
    assert_equal(got, expected, backend="jax")


@outer
def test_flax_t5_gradient_reaches_the_table() -> None:
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    from pe_core.layers.flax import T5RelativeBias

    layer = T5RelativeBias(4, rngs=nnx.Rngs(0))
    grads = nnx.grad(lambda m: (m(3, 6) ** 2).sum())(layer)
    grad = np.asarray(grads.relative_attention_bias.embedding[...])
    used = np.unique(__import__("pe_core").t5_bucket_matrix(3, 6))
    assert np.all(np.abs(grad[used]).sum(1) > 0)
    unused = np.delete(grad, used, axis=0)
    assert_equal(unused, np.zeros_like(unused))
    assert jax.jit(lambda: 0)() == 0


@outer
def test_flax_alibi_under_jit_is_pe_core_alibi_bias() -> None:
    jax = pytest.importorskip("jax")
    import pe_core
    from pe_core.layers.flax import AlibiBias, LinenAlibiBias

    expected = pe_core.alibi_bias(3, 7, 6, alibi_bias_max=4.0)[None]
    layer = AlibiBias(6, alibi_bias_max=4.0)
    assert_equal(jax.jit(lambda: layer(3, 7))(), expected, backend="jax")
    linen = LinenAlibiBias(6, alibi_bias_max=4.0)
    assert_equal(jax.jit(lambda: linen.apply({}, 3, 7))(), expected, backend="jax")


@outer
def test_layer_arguments_are_checked() -> None:
    pytest.importorskip("torch")
    from pe_core.layers.torch import AlibiBias, T5RelativeBias

    with pytest.raises(ValueError, match="n_heads must be an integer >= 1"):
        T5RelativeBias(0)
    with pytest.raises(ValueError, match="max_distance must exceed"):
        T5RelativeBias(2, max_distance=4)
    with pytest.raises(ValueError, match="alibi_bias_max must be a finite number > 0"):
        AlibiBias(2, alibi_bias_max=0)
    with pytest.raises(TypeError, match="causal must be True or False"):
        AlibiBias(2, causal="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- Keras


@pytest.mark.slow  # a subprocess per Keras backend
@outer
@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_keras_backend(backend: str) -> None:
    if find_spec("keras") is None or find_spec(backend) is None:
        pytest.skip(f"needs keras and {backend}")
    env = {**os.environ, "KERAS_BACKEND": backend, "PE_CORE_KERAS_INNER": backend}
    env.pop("PYTEST_XDIST_WORKER", None)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:xdist", __file__]
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        command, env=env, cwd=root, capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


def _numpy(x: object) -> np.ndarray:
    from keras import ops

    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


@inner
@pytest.mark.parametrize(("q_len", "k_len", "offset", "is_decoder"), CASES[:2])
def test_keras_t5_bias_is_pe_cores(q_len, k_len, offset, is_decoder) -> None:
    """pe_core.t5_relative_bias on a NumPy table, itself compute_bias bit for bit
    (tests/test_t5_buckets.py), without importing transformers in this process."""
    import pe_core
    from pe_core.layers.keras import T5RelativeBias

    layer = T5RelativeBias(4, bidirectional=not is_decoder)
    layer.build()
    layer.relative_attention_bias.assign(TABLE)
    expected = pe_core.t5_relative_bias(
        q_len, k_len, TABLE, offset=offset, bidirectional=not is_decoder
    )
    assert_equal(_numpy(layer.bias(q_len, k_len, offset)), expected)
    scores = np.random.default_rng(1).standard_normal((2, 4, q_len, k_len)).astype("float32")
    got = _numpy(layer(scores, offset=offset))
    assert_close(got, scores + expected, atol=1e-6, rtol=1e-7)


@inner
def test_keras_t5_trains_and_round_trips(tmp_path: Path) -> None:
    import keras

    from pe_core.layers.keras import AlibiBias, T5RelativeBias

    scores = keras.Input((4, 5, 5))
    out = AlibiBias(4, causal=False)(T5RelativeBias(4, name="t5")(scores))
    model = keras.Model(scores, keras.layers.Flatten()(out))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = np.array(model.get_layer("t5").relative_attention_bias.numpy())
    data = np.zeros((8, 4, 5, 5), "float32")
    model.fit(data, np.ones((8, 100), "float32"), epochs=1, verbose=0)
    after = model.get_layer("t5").relative_attention_bias.numpy()
    used = np.unique(__import__("pe_core").t5_bucket_matrix(5, 5))
    assert np.all(np.abs(after - before)[used].sum(1) > 0)  # gradients reached the table
    assert_equal(np.delete(after, used, 0), np.delete(before, used, 0))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert_equal(model(data), loaded(data))  # the same library and dtype too


@inner
@pytest.mark.parametrize(("n_heads", "alibi_bias_max"), [(8, 8), (12, 8), (6, 4.5)])
def test_keras_alibi_is_keras_hubs(n_heads, alibi_bias_max) -> None:
    from pe_core.layers.keras import AlibiBias

    scores = np.random.default_rng(n_heads).standard_normal((2, n_heads, 6, 6)).astype("float32")
    theirs = keras_hub_alibi(scores.astype(np.float64), alibi_bias_max)
    ours = _numpy(AlibiBias(alibi_bias_max=alibi_bias_max)(scores))
    causal = np.tril(np.ones((6, 6), bool))
    want = softmax(np.where(causal, theirs, -np.inf))
    assert_close(softmax(ours), want, atol=1e-6, rtol=1e-7)
    step = scores[:, :, -1:]
    assert_close(
        _numpy(AlibiBias(n_heads, alibi_bias_max=alibi_bias_max)(step)),
        keras_hub_alibi(step.astype(np.float64), alibi_bias_max),
        atol=1e-6,
        rtol=1e-7,
    )
    if find_spec("keras_hub") is not None:  # the real layer, where installed
        import keras_hub

        real = _numpy(keras_hub.layers.AlibiBias(alibi_bias_max)(step))
        got = _numpy(AlibiBias(alibi_bias_max=alibi_bias_max)(step))
        assert_close(got, real, atol=1e-6, rtol=1e-7)


@inner
def test_keras_nd_layers() -> None:
    """SinusoidalPatchEncoding and RotaryEmbeddingND (Keras; the N-D layers' other
    frameworks are in tests/test_layers_nd.py)."""
    import keras

    import pe_core
    from pe_core.layers.keras import RotaryEmbeddingND, SinusoidalPatchEncoding

    x = np.random.default_rng(0).standard_normal((2, 12, 16)).astype("float32")
    layer = SinusoidalPatchEncoding(16, grid_shape=(3, 4), spec="mae_2d")
    want = x + pe_core.encode(pe_core.grid((3, 4)), 16, spec="mae_2d").reshape(12, 16)
    assert_close(_numpy(layer(x)), want, atol=1e-6, rtol=1e-7)
    restored = SinusoidalPatchEncoding.from_config(layer.get_config())
    assert restored.grid_shape == (3, 4) and restored.spec == layer.spec
    rope = RotaryEmbeddingND(8, (2, 2), frequencies="per_axis", grid_shape=(3, 4))
    q = x[..., :8]
    coords = pe_core.grid((3, 4)).reshape(12, 2)
    want = pe_core.apply_rope(q, coords, sections=(2, 2), frequencies="per_axis")
    assert_close(_numpy(rope(q, q)[0]), want, atol=1e-6, rtol=1e-7)
    again = RotaryEmbeddingND.from_config(rope.get_config())
    assert_close(_numpy(again(q, q, coords)[1]), want, atol=1e-6, rtol=1e-7)
    assert keras.backend.backend() == INNER
