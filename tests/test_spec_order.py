"""Spec.order (cos first), odd_d="truncate" on one axis, and N-D widths per axis.

Parity is checked against the installed codebases' own functions and modules, on tiny
configurations (nothing downloaded):

* transformers ``MusicgenSinusoidalPositionalEmbedding`` (and MusicGen Melody's);
* diffusers ``get_timestep_embedding`` (``flip_sin_to_cos=True``),
  ``get_1d_sincos_pos_embed_from_grid`` (``flip_sin_to_cos=True``) and
  ``get_3d_sincos_pos_embed`` (CogVideoX, ConsisID);
* positional-encodings ``PositionalEncoding1D`` / ``2D`` / ``3D`` (torch) for odd
  channel counts;

and against a line-by-line restatement of timm's ``build_sincos2d_pos_embed``
(``timm/layers/pos_embed_sincos.py``; timm is not installed). The float32 codebases
are compared within their own float32 angle rounding, ``4 * 2**-23 * max(1, |angle|)``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import assert_close, positions_on, to_numpy
from reference import schedule, table

import pe_core
from pe_core import Spec
from pe_core.layers._config import spec_from_config, spec_to_config
from pe_core_backends import get_namespace

ATOL32 = 1e-6
ATOL64 = 1e-12


def f32_bound(angles: np.ndarray) -> np.ndarray:
    return 4 * 2.0**-23 * np.maximum(1.0, np.abs(angles)) + ATOL32


def swap_slots(sin_first: np.ndarray, layout: str, pairs: int) -> np.ndarray:
    """A sin-first table with every pair's (interleaved) or half's (split) two slots
    swapped; columns after the pairs stay where they are."""
    body, rest = sin_first[..., : 2 * pairs], sin_first[..., 2 * pairs :]
    if layout == "interleaved":
        body = body.reshape(*body.shape[:-1], pairs, 2)[..., ::-1].reshape(body.shape)
    else:
        body = np.concatenate([body[..., pairs:], body[..., :pairs]], axis=-1)
    return np.concatenate([body, rest], axis=-1)


def one_axis_reference(positions: np.ndarray, d: int, spec: Spec) -> np.ndarray:
    """float64 1-D table from the Spec docstring: ceil(d/2) pairs for truncate."""
    width = d + 1 if d % 2 and spec.odd_d == "truncate" else d
    w = schedule(width, base=spec.base, denominator=spec.denominator)
    out = table(np.asarray(positions, np.float64) + spec.offset, w, spec.layout, width)
    if spec.order == "cos_sin":
        out = swap_slots(out, spec.layout, width // 2)
    return out[..., :d]


# -- MusicGen and diffusers: the cosines first ----------------------------------------


@pytest.mark.parametrize("d", [8, 16, 17])
def test_musicgen_matches_transformers(d: int) -> None:
    torch = pytest.importorskip("torch")
    from transformers.models.musicgen.modeling_musicgen import (
        MusicgenSinusoidalPositionalEmbedding,
    )
    from transformers.models.musicgen_melody.modeling_musicgen_melody import (
        MusicgenMelodySinusoidalPositionalEmbedding,
    )

    n = 300
    theirs = MusicgenSinusoidalPositionalEmbedding.get_embedding(n, d).numpy()
    melody = MusicgenMelodySinusoidalPositionalEmbedding.get_embedding(n, d).numpy()
    np.testing.assert_array_equal(theirs, melody)
    ours = pe_core.encode(np.arange(n), d, spec="musicgen", dtype="float64")
    angles = np.arange(n)[:, None] * np.ones(d)
    assert_close(ours, theirs, atol=f32_bound(angles))
    # the module's forward: rows position_ids = arange(seq_len) + cache_length
    module = MusicgenSinusoidalPositionalEmbedding(16, d)
    ids = torch.zeros(1, 2, 5, dtype=torch.long)
    got = module(ids, cache_length=7).numpy()
    bound = f32_bound(np.full(got.shape, 12.0))
    assert_close(pe_core.encode(np.arange(7, 12), d, spec="musicgen"), got, atol=bound)


@pytest.mark.parametrize("d", [8, 33])
def test_diffusers_timestep_embedding_flipped(d: int) -> None:
    torch = pytest.importorskip("torch")
    from diffusers.models.embeddings import get_timestep_embedding

    t = np.array([0.0, 1.0, 17.0, 250.5, 999.0])
    angles = t[:, None] * np.ones(d)
    for shift, preset in ((0, "diffusers_flip_sin_to_cos"), (1, "musicgen")):
        theirs = get_timestep_embedding(
            torch.tensor(t, dtype=torch.float32),
            d,
            flip_sin_to_cos=True,
            downscale_freq_shift=shift,
        ).numpy()
        assert_close(
            pe_core.encode(t, d, spec=preset, dtype="float64"), theirs, atol=f32_bound(angles)
        )


def test_diffusers_1d_sincos_flipped_float64() -> None:
    """get_1d_sincos_pos_embed_from_grid computes in float64: agreement to 1e-12."""
    torch = pytest.importorskip("torch")
    from diffusers.models.embeddings import get_1d_sincos_pos_embed_from_grid

    pos = np.arange(40, dtype=np.float64) * 3.5
    for flip, spec in ((True, "diffusers_flip_sin_to_cos"), (False, Spec(layout="split"))):
        theirs = get_1d_sincos_pos_embed_from_grid(
            24, torch.tensor(pos), flip_sin_to_cos=flip
        ).numpy()
        ours = pe_core.encode(pos, 24, spec=spec, dtype="float64")
        assert_close(ours, theirs, atol=ATOL64, rtol=0, dtype="float64")


# -- positional-encodings: odd channels ------------------------------------------------


@pytest.mark.parametrize("channels", [1, 5, 7, 33])
def test_positional_encodings_1d_odd_channels(channels: int) -> None:
    torch = pytest.importorskip("torch")
    from positional_encodings.torch_encodings import PositionalEncoding1D

    x = 50
    theirs = PositionalEncoding1D(channels)(torch.zeros(2, x, channels)).numpy()
    assert theirs.shape == (2, x, channels)
    ours = pe_core.encode(np.arange(x), channels, spec="positional_encodings_1d")
    angles = np.arange(x)[:, None] * np.ones(channels)
    assert_close(ours, theirs[0], atol=f32_bound(angles))
    assert_close(
        ours, one_axis_reference(np.arange(x), channels, Spec(odd_d="truncate")), atol=ATOL32
    )


def test_positional_encodings_nd_odd_channels() -> None:
    torch = pytest.importorskip("torch")
    from positional_encodings.torch_encodings import PositionalEncoding2D, PositionalEncoding3D

    for module, preset, shape, ch in (
        (PositionalEncoding2D, "positional_encodings_2d", (5, 6), 7),
        (PositionalEncoding3D, "positional_encodings_3d", (2, 3, 4), 11),
    ):
        got = module(ch)(torch.zeros(1, *shape, ch)).numpy()[0]
        ours = pe_core.encode(pe_core.grid(shape), ch, spec=preset)
        assert_close(ours, got, atol=f32_bound(np.full(got.shape, max(shape))))


# -- CogVideoX: a width per axis --------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "size", "frames", "spatial", "temporal"),
    [(32, (4, 3), 2, 1.875, 1.0), (64, (5, 2), 3, 1.0, 2.0), (48, 3, 1, 1.0, 1.0)],
)
def test_cogvideox_matches_diffusers(d, size, frames, spatial, temporal) -> None:
    pytest.importorskip("torch")
    from diffusers.models.embeddings import get_3d_sincos_pos_embed

    theirs = get_3d_sincos_pos_embed(d, size, frames, spatial, temporal, output_type="pt").numpy()
    width, height = (size, size) if isinstance(size, int) else size
    ours = pe_core.grid_encoding(
        d,
        (frames, height, width),
        spec="cogvideox",
        interpolation_scale=(temporal, spatial, spatial),
    )
    assert theirs.shape == (frames, height * width, d)
    # diffusers divides float32 positions by the scales in float32 (then float64 sin/cos)
    assert_close(ours.reshape(theirs.shape), theirs, atol=ATOL32, rtol=1e-7, dtype="float32")
    ours64 = pe_core.grid_encoding(
        d,
        (frames, height, width),
        spec="cogvideox",
        interpolation_scale=(temporal, spatial, spatial),
        dtype="float64",
    )
    assert_close(ours64.reshape(theirs.shape), theirs, atol=1e-6, rtol=0, dtype="float64")
    assert pe_core.nd.axis_widths(d, "cogvideox") == (d // 4, 3 * d // 8, 3 * d // 8)


def test_cogvideox_patch_embed_buffer() -> None:
    """CogVideoXPatchEmbed's pos_embedding buffer: text rows of zeros, then the video."""
    pytest.importorskip("torch")
    from diffusers.models.embeddings import CogVideoXPatchEmbed

    embed = CogVideoXPatchEmbed(
        patch_size=2, in_channels=2, embed_dim=32, text_embed_dim=8, sample_width=8,
        sample_height=6, sample_frames=5, max_text_seq_length=3,
        use_learned_positional_embeddings=False,
    )  # fmt: skip
    buffer = embed.pos_embedding.numpy()[0]
    video = pe_core.grid_encoding(
        32, (2, 3, 4), spec="cogvideox", interpolation_scale=(1.0, 1.875, 1.875)
    )
    assert_close(buffer[3:], video, atol=ATOL32, rtol=1e-7)
    assert not buffer[:3].any()


