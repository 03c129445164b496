"""pe_core.integrations.keras_hub on the JAX, TensorFlow and PyTorch Keras backends.

Keras picks its backend once per process: each backend runs this file's ``inner`` tests
in a subprocess with ``KERAS_BACKEND`` set. By hand:
``PE_CORE_KERAS_HUB_INNER=jax KERAS_BACKEND=jax pytest tests/test_integration_keras_hub.py``.

References: keras-hub's own (unpatched) layers at short positions, their float32
inverse frequencies (the restated float64 ones agree to float32 rounding), and mpmath
cos/sin of the restated frequencies at position 1e5.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import zipfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from conftest import HANG_TIMEOUT

INNER = os.environ.get("PE_CORE_KERAS_HUB_INNER")
BACKENDS = ("jax", "tensorflow", "torch")

inner = pytest.mark.skipif(not INNER, reason="runs in the per-backend subprocess")


@pytest.mark.slow  # a subprocess per Keras backend
@pytest.mark.skipif(bool(INNER), reason="the outer test")
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend(backend: str) -> None:
    if find_spec("keras_hub") is None or find_spec(backend) is None:
        pytest.skip(f"needs keras_hub and {backend}")
    env = {**os.environ, "KERAS_BACKEND": backend, "PE_CORE_KERAS_HUB_INNER": backend}
    env.pop("PYTEST_XDIST_WORKER", None)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:xdist", __file__]
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        command, env=env, cwd=root, capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


# --------------------------------------------------------------------------- inner tests

if INNER:
    import keras
    import keras_hub
    from keras import ops
    from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding
    from keras_hub.src.models.esm.esm_attention import ESMRotaryEmbedding
    from keras_hub.src.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding
    from keras_hub.src.models.phi3.phi3_rotary_embedding import Phi3SuScaledRotaryEmbedding

    from pe_core.integrations import keras_hub as integration
    from pe_core.integrations.keras_hub import (
        patch_rotary_embeddings,
        unpatch_rotary_embeddings,
    )


def numpy_of(x: Any) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


def layers() -> dict[str, Any]:
    llama31 = {
        "frequency_adjustment_factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "pretraining_sequence_length": 64,
    }
    return {
        "linear": RotaryEmbedding(max_wavelength=10000, scaling_factor=2.0),
        "dynamic": RotaryEmbedding(rope_type="dynamic", scaling_factor=4.0),
        "yarn": RotaryEmbedding(
            rope_type="yarn", scaling_factor=4.0, original_max_position_embeddings=64
        ),
        "denominator_dim": RotaryEmbedding(max_wavelength=1e6, denominator_dim=32),
        "llama": LlamaRotaryEmbedding(max_wavelength=5e5, position_scaling_factor=3.0),
        "llama3.1": LlamaRotaryEmbedding(max_wavelength=5e5, **llama31),
        "phi3": Phi3SuScaledRotaryEmbedding(
            inverese_freq_short_factor=[1.0 + 0.1 * i for i in range(8)],
            inverese_freq_long_factor=[1.5 + 0.3 * i for i in range(8)],
            max_sequence_length=256,
            pretraining_sequence_length=64,
        ),
    }


def cos_sin(layer: Any, x: Any, start: Any) -> tuple[np.ndarray, np.ndarray]:
    cos, sin = layer._compute_cos_sin_embedding(x, start)
    return numpy_of(cos), numpy_of(sin)


X = np.random.default_rng(0).standard_normal((1, 5, 2, 16)).astype("float32")


@inner
@pytest.mark.parametrize("name", ["linear", "dynamic", "yarn", "denominator_dim", "llama",
                                  "llama3.1", "phi3"])  # fmt: skip
def test_layers_agree_short_and_exact_at_1e5(name: str) -> None:
    layer = layers()[name]
    x = ops.convert_to_tensor(X)
    short = cos_sin(layer, x, 3)
    keras_inv = numpy_of(layer._get_inverse_freq(16))
    far = cos_sin(layer, x, 100_000)
    patch_rotary_embeddings(layer)
    got_short, got_far = cos_sin(layer, x, 3), cos_sin(layer, x, 100_000)
    for got, want in zip(got_short, short, strict=True):  # float32 rounding apart
        np.testing.assert_allclose(got, want, atol=3e-6)
    # the restated frequencies are keras-hub's, to float32 rounding
    restated = integration._INVERSE_FREQ.get(type(layer)._get_inverse_freq)
    if restated is not None:
        np.testing.assert_allclose(restated(layer, 16), keras_inv, rtol=2e-6)
    # exact at 1e5 (the float32 formula is off by far more)
    exact = reference(layer, 100_000 + np.arange(5))
    for got, want, before in zip(got_far, exact, far, strict=True):
        got = got.reshape(5, 16)
        np.testing.assert_allclose(got, want, atol=1e-6)
        assert np.abs(before.reshape(5, 16) - want).max() > 1e-4
    unpatch_rotary_embeddings(layer)
    for got, want in zip(cos_sin(layer, x, 100_000), far, strict=True):
        np.testing.assert_array_equal(got, want)


def reference(layer: Any, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mpmath cos/sin of the restated float64 frequencies, times the layer's factor."""
    if isinstance(layer, Phi3SuScaledRotaryEmbedding):
        inv = integration._base_inverse_freq(layer, 16)
        inv = inv / np.asarray(layer.inverese_freq_long_factor)
        factor = layer.embedding_scaling_factor
    else:
        inv = integration._INVERSE_FREQ[type(layer)._get_inverse_freq](layer, 16)
        factor = integration._yarn_factor(layer)
    c = np.empty((len(positions), 8))
    s = np.empty_like(c)
    with mpmath.workdps(40):
        for i, p in enumerate(positions.tolist()):
            for j, w in enumerate(inv.tolist()):
                angle = mpmath.mpf(p) * mpmath.mpf(w)
                c[i, j], s[i, j] = float(mpmath.cos(angle)), float(mpmath.sin(angle))
    c, s = np.concatenate([c, c], -1) * factor, np.concatenate([s, s], -1) * factor
    return c, s


