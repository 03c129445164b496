"""Timestep embeddings: mpmath truth, diffusers/DiT/MusicGen parity, every backend and mode."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core import timestep_embedding
from pe_core.timestep import timestep_spec
from pe_core_backends import backend_of, force_device_path, get_namespace

#: (embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period, timesteps)
CONFIGS = {
    "sd_unet": (320, True, 0.0, 1.0, 10000, np.array([0, 1, 500, 999])),
    "ddpm_default": (128, False, 1.0, 1.0, 10000, np.array([3, 250, 998])),
    "qwenimage_scale_1000": (256, True, 0.0, 1000.0, 10000, np.array([0.0, 0.0123, 0.5, 0.999])),
    "odd_float": (33, False, 1.0, 1.0, 10000, np.array([0.5, 17.25, 999.75])),
    "short_period": (10, True, 0.5, 3.0, 100, np.array([-2.5, 0.0, 41.0])),
}


def truth(t: np.ndarray, dim: int, flip: bool, shift: float, scale: float, period: float):
    """sin/cos(t * W_i) in mpmath (120 bits beyond the angle's size), t taken as the exact
    float it is and W_i the float64 frequency, as encode takes a spec's frequencies
    (test_frequencies_are_the_formula_rounded_once checks them against the formula)."""
    largest = float(np.max(np.abs(np.asarray(t, np.float64)), initial=1.0)) * abs(scale) + 1
    mpmath.mp.prec = 120 + math.ceil(math.log2(largest))
    sign = -1 if scale < 0 else 1
    w = [sign * mpmath.mpf(f) for f in timestep_spec(dim, flip, shift, scale, period).frequencies]
    rows = []
    for value in np.asarray(t).reshape(-1).tolist():
        x = mpmath.mpf(value)
        sin = [float(mpmath.sin(x * wi)) for wi in w]
        cos = [float(mpmath.cos(x * wi)) for wi in w]
        row = cos + sin if flip else sin + cos
        rows.append(row + [0.0] * (dim % 2))
    return np.array(rows, np.float64).reshape(*np.shape(t), dim)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_frequencies_are_the_formula_rounded_once(name):
    """|scale| * exp(-ln(max_period) * i / (half - shift)) in float64 arithmetic (the
    spec schedule's): within a few ulps of the exponent's size."""
    dim, flip, shift, scale, period, _ = CONFIGS[name]
    mpmath.mp.prec = 200
    half = dim // 2
    rate = -mpmath.log(mpmath.mpf(period)) / (half - mpmath.mpf(shift))
    got = timestep_spec(dim, flip, shift, scale, period).frequencies
    for i, f in enumerate(got):
        exact = abs(scale) * mpmath.exp(rate * i)
        assert abs(mpmath.mpf(f) - exact) <= 2.0**-51 * (1 + abs(rate * i)) * exact


def angles(t: np.ndarray, dim: int, shift: float, scale: float, period: float) -> np.ndarray:
    """|scale * t * w_i| in float64, laid out like the embedding (for error bounds)."""
    half = dim // 2
    w = np.exp(-math.log(period) * np.arange(half) / (half - shift))
    a = np.abs(scale * np.asarray(t, np.float64).reshape(-1, 1) * w)
    return np.concatenate([a, a, np.zeros((a.shape[0], dim % 2))], -1)


def kwargs(config):
    _, flip, shift, scale, period, _ = config
    return dict(flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=scale, max_period=period)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_within_1e6_of_mpmath_every_backend(backend, name):
    dim, flip, shift, scale, period, t = CONFIGS[name]
    given_t = positions_on(backend, t)
    want = truth(to_numpy(given_t), dim, flip, shift, scale, period)
    got = timestep_embedding(given_t, dim, **kwargs(CONFIGS[name]))
    assert_close(got, want, atol=1e-6, backend=backend, dtype="float32")
    with force_device_path():  # the device kernel, on the CPU
        got = timestep_embedding(given_t, dim, **kwargs(CONFIGS[name]))
    assert_close(got, want, atol=1e-6, backend=backend, dtype="float32")


def test_float64_output_exact_at_any_timestep():
    """Within encode's float64 bound (1e-12, docs/precision.md) at any timestep."""
    t = np.array([-5.25, 0.1, 1e7 + 0.5, 3e12, 2.0**70, 1e300])
    for scale in (1.0, 1000.0):
        want = truth(t, 64, True, 0.0, scale, 10000)
        got = timestep_embedding(
            t, 64, flip_sin_to_cos=True, downscale_freq_shift=0, scale=scale, dtype="float64"
        )
        assert_close(got, want, atol=1e-12, backend="numpy", dtype="float64")
    big = np.array([2**40 + 3, 2**62 + 12345, -(2**63)], np.int64)
    want = truth(big, 16, False, 1.0, 1.0, 10000)
    assert_close(timestep_embedding(big, 16, dtype="float64"), want, atol=1e-12)
    assert_close(timestep_embedding(big, 16), want, atol=1e-6)


def test_float32_large_float_timesteps_every_route():
    torch = pytest.importorskip("torch")
    t = np.array([0.75, 123456.5, 3.0e7, 1.5e12], np.float32)
    want = truth(t, 32, True, 0.0, 1000.0, 10000)
    kw = dict(flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000.0)
    assert_close(timestep_embedding(t, 32, **kw), want, atol=1e-6)
    with force_device_path():
        got = timestep_embedding(torch.from_numpy(t), 32, **kw)
    assert_close(to_numpy(got), want, atol=1e-6)


def test_diffusers_float32_error_at_scale_1000():
    """diffusers computes ``scale * (t * w)`` in float32. At scale=1000 its angles drift
    by about 1e-4 for timesteps in [0, 1] and by 0.08 for timesteps up to 1000 (the
    figures the docs quote); pe_core stays within 1e-6."""
    torch = pytest.importorskip("torch")
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    for t, worse_than in (
        (np.array([0.99825, 0.7531, 0.5], np.float32), 3e-5),
        (np.array([793.0, 999.0, 511.5, 250.25], np.float32), 0.05),
    ):
        want = truth(t, 256, True, 0.0, 1000.0, 10000)
        theirs = embeddings.get_timestep_embedding(torch.from_numpy(t), 256, True, 0, 1000)
        ours = timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)
        assert np.abs(theirs.numpy() - want).max() > worse_than
        assert np.abs(ours - want).max() < 1e-6


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parity_with_diffusers_function_and_module(name):
    """The same numbers as diffusers, up to diffusers' own float32 rounding (its angles
    err by a few float32 ulps of the angle)."""
    torch = pytest.importorskip("torch")
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    from pe_core.layers.torch import Timesteps

    dim, flip, shift, scale, period, t = CONFIGS[name]
    given_t = torch.from_numpy(t.astype(np.float32) if t.dtype.kind == "f" else t)
    theirs = embeddings.get_timestep_embedding(given_t, dim, flip, shift, scale, period)
    ours = timestep_embedding(given_t, dim, **kwargs(CONFIGS[name]))
    bound = 1e-6 + 8 * 2.0**-24 * angles(t, dim, shift, scale, period)
    assert_close(ours, theirs, atol=bound, backend="torch", dtype="float32")
    if period == 10000:  # diffusers' module has no max_period
        module = embeddings.Timesteps(dim, flip, shift, scale)
        layer = Timesteps(dim, flip, shift, scale)
        assert_close(layer(given_t), module(given_t), atol=bound, backend="torch", dtype="float32")
        assert_equal(layer(given_t), ours)
        assert layer.state_dict() == {} and "num_channels" in repr(layer)


def dit_timestep_embedding(t, dim, max_period=10000):
    """facebookresearch/DiT models.py, TimestepEmbedder.timestep_embedding, line by line
    (itself from openai/glide-text2im nn.py)."""
    import torch

    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=t.device)
    args = t[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


@pytest.mark.parametrize("dim", [256, 33])
def test_dit_is_flip_true_shift_0(dim):
    torch = pytest.importorskip("torch")
    t = np.array([0.0, 1.5, 700.0, 999.0], np.float32)
    theirs = dit_timestep_embedding(torch.from_numpy(t), dim)
    ours = timestep_embedding(
        torch.from_numpy(t), dim, flip_sin_to_cos=True, downscale_freq_shift=0
    )
    bound = 1e-6 + 8 * 2.0**-24 * angles(t, dim, 0.0, 1.0, 10000)
    assert_close(ours, theirs, atol=bound, backend="torch", dtype="float32")
    assert_close(ours, truth(t, dim, True, 0.0, 1.0, 10000), atol=1e-6, backend="torch")


def test_musicgen_positions_are_flip_true_shift_1():
    """transformers' MusicGen sinusoidal table is this embedding of 0 .. n-1."""
    pytest.importorskip("torch")
    musicgen = pytest.importorskip("transformers.models.musicgen.modeling_musicgen")
    theirs = musicgen.MusicgenSinusoidalPositionalEmbedding.get_embedding(50, 65).numpy()
    ours = timestep_embedding(np.arange(50), 65, flip_sin_to_cos=True, downscale_freq_shift=1)
    bound = 1e-6 + 8 * 2.0**-24 * angles(np.arange(50), 65, 1.0, 1.0, 10000)
    assert_close(ours, theirs, atol=bound, backend="numpy", dtype="float32")


def test_traced_modes_jax_and_tf():
    t = np.array([0.0, 0.25, 0.999], np.float32)
    kw = dict(flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000.0)
    want = truth(t, 17, True, 0.0, 1000.0, 10000)
    jax = pytest.importorskip("jax")
    got = jax.jit(lambda x: timestep_embedding(x, 17, **kw))(jax.numpy.asarray(t))
    assert_close(got, want, atol=1e-6, backend="jax", dtype="float32")
    tf = pytest.importorskip("tensorflow")
    got = tf.function(lambda x: timestep_embedding(x, 17, **kw))(tf.constant(t))
    assert_close(got, want, atol=1e-6, backend="tensorflow", dtype="float32")


def test_torch_compile_layer_fullgraph():
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import Timesteps

    layer = Timesteps(19, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)
    # dynamo traces the whole call (no graph break, no host read); the "eager" backend
    # skips inductor code generation, which the encode tests cover for this kernel
    compiled = torch.compile(layer, fullgraph=True, backend="eager")
    t = np.array([0.0, 0.3, 0.999], np.float32)
    got = compiled(torch.from_numpy(t))
    assert_close(got, truth(t, 19, True, 0.0, 1000.0, 10000), atol=1e-6, backend="torch")


def test_stays_on_its_backend_and_shape(backend):
    xp = get_namespace(backend)
    t = positions_on(backend, np.arange(6).reshape(2, 3))
    got = timestep_embedding(t, 8)
    assert xp.shape(got) == (2, 3, 8) and xp.dtype_of(got) == "float32"
    assert_close(
        got, truth(np.arange(6).reshape(2, 3), 8, False, 1.0, 1.0, 1e4), atol=1e-6, backend=backend
    )
    assert timestep_embedding(3.0, 5).shape == (5,)
    assert timestep_embedding(np.zeros((0,)), 6).shape == (0, 6)
    assert_close(
        timestep_embedding([1, 2], 6, backend=backend),
        truth(np.array([1, 2]), 6, False, 1.0, 1.0, 1e4),
        atol=1e-6,
        backend=backend,
    )


def test_fast_lane_equals_general_route():
    t = np.array([0, 7, 999])
    for t_in in (t, t[:1], t.astype(np.float32) / 1000):
        fast = timestep_embedding(
            t_in, 31, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000.0
        )
        general = timestep_embedding(
            t_in, 31, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000.0, dtype="float32"
        )
        assert_equal(fast, general)


def test_low_precision_outputs():
    t = np.array([0, 10, 999])
    want = truth(t, 16, True, 0.0, 1.0, 1e4)
    got = timestep_embedding(t, 16, flip_sin_to_cos=True, downscale_freq_shift=0, dtype="float16")
    assert_close(got, want, atol=2.0**-11, dtype="float16")


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0,), ValueError, r"embedding_dim must be an integer >= 2.*Received: 0"),
        ((1,), ValueError, r"embedding_dim must be .*Received: 1"),
        ((8.0,), TypeError, r"embedding_dim must be .*Received: 8.0"),
        ((True,), TypeError, r"embedding_dim must be .*Received: True"),
        ((8, {"flip_sin_to_cos": "yes"}), TypeError, r"flip_sin_to_cos must be a bool.*'yes'"),
        ((8, {"downscale_freq_shift": 4}), ValueError, r"embedding_dim=8 \(// 2 = 4\)"),
        ((9, {"downscale_freq_shift": 4.0}), ValueError, r"downscale_freq_shift=4.0"),
        ((8, {"downscale_freq_shift": math.nan}), ValueError, r"downscale_freq_shift .*nan"),
        ((8, {"scale": math.inf}), ValueError, r"scale must be a finite number.*inf"),
        ((8, {"max_period": 0}), ValueError, r"max_period must be a finite number > 0.*0"),
        ((8, {"max_period": -10.0}), ValueError, r"max_period .*-10.0"),
        ((320, {"downscale_freq_shift": 161}), ValueError, r"2\*\*40 rad.*shift=161"),
        ((8, {"scale": 2.0**41}), ValueError, r"2\*\*40 rad"),
    ],
)
def test_refuses_degenerate_configurations(args, error, match):
    dim, extra = args[0], (args[1] if len(args) > 1 else {})
    with pytest.raises(error, match=match):
        timestep_embedding(np.array([1]), dim, **extra)