# -- timm build_sincos2d_pos_embed, restated ---------------------------------------------


def timm_build_sincos2d_pos_embed(
    feat_shape, dim=64, temperature=10000.0, reverse_coord=False, interleave_sin_cos=False
):
    """timm ``layers/pos_embed_sincos.py`` (huggingface/pytorch-image-models), in torch::

        def freq_bands(num_bands, temperature=10000., step=2, device=None):
            exp = torch.arange(0, num_bands, step, dtype=torch.int64).to(torch.float32) / num_bands
            bands = 1. / (temperature ** exp)
            return bands

        def build_sincos2d_pos_embed(feat_shape, dim=64, temperature=10000.,
                                     reverse_coord=False, interleave_sin_cos=False, ...):
            assert dim % 4 == 0
            pos_dim = dim // 4
            bands = freq_bands(pos_dim, temperature=temperature, step=1, device=device)
            if reverse_coord:
                feat_shape = feat_shape[::-1]  # stack W, H instead of H, W
            grid = torch.stack(ndgrid([
                torch.arange(s, device=device, dtype=torch.int64).to(torch.float32)
                for s in feat_shape
            ])).flatten(1).transpose(0, 1)
            pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)
            stack_dim = 2 if interleave_sin_cos else 1
            pos_emb = torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=stack_dim).flatten(1)
            return pos_emb.to(dtype=dtype)

    (``ndgrid`` is ``torch.meshgrid(..., indexing="ij")``.)
    """
    import torch

    assert dim % 4 == 0
    pos_dim = dim // 4
    exp = torch.arange(0, pos_dim, 1, dtype=torch.int64).to(torch.float32) / pos_dim
    bands = 1.0 / (temperature**exp)
    if reverse_coord:
        feat_shape = feat_shape[::-1]
    axes = [torch.arange(s, dtype=torch.int64).to(torch.float32) for s in feat_shape]
    grid = torch.stack(torch.meshgrid(axes, indexing="ij")).flatten(1).transpose(0, 1)
    pos2 = grid.unsqueeze(-1) * bands.unsqueeze(0)
    stack_dim = 2 if interleave_sin_cos else 1
    return torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=stack_dim).flatten(1)


