"""N-D RoPE (``apply_rope(..., sections=...)``): properties on every backend, and parity
with the codebases that define each convention.

The float64 reference below is written here from the definition (pair ``j`` rotated by
``pos[..., axis_j] * w_j``), with the pair-to-axis rules restated from transformers'
Qwen2-VL (``split(mrope_section)``, ``m[i % 3]``) and Qwen3-VL
(``recomposition_frequencies``) code. Parity tests run the installed transformers,
diffusers and rotary-embedding-torch, in float64 where their code allows it and in their
own float32 arithmetic, whose angle ``pos * w`` is rounded to float32 (an error of about
``|pos * w| * 6e-8``): those tolerances scale with the largest angle.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core.rope import LAYOUTS, apply_rope
from pe_core.rope_nd import (
    SECTION_LAYOUTS,
    mrope_position_ids,
    pair_axes,
    pixel_frequencies,
    rope_sections,
)
from pe_core_backends import force_device_path, get_namespace

ATOL32 = 3e-6
IMAGE, VIDEO, VISION_START = 151655, 151656, 151652

# --------------------------------------------------------------------------- references


def axes_reference(sections, section_layout):
    """Which axis each pair follows, restated from transformers' Qwen2-VL / Qwen3-VL."""
    k, n = len(sections), sum(sections)
    if section_layout in ("contiguous", "blocks"):  # cos.split(mrope_section)[i]: m[i % 3]
        return np.repeat(np.arange(k), sections)
    axes = np.zeros(n, dtype=int)  # freqs_t = freqs[0]; freqs_t[..., a:k*s_a:k] = freqs[a]
    for a in range(1, k):
        axes[a : k * sections[a] : k] = a
    return axes


def default_inv_freq(dim, base=10000.0):
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def per_axis_freqs(sections, axes, base=10000.0):
    """Axis a's pairs get base ** (-2i / (2 s_a)), i counting that axis's pairs."""
    out = np.empty(len(axes))
    for a, s in enumerate(sections):
        out[axes == a] = default_inv_freq(2 * s, base)
    return out


