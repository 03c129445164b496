"""Fourier features: accuracy against mpmath, every backend eager and traced, gradients
to trainable frequencies, shapes and errors.

The reference is the same formula in 40-digit arithmetic (mpmath) from the same inputs:
``sin``/``cos`` of ``2pi * sum_j x_j f_j`` with the float32 (or float64) coordinates and the
float64 (or the framework's float32) frequencies taken as the exact numbers they are.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from conftest import assert_close, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core._fourier import host_constants, reduced_turns, sin_cos
from pe_core.fourier import feature_error_bound, fourier_features
from pe_core.host_reads import forbid_host_reads
from pe_core_backends import get_namespace

mpmath.mp.dps = 40


def exact(x: np.ndarray, f: np.ndarray, order: str = "sin_cos") -> np.ndarray:
    """The features of float ``x`` ``(..., k)`` and ``f`` ``(k, m)`` in mpmath."""
    x = np.asarray(x, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    flat = x.reshape(-1, f.shape[0])
    out = np.empty((flat.shape[0], 2 * f.shape[1]))
    two_pi = 2 * mpmath.pi
    for i, row in enumerate(flat):
        for m in range(f.shape[1]):
            t = mpmath.fsum(
                mpmath.mpf(float(a)) * mpmath.mpf(float(b))
                for a, b in zip(row, f[:, m], strict=True)
            )
            t -= mpmath.nint(t)
            s, c = float(mpmath.sin(two_pi * t)), float(mpmath.cos(two_pi * t))
            out[i, m], out[i, f.shape[1] + m] = (s, c) if order == "sin_cos" else (c, s)
    return out.reshape(x.shape[:-1] + (2 * f.shape[1],))


def naive32(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The textbook float32 formula ``cat(sin(2pi x@B), cos(2pi x@B))``."""
    a = 2 * np.float32(np.pi) * (x.astype(np.float32) @ f.astype(np.float32))
    return np.concatenate([np.sin(a), np.cos(a)], axis=-1)


RNG = np.random.default_rng(7)
X = RNG.uniform(-1, 1, size=(12, 3)).astype(np.float32)
B = RNG.normal(size=(3, 10)) * 200.0  # up to about a thousand turns per feature
REF = exact(X, B)


def test_host_is_float64_rounded_once():
    out = fourier_features(X, B)
    assert out.dtype == np.float32 and out.shape == (12, 20)
    s = np.abs(X.astype(np.float64)) @ np.abs(B)
    k = B.shape[0]
    host = 2.0**-24 + 2.0**-53 * (8 * (k * k + 2) + 2.0**-8 * (k + 5) * np.concatenate([s, s], -1))
    assert_close(out, REF, atol=host)
    out64 = fourier_features(X, B, dtype="float64")
    assert_close(out64, REF, atol=feature_error_bound(X, B, dtype="float64"), dtype="float64")
    assert np.abs(out64 - REF).max() < 1e-12


def test_device_bound_holds_and_beats_the_textbook_formula(backend):
    xp = get_namespace(backend)
    out = fourier_features(xp.asarray(X), B)
    bound = feature_error_bound(X, B)
    assert_close(out, REF, atol=bound, backend=backend, dtype="float32")
    ours = np.abs(to_numpy(out) - REF).max()
    theirs = np.abs(naive32(X, B) - REF).max()
    assert ours < 2e-6 < 1e-4 < theirs  # the reduction in turns is what keeps it


@given(
    st.integers(1, 4),
    st.integers(1, 6),
    st.floats(0.01, 1e3),
    st.integers(0, 2**31),
)
def test_bound_holds_on_random_inputs(k, m, scale, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, size=(5, k)).astype(np.float32)
    f = rng.normal(size=(k, m)) * scale
    # the device route, on NumPy: framework-like coords with the host constants in float32
    xp = get_namespace("numpy")
    s, c = sin_cos(xp, reduced_turns(xp, x, host_constants(f, "float32"), "float32", host=True))
    got = np.concatenate([s, c], axis=-1)
    assert got.dtype == np.float32
    assert_close(got, exact(x, f), atol=feature_error_bound(x, f))


def test_one_number_per_point_and_order(backend):
    xp = get_namespace(backend)
    t = np.array([[0.0, 0.3], [-1.7, 12.5]], dtype=np.float32)
    f = np.array([1.0, -2.5, 0.125])
    out = fourier_features(xp.asarray(t), f, order="cos_sin")
    ref = exact(t[..., None], f[None, :], order="cos_sin")
    assert_close(out, ref, atol=1e-6, backend=backend, dtype="float32")
    scalar = fourier_features(0.25, [1.0])
    assert scalar.shape == (2,)
    assert_close(scalar, np.array([1.0, 0.0]), atol=1e-7)


