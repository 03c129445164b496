"""Relative index tables (pe_core.relative_index) against the installed models' own
buffers and functions (transformers: Swin, SwinV2, BEiT, Data2VecVision, LeViT,
SpeechT5, Granite Speech, ESMFold, DeBERTa-v2, Funnel; tiny random configs, nothing
downloaded), exact references, every backend, the compilers, and the layers."""

from __future__ import annotations

import decimal
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core.funnel import funnel_position_embeds
from pe_core.relative_index import (
    clipped_relative_position,
    deberta_log_bucket,
    deberta_relative_position,
    esmfold_relative_bins,
    funnel_block_positions,
    funnel_pooled_positions,
    funnel_relative_positions,
    levit_attention_offsets,
    num_relative_distance,
    relative_position_bias,
    relative_position_index,
    swinv2_coords_table,
)
from pe_core_backends import get_namespace

WINDOWS = [(1, 1), (1, 3), (2, 3), (3, 2), (7, 7)]


def _int_dtype(backend: str) -> str:
    return "int64" if get_namespace(backend).supports("int64") else "int32"


def _expected_dtype(backend: str, host: np.ndarray) -> np.ndarray:
    return host.astype(_int_dtype(backend))


# --------------------------------------------------------------------------- Swin / BEiT


def _window_reference(height: int, width: int) -> np.ndarray:
    """Swin's index from its definition, token by token."""
    n = height * width
    out = np.zeros((n, n), dtype=np.int64)
    for t in range(n):
        for s in range(n):
            (r, c), (r2, c2) = divmod(t, width), divmod(s, width)
            out[t, s] = (r - r2 + height - 1) * (2 * width - 1) + (c - c2 + width - 1)
    return out


@pytest.mark.parametrize("window", WINDOWS)
def test_swin_index_matches_transformers(window: tuple[int, int]) -> None:
    torch = pytest.importorskip("torch")
    from transformers import Swinv2Config
    from transformers.models.swin.modeling_swin import SwinRelativePositionBias
    from transformers.models.swinv2.modeling_swinv2 import Swinv2SelfAttention

    from pe_core.layers.torch import RelativePositionBias

    n = window[0] * window[1]
    swin = SwinRelativePositionBias(2, window)
    ours = relative_position_index(window)
    assert ours.dtype == np.int64 and ours.shape == (n, n)
    np.testing.assert_array_equal(ours, swin.relative_position_index.view(n, n).numpy())
    np.testing.assert_array_equal(ours, _window_reference(*window))
    config = Swinv2Config(embed_dim=8, num_heads=[2], depths=[1])
    v2 = Swinv2SelfAttention(config, 8, 2, window)
    np.testing.assert_array_equal(ours, v2.relative_position_index.numpy())
    rows = num_relative_distance(window)
    assert rows == swin.relative_position_bias_table.shape[0]
    assert ours.min() == 0 and ours.max() == rows - 1
    # the bias itself, from a random table, against Swin's module
    with torch.no_grad():
        swin.relative_position_bias_table.copy_(torch.randn(rows, 2))
    expected = swin()[0]
    assert_equal(
        relative_position_bias(swin.relative_position_bias_table.detach(), window),
        expected.detach(),
    )
    layer = RelativePositionBias(window, 2)
    layer.load_state_dict(swin.state_dict())
    assert_equal(layer().detach(), expected.detach())


@pytest.mark.parametrize("window", [(1, 1), (2, 3), (3, 3), (14, 14)])
def test_beit_index_matches_transformers(window: tuple[int, int]) -> None:
    pytest.importorskip("torch")
    from transformers.models.beit.modeling_beit import BeitRelativePositionBias
    from transformers.models.data2vec.modeling_data2vec_vision import (
        Data2VecVisionRelativePositionBias,
    )

    ours = relative_position_index(window, prefix_tokens=1)
    beit = BeitRelativePositionBias.generate_relative_position_index(window).numpy()
    data2vec = Data2VecVisionRelativePositionBias.generate_relative_position_index(window)
    np.testing.assert_array_equal(ours, beit)
    np.testing.assert_array_equal(ours, data2vec.numpy())
    rows = (2 * window[0] - 1) * (2 * window[1] - 1) + 3
    assert num_relative_distance(window, prefix_tokens=1) == rows
    np.testing.assert_array_equal(ours[1:, 1:], _window_reference(*window))
    assert ours[0, 0] == rows - 1 and set(ours[0, 1:]) == {rows - 3}
    assert set(ours[1:, 0]) == {rows - 2}


