"""Rotary variants of published models: rotary on the last features (DeepSeek-V4),
PhiMoE's ``short_mscale``/``long_mscale``, a rotate-half per axis (Gemma 4 vision,
Allegro), V-JEPA 2's rotary and Llama 4's attention temperature scales.

Each is checked against a float64 reference written here from the definition, on every
backend, on the host and the device route, eager and traced; and against the installed
peer's own code (transformers, diffusers) with tiny random configs, within that code's
float32 arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, positions_on

import pe_core
from pe_core import RopeSpec, apply_rope
from pe_core.rope_layout import LAYOUTS
from pe_core.rope_variants import llama4_attention_scales, vjepa2_rope
from pe_core_backends import force_device_path, get_namespace

ATOL32 = 3e-6


def on(backend, x):
    return get_namespace(backend).asarray(np.asarray(x, dtype=np.float32))


def inv_freq(dim, base=10000.0):
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def rope64(x, theta, layout):
    """float64 RoPE of all of ``x``'s features by angles ``theta`` (``(..., r/2)``)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1] // 2
    cos, sin = np.cos(theta), np.sin(theta)
    if layout == "half":
        a, b = x[..., :n], x[..., n:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)


# --------------------------------------------------------------------------- last features


def last_reference(x, pos, rotary_dim, layout, base=10000.0):
    x = np.asarray(x, dtype=np.float64)
    theta = np.asarray(pos, dtype=np.float64)[..., None] * inv_freq(rotary_dim, base)
    start = x.shape[-1] - rotary_dim
    return np.concatenate([x[..., :start], rope64(x[..., start:], theta, layout)], axis=-1)


@pytest.mark.parametrize(
    ("layout", "rotary_dim"), [*((layout, 4) for layout in LAYOUTS), ("half", 16)]
)
def test_last_features_match_the_float64_reference(backend, layout, rotary_dim):
    rng = np.random.default_rng(rotary_dim)
    x = rng.uniform(-1, 1, (2, 3, 5, 16)).astype(np.float32)
    pos = rng.integers(-1000, 100_000, (2, 1, 5))
    want = last_reference(x, pos, rotary_dim, layout)
    kwargs = {"layout": layout, "rotary_dim": rotary_dim, "rotary_features": "last"}
    out = apply_rope(on(backend, x), positions_on(backend, pos), **kwargs)
    assert_close(out, want, atol=ATOL32, backend=backend, dtype="float32")
    with force_device_path():  # the exact kernel where the positions live
        out = apply_rope(on(backend, x), positions_on(backend, pos.astype(np.int32)), **kwargs)
    assert_close(out, want, atol=ATOL32, backend=backend, dtype="float32")
    spec = RopeSpec(layout=layout, rotary_dim=rotary_dim, rotary_features="last")
    q, k = apply_rope(
        (on(backend, x), on(backend, x[:, :1])), positions_on(backend, pos), spec=spec
    )
    assert_close(q, want, atol=ATOL32, backend=backend, dtype="float32")
    assert_close(k, want[:, :1], atol=ATOL32, backend=backend, dtype="float32")


def test_last_features_match_transformers_deepseek_v4():
    """transformers' ``DeepseekV4RotaryEmbedding`` (both rope types of the config) and
    ``apply_rotary_pos_emb`` (interleaved pairs on the trailing ``rope_head_dim``)."""
    torch = pytest.importorskip("torch")
    v4 = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
    from transformers import DeepseekV4Config

    config = DeepseekV4Config(
        hidden_size=32,
        num_attention_heads=2,
        head_dim=16,
        qk_rope_head_dim=8,
        num_hidden_layers=1,
        vocab_size=8,
    )
    rotary = v4.DeepseekV4RotaryEmbedding(config)
    x = torch.randn(2, 2, 5, 16, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(5)[None].expand(2, 5) + torch.tensor([[3], [900]])
    for layer_type in ("main", "compress"):
        cos, sin = rotary(x, pos, layer_type=layer_type)
        want = v4.apply_rotary_pos_emb(x, cos, sin)
        got = apply_rope(
            x,
            pos[:, None],
            scaling=config.to_dict(),
            layer_type=layer_type,
            layout="interleaved",
            rotary_features="last",
        )
        assert_close(got, want, atol=2e-6 * 900, backend="torch")
        assert_close(got[..., :8], x[..., :8].numpy(), atol=0)  # the nope features


def test_last_features_refuse_bad_input():
    x = np.ones((3, 8), np.float32)
    with pytest.raises(ValueError, match=r"rotary_features.*'tail'"):
        apply_rope(x, range(3), rotary_features="tail")
    with pytest.raises(ValueError, match="rotary_features="):
        apply_rope(x, range(3), rotary_features="last", spec=RopeSpec())
    with pytest.raises(ValueError, match="rotary_features"):
        RopeSpec(rotary_features="middle")
    with pytest.raises(ValueError, match="1-D RoPE only"):
        apply_rope(x, np.zeros((3, 2)), sections=(1, 1), rotary_features="last")
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        apply_rope(x, range(3), rotary_dim=3, rotary_features="last")


# --------------------------------------------------------------------------- PhiMoE mscale

SHORT, LONG = [1.0, 1.5, 2.0, 3.0], [2.0, 3.0, 5.0, 7.0]


def phimoe_config():
    transformers = pytest.importorskip("transformers")
    params = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": SHORT,
        "long_factor": LONG,
        "short_mscale": 1.1,
        "long_mscale": 1.3,
        "original_max_position_embeddings": 8,
    }
    return transformers.PhimoeConfig(
        hidden_size=16,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=8,
        max_position_embeddings=32,
        rope_parameters=params,
    )


