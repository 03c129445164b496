"""Claims the docs make about a peer library, checked against the installed peer at the
peer's own defaults: Allegro's rotary tables (diffusers) and SwinV2's coordinates of a
window of height 1 (transformers; timm's rule restated)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from pe_core import apply_rope, swinv2_coords_table
from pe_core.rope_nd import ALLEGRO_INTERPOLATION_SCALE, allegro_frequencies
from tests.conftest import assert_close, assert_equal, positions_on, to_numpy

# --------------------------------------------------------------------------- Allegro

#: A small latent video: frames, and the pixel height and width the pipeline is given
#: (the VAE's 8x and the transformer's patch 2 make a 4 x 5 token grid).
ALLEGRO_FRAMES, ALLEGRO_HEIGHT, ALLEGRO_WIDTH = 5, 4 * 16, 5 * 16


def _allegro_reference(x, grids, head_dim, scales, base=10000.0):
    """diffusers' ``get_3d_rotary_pos_embed_allegro`` + ``apply_rotary_emb_allegro``,
    restated in float64: the features split in three blocks, each a rotate-half by
    ``(index / scale) * base ** (-i / s)``."""
    x = np.asarray(x, dtype=np.float64)
    s = head_dim // 6
    omega = base ** (-np.arange(s) / s)
    out = []
    for block, index, scale in zip(np.split(x, 3, axis=-1), grids, scales, strict=True):
        angle = (np.asarray(index, dtype=np.float64) / scale)[..., None] * omega
        cos, sin = np.cos(angle), np.sin(angle)
        a, b = block[..., :s], block[..., s:]
        out.append(np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1))
    return np.concatenate(out, axis=-1)


def _allegro_grid(frames, rows, cols):
    grid = np.meshgrid(np.arange(frames), np.arange(rows), np.arange(cols), indexing="ij")
    return np.stack([g.reshape(-1) for g in grid], axis=-1)  # (tokens, 3): t, h, w


def test_allegro_matches_the_diffusers_pipeline_at_its_defaults():
    """The docs' Allegro call at diffusers' own positions and scales (the transformer's
    default ``interpolation_scale_t, _h, _w`` and the pipeline's rotary tables)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import AllegroTransformer3DModel
    from diffusers.models.embeddings import apply_rotary_emb_allegro
    from diffusers.pipelines.allegro.pipeline_allegro import AllegroPipeline

    head_dim = 24
    model = AllegroTransformer3DModel(
        num_layers=1,
        num_attention_heads=1,
        attention_head_dim=head_dim,
        cross_attention_dim=head_dim,
        caption_channels=8,
        sample_height=8,
        sample_width=8,
        sample_frames=4,
    )
    config = model.config
    scales = (
        config.interpolation_scale_t,
        config.interpolation_scale_h,
        config.interpolation_scale_w,
    )
    assert scales == ALLEGRO_INTERPOLATION_SCALE  # the helper's default is diffusers'
    pipeline = types.SimpleNamespace(vae_scale_factor_spatial=8, transformer=model)
    tables, grids = AllegroPipeline._prepare_rotary_positional_embeddings(
        pipeline, 1, ALLEGRO_HEIGHT, ALLEGRO_WIDTH, ALLEGRO_FRAMES, "cpu"
    )
    tokens = grids[0].shape[-1]
    assert tokens == ALLEGRO_FRAMES * 4 * 5
    x = torch.randn(2, 3, tokens, head_dim, generator=torch.Generator().manual_seed(0))
    want = apply_rotary_emb_allegro(x, tables, grids)  # (batch, heads, tokens, head_dim)

    pos = torch.stack(grids, dim=-1)  # diffusers' grid indices, (1, tokens, 3)
    got = apply_rope(
        x,
        pos[:, None],
        sections=(head_dim // 6,) * 3,
        section_layout="blocks",
        frequencies=allegro_frequencies(head_dim),
    )
    # diffusers rounds grid / scale, the angle and cos/sin to float32: a few 1e-7 here
    assert_close(got, want, atol=2e-6, backend="torch")
    exact = _allegro_reference(x.numpy(), [g[0].numpy() for g in grids], head_dim, scales)
    assert_close(got, torch.from_numpy(exact).float(), atol=1e-6, backend="torch")
    # the integer grid with the plain per-axis schedule is Allegro at scale 1, far off
    plain = apply_rope(
        x, pos[:, None], sections=(4, 4, 4), section_layout="blocks", frequencies="per_axis"
    )
    assert float((plain - want).abs().max()) > 0.5


@pytest.mark.parametrize("scales", [ALLEGRO_INTERPOLATION_SCALE, (1.0, 1.0, 1.0), (3.0, 0.5, 7.25)])
def test_allegro_frequencies_rotate_at_grid_over_scale(backend, scales):
    head_dim = 36
    grid = _allegro_grid(4, 3, 5)
    x = np.random.default_rng(1).standard_normal((2, len(grid), head_dim)).astype(np.float32)
    got = apply_rope(
        positions_on(backend, x),
        positions_on(backend, grid),
        sections=(head_dim // 6,) * 3,
        section_layout="blocks",
        frequencies=allegro_frequencies(head_dim, scales),
    )
    want = _allegro_reference(x, grid.T, head_dim, scales)
    assert_close(to_numpy(got), want, atol=1e-6)


def test_allegro_frequencies_fold_the_scale_into_the_per_axis_schedule():
    head_dim = 48
    s = head_dim // 6
    got = allegro_frequencies(head_dim, (2.2, 2.0, 4.0), base=500.0)
    per_axis = [500.0 ** (-i / s) for i in range(s)]
    want = [w / scale for scale in (2.2, 2.0, 4.0) for w in per_axis]
    np.testing.assert_allclose(got, want, rtol=4e-16)
    # scale 1 is the plain per-axis schedule, bit for bit
    x = np.random.default_rng(2).standard_normal((60, head_dim)).astype(np.float32)
    rope = dict(sections=(s,) * 3, section_layout="blocks")
    unscaled = allegro_frequencies(head_dim, (1, 1, 1))
    assert_equal(
        apply_rope(x, _allegro_grid(3, 4, 5), frequencies=unscaled, **rope),
        apply_rope(x, _allegro_grid(3, 4, 5), frequencies="per_axis", **rope),
    )


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((20,), ValueError, "multiple of 6.*Received: 20"),
        ((0,), ValueError, "head_dim"),
        ((12.0,), TypeError, "head_dim"),
        ((12, (2.2, 2.0)), ValueError, "three numbers"),
        ((12, 2.0), TypeError, "sequence of three"),
        ((12, (2.2, 0.0, 2.0)), ValueError, "interpolation_scale must be a finite number > 0"),
        ((12, (2.2, math.nan, 2.0)), ValueError, "nan"),
        ((12, (2.2, "2", 2.0)), TypeError, "'2'"),
        ((12, (2.2, 2.0, 2.0), 1.0), ValueError, "base"),
    ],
)
def test_allegro_frequencies_refuse(args, error, match):
    with pytest.raises(error, match=match):
        allegro_frequencies(*args)


# --------------------------------------------------------------------------- SwinV2

#: Windows of every kind: a single row, a single column, a single token, and full ones.
SWINV2_WINDOWS = [(1, 4), (1, 2), (4, 1), (1, 1), (2, 3), (3, 5), (7, 7)]
SWINV2_PRETRAINED = [None, (5, 4), (2, 2), (12, 12)]


def _f(x):
    return np.sign(x) * np.log2(np.abs(x) + 1.0) / 3.0


def _timm_coords(window, pretrained):
    """timm ``swin_transformer_v2.WindowAttention._make_pair_wise_relative_positions``
    (and the original SwinV2 code), restated in float64: each axis divided by its own
    ``pretrained - 1`` or, without one, ``window - 1`` (0 / 0 is NaN on an axis of 1)."""
    offsets = [np.arange(-(n - 1), n, dtype=np.float64) for n in window]
    divisors = pretrained if pretrained is not None else window
    with np.errstate(divide="ignore", invalid="ignore"):
        axes = [8.0 * d / (p - 1) for d, p in zip(offsets, divisors, strict=True)]
        dy, dx = np.meshgrid(_f(axes[0]), _f(axes[1]), indexing="ij")
    return np.stack([dy, dx], axis=-1)


@pytest.mark.parametrize("pretrained", SWINV2_PRETRAINED)
@pytest.mark.parametrize("window", SWINV2_WINDOWS)
def test_swinv2_coords_match_transformers_for_every_window(window, pretrained):
    pytest.importorskip("torch")
    from transformers import Swinv2Config
    from transformers.models.swinv2.modeling_swinv2 import Swinv2SelfAttention

    config = Swinv2Config(embed_dim=8, num_heads=[2], depths=[1])
    module = Swinv2SelfAttention(config, 8, 2, window, pretrained_window_size=pretrained or [0, 0])
    theirs32 = module.relative_coords_table[0].numpy()
    theirs = theirs32.astype(np.float64)
    ours = swinv2_coords_table(window, pretrained_window_size=pretrained)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    finite = np.isfinite(theirs)
    # transformers' only NaN: 0 / 0 on a width of 1 under a taller window; pe_core gives 0
    assert_equal(ours[~finite], np.zeros((~finite).sum(), np.float32))
    if not finite.all():
        assert pretrained is None and window[0] > 1 and window[1] == 1
    ulp = np.spacing(np.abs(theirs32[finite]).clip(1e-30)).astype(np.float64)
    ulps = np.abs(ours[finite] - theirs[finite]) / ulp
    assert ulps.max(initial=0.0) <= 1.0  # transformers' float32 log2 and divisions
    exact = swinv2_coords_table(window, pretrained_window_size=pretrained, dtype="float64")
    np.testing.assert_allclose(exact[finite], theirs[finite], rtol=2e-7, atol=0)


@pytest.mark.parametrize("pretrained", SWINV2_PRETRAINED)
@pytest.mark.parametrize("window", SWINV2_WINDOWS)
def test_swinv2_coords_timm_convention(window, pretrained):
    want = _timm_coords(window, pretrained)
    ours = swinv2_coords_table(
        window, pretrained_window_size=pretrained, convention="timm", dtype="float64"
    )
    finite = np.isfinite(want)
    np.testing.assert_allclose(ours[finite], want[finite], rtol=4e-16, atol=0)
    assert (ours[~finite] == 0).all()  # timm's 0 / 0 on an axis of 1: pe_core's 0
    default = swinv2_coords_table(window, pretrained_window_size=pretrained, dtype="float64")
    if pretrained is None and window[0] == 1 and window[1] > 2:  # where the two part
        assert not np.array_equal(ours, default)
    else:
        assert_equal(ours, default)


def test_swinv2_height_one_is_unnormalised():
    """transformers' ``elif window_size[0] > 1``: a (1, W) window keeps ``8 dx``."""
    table = swinv2_coords_table((1, 4), dtype="float64")
    np.testing.assert_allclose(table[0, :, 1], _f(8.0 * np.arange(-3, 4)), rtol=4e-16)
    assert (table[..., 0] == 0).all()


def test_swinv2_refuses_an_unknown_convention():
    with pytest.raises(ValueError, match=r"convention.*'hf'"):
        swinv2_coords_table((1, 4), convention="hf")