def test_host_coords_go_to_the_backend_asked_for(backend):
    out = fourier_features(X.tolist(), B, backend=backend, dtype="float16")
    assert_close(out, REF, atol=2.0**-11, backend=backend, dtype="float16")
    host = get_namespace("numpy")
    if "bfloat16" in host.float_dtypes:  # rounded once from float64, on every backend
        once = fourier_features(X, B, dtype="float64").astype(host.dtype("bfloat16"))
        out = fourier_features(X, B, backend=backend, dtype="bfloat16")
        assert_close(out, once.astype(np.float64), atol=0, backend=backend, dtype="bfloat16")


def test_float64_coords_keep_float64(backend):
    xp = get_namespace(backend)
    if not xp.supports("float64"):
        pytest.skip("no float64 on this backend")
    x = X.astype(np.float64) + 1e-9
    out = fourier_features(xp.asarray(x), B, dtype="float64")
    assert_close(out, exact(x, B), atol=1e-12, backend=backend, dtype="float64")


def test_nerf_positional_encoding():
    """NeRF's gamma(p) (Mildenhall et al. 2020, eq. 4): sin(2**l pi p), cos(2**l pi p)."""
    p = RNG.uniform(-1, 1, size=(6, 3))
    n_octaves = 5
    ours = fourier_features(p, np.kron(np.eye(3), 2.0 ** np.arange(n_octaves) / 2))
    angles = np.concatenate(
        [2.0**o * np.pi * p[:, [j]] for j in range(3) for o in range(n_octaves)], 1
    )
    want = np.concatenate([np.sin(angles), np.cos(angles)], -1)
    assert_close(ours, want, atol=2.0**-24 + 1e-12)


# -------------------------------------------------------------- trainable frequencies


def _loss_weights(shape):
    return np.random.default_rng(3).normal(size=shape)


def _exact_grad(x, f32, w):
    """d/dB of sum(w * features) in float64: 2pi x_j (w_sin cos - w_cos sin)."""
    x = x.astype(np.float64)
    f = f32.astype(np.float64)
    theta = 2 * np.pi * (x @ f)
    m = f.shape[1]
    g = 2 * np.pi * (w[..., :m] * np.cos(theta) - w[..., m:] * np.sin(theta))
    return x.T @ g


def test_gradients_reach_trainable_frequencies(backend):
    if backend == "numpy":
        pytest.skip("NumPy has no autograd")
    f32 = B.astype(np.float32) / 100
    w = _loss_weights((12, 20))
    if backend == "torch":
        import torch

        param = torch.nn.Parameter(torch.from_numpy(f32))
        out = fourier_features(torch.from_numpy(X), param)
        (out * torch.from_numpy(w)).sum().backward()
        grad, value = param.grad.numpy(), out.detach()
    elif backend == "jax":
        import jax
        import jax.numpy as jnp

        def loss(b):
            return (fourier_features(jnp.asarray(X), b) * jnp.asarray(w, jnp.float32)).sum()

        grad = np.asarray(jax.grad(loss)(jnp.asarray(f32)))
        value = fourier_features(jnp.asarray(X), jnp.asarray(f32))
    else:
        import tensorflow as tf

        var = tf.Variable(f32)
        with tf.GradientTape() as tape:
            out = fourier_features(tf.constant(X), var)
            total = tf.reduce_sum(out * tf.constant(w, tf.float32))
        grad, value = tape.gradient(total, var).numpy(), out
    assert_close(value, exact(X, f32), atol=feature_error_bound(X, f32), dtype="float32")
    want = _exact_grad(X, f32, w)
    assert_close(grad, want, atol=1e-4 * np.abs(want).max())


def test_coordinate_gradients_torch():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X, requires_grad=True)
    out = fourier_features(x, B / 100)
    out.sum().backward()
    theta = 2 * np.pi * (X.astype(np.float64) @ (B / 100))
    g = 2 * np.pi * (np.cos(theta) - np.sin(theta)) @ (B / 100).T
    assert_close(x.grad, torch.from_numpy(g.astype(np.float32)), atol=1e-3)


def test_no_host_reads_of_framework_arrays():
    torch = pytest.importorskip("torch")
    x, param = torch.from_numpy(X), torch.nn.Parameter(torch.from_numpy(B.astype(np.float32)))
    with forbid_host_reads("torch"):
        a = fourier_features(x, B)
        b = fourier_features(x, param)
        c = pe_core.perceiver_fourier_features(x, 2, (4, 4, 4))
        d = pe_core.box_fourier_embedding(x)
    assert a.shape == b.shape == (12, 20) and c.shape == (12, 15) and d.shape == (12, 48)


