"""``pe_core.integrations.diffusers``: diffusers' Timesteps, GaussianFourierProjection and
rotary embeddings made exact in place.

Each module is checked against a float64 restatement of diffusers' own formula (within
1e-6, at ``scale=1000`` timesteps and rotary ids to 1e4, where the unpatched modules are
off by up to 0.08), tiny models built in code (nothing downloaded) against their
unpatched outputs (float32 tolerance), and unpatching against the original outputs
(bitwise).
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from diffusers.models.embeddings import (  # noqa: E402
    GaussianFourierProjection,
    Timesteps,
    get_1d_rotary_pos_embed,
)
from diffusers.models.transformers.transformer_flux import FluxPosEmbed  # noqa: E402
from diffusers.models.transformers.transformer_hunyuan_video import (  # noqa: E402
    HunyuanVideoRotaryPosEmbed,
)
from diffusers.models.transformers.transformer_qwenimage import QwenEmbedRope  # noqa: E402
from diffusers.models.transformers.transformer_wan import WanRotaryPosEmbed  # noqa: E402

from pe_core.host_reads import forbid_host_reads  # noqa: E402
from pe_core.integrations.diffusers import (  # noqa: E402
    covered_classes,
    exact_get_1d_rotary_pos_embed,
    patch_positional_embeddings,
    patched_positional_embeddings,
    unpatch_positional_embeddings,
)

TOL = 1e-6


# -- float64 restatements of diffusers' formulas ----------------------------------------


def timesteps64(t, dim, flip, shift, scale, max_period=10000.0):
    half = dim // 2
    w = np.exp(-math.log(max_period) * np.arange(half) / (half - shift))
    angle = scale * np.asarray(t, np.float64)[:, None] * w
    emb = np.concatenate([np.sin(angle), np.cos(angle)], -1)
    if flip:
        emb = np.concatenate([emb[:, half:], emb[:, :half]], -1)
    return np.pad(emb, ((0, 0), (0, dim % 2)))


def rotary64(dim, pos, theta, interleave=True):
    w = 1.0 / theta ** (np.arange(0, dim, 2) / dim)
    angle = np.outer(np.asarray(pos, np.float64), w)
    if interleave:
        return np.repeat(np.cos(angle), 2, -1), np.repeat(np.sin(angle), 2, -1)
    return np.concatenate([np.cos(angle)] * 2, -1), np.concatenate([np.sin(angle)] * 2, -1)


def gap(a, b) -> float:
    return float(np.abs(np.asarray(a.detach().double()) - b).max())


IDS = np.concatenate([np.arange(0, 10_001, 97), [9_999.0, 10_000.0]])


# -- modules against float64 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("dim", "flip", "shift", "scale"),
    [(256, True, 0, 1000), (320, True, 0, 1), (255, False, 1, 1), (64, True, 1, 1000)],
)
def test_timesteps_are_exact_and_unpatch_restores(dim, flip, shift, scale) -> None:
    t = torch.tensor(np.linspace(0.0, 1000.0, 129), dtype=torch.float32)
    module = Timesteps(dim, flip, shift, scale=scale)
    before = module(t)
    ref = timesteps64(t.double().numpy(), dim, flip, shift, scale)
    patch_positional_embeddings(module)
    after = module(t)
    assert after.dtype == before.dtype == torch.float32
    assert after.shape == before.shape
    assert gap(after, ref) < TOL
    if scale == 1000:
        assert gap(before, ref) > 1e-3  # what the patch fixes
    unpatch_positional_embeddings(module)
    assert torch.equal(module(t), before)
    assert "forward" not in vars(module)


@pytest.mark.parametrize("scale", [1000, -1])
def test_timesteps_one_word_route_integer_and_float_timesteps_agree(scale) -> None:
    """Integer timesteps, the same as floats and pe_core.timestep_embedding give the
    same numbers (float64 reference); NaN or infinite timesteps give NaN rows (on the
    one-word route: more than a few timesteps, or any on a device)."""
    from pe_core import timestep_embedding
    from pe_core.integrations.diffusers import exact_get_timestep_embedding

    ints = torch.tensor([0, 1, 7, 500, 999, 10**6]).repeat(12)  # > 64: the device route
    ref = timesteps64(ints.double().numpy(), 33, True, 0, scale)
    for t in (ints, ints.float(), ints.double(), ints[:6]):
        out = exact_get_timestep_embedding(t, 33, True, 0, scale)
        assert out.dtype == torch.float32 and out.shape == (len(t), 33)
        assert gap(out, ref[: len(t)]) < TOL
    core = timestep_embedding(ints, 33, flip_sin_to_cos=True, downscale_freq_shift=0, scale=scale)
    assert gap(core, ref) < TOL
    bad = torch.tensor([float("nan"), float("inf")]).repeat(40)
    bad = exact_get_timestep_embedding(bad, 8, scale=1000)
    assert bool(torch.isnan(bad).all())


def test_timesteps_keep_diffusers_max_period() -> None:
    """diffusers' Timesteps never passes max_period: the default 10000 applies."""
    module = Timesteps(16, True, 0)
    t = torch.tensor([3.0, 500.0])
    patch_positional_embeddings(module)
    assert gap(module(t), timesteps64(t.numpy(), 16, True, 0, 1)) < TOL
    with pytest.raises(ValueError, match="1-D"):
        module(torch.tensor(3.0))


@pytest.mark.parametrize("freqs_dtype", ["float32", "float64"])
@pytest.mark.parametrize("real", ["interleave", "cat", "complex"])
def test_rotary_helper_is_exact_to_ids_1e4(freqs_dtype, real) -> None:
    dtype = getattr(torch, freqs_dtype)
    pos = torch.tensor(IDS, dtype=torch.float32)
    kwargs = {"use_real": real != "complex", "repeat_interleave_real": real == "interleave"}
    ours = exact_get_1d_rotary_pos_embed(56, pos, 10000.0, freqs_dtype=dtype, **kwargs)
    theirs = get_1d_rotary_pos_embed(56, pos, 10000.0, freqs_dtype=dtype, **kwargs)
    cos, sin = rotary64(56, IDS, 10000.0, interleave=real != "cat")
    if real == "complex":
        assert ours.dtype == theirs.dtype
        half = slice(None, None, 2)
        assert gap(ours.real, cos[:, half]) < TOL
        assert gap(ours.imag, sin[:, half]) < TOL
        return
    for got, want, ref in zip(ours, theirs, (cos, sin), strict=True):
        assert got.dtype == want.dtype == torch.float32
        assert got.shape == want.shape
        assert gap(got, ref) < TOL
        if freqs_dtype == "float32":
            assert gap(want, ref) > 1e-4  # diffusers' float32 angles


