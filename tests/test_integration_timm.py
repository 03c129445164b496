"""``pe_core.integrations.timm``: timm's rotary embeddings made exact in place.

Each class is checked against a float64 restatement of timm's own formula (within 1e-6,
on grids with thousands of positions, where the unpatched modules are off by up to
1e-3), tiny timm models built in code (nothing downloaded) against their unpatched
outputs (float32 tolerance), and unpatching against the original outputs (bitwise).
"""

from __future__ import annotations

import copy
import math
import pickle
import warnings

import numpy as np
import pytest
from _timm_import import timm_or_skip

torch = pytest.importorskip("torch")
timm = timm_or_skip()
sincos = timm.layers.pos_embed_sincos

from pe_core.host_reads import forbid_host_reads  # noqa: E402
from pe_core.integrations.timm import (  # noqa: E402
    covered_classes,
    patch_rotary_embeddings,
    patched_rotary_embeddings,
    unpatch_rotary_embeddings,
)

TOL = 1e-6


# -- float64 restatements of timm's formulas ---------------------------------------------


def grid64(shape, grid_type, ref=None, offset=0.0, indexing="ij", normalize="separate"):
    """timm's ``_build_grid`` in float64: (*shape, ndim)."""
    shape, ref = list(shape), None if ref is None else list(ref)
    if indexing == "xy":
        shape = [shape[1], shape[0], *shape[2:]]
        ref = None if ref is None else [ref[1], ref[0], *ref[2:]]
    if grid_type == "pixel":
        t = [np.linspace(-1.0, 1.0, s) for s in shape]
    elif grid_type == "centered":
        d = {"max": [max(shape)] * len(shape), "min": [min(shape)] * len(shape)}.get(
            normalize, shape
        )
        t = [(np.arange(s) + 0.5 + offset) / dd for s, dd in zip(shape, d, strict=True)]
    else:
        t = [np.arange(s, dtype=np.float64) + offset for s in shape]
    if ref is not None:
        t = [x / f * r for x, f, r in zip(t, shape, ref, strict=True)]
    grid = np.stack(np.meshgrid(*t, indexing=indexing), axis=-1)
    return 2.0 * grid - 1.0 if grid_type == "centered" else grid


def bands64(dim, in_pixels, max_res=224, temperature=10000.0, linear=False):
    n = dim // 4
    if in_pixels:
        if linear:
            return np.linspace(1.0, max_res / 2, n) * np.pi
        return 2.0 ** np.linspace(0, math.log2(max_res) - 1, n) * np.pi
    return 1.0 / temperature ** (np.arange(n) / n)


def layout(x, rotate_half):
    return np.concatenate([x, x], -1) if rotate_half else np.repeat(x, 2, -1)


def rotary64(m, shape):
    """(sin, cos) of a RotaryEmbedding / RotaryEmbeddingCat, (N, dim) each."""
    b = bands64(m.dim, m.in_pixels, m.max_res, float(m.temperature), m.linear_bands)
    g = grid64(
        shape, m.grid_type, m.ref_feat_shape, m.grid_offset, m.grid_indexing, m.normalize_coords
    )
    pos = (g[..., None] * b).reshape(math.prod(shape), -1)
    return layout(np.sin(pos), m.rotate_half), layout(np.cos(pos), m.rotate_half)