def test_index_tables_on_every_backend(backend: str) -> None:
    for prefix in (0, 1):
        host = relative_position_index((2, 3), prefix_tokens=prefix)
        out = relative_position_index((2, 3), prefix_tokens=prefix, backend=backend)
        assert_equal(out, positions_on(backend, _expected_dtype(backend, host)))
    host = clipped_relative_position(3, 5, max_left=1, max_right=2)
    out = clipped_relative_position(3, 5, max_left=1, max_right=2, backend=backend)
    assert_equal(out, positions_on(backend, _expected_dtype(backend, host)))
    host = levit_attention_offsets(3, stride=2)
    assert_equal(
        levit_attention_offsets(3, stride=2, backend=backend),
        positions_on(backend, _expected_dtype(backend, host)),
    )
    host = deberta_relative_position(4, 6, bucket_size=4, max_position=8)
    out = deberta_relative_position(4, 6, bucket_size=4, max_position=8, backend=backend)
    assert_equal(out, positions_on(backend, _expected_dtype(backend, host)))
    coords = swinv2_coords_table((2, 3), backend=backend)
    assert_equal(coords, positions_on(backend, swinv2_coords_table((2, 3))))
    # the bias follows the table: backend, dtype, values
    table = np.random.default_rng(0).standard_normal((num_relative_distance(2, prefix_tokens=1), 3))
    expected = relative_position_bias(table.astype(np.float32), 2, prefix_tokens=1)
    got = relative_position_bias(
        positions_on(backend, table.astype(np.float32)), 2, prefix_tokens=1
    )
    assert_equal(got, positions_on(backend, expected))


def _timm_gen_relative_position_index(q_size, class_token=False):
    """timm ``layers/pos_embed_rel.py`` ``gen_relative_position_index`` (k_size=None),
    restated line by line (timm is not installed)."""
    import torch
    import torch.nn.functional as F

    coords = torch.stack(
        torch.meshgrid([torch.arange(q_size[0]), torch.arange(q_size[1])], indexing="ij")
    ).flatten(1)
    relative_coords = coords[:, :, None] - coords[:, None, :]
    relative_coords = relative_coords.permute(1, 2, 0)
    num_relative_distance = (2 * q_size[0] - 1) * (2 * q_size[1] - 1) + 3
    _, relative_position_index = torch.unique(
        relative_coords.reshape(-1, 2), return_inverse=True, dim=0
    )
    relative_position_index = relative_position_index.view(relative_coords.shape[:2])
    if class_token:
        relative_position_index = F.pad(relative_position_index, [1, 0, 1, 0])
        relative_position_index[0, 0:] = num_relative_distance - 3
        relative_position_index[0:, 0] = num_relative_distance - 2
        relative_position_index[0, 0] = num_relative_distance - 1
    return relative_position_index.numpy()


def _timm_maxvit_tf_bias(table, height, width):
    """timm ``RelPosBiasTf.get_bias`` (MaxViT's TensorFlow layout): the one-hot lookups
    of ``generate_lookup_tensor`` and ``reindex_2d_einsum_lookup``, restated."""
    import torch

    def lookup(length):
        ret = torch.zeros(length, length, 2 * length - 1, dtype=torch.float64)
        for i in range(length):
            for x in range(length):
                ret[i, x, x - i + length - 1] = 1
        return ret

    out = torch.einsum("nhw,ixh->nixw", table, lookup(height))
    out = torch.einsum("nixw,jyw->nijxy", out, lookup(width))
    return out.reshape(table.shape[0], height * width, height * width)


@pytest.mark.parametrize("window", [(1, 1), (2, 3), (4, 4)])
def test_timm_and_maxvit_indices(window: tuple[int, int]) -> None:
    torch = pytest.importorskip("torch")
    for prefix in (0, 1):
        theirs = _timm_gen_relative_position_index(window, class_token=bool(prefix))
        np.testing.assert_array_equal(relative_position_index(window, prefix_tokens=prefix), theirs)
    # MaxViT (TF layout): table (heads, 2 Wh - 1, 2 Ww - 1), key - query: the transpose.
    rows = num_relative_distance(window)
    table = torch.randn(2, 2 * window[0] - 1, 2 * window[1] - 1, dtype=torch.float64)
    theirs = _timm_maxvit_tf_bias(table, *window).numpy()
    flat = table.reshape(2, rows).T.numpy()  # (rows, heads)
    ours = relative_position_bias(flat, window)
    np.testing.assert_array_equal(ours.transpose(0, 2, 1), theirs)


# --------------------------------------------------------------------------- SwinV2


def _coords_reference(size: int, pretrained: int) -> list[float]:
    """The SwinV2 coordinate of each offset in 50-digit arithmetic."""
    out = []
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        for d in range(-(size - 1), size):
            x = decimal.Decimal(8 * d) / (pretrained - 1) if pretrained > 1 else decimal.Decimal(0)
            value = (abs(x) + 1).ln() / decimal.Decimal(8).ln()
            out.append(float(value if x >= 0 else -value))
    return out


@pytest.mark.parametrize(
    ("window", "pretrained"), [((2, 3), None), ((3, 3), (5, 4)), ((8, 8), (12, 12))]
)
def test_swinv2_coords_match_transformers(window, pretrained) -> None:
    pytest.importorskip("torch")
    from transformers import Swinv2Config
    from transformers.models.swinv2.modeling_swinv2 import Swinv2SelfAttention

    config = Swinv2Config(embed_dim=8, num_heads=[2], depths=[1])
    module = Swinv2SelfAttention(config, 8, 2, window, pretrained_window_size=pretrained or [0, 0])
    theirs = module.relative_coords_table[0].numpy()
    ours = swinv2_coords_table(window, pretrained_window_size=pretrained)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    ulps = np.abs(ours.astype(np.float64) - theirs) / np.spacing(np.abs(theirs).clip(1e-30, None))
    assert ulps.max() <= 1.0  # transformers' float32 log2 and divisions, one ulp at most
    scale = pretrained or window
    exact = swinv2_coords_table(window, pretrained_window_size=pretrained, dtype="float64")
    for axis in range(2):
        reference = np.array(_coords_reference(window[axis], scale[axis]))
        line = exact[:, 0, 0] if axis == 0 else exact[0, :, 1]
        np.testing.assert_allclose(line, reference, rtol=2e-16, atol=1e-300)
        rounded = (ours[:, 0, 0] if axis == 0 else ours[0, :, 1]).astype(np.float64)
        np.testing.assert_array_equal(rounded, reference.astype(np.float32))


