"""apply_rope: the RoPE properties on every backend, Hugging Face's formula, compiled code.

References are float64 NumPy restatements written here from the definitions (the
Hugging Face ``q * cos + rotate_half(q) * sin`` formula and the GPT-J interleaved
pairing), independent of pe_core's kernel. Tolerances: float32 results are within
``ATOL32`` of the float64 reference for inputs in ``[-1, 1]`` (angle error ~3e-7 rad plus
a few float32 roundings of the rotation).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from conftest import assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

from pe_core import Spec, relative_matrix
from pe_core.rope import LAYOUTS, apply_rope
from pe_core.rope_layout import rope_permutation
from pe_core.rope_scaling import rope_frequencies
from pe_core_backends import get_namespace

ATOL32 = 2e-6
ATOL64 = 1e-12

# A few shapes, so that the JAX kernel (jitted per shape) compiles only a few times.
SHAPES = [(5, 8), (2, 3, 4), (2, 2, 3, 16), (1, 6)]


# --------------------------------------------------------------------------- references


def inv_freq_default(rotary_dim: int, base: float = 10000.0) -> np.ndarray:
    return 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def hf_rope(
    x: np.ndarray,
    pos: np.ndarray,
    inv_freq: np.ndarray,
    attention_factor: float = 1.0,
    layout: str = "half",
) -> np.ndarray:
    """transformers' apply_rotary_pos_emb (half) / GPT-J's rotate_every_two (interleaved),
    float64, partial rotary as in GPT-NeoX (rotate the first 2*len(inv_freq) features)."""
    x = np.asarray(x, dtype=np.float64)
    r = 2 * len(inv_freq)
    freqs = np.asarray(pos, dtype=np.float64)[..., None] * inv_freq
    rot, rest = x[..., :r], x[..., r:]
    if layout == "half":
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb) * attention_factor, np.sin(emb) * attention_factor
        out = rot * cos + rotate_half(rot) * sin
    else:
        cos = np.repeat(np.cos(freqs), 2, axis=-1) * attention_factor
        sin = np.repeat(np.sin(freqs), 2, axis=-1) * attention_factor
        pairs = rot.reshape(*rot.shape[:-1], r // 2, 2)
        every_two = np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(rot.shape)
        out = rot * cos + every_two * sin
    return np.concatenate([out, rest], axis=-1)


def on(backend: str, x: np.ndarray, dtype: str | None = None):
    """x as a float32 (or ``dtype``) array of ``backend``."""
    xp = get_namespace(backend)
    array = xp.asarray(np.asarray(x, dtype=np.float32))
    return array if dtype is None else xp.astype(array, xp.dtype(dtype))


def llama3_inv_freq(dim, base, factor, low, high, old_context):
    """transformers' _compute_llama3_parameters, restated."""
    inv_freq = inv_freq_default(dim, base)
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