@inner
def test_esm_layer() -> None:
    layer = ESMRotaryEmbedding(max_wavelength=10000)
    q = ops.convert_to_tensor(X)
    want = layer(q, q)
    patch_rotary_embeddings(layer)
    got = layer(q, q)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(numpy_of(g), numpy_of(w), atol=3e-6)


def tiny_backbones() -> dict[str, Any]:
    common = {"vocabulary_size": 64, "num_layers": 1, "hidden_dim": 16, "intermediate_dim": 32}
    return {
        "llama": lambda: keras_hub.models.LlamaBackbone(
            num_query_heads=2, num_key_value_heads=1, **common
        ),
        "llama3-scaled": lambda: keras_hub.models.Llama3Backbone(
            num_query_heads=2,
            num_key_value_heads=1,
            rope_frequency_adjustment_factor=8.0,
            rope_low_freq_factor=1.0,
            rope_high_freq_factor=4.0,
            rope_pretraining_sequence_length=32,
            **common,
        ),
        "gemma": lambda: keras_hub.models.GemmaBackbone(
            num_query_heads=2, num_key_value_heads=1, head_dim=8, **common
        ),
        "phi3": lambda: keras_hub.models.Phi3Backbone(
            num_query_heads=2, num_key_value_heads=1, **common
        ),
    }