@pytest.mark.parametrize("seq", [6, 8, 20])
def test_phimoe_mscale_matches_the_float64_reference(backend, seq):
    config = {
        "head_dim": 8,
        "max_position_embeddings": 32,
        "rope_parameters": {
            "rope_type": "longrope",
            "short_factor": SHORT,
            "long_factor": LONG,
            "short_mscale": 1.1,
            "long_mscale": 1.3,
            "original_max_position_embeddings": 8,
        },
    }
    long = seq > 8
    factors, mscale = (np.array(LONG), 1.3) if long else (np.array(SHORT), 1.1)
    w = 1.0 / (factors * 10000.0 ** (np.arange(0, 8, 2) / 8))
    x = np.random.default_rng(seq).uniform(-1, 1, (2, seq, 8)).astype(np.float32)
    want = mscale * rope64(x, np.arange(seq)[:, None] * w, "half")
    out = apply_rope(on(backend, x), range(seq), scaling=config)
    assert_close(out, want, atol=ATOL32, backend=backend, dtype="float32")
    assert pe_core.rope_frequencies(config, seq_len=seq)[1] == mscale


def test_phimoe_mscale_matches_transformers():
    """transformers' ``PhimoeRotaryEmbedding`` within the original context (its short
    factors and ``short_mscale``); beyond it, its scale ``long_mscale`` with the long
    factors of transformers' ``_compute_longrope_parameters(seq_len=...)``."""
    torch = pytest.importorskip("torch")
    phimoe = pytest.importorskip("transformers.models.phimoe.modeling_phimoe")
    from transformers.modeling_rope_utils import _compute_longrope_parameters

    config = phimoe_config()
    rotary = phimoe.PhimoeRotaryEmbedding(config)
    g = torch.Generator().manual_seed(1)
    for seq in (5, 8):
        pos = torch.arange(seq)[None]
        x = torch.randn(1, 2, seq, 8, generator=g)
        cos, sin = rotary(x, pos)
        want, _ = phimoe.apply_rotary_pos_emb(x, x, cos, sin)
        got = apply_rope(x, pos[:, None], scaling=config.to_dict())
        assert_close(got, want, atol=1e-6, backend="torch")
    seq = 20
    pos = torch.arange(seq)[None]
    x = torch.randn(1, 2, seq, 8, generator=g)
    cos, _ = rotary(x, pos)
    assert_close(cos[0, 0], torch.full((8,), 1.3), atol=1e-6)  # position 0: the scale
    long_freq, _ = _compute_longrope_parameters(config, seq_len=seq)
    freqs = pos[0, :, None].double() * long_freq.double()
    emb = torch.cat([freqs, freqs], dim=-1)
    want = ((x * emb.cos() + phimoe.rotate_half(x) * emb.sin()) * 1.3).numpy()
    got = apply_rope(x, pos[:, None], scaling=config.to_dict())
    assert_close(got, want, atol=1e-5, backend="torch")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"short_mscale": 1.1}, "long_mscale is missing"),
        ({"long_mscale": 1.1}, "short_mscale is missing"),
        ({"short_mscale": 1.1, "long_mscale": 1.2, "attention_factor": 1.0}, "not both"),
        ({"short_mscale": "big", "long_mscale": 1.2}, "short_mscale.*'big'"),
        ({"short_mscale": 1.0, "long_mscale": 0.0}, "long_mscale.*> 0"),
    ],
)
def test_phimoe_mscale_refuses_bad_values(extra, match):
    params = {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, **extra}
    config = {"head_dim": 8, "max_position_embeddings": 32, "rope_parameters": params}
    params["original_max_position_embeddings"] = 8
    with pytest.raises(ValueError, match=match):
        pe_core.rope_frequencies(config)