def test_rotary_helper_linear_and_ntk_factors() -> None:
    pos = torch.tensor(IDS, dtype=torch.float32)
    cos, sin = exact_get_1d_rotary_pos_embed(
        16, pos, 500.0, use_real=True, linear_factor=2.0, ntk_factor=3.0
    )
    w = 1.0 / 1500.0 ** (np.arange(0, 16, 2) / 16) / 2.0
    angle = np.repeat(np.outer(IDS, w), 2, -1)
    assert gap(cos, np.cos(angle)) < TOL
    assert gap(sin, np.sin(angle)) < TOL
    with pytest.raises(TypeError, match="theta"):
        exact_get_1d_rotary_pos_embed(16, pos, torch.tensor(500.0), use_real=True)
    with pytest.raises(ValueError, match="even"):
        exact_get_1d_rotary_pos_embed(15, pos)


@pytest.mark.parametrize("freqs_dtype", ["float32", "float64"])
@pytest.mark.parametrize("use_real", [True, False])
def test_rotary_helper_fractional_ids_at_frequencies_above_half_a_turn(
    freqs_dtype, use_real
) -> None:
    """A linear factor below 1 takes the fastest frequency to 10 rad per unit: fractional
    ids there are still exact (not NaN), in float32 and float64."""
    ids = [0.5, 3.25, 1e4 + 0.5, 7.0, 4097.75]
    out = exact_get_1d_rotary_pos_embed(
        8, torch.tensor(ids), 10000.0, use_real=use_real, linear_factor=0.1,
        freqs_dtype=getattr(torch, freqs_dtype),
    )  # fmt: skip
    angle = np.outer(ids, 1.0 / 10000.0 ** (np.arange(0, 8, 2) / 8) / 0.1)
    cos, sin = (out.real, out.imag) if not use_real else (out[0][:, ::2], out[1][:, ::2])
    assert gap(cos, np.cos(angle)) < TOL
    assert gap(sin, np.sin(angle)) < TOL


def flux_ids() -> torch.Tensor:
    rows = torch.tensor(IDS[::4], dtype=torch.float32)
    return torch.stack((torch.zeros_like(rows), rows, rows.flip(0)), dim=-1)


def test_flux_pos_embed_is_exact() -> None:
    module = FluxPosEmbed(theta=10000, axes_dim=[16, 56, 56])
    ids = flux_ids()
    patch_positional_embeddings(module)
    cos, sin = module(ids)
    parts = [rotary64(d, ids[:, i].double().numpy(), 10000.0) for i, d in enumerate((16, 56, 56))]
    assert gap(cos, np.concatenate([p[0] for p in parts], -1)) < TOL
    assert gap(sin, np.concatenate([p[1] for p in parts], -1)) < TOL


def test_hunyuan_video_rotary_is_exact_where_diffusers_uses_float32() -> None:
    module = HunyuanVideoRotaryPosEmbed(1, 1, [16, 56, 56], theta=256.0)
    hidden = torch.zeros(1, 1, 2, 3, 300)
    before = module(hidden)
    patch_positional_embeddings(module)
    cos, sin = module(hidden)
    grid = np.stack(np.meshgrid(np.arange(2), np.arange(3), np.arange(300), indexing="ij"))
    parts = [rotary64(d, grid[i].reshape(-1), 256.0) for i, d in enumerate((16, 56, 56))]
    ref_cos = np.concatenate([p[0] for p in parts], -1)
    assert gap(cos, ref_cos) < TOL
    assert gap(sin, np.concatenate([p[1] for p in parts], -1)) < TOL
    assert gap(before[0], ref_cos) > TOL  # diffusers' float32 frequencies
    unpatch_positional_embeddings(module)
    assert all(torch.equal(a, b) for a, b in zip(module(hidden), before, strict=True))


def test_wan_tables_are_exact_and_restored() -> None:
    module = WanRotaryPosEmbed(36, (1, 1, 1), max_seq_len=10_001)
    originals = (module.freqs_cos, module.freqs_sin)
    hidden = torch.zeros(1, 1, 1, 1, 10_001)
    patch_positional_embeddings(module)
    cos, sin = module(hidden)
    assert "freqs_cos" not in module.state_dict()
    dims = (12, 12, 12)
    width = rotary64(dims[2], np.arange(10_001), 10000.0)
    assert gap(cos[0, :, 0, -dims[2] :], width[0]) < TOL
    assert gap(sin[0, :, 0, -dims[2] :], width[1]) < TOL
    unpatch_positional_embeddings(module)
    assert module.freqs_cos is originals[0] and module.freqs_sin is originals[1]


def test_wan_tables_of_another_theta_are_refused() -> None:
    module = WanRotaryPosEmbed(36, (1, 1, 1), max_seq_len=64, theta=500.0)
    with pytest.raises(ValueError, match="theta"):
        patch_positional_embeddings(module)
    assert "_pe_core_exact_positional" not in vars(module)


@pytest.mark.parametrize(("log", "flip"), [(True, False), (False, True)])
def test_gaussian_fourier_projection_is_exact(log, flip) -> None:
    torch.manual_seed(0)
    module = GaussianFourierProjection(64, scale=16, log=log, flip_sin_to_cos=flip)
    x = torch.tensor(np.geomspace(0.002, 380.0, 201) if log else np.linspace(-5, 5, 201))
    x = x.float()
    before = module(x)
    xs = np.log(x.double().numpy()) if log else x.double().numpy()
    angle = np.outer(xs, module.weight.double().numpy()) * 2 * np.pi
    parts = [np.sin(angle), np.cos(angle)]
    ref = np.concatenate(parts[::-1] if flip else parts, -1)
    patch_positional_embeddings(module)
    after = module(x)
    assert after.dtype == torch.float32
    assert gap(after, ref) < TOL
    assert gap(before, ref) > 1e-5
    assert list(module.state_dict()) == ["weight"]
    unpatch_positional_embeddings(module)
    assert torch.equal(module(x), before)


def test_gaussian_fourier_log_of_bad_inputs_is_nan() -> None:
    module = GaussianFourierProjection(8, scale=16)
    patch_positional_embeddings(module)
    x = torch.tensor([0.0, -1.0, float("inf"), 1e-40, 1.0])  # 1e-40: subnormal
    out = module(x)
    assert torch.isnan(out[:3]).all()
    ref = np.outer(np.log(x[3:].double().numpy()), module.weight.double().numpy()) * 2 * np.pi
    assert gap(out[3:, :8], np.sin(ref)) < TOL