@pytest.mark.parametrize("reverse_coord", [False, True])
@pytest.mark.parametrize("interleave_sin_cos", [False, True])
def test_timm_sincos2d(reverse_coord: bool, interleave_sin_cos: bool) -> None:
    pytest.importorskip("torch")
    h, w, dim, temperature = 5, 7, 32, 300.0
    theirs = timm_build_sincos2d_pos_embed(
        [h, w], dim, temperature, reverse_coord, interleave_sin_cos
    ).numpy()
    spec = Spec(
        base=temperature,
        layout="split",
        axes=2,
        axis_order="reversed" if reverse_coord else "forward",
        axis_layout="blocks" if interleave_sin_cos else "split",
    )
    ours = pe_core.encode(pe_core.grid((h, w)), dim, spec=spec)  # rows (h, w) row-major
    if reverse_coord:  # timm's rows run over (w, h)
        ours = np.swapaxes(ours, 0, 1)
    assert_close(ours.reshape(-1, dim), theirs, atol=f32_bound(np.full(theirs.shape, max(h, w))))
    if not interleave_sin_cos and not reverse_coord:
        default = timm_build_sincos2d_pos_embed([h, w], dim).numpy()
        got = pe_core.encode(pe_core.grid((h, w)), dim, spec="timm_sincos_2d").reshape(-1, dim)
        assert_close(got, default, atol=f32_bound(np.full(default.shape, max(h, w))))