def test_refuses_bad_timesteps():
    with pytest.raises(ValueError, match=r"timesteps must be finite; found np.float64\(nan\)"):
        timestep_embedding(np.array([1.0, math.nan]), 8)
    with pytest.raises(ValueError, match=r"timesteps must be finite.*inf"):
        timestep_embedding(np.array([math.inf], np.float32), 8)
    with pytest.raises(TypeError, match="booleans"):
        timestep_embedding([True], 8)
    with pytest.raises(TypeError, match="integer or floating dtypes"):
        timestep_embedding(np.array([1j]), 8)


def test_device_timesteps_give_nan_rows_never_wrong_numbers():
    torch = pytest.importorskip("torch")
    with force_device_path():
        got = timestep_embedding(torch.tensor([1.0, math.nan, math.inf]), 6).numpy()
    assert np.isfinite(got[0]).all() and np.isnan(got[1:, :6]).all()


@given(
    t=st.floats(0.0, 1.0e4, width=32),
    scale=st.sampled_from([1.0, 1000.0, -0.37]),
    shift=st.sampled_from([0.0, 1.0, 0.25]),
)
def test_property_any_float32_timestep(t, scale, shift):
    t32 = np.array([t], np.float32)
    got = timestep_embedding(t32, 8, downscale_freq_shift=shift, scale=scale)
    assert_close(got, truth(t32, 8, False, shift, scale, 1e4), atol=1e-6)