def nd_rope(x, pos, omegas, axes, layout, attention=1.0):
    """float64: rotate pair j of x by pos[..., axes[j]] * omegas[j]."""
    x = np.asarray(x, dtype=np.float64)
    n = len(omegas)
    theta = np.asarray(pos, dtype=np.float64)[..., np.asarray(axes)] * np.asarray(omegas)
    cos, sin = np.cos(theta) * attention, np.sin(theta) * attention
    rot, rest = x[..., : 2 * n], x[..., 2 * n :]
    if layout == "half":
        a, b = rot[..., :n], rot[..., n:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(rot.shape)
    return np.concatenate([out, rest], axis=-1)


def blocks_permutation(axes, head_dim):
    """``perm`` with ``x[..., perm]`` putting ``section_layout="blocks"``' half pairs
    ``(o_a + i, o_a + s_a + i)`` of axis ``a`` (block at feature ``o_a``) at the global
    half pairs ``(j, j + n)``: a rotate-half per axis, restated from transformers' Gemma 4
    ``apply_multidimensional_rope`` and diffusers' ``apply_rotary_emb_allegro``."""
    axes = np.asarray(axes)
    n, perm, start, j = len(axes), np.arange(head_dim), 0, 0
    for s in np.bincount(axes):
        perm[j : j + s] = start + np.arange(s)
        perm[n + j : n + j + s] = start + s + np.arange(s)
        start, j = start + 2 * s, j + s
    return perm


def in_blocks(reference, x, axes, section_layout, layout):
    """``reference(x)`` (global pairs) for ``section_layout="blocks"`` with the half
    layout (interleaved blocks pair the same features as ``"contiguous"``)."""
    x = np.asarray(x, dtype=np.float64)
    if section_layout != "blocks" or layout != "half":
        return reference(x)
    perm = blocks_permutation(axes, x.shape[-1])
    out = np.empty_like(x)
    out[..., perm] = reference(x[..., perm])
    return out


def on(backend, x, dtype=None):
    xp = get_namespace(backend)
    array = xp.asarray(np.asarray(x, dtype=np.float32))
    return array if dtype is None else xp.astype(array, xp.dtype(dtype))


def pair_norms(v, n, layout):
    v = np.asarray(v, dtype=np.float64)
    if layout == "half":
        return np.hypot(v[..., :n], v[..., n : 2 * n])
    return np.hypot(v[..., 0 : 2 * n : 2], v[..., 1 : 2 * n : 2])


# --------------------------------------------------------------------------- strategies

#: Every drawn case has 8 rotary pairs (head_dim 16, or 18 with a partial rotary), so
#: that compiled backends see a few shapes only. Interleaved sections the rule accepts:
INTERLEAVED = [(4, 2, 2), (3, 3, 2), (6, 1, 1), (4, 4), (8,)]
LEADS = [(5,), (2, 2, 3)]
N_PAIRS = 8


@st.composite
def nd_inputs(draw):
    section_layout = draw(st.sampled_from(SECTION_LAYOUTS), label="section_layout")
    if section_layout == "interleaved":
        sections = draw(st.sampled_from(INTERLEAVED), label="sections")
    else:
        k = draw(st.integers(1, 3), label="k")
        cuts = sorted(draw(st.lists(st.integers(0, N_PAIRS), min_size=k - 1, max_size=k - 1)))
        sections = tuple(np.diff([0, *cuts, N_PAIRS]).tolist())
    n = N_PAIRS
    extra = draw(st.sampled_from([0, 2]), label="extra features")
    lead = draw(st.sampled_from(LEADS), label="lead")
    layout = draw(st.sampled_from(LAYOUTS), label="layout")
    kind = draw(st.sampled_from(["default", "per_axis", "pixel"]), label="frequencies")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.uniform(-1, 1, (*lead, 2 * n + extra)).astype(np.float32)
    pos_lead = (lead[0], 1, lead[-1]) if len(lead) == 3 and draw(st.booleans()) else (lead[-1],)
    k = len(sections)
    if kind == "pixel":
        pos = rng.uniform(-1, 1, (*pos_lead, k)).astype(np.float32).astype(np.float64)
    else:
        pos = rng.integers(-1000, 100_000, (*pos_lead, k))
    axes = axes_reference(sections, section_layout)
    if kind == "default":
        frequencies, omegas = None, default_inv_freq(2 * n)[:n]
    elif kind == "per_axis":
        frequencies, omegas = "per_axis", per_axis_freqs(sections, axes)
    else:
        max_freq = draw(st.sampled_from([10.0, 64.0, 256.0]), label="max_freq")
        frequencies = pixel_frequencies(sections, max_freq, section_layout)
        omegas = np.empty(n)
        for a, s in enumerate(sections):  # each axis: linspace(1, max_freq / 2, s) * pi
            omegas[axes == a] = np.linspace(1.0, max_freq / 2, s) * np.pi
    kwargs = {
        "sections": sections,
        "section_layout": section_layout,
        "frequencies": frequencies,
        "layout": layout,
        "rotary_dim": 2 * n if extra else None,
    }
    return x, pos, kwargs, omegas, axes


# --------------------------------------------------------------------------- properties


@given(inputs=nd_inputs())
def test_matches_the_float64_reference(backend, inputs):
    x, pos, kwargs, omegas, axes = inputs
    out = apply_rope(on(backend, x), positions_on(backend, pos), **kwargs)
    layout, section_layout = kwargs["layout"], kwargs["section_layout"]
    expected = in_blocks(
        lambda v: nd_rope(v, pos, omegas, axes, layout), x, axes, section_layout, layout
    )
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")


@given(inputs=nd_inputs(), data=st.data())
def test_scores_depend_only_on_the_per_axis_offset(backend, inputs, data):
    """Shifting every coordinate of q and k by the same per-axis vector keeps q . k."""
    x, pos, kwargs, _, _ = inputs
    k = len(kwargs["sections"])
    shift = np.array(data.draw(st.lists(st.integers(-50_000, 50_000), min_size=k, max_size=k)))
    if kwargs["frequencies"] not in (None, "per_axis"):
        shift = shift / 50_000.0  # pixel frequencies: positions of order 1
    keys = np.flip(x, axis=-2).copy()
    key_pos = np.flip(pos, axis=-2).copy()
    scores = []
    for t in (np.zeros(k), shift):
        q_rot = apply_rope(on(backend, x), positions_on(backend, pos + t), **kwargs)
        k_rot = apply_rope(on(backend, keys), positions_on(backend, key_pos + t), **kwargs)
        scores.append(np.einsum("...id,...jd->...ij", to_numpy(q_rot), to_numpy(k_rot)))
    assert_close(scores[1], scores[0], atol=3e-5, rtol=1e-7)


@given(inputs=nd_inputs())
def test_keeps_the_norm_of_every_pair(backend, inputs):
    x, pos, kwargs, omegas, axes = inputs
    n = len(omegas)
    out = to_numpy(apply_rope(on(backend, x), positions_on(backend, pos), **kwargs))
    layout = kwargs["layout"]
    if kwargs["section_layout"] == "blocks" and layout == "half":  # to the global pairs
        perm = blocks_permutation(axes, x.shape[-1])
        out, x = out[..., perm], x[..., perm]
    assert_close(pair_norms(out, n, layout), pair_norms(x, n, layout), atol=ATOL32, rtol=1e-7)
    assert_equal(out[..., 2 * n :], x[..., 2 * n :])  # partial rotary


@pytest.mark.parametrize("section_layout", SECTION_LAYOUTS)
def test_device_path_matches_the_reference(backend, section_layout):
    """Positions on an accelerator (forced here) take the exact kernel axis by axis."""
    sections = (6, 5, 5)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 2, 7, 34)).astype(np.float32)
    pos = rng.integers(-(2**30), 2**30, (2, 1, 7, 3))
    axes = axes_reference(sections, section_layout)
    expected = in_blocks(
        lambda v: mp_reference(v, pos, default_inv_freq(32), axes), x, axes, section_layout, "half"
    )
    with force_device_path():
        out = apply_rope(
            on(backend, x),
            positions_on(backend, pos.astype(np.int32)),
            sections=sections,
            section_layout=section_layout,
            rotary_dim=32,
        )
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")