def test_gaussian_fourier_fixed_point_log_over_float32_range() -> None:
    """The int64 fixed-point log(x) and word products: x from subnormal to 3e38 and
    within an ulp of 1, weights to 250 (float64 reference: its own error below 1e-11
    here); weights from 2**22 give NaN columns, not a wrong number."""
    torch.manual_seed(1)
    module = GaussianFourierProjection(32, scale=64.0)
    with torch.no_grad():
        module.weight[0] = 250.0
        module.weight[1] = 3e-9
    ones = [1.0 - 2.0**-24, 1.0, 1.0 + 2.0**-23]
    x = torch.tensor([1e-45, 1e-39, 1e-20, 0.37, *ones, 7.5, 1e10, 3e38], dtype=torch.float32)
    patch_positional_embeddings(module)
    out = module(x)
    angle = np.outer(np.log(x.double().numpy()), module.weight.double().numpy()) * 2 * np.pi
    assert gap(out, np.concatenate([np.sin(angle), np.cos(angle)], -1)) < TOL
    with torch.no_grad():
        module.weight[2] = 2.0**22
    out = module(x)
    assert bool(torch.isnan(out[:, 2]).all()) and not bool(torch.isnan(out[:, 3]).any())


def qwen_table64(dim, index, theta=10000.0):
    w = 1.0 / theta ** (np.arange(0, dim, 2) / dim)
    return np.exp(1j * np.outer(np.asarray(index, np.float64), w))


def complex_gap(a, b) -> float:
    return float(np.abs(a.detach().to(torch.complex128).numpy() - b).max())


@pytest.mark.parametrize("kind", ["qwen", "layered", "nucleus"])
def test_qwen_rope_tables_are_exact_and_caches_bypassed(kind) -> None:
    from diffusers.models.transformers.transformer_nucleusmoe_image import NucleusMoEEmbedRope
    from diffusers.models.transformers.transformer_qwenimage import QwenEmbedLayer3DRope

    layered = kind == "layered"
    cls = {"qwen": QwenEmbedRope, "layered": QwenEmbedLayer3DRope}.get(kind, NucleusMoEEmbedRope)
    module = cls(10000, [16, 56, 56], scale_rope=True)
    shapes = [[(1, 6, 8), (1, 4, 4)]] if layered else [(1, 6, 8)]
    call = lambda: module(shapes, max_txt_seq_len=7, device=torch.device("cpu"))  # noqa: E731
    before = call()  # fills diffusers' class-level caches
    originals = (module.pos_freqs, module.neg_freqs)
    patch_positional_embeddings(module)
    index = np.arange(4096)
    assert complex_gap(module.pos_freqs[:, 8:36], qwen_table64(56, index)) < TOL
    assert complex_gap(module.neg_freqs[:, 36:], qwen_table64(56, -index[::-1] - 1)) < TOL
    assert complex_gap(originals[0][:, 8:36], qwen_table64(56, index)) > 1e-5
    after = call()
    for a, b in zip(after, before, strict=True):
        assert a.dtype == b.dtype == torch.complex64 and a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-5)
    txt = after[1]
    assert complex_gap(txt[:, 8:36], qwen_table64(56, np.arange(4, 11))) < TOL
    assert "pos_freqs" not in module.state_dict()
    unpatch_positional_embeddings(module)
    assert module.pos_freqs is originals[0] and module.neg_freqs is originals[1]
    assert all(torch.equal(a, b) for a, b in zip(call(), before, strict=True))
    copied = pickle.loads(pickle.dumps(patch_positional_embeddings(module)))
    assert torch.equal(copied(shapes, max_txt_seq_len=7)[1], after[1])


def test_qwen_image21_rope_and_timesteps_are_exact() -> None:
    from diffusers.models.transformers.transformer_qwenimage21 import (
        QwenImage21Rope,
        QwenImage21TemporalTimesteps,
    )

    rope = QwenImage21Rope(10000, [16, 56, 56])
    mask = torch.tensor([False] * 3 + [True] * 12 + [False] * 2)
    before = rope([(1, 3, 4)], mask, torch.device("cpu"))
    patch_positional_embeddings(rope)
    index = np.concatenate([np.arange(8192), -np.arange(1024)[::-1] - 1])
    assert complex_gap(rope.freqs[2], qwen_table64(56, index)) < TOL
    assert torch.allclose(rope([(1, 3, 4)], mask, torch.device("cpu")), before, atol=1e-5)
    unpatch_positional_embeddings(rope)
    assert torch.equal(rope([(1, 3, 4)], mask, torch.device("cpu")), before)

    proj = QwenImage21TemporalTimesteps(257)
    t = torch.tensor(np.linspace(0.0, 1.0, 101), dtype=torch.float32)
    before = proj(t)
    patch_positional_embeddings(proj)
    ref = timesteps64(t.double().numpy(), 257, True, 0, 1000)
    assert proj(t).dtype == torch.float32 and gap(proj(t), ref) < TOL
    assert gap(before, ref) > 1e-5
    unpatch_positional_embeddings(proj)
    assert torch.equal(proj(t), before)
    with pytest.raises(ValueError, match="max_period"):
        patch_positional_embeddings(QwenImage21TemporalTimesteps(16, max_period=500))


def test_cogview4_rotary_is_exact() -> None:
    from diffusers.models.transformers.transformer_cogview4 import CogView4RotaryPosEmbed

    module = CogView4RotaryPosEmbed(64, 2, (10_001, 10_001))
    hidden = torch.zeros(1, 1, 14, 206)
    before = module(hidden)
    patch_positional_embeddings(module)
    cos, sin = module(hidden)
    rows = np.arange(7) * 10_001 // 7
    cols = np.arange(103) * 10_001 // 103
    w = 1.0 / 10000.0 ** (np.arange(0, 32, 2) / 32)
    grid = np.concatenate(
        np.broadcast_arrays(np.outer(rows, w)[:, None], np.outer(cols, w)[None]), -1
    ).reshape(7 * 103, -1)
    angle = np.concatenate([grid, grid], -1)
    assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL
    assert gap(before[1], np.sin(angle)) > 1e-5
    unpatch_positional_embeddings(module)
    assert all(torch.equal(a, b) for a, b in zip(module(hidden), before, strict=True))