# --------------------------------------------------------------------------- rotate-half per axis


def test_blocks_match_diffusers_allegro():
    torch = pytest.importorskip("torch")
    emb = pytest.importorskip("diffusers.models.embeddings")
    t_, h_, w_, dim = 3, 4, 5, 24
    ft, fh, fw, *_ = emb.get_3d_rotary_pos_embed_allegro(dim, ((0, 0), (h_, w_)), (h_, w_), t_)
    grids = torch.meshgrid(torch.arange(t_), torch.arange(h_), torch.arange(w_), indexing="ij")
    positions = tuple(g.reshape(1, -1) for g in grids)
    x = torch.randn(1, 2, t_ * h_ * w_, dim, generator=torch.Generator().manual_seed(2))
    want = emb.apply_rotary_emb_allegro(x, (ft, fh, fw), positions)
    pos = torch.stack([p[0] for p in positions], dim=-1)
    got = apply_rope(x, pos, sections=(4, 4, 4), section_layout="blocks", frequencies="per_axis")
    assert_close(got, want, atol=1e-6, backend="torch")


def test_blocks_match_transformers_gemma4_vision():
    torch = pytest.importorskip("torch")
    gemma4 = pytest.importorskip("transformers.models.gemma4.modeling_gemma4")
    from transformers import Gemma4VisionConfig

    config = Gemma4VisionConfig(
        hidden_size=32, num_attention_heads=2, head_dim=16, num_hidden_layers=1, intermediate_size=8
    )
    rotary = gemma4.Gemma4VisionRotaryEmbedding(config)
    grid = torch.meshgrid(torch.arange(3) + 40, torch.arange(5), indexing="ij")
    pos = torch.stack(grid, dim=-1).reshape(1, -1, 2)
    x = torch.randn(1, 15, 2, 16, generator=torch.Generator().manual_seed(3))  # (b, seq, heads, d)
    cos, sin = rotary(x, pos)
    want = gemma4.apply_multidimensional_rope(x, cos, sin, pos)
    theta = config.rope_parameters["rope_theta"]
    got = apply_rope(
        x,
        pos[:, :, None],
        sections=(4, 4),
        section_layout="blocks",
        frequencies="per_axis",
        base=theta,
    )
    assert_close(got, want, atol=1e-5, backend="torch")