def dinov3_64(m, shape):
    n = m.dim // 4
    if m.min_period is not None:
        periods = m.min_period * (m.max_period / m.min_period) ** np.linspace(0, 1, n)
    else:
        periods = m.temperature ** (2.0 * np.arange(n) / (m.dim // 2))
    g = grid64(shape, "centered", None, m.grid_offset, m.grid_indexing, m.normalize_coords)
    angles = (2 * np.pi * g.reshape(-1, 2)[:, :, None] / periods).reshape(math.prod(shape), -1)
    s, c = layout(np.sin(angles), m.rotate_half), layout(np.cos(angles), m.rotate_half)
    return np.concatenate([s, c], -1)


def mrope64(m, shape):
    g = grid64(shape, "index").reshape(-1, 2)
    pos = np.concatenate([np.zeros_like(g[:, :1]), g], -1)[:, m.axis.numpy()]
    angles = pos / float(m.temperature) ** (np.arange(0, m.dim, 2) / m.dim)
    return np.concatenate([layout(np.sin(angles), True), layout(np.cos(angles), True)], -1)


def err(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max())


# -- each class against its float64 formula ----------------------------------------------

AXIAL = [
    # PE: index grid from 1, 'xy', ref_feat_shape
    (
        "Cat",
        dict(in_pixels=False, grid_offset=1.0, grid_indexing="xy", ref_feat_shape=(24, 24)),
        (3, 3000),
    ),
    # RoPE-ViT: language bands, temperature 100, 'xy'
    ("Cat", dict(in_pixels=False, temperature=100, grid_indexing="xy"), (3, 3000)),
    # pixel bands on the pixel grid (linear bands), half layout
    ("Cat", dict(in_pixels=True, linear_bands=True, rotate_half=True), (2000, 3)),
    # a centered grid with pixel bands, 'max' normalization, a reference shape
    (
        "Sep",
        dict(in_pixels=True, grid_type="centered", normalize_coords="max", ref_feat_shape=(7, 5)),
        (999, 3),
    ),
]


@pytest.mark.parametrize(("kind", "kwargs", "shape"), AXIAL)
def test_axial_matches_float64(kind, kwargs, shape):
    cls = sincos.RotaryEmbeddingCat if kind == "Cat" else sincos.RotaryEmbedding
    m = cls(32, **kwargs)
    want_sin, want_cos = rotary64(m, shape)
    before = m.get_embed(shape)
    with patched_rotary_embeddings(m):
        got = m.get_embed(shape)
    got_sin, got_cos = got.chunk(2, -1) if kind == "Cat" else got
    assert got_sin.dtype == torch.float32 and got_sin.shape == want_sin.shape
    assert err(got_sin, want_sin) < TOL and err(got_cos, want_cos) < TOL
    old = before.chunk(2, -1) if kind == "Cat" else before
    if kwargs.get("ref_feat_shape") is None:  # large positions: timm's float32 is off
        assert max(err(old[0], want_sin), err(old[1], want_cos)) > 10 * TOL


def test_cached_table_batch_embeds_and_forward():
    m = sincos.RotaryEmbeddingCat(32, in_pixels=False, feat_shape=[40, 700], ref_feat_shape=[3, 7])
    free = sincos.RotaryEmbeddingCat(32, in_pixels=False, temperature=100)
    x = torch.randn(2, 32, 5, 6)
    before, before_fwd = m.get_embed().clone(), free(x)
    patch_rotary_embeddings(m)
    want = np.concatenate(rotary64(m, (40, 700)), -1)
    assert err(m.get_embed(), want) < TOL
    m.update_feat_shape([50, 600])  # the resized cache is exact too
    assert err(m.get_embed(), np.concatenate(rotary64(m, (50, 600)), -1)) < TOL
    twin = pickle.loads(pickle.dumps(copy.deepcopy(m)))  # a patched module copies
    assert torch.equal(twin.get_embed(), m.get_embed())
    with patched_rotary_embeddings(free):
        padded = free.get_batch_embeds([(3, 4000), (2, 5)], seq_len=12000)
        for row, shape in zip(padded, [(3, 4000), (2, 5)], strict=True):
            n = math.prod(shape)
            assert err(row[:n], np.concatenate(rotary64(free, shape), -1)) < TOL
            assert not row[n:].any()
        assert not torch.equal(free(x), before_fwd)
    assert torch.equal(free(x), before_fwd)
    unpatch_rotary_embeddings(m)  # the cache resized while patched: timm's again
    assert m.get_embed().shape == (30000, 64)
    m.update_feat_shape([40, 700])
    assert torch.equal(m.get_embed(), before)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=100.0),
        dict(
            min_period=0.01,
            max_period=100.0,
            rotate_half=False,
            normalize_coords="min",
            grid_indexing="xy",
            grid_offset=0.5,
        ),
    ],
)
def test_dinov3_matches_float64(kwargs):
    m = sincos.RotaryEmbeddingDinoV3(32, **kwargs)
    shape = (1500, 3)
    with patched_rotary_embeddings(m):
        got = m.get_embed(list(shape))
    assert err(got, dinov3_64(m, shape)) < TOL
    cached = sincos.RotaryEmbeddingDinoV3(32, feat_shape=[64, 48], **kwargs)
    patch_rotary_embeddings(cached)
    assert err(cached.get_embed(), dinov3_64(cached, (64, 48))) < TOL


def test_mrope_matches_float64():
    m = sincos.RotaryEmbeddingMRope(32, mrope_section=(4, 4, 4))
    before = m.get_embed([3, 3000])
    with patched_rotary_embeddings(m):
        got = m.get_embed([3, 3000])
    want = mrope64(m, (3, 3000))
    assert err(got, want) < TOL < err(before, want)