def mp_reference(x, pos, inv_freq, axes):
    """Half layout for large positions: the angle ``pos * w`` reduced modulo 2 pi with
    mpmath (float64 ``pos * w`` would be off by ~1e-7 rad at 2**30)."""
    mpmath = pytest.importorskip("mpmath")
    theta = np.empty((*pos.shape[:-1], len(inv_freq)))
    with mpmath.workprec(120):
        for index in np.ndindex(*pos.shape[:-1]):
            for j, w in enumerate(inv_freq):
                angle = int(pos[(*index, axes[j])]) * mpmath.mpf(float(w))
                theta[(*index, j)] = float(mpmath.fmod(angle, 2 * mpmath.pi))
    n = len(inv_freq)
    x = x.astype(np.float64)
    a, b = x[..., :n], x[..., n : 2 * n]
    cos, sin = np.cos(theta), np.sin(theta)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., 2 * n :]], axis=-1)


def test_one_axis_is_one_dimensional_rope():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 12))
    pos = rng.integers(-(10**6), 10**6, (2, 5))
    for layout in LAYOUTS:
        one_d = apply_rope(x, pos, layout=layout, rotary_dim=10, base=500.0)
        nd = apply_rope(x, pos[..., None], layout=layout, rotary_dim=10, base=500.0, sections=(5,))
        assert_equal(nd, one_d, dtype="float64")


def test_float64_input_keeps_float64(backend):
    xp = get_namespace(backend)
    if not xp.supports("float64"):
        pytest.skip(f"{backend} has no float64 here")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16))
    pos = rng.integers(0, 5000, (4, 3))
    out = apply_rope(xp.asarray(x), positions_on(backend, pos), sections=(2, 3, 3))
    expected = nd_rope(
        x, pos, default_inv_freq(16), axes_reference((2, 3, 3), "contiguous"), "half"
    )
    assert_close(out, expected, atol=1e-12, backend=backend, dtype="float64")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_input_rounded_once(backend, dtype):
    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes:
        pytest.skip(f"{backend} has no {dtype}")
    rng = np.random.default_rng(2)
    x = on(backend, rng.uniform(-1, 1, (6, 16)), dtype)
    pos = rng.integers(0, 3000, (6, 2))
    out = apply_rope(x, positions_on(backend, pos), sections=(4, 4), layout="interleaved")
    expected = nd_rope(
        to_numpy(x), pos, default_inv_freq(16), axes_reference((4, 4), "contiguous"), "interleaved"
    )
    eps = 2**-8 if dtype == "bfloat16" else 2**-11
    assert_close(out, expected, atol=eps * 1.5, rtol=1e-7, backend=backend, dtype=dtype)


# --------------------------------------------------------------------------- scaling


@pytest.mark.parametrize("frequencies", [None, "per_axis"])
def test_linear_and_yarn_scaling(frequencies):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6, 24))
    pos = rng.integers(0, 8000, (6, 3))
    sections = (4, 4, 4)
    axes = axes_reference(sections, "contiguous")
    plain = default_inv_freq(24) if frequencies is None else per_axis_freqs(sections, axes)
    linear = {"rope_type": "linear", "factor": 4.0}
    out = apply_rope(x, pos, sections=sections, frequencies=frequencies, scaling=linear)
    assert_close(out, nd_rope(x, pos, plain / 4.0, axes, "half"), atol=1e-12, rtol=1e-7)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    out = apply_rope(x, pos, sections=sections, frequencies=frequencies, scaling=yarn)
    dims = [24] if frequencies is None else [8, 8, 8]
    inv = np.concatenate(
        [pe_core.rope_frequencies({"head_dim": d, "rope_parameters": yarn})[0] for d in dims]
    )
    attention = 0.1 * math.log(4.0) + 1.0
    expected = nd_rope(x, pos, inv, axes, "half", attention)
    assert_close(out, expected, atol=1e-12, rtol=1e-7, backend="numpy", dtype="float64")


def test_a_qwen2_vl_config_is_read_whole():
    config = {
        "hidden_size": 128,
        "num_attention_heads": 4,
        "rope_theta": 1_000_000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
    }
    inv_freq, attention = pe_core.rope_frequencies(config)  # "mrope" reads as "default"
    assert_close(inv_freq, default_inv_freq(32, 1e6), atol=0, rtol=1e-15)
    assert attention == 1.0
    s = rope_sections(config)
    rng = np.random.default_rng(5)
    x, pos = rng.standard_normal((5, 32)), rng.integers(0, 100, (5, 3))
    out = apply_rope(x, pos, sections=s.sections, section_layout=s.section_layout, scaling=config)
    expected = nd_rope(x, pos, inv_freq, axes_reference((4, 6, 6), "contiguous"), "half")
    assert_close(out, expected, atol=1e-12, rtol=1e-7)


@pytest.mark.parametrize("rope_type", ["dynamic", "longrope"])
def test_sequence_length_scaling_is_refused(rope_type):
    scaling = {"rope_type": rope_type, "factor": 2.0, "max_position_embeddings": 64}
    with pytest.raises(ValueError, match=f"rope_type '{rope_type}'.*N-D positions"):
        apply_rope(np.ones((2, 8)), np.zeros((2, 2), int), sections=(2, 2), scaling=scaling)


# --------------------------------------------------------------------------- compiled


def _compiled_case():
    x = np.random.default_rng(6).uniform(-1, 1, (2, 2, 5, 16)).astype(np.float32)
    return x, {"sections": (3, 3, 2), "section_layout": "interleaved"}


def _expected_compiled(x, pos, kwargs):
    axes = pair_axes(kwargs["sections"], kwargs["section_layout"])
    return nd_rope(x, pos, default_inv_freq(16), np.asarray(axes), "half")