def test_exported_from_the_root():
    assert pe_core.timestep_embedding is timestep_embedding
    assert "timestep_embedding" in pe_core.__all__


def test_large_batches_blocked_pass_matches_exact_route():
    """Large host batches take the blocked float64 pass; the float64 output takes the
    exact kernel (checked against mpmath above): the two agree within 1e-6."""
    rng = np.random.default_rng(0)
    for t in (rng.random(3000).astype(np.float32), rng.integers(0, 1000, 3000)):
        kw = dict(flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000.0)
        fast = timestep_embedding(t, 41, **kw)
        exact = timestep_embedding(t, 41, dtype="float64", **kw)
        assert_close(fast, exact.astype(np.float32), atol=1e-6, dtype="float32")
        assert np.abs(fast - exact).max() < 1e-6


def test_flax_layers_match_and_jit():
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    from pe_core.layers.flax import LinenTimesteps, Timesteps

    t = np.array([0.0, 0.4, 0.999], np.float32)
    want = truth(t, 21, True, 0.0, 1000.0, 10000)
    nnx_layer = Timesteps(21, True, 0, scale=1000)
    linen_layer = LinenTimesteps(21, True, 0, 1000)
    x = jax.numpy.asarray(t)
    assert_close(nnx_layer(x), want, atol=1e-6, backend="jax", dtype="float32")
    assert_close(jax.jit(nnx_layer)(x), want, atol=1e-6, backend="jax", dtype="float32")
    got = jax.jit(lambda v: linen_layer.apply({}, v))(x)
    assert_close(got, want, atol=1e-6, backend="jax", dtype="float32")
    with pytest.raises(ValueError, match="downscale_freq_shift"):
        Timesteps(8, True, 4)
    with pytest.raises(ValueError, match="downscale_freq_shift"):
        LinenTimesteps(8, True, 4)