# -- every backend, eager and traced ----------------------------------------------------

CASES_1D = [
    (Spec(order="cos_sin"), 10),
    (Spec(order="cos_sin", layout="split", odd_d="zero_pad", offset=3), 9),
    (Spec(odd_d="truncate"), 7),
    (Spec(odd_d="truncate", order="cos_sin", layout="split", denominator="half_minus_one"), 9),
]


def test_every_backend_1d(backend: str) -> None:
    positions = np.array([[0, 1, 2], [1000, -77, 2**20]])
    for spec, d in CASES_1D:
        out = pe_core.encode(positions_on(backend, positions), d, spec=spec)
        expected = one_axis_reference(positions, d, spec)
        assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")
        if get_namespace(backend).supports("float64"):
            out64 = pe_core.encode(positions, d, spec=spec, backend=backend, dtype="float64")
            assert_close(out64, expected, atol=1e-9, backend=backend, dtype="float64")


def test_every_backend_nd(backend: str) -> None:
    from test_nd_tables import nd_reference

    video = pe_core.grid((2, 3, 4)) + np.array([5, -2, 100])
    for spec, d in (
        ("cogvideox", 32),
        (Spec(axes=3, axis_shares=(1, 2, 1), odd_d="zero_pad", order="cos_sin"), 19),
        (Spec(axes=3, axis_shares=(1, 2, 1), odd_d="truncate", axis_order=(2, 0, 1)), 21),
        (Spec(layout="split", axes=3, axis_layout="split", order="cos_sin"), 18),
    ):
        resolved = pe_core.presets.resolve_spec(spec)
        out = pe_core.encode(positions_on(backend, video), d, spec=spec)
        assert_close(out, nd_reference(video, d, resolved), atol=ATOL32, backend=backend)
    image = pe_core.grid((3, 5))
    out = pe_core.encode(positions_on(backend, image), 24, spec="timm_sincos_2d")
    assert_close(out, nd_reference(image, 24, pe_core.PRESETS["timm_sincos_2d"]), atol=ATOL32)


def test_out_and_like() -> None:
    torch = pytest.importorskip("torch")
    for spec, d in CASES_1D:
        buffer = np.empty((4, d), np.float32)
        assert pe_core.encode(np.arange(4), d, spec=spec, out=buffer) is buffer
        assert_close(buffer, one_axis_reference(np.arange(4), d, spec), atol=ATOL32)
        tbuf = torch.empty(4, d, dtype=torch.float64)
        assert pe_core.encode([0, 1, 2, 3], d, spec=spec, out=tbuf) is tbuf
        assert_close(tbuf, one_axis_reference(np.arange(4), d, spec), atol=1e-9, dtype="float64")
        got = pe_core.encode([0, 1, 2, 3], d, spec=spec, like=torch.zeros(1))
        assert isinstance(got, torch.Tensor)
        with pytest.raises(ValueError, match="out must have shape"):
            pe_core.encode(np.arange(4), d, spec=spec, out=np.empty((4, d + 1), np.float32))