def test_swinv2_single_row_window_is_finite() -> None:
    table = swinv2_coords_table((3, 1))
    assert np.isfinite(table).all() and (table[:, :, 1] == 0).all()


# --------------------------------------------------------------------------- Shaw


def test_clipped_positions_match_the_speech_models() -> None:
    torch = pytest.importorskip("torch")
    from transformers.models.speecht5.modeling_speecht5 import SpeechT5RelativePositionalEncoding

    # SpeechT5: an embedding whose row r holds r returns its index.
    module = SpeechT5RelativePositionalEncoding(1, max_length=3)
    module.pe_k.weight.data = torch.arange(6.0)[:, None]
    theirs = module(torch.zeros(1, 8, 1))[..., 0].long().numpy()
    ours = clipped_relative_position(8, 8, max_left=3, max_right=2, query_minus_key=True)
    np.testing.assert_array_equal(ours, theirs)
    # W2V-BERT's relative_key (_apply_relative_key_position_encoding), restated:
    # distance = key - query, clamp(-left, right) + left.
    left, right = 4, 2
    q, k = torch.arange(5).view(-1, 1), torch.arange(9).view(1, -1)
    theirs = (torch.clamp(k - q, -left, right) + left).numpy()
    ours = clipped_relative_position(5, 9, max_left=left, max_right=right)
    np.testing.assert_array_equal(ours, theirs)
    # Granite Speech: the encoder's attention_dists buffer.
    from transformers import GraniteSpeechEncoderConfig
    from transformers.models.granite_speech.modeling_granite_speech import GraniteSpeechCTCEncoder

    config = GraniteSpeechEncoderConfig(
        input_dim=4,
        num_layers=0,
        hidden_dim=8,
        feedforward_mult=1,
        num_heads=2,
        dim_head=4,
        output_dim=4,
        context_size=5,
        max_pos_emb=7,
    )
    theirs = GraniteSpeechCTCEncoder(config).attention_dists.numpy()
    ours = clipped_relative_position(5, 5, max_left=5, offset=7, query_minus_key=True)
    np.testing.assert_array_equal(ours, theirs)


@given(st.integers(1, 9), st.integers(1, 9), st.integers(0, 5), st.integers(0, 5), st.booleans())
def test_clipped_positions_definition(q_len, k_len, left, right, reverse) -> None:
    out = clipped_relative_position(
        q_len, k_len, max_left=left, max_right=right, query_minus_key=reverse
    )
    for i in range(q_len):
        for j in range(k_len):
            d = i - j if reverse else j - i
            assert out[i, j] == min(max(d, -left), right) + left


# --------------------------------------------------------------------------- LeViT


@pytest.mark.parametrize(("resolution", "stride"), [(1, 1), (4, 1), (5, 1), (7, 2), (8, 2), (4, 3)])
def test_levit_offsets_match_transformers(resolution: int, stride: int) -> None:
    pytest.importorskip("torch")
    from transformers.models.levit.modeling_levit import LevitAttention, LevitAttentionSubsample

    if stride == 1:
        module = LevitAttention(8, 4, 2, 2, resolution)
    else:
        out = (resolution - 1) // stride + 1
        module = LevitAttentionSubsample(8, 8, 4, 2, 2, stride, resolution, out)
    theirs = module.attention_bias_idxs.numpy()
    ours = levit_attention_offsets(resolution, stride=stride)
    np.testing.assert_array_equal(ours, theirs)
    assert module.attention_biases.shape[1] == resolution**2


# --------------------------------------------------------------------------- ESMFold


def test_esmfold_bins_match_transformers(backend: str) -> None:
    torch = pytest.importorskip("torch")
    from transformers.models.esm.modeling_esmfold import EsmFoldRelativePosition

    class Config:
        position_bins, pairwise_state_dim = 4, 1

    module = EsmFoldRelativePosition(Config())
    module.embedding.weight.data = torch.arange(10.0)[:, None]  # row r holds r
    rng = np.random.default_rng(1)
    residues = np.sort(rng.integers(0, 30, size=(2, 7)), axis=-1)
    mask = rng.random((2, 7)) > 0.3
    for m in (None, mask):
        theirs = (
            module(torch.from_numpy(residues), None if m is None else torch.from_numpy(m))[..., 0]
            .long()
            .numpy()
        )
        ours = esmfold_relative_bins(
            positions_on(backend, residues), 4, mask=None if m is None else positions_on(backend, m)
        )
        assert_equal(ours, positions_on(backend, theirs.astype(_int_dtype(backend))))


# --------------------------------------------------------------------------- DeBERTa

DEBERTA = [(256, 512), (64, 256), (8, 100), (3, 10), (4, 7)]