def yarn_inv_freq(dim, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """transformers' _compute_yarn_parameters (truncate=True), restated."""

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos_freqs = base ** (np.arange(0, dim, 2) / dim)
    inv = (1 / (factor * pos_freqs)) * (1 - extrapolation) + (1 / pos_freqs) * extrapolation
    return inv, 0.1 * math.log(factor) + 1.0


# --------------------------------------------------------------------------- strategies


@st.composite
def rope_inputs(draw, shapes=SHAPES):
    shape = draw(st.sampled_from(shapes), label="shape")
    head_dim = shape[-1]
    rotary_dim = draw(st.sampled_from([None, *range(2, head_dim, 2)]), label="rotary_dim")
    layout = draw(st.sampled_from(LAYOUTS), label="layout")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    # positions of shape (seq,) or, with leading axes, per example (lead[0], 1, ..., seq)
    if len(shape) > 2 and draw(st.booleans(), label="per_example"):
        pos_shape = (shape[0],) + (1,) * (len(shape) - 3) + (shape[-2],)
    else:
        pos_shape = (shape[-2],)
    pos = rng.integers(-1000, 100_000, pos_shape)
    return x, pos, layout, rotary_dim


# --------------------------------------------------------------------------- properties


@given(inputs=rope_inputs())
def test_matches_hugging_face_formula(backend, inputs):
    x, pos, layout, rotary_dim = inputs
    r = rotary_dim or x.shape[-1]
    out = apply_rope(on(backend, x), positions_on(backend, pos), layout=layout, rotary_dim=r)
    expected = hf_rope(x, pos, inv_freq_default(r), layout=layout)
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")


@given(inputs=rope_inputs())
def test_keeps_the_norm_of_every_pair(backend, inputs):
    x, pos, layout, _ = inputs
    out = to_numpy(apply_rope(on(backend, x), positions_on(backend, pos), layout=layout))
    perm = rope_permutation(x.shape[-1], layout, "half")  # pair j = features (j, j + d/2)
    h = x.shape[-1] // 2

    def pair_norms(v):
        v = np.asarray(v, np.float64)[..., perm]
        return np.hypot(v[..., :h], v[..., h:])

    assert_close(pair_norms(out), pair_norms(x), atol=ATOL32, rtol=1e-7)


@given(inputs=rope_inputs(), shift=st.integers(-50_000, 50_000))
def test_scores_depend_only_on_the_distance(backend, inputs, shift):
    """<rope(q, m), rope(k, n)> is unchanged when m and n move together."""
    x, pos, layout, rotary_dim = inputs
    k = np.flip(x, axis=-2).copy()
    k_pos = np.flip(pos, axis=-1).copy()
    score = {}
    for t in (0, shift):
        q_rot = apply_rope(
            on(backend, x), positions_on(backend, pos + t), layout=layout, rotary_dim=rotary_dim
        )
        k_rot = apply_rope(
            on(backend, k), positions_on(backend, k_pos + t), layout=layout, rotary_dim=rotary_dim
        )
        score[t] = np.einsum("...id,...jd->...ij", to_numpy(q_rot), to_numpy(k_rot))
    assert_close(score[shift], score[0], atol=2e-5, rtol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_position_zero_is_the_identity(backend, dtype):
    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes or not xp.supports(dtype):
        pytest.skip(f"{backend} has no {dtype} here")
    x = on(backend, np.random.default_rng(1).uniform(-3, 3, (2, 3, 4, 8)), dtype)
    for layout in LAYOUTS:
        out = apply_rope(x, positions_on(backend, np.zeros(4, np.int64)), layout=layout)
        assert xp.dtype_of(out) == dtype
        assert_equal(to_numpy(out), to_numpy(x))


@given(data=st.data())
def test_interleaved_is_x_times_relative_matrix(backend, data):
    """apply_rope(x, p, "interleaved") == x @ M_p == M_(-p) @ x, M_p = relative_matrix(p)."""
    d = data.draw(st.sampled_from([2, 4, 8, 16]), label="d")
    p = data.draw(st.integers(-100_000, 100_000), label="p")
    x = np.random.default_rng(data.draw(st.integers(0, 99), label="seed")).uniform(-1, 1, d)
    spec = Spec(frequencies=tuple(inv_freq_default(d)), layout="interleaved")
    matrix = relative_matrix(p, d, spec, dtype="float64")
    out = apply_rope(on(backend, x), p, layout="interleaved")
    assert_close(out, x.astype(np.float32) @ matrix, atol=ATOL32, backend=backend)
    back = relative_matrix(-p, d, spec, dtype="float64")
    assert_close(out, back @ x.astype(np.float32), atol=ATOL32)


@given(inputs=rope_inputs())
def test_layouts_agree_through_rope_permutation(backend, inputs):
    x, pos, _, rotary_dim = inputs
    d = x.shape[-1]
    perm = rope_permutation(d, "interleaved", "half", rotary_dim=rotary_dim)
    p = positions_on(backend, pos)
    inter = to_numpy(apply_rope(on(backend, x), p, layout="interleaved", rotary_dim=rotary_dim))
    half = to_numpy(apply_rope(on(backend, x[..., perm]), p, layout="half", rotary_dim=rotary_dim))
    assert_close(half, inter[..., perm], atol=ATOL32, rtol=1e-7)


@given(inputs=rope_inputs(shapes=[(3, 8), (2, 2, 5, 12)]))
def test_partial_rotary_passes_the_rest_through(backend, inputs):
    x, pos, layout, rotary_dim = inputs
    r = rotary_dim or 2
    out = to_numpy(
        apply_rope(on(backend, x), positions_on(backend, pos), layout=layout, rotary_dim=r)
    )
    assert_equal(out[..., r:], x[..., r:])
    full = to_numpy(apply_rope(on(backend, x[..., :r]), positions_on(backend, pos), layout=layout))
    assert_close(out[..., :r], full, atol=1e-7, rtol=1e-7)


def test_per_example_positions_equal_separate_calls(backend):
    """Packed sequences / KV-cache decoding: each example has its own offset."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (3, 2, 5, 8)).astype(np.float32)  # (batch, heads, seq, head_dim)
    offsets = np.array([0, 17, 40_000])
    pos = offsets[:, None, None] + np.arange(5)  # (batch, 1, seq)
    for layout in LAYOUTS:
        together = to_numpy(apply_rope(on(backend, x), positions_on(backend, pos), layout=layout))
        for b in range(3):
            alone = apply_rope(on(backend, x[b]), positions_on(backend, pos[b, 0]), layout=layout)
            assert_equal(together[b], to_numpy(alone))
    # decoding: one new token per example at its own position
    step = to_numpy(
        apply_rope(on(backend, x[:, :, :1]), positions_on(backend, offsets[:, None, None]))
    )
    expected = hf_rope(x[:, :, :1], offsets[:, None, None], inv_freq_default(8))
    assert_close(step, expected, atol=ATOL32, rtol=1e-7)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_input_rotated_in_float32(backend, dtype):
    """bf16/f16 x: output in x's dtype, within one ulp of the exact rotation of x."""
    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes:
        pytest.skip(f"{backend} has no {dtype}")
    rng = np.random.default_rng(5)
    x = on(backend, rng.uniform(-4, 4, (2, 3, 6, 16)), dtype)
    pos = np.array([0, 1, 1000, 4095, 65_537, 2**20])
    for layout in LAYOUTS:
        out = apply_rope(x, positions_on(backend, pos), layout=layout)
        assert xp.dtype_of(out) == dtype
        exact = hf_rope(to_numpy(x), pos, inv_freq_default(16), layout=layout)
        mantissa = {"float16": 10, "bfloat16": 7}[dtype]
        ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-14))) - mantissa)
        err = np.abs(to_numpy(out) - exact)
        assert np.all(err <= ulp), float(np.max(err / ulp))