def test_jax_jit_equals_eager_and_traces_once():
    jax = pytest.importorskip("jax")
    x, _ = _compiled_case()
    kwargs = {"sections": (3, 2, 3), "section_layout": "contiguous"}
    traces = []

    @jax.jit
    def f(q, p):
        traces.append(1)
        return apply_rope(q, p, **kwargs)

    for offset in (0, 7, 123_456):
        pos = offset + np.random.default_rng(offset).integers(0, 1000, (2, 1, 5, 3))
        p = jax.numpy.asarray(pos.astype(np.int32))
        eager = apply_rope(jax.numpy.asarray(x), p, **kwargs)
        traced = f(jax.numpy.asarray(x), p)
        assert_close(traced, to_numpy(eager), atol=1e-6, backend="jax")
        assert_close(traced, _expected_compiled(x, pos, kwargs), atol=ATOL32)
    assert len(traces) == 1


@pytest.mark.slow
def test_tf_function_equals_eager_and_traces_once():
    tf = pytest.importorskip("tensorflow")
    x, kwargs = _compiled_case()
    traces = []

    @tf.function(jit_compile=True)
    def f(q, p):
        traces.append(1)
        return apply_rope(q, p, **kwargs)

    for offset in (0, 7, 123_456):
        pos = offset + np.random.default_rng(offset).integers(0, 1000, (2, 1, 5, 3))
        p = tf.constant(pos.astype(np.int32))
        eager = apply_rope(tf.constant(x), p, **kwargs)
        traced = f(tf.constant(x), p)
        assert_close(traced, to_numpy(eager), atol=1e-6, backend="tensorflow")
        assert_close(traced, _expected_compiled(x, pos, kwargs), atol=ATOL32)
    assert len(traces) == 1


@pytest.mark.slow
def test_torch_compile_fullgraph_equals_eager():
    torch = pytest.importorskip("torch")
    x, kwargs = _compiled_case()
    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    f = torch.compile(
        lambda q, p: apply_rope(q, p, **kwargs), backend=counting_backend, fullgraph=True
    )
    for offset in (0, 7, 123_456):
        pos = offset + np.random.default_rng(offset).integers(0, 1000, (2, 1, 5, 3))
        p = torch.from_numpy(pos)
        eager = apply_rope(torch.from_numpy(x), p, **kwargs)
        traced = f(torch.from_numpy(x), p)
        assert_close(traced, to_numpy(eager), atol=1e-6, backend="torch")
        assert_close(traced, _expected_compiled(x, pos, kwargs), atol=ATOL32)
    assert len(compiles) <= 2  # the first call, then at most one dynamic-shape recompile


# --------------------------------------------------------------------------- transformers


def _qwen_rotary(kind, sections, head_dim=64, theta=1e6, interleaved=False):
    """transformers' text rotary embedding of Qwen2-VL, Qwen2.5-VL or Qwen3-VL, and its
    module (for apply_rotary_pos_emb)."""
    pytest.importorskip("transformers")
    params = {"rope_type": "default", "mrope_section": list(sections), "rope_theta": theta}
    if interleaved:
        params["mrope_interleaved"] = True
    common = dict(hidden_size=2 * head_dim, num_attention_heads=2, num_key_value_heads=2)
    if kind == "qwen2_vl":
        from transformers.models.qwen2_vl import configuration_qwen2_vl as c
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m

        cfg = c.Qwen2VLTextConfig(**common, rope_parameters=params)
        return m.Qwen2VLRotaryEmbedding(cfg), m
    if kind == "qwen2_5_vl":
        from transformers.models.qwen2_5_vl import configuration_qwen2_5_vl as c
        from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as m

        cfg = c.Qwen2_5_VLTextConfig(**common, rope_parameters=params)
        return m.Qwen2_5_VLRotaryEmbedding(cfg), m
    from transformers.models.qwen3_vl import configuration_qwen3_vl as c
    from transformers.models.qwen3_vl import modeling_qwen3_vl as m

    cfg = c.Qwen3VLTextConfig(**common, head_dim=head_dim, rope_parameters=params)
    return m.Qwen3VLTextRotaryEmbedding(cfg), m


QWEN_CASES = [
    ("qwen2_vl", (8, 12, 12), "contiguous"),
    ("qwen2_5_vl", (8, 12, 12), "contiguous"),
    ("qwen3_vl", (12, 10, 10), "interleaved"),
]