@inner
@pytest.mark.parametrize("name", ["llama", "llama3-scaled", "gemma", "phi3"])
def test_backbones_patch_and_unpatch(name: str, tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    backbone = tiny_backbones()[name]()
    inputs = {
        "token_ids": np.arange(12).reshape(1, 12) % 64,
        "padding_mask": np.ones((1, 12), "int32"),
    }
    before = numpy_of(backbone(inputs))
    assert patch_rotary_embeddings(backbone) is backbone
    patched = numpy_of(backbone(inputs))
    np.testing.assert_allclose(patched, before, atol=2e-5, rtol=1e-5)
    if INNER == "jax":
        import jax

        def call(trainable: Any, other: Any, ids: Any, mask: Any) -> Any:
            data = {"token_ids": ids, "padding_mask": mask}
            return backbone.stateless_call(trainable, other, data)[0]

        trainable = [v.value for v in backbone.trainable_variables]
        other = [v.value for v in backbone.non_trainable_variables]
        jitted = jax.jit(call)(trainable, other, inputs["token_ids"], inputs["padding_mask"])
        np.testing.assert_allclose(numpy_of(jitted), patched, atol=2e-5, rtol=1e-5)
    if INNER == "tensorflow":
        import tensorflow as tf

        fn = tf.function(lambda t, m: backbone({"token_ids": t, "padding_mask": m}),
                         jit_compile=True)  # fmt: skip
        compiled = fn(tf.constant(inputs["token_ids"]), tf.constant(inputs["padding_mask"]))
        np.testing.assert_allclose(numpy_of(compiled), patched, atol=2e-5, rtol=1e-5)
    path = tmp_path / "model.keras"
    backbone.save(path)
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            assert b"pe_core" not in archive.read(member), member
    unpatch_rotary_embeddings(backbone)
    np.testing.assert_array_equal(numpy_of(backbone(inputs)), before)


@inner
def test_refusals() -> None:
    plain = keras.Sequential([keras.layers.Dense(4)])
    with pytest.raises(ValueError, match="Sequential has no rotary"):
        patch_rotary_embeddings(plain)

    class Odd(RotaryEmbedding):
        def _get_inverse_freq(self, rotary_dim: int) -> Any:
            return super()._get_inverse_freq(rotary_dim) * 2

    model = keras.layers.Layer()
    model.odd, model.fine = Odd(), RotaryEmbedding()
    with pytest.raises(ValueError, match="Odd overrides"):
        patch_rotary_embeddings(model)
    assert "_pe_core_exact_rope" not in vars(model.fine)  # nothing patched
    # an attention deriving from Qwen 3.5's forms its M-RoPE angles its own way
    from keras_hub.src.models.qwen3_5.qwen3_5_attention import Qwen3_5Attention

    class OddAttention(Qwen3_5Attention):
        pass

    owner = keras.layers.Layer()
    owner.attention = OddAttention(num_query_heads=2, num_key_value_heads=1, head_dim=16)
    owner.attention.build((None, None, 16))
    with pytest.raises(ValueError, match="OddAttention forms its M-RoPE angles"):
        patch_rotary_embeddings(owner)


def qwen3_5_positions(base: int) -> np.ndarray:
    """M-RoPE position ids ``(1, 4, 5)``: text, temporal, height and width channels
    apart, so each rotary pair's channel matters."""
    return (base + np.arange(5) + 7 * np.arange(4)[:, None])[None].astype("int32")


def qwen3_5_reference(x: np.ndarray, base: int) -> np.ndarray:
    """mpmath M-RoPE of ``x`` (head 16, rotary 8, ``mrope_section`` ``[2, 1, 1]``: the
    pairs take the temporal, height, width and temporal channel)."""
    channels = qwen3_5_positions(base)[0]
    inv = 1.0 / 10000.0 ** (np.arange(0, 8, 2) / 8)
    c = np.empty((5, 4))
    s = np.empty_like(c)
    for j, channel in enumerate((1, 2, 3, 1)):
        cj, sj = mp_cos_sin(channels[channel].astype(np.float64), inv[j : j + 1])
        c[:, j], s[:, j] = cj[:, 0], sj[:, 0]
    c, s = np.concatenate([c, c], -1)[None, :, None], np.concatenate([s, s], -1)[None, :, None]
    x = x.astype(np.float64)
    rope = x[..., :8]
    rotated = np.concatenate([-rope[..., 4:], rope[..., :4]], -1)
    return np.concatenate([rope * c + rotated * s, x[..., 8:]], -1)


@inner
def test_qwen3_5_mrope_exact_at_1e5() -> None:
    keras.utils.set_random_seed(0)
    qwen = keras_hub.models.Qwen3_5Backbone(vocabulary_size=64, num_layers=4, num_query_heads=2,
        num_key_value_heads=1, head_dim=16, hidden_dim=16, intermediate_dim=32,
        partial_rotary_factor=0.5, mrope_section=[2, 1, 1])  # fmt: skip
    (attention,) = [a for a in qwen._flatten_layers() if type(a).__name__ == "Qwen3_5Attention"]
    x = np.random.default_rng(0).standard_normal((1, 5, 2, 16)).astype("float32")

    def rope(base: int, start: int = 0, mrope: bool = True) -> np.ndarray:
        ids = ops.convert_to_tensor(qwen3_5_positions(base)) if mrope else None
        return numpy_of(attention._apply_partial_rope(ops.convert_to_tensor(x), start, ids))

    short, far, plain = rope(3), rope(100_000), rope(0, 100_000, mrope=False)
    patch_rotary_embeddings(qwen)
    np.testing.assert_allclose(rope(3), short, atol=3e-6)  # float32 rounding apart
    want = qwen3_5_reference(x, 100_000)
    np.testing.assert_allclose(rope(100_000), want, atol=1e-6)
    assert np.abs(far - want).max() > 1e-4  # keras-hub's float32 angles
    ids = ops.convert_to_tensor(qwen3_5_positions(100_000))
    if INNER == "jax":
        import jax

        jitted = jax.jit(lambda p: attention._apply_partial_rope(ops.convert_to_tensor(x), 0, p))
        np.testing.assert_allclose(numpy_of(jitted(ids)), want, atol=1e-6)
    if INNER == "tensorflow":
        import tensorflow as tf

        fn = tf.function(lambda p: attention._apply_partial_rope(tf.constant(x), 0, p),
                         jit_compile=True)  # fmt: skip
        np.testing.assert_allclose(numpy_of(fn(ids)), want, atol=1e-6)
    unpatch_rotary_embeddings(qwen)
    np.testing.assert_array_equal(rope(100_000), far)
    np.testing.assert_array_equal(rope(0, 100_000, mrope=False), plain)


# ------------------------------------------------------- model-specific rotary layers


def mp_cos_sin(positions: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mpmath cos/sin of ``positions * inv`` (one column per frequency)."""
    c = np.empty((len(positions), len(inv)))
    s = np.empty_like(c)
    with mpmath.workdps(40):
        for i, p in enumerate(positions.tolist()):
            for j, w in enumerate(inv.tolist()):
                angle = mpmath.mpf(p) * mpmath.mpf(w)
                c[i, j], s[i, j] = float(mpmath.cos(angle)), float(mpmath.sin(angle))
    return c, s


FAR = 100_000 + np.arange(4)
INV16 = 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16)  # all four layers' frequencies here


def specific_layer(name: str) -> tuple[Any, Any]:
    """A model-specific rotary layer and a function of it giving ``(cos, sin)`` at
    positions FAR, shaped ``(4, 8)`` (one column per frequency)."""
    from keras_hub.src.models.flux.flux_maths import RotaryPositionalEmbedding
    from keras_hub.src.models.moonshine.moonshine_layers import MoonshineRotaryEmbedding
    from keras_hub.src.models.roformer_v2.roformer_v2_attention import (
        RoformrPositionalEmbedding,
    )
    from keras_hub.src.models.smollm3.smollm3_layers import SmolLM3RotaryEmbedding

    ints = ops.convert_to_tensor(FAR.astype("int32"))
    floats = ops.convert_to_tensor(FAR[None].astype("float32"))
    if name == "smollm3":
        layer = SmolLM3RotaryEmbedding(hidden_size=32, num_attention_heads=2,
            max_position_embeddings=64, rope_theta=10000.0, partial_rotary_factor=1.0)  # fmt: skip
        x = ops.zeros((1, 4, 16))

        def tables(layer: Any) -> Any:
            cos, sin = layer(x, start_index=100_000)
            return numpy_of(cos)[0, :, :8], numpy_of(sin)[0, :, :8]
    elif name == "moonshine":
        layer = MoonshineRotaryEmbedding(head_dim=16, partial_rotary_factor=1.0)
        layer.build(None)

        def tables(layer: Any) -> Any:  # angles, taken by cos/sin only
            angles = numpy_of(layer(ints))[:, ::2]
            return np.cos(angles), np.sin(angles)
    elif name == "flux":
        layer = RotaryPositionalEmbedding()

        def tables(layer: Any) -> Any:
            out = numpy_of(layer(floats, dim=16, theta=10000))[0]
            return out[..., 0], out[..., 1]
    else:
        layer = RoformrPositionalEmbedding(output_dim=16)

        def tables(layer: Any) -> Any:
            out = numpy_of(layer.sinusoidal_embeddings(floats, 16, 10000))[0]
            return out[:, 1::2], out[:, ::2]

    return layer, tables


@inner
@pytest.mark.parametrize("name", ["smollm3", "moonshine", "flux", "roformer"])
def test_specific_layers_exact_at_1e5(name: str) -> None:
    layer, tables = specific_layer(name)
    before = tables(layer)
    want = mp_cos_sin(FAR, INV16)
    model = keras.layers.Layer()
    model.rotary = layer  # patched through an owner, as in a model
    patch_rotary_embeddings(model)
    for got, exact, old in zip(tables(layer), want, before, strict=True):
        np.testing.assert_allclose(got, exact, atol=1e-6)
        assert np.abs(old - exact).max() > 1e-4  # keras-hub's float32 angles
    unpatch_rotary_embeddings(model)
    for got, old in zip(tables(layer), before, strict=True):
        np.testing.assert_array_equal(got, old)


@inner
def test_specific_layers_refuse_other_weights() -> None:
    layer, _ = specific_layer("smollm3")
    layer.inv_freq.assign(ops.convert_to_numpy(layer.inv_freq) * 2)
    with pytest.raises(ValueError, match="inv_freq weight is not SmolLM3RotaryEmbedding's"):
        patch_rotary_embeddings(layer)


def new_family(name: str) -> tuple[Any, dict[str, Any]]:
    """A tiny backbone of a family the generic arguments do not build, and inputs:
    the coverage script's builders."""
    from benchmarks.keras_hub_coverage import SPECIAL, TINY

    cls = getattr(keras_hub.models, name)
    extra, data = SPECIAL[name]()
    required = [
        p.name for p in inspect.signature(cls.__init__).parameters.values()
        if p.default is inspect.Parameter.empty
    ]  # fmt: skip
    keras.utils.set_random_seed(0)
    return cls(**{**{n: TINY[n] for n in required if n in TINY}, **extra}), data


def outputs_of(model: Any, data: dict[str, Any]) -> list[np.ndarray]:
    out = model(data)
    outs = out.values() if isinstance(out, dict) else out if isinstance(out, list) else [out]
    return [numpy_of(o) for o in outs]


NEW_FAMILIES = [
    "DINOV3Backbone", "FluxBackbone", "Gemma3Backbone", "Gemma3nBackbone", "Gemma4Backbone",
    "MoonshineBackbone", "Qwen3MoeBackbone", "Qwen3_5Backbone", "Qwen3_5MoeBackbone",
    "QwenMoeBackbone", "RoformerV2Backbone",
    "SAM3PromptableConceptBackbone", "SmolLM3Backbone", "T5Gemma2Backbone", "T5GemmaBackbone",
]  # fmt: skip


#: Families whose whole tiny model takes JAX 20 to 100 s in eager mode (every operation
#: compiled on its own at first use): on JAX their rotary layers are checked by the layer
#: tests above (SmolLM3, Moonshine, FLUX, Qwen 3.5's M-RoPE, the generic layer), the
#: whole model on TensorFlow and torch, where each runs in seconds.
JAX_EAGER_SLOW = {
    "FluxBackbone", "Gemma3nBackbone", "MoonshineBackbone", "Qwen3_5Backbone",
    "SAM3PromptableConceptBackbone", "T5Gemma2Backbone",
}  # fmt: skip


@inner
@pytest.mark.parametrize("name", NEW_FAMILIES)
def test_new_families_patch_and_unpatch(name: str) -> None:
    if name.startswith("SAM3") and INNER == "torch" and find_spec("torchvision") is None:
        pytest.skip("SAM 3's ROI align on torch needs torchvision")
    if INNER == "jax" and name in JAX_EAGER_SLOW:
        pytest.skip("a whole model op by op in JAX's eager mode: checked on the others")
    model, data = new_family(name)
    before = outputs_of(model, data)
    patch_rotary_embeddings(model)
    assert any("_pe_core_exact_rope" in vars(layer) for layer in model._flatten_layers())
    for got, want in zip(outputs_of(model, data), before, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4)
    unpatch_rotary_embeddings(model)
    assert not any("_pe_core_exact_rope" in vars(layer) for layer in model._flatten_layers())
    for got, want in zip(outputs_of(model, data), before, strict=True):
        np.testing.assert_array_equal(got, want)
