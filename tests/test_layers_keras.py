"""Keras layers on the JAX, TensorFlow and PyTorch Keras backends.

Keras picks its backend once per process, so each backend runs this file's ``inner``
tests in a subprocess with ``KERAS_BACKEND`` set (``test_backend``). Run one backend
by hand with ``PE_CORE_KERAS_INNER=jax KERAS_BACKEND=jax pytest tests/test_layers_keras.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal

INNER = os.environ.get("PE_CORE_KERAS_INNER")
BACKENDS = ("jax", "tensorflow", "torch")

inner = pytest.mark.skipif(not INNER, reason="runs in the per-backend subprocess")


@pytest.mark.slow  # a subprocess per Keras backend
@pytest.mark.skipif(bool(INNER), reason="the outer test")
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend(backend: str) -> None:
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


# --------------------------------------------------------------------------- inner tests

if INNER:
    import keras
    from keras import ops

    import pe_core
    from pe_core import device_tables
    from pe_core.layers.keras import (
        RotaryEmbedding,
        SinusoidalEncoding,
        SinusoidalPatchEncoding,
        assign_resampled,
    )
    from pe_core.rope import apply_rope

D = 8


def numpy_of(x: object) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), dtype=np.float64)


@pytest.fixture(autouse=True)
def _float32_policy():
    if INNER:
        keras.mixed_precision.set_global_policy("float32")
    yield


@inner
def test_the_backend_is_the_one_asked_for() -> None:
    assert keras.backend.backend() == INNER


@inner
def test_values_offsets_and_cache() -> None:
    x = np.random.default_rng(0).standard_normal((3, 5, D)).astype("float32")
    for layer in (
        SinusoidalEncoding(D, spec="fairseq"),
        SinusoidalEncoding(D, spec="fairseq", max_len=8),
    ):
        for offset in (0, 2, 6, 1000):  # 6 and 1000 reach past the cache
            expected = pe_core.encode(range(offset, offset + 5), D, spec="fairseq", dtype="float64")
            got = numpy_of(layer(x, offset=offset)) - x
            assert_close(got, np.broadcast_to(expected, x.shape), atol=1e-6, rtol=1e-7)
        offsets = np.array([0, 7, 100_000], dtype="int32")
        got = numpy_of(layer(x, offset=ops.convert_to_tensor(offsets))) - x
        for b, start in enumerate(offsets):
            want = pe_core.encode(range(start, start + 5), D, spec="fairseq", dtype="float64")
            assert_close(got[b], want, atol=1e-5, rtol=1e-7)


@inner
@pytest.mark.parametrize("max_len", [None, 64])
def test_a_repeated_int_offset_reuses_the_placed_table(
    max_len: int | None, placements: list
) -> None:
    x = ops.convert_to_tensor(np.random.default_rng(6).standard_normal((3, 5, D)), "float32")
    layer = SinusoidalEncoding(D, spec="fairseq", max_len=max_len)
    first = layer(x, offset=9)
    second = layer(x, offset=9)
    assert placements == [(5, D)]  # built and moved once
    want = pe_core.encode(range(9, 14), D, spec="fairseq", dtype="float64")
    assert_close(numpy_of(first) - numpy_of(x), np.broadcast_to(want, (3, 5, D)), atol=1e-6)
    assert_equal(numpy_of(second), numpy_of(first))
    table = layer.encoding(x, offset=9)
    if INNER == "torch":
        table.zero_()  # a copy: writing into it cannot reach the cache
    assert_equal(numpy_of(layer(x, offset=9)), numpy_of(first))
    assert placements == [(5, D)]


@inner
@pytest.mark.skipif(INNER == "torch", reason="Keras runs torch models eagerly")
def test_compiled_calls_keep_the_traced_path() -> None:
    inputs = keras.Input((5, D))
    model = keras.Model(inputs, SinusoidalEncoding(D, max_len=64)(inputs, offset=9))
    x = np.random.default_rng(7).standard_normal((3, 5, D)).astype("float32")
    misses = device_tables.stats()["misses"]
    y = model.predict(x, verbose=0)
    assert device_tables.stats()["misses"] == misses  # traced: the cache was not asked
    want = pe_core.encode(range(9, 14), D, dtype="float64")
    assert_close(numpy_of(y) - x, np.broadcast_to(want, (3, 5, D)), atol=1e-6)


@inner
def test_the_patch_encoding_places_its_table_once(placements: list) -> None:
    x = ops.convert_to_tensor(np.random.default_rng(8).standard_normal((2, 6, D)), "float32")
    layer = SinusoidalPatchEncoding(D, grid_shape=(2, 3), spec="mae_2d")
    first, second = layer(x), layer(x)
    assert placements == [(6, D)]  # the flattened grid, built and moved once
    want = pe_core.encode(pe_core.grid((2, 3)), D, spec="mae_2d", dtype="float64")
    got = numpy_of(first) - numpy_of(x)
    assert_close(got, np.broadcast_to(want.reshape(6, D), (2, 6, D)), atol=1e-6)
    assert_equal(numpy_of(second), numpy_of(first))


@inner
def test_rotary_values() -> None:
    rope = RotaryEmbedding(D, base=500.0, layout="interleaved", rotary_dim=4)
    q, k = np.random.default_rng(1).standard_normal((2, 2, 3, 5, D)).astype("float32")
    q1, _ = rope(q, k, offset=4)
    kwargs = {"base": 500.0, "layout": "interleaved", "rotary_dim": 4}
    assert_close(numpy_of(q1), apply_rope(q, np.arange(4, 9), **kwargs), atol=1e-6, rtol=1e-7)
    offsets = ops.convert_to_tensor(np.array([0, 1000], dtype="int32"))
    _, k2 = rope(q, k, offset=offsets)
    for b, start in enumerate((0, 1000)):
        want = apply_rope(k[b], np.arange(start, start + 5), **kwargs)
        assert_close(numpy_of(k2)[b], want, atol=2e-6, rtol=1e-7)


@inner
def test_keras_file_round_trip(tmp_path: Path) -> None:
    spec = pe_core.Spec(base=500.0, layout="split")
    inputs = keras.Input((6, D))
    x = keras.layers.Dense(D)(inputs)
    x = SinusoidalEncoding(D, spec=spec, dropout=0.1, max_len=4)(x)
    q, k = RotaryEmbedding(D, rotary_dim=4, scaling={"rope_type": "linear", "factor": 2.0})(x, x)
    model = keras.Model(inputs, keras.layers.Add()([q, k]))
    data = np.random.default_rng(2).standard_normal((4, 6, D)).astype("float32")
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert_equal(model(data), loaded(data))  # the same library and dtype too
    layer = loaded.layers[2]
    assert isinstance(layer, SinusoidalEncoding) and layer.spec == spec and layer.max_len == 4
    rope = loaded.layers[3]
    assert rope.scaling == {"rope_type": "linear", "factor": 2.0} and rope.rotary_dim == 4
    for original in (model.layers[2], model.layers[3]):
        config = original.get_config()
        assert type(original).from_config(config).get_config() == config


@inner
def test_mixed_bfloat16_rounds_only_the_output() -> None:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    layer = SinusoidalEncoding(D)
    y = layer(np.zeros((1, 300, D), "float32"), offset=1000)
    expected = ops.cast(pe_core.encode(range(1000, 1300), D), "bfloat16")  # exact float32, rounded
    assert_equal(y[0], expected, backend=INNER, dtype="bfloat16")
    q = np.random.default_rng(3).standard_normal((1, 4, D)).astype("float32")
    q1, _ = RotaryEmbedding(D)(q, q, offset=10**5)
    want = apply_rope(q, np.arange(10**5, 10**5 + 4))
    assert_close(q1, want, atol=3e-2, rtol=1e-7, backend=INNER, dtype="bfloat16")


@inner
def test_a_model_trains() -> None:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(10, D)(inputs)
    x = SinusoidalEncoding(D, dropout=0.1)(x)
    q, k = RotaryEmbedding(D)(x, x)
    model = keras.Model(inputs, keras.layers.Dense(10)(q + k))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(0.01), loss)
    tokens = np.random.default_rng(4).integers(0, 10, (40, 5))
    history = model.fit(tokens, tokens, batch_size=16, epochs=6, verbose=0)
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]


@inner
def test_a_checkpoint_table_loads_into_another_grid() -> None:
    class Tiny(keras.layers.Layer):
        def build(self, input_shape):
            self.pos_embed = self.add_weight(shape=(1, 1 + 8 * 8, D), initializer="zeros")

        def call(self, x):
            return x + self.pos_embed

    layer = Tiny()
    x = np.zeros((2, 65, D), "float32")
    layer(x)
    ckpt = np.random.default_rng(9).standard_normal((1, 1 + 5 * 5, D)).astype("float32")
    assert assign_resampled(layer.pos_embed, ckpt) is layer.pos_embed
    want = pe_core.resample_pos_embed(ckpt, 8)  # tied to torch in tests/test_resample.py
    assert_close(numpy_of(layer(x))[0], want[0], atol=1e-6)
    bilinear = pe_core.resample_pos_embed(ckpt, 8, interpolation="bilinear", antialias=True)
    assign_resampled(
        layer.pos_embed, ops.convert_to_tensor(ckpt), interpolation="bilinear", antialias=True
    )  # a tensor of the backend resampled in place
    assert_close(numpy_of(layer.pos_embed), bilinear, atol=1e-6)
    with pytest.raises(ValueError, match=r"shape \(1, 50, 8\), the variable \(1, 65, 8\)"):
        assign_resampled(layer.pos_embed, ckpt, new_size=(7, 7))
    with pytest.raises(ValueError, match="new_size is needed"):
        assign_resampled(keras.Variable(np.zeros((1, 11, D), "float32")), ckpt)
    with pytest.raises(TypeError, match=r"variable must be a keras\.Variable"):
        assign_resampled(ckpt, ckpt)


@inner
def test_constructors_validate() -> None:
    with pytest.raises(ValueError, match=r"d_model must be an integer >= 1.*Received: 0"):
        SinusoidalEncoding(0)
    with pytest.raises(ValueError, match=r"d must be even.*d=9"):
        SinusoidalEncoding(9)
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\)"):
        SinusoidalEncoding(D, dropout=2.0)
    with pytest.raises(TypeError, match="max_len must be None or a positive"):
        SinusoidalEncoding(D, max_len="64")
    with pytest.raises(ValueError, match="Unknown preset 'bert'"):
        SinusoidalEncoding(D, spec="bert")
    with pytest.raises(ValueError, match="head_dim must be even"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match="Unknown layout 'neox'"):
        RotaryEmbedding(D, layout="neox")
    with pytest.raises(ValueError, match="at most head_dim=8"):
        RotaryEmbedding(D, rotary_dim=10)


@inner
def test_call_time_errors() -> None:
    with pytest.raises(ValueError, match="has 6 features but the layer was built with d_model=8"):
        SinusoidalEncoding(D)(np.zeros((1, 3, 6), "float32"))
    with pytest.raises(ValueError, match="has 6 features but the layer was built with head_dim=8"):
        RotaryEmbedding(D)(np.zeros((1, 3, D), "float32"), np.zeros((1, 3, 6), "float32"))
    with pytest.raises(ValueError, match=r"offset of shape \(3,\)"):
        SinusoidalEncoding(D)(np.zeros((2, 3, D), "float32"), offset=np.array([1, 2, 3]))


@inner
@pytest.mark.skipif(INNER != "tensorflow", reason="TensorFlow only")
def test_tensorflow_graphs_with_unknown_shapes() -> None:
    import tensorflow as tf

    encoding, rope = SinusoidalEncoding(D), RotaryEmbedding(D)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None, D], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ]
    )
    def f(x, offsets):
        q, _ = rope(x, x, offset=offsets)
        return encoding(x, offset=offsets), q, encoding(x, offset=3)

    x = np.random.default_rng(5).standard_normal((2, 5, D)).astype("float32")
    offsets = np.array([3, 40], dtype="int32")
    y, q, y3 = f(x, offsets)
    checks = {"atol": 1e-6, "rtol": 1e-7, "backend": "tensorflow", "dtype": "float32"}
    assert_close(y, encoding(x, offset=offsets), **checks)
    assert_close(y3, encoding(x, offset=3), **checks)
    assert_close(q, rope(x, x, offset=offsets)[0], **checks)


@inner
@pytest.mark.skipif(INNER != "tensorflow", reason="TensorFlow only")
def test_tensorflow_unknown_lengths_with_int_offsets_beyond_int32() -> None:
    """``offset + arange(seq)`` for a ``None`` sequence axis: int64 where int32 would
    wrap (it was wrong by about 2 near and past 2**31), a clear error past 2**62."""
    import tensorflow as tf

    encoding, rope = SinusoidalEncoding(D), RotaryEmbedding(D)
    x = np.random.default_rng(6).standard_normal((2, 4, D)).astype("float32")
    spec = [tf.TensorSpec([None, None, D], tf.float32)]
    checks = {"atol": 2e-6, "rtol": 1e-7, "backend": "tensorflow", "dtype": "float32"}
    traced = {"input_signature": spec, "autograph": False}

    def functions(offset: int) -> tuple:
        return (
            tf.function(lambda x: encoding.encoding(x, offset=offset), **traced),
            tf.function(lambda x: rope.rotate(x, offset=offset), **traced),
        )

    for offset in (2**31 - 2, 2**31 + 5, 2**62 - 9):
        f, g = functions(offset)
        positions = np.arange(4, dtype=np.int64) + offset
        want = pe_core.encode(positions, D, dtype="float64").astype("float32")
        assert_close(f(x), want, **checks)
        assert_close(encoding.encoding(x, offset=offset), want, **checks)  # eager
        rotated = apply_rope(x.astype("float64"), positions).astype("float32")
        assert_close(g(x), rotated, **checks)
    for offset in (2**62, -(2**63)):
        with pytest.raises(ValueError, match=r"offset must be below 2\*\*62 in magnitude"):
            functions(offset)[0].get_concrete_function()


@inner
@pytest.mark.skipif(INNER != "tensorflow", reason="TensorFlow only")
def test_tensorflow_unknown_rank_inputs_are_refused_by_name() -> None:
    import tensorflow as tf

    unknown = tf.TensorSpec(None, tf.float32)
    for layer, inputs in ((SinusoidalEncoding(D), 1), (RotaryEmbedding(D), 2)):
        f = tf.function(layer.__call__, input_signature=[unknown] * inputs, autograph=False)
        with pytest.raises(ValueError, match=f"{type(layer).__name__}'s input 0 must have a known"):
            f.get_concrete_function()


_LOAD_IN_A_FRESH_PROCESS = """
import sys
import keras, numpy as np
path, data, want = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3])
try:
    keras.saving.load_model(path)