def test_fourier_embed_matches_float64():
    m = sincos.FourierEmbed(max_res=224, num_bands=8)
    x = torch.randn(1, 2, 700, 3)
    before = m(x)
    with patched_rotary_embeddings(m):
        got = m(x)
    g = grid64((700, 3), "pixel")[..., None]  # (H, W, 2, 1)
    pos = g * bands64(32, True, 224, linear=True)
    emb = np.concatenate([g, np.sin(pos), np.cos(pos)], -1)  # (H, W, 2, 17)
    emb = np.swapaxes(emb, -1, -2).reshape(700 * 3, -1)
    want = np.concatenate([x.permute(0, 2, 3, 1).reshape(700 * 3, 2).numpy(), emb], -1)
    assert got.shape == before.shape == (1, 700 * 3, 2 + 34)
    assert err(got[0], want) < TOL < err(before[0], want)
    m.keep_spatial = True  # the channels-first layout: the same numbers
    small = x[..., :9, :]
    theirs = sincos.FourierEmbed.forward(m, small)
    with patched_rotary_embeddings(m):
        ours = m(small)
    assert ours.shape == theirs.shape == (1, 2 + 34, 9, 3)
    assert torch.allclose(ours, theirs, atol=1e-4)


def test_training_augmentation_runs_timm_code():
    m = sincos.RotaryEmbeddingDinoV3(32, shift_coords=0.5, jitter_coords=1.5).train()
    patch_rotary_embeddings(m)
    torch.manual_seed(3)
    got = m.get_embed([4, 4])
    unpatch_rotary_embeddings(m)
    torch.manual_seed(3)
    assert torch.equal(got, m.get_embed([4, 4]))


# -- whole tiny models --------------------------------------------------------------------

MODELS = [
    ("vit_base_patch16_rope_reg1_gap_256", dict(img_size=64, embed_dim=64, num_heads=2)),
    ("eva02_tiny_patch14_224", dict(img_size=56, embed_dim=64, num_heads=2)),
    ("vit_small_patch16_dinov3", dict(img_size=64, embed_dim=64, num_heads=2)),
    ("vit_pe_core_tiny_patch16_384", dict(img_size=64, embed_dim=64, num_heads=2)),
]


@pytest.mark.parametrize(("name", "kwargs"), MODELS)
def test_tiny_model_outputs(name, kwargs):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, depth=1, **kwargs).eval()
    x = torch.randn(1, 3, kwargs["img_size"], kwargs["img_size"])
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        before = model(x)
        patch_rotary_embeddings(model)
        assert patch_rotary_embeddings(model) is model  # twice patches once
        with forbid_host_reads():
            after = model(x)
        assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)
        now = model.state_dict()
        assert now.keys() == state.keys()
        assert all(torch.equal(now[k], state[k]) for k in state)
        assert torch.equal(unpatch_rotary_embeddings(model)(x), before)


def test_refusals():
    mixed = timm.create_model(
        "vit_small_patch16_rope_mixed_224",
        pretrained=False,
        img_size=32,
        depth=1,
        embed_dim=32,
        num_heads=2,
    )
    with pytest.raises(ValueError, match=r"RotaryEmbeddingMixed at 'rope'.*learned"):
        patch_rotary_embeddings(mixed)
    with pytest.warns(UserWarning, match="RotaryEmbeddingMixed"):
        patch_rotary_embeddings(mixed, strict=False)
    assert not any("_pe_core_exact_rotary" in vars(m) for m in mixed.modules())
    with pytest.raises(ValueError, match="Sequential has no rotary-embedding module"):
        patch_rotary_embeddings(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    odd = sincos.RotaryEmbeddingCat(32, in_pixels=False)
    odd.bands.mul_(2)
    with pytest.raises(ValueError, match="bands buffer differs"):
        patch_rotary_embeddings(odd)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "timm.layers.pos_embed_sincos.RotaryEmbeddingDinoV3" in covered_classes()


def test_compiled_fullgraph():
    m = sincos.RotaryEmbeddingCat(32, in_pixels=False, temperature=100)
    patch_rotary_embeddings(m)
    x = torch.randn(1, 32, 3, 4)
    compiled = torch.compile(m, fullgraph=True, backend="eager")
    assert torch.allclose(compiled(x), m(x), atol=1e-6)


def test_resample_hook_loads_like_timm():
    """pe_core.resample's load hook with its defaults gives the position table timm's
    own ``checkpoint_filter_fn`` gives (``resample_abs_pos_embed``) on a real ViT."""
    checkpoint_filter_fn = timm.models.vision_transformer.checkpoint_filter_fn
    from pe_core.resample import pos_embed_load_hook

    torch.manual_seed(0)
    small = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, depth=1)
    big = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=112, depth=1)
    theirs = checkpoint_filter_fn(small.state_dict(), big)["pos_embed"]
    big.register_load_state_dict_pre_hook(pos_embed_load_hook("pos_embed"))
    big.load_state_dict(small.state_dict())
    assert big.pos_embed.shape == theirs.shape == (1, 1 + 7 * 7, 192)
    assert torch.allclose(big.pos_embed, theirs, atol=1e-6)