def test_jax_jit_and_tf_function() -> None:
    jax = pytest.importorskip("jax")
    tf = pytest.importorskip("tensorflow")
    positions = np.arange(-3, 9)
    spec, d = CASES_1D[3]  # truncated, cos first, split
    expected = one_axis_reference(positions, d, spec)
    traced = jax.jit(lambda p: pe_core.encode(p, d, spec=spec))
    assert_close(traced(jax.numpy.asarray(positions)), expected, atol=ATOL32)
    fn = tf.function(lambda p: pe_core.encode(p, d, spec=spec))
    assert_close(fn(tf.constant(positions)), expected, atol=ATOL32)
    video = pe_core.grid((2, 2, 3))
    from test_nd_tables import nd_reference

    expected = nd_reference(video, 32, pe_core.PRESETS["cogvideox"])
    jitted = jax.jit(lambda c: pe_core.encode(c, 32, spec="cogvideox"))
    assert_close(jitted(jax.numpy.asarray(video)), expected, atol=ATOL32)


def test_torch_compile_and_autograd() -> None:
    torch = pytest.importorskip("torch")
    spec = Spec(order="cos_sin", odd_d="truncate")
    fn = torch.compile(lambda p: pe_core.encode(p, 7, spec=spec), fullgraph=True, backend="eager")
    positions = torch.arange(6)
    assert_close(fn(positions), one_axis_reference(np.arange(6), 7, spec), atol=ATOL32)
    p = torch.tensor([0.5, 2.0], requires_grad=True)
    pe_core.encode(p, 4, spec="musicgen").sum().backward()
    w = pe_core.frequencies(4, "musicgen")  # d/dp of [cos | sin]
    expected = (-np.sin(np.outer([0.5, 2.0], w)) * w + np.cos(np.outer([0.5, 2.0], w)) * w).sum(1)
    assert_close(p.grad, expected, atol=1e-6)


# -- the relative property ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "d", "t"),
    [
        (Spec(order="cos_sin", layout="split", odd_d="zero_pad"), 9, -40),
        ("cogvideox", 32, (2, -3, 5)),
        ("timm_sincos_2d", 16, (7, -1)),
        (Spec(axes=3, axis_shares=(2, 1, 1), odd_d="zero_pad", order="cos_sin"), 19, (1, 2, 3)),
    ],
)
def test_relative_property(backend: str, spec, d: int, t) -> None:
    """PE(x + t) = M_t PE(x) and shift(PE(x), t) = PE(x + t)."""
    k = pe_core.presets.resolve_spec(spec).axes
    x = np.arange(5) if k == 1 else np.random.default_rng(3).integers(-50, 50, (5, k))
    moved = pe_core.encode(x + np.asarray(t), d, spec=spec, dtype="float64")
    pe = pe_core.encode(positions_on(backend, x), d, spec=spec)
    M = to_numpy(pe_core.relative_matrix(np.asarray(t), d, spec, backend=backend))
    assert_close(to_numpy(pe) @ M.T, moved, atol=4 * ATOL32, rtol=1e-7)
    shifted = pe_core.shift(pe, np.asarray(t), spec)
    assert_close(shifted, moved, atol=4 * ATOL32, backend=backend)


def test_relative_refuses_a_truncated_pair() -> None:
    with pytest.raises(ValueError, match=r"odd_d='truncate'\) with d=7"):
        pe_core.relative_matrix(1, 7, Spec(odd_d="truncate"))
    with pytest.raises(ValueError, match=r"odd_d='truncate'\) with d=7"):
        pe_core.shift(np.zeros((2, 7)), 1, Spec(odd_d="truncate"))
    assert pe_core.relative_matrix(1, 8, Spec(odd_d="truncate")).shape == (8, 8)