# ------------------------------------------------------------------------------ traced


def test_jax_jit_and_grad_match_eager():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.asarray(X)
    traced = jax.jit(lambda a: fourier_features(a, B))(x)
    assert_close(traced, REF, atol=feature_error_bound(X, B), backend="jax")
    f32 = B.astype(np.float32)
    both = jax.jit(lambda a, b: fourier_features(a, b, order="cos_sin"))(x, jnp.asarray(f32))
    assert_close(both, exact(X, f32, "cos_sin"), atol=feature_error_bound(X, f32))
    boxes = jax.jit(lambda a: pe_core.box_fourier_embedding(a, 3))(x)
    assert_close(boxes, pe_core.box_fourier_embedding(X, 3, backend="jax"), atol=1e-6)


def test_tf_function_matches_eager():
    tf = pytest.importorskip("tensorflow")
    x = tf.constant(X)
    for jit in (False, True):
        traced = tf.function(lambda a: fourier_features(a, B), jit_compile=jit)(x)
        assert_close(traced, REF, atol=feature_error_bound(X, B), backend="tensorflow")
    var = tf.Variable(B.astype(np.float32))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(pe_core.perceiver_fourier_features(x, 2, (3, 3, 3)))
            total += tf.reduce_sum(fourier_features(x, var))
        return tape.gradient(total, var)

    assert step().shape == (3, 10)


@pytest.mark.slow
def test_torch_compile_fullgraph_matches_eager():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(X)
    param = torch.nn.Parameter(torch.from_numpy(B.astype(np.float32)))
    host = B.tolist()  # Python data: a constant to the compiler

    def fn(a, p):
        return fourier_features(a, host), fourier_features(a, p, order="cos_sin")

    from pe_core.layers.torch import FourierFeatures

    layer = FourierFeatures(3, 10, trainable=True)
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    fixed, trained = compiled(x, param)
    compiled_layer = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert_close(compiled_layer(x).detach(), layer(x).detach(), atol=0)
    f32 = B.astype(np.float32)
    assert_close(fixed, REF, atol=feature_error_bound(X, B), backend="torch")
    assert_close(trained.detach(), exact(X, f32, "cos_sin"), atol=feature_error_bound(X, f32))
    trained.sum().backward()
    assert param.grad is not None and param.grad.shape == (3, 10)


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("coords", "freqs", "kwargs", "error", "match"),
    [
        (np.zeros((2, 3)), np.ones((2, 4)), {}, ValueError, r"shape \(\.\.\., 2\)"),
        (np.zeros(3), np.ones((1, 2, 3)), {}, ValueError, r"shape \(m,\) or \(k, m\)"),
        (np.zeros(3), np.ones((0,)), {}, ValueError, r"k, m >= 1"),
        (np.zeros(3), [1.0, float("nan")], {}, ValueError, "frequencies must be finite"),
        ([0.0, float("inf")], [1.0], {}, ValueError, "coords must be finite"),
        (np.zeros(3), ["a"], {}, TypeError, "real numbers"),
        (np.zeros(3), [True], {}, TypeError, "real numbers"),
        (np.zeros(3), [1e40], {}, ValueError, "at most 1e34"),
        (np.zeros(3), [1.0], {"order": "sin"}, ValueError, "Unknown order 'sin'"),
        (np.zeros(3), [1.0], {"dtype": "int32"}, ValueError, "floating dtype"),
        ([2**60], [1.0], {}, ValueError, r"at most 2\*\*53"),
    ],
)
def test_bad_input_is_refused(coords, freqs, kwargs, error, match):
    with pytest.raises(error, match=match):
        fourier_features(coords, freqs, **kwargs)


def test_framework_errors():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="floating dtype"):
        fourier_features(torch.arange(3), [1.0])
    with pytest.raises(TypeError, match="floating dtype"):
        fourier_features(torch.zeros(3), torch.arange(3))
    with pytest.raises(TypeError, match="backend must be 'torch'"):
        fourier_features(np.zeros(3), torch.ones(3), backend="numpy")
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(TypeError, match="one framework"):
        fourier_features(jnp.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match=r"pos must have shape \(\.\.\., 2\)"):
        pe_core.perceiver_fourier_features(np.zeros((4, 3)), 2, (8, 8))
    with pytest.raises(ValueError, match="num_bands must be an integer >= 1"):
        pe_core.perceiver_fourier_features(np.zeros((4, 2)), 0)
    with pytest.raises(TypeError, match="max_resolution must be a sequence"):
        pe_core.perceiver_fourier_features(np.zeros((4, 1)), 2, 8)
    with pytest.raises(ValueError, match="embed_dim must be an integer >= 1"):
        pe_core.box_fourier_embedding(np.zeros((1, 4)), 0)
    with pytest.raises(ValueError, match="box must have shape"):
        pe_core.box_fourier_embedding(0.5)