@pytest.mark.parametrize(("kind", "sections", "section_layout"), QWEN_CASES)
def test_qwen_vl_mrope_matches_transformers(kind, sections, section_layout):
    """float64: transformers' own recomposition_frequencies and apply_rotary_pos_emb on
    float64 cos/sin; float32: its rotary embedding as it runs (float32 angles)."""
    torch = pytest.importorskip("torch")
    emb, module = _qwen_rotary(kind, sections, interleaved=section_layout == "interleaved")
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, 2, 3, 9, 64))  # (batch, heads, seq, head_dim)
    position_ids = rng.integers(0, 20_000, (3, 2, 9))  # transformers: (3, batch, seq)
    pos = np.moveaxis(position_ids, 0, -1)[:, None]  # (batch, 1, seq, 3)
    kwargs = {"sections": sections, "section_layout": section_layout, "base": 1e6}

    freqs = torch.from_numpy(position_ids[..., None] * default_inv_freq(64, 1e6))
    cos = emb.recomposition_frequencies(freqs.cos())
    sin = emb.recomposition_frequencies(freqs.sin())
    ref_q, ref_k = module.apply_rotary_pos_emb(torch.from_numpy(q), torch.from_numpy(k), cos, sin)
    assert_close(apply_rope(q, pos, **kwargs), ref_q.numpy(), atol=1e-10)
    assert_close(apply_rope(k, pos, **kwargs), ref_k.numpy(), atol=1e-10)

    if section_layout == "contiguous":  # transformers 4.x's function, restated
        assert_close(
            apply_rope(q, pos, **kwargs), multimodal_rope_v4(q, freqs.numpy(), sections), atol=1e-10
        )

    q32, k32 = torch.from_numpy(q).float(), torch.from_numpy(k).float()
    cos32, sin32 = emb(q32, torch.from_numpy(position_ids))
    own_q, _ = module.apply_rotary_pos_emb(q32, k32, cos32, sin32)
    ours = apply_rope(q32, torch.from_numpy(pos), **kwargs)
    assert_close(ours, ref_q.numpy(), atol=ATOL32 * 3, backend="torch", dtype="float32")
    bound = 20_000 * 2.0**-23 * np.abs(q).sum(-1).max()  # float32 angles, |pos * w| <= 2e4
    assert_close(ours, own_q.numpy(), atol=bound)


def multimodal_rope_v4(q, freqs, mrope_section):
    """transformers 4.x ``apply_multimodal_rotary_pos_emb`` (Qwen2-VL) in NumPy, from
    freqs ``(3, batch, seq, head_dim / 2)``."""
    emb = np.concatenate([freqs, freqs], axis=-1)  # Qwen2VLRotaryEmbedding: cat(freqs, freqs)
    cos, sin = np.cos(emb), np.sin(emb)
    split = np.cumsum(list(mrope_section) * 2)[:-1]  # mrope_section * 2

    def pick(m):
        return np.concatenate([c[i % 3] for i, c in enumerate(np.split(m, split, -1))], -1)

    cos, sin = pick(cos)[:, None], pick(sin)[:, None]  # unsqueeze_dim=1
    half = q.shape[-1] // 2
    rotate_half = np.concatenate([-q[..., half:], q[..., :half]], axis=-1)
    return q * cos + rotate_half * sin


def _stub_model(module_cls, spatial_merge_size=2, tokens_per_second=None):
    vision = SimpleNamespace(
        spatial_merge_size=spatial_merge_size, tokens_per_second=tokens_per_second
    )
    stub = SimpleNamespace(config=SimpleNamespace(vision_config=vision))
    stub.get_vision_position_ids = functools.partial(module_cls.get_vision_position_ids, stub)
    return stub