def test_torch_autograd_through_timesteps():
    """Timesteps that require gradients take the kernel, differentiable in ``t``."""
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.3, 0.71], dtype=torch.float64, requires_grad=True)
    emb = timestep_embedding(t, 8, downscale_freq_shift=0, scale=1000.0, dtype="float64")
    emb.sum().backward()
    w = 1000.0 * np.exp(-math.log(10000) * np.arange(4) / 4)
    theta = t.detach().numpy()[:, None] * w
    want = (w * np.cos(theta) - w * np.sin(theta)).sum(-1)  # d/dt of sin + cos
    assert_close(t.grad, torch.from_numpy(want), atol=1e-9, rtol=1e-12)


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_device_path_reads_nothing_back(name):
    """The device kernel (forced on the CPU) runs under the host-read guard."""
    pytest.importorskip(name)
    from pe_core.host_reads import forbid_host_reads

    t = positions_on(name, np.array([0.25, 3.5, 999.0], np.float32))
    with force_device_path(), forbid_host_reads(name):
        got = timestep_embedding(t, 11, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1e3)
    want = truth(np.array([0.25, 3.5, 999.0], np.float32), 11, True, 0.0, 1e3, 1e4)
    assert_close(got, want, atol=1e-6, backend=name, dtype="float32")