# -- refused values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"order": "cos"}, ValueError, r"Spec\.order.*'cos'"),
        ({"axis_layout": "rows"}, ValueError, r"Spec\.axis_layout.*'rows'"),
        ({"axes": 2, "axis_layout": "split"}, ValueError, r"layout='split'.*layout='interleaved'"),
        ({"layout": "split", "axis_layout": "split"}, ValueError, r"axes > 1.*axes=1"),
        ({"axes": 2, "axis_shares": (1,)}, ValueError, r"one int >= 1 per.*\(1,\)"),
        ({"axes": 2, "axis_shares": (0, 1)}, ValueError, r"Received: \(0, 1\)"),
        ({"axis_shares": (1,)}, ValueError, r"axes=1 > 1"),
        ({"axes": 2, "axis_shares": (1.5, 1)}, TypeError, r"tuple of ints.*1\.5"),
        ({"axes": 2, "axis_shares": "12"}, TypeError, r"Received: '12'"),
        (
            {"axes": 2, "axis_shares": (1, 2), "frequencies": (1.0,)},
            ValueError,
            r"different widths.*\(1, 2\)",
        ),
        ({"axes": 2, "axis_order": (0, 0)}, ValueError, r"permutation.*\(0, 0\)"),
        ({"axes": 2, "axis_order": (0, 1, 2)}, ValueError, r"permutation.*\(0, 1, 2\)"),
        ({"axes": 2, "axis_order": (0, "1")}, TypeError, r"tuple of ints.*'1'"),
        ({"axes": 2, "axis_order": 3}, TypeError, r"Received: 3"),
    ],
)
def test_bad_fields_are_refused(fields, error, message) -> None:
    with pytest.raises(error, match=message):
        Spec(**fields)


def test_bad_d_and_scales_are_refused() -> None:
    with pytest.raises(ValueError, match=r"multiple of 2 \* sum\(axis_shares\) = 16.*d=24"):
        pe_core.encode(pe_core.grid((1, 1, 1)), 24, spec="cogvideox")
    with pytest.raises(ValueError, match=r"different numbers of pairs"):
        pe_core.nd.axis_pairs(32, "cogvideox")
    with pytest.raises(ValueError, match=r"one number per axis \(3\).*\(1\.0, 2\.0\)"):
        pe_core.grid_encoding(32, (1, 2, 2), spec="cogvideox", interpolation_scale=(1.0, 2.0))
    with pytest.raises(ValueError, match=r"interpolation_scale must be a finite number > 0.*-1"):
        pe_core.grid_encoding(32, (1, 2, 2), spec="cogvideox", interpolation_scale=(1, 1, -1))
    with pytest.raises(ValueError, match=r"ceil\(d / 2\) = 3"):
        pe_core.encode([0], 5, spec=Spec(odd_d="truncate", frequencies=(1.0, 2.0)))
    assert pe_core.encode([1], 5, spec=Spec(odd_d="truncate", frequencies=(1, 2, 3))).shape == (
        1,
        5,
    )


# -- specs as data ------------------------------------------------------------------------


def test_specs_round_trip_through_json_and_layers() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import SinusoidalEncoding, SinusoidalPatchEncoding

    spec = Spec(axes=3, axis_shares=(2, 3, 3), axis_order=(0, 2, 1), order="cos_sin")
    config = json.loads(json.dumps(spec_to_config(spec)))
    assert (
        spec_from_config(config) == spec
        and spec_to_config(pe_core.PRESETS["cogvideox"]) == "cogvideox"
    )
    assert Spec(axes=2, axis_order=[1, 0], axis_shares=[1, 2]).axis_order == (1, 0)
    layer = SinusoidalEncoding(9, spec="musicgen")
    x = torch.zeros(1, 4, 9)
    assert_close(layer(x)[0], pe_core.encode(np.arange(4), 9, spec="musicgen"), atol=ATOL32)
    patch = SinusoidalPatchEncoding(32, grid_shape=(2, 3, 4), spec="cogvideox")
    got = patch(torch.zeros(1, 24, 32))[0]
    assert_close(got, pe_core.grid_encoding(32, (2, 3, 4), spec="cogvideox"), atol=ATOL32)
    assert math.isclose(
        float(pe_core.frequencies(7, "positional_encodings_1d")[-1]), 1e4 ** (-6 / 8)
    )