def test_exact_at_position_2_pow_24(backend):
    """Against mpmath: the angle pos * w is never formed in float32."""
    d = 16
    pos = np.array([2**24, 2**24 - 1, 10**7 + 3, 123_456_789 % 2**24])
    inv_freq = inv_freq_default(d)
    x = np.random.default_rng(2).uniform(-1, 1, (4, d)).astype(np.float32)
    expected = np.empty((4, d))
    with mpmath.workdps(40):
        for i, p in enumerate(pos):
            for j, w in enumerate(inv_freq):
                angle = mpmath.mpf(int(p)) * mpmath.mpf(float(w))
                c, s = float(mpmath.cos(angle)), float(mpmath.sin(angle))
                a, b = float(x[i, j]), float(x[i, j + d // 2])
                expected[i, j], expected[i, j + d // 2] = a * c - b * s, b * c + a * s
    out = apply_rope(on(backend, x), positions_on(backend, pos))
    assert_close(out, expected, atol=ATOL32, backend=backend)


def test_float64_input(backend):
    xp = get_namespace(backend)
    if not xp.supports("float64"):
        pytest.skip("JAX without x64")
    x = np.random.default_rng(4).uniform(-1, 1, (3, 7, 8))
    pos = np.array([0, 5, 99, 1234, 40_000, 77_777, 2**20])
    for layout in LAYOUTS:
        out = apply_rope(xp.asarray(x), positions_on(backend, pos), layout=layout)
        expected = hf_rope(x, pos, inv_freq_default(8), layout=layout)
        assert_close(out, expected, atol=ATOL64, rtol=1e-12, backend=backend, dtype="float64")


# --------------------------------------------------------------------------- scaling


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize("scaling", ["llama3", "yarn"])
def test_scaling_matches_hugging_face(backend, scaling):
    d, base = 32, 500_000.0
    pos = np.array([0, 3, 63, 64, 200, 4095, 9_999])
    x = np.random.default_rng(6).uniform(-1, 1, (2, len(pos), d)).astype(np.float32)
    if scaling == "llama3":
        inv, factor = llama3_inv_freq(d, base, 8.0, 1.0, 4.0, 64), 1.0
        config = LLAMA3
    else:
        inv, factor = yarn_inv_freq(d, base, 4.0, 64)
        config = YARN
    expected = hf_rope(x, pos, inv, factor)
    out = apply_rope(on(backend, x), positions_on(backend, pos), base=base, scaling=config)
    assert_close(out, expected, atol=3 * ATOL32, backend=backend)
    # the same through a whole config.json (legacy rope_scaling form)
    model = {
        "hidden_size": 4 * d,
        "num_attention_heads": 4,
        "rope_theta": base,
        "max_position_embeddings": 4096,
        "rope_scaling": config,
    }
    again = apply_rope(on(backend, x), positions_on(backend, pos), scaling=model)
    assert_equal(to_numpy(again), to_numpy(out))


def test_scaling_partial_rotary_and_dynamic():
    x = np.random.default_rng(8).uniform(-1, 1, (5, 16)).astype(np.float32)
    # partial_rotary_factor inside a whole config = rotary_dim
    config = {"head_dim": 16, "partial_rotary_factor": 0.5, "rope_theta": 10000.0}
    out = apply_rope(x, np.arange(5), scaling=config)
    assert_equal(out, apply_rope(x, np.arange(5), rotary_dim=8))
    # dynamic NTK: frequencies from seq_len = max(pos) + 1, without state
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 64}
    for pos in (np.arange(5), np.arange(95, 100), np.arange(5)):
        inv, _ = rope_frequencies(
            {"head_dim": 16, "max_position_embeddings": 64, "rope_parameters": dynamic},
            seq_len=int(pos.max()) + 1,
        )
        got = apply_rope(x, pos, scaling=dynamic)
        assert_close(got, hf_rope(x, pos, inv), atol=ATOL32, rtol=1e-7)
    short = apply_rope(x, np.arange(5), scaling=dynamic)
    assert_close(short, apply_rope(x, np.arange(5)), atol=1e-7, rtol=1e-7)


# --------------------------------------------------------------------------- compiled code


def expected_default(x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return hf_rope(x, pos, inv_freq_default(x.shape[-1]))


def test_torch_compile_fullgraph_no_recompile():
    torch = pytest.importorskip("torch")
    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    x = np.random.default_rng(9).uniform(-1, 1, (2, 6, 8)).astype(np.float32)

    def f(x, p):
        return apply_rope(x, p), apply_rope(x, p, layout="interleaved", scaling=YARN)

    compiled = torch.compile(f, backend=counting_backend, fullgraph=True)
    for offset in (0, 5, 123_456, 2**23):
        p = offset + torch.arange(6)
        half, inter = compiled(torch.from_numpy(x), p)
        assert_close(half, expected_default(x, offset + np.arange(6)), atol=ATOL32)
        inv, factor = yarn_inv_freq(8, 10000.0, 4.0, 64)
        expected = hf_rope(x, offset + np.arange(6), inv, factor, layout="interleaved")
        assert_close(inter, expected, atol=3 * ATOL32, backend="torch")
    assert len(compiles) == 1


def test_torch_compile_inductor_bfloat16():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(np.random.default_rng(10).uniform(-2, 2, (3, 4, 8)).astype(np.float32))
    x = x.to(torch.bfloat16)
    p = torch.arange(2**20, 2**20 + 4)
    out = torch.compile(lambda x, p: apply_rope(x, p), fullgraph=True)(x, p)
    assert out.dtype == torch.bfloat16
    eager = apply_rope(x, p)
    assert float((out.float() - eager.float()).abs().max()) <= 2**-6


def test_jax_jit_traces_once():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []
    x = np.random.default_rng(11).uniform(-1, 1, (2, 6, 8)).astype(np.float32)

    @jax.jit
    def f(x, p):
        traces.append(1)
        return apply_rope(x, p, layout="interleaved")

    for offset in (0, 5, 123_456, 2**23):
        p = offset + jnp.arange(6, dtype=jnp.int32)
        expected = hf_rope(x, offset + np.arange(6), inv_freq_default(8), layout="interleaved")
        assert_close(f(jnp.asarray(x), p), expected, atol=ATOL32, backend="jax")
    assert len(traces) == 1


def test_tf_function_traces_once():
    tf = pytest.importorskip("tensorflow")
    traces = []
    x = np.random.default_rng(12).uniform(-1, 1, (6, 8)).astype(np.float32)

    @tf.function(jit_compile=True)
    def f(x, p):
        traces.append(1)
        return apply_rope(x, p)

    for offset in (0, 123_456, 2**23):
        out = f(tf.constant(x), offset + tf.range(6))
        assert_close(out, expected_default(x, offset + np.arange(6)), atol=ATOL32)
    assert len(traces) == 1


def test_torch_autograd_is_the_inverse_rotation():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    x = torch.tensor(rng.uniform(-1, 1, (3, 8)), dtype=torch.float32, requires_grad=True)
    g = torch.tensor(rng.uniform(-1, 1, (3, 8)), dtype=torch.float32)
    pos = torch.tensor([0, 7, 300])
    (apply_rope(x, pos) * g).sum().backward()
    assert_close(x.grad, to_numpy(apply_rope(g, -pos)), atol=1e-6)


def test_torch_blocked_path_matches_generic(monkeypatch):
    """Large bf16 tensors go through the blocked CPU path (here with small blocks)."""
    torch = pytest.importorskip("torch")
    from pe_core_backends import _torch_rope

    monkeypatch.setattr(_torch_rope, "_TORCH_BLOCK", 2**14)
    blocks = []
    real_block = _torch_rope._rotate_block
    monkeypatch.setattr(
        _torch_rope, "_rotate_block", lambda x, *a: blocks.append(x.numel()) or real_block(x, *a)
    )
    rng = np.random.default_rng(14)
    cases = [
        ((1, 3, 1000, 128), np.arange(1000) + 77, None),
        ((2, 3, 700, 64), rng.integers(0, 10**6, (2, 1, 700)), 48),  # ragged last block
        ((64, 8, 1, 128), rng.integers(0, 10**6, (64, 1, 1)), None),  # decoding: one pass
    ]
    for shape, pos, rotary_dim in cases:
        x32 = rng.uniform(-2, 2, shape).astype(np.float32)
        x = torch.from_numpy(x32).to(torch.bfloat16)
        for layout in LAYOUTS:
            out = apply_rope(x, torch.from_numpy(pos), layout=layout, rotary_dim=rotary_dim)
            r = rotary_dim or shape[-1]
            exact = hf_rope(x.float().numpy(), pos, inv_freq_default(r), layout=layout)
            err = np.abs(out.float().numpy() - exact)
            ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-14))) - 7)
            assert np.all(err <= ulp)
            assert_equal(out[..., r:].float().numpy(), x[..., r:].float().numpy())
    assert any(n <= 2**14 for n in blocks)  # the small blocks were taken


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("shape", "kwargs", "error", "match"),
    [
        ((3, 7), {}, ValueError, r"head_dim \(the last axis of x\) must be even and >= 2.*7"),
        (
            (3, 8),
            {"rotary_dim": 3},
            ValueError,
            r"rotary_dim must be even and in \[2, head_dim=8\]",
        ),
        ((3, 8), {"rotary_dim": 10}, ValueError, r"Received: 10"),
        ((3, 8), {"rotary_dim": 0}, ValueError, r"rotary_dim must be even"),
        ((3, 8), {"rotary_dim": 4.0}, TypeError, r"rotary_dim must be an integer"),
        (
            (3, 8),
            {"layout": "neox"},
            ValueError,
            r"Unknown layout 'neox'. Expected one of: half, interleaved",
        ),
        ((3, 8), {"base": 1.0}, ValueError, r"base \(rope_theta\) must be a finite number > 1"),
        ((3, 8), {"scaling": "yarn"}, TypeError, r"scaling must be a mapping"),
        ((3, 8), {"scaling": {"rope_type": "ntk"}}, ValueError, r"Unknown rope_type 'ntk'"),
        (
            (3, 8),
            {"scaling": {"rope_type": "linear"}},
            ValueError,
            r"rope_type 'linear' requires the key 'factor'",
        ),
        (
            (3, 8),
            {"scaling": {"rope_type": "dynamic", "factor": 2.0}},
            ValueError,
            r"'max_position_embeddings'",
        ),
        (
            (3, 8),
            {"scaling": {"head_dim": 16}},
            ValueError,
            r"rotary dimension of 16, larger than head_dim=8",
        ),
        (
            (3, 8),
            {"scaling": {"head_dim": 8}, "rotary_dim": 4},
            ValueError,
            r"rotary dimension of 8 .* rotary_dim=4",
        ),
    ],
)
def test_bad_arguments(shape, kwargs, error, match):
    with pytest.raises(error, match=match):
        apply_rope(np.zeros(shape, np.float32), np.arange(3), **kwargs)