def _steps_near(a: int, x: float, mid: int, max_position: int) -> int:
    """``ceil(x(a))`` for an ``x`` within 1e-9 of the integer ``n``: ``x <= n`` exactly
    when ``(a / mid) ** (mid - 1) <= ((max_position - 1) / mid) ** n``."""
    n, k = round(x), mid - 1
    return n if a**k * mid**n <= (max_position - 1) ** n * mid**k else n + 1


def _exact_buckets(rel: np.ndarray, bucket_size: int, max_position: int) -> np.ndarray:
    """The real-number formula: float64, and integer comparisons where float64 is within
    1e-9 of an integer (a step boundary)."""
    mid = bucket_size // 2
    a = np.abs(rel).astype(np.float64)
    big = a > mid
    x = np.zeros_like(a)
    if mid > 1:
        x[big] = (mid - 1) * np.log(a[big] / mid) / math.log((max_position - 1) / mid)
    steps = np.ceil(x)
    for i in np.flatnonzero((np.abs(x - np.round(x)) < 1e-9) & big & (mid > 1)):
        steps[i] = _steps_near(abs(int(rel[i])), float(x[i]), mid, max_position)
    bucket = np.sign(rel) * (mid + steps.astype(np.int64))
    return np.where(big, bucket, rel)


def _correct_log32(value: float) -> np.float32:
    """The float32 nearest to ``log(value)`` (40-digit Decimals)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        exact = decimal.Decimal(value).ln()
    guess = np.float32(float(exact))
    near = (
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    )
    return min(near, key=lambda c: abs(decimal.Decimal(float(c)) - exact))


def _exact_bucket(r: int, bucket_size: int, max_position: int) -> int:
    """One bucket of the real-number formula, in 60-digit Decimals (Python ints)."""
    mid, a = bucket_size // 2, abs(r)
    if a <= mid:
        return r
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        log_ratio = (decimal.Decimal(max_position - 1) / mid).ln()
        x = (mid - 1) * (decimal.Decimal(a) / mid).ln() / log_ratio
    steps = (
        _steps_near(a, float(x), mid, max_position) if abs(x - round(x)) < 1e-9 else math.ceil(x)
    )
    return (mid + steps) * (1 if r > 0 else -1)


@pytest.mark.parametrize(("bucket_size", "max_position"), DEBERTA)
def test_deberta_buckets_match_transformers(bucket_size: int, max_position: int) -> None:
    torch = pytest.importorskip("torch")
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    rng = np.random.default_rng(bucket_size)
    dense = np.arange(-(2**19), 2**19) if bucket_size == 256 else np.arange(-(2**16), 2**16)
    sparse = rng.integers(-(2**62), 2**62, size=4000)
    edges = [2**63 - 1, -(2**63) + 1, 2**31, -(2**31), 2**24 + 1]
    rel = np.concatenate([dense, sparse, edges])
    theirs = make_log_bucket_position(torch.from_numpy(rel), bucket_size, max_position)
    theirs = theirs.to(torch.long).numpy()
    ours = deberta_log_bucket(rel, bucket_size, max_position, arithmetic="float32")
    assert ours.dtype == np.int64
    differ = np.flatnonzero(ours != theirs)
    # Only where PyTorch's float32 log of |r| / mid is not the correctly rounded one
    # (its vectorised CPU log is within 0.53 ulp), and there by one bucket.
    assert (np.abs(ours[differ] - theirs[differ]) == 1).all()
    ratios = np.abs(rel[differ]).astype(np.float32) / np.float32(bucket_size // 2)
    torch_logs = torch.log(torch.from_numpy(ratios)).numpy()
    assert all(_correct_log32(float(v)) != t for v, t in zip(ratios, torch_logs, strict=True))
    assert len(differ) <= 12
    exact = deberta_log_bucket(rel, bucket_size, max_position)
    np.testing.assert_array_equal(exact[:-5], _exact_buckets(rel[:-5], bucket_size, max_position))
    # the edges, and the most negative int64 (|r| = 2**63; transformers' abs overflows)
    extreme = [*edges, -(2**63)]
    got = deberta_log_bucket(np.array(extreme, dtype=np.int64), bucket_size, max_position)
    assert got.tolist() == [_exact_bucket(r, bucket_size, max_position) for r in extreme]


def test_deberta_float32_point() -> None:
    # 31 log(10134 / 32) / log(255 / 32) = 86.0000013...: bucket 119, float32 118
    assert deberta_log_bucket(10134, 64, 256).tolist() == 119
    assert deberta_log_bucket(-10134, 64, 256, arithmetic="float32").tolist() == -118


def test_deberta_relative_position_matches_transformers() -> None:
    torch = pytest.importorskip("torch")
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    for q_len, k_len, bucket, most in [(5, 9, -1, -1), (300, 700, 256, 512), (40, 33, 8, 30)]:
        theirs = build_relative_position(
            torch.zeros(1, q_len, 2), torch.zeros(1, k_len, 2), bucket, most
        )[0].numpy()
        ours = deberta_relative_position(
            q_len, k_len, bucket_size=bucket, max_position=most, arithmetic="float32"
        )
        np.testing.assert_array_equal(ours, theirs)
        exact = deberta_relative_position(q_len, k_len, bucket_size=bucket, max_position=most)
        np.testing.assert_array_equal(exact, theirs)  # no float32 point this close


def test_deberta_buckets_on_every_backend(backend: str) -> None:
    rng = np.random.default_rng(3)
    wide = _int_dtype(backend)
    info = np.iinfo(wide)
    rel = np.concatenate(
        [
            np.arange(-3000, 3000),
            rng.integers(info.min // 2, info.max // 2, size=2000),
            [info.min, info.min + 1, info.max],
        ]
    ).astype(wide)
    for arithmetic in ("exact", "float32"):
        expected = deberta_log_bucket(rel.astype(np.int64), 256, 512, arithmetic=arithmetic)
        got = deberta_log_bucket(positions_on(backend, rel), 256, 512, arithmetic=arithmetic)
        assert_equal(got, positions_on(backend, expected.astype(wide)))
    small = rel[:6000].astype(np.int32)
    got = deberta_log_bucket(positions_on(backend, small), 64, 256)
    assert_equal(got, positions_on(backend, deberta_log_bucket(small, 64, 256)))


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8))
def test_deberta_buckets_are_the_real_formula(values: list[int]) -> None:
    rel = np.array(values, dtype=np.int64)
    for bucket, most in ((256, 512), (8, 100)):
        mid = bucket // 2
        out = deberta_log_bucket(rel, bucket, most)
        for r, b in zip(values, out.tolist(), strict=True):
            a = abs(r)
            if a <= mid:
                assert b == r
                continue
            steps = abs(b) - mid  # the smallest n >= 1 with x(a) <= n, in integers
            k = mid - 1
            assert a**k * mid**steps <= (most - 1) ** steps * mid**k
            assert a**k * mid ** (steps - 1) > (most - 1) ** (steps - 1) * mid**k
            assert (b > 0) == (r > 0)


# --------------------------------------------------------------------------- Funnel


def _funnel_structure(attention_type: str, separate_cls: bool, truncate_seq: bool, blocks=3):
    from transformers import FunnelConfig
    from transformers.models.funnel.modeling_funnel import FunnelAttentionStructure

    config = FunnelConfig(
        vocab_size=10,
        block_sizes=[1] * blocks,
        d_model=8,
        n_head=2,
        d_head=4,
        d_inner=8,
        separate_cls=separate_cls,
        truncate_seq=truncate_seq,
        attention_type=attention_type,
    )
    return FunnelAttentionStructure(config).eval()


@pytest.mark.parametrize("separate_cls", [True, False])
@pytest.mark.parametrize("truncate_seq", [True, False])
def test_funnel_positions_match_transformers(separate_cls: bool, truncate_seq: bool) -> None:
    pytest.importorskip("torch")
    structure = _funnel_structure("relative_shift", separate_cls, truncate_seq)
    flags = {"separate_cls": separate_cls, "truncate_seq": truncate_seq}
    for seq_len in (1, 2, 3, 8, 13):
        pos = list(range(seq_len))
        assert funnel_block_positions(seq_len, 0, **flags).tolist() == pos
        for block in range(4):  # the loop of get_position_embeds, one block more
            if block:
                pooled = structure.stride_pool_pos(pos, block)
                ours = funnel_pooled_positions(pos, block, **flags)
                assert ours.dtype == np.int64 and ours.tolist() == pooled
                assert funnel_block_positions(seq_len, block, **flags).tolist() == pooled
                rel = funnel_relative_positions(pos, 2 ** (block - 1), pooled, shift=2)
                want = structure.relative_pos(pos, 2 ** (block - 1), pooled, shift=2)
                assert rel.dtype == np.int64
                np.testing.assert_array_equal(rel, want.numpy())
                pos = pooled
            rel = funnel_relative_positions(pos, 2**block)
            np.testing.assert_array_equal(rel, structure.relative_pos(pos, 2**block).numpy())


@given(
    st.lists(st.integers(-50, 50), min_size=1, max_size=6).map(sorted),
    st.lists(st.integers(-50, 50), min_size=1, max_size=6).map(sorted),
    st.integers(1, 5),
    st.integers(1, 3),
)
def test_funnel_relative_positions_are_torch_arange(keys, queries, stride, shift) -> None:
    torch = pytest.importorskip("torch")
    structure = _funnel_structure("relative_shift", True, True)
    max_dist = queries[0] - keys[0] + shift * len(queries) * stride
    if max_dist < queries[0] - keys[-1] - 1:
        with pytest.raises(ValueError, match="max_dist"):
            funnel_relative_positions(keys, stride, queries, shift=shift)
        with pytest.raises(RuntimeError):
            torch.arange(max_dist, queries[0] - keys[-1] - 1, -stride)
        return
    want = structure.relative_pos(keys, stride, queries, shift=shift).numpy()
    np.testing.assert_array_equal(
        funnel_relative_positions(keys, stride, queries, shift=shift), want
    )


def _funnel_flat(embeds) -> list:
    if isinstance(embeds, tuple):
        return list(embeds)
    return [e for block in embeds for e in block]


@pytest.mark.parametrize("attention_type", ["relative_shift", "factorized"])
@pytest.mark.parametrize(
    ("separate_cls", "truncate_seq"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_funnel_embeds_match_transformers(attention_type, separate_cls, truncate_seq) -> None:
    torch = pytest.importorskip("torch")
    structure = _funnel_structure(attention_type, separate_cls, truncate_seq)
    flags = {"separate_cls": separate_cls, "truncate_seq": truncate_seq}
    for seq_len in (5, 8, 13):
        refs = {}
        for dtype in ("float64", "float32"):
            ref = structure.get_position_embeds(seq_len, getattr(torch, dtype), torch.device("cpu"))
            ours = funnel_position_embeds(
                seq_len, 8, attention_type=attention_type, num_blocks=3, dtype=dtype, **flags
            )
            assert type(ours) is (tuple if attention_type == "factorized" else list)
            pairs = list(zip(_funnel_flat(ours), _funnel_flat(ref), strict=True))
            assert all((a is None) == (b is None) for a, b in pairs)
            refs[dtype] = [(a, b.numpy()) for a, b in pairs if a is not None]
        for got, want in refs["float64"]:  # float64: transformers' float64 is the reference
            assert_close(got, want, atol=1e-14, dtype="float64")
        for (got, _), (_, want64) in zip(refs["float32"], refs["float64"], strict=True):
            # float32: the exact value rounded once (half an ulp of 1, and the float64 error)
            assert_close(got, want64.astype(np.float32), atol=6.0e-8 + 1e-14, dtype="float32")
        for (got, want), _ in zip(refs["float32"], refs["float64"], strict=True):
            # transformers forms the angle in float32: within its rounding, angles < 4 seq_len
            assert_close(got, want, atol=4 * seq_len * 2.0**-23, dtype="float32")


def test_funnel_embeds_are_the_sinusoid_of_the_distances() -> None:
    torch = pytest.importorskip("torch")
    # where transformers' table of distances -2 seq_len .. 2 seq_len - 1 is too short (a
    # short input, several blocks) its gather fails; pe_core encodes the distances directly
    structure = _funnel_structure("relative_shift", True, True)
    with pytest.raises(RuntimeError):
        structure.get_position_embeds(2, torch.float64, torch.device("cpu"))
    blocks = funnel_position_embeds(2, 8, num_blocks=3, dtype="float64")
    w = 1.0 / 10000.0 ** (np.arange(4) / 4)  # transformers' inv_freq, d_model // 2 = 4
    pos = [0, 1]
    for block, (no_pooling, pooling) in enumerate(blocks):
        if block:
            pooled = funnel_block_positions(2, block).tolist()
            rel = funnel_relative_positions(pos, 2 ** (block - 1), pooled, shift=2)
            angle = rel[:, None] * w
            assert_close(pooling, np.concatenate([np.sin(angle), np.cos(angle)], -1), atol=1e-15)
            pos = pooled
        angle = funnel_relative_positions(pos, 2**block)[:, None] * w
        assert_close(no_pooling, np.concatenate([np.sin(angle), np.cos(angle)], -1), atol=1e-15)
    assert pe_core.funnel.FUNNEL == pe_core.Spec(layout="split", denominator="d")


def test_funnel_on_every_backend(backend: str) -> None:
    pooled = funnel_pooled_positions(range(7), 1, backend=backend)
    assert_equal(pooled, positions_on(backend, np.array([-1, 1, 3, 5], _int_dtype(backend))))
    block = funnel_block_positions(9, 2, truncate_seq=False, backend=backend)
    host = funnel_block_positions(9, 2, truncate_seq=False)
    assert_equal(block, positions_on(backend, _expected_dtype(backend, host)))
    rel = funnel_relative_positions(range(5), 2, [-1, 1, 3], shift=2, backend=backend)
    host = funnel_relative_positions(range(5), 2, [-1, 1, 3], shift=2)
    assert_equal(rel, positions_on(backend, _expected_dtype(backend, host)))
    for kind in ("relative_shift", "factorized"):
        want = _funnel_flat(funnel_position_embeds(6, 8, attention_type=kind, num_blocks=2))
        got = _funnel_flat(
            funnel_position_embeds(6, 8, attention_type=kind, num_blocks=2, backend=backend)
        )
        for a, b in zip(got, want, strict=True):
            if b is None:
                assert a is None
            else:
                assert_close(a, positions_on(backend, b), atol=1e-7, dtype="float32")
    like = positions_on(backend, np.zeros(2, np.float32))
    phi = funnel_position_embeds(3, 4, attention_type="factorized", like=like)[0]
    assert_close(
        phi,
        positions_on(backend, funnel_position_embeds(3, 4, attention_type="factorized")[0]),
        atol=1e-7,
    )


def test_funnel_traced_jax() -> None:
    jax = pytest.importorskip("jax")

    @jax.jit
    def run(x):
        blocks = funnel_position_embeds(5, 8, num_blocks=2, backend="jax")
        return [x + e for block in blocks for e in block if e is not None]

    got = run(jax.numpy.zeros((), jax.numpy.float32))
    want = [
        e for block in funnel_position_embeds(5, 8, num_blocks=2) for e in block if e is not None
    ]
    for a, b in zip(got, want, strict=True):
        assert_close(a, jax.numpy.asarray(b), atol=1e-7)


# --------------------------------------------------------------------------- compiled


def test_traced_jax() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    rel = np.arange(-600, 600, dtype=np.int32)
    run = jax.jit(lambda r: deberta_log_bucket(r, 256, 512))
    assert_equal(run(jnp.asarray(rel)), jnp.asarray(deberta_log_bucket(rel, 256, 512)))
    table = jnp.asarray(np.random.default_rng(0).standard_normal((12, 2)), jnp.float32)

    @jax.jit
    def bias(t):
        index = relative_position_index(2, prefix_tokens=1, backend="jax")
        return relative_position_bias(t, 2, prefix_tokens=1), index

    value, index = bias(table)
    assert_equal(value, relative_position_bias(table, 2, prefix_tokens=1))
    assert_equal(
        index, jnp.asarray(relative_position_index(2, prefix_tokens=1).astype(index.dtype))
    )
    grad = jax.grad(lambda t: relative_position_bias(t, 2, prefix_tokens=1).sum())(table)
    counts = np.bincount(relative_position_index(2, prefix_tokens=1).ravel(), minlength=12)
    assert_equal(grad, jnp.asarray(np.repeat(counts[:, None], 2, axis=1).astype(np.float32)))


def test_traced_tensorflow() -> None:
    tf = pytest.importorskip("tensorflow")
    rel = np.arange(-600, 600, dtype=np.int64)

    @tf.function
    def run(r):
        return deberta_log_bucket(r, 8, 100), relative_position_index((2, 3), backend="tensorflow")

    buckets, index = run(tf.constant(rel))
    assert_equal(buckets, tf.constant(deberta_log_bucket(rel, 8, 100)))
    assert_equal(index, tf.constant(relative_position_index((2, 3))))


def test_torch_compile_layer_and_buckets() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RelativePositionBias

    layer = RelativePositionBias((2, 3), 2, prefix_tokens=1)
    with torch.no_grad():
        layer.relative_position_bias_table.copy_(torch.randn(layer.table_shape()))
    rel = torch.arange(-600, 600)

    def run(r):
        return layer(), deberta_log_bucket(r, 256, 512)

    compiled = torch.compile(run, backend="eager", fullgraph=True, dynamic=False)
    bias, buckets = compiled(rel)
    eager_bias, eager_buckets = run(rel)
    assert_equal(bias, eager_bias)
    assert_equal(buckets, eager_buckets)
    bias.sum().backward()
    counts = np.bincount(relative_position_index((2, 3), prefix_tokens=1).ravel(), minlength=18)
    np.testing.assert_array_equal(
        layer.relative_position_bias_table.grad.numpy(), np.repeat(counts[:, None], 2, axis=1)
    )


# --------------------------------------------------------------------------- layers


def test_flax_layers_match_torch() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("flax")
    import jax
    import jax.numpy as jnp

    from pe_core.layers.flax import LinenRelativePositionBias, RelativePositionBias
    from pe_core.layers.torch import RelativePositionBias as TorchBias

    table = np.random.default_rng(2).standard_normal((18, 3)).astype(np.float32)
    reference = TorchBias((2, 3), 3, prefix_tokens=1)
    with torch.no_grad():
        reference.relative_position_bias_table.copy_(torch.from_numpy(table))
    expected = reference().detach().numpy()
    nnx_layer = RelativePositionBias((2, 3), 3, prefix_tokens=1)
    nnx_layer.relative_position_bias_table[...] = jnp.asarray(table)
    np.testing.assert_array_equal(np.asarray(nnx_layer()), expected)
    linen = LinenRelativePositionBias((2, 3), 3, prefix_tokens=1)
    variables = {"params": {"relative_position_bias_table": jnp.asarray(table)}}
    np.testing.assert_array_equal(np.asarray(linen.apply(variables)), expected)
    assert linen.init(jax.random.key(0))["params"]["relative_position_bias_table"].shape == (18, 3)
    assert "window_size=(2, 3)" in repr(reference) and "n_heads=3" in repr(nnx_layer)


def test_keras_layer_matches_torch() -> None:
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        import keras
        from pe_core.layers.keras import RelativePositionBias
        table = np.array(json.loads(sys.argv[1]), dtype="float32")
        layer = RelativePositionBias((2, 3), 3, prefix_tokens=1)
        layer.build()
        layer.relative_position_bias_table.assign(table)
        scores = np.ones((2, 3, 7, 7), "float32")
        out = keras.ops.convert_to_numpy(layer(scores))
        clone = RelativePositionBias.from_config(layer.get_config())
        assert clone.window_size == (2, 3) and clone.prefix_tokens == 1
        try:
            layer(np.ones((1, 3, 6, 6), "float32"))
        except ValueError as error:
            assert "N = Wh * Ww + prefix_tokens = 7" in str(error)
        else:
            raise AssertionError("wrong N accepted")
        print(json.dumps((out - 1).tolist()))
        """
    )
    table = np.random.default_rng(2).standard_normal((18, 3)).astype(np.float32)
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", script, __import__("json").dumps(table.tolist())],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.array(__import__("json").loads(result.stdout.strip().splitlines()[-1]))
    expected = relative_position_bias(table, (2, 3), prefix_tokens=1)
    assert got.shape == (2, 3, 7, 7)
    assert_close(got[0].astype(np.float32) + 1 - 1, expected, atol=1e-6)
    assert_close(got[1].astype(np.float32), expected, atol=1e-6)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: relative_position_index(0), ValueError, "window_size must be an integer >= 1"),
        (lambda: relative_position_index(2.0), TypeError, "Received: 2.0"),
        (lambda: relative_position_index((2, 3, 4)), ValueError, "pair of them"),
        (lambda: relative_position_index(True), TypeError, "Received: True"),
        (
            lambda: relative_position_index(2, prefix_tokens=2),
            ValueError,
            "prefix_tokens must be 0",
        ),
        (lambda: relative_position_index(2, prefix_tokens=-1), ValueError, ">= 0. Received: -1"),
        (lambda: relative_position_index(2, backend="nope"), ValueError, "nope"),
        (lambda: swinv2_coords_table(3, pretrained_window_size=1), ValueError, ">= 2"),
        (lambda: swinv2_coords_table(3, dtype="int8"), ValueError, "Unknown dtype 'int8'"),
        (lambda: clipped_relative_position(0, 2, max_left=1), ValueError, "query_length"),
        (lambda: clipped_relative_position(2, 2, max_left=-1), ValueError, "max_left"),
        (
            lambda: clipped_relative_position(2, 2, max_left=1, query_minus_key=1),
            TypeError,
            "True or False",
        ),
        (lambda: levit_attention_offsets(4, stride=2, resolution_out=3), ValueError, "at most"),
        (lambda: levit_attention_offsets(4, stride=0), ValueError, "stride"),
        (lambda: esmfold_relative_bins([0, 1], 0), ValueError, "bins"),
        (lambda: esmfold_relative_bins([0.5, 1], 2), TypeError, "residue_index must be integers"),
        (lambda: esmfold_relative_bins([0, 1], 2, mask=[1, 1, 1]), ValueError, "mask must have"),
        (lambda: deberta_log_bucket([1], 1, 10), ValueError, "bucket_size must be an integer >= 2"),
        (lambda: deberta_log_bucket([1], 256, 129), ValueError, "max_position must exceed"),
        (lambda: deberta_log_bucket([1.5], 256, 512), TypeError, "relative_pos must be integers"),
        (lambda: deberta_log_bucket([True], 256, 512), TypeError, "not booleans"),
        (
            lambda: deberta_log_bucket([1], 256, 512, arithmetic="f16"),
            ValueError,
            "Unknown arithmetic",
        ),
        (lambda: deberta_relative_position(2, 2, bucket_size=2.0), TypeError, "bucket_size"),
        (lambda: relative_position_bias(np.zeros((8, 2)), 2), ValueError, "(9, heads)"),
        (lambda: funnel_relative_positions([], 1), ValueError, "pos must be a non-empty"),
        (lambda: funnel_relative_positions([0, 1.5], 1), TypeError, "Received: [0, 1.5]"),
        (lambda: funnel_relative_positions([0, 1], 0), ValueError, "stride"),
        (lambda: funnel_relative_positions([0, 1], 1, shift=0), ValueError, "shift"),
        (lambda: funnel_relative_positions([0, 1], 1, []), ValueError, "pooled_pos"),
        (
            lambda: funnel_relative_positions([5, 0], 1, [9]),
            ValueError,
            "max_dist = 5, min_dist = 9",
        ),
        (lambda: funnel_pooled_positions([0, 1], 0), ValueError, "block_index"),
        (lambda: funnel_pooled_positions(range(0), 1), ValueError, "non-empty"),
        (lambda: funnel_pooled_positions([True], 1), TypeError, "integers"),
        (lambda: funnel_pooled_positions([0], 1, separate_cls=1), TypeError, "True or False"),
        (lambda: funnel_block_positions(0, 1), ValueError, "seq_len"),
        (lambda: funnel_block_positions(3, -1), ValueError, "block_index"),
        (lambda: funnel_position_embeds(3, 7), ValueError, "halves). Received: 7"),
        (lambda: funnel_position_embeds(3, 8.0), TypeError, "Received: 8.0"),
        (
            lambda: funnel_position_embeds(3, 8, attention_type="shift"),
            ValueError,
            "attention_type",
        ),
        (lambda: funnel_position_embeds(3, 8, num_blocks=0), ValueError, "num_blocks"),
        (lambda: funnel_position_embeds(3, 8, truncate_seq="no"), TypeError, "truncate_seq"),
    ],
)
def test_bad_input_is_refused(call, error, text) -> None:
    with pytest.raises(error, match=None) as info:
        call()
    assert text in str(info.value)


def test_exports() -> None:
    for name in (
        "relative_position_index",
        "deberta_log_bucket",
        "num_relative_distance",
        "funnel_relative_positions",
        "funnel_pooled_positions",
        "funnel_block_positions",
        "funnel_position_embeds",
    ):
        assert name in pe_core.__all__ and getattr(pe_core, name) is not None
    assert to_numpy(pe_core.relative_position_index(1)).tolist() == [[0]]


def test_swin_index_figure() -> None:
    pytest.importorskip("matplotlib")
    from pe_core import plots

    fig = plots.plot_swin_index(2, prefix_tokens=1)
    labels = [int(text.get_text()) for text in fig.axes[0].texts]
    assert labels == relative_position_index(2, prefix_tokens=1).ravel().tolist()
    with pytest.raises(ValueError, match="at most 6"):
        plots.plot_swin_index(7)


def test_funnel_positions_refuse_framework_arrays() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"must be host integers.*torch"):
        funnel_relative_positions(torch.arange(3), 1)
    assert funnel_relative_positions(np.arange(3), 1).tolist() == [3, 2, 1, 0, -1, -2]