except TypeError as error:
    print("PLAIN LOAD FAILS:", "pe_core>SinusoidalEncoding" in str(error))
assert "pe_core.layers.keras" not in sys.modules
from pe_core.layers.keras import load_model
got = np.asarray(keras.ops.convert_to_numpy(load_model(path)(data)))
print("REMEDY EQUAL:", bool(np.array_equal(got, want)))
"""


@inner
@pytest.mark.skipif(INNER != "tensorflow", reason="one backend is enough")
def test_a_keras_file_loads_in_a_process_that_never_imported_the_layers(
    tmp_path: Path,
) -> None:
    from pe_core.layers.keras import custom_objects

    names = {keras.saving.get_registered_name(layer) for layer in custom_objects().values()}
    assert names == set(custom_objects())
    inputs = keras.Input((5, D))
    x = SinusoidalEncoding(D, spec="fairseq")(inputs)
    model = keras.Model(inputs, keras.layers.Add()(list(RotaryEmbedding(D)(x, x))))
    data = np.random.default_rng(7).standard_normal((2, 5, D)).astype("float32")
    model.save(tmp_path / "m.keras")
    np.save(tmp_path / "data.npy", data)
    np.save(tmp_path / "want.npy", numpy_of(model(data)).astype("float32"))
    command = [sys.executable, "-c", _LOAD_IN_A_FRESH_PROCESS]
    command += [str(tmp_path / name) for name in ("m.keras", "data.npy", "want.npy")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=HANG_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PLAIN LOAD FAILS: True" in result.stdout, result.stdout
    assert "REMEDY EQUAL: True" in result.stdout, result.stdout


@inner
@pytest.mark.skipif(INNER != "tensorflow", reason="TensorFlow only")
def test_encode_inside_tf_function() -> None:
    import tensorflow as tf

    traces = []

    @tf.function
    def positional(tokens, start):
        traces.append(1)
        positions = start + tf.range(tf.shape(tokens)[1])
        return pe_core.encode(positions, D, backend="tensorflow")

    for start in (0, 5, 10**6):
        got = positional(tf.zeros((2, 7)), tf.constant(start))
        want = pe_core.encode(range(start, start + 7), D)
        assert_close(got, want, atol=1e-6, rtol=1e-7, backend="tensorflow", dtype="float32")
    assert len(traces) == 1


@inner
def test_fourier_features_layer() -> None:
    from pe_core.layers.keras import FourierFeatures

    x = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype("float32")
    f32 = (np.random.default_rng(2).normal(size=(3, 5)) * 20.0).astype(np.float32)
    want = np.asarray(pe_core.fourier_features(x, f32, dtype="float64"))
    layer = FourierFeatures(3, 5, scale=20.0, seed=2, trainable=True)
    np.testing.assert_array_equal(numpy_of(layer.frequencies), f32)
    np.testing.assert_allclose(numpy_of(layer(ops.convert_to_tensor(x))), want, atol=2e-6)
    assert len(layer.trainable_weights) == 1
    inputs = keras.Input((3,))
    model = keras.Model(inputs, layer(inputs))
    np.testing.assert_allclose(model.predict(x, verbose=0), want, atol=2e-6)
    clone = FourierFeatures.from_config(layer.get_config())
    assert clone.get_config()["order"] == "sin_cos" and clone.num_frequencies == 5
    fixed = FourierFeatures(3, 5, scale=20.0, seed=2, order="cos_sin")
    assert not fixed.trainable_weights
    flipped = np.concatenate([want[:, 5:], want[:, :5]], -1)
    np.testing.assert_allclose(numpy_of(fixed(ops.convert_to_tensor(x))), flipped, atol=2e-6)


@inner
def test_rotary_trainable_frequencies() -> None:
    """``trainable_frequencies=True``: a trainable ``frequencies`` weight, equal to the
    fixed layer at initialisation within the float32 bound, saved in the config, and
    reached by gradients (TensorFlow's tape, torch's autograd, jax.grad of the stateless
    call)."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((1, 2, 5, D)).astype("float32")
    layer = RotaryEmbedding(D, trainable_frequencies=True, frequency_heads=2)
    assert [w.path.split("/")[-1] for w in layer.trainable_weights] == ["frequencies"]
    assert tuple(layer.frequencies.shape) == (2, D // 2)
    bound = float(np.abs(q).max()) * 2 * 16 * 2.0**-24
    assert_close(numpy_of(layer(q, q)[0]), numpy_of(RotaryEmbedding(D)(q, q)[0]), atol=bound)
    again = RotaryEmbedding.from_config(layer.get_config())
    assert again.trainable_frequencies and again.frequency_heads == 2
    if INNER == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(q, q[..., ::-1])[0])
        grad = tape.gradient(loss, layer.frequencies.value)
    elif INNER == "torch":
        loss = ops.sum(layer(ops.convert_to_tensor(q), ops.convert_to_tensor(q[..., ::-1]))[0])
        loss.backward()
        grad = layer.frequencies.value.grad
    else:
        import jax

        def loss_of(values):
            out, _ = layer.stateless_call(values, [], q, q[..., ::-1])
            return jax.numpy.sum(out[0])

        grad = jax.grad(loss_of)([v.value for v in layer.trainable_variables])[0]
    assert grad is not None and float(np.abs(numpy_of(grad)).sum()) > 0