_KERAS_SCRIPT = """
import numpy as np, keras
from pe_core.layers.keras import Timesteps
from pe_core import timestep_embedding
t = np.array([0.0, 0.4, 0.999], np.float32)
layer = Timesteps(21, True, 0, scale=1000)
want = timestep_embedding(t, 21, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000, dtype="float64")
got = keras.ops.convert_to_numpy(layer(keras.ops.convert_to_tensor(t)))
assert got.dtype == np.float32 and np.abs(got - want).max() < 1e-6, np.abs(got - want).max()
inp = keras.Input(shape=(), dtype="float32")
model = keras.Model(inp, Timesteps(21, True, 0, scale=1000)(inp))
got = model.predict(t, verbose=0)
assert np.abs(got - want).max() < 1e-6
clone = Timesteps.from_config(layer.get_config())
assert clone.get_config() == layer.get_config() and not layer.weights
try:
    Timesteps(8, True, 4)
except ValueError as e:
    assert "downscale_freq_shift" in str(e)
else:
    raise AssertionError("no error")
print("keras ok", keras.backend.backend())
"""


def test_keras_layer_in_a_subprocess():
    """Keras picks its backend at import: the layer runs in one subprocess (JAX backend):
    eager, in a functional model, get_config round trip, refusal at construction."""
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-c", _KERAS_SCRIPT],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "keras ok jax" in result.stdout


# -- the matching spec: encode's numbers, bit for bit ------------------------------------

SD = dict(flip_sin_to_cos=True, downscale_freq_shift=0)


@pytest.mark.parametrize(
    ("kw", "preset"),
    [
        (SD, "diffusers_flip_sin_to_cos"),
        (dict(flip_sin_to_cos=True, downscale_freq_shift=1), "musicgen"),
        (dict(downscale_freq_shift=1), "tensor2tensor"),
    ],
)
def test_identical_to_encode_with_the_matching_preset(kw, preset):
    rng = np.random.default_rng(0)
    for t in (np.arange(4096), rng.integers(0, 1000, 64), rng.random(300) * 1000, [2**62, -7]):
        for dim, period in ((320, 10000), (33, 10000), (8, 100.0)):
            spec = pe_core.presets.resolve_spec(preset).replace(base=period)
            for dtype in (None, "float64"):
                got = timestep_embedding(t, dim, max_period=period, dtype=dtype, **kw)
                assert_equal(got, pe_core.encode(t, dim, spec=spec, dtype=dtype))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_identical_to_encode_with_its_spec(backend, name):
    dim, flip, shift, scale, period, t = CONFIGS[name]
    given_t = positions_on(backend, t)
    got = timestep_embedding(given_t, dim, **kwargs(CONFIGS[name]))
    want = pe_core.encode(given_t, dim, spec=timestep_spec(dim, flip, shift, abs(scale), period))
    if scale < 0:
        want = to_numpy(want) * np.where(np.arange(dim) < dim // 2, 1, -1)
    assert_equal(got, want, backend=backend)


def test_every_integer_dtype_and_shape():
    t = np.random.default_rng(2).integers(0, 4096, (2, 3000))
    computed = timestep_embedding(t, 40, **SD)
    for dtype in (np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        assert_equal(timestep_embedding(t.astype(dtype), 40, **SD), computed)
    one = timestep_embedding(int(t[0, 0]), 40, **SD)  # Python int: encode's route for one
    assert np.abs(one - computed[0, 0]).max() < 1e-6
    assert_equal(timestep_embedding(t.tolist(), 40, **SD), computed)  # Python lists
    assert_equal(timestep_embedding(np.array(17), 40, **SD), timestep_embedding([17], 40, **SD)[0])
    some = np.array([0, 1, 999, 4095])
    want = truth(some, 40, True, 0.0, 1.0, 1e4)
    assert np.abs(timestep_embedding(some, 40, **SD) - want).max() < 1e-6
    floats = timestep_embedding(t.astype(np.float32), 40, **SD)
    assert np.abs(floats - computed).max() < 1e-6


def test_returns_each_backends_array(backend):
    t = np.random.default_rng(3).integers(0, 1000, 2048)
    given_t = positions_on(backend, t)
    for _ in range(3):
        got = timestep_embedding(given_t, 24, **SD)
        assert backend_of(got) == backend and get_namespace(backend).dtype_of(got) == "float32"
        assert_close(got, truth(t, 24, True, 0.0, 1.0, 1e4), atol=1e-6, backend=backend)