def test_error_bound_is_stated_per_feature():
    b = feature_error_bound(X, B)
    s = np.abs(X.astype(np.float64)) @ np.abs(B)
    k = 3
    want = 2.0**-24 * (8 * (k * k + 2) + 2.0**-8 * (k + 5) * s) + 2.0**-24
    assert_close(b, np.concatenate([want, want], -1), atol=0, rtol=1e-12)
    assert math.isclose(b.max(), want.max())


def test_perceiver_and_box_agree_across_backends(backend):
    grid = np.linspace(-1, 1, 6).reshape(3, 2)
    pos = positions_on(backend, grid)
    out = pe_core.perceiver_fourier_features(pos, 3, (4, 6), concat_pos=False, sine_only=True)
    f = np.stack([np.linspace(1, 2, 3), np.linspace(1, 3, 3)]) / 2
    want = np.concatenate([exact(grid[:, a : a + 1], f[a : a + 1]) for a in (0, 1)], -1)
    assert_close(out, want[:, [0, 1, 2, 6, 7, 8]], atol=3e-7, backend=backend, dtype="float32")
    box = positions_on(backend, RNG.uniform(0, 1, size=(2, 4)))
    emb = pe_core.box_fourier_embedding(box, 2)
    host = pe_core.box_fourier_embedding(to_numpy(box), 2)
    assert_close(emb, host, atol=3e-7, backend=backend, dtype="float32")


# ------------------------------------------------------------------------------ layer


def test_torch_layer_is_the_function_with_its_matrix():
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import FourierFeatures

    fixed = FourierFeatures(3, 10, scale=200.0, seed=4)
    b = np.random.default_rng(4).normal(size=(3, 10)) * 200.0
    assert_close(fixed.frequencies, torch.from_numpy(b.astype(np.float32)), atol=0)
    assert "frequencies" in dict(fixed.named_buffers()) and not list(fixed.parameters())
    x = torch.from_numpy(X)
    out = fixed(x)
    f32 = b.astype(np.float32)
    assert_close(out, exact(X, f32), atol=feature_error_bound(X, f32), backend="torch")
    trained = FourierFeatures(3, 10, scale=200.0, seed=4, trainable=True, order="cos_sin")
    y = trained(x)
    assert_close(y.detach(), exact(X, f32, "cos_sin"), atol=feature_error_bound(X, f32))
    y.sum().backward()
    assert trained.frequencies.grad.shape == (3, 10)
    assert "in_features=3, num_frequencies=10, scale=200.0" in repr(trained)
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        FourierFeatures(2, 4, scale=0.0)
    with pytest.raises(ValueError, match="Unknown order"):
        FourierFeatures(2, 4, order="sin")
    with pytest.raises(TypeError, match="floating"):
        fixed(torch.zeros(2, 3, dtype=torch.int64))


def test_flax_layers_match_the_function_and_torch():
    pytest.importorskip("flax")
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from pe_core.layers.flax import FourierFeatures, LinenFourierFeatures

    f32 = (np.random.default_rng(4).normal(size=(3, 10)) * 200.0).astype(np.float32)
    want = exact(X, f32)
    bound = feature_error_bound(X, f32)
    x = jnp.asarray(X)
    fixed = FourierFeatures(3, 10, scale=200.0, seed=4)
    assert_close(fixed(x), want, atol=bound, backend="jax", dtype="float32")
    trained = FourierFeatures(3, 10, scale=200.0, seed=4, trainable=True)
    grads = nnx.grad(lambda m: m(x).sum())(trained)
    assert grads["frequencies"][...].shape == (3, 10)
    assert "in_features=3" in repr(trained)
    linen = LinenFourierFeatures(3, 10, scale=200.0, seed=4, trainable=True, order="cos_sin")
    variables = linen.init(jax.random.key(0), x)
    assert_close(variables["params"]["frequencies"], f32, atol=0)
    out = linen.apply(variables, x)
    assert_close(out, exact(X, f32, "cos_sin"), atol=bound, backend="jax")
    with pytest.raises(ValueError, match="num_frequencies must be an integer >= 1"):
        LinenFourierFeatures(3, 0)