def test_skyreels_timesteps_and_stable_audio_fourier_are_exact() -> None:
    from diffusers.models.transformers.stable_audio_transformer import (
        StableAudioGaussianFourierProjection,
    )
    from diffusers.models.transformers.transformer_skyreels_v2 import SkyReelsV2Timesteps

    module = SkyReelsV2Timesteps(64, flip_sin_to_cos=True)
    t = torch.tensor(np.linspace(0.0, 1000.0, 129), dtype=torch.float32)
    before = module(t)
    patch_positional_embeddings(module)
    assert module(t).dtype == before.dtype
    assert gap(module(t), timesteps64(t.double().numpy(), 64, True, 0, 1)) < TOL
    unpatch_positional_embeddings(module)
    assert torch.equal(module(t), before)

    torch.manual_seed(0)
    proj = StableAudioGaussianFourierProjection(32, scale=16, flip_sin_to_cos=True)
    x = torch.tensor(np.geomspace(0.002, 380.0, 51), dtype=torch.float32)
    before = proj(x)
    angle = np.outer(np.log(x.double().numpy()), proj.weight.double().numpy()) * 2 * np.pi
    patch_positional_embeddings(proj)
    assert gap(proj(x), np.concatenate([np.cos(angle), np.sin(angle)], -1)) < TOL
    unpatch_positional_embeddings(proj)
    assert torch.equal(proj(x), before)


def grid64(angles):
    """``[t | h | w]`` angles over the ``(T, H, W)`` grid of three axes' tables."""
    sizes = tuple(a.shape[0] for a in angles)
    parts = []
    for axis, a in enumerate(angles):
        shape = [1, 1, 1, a.shape[1]]
        shape[axis] = sizes[axis]
        parts.append(np.broadcast_to(a.reshape(shape), (*sizes, a.shape[1])))
    return np.concatenate(parts, -1)


def test_cosmos_and_glm_image_rotary_are_exact() -> None:
    from diffusers.models.transformers.transformer_cosmos import CosmosRotaryPosEmbed
    from diffusers.models.transformers.transformer_glm_image import GlmImageRotaryPosEmbed

    module = CosmosRotaryPosEmbed(96, max_size=(128, 240, 240), rope_scale=(2.0, 1.0, 3.0))
    hidden = torch.zeros(1, 1, 7, 6, 10)
    before = module(hidden, fps=30)
    patch_positional_embeddings(module)
    cos, sin = module(hidden, fps=30)
    dims = (32, 32, 32)
    thetas = [10000.0 * r ** (d / (d - 2)) for r, d in zip((2.0, 1.0, 3.0), dims, strict=True)]
    pos = [np.arange(7) / 30 * 24, np.arange(3), np.arange(5)]
    angles = [
        np.outer(p, 1.0 / t ** (np.arange(0, d, 2) / d))
        for p, t, d in zip(pos, thetas, dims, strict=True)
    ]
    grid = grid64(angles).reshape(7 * 3 * 5, -1)
    angle = np.concatenate([grid, grid], -1)
    assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL
    assert torch.allclose(cos, before[0], atol=1e-5)
    unpatch_positional_embeddings(module)
    assert all(torch.equal(a, b) for a, b in zip(module(hidden, fps=30), before, strict=True))

    glm = patch_positional_embeddings(GlmImageRotaryPosEmbed(64, 1, theta=10000.0))
    cos, sin = glm(torch.zeros(1, 1, 2, 10_001))
    w = 1.0 / 10000.0 ** (np.arange(0, 32, 2) / 32)
    cols = np.outer(np.arange(10_001), w)
    assert gap(cos[10_001:, 16:32], np.cos(cols)) < TOL
    assert gap(sin[10_001:, 48:], np.sin(cols)) < TOL