def random_prompts(seed, *, frames_split=False, batch=3):
    """Token rows with text, images and videos (videos longer than wide included), left
    and right padding, and the grids in prompt order."""
    rng = np.random.default_rng(seed)
    rows, images, videos = [], [], []
    for _ in range(batch):
        tokens = []
        for _ in range(int(rng.integers(1, 4))):
            tokens += rng.integers(10, 1000, int(rng.integers(1, 5))).tolist()
            kind = int(rng.integers(0, 3))
            h, w = 2 * int(rng.integers(1, 4)), 2 * int(rng.integers(1, 4))
            if kind == 1:
                images.append((1, h, w))
                tokens += [VISION_START] + [IMAGE] * (h * w // 4)
            elif kind == 2:
                t = int(rng.integers(1, 6))
                videos.append((t, h, w))
                for _ in range(t if frames_split else 1):
                    if frames_split:  # a timestamp before every frame
                        tokens += rng.integers(10, 1000, 2).tolist()
                    frame_tokens = h * w // 4 * (1 if frames_split else t)
                    tokens += [VISION_START] + [VIDEO] * frame_tokens
        tokens += rng.integers(10, 1000, int(rng.integers(0, 3))).tolist()
        rows.append(tokens)
    width = max(len(r) for r in rows) + 2
    ids = np.zeros((batch, width), dtype=np.int64)
    mask = np.zeros((batch, width), dtype=np.int64)
    for b, tokens in enumerate(rows):
        start = 0 if b % 2 else width - len(tokens)  # right, then left padding
        ids[b, start : start + len(tokens)] = tokens
        mask[b, start : start + len(tokens)] = 1
    return (
        ids,
        mask,
        np.array(images or np.zeros((0, 3)), dtype=np.int64).reshape(-1, 3),
        np.array(videos or np.zeros((0, 3)), dtype=np.int64).reshape(-1, 3),
    )


def _token_types(ids):
    return np.where(ids == IMAGE, 1, np.where(ids == VIDEO, 2, 0))


def _grids_or_none(torch, grids):
    return torch.from_numpy(grids) if len(grids) else None


@pytest.mark.parametrize("seed", range(4))
def test_position_ids_match_qwen2_vl_get_rope_index(seed):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    ids, mask, images, videos = random_prompts(seed)
    ref_pos, ref_delta = Qwen2VLModel.get_rope_index(
        _stub_model(Qwen2VLModel),
        torch.from_numpy(ids),
        mm_token_type_ids=torch.from_numpy(_token_types(ids)),
        image_grid_thw=_grids_or_none(torch, images),
        video_grid_thw=_grids_or_none(torch, videos),
        attention_mask=torch.from_numpy(mask),
    )
    pos, delta = mrope_position_ids(
        torch.from_numpy(ids),
        torch.from_numpy(images),
        torch.from_numpy(videos),
        torch.from_numpy(mask),
    )
    assert_equal(pos.movedim(-1, 0), ref_pos, backend="torch", dtype="int64")
    assert_equal(delta, ref_delta, backend="torch")  # and ref_delta's dtype


@pytest.mark.parametrize("seed", range(3))
def test_position_ids_match_qwen2_5_vl_time_scaling(seed):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    ids, mask, images, videos = random_prompts(seed + 10)
    seconds = np.array([0.5, 1.0, 2.0, 4.0] * 8)[: len(videos)]
    ref_pos, ref_delta = Qwen2_5_VLModel.get_rope_index(
        _stub_model(Qwen2_5_VLModel, tokens_per_second=2),
        torch.from_numpy(ids),
        mm_token_type_ids=torch.from_numpy(_token_types(ids)),
        image_grid_thw=_grids_or_none(torch, images),
        video_grid_thw=_grids_or_none(torch, videos),
        second_per_grid_ts=torch.from_numpy(seconds) if len(videos) else None,
        attention_mask=torch.from_numpy(mask),
    )
    pos, delta = mrope_position_ids(ids, images, videos, mask, video_time_scale=seconds * 2)
    assert_equal(np.moveaxis(pos, -1, 0), ref_pos.numpy(), backend="numpy")
    assert_equal(delta, ref_delta.numpy(), backend="numpy")


@pytest.mark.parametrize("seed", range(3))
def test_position_ids_match_qwen3_vl_split_frames(seed):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    ids, mask, images, videos = random_prompts(seed + 20, frames_split=True)
    ref_pos, ref_delta = Qwen3VLModel.get_rope_index(
        _stub_model(Qwen3VLModel),
        torch.from_numpy(ids),
        mm_token_type_ids=torch.from_numpy(_token_types(ids)),
        image_grid_thw=_grids_or_none(torch, images),
        video_grid_thw=_grids_or_none(torch, videos),
        attention_mask=torch.from_numpy(mask),
    )
    pos, delta = mrope_position_ids(ids, images, videos, mask, split_video_frames=True)
    assert_equal(np.moveaxis(pos, -1, 0), ref_pos.numpy(), backend="numpy")
    assert_equal(delta, ref_delta.numpy(), backend="numpy")


def qwen2_vl_rope_index_v4(ids, images, videos, merge=2, time_scale=None):
    """transformers 4.x Qwen2-VL / Qwen2.5-VL ``get_rope_index`` restated (NumPy, one
    example, no padding): text resumes one past the largest vision position."""
    tokens = ids.tolist()
    starts = [i for i, t in enumerate(tokens) if t == VISION_START]
    kinds = [tokens[i + 1] for i in starts]
    remain_images, remain_videos = kinds.count(IMAGE), kinds.count(VIDEO)
    image_index = video_index = 0
    pieces, st_ = [], 0
    for _ in range(remain_images + remain_videos):
        ed_image = tokens.index(IMAGE, st_) if remain_images > 0 else len(tokens) + 1
        ed_video = tokens.index(VIDEO, st_) if remain_videos > 0 else len(tokens) + 1
        if ed_image < ed_video:
            (t, h, w), second = images[image_index], 0.0
            image_index, remain_images, ed = image_index + 1, remain_images - 1, ed_image
        else:
            (t, h, w) = videos[video_index]
            second = 1.0 if time_scale is None else time_scale[video_index]
            video_index, remain_videos, ed = video_index + 1, remain_videos - 1, ed_video
        gt, gh, gw = t, h // merge, w // merge
        text_len = ed - st_
        st_idx = pieces[-1].max() + 1 if pieces else 0
        pieces.append(np.arange(text_len)[None].repeat(3, 0) + st_idx)
        t_index = (np.arange(gt)[:, None].repeat(gh * gw, 1) * second).astype(np.int64).ravel()
        h_index = np.broadcast_to(np.arange(gh)[None, :, None], (gt, gh, gw)).ravel()
        w_index = np.broadcast_to(np.arange(gw)[None, None, :], (gt, gh, gw)).ravel()
        pieces.append(np.stack([t_index, h_index, w_index]) + text_len + st_idx)
        st_ = ed + gt * gh * gw
    if st_ < len(tokens):
        st_idx = pieces[-1].max() + 1 if pieces else 0
        pieces.append(np.arange(len(tokens) - st_)[None].repeat(3, 0) + st_idx)
    return np.concatenate(pieces, 1)


@pytest.mark.parametrize("seed", range(4))
def test_text_after_vision_max_is_the_original_qwen2_vl_rule(seed):
    ids, mask, images, videos = random_prompts(seed + 30, batch=1)
    ids = ids[:, mask[0] == 1]  # no padding
    expected = qwen2_vl_rope_index_v4(ids[0], images.tolist(), videos.tolist(), time_scale=None)
    pos, delta = mrope_position_ids(ids, images, videos, text_after_vision="max")
    assert_equal(pos[0].T, expected)
    assert delta[0, 0] == expected.max() + 1 - ids.shape[1]
    scales = [1.5] * len(videos)
    expected = qwen2_vl_rope_index_v4(ids[0], images.tolist(), videos.tolist(), time_scale=scales)
    pos, _ = mrope_position_ids(ids, images, videos, text_after_vision="max", video_time_scale=1.5)
    assert_equal(pos[0].T, expected)


def test_position_ids_docstring_example_and_text_only():
    pos, delta = mrope_position_ids([[5, 6, 7]])
    assert_equal(pos[0], np.repeat(np.arange(3)[:, None], 3, 1))
    assert_equal(delta, [[0]])


# --------------------------------------------------------------------------- FLUX


def flux_reference(x, ids, axes_dim, theta):
    """black-forest-labs/flux ``rope`` / ``EmbedND`` / ``apply_rope`` restated in float64."""

    def rope(pos, dim, theta):
        scale = np.arange(0, dim, 2, dtype=np.float64) / dim
        omega = 1.0 / (theta**scale)
        out = np.einsum("...n,d->...nd", pos, omega)
        out = np.stack([np.cos(out), -np.sin(out), np.sin(out), np.cos(out)], axis=-1)
        return out.reshape(*out.shape[:-1], 2, 2)

    n_axes = ids.shape[-1]
    emb = np.concatenate([rope(ids[..., i], axes_dim[i], theta) for i in range(n_axes)], axis=-3)[
        :, None
    ]  # EmbedND: (batch, 1, seq, dim/2, 2, 2)
    xq_ = x.reshape(*x.shape[:-1], -1, 1, 2)
    out = emb[..., 0] * xq_[..., 0] + emb[..., 1] * xq_[..., 1]
    return out.reshape(*x.shape)


def test_flux_embed_nd(backend):
    axes_dim, theta = (8, 12, 12), 10000
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (2, 3, 10, 32)).astype(np.float32)
    ids = np.zeros((2, 10, 3))
    ids[:, 4:, 1] = np.repeat(np.arange(2), 3)  # 4 text tokens at (0, 0, 0), a 2x3 image
    ids[:, 4:, 2] = np.tile(np.arange(3), 2)
    ids[1] += 100  # an offset image
    expected = flux_reference(x.astype(np.float64), ids, axes_dim, theta)
    sections = tuple(d // 2 for d in axes_dim)
    kwargs = {"sections": sections, "frequencies": "per_axis", "layout": "interleaved"}
    out = apply_rope(on(backend, x), positions_on(backend, ids[:, None]), base=theta, **kwargs)
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")
    if backend == "numpy":
        out64 = apply_rope(x.astype(np.float64), ids[:, None], base=theta, **kwargs)
        assert_close(out64, expected, atol=1e-12)


def test_flux_matches_diffusers():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers.models.embeddings import apply_rotary_emb
    from diffusers.models.transformers.transformer_flux import FluxPosEmbed

    axes_dim = [16, 56, 56]  # FLUX.1
    rng = np.random.default_rng(9)
    ids = np.concatenate([np.zeros((6, 3)), rng.integers(0, 64, (20, 3))]).astype(np.float64)
    ids[6:, 0] = 0
    x = rng.uniform(-1, 1, (1, 2, 26, 128))
    cos, sin = FluxPosEmbed(theta=10000, axes_dim=axes_dim)(torch.from_numpy(ids))
    own = apply_rotary_emb(torch.from_numpy(x).float(), (cos, sin))  # float32 cos, sin
    kwargs = {"sections": (8, 28, 28), "frequencies": "per_axis", "layout": "interleaved"}
    ours = apply_rope(torch.from_numpy(x).float(), torch.from_numpy(ids), **kwargs)
    assert_close(ours, own.numpy(), atol=ATOL32, backend="torch", dtype="float32")
    expected = flux_reference(x, ids[None], axes_dim, 10000)
    assert_close(apply_rope(x, ids, **kwargs), expected, atol=1e-12)


# --------------------------------------------------------------------------- axial


@pytest.mark.parametrize("freqs_for", ["pixel", "lang"])
def test_axial_matches_rotary_embedding_torch(freqs_for):
    torch = pytest.importorskip("torch")
    ret = pytest.importorskip("rotary_embedding_torch")
    dim, max_freq, shape = 16, 64.0, (5, 7)
    sections = (dim // 2, dim // 2)
    if freqs_for == "pixel":
        frequencies = pixel_frequencies(sections, max_freq)
        coords = [torch.linspace(-1, 1, steps=n).double().numpy() for n in shape]  # float32
        custom = torch.from_numpy(np.linspace(1.0, max_freq / 2, dim // 2) * np.pi)
    else:
        frequencies = "per_axis"
        coords = [np.arange(n, dtype=np.float64) for n in shape]
        custom = torch.from_numpy(default_inv_freq(dim))
    grid = np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1)  # (5, 7, 2)
    t = np.random.default_rng(10).uniform(-1, 1, (2, *shape, 40))
    kwargs = {"sections": sections, "frequencies": frequencies, "layout": "interleaved"}

    own64 = ret.RotaryEmbedding(dim, custom_freqs=custom, freqs_for=freqs_for, max_freq=max_freq)
    expected = ret.apply_rotary_emb(own64.get_axial_freqs(*shape), torch.from_numpy(t))
    ours = apply_rope(t, grid, rotary_dim=2 * dim, **kwargs)
    assert_close(ours, expected.numpy(), atol=1e-12)

    own32 = ret.RotaryEmbedding(dim, freqs_for=freqs_for, max_freq=max_freq)
    t32 = torch.from_numpy(t).float()
    got = ret.apply_rotary_emb(own32.get_axial_freqs(*shape), t32)
    ours32 = apply_rope(t32, torch.from_numpy(grid), rotary_dim=2 * dim, **kwargs)
    assert_close(ours32, expected.numpy(), atol=ATOL32, backend="torch", dtype="float32")
    largest_angle = np.abs(grid).max() * custom.numpy().max()  # float32 rounds it
    assert_close(ours32, got.numpy(), atol=largest_angle * 2**-21 + ATOL32)


# --------------------------------------------------------------------------- configs


def test_rope_sections_reads_qwen_configs():
    qwen2 = {"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    assert rope_sections(qwen2) == ((16, 24, 24), "contiguous")
    qwen25 = {
        "text_config": {"rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24]}}
    }
    assert not rope_sections(qwen25).interleaved
    qwen3 = {
        "text_config": {
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            }
        }
    }
    assert rope_sections(qwen3) == ((24, 20, 20), "interleaved")
    with pytest.raises(ValueError, match="no 'mrope_section'"):
        rope_sections({"rope_scaling": {"rope_type": "default"}})
    with pytest.raises(TypeError, match="mapping"):
        rope_sections([1, 2])


def test_qwen3_vl_interleaving_of_the_real_sections():
    axes = pair_axes((24, 20, 20), "interleaved")
    assert_equal(axes, axes_reference((24, 20, 20), "interleaved"))
    assert axes[:6] == (0, 1, 2, 0, 1, 2) and axes[-4:] == (0, 0, 0, 0)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "pos_shape", "error", "match"),
    [
        ({"sections": (2, 2)}, (3,), ValueError, "trailing axis of 2 coordinates"),
        ({"sections": (2, 2)}, (3, 3), ValueError, "trailing axis of 2 coordinates"),
        ({"sections": (2, 1)}, (3, 2), ValueError, r"sum\(sections\) must be rotary_dim / 2"),
        ({"sections": (2, -1, 3)}, (3, 3), ValueError, "integers >= 0"),
        ({"sections": (2.0, 2)}, (3, 2), TypeError, "sections must hold integers"),
        ({"sections": "22"}, (3, 2), TypeError, "sequence of integers"),
        ({"sections": (2, 2), "section_layout": "zigzag"}, (3, 2), ValueError, "zigzag"),
        ({"sections": (1, 3), "section_layout": "interleaved"}, (3, 2), ValueError, "interleaved"),
        ({"section_layout": "interleaved"}, (3, 2), ValueError, "pass sections="),
        ({"frequencies": "per_axis"}, (3, 2), ValueError, "pass sections="),
        ({"sections": (2, 2), "frequencies": "axial"}, (3, 2), ValueError, "'axial'"),
        ({"sections": (2, 2), "frequencies": (1.0,)}, (3, 2), ValueError, "one per rotary pair"),
        (
            {
                "sections": (2, 2),
                "frequencies": (1.0,) * 4,
                "scaling": {"rope_type": "linear", "factor": 2.0},
            },
            (3, 2),
            ValueError,
            "explicit frequencies",
        ),
        (
            {"sections": (2, 2), "frequencies": "per_axis", "scaling": {"head_dim": 8}},
            (3, 2),
            ValueError,
            "rope-parameters dict",
        ),
    ],
)
def test_bad_arguments(kwargs, pos_shape, error, match):
    with pytest.raises(error, match=match):
        apply_rope(np.ones((3, 8)), np.zeros(pos_shape, dtype=int), **kwargs)


def test_bad_position_id_inputs():
    with pytest.raises(ValueError, match=r"does not match its grid \(T, H, W\) = \(1, 4, 4\)"):
        mrope_position_ids([[1, IMAGE, IMAGE, 2]], image_grid_thw=[[1, 4, 4]])
    with pytest.raises(ValueError, match="more image segments"):
        mrope_position_ids([[1, IMAGE, 2]])
    with pytest.raises(ValueError, match="shape \\(batch, seq\\)"):
        mrope_position_ids([1, 2, 3])
    with pytest.raises(ValueError, match="text_after_vision"):
        mrope_position_ids([[1]], text_after_vision="min")
    with pytest.raises(TypeError, match="integers"):
        mrope_position_ids([[1.5]])


def test_plot_rope_sections():
    pytest.importorskip("matplotlib")
    from pe_core.plots import plot_rope_sections

    fig = plot_rope_sections()
    image = fig.axes[0].images[0].get_array()
    assert_equal(image[0], axes_reference((16, 24, 24), "contiguous"))
    assert_equal(image[1], axes_reference((24, 20, 20), "interleaved"))


def test_explicit_frequencies_as_an_array_equal_the_list() -> None:
    """A NumPy array of frequencies is the sequence it holds (it was refused with
    NumPy's 'truth value of an array is ambiguous')."""
    x = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    pos = np.stack([np.arange(5), np.arange(5)[::-1]], axis=-1)
    freqs = [1.0, 0.5, 0.1, 0.01]
    as_list = pe_core.apply_rope(x, pos, sections=(2, 2), frequencies=freqs)
    as_array = pe_core.apply_rope(x, pos, sections=(2, 2), frequencies=np.array(freqs))
    assert np.array_equal(as_list, as_array)