def test_musicflamingo_time_rotary_is_two_axis_rope():
    """transformers' ``MusicFlamingoRotaryEmbedding`` + ``apply_rotary_time_emb``: 2-D
    axial RoPE (one schedule over r, interleaved pairs) at the positions
    ``-2 pi tau * round(tau_0 / W) / M`` (window) and ``-2 pi tau * 2 pi t / M`` (time)."""
    torch = pytest.importorskip("torch")
    mf = pytest.importorskip("transformers.models.musicflamingo.modeling_musicflamingo")
    from transformers import MusicFlamingoConfig

    tiny = {"hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 8}
    config = MusicFlamingoConfig(
        audio_config={"model_type": None, **tiny, "hidden_size": 40, "num_hidden_layers": 1},
        text_config={"model_type": "qwen2", **tiny, "num_hidden_layers": 1, "vocab_size": 8},
    )
    rotary = mf.MusicFlamingoRotaryEmbedding(config)
    seq, windows, step = 6, 3, config.audio_frame_step * 4
    tau = (torch.arange(windows)[:, None] * seq + torch.arange(seq)[None]) * step
    cos, sin = rotary(tau, seq_len=seq)
    x = torch.randn(windows, seq, 40, generator=torch.Generator().manual_seed(8))
    want = mf.apply_rotary_time_emb(x, cos, sin)
    m, tau = config.max_position_embeddings, tau.double().numpy()
    window = np.round(tau[:, :1] / (step * seq)) / m
    time = 2 * np.pi * np.arange(seq) / m
    pos = np.stack([-2 * np.pi * tau * window, -2 * np.pi * tau * time], axis=-1)
    r = int(config.head_dim * config.rope_parameters["partial_rotary_factor"])
    got = apply_rope(
        x,
        torch.from_numpy(pos),
        sections=(r // 2, r // 2),
        frequencies="per_axis",
        layout="interleaved",
        rotary_dim=2 * r,
        base=config.rope_parameters["rope_theta"],
    )
    assert_close(got, want, atol=1e-6, backend="torch")


# --------------------------------------------------------------------------- V-JEPA 2


def vjepa2_reference(x, pos, axes=3, base=10000.0):
    """float64 restatement of transformers' ``vjepa2`` ``rotate_queries_or_keys`` on each
    axis's block (``apply_rotary_embeddings``)."""
    x = np.asarray(x, dtype=np.float64)
    d = 2 * ((x.shape[-1] // axes) // 2)
    omega = 1.0 / base ** (np.arange(d // 2) / (d / 2.0))
    parts = []
    for a in range(axes):
        block = x[..., a * d : (a + 1) * d]
        freq = np.asarray(pos, dtype=np.float64)[..., a, None] * omega
        emb_sin, emb_cos = np.tile(np.sin(freq), 2), np.tile(np.cos(freq), 2)
        y1, y2 = block[..., 0::2], block[..., 1::2]
        turned = np.stack([-y2, y1], axis=-1).reshape(block.shape)
        parts.append(block * emb_cos + turned * emb_sin)
    parts.append(x[..., axes * d :])
    return np.concatenate(parts, axis=-1)


def test_vjepa2_matches_the_float64_reference(backend, head_dim=20):
    rng = np.random.default_rng(head_dim)
    x = rng.uniform(-1, 1, (2, 2, 6, head_dim)).astype(np.float32)
    pos = rng.integers(0, 5000, (2, 1, 6, 3))
    want = vjepa2_reference(x, pos)
    out = vjepa2_rope(on(backend, x), positions_on(backend, pos))
    assert_close(out, want, atol=ATOL32, backend=backend, dtype="float32")
    with force_device_path():
        out = vjepa2_rope(on(backend, x), positions_on(backend, pos.astype(np.int32)))
    assert_close(out, want, atol=ATOL32, backend=backend, dtype="float32")
    one = vjepa2_rope(on(backend, x), positions_on(backend, pos[..., :1]), axes=1)
    assert_close(one, vjepa2_reference(x, pos[..., :1], axes=1), atol=ATOL32, backend=backend)


def test_vjepa2_is_not_a_rotation():
    """Pairs (2m, 2m + 1) take the angles of pairs 2m and 2m + 1: norms change."""
    x = np.ones((1, 8), np.float32)
    y = vjepa2_rope(x, [[3]], axes=1)
    assert not np.allclose(np.hypot(y[0, 0::2], y[0, 1::2]), np.sqrt(2.0))
    assert np.allclose(y, vjepa2_reference(x, [[3]], axes=1), atol=1e-6)


def test_vjepa2_matches_transformers():
    torch = pytest.importorskip("torch")
    vjepa2 = pytest.importorskip("transformers.models.vjepa2.modeling_vjepa2")
    from transformers import VJEPA2Config

    config = VJEPA2Config(
        crop_size=32, patch_size=16, frames_per_clip=4, tubelet_size=2, hidden_size=40
    )
    attention = vjepa2.VJEPA2RopeAttention(config, hidden_size=40, num_attention_heads=2)
    g = torch.Generator().manual_seed(4)
    ids = attention.get_position_ids(torch.zeros(2, 8, 40))
    qk = torch.randn(2, 2, 8, 20, generator=g)
    want = attention.apply_rotary_embeddings(qk, ids)
    assert_close(vjepa2_rope(qk, torch.stack(ids, dim=-1)), want, atol=1e-6, backend="torch")
    masks = torch.tensor([[0, 3, 5, 7], [1, 2, 4, 6]])  # the predictor's masked tokens
    ids = attention.get_position_ids(torch.zeros(2, 4, 40), masks=masks)
    qk = torch.randn(2, 2, 4, 20, generator=g)
    want = attention.apply_rotary_embeddings(qk, ids)
    assert_close(vjepa2_rope(qk, torch.stack(ids, dim=-1)), want, atol=1e-6, backend="torch")


def test_vjepa2_refuses_bad_input():
    with pytest.raises(ValueError, match="head_dim=4"):
        vjepa2_rope(np.ones((2, 4), np.float32), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        vjepa2_rope(np.ones((2, 12), np.float32), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="axes must be an integer >= 1"):
        vjepa2_rope(np.ones((2, 12), np.float32), np.zeros((2, 3)), axes=0)
    with pytest.raises(TypeError, match="floating"):
        vjepa2_rope(np.ones((2, 12), np.int32), np.zeros((2, 3)))


# --------------------------------------------------------------------------- Llama 4


def llama4_reference(positions, floor_scale, attn_scale):
    return np.array(
        [math.log1p((int(p) + 1) // floor_scale) * attn_scale + 1.0 for p in np.ravel(positions)]
    ).reshape(np.shape(positions))


def test_llama4_scales_match_the_reference(backend):
    pos = np.array([[0, 1, 8190, 8191], [8192, 3 * 8192 - 1, 10**6, 2**31 - 1]])
    want = llama4_reference(pos, 8192, 0.1)
    host = llama4_attention_scales(pos, dtype="float64")
    assert_close(host, want, atol=0, rtol=0)
    out = llama4_attention_scales(positions_on(backend, pos))  # where the positions live
    assert_close(out, want, atol=0, rtol=2e-7, backend=backend, dtype="float32")
    moved = llama4_attention_scales(
        range(5000, 5010), floor_scale=3, attn_scale=-0.5, backend=backend
    )
    want = llama4_reference(np.arange(5000, 5010), 3, -0.5)
    assert_close(moved, want, atol=0, rtol=2e-7, backend=backend, dtype="float32")


def test_llama4_scales_match_transformers_code():
    """Restated from transformers' ``Llama4TextAttention.forward`` (float32):
    ``log1p(floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0``."""
    torch = pytest.importorskip("torch")
    for floor_scale, attn_scale, past in ((8192, 0.1, 0), (8192, 0.1, 100_000), (7, 0.3, 50)):
        positions = torch.arange(64) + past
        want = torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0
        got = llama4_attention_scales(positions, floor_scale=floor_scale, attn_scale=attn_scale)
        assert_close(got, want, atol=1e-6, backend="torch")


def test_llama4_scales_refuse_bad_input():
    with pytest.raises(ValueError, match="min\\(positions\\) = -1"):
        llama4_attention_scales([-1, 0])
    with pytest.raises(ValueError, match="integers"):
        llama4_attention_scales([0.5])
    with pytest.raises(ValueError, match="floor_scale must be an integer >= 1"):
        llama4_attention_scales([0], floor_scale=0)
    with pytest.raises(ValueError, match="attn_scale"):
        llama4_attention_scales([0], attn_scale=float("nan"))
    with pytest.raises(ValueError, match="'float16'"):
        llama4_attention_scales([0], dtype="float16")
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="float32 torch"):
        llama4_attention_scales(torch.zeros(3))


# --------------------------------------------------------------------------- traced


def traced_case(seed):
    """One function calling every variant (one trace per framework), its inputs and the
    float64 references of its outputs."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (2, 5, 24)).astype(np.float32)
    pos3 = rng.integers(0, 1000, (2, 5, 3)).astype(np.int32)
    pos1 = pos3[..., 0]

    def every_variant(q, p3, p1):
        return (
            apply_rope(q, p1, rotary_dim=8, rotary_features="last"),
            vjepa2_rope(q, p3),
            apply_rope(q, p3, sections=(4, 4, 4), section_layout="blocks", frequencies="per_axis"),
            llama4_attention_scales(p1, floor_scale=100),
        )

    blocks = [
        rope64(x[..., 8 * a : 8 * a + 8], pos3[..., a, None] * inv_freq(8), "half")
        for a in range(3)
    ]
    wants = (
        last_reference(x, pos1, 8, "half"),
        vjepa2_reference(x, pos3),
        np.concatenate(blocks, axis=-1),
        llama4_reference(pos1, 100, 0.1),
    )
    return every_variant, (x, pos3, pos1), wants


def test_traced_jax():
    jax = pytest.importorskip("jax")
    fn, inputs, wants = traced_case(5)
    outs = jax.jit(fn)(*(jax.numpy.asarray(v) for v in inputs))
    for out, want in zip(outs, wants, strict=True):
        assert_close(out, want, atol=ATOL32, rtol=2e-7, backend="jax")


@pytest.mark.slow
def test_traced_torch():
    torch = pytest.importorskip("torch")
    fn, inputs, wants = traced_case(6)
    compiled = torch.compile(fn, backend="eager", fullgraph=True)
    outs = compiled(*(torch.from_numpy(v) for v in inputs))
    for out, want in zip(outs, wants, strict=True):
        assert_close(out, want, atol=ATOL32, rtol=2e-7, backend="torch")


@pytest.mark.slow
def test_traced_tensorflow():
    tf = pytest.importorskip("tensorflow")
    fn, inputs, wants = traced_case(7)
    outs = tf.function(fn)(*(tf.constant(v) for v in inputs))
    for out, want in zip(outs, wants, strict=True):
        assert_close(out, want, atol=ATOL32, rtol=2e-7, backend="tensorflow")