def test_kandinsky_rotary_is_exact() -> None:
    from diffusers.models.transformers import transformer_kandinsky as k5
    from diffusers.models.transformers import transformer_kandinsky6 as k6

    def matrices64(angle):
        c, s = np.cos(angle), np.sin(angle)
        return np.stack([c, -s, s, c], -1).reshape(*angle.shape, 2, 2)[..., None, :, :, :]

    w = np.exp(-math.log(10000.0) * np.arange(16) / 16)
    pos = torch.tensor(IDS, dtype=torch.long)
    for module in (k5.Kandinsky5RoPE1D(32, max_pos=10_001), k6.Kandinsky6RoPE1D(32, 10_001)):
        before = module(pos)
        patch_positional_embeddings(module)
        after = module(pos)
        assert after.shape == before.shape and after.dtype == before.dtype
        assert gap(after, matrices64(np.outer(IDS, w))) < TOL
        assert gap(before, matrices64(np.outer(IDS, w))) > 1e-5
        unpatch_positional_embeddings(module)
        assert torch.equal(module(pos), before)

    ids = (torch.arange(3), torch.arange(4) + 100, torch.arange(5) + 120)
    scale = (1.0, 2.0, 3.0)
    module = k6.Kandinsky6RoPE3D((16, 16, 32))
    before = module(ids, scale)
    patch_positional_embeddings(module)
    after = module(ids, scale)
    ws = [np.exp(-math.log(10000.0) * np.arange(d // 2) / (d // 2)) for d in (16, 16, 32)]
    angles = [np.outer(p.numpy(), w) / f for p, w, f in zip(ids, ws, scale, strict=True)]
    grid = grid64(angles)
    assert gap(after, matrices64(grid)) < TOL
    k5_3d = patch_positional_embeddings(k5.Kandinsky5RoPE3D((16, 16, 32)))
    assert gap(k5_3d((2, 3, 4, 5), ids, scale), matrices64(np.stack([grid] * 2))) < TOL
    unpatch_positional_embeddings(module)
    assert torch.equal(module(ids, scale), before)
    odd = k6.Kandinsky6RoPE1D(32, 64)
    odd.max_period = 500.0  # its tables are no longer what the forward would compute
    with pytest.raises(ValueError, match="other frequencies"):
        patch_positional_embeddings(odd)


def ltx64(g, dim, theta, elems):
    """LTX's interleaved (cos, sin) of ``w (2 g - 1)``, ``g`` of shape (B, N, axes)."""
    w = theta ** np.linspace(0, 1, dim // elems) * np.pi / 2
    angle = np.swapaxes((g[..., None] * 2 - 1) * w, -1, -2).reshape(*g.shape[:2], -1)
    pad = [(0, 0)] * (angle.ndim - 1) + [(dim % elems, 0)]
    cos = np.pad(np.repeat(np.cos(angle), 2, -1), pad, constant_values=1.0)
    return cos, np.pad(np.repeat(np.sin(angle), 2, -1), pad)


def assert_ltx(module, args, kwargs, ref, loose) -> None:
    """Patched within 1e-6 of ``ref``; unpatched within its float32 angles (``loose``)
    of it; unpatch bitwise."""
    before = module(*args, **kwargs)
    patch_positional_embeddings(module)
    after = module(*args, **kwargs)
    for got, was, want in zip(after, before, ref, strict=True):
        assert got.shape == was.shape and got.dtype == was.dtype == torch.float32
        assert gap(got, want) < TOL
        assert gap(was, want) < loose
    unpatch_positional_embeddings(module)
    assert all(torch.equal(a, b) for a, b in zip(module(*args, **kwargs), before, strict=True))


def test_ltx_video_rotary_is_exact() -> None:
    from diffusers.models.transformers.transformer_ltx import LTXVideoRotaryPosEmbed

    hidden = torch.zeros(2, 60, 8)
    grid = np.stack(np.meshgrid(*map(np.arange, (3, 4, 5)), indexing="ij"), -1).reshape(1, -1, 3)
    grid = np.repeat(grid.astype(np.float64), 2, 0)
    scale = (8 / 25, 32, 32)
    g = grid * np.array(scale) / np.array([20, 2048, 2048])
    module = LTXVideoRotaryPosEmbed(130)
    assert_ltx(module, (hidden, 3, 4, 5, scale), {}, ltx64(g, 130, 1e4, 6), 5e-3)
    assert_ltx(module, (hidden, 3, 4, 5), {}, ltx64(grid, 130, 1e4, 6), 5e-2)
    coords = torch.rand(2, 3, 60, generator=torch.Generator().manual_seed(0)) * 100
    g = coords.double().numpy().transpose(0, 2, 1) / np.array([20, 2048, 2048])
    assert_ltx(module, (hidden,), {"video_coords": coords}, ltx64(g, 130, 1e4, 6), 5e-2)


@pytest.mark.parametrize("modality", ["video", "audio"])
@pytest.mark.parametrize("rope_type", ["interleaved", "split"])
def test_ltx2_rotary_is_exact(modality, rope_type) -> None:
    from diffusers.models.transformers.transformer_ltx2 import LTX2AudioVideoRotaryPosEmbed

    module = LTX2AudioVideoRotaryPosEmbed(
        128, modality=modality, rope_type=rope_type, num_attention_heads=4
    )
    if modality == "video":
        coords = module.prepare_video_coords(2, 3, 4, 5, torch.device("cpu"))
        bases = np.array([20, 2048, 2048])
    else:
        coords = module.prepare_audio_coords(2, 7, torch.device("cpu"))
        bases = np.array([20])
    c = coords.double().numpy()
    g = ((c[..., 0] + c[..., 1]) / 2).transpose(0, 2, 1) / bases
    elems = 2 * g.shape[-1]
    cos, sin = ltx64(g, 128, 1e4, elems)
    if rope_type == "split":  # the same angles, once each, padded to dim // 2, per head
        w = 1e4 ** np.linspace(0, 1, 128 // elems) * np.pi / 2
        angle = np.swapaxes((g[..., None] * 2 - 1) * w, -1, -2).reshape(*g.shape[:2], -1)
        pad = [(0, 0), (0, 0), (64 - angle.shape[-1], 0)]
        cos = np.pad(np.cos(angle), pad, constant_values=1.0)
        sin = np.pad(np.sin(angle), pad)
        cos, sin = (x.reshape(2, -1, 4, 16).swapaxes(1, 2) for x in (cos, sin))
    assert_ltx(module, (coords,), {}, (cos, sin), 5e-3)


def test_ltx2_vae_rotary_is_exact() -> None:
    from diffusers.models.autoencoders.ltx2_diffusion_decoder import (
        LTX2VideoVaeRotaryPosEmbed3D,
    )

    module = LTX2VideoVaeRotaryPosEmbed3D(32)
    x = torch.randn(1, 2, 3, 1000, 1, 32, generator=torch.Generator().manual_seed(0))
    before = module(x)
    patch_positional_embeddings(module)
    after = module(x)
    dims = module.rope_dim_split
    xs = x.double().numpy()
    parts, start = [], 0
    for axis, d in enumerate(dims):
        n = x.shape[axis + 1]
        angle = np.outer(np.arange(n), 1.0 / 10000.0 ** (np.arange(0, d, 2) / d))
        shape = [1, 1, 1, 1, 1, d // 2]
        shape[axis + 1] = n
        c, s = np.cos(angle).reshape(shape), np.sin(angle).reshape(shape)
        pairs = xs[..., start : start + d].reshape(*xs.shape[:-1], d // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        rotated = np.stack([even * c - odd * s, even * s + odd * c], -1)
        parts.append(rotated.reshape(*xs.shape[:-1], d))
        start += d
    ref = np.concatenate(parts, -1)
    assert gap(after, ref) < 1e-5  # x of size ~4: a few float32 roundings of x
    assert gap(after, ref) < gap(before, ref)
    unpatch_positional_embeddings(module)
    assert torch.equal(module(x), before)


def test_helios_omnigen_and_audio_dit_rotary_are_exact() -> None:
    from diffusers.models.transformers.transformer_helios import HeliosRotaryPosEmbed
    from diffusers.models.transformers.transformer_longcat_audio_dit import (
        AudioDiTRotaryEmbedding,
    )
    from diffusers.models.transformers.transformer_omnigen import OmniGenSuScaledRotaryEmbedding

    helios = HeliosRotaryPosEmbed((16, 24, 24), 10000.0)
    frames = torch.tensor([[0.0, 5000.0, 10_000.0]])
    before = helios(frames, 2, 3, torch.device("cpu"))
    patch_positional_embeddings(helios)
    out = helios(frames, 2, 3, torch.device("cpu"))
    assert out.shape == before.shape and out.dtype == before.dtype
    t_angle = np.outer([0.0, 5000.0, 10_000.0], 1.0 / 1e4 ** (np.arange(0, 16, 2) / 16))
    t_angle = np.repeat(t_angle, 2, -1)  # (frames, 16)
    assert gap(out[0, :16, :, 1, 2].T, np.cos(t_angle)) < TOL
    assert gap(out[0, 64:80, :, 1, 2].T, np.sin(t_angle)) < TOL
    x_angle = np.repeat(2.0 / 1e4 ** (np.arange(0, 24, 2) / 24), 2)
    assert gap(out[0, 40:64, 1, 1, 2], np.cos(x_angle)) < TOL
    unpatch_positional_embeddings(helios)
    assert torch.equal(helios(frames, 2, 3, torch.device("cpu")), before)

    factors = {"short_factor": [1.0 + 0.1 * i for i in range(8)], "long_factor": [3.0]}
    omnigen = OmniGenSuScaledRotaryEmbedding(16, 131072, 4096, rope_scaling=factors)
    scale = math.sqrt(1 + math.log(32) / math.log(4096))
    patch_positional_embeddings(omnigen)
    for n, ext in ((4096, np.array(factors["short_factor"])), (10_001, 3.0)):
        ids = torch.arange(n)[None]
        cos, sin = omnigen(torch.zeros(1), ids)
        angle = np.outer(np.arange(n), 1.0 / (ext * 1e4 ** (np.arange(0, 16, 2) / 16)))
        angle = np.concatenate([angle, angle], -1)
        assert gap(cos, np.cos(angle) * scale) < TOL and gap(sin, np.sin(angle) * scale) < TOL
    unpatch_positional_embeddings(omnigen)

    audio = AudioDiTRotaryEmbedding(32, base=100000.0)
    hidden = torch.zeros(1, 10_001, 4)
    before = audio(hidden)
    patch_positional_embeddings(audio)
    cos, sin = audio(hidden)
    angle = np.outer(np.arange(10_001), 1.0 / 1e5 ** (np.arange(0, 32, 2) / 32))
    angle = np.concatenate([angle, angle], -1)
    assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL
    assert gap(before[0], np.cos(angle)) > 1e-4
    unpatch_positional_embeddings(audio)
    assert all(torch.equal(a, b) for a, b in zip(audio(hidden), before, strict=True))


def test_rotary_of_fractional_positions_is_exact_without_float64() -> None:
    """Fractional positions at frequencies above half a turn (LTX's coordinates, Stable
    Audio 3's timesteps) are split so that float32 arithmetic stays exact."""
    from pe_core.integrations._diffusers_helpers import exact_cos_sin_table

    x = torch.tensor(np.random.default_rng(0).random(300) * 2000 - 1000, dtype=torch.float32)
    omegas = (6.3e4, 1570.3, 7.1, 0.3)
    angle = np.outer(x.double().numpy(), omegas)  # within 1e-8 of exact here
    for wide in (True, False):
        cos, sin = exact_cos_sin_table(x, omegas, wide)
        assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rotary_word_path_integer_and_float_ids_agree_and_are_exact(dtype) -> None:
    """The one-word reduction: integer ids and the same ids as floats give the same
    numbers; fractional ids (below a half turn per position), ids to 2**62 (mpmath)
    and NaN, infinite or too large ones (NaN rows)."""
    mpmath = pytest.importorskip("mpmath")
    from pe_core.integrations._diffusers_helpers import word_cos_sin

    working = getattr(torch, dtype)
    omegas = (1.0, 0.31, 1e-4, math.pi)
    ints = torch.tensor(IDS, dtype=torch.int64)
    c_int, s_int = word_cos_sin(ints, omegas, working)
    c_flt, s_flt = word_cos_sin(ints.float(), omegas, working)
    assert c_int.dtype == working and torch.equal(c_int, c_flt) and torch.equal(s_int, s_flt)
    angle = np.outer(IDS, omegas)
    assert gap(c_int, np.cos(angle)) < TOL and gap(s_int, np.sin(angle)) < TOL
    x = torch.tensor(np.random.default_rng(1).random(200) * 2e4 - 1e4, dtype=torch.float32)
    cos, sin = word_cos_sin(x, omegas, working)
    angle = np.outer(x.double().numpy(), omegas)
    assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL
    big = [2**62 + 12345, -(2**61) - 7, 2**53 + 1]
    cos, sin = word_cos_sin(torch.tensor(big), omegas, working)
    mpmath.mp.dps = 60
    for i, p in enumerate(big):
        for j, w in enumerate(omegas):
            a = mpmath.mpf(p) * mpmath.mpf(w)
            assert abs(float(cos[i, j]) - float(mpmath.cos(a))) < TOL
            assert abs(float(sin[i, j]) - float(mpmath.sin(a))) < TOL
    bad = torch.tensor([float("nan"), float("inf"), 2.0**63, 1e30])
    cos, sin = word_cos_sin(bad, omegas, working)
    assert bool(torch.isnan(cos).all()) and bool(torch.isnan(sin).all())


def inv_freq_angles(ids, theta, n, scale=1.0):
    return np.asarray(ids, np.float64)[..., None] * scale / theta ** (np.arange(n) / n)


def test_inv_freq_modules_are_exact_with_theta_found_from_their_buffer() -> None:
    from diffusers.models.autoencoders.autoencoder_kl_minimax_h3 import (
        MiniMaxH3VideoRotaryPosEmbed,
    )
    from diffusers.models.condition_embedders.condition_embedder_anima import (
        AnimaRotaryEmbedding,
    )
    from diffusers.models.transformers.transformer_cosmos3 import (
        Cosmos3VLTextRotaryEmbedding,
    )
    from diffusers.models.transformers.transformer_ideogram4 import Ideogram4MRoPE
    from diffusers.models.transformers.transformer_minimax_h3 import MiniMaxH3RotaryPosEmbed

    ids = torch.tensor(IDS[None], dtype=torch.long)
    anima = AnimaRotaryEmbedding(64, rope_theta=500000.0)
    before = anima(torch.zeros(1), ids)
    patch_positional_embeddings(anima)
    assert vars(anima)["_pe_core_theta"] == 500000.0
    angle = np.concatenate([inv_freq_angles(IDS, 5e5, 32)] * 2, -1)
    cos, sin = anima(torch.zeros(1), ids)
    assert gap(cos[0], np.cos(angle)) < TOL and gap(sin[0], np.sin(angle)) < TOL
    unpatch_positional_embeddings(anima)
    assert "_pe_core_theta" not in vars(anima)
    assert all(torch.equal(a, b) for a, b in zip(anima(torch.zeros(1), ids), before, strict=True))

    # interleaved M-RoPE: frequency j from axis t, h (j % 3 == 1) or w (j % 3 == 2)
    thw = torch.stack([ids[0], ids[0].flip(0), ids[0] // 2])  # (3, N)
    n, sections = 64, (24, 20, 20)
    axis = [0] * n
    for a in (1, 2):
        for j in range(a, 3 * sections[a], 3):
            axis[j] = a
    angles = inv_freq_angles(thw.numpy(), 1e6, n)  # (3, N, n)
    mixed = np.take_along_axis(angles, np.array(axis)[None, None, :], 0)[0]
    mixed = np.concatenate([mixed, mixed], -1)
    cosmos3 = patch_positional_embeddings(Cosmos3VLTextRotaryEmbedding(128, 1e6, sections))
    cos, sin = cosmos3(thw[:, None], torch.device("cpu"), torch.float32)
    assert gap(cos[0], np.cos(mixed)) < TOL and gap(sin[0], np.sin(mixed)) < TOL
    ideogram = patch_positional_embeddings(Ideogram4MRoPE(128, 1000000, sections))
    cos, sin = ideogram(thw.T[None])
    assert gap(cos[0], np.cos(mixed)) < TOL and gap(sin[0], np.sin(mixed)) < TOL

    h3 = patch_positional_embeddings(MiniMaxH3RotaryPosEmbed(16, 10000.0))
    cos, _ = h3(thw.T)
    angle = inv_freq_angles(thw.T.numpy(), 1e4, 16).reshape(-1, 48)
    assert gap(cos, np.cos(np.concatenate([angle, angle], -1))) < TOL

    video = MiniMaxH3VideoRotaryPosEmbed(48, theta=100.0)
    coords = torch.rand(2, 30, 3, generator=torch.Generator().manual_seed(0)) * 2 - 1
    before = video(coords)
    patch_positional_embeddings(video)
    cos, sin = video(coords)
    angle = inv_freq_angles(coords.double().numpy(), 100.0, 8, 2 * np.pi).reshape(2, 30, 24)
    angle = np.concatenate([angle, angle], -1)[:, :, None]
    assert gap(cos, np.cos(angle)) < TOL and gap(sin, np.sin(angle)) < TOL
    assert torch.allclose(cos, before[0], atol=1e-5)

    odd = AnimaRotaryEmbedding(64)
    odd.inv_freq[3] *= 1.001
    with pytest.raises(ValueError, match="inv_freq"):
        patch_positional_embeddings(odd)


def test_audio_and_vae_fourier_features_are_exact() -> None:
    from diffusers.models.autoencoders.autoencoder_kl_mochi import FourierFeatures
    from diffusers.models.transformers.transformer_minimax_music3 import (
        MiniMaxMusic3FourierEmbedding,
        MiniMaxMusic3RotaryEmbedding,
    )
    from diffusers.models.transformers.transformer_stable_audio3 import (
        StableAudio3ExpoFourierFeatures,
    )

    t = torch.tensor(np.linspace(0.0, 1.0, 101), dtype=torch.float32)
    expo = StableAudio3ExpoFourierFeatures(64)
    before = expo(t)
    patch_positional_embeddings(expo)
    freqs = np.exp(np.linspace(0, 1, 32) * (math.log(1e4) - math.log(0.5)) + math.log(0.5))
    angle = np.outer(t.double().numpy(), freqs) * 2 * np.pi
    assert gap(expo(t), np.concatenate([np.cos(angle), np.sin(angle)], -1)) < TOL
    assert gap(before, np.concatenate([np.cos(angle), np.sin(angle)], -1)) > 1e-3
    unpatch_positional_embeddings(expo)
    assert torch.equal(expo(t), before)

    torch.manual_seed(0)
    music = patch_positional_embeddings(MiniMaxMusic3FourierEmbedding(32))
    angle = np.outer(t.double().numpy(), music.weight.detach().double().numpy()[:, 0]) * 2 * np.pi
    assert gap(music(t), np.concatenate([np.cos(angle), np.sin(angle)], -1)) < TOL
    rotary = patch_positional_embeddings(MiniMaxMusic3RotaryEmbedding(32))
    cos, _ = rotary(10_001, torch.device("cpu"))
    angle = np.outer(np.arange(10_001), 1.0 / 1e4 ** (np.arange(0, 32, 2) / 32))
    assert gap(cos, np.cos(np.concatenate([angle, angle], -1))) < TOL

    mochi = FourierFeatures()
    x = torch.randn(1, 3, 2, 4, 4, generator=torch.Generator().manual_seed(0))
    before = mochi(x)
    patch_positional_embeddings(mochi)
    out = mochi(x)
    h = (
        np.repeat(x.double().numpy(), 2, axis=1)
        * np.tile([2**6, 2**7], 3)[None, :, None, None, None]
    )
    ref = np.concatenate([x.double().numpy(), np.sin(2 * np.pi * h), np.cos(2 * np.pi * h)], 1)
    assert gap(out, ref) < TOL and gap(before, ref) > 1e-6
    unpatch_positional_embeddings(mochi)
    assert torch.equal(mochi(x), before)


def test_refused_classes_name_their_reason() -> None:
    from diffusers.models.transformers.transformer_stable_audio3 import (
        StableAudio3RotaryEmbedding,
    )

    with pytest.raises(ValueError, match="returns the angles themselves"):
        patch_positional_embeddings(StableAudio3RotaryEmbedding(32))


# -- whole models ---------------------------------------------------------------------------


def tiny_unet():
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    return UNet2DModel(
        sample_size=8,
        in_channels=1,
        out_channels=1,
        block_out_channels=(8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    ).eval()


def tiny_flux():
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(0)
    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=8,
        pooled_projection_dim=8,
        guidance_embeds=True,
        axes_dims_rope=(4, 6, 6),
    ).eval()
    img_ids = torch.stack(
        torch.meshgrid(torch.zeros(1), torch.arange(3.0), torch.arange(4.0), indexing="ij"), -1
    ).reshape(-1, 3)
    inputs = {
        "hidden_states": torch.randn(1, 12, 4),
        "encoder_hidden_states": torch.randn(1, 3, 8),
        "pooled_projections": torch.randn(1, 8),
        "timestep": torch.tensor([0.73]),
        "img_ids": img_ids,
        "txt_ids": torch.zeros(3, 3),
        "guidance": torch.tensor([3.5]),
    }
    return model, inputs


def tiny_wan():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=2,
        out_channels=2,
        text_dim=8,
        freq_dim=16,
        ffn_dim=16,
        num_layers=1,
        rope_max_seq_len=64,
    ).eval()
    inputs = {
        "hidden_states": torch.randn(1, 2, 2, 4, 4),
        "timestep": torch.tensor([917.0]),
        "encoder_hidden_states": torch.randn(1, 3, 8),
    }
    return model, inputs


def test_unet_step_agrees_and_unpatch_is_bitwise() -> None:
    unet = tiny_unet()
    x = torch.randn(2, 1, 8, 8)
    t = torch.tensor([999, 17])
    state = {k: v.clone() for k, v in unet.state_dict().items()}
    with torch.no_grad():
        before = unet(x, t).sample
        patch_positional_embeddings(unet)
        assert unet.state_dict().keys() == state.keys()
        after = unet(x, t).sample
        assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)
        unpatch_positional_embeddings(unet)
        assert torch.equal(unet(x, t).sample, before)
    assert all(torch.equal(v, state[k]) for k, v in unet.state_dict().items())


@pytest.mark.parametrize("build", [tiny_flux, tiny_wan], ids=["flux", "wan"])
def test_transformer_step_agrees_and_unpatch_is_bitwise(build) -> None:
    model, inputs = build()
    keys = set(model.state_dict())
    with torch.no_grad():
        before = model(**inputs).sample
        patch_positional_embeddings(model)
        assert set(model.state_dict()) == keys
        after = model(**inputs).sample
        assert torch.allclose(after, before, rtol=1e-4, atol=1e-5)
        unpatch_positional_embeddings(model)
        assert torch.equal(model(**inputs).sample, before)


def test_pipeline_patches_every_model() -> None:
    from diffusers import DDPMPipeline, DDPMScheduler

    pipe = DDPMPipeline(unet=tiny_unet(), scheduler=DDPMScheduler(num_train_timesteps=10))
    assert patch_positional_embeddings(pipe) is pipe
    assert "forward" in vars(pipe.unet.time_proj)
    unpatch_positional_embeddings(pipe)
    assert "forward" not in vars(pipe.unet.time_proj)


def test_patching_twice_patches_once_and_context_manager_restores() -> None:
    module = Timesteps(8, True, 0, scale=1000)
    patch_positional_embeddings(module)
    forward = vars(module)["forward"]
    patch_positional_embeddings(module)
    assert vars(module)["forward"] is forward
    unpatch_positional_embeddings(module)
    with patched_positional_embeddings(module) as same:
        assert same is module and "forward" in vars(module)
    assert "forward" not in vars(module)


def test_copies_and_pickles_keep_the_patch() -> None:
    unet = patch_positional_embeddings(tiny_unet())
    t = torch.tensor([999.5])
    want = unet.time_proj(t)
    for clone in (copy.deepcopy(unet), pickle.loads(pickle.dumps(unet))):
        assert clone.time_proj.forward.module is clone.time_proj
        assert torch.equal(clone.time_proj(t), want)
        unpatch_positional_embeddings(clone)
        assert "forward" not in vars(clone.time_proj)


def test_model_without_positional_modules_is_refused_naming_its_class() -> None:
    with pytest.raises(ValueError, match="Sequential"):
        patch_positional_embeddings(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    with pytest.raises(TypeError, match="pipeline"):
        patch_positional_embeddings(object())


class UncoveredRope(torch.nn.Module):
    """A rotary embedding of a diffusers module this integration does not know."""

    def forward(self, x):
        return x


UncoveredRope.__module__ = "diffusers.models.transformers.transformer_uncovered"


def test_uncovered_rotary_is_refused_or_skipped_with_a_warning() -> None:
    model = torch.nn.ModuleDict({"time": Timesteps(8, True, 0), "rope": UncoveredRope()})
    with pytest.raises(ValueError, match="UncoveredRope at 'rope'"):
        patch_positional_embeddings(model)
    assert "forward" not in vars(model["time"])
    with pytest.warns(UserWarning, match="UncoveredRope"):
        patch_positional_embeddings(model, strict=False)
    assert "forward" in vars(model["time"])


def test_patched_modules_read_nothing_back() -> None:
    """On an accelerator (the meta device stands in for one) the patched modules
    never read their inputs back to the host."""
    t = torch.tensor([999.5, 0.25], device="meta")
    ids = torch.zeros(5, 3, device="meta")
    timesteps = patch_positional_embeddings(Timesteps(32, True, 0, scale=1000))
    flux = patch_positional_embeddings(FluxPosEmbed(theta=10000, axes_dim=[4, 6, 6]))
    gfp = patch_positional_embeddings(GaussianFourierProjection(8, scale=16)).to("meta")
    with forbid_host_reads("torch"):
        assert timesteps(t).shape == (2, 32)
        assert flux(ids)[0].shape == (5, 16)
        assert gfp(t).shape == (2, 16)


def test_restated_forwards_read_nothing_back() -> None:
    from diffusers.models.condition_embedders.condition_embedder_anima import (
        AnimaRotaryEmbedding,
    )
    from diffusers.models.transformers.transformer_kandinsky6 import Kandinsky6RoPE1D
    from diffusers.models.transformers.transformer_ltx2 import LTX2AudioVideoRotaryPosEmbed
    from diffusers.models.transformers.transformer_omnigen import OmniGenSuScaledRotaryEmbedding
    from diffusers.models.transformers.transformer_qwenimage21 import (
        QwenImage21TemporalTimesteps,
    )
    from diffusers.models.transformers.transformer_stable_audio3 import (
        StableAudio3ExpoFourierFeatures,
    )

    meta = torch.device("meta")
    t = torch.tensor([0.5, 0.25], device=meta)
    ids = torch.zeros(1, 9, dtype=torch.long, device=meta)
    factors = {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    ltx2 = patch_positional_embeddings(LTX2AudioVideoRotaryPosEmbed(64, num_attention_heads=2))
    kandinsky = patch_positional_embeddings(Kandinsky6RoPE1D(16, 64)).to(meta)
    qwen21 = patch_positional_embeddings(QwenImage21TemporalTimesteps(16)).to(meta)
    expo = patch_positional_embeddings(StableAudio3ExpoFourierFeatures(16))
    omnigen = patch_positional_embeddings(OmniGenSuScaledRotaryEmbedding(8, rope_scaling=factors))
    anima = patch_positional_embeddings(AnimaRotaryEmbedding(16)).to(meta)
    with forbid_host_reads("torch"):
        assert ltx2(torch.zeros(1, 3, 9, 2, device=meta))[0].shape == (1, 9, 64)
        assert kandinsky(ids[0]).shape == (9, 1, 8, 2, 2)
        assert qwen21(t).shape == (2, 16)
        assert expo(t).shape == (2, 16)
        assert omnigen(t, ids)[0].shape == (9, 8)
        assert anima(t, ids)[0].shape == (1, 9, 16)


@pytest.mark.slow
def test_torch_compile_fullgraph() -> None:
    """Each kind of patched module compiles with fullgraph=True (backend "eager"): a
    diffusers helper (timesteps, 1-D rotary), the Fourier projection, a stored table and
    a restated forward (Kandinsky 6's; LTX-2's is the same kind and costs about half the
    test's compile time)."""
    from diffusers.models.transformers.transformer_kandinsky6 import Kandinsky6RoPE1D

    t = torch.tensor([999.5, 0.25])
    cases = [
        (Timesteps(32, True, 0, scale=1000), t),
        (FluxPosEmbed(theta=10000, axes_dim=[4, 6, 6]), flux_ids()),
        (GaussianFourierProjection(8, scale=16), t),
        (WanRotaryPosEmbed(12, (1, 2, 2), max_seq_len=64), torch.zeros(1, 1, 2, 4, 4)),
        (Kandinsky6RoPE1D(16, 64), torch.arange(9)),
    ]
    for module, x in cases:
        patch_positional_embeddings(module)
        eager = module(x)
        compiled = torch.compile(module, backend="eager", fullgraph=True)(x)
        for a, b in zip(
            torch.utils._pytree.tree_leaves(compiled),
            torch.utils._pytree.tree_leaves(eager),
            strict=True,
        ):
            assert torch.allclose(a, b, atol=1e-6), type(module).__name__


def test_covered_classes_are_importable_diffusers_classes() -> None:
    import importlib

    for key in covered_classes():
        module, _, name = key.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), key