@inner
def test_reprs_show_the_values_used() -> None:
    from pe_core.layers import keras as layers

    config = {"head_dim": 8, "rope_theta": 5e5, "max_position_embeddings": 64}
    config["rope_scaling"] = {"rope_type": "dynamic", "factor": 2.0}
    shown = {
        layers.RotaryEmbedding(D, scaling=config): (
            "head_dim=8, base=500000, layout='half', rope_type='dynamic', factor=2.0, "
            "max_position_embeddings=64"
        ),
        layers.SinusoidalEncoding(D): "d_model=8, spec='vaswani' (base=10000, layout=",
        layers.RotaryEmbeddingND(D, sections=(2, 2)): "sections=(2, 2), base=10000, layout=",
        layers.SinusoidalPatchEncoding(D, grid_shape=(2, 2)): "d_model=8, grid_shape=(2, 2)",
        layers.T5RelativeBias(4): "n_heads=4, num_buckets=32, max_distance=128",
        layers.AlibiBias(4): "n_heads=4, alibi_bias_max=8.0, causal=True",
        layers.FourierFeatures(2, 4): "in_features=2, num_frequencies=4, scale=1.0",
        layers.RelativePositionBias((2, 2), 4): "window_size=(2, 2), n_heads=4",
        layers.Timesteps(8, True, 0): "num_channels=8, flip_sin_to_cos=True, downscale",
    }
    for layer, text in shown.items():
        assert repr(layer).startswith(f"<{type(layer).__name__} name=") and text in repr(layer)
    rope = layers.RotaryEmbedding(D, scaling=config)
    assert rope.get_config()["base"] == 10000.0  # the arguments, for from_config