def test_positions_that_do_not_broadcast_name_both_shapes(backend):
    x = on(backend, np.zeros((2, 4, 5, 8)))
    message = r"pos of shape \(4,\) does not broadcast against x.shape\[:-1\] = \(2, 4, 5\)"
    with pytest.raises(ValueError, match=message):
        apply_rope(x, positions_on(backend, np.arange(4)))
    with pytest.raises(ValueError, match=r"pos of shape \(3, 1, 5\) does not broadcast"):
        apply_rope(x, positions_on(backend, np.zeros((3, 1, 5), np.int64)))
    with pytest.raises(ValueError, match=r"pos of shape \(1, 2, 4, 5\) does not broadcast"):
        apply_rope(x, positions_on(backend, np.zeros((1, 2, 4, 5), np.int64)))


def test_other_bad_input():
    with pytest.raises(TypeError, match="x must be a floating array"):
        apply_rope(np.zeros((2, 4), np.int32), [0, 1])
    with pytest.raises(ValueError, match="x must have at least one axis"):
        apply_rope(np.float32(1.0), 0)
    with pytest.raises(
        ValueError, match=r"pos must be finite; found np.float64\(nan\) at index \(1,\)"
    ):
        apply_rope(np.zeros((2, 4), np.float32), [0.0, float("nan")])
    with pytest.raises(TypeError, match="pos must be integers or floats, not booleans"):
        apply_rope(np.zeros((2, 4), np.float32), [True, False])


def test_dynamic_scaling_needs_known_positions():
    jax = pytest.importorskip("jax")
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8}
    f = jax.jit(lambda x, p: apply_rope(x, p, scaling=dynamic))
    with pytest.raises(ValueError, match=r"rope_type 'dynamic' .* seq_len = max\(pos\) \+ 1"):
        f(np.zeros((3, 4), np.float32), np.arange(3))
