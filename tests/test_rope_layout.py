"""Tests for pe_core.rope_layout.rope_permutation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_core.rope_layout import LAYOUTS, rope_permutation

# ---------------------------------------------------------------- tiny float64 RoPE kernels


def rope_half(x: np.ndarray, pos: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """GPT-NeoX / Llama / HF rotate-half on the first 2*len(inv_freq) features of x[..., T, D]."""
    r = 2 * len(inv_freq)
    ang = pos[:, None] * inv_freq[None, :]  # (T, r/2)
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)
    xr, rest = x[..., :r], x[..., r:]
    x1, x2 = xr[..., : r // 2], xr[..., r // 2 :]
    rotated = np.concatenate([-x2, x1], axis=-1)
    return np.concatenate([xr * cos + rotated * sin, rest], axis=-1)


def rope_interleaved(x: np.ndarray, pos: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """GPT-J / RoFormer: pair (2j, 2j+1) rotated by pos * inv_freq[j]."""
    r = 2 * len(inv_freq)
    ang = pos[:, None] * inv_freq[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    xr, rest = x[..., :r], x[..., r:]
    even, odd = xr[..., 0::2], xr[..., 1::2]
    out = np.empty_like(xr)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return np.concatenate([out, rest], axis=-1)


KERNELS = {"half": rope_half, "interleaved": rope_interleaved}


def attention_scores(x, wq, wk, n_heads, head_dim, rotary_dim, layout, q_pos, k_pos):
    """q = x W_q^T, k = x W_k^T (PyTorch Linear), rotated in `layout`; returns (H, Tq, Tk)."""
    inv_freq = 10000.0 ** (-np.arange(0, rotary_dim, 2) / rotary_dim)
    q = (x @ wq.T).reshape(len(x), n_heads, head_dim).transpose(1, 0, 2)
    k = (x @ wk.T).reshape(len(x), n_heads, head_dim).transpose(1, 0, 2)
    q = KERNELS[layout](q[:, : len(q_pos)], q_pos, inv_freq)
    k = KERNELS[layout](k[:, : len(k_pos)], k_pos, inv_freq)
    return q @ k.transpose(0, 2, 1)


def permute_rows(w, n_heads, head_dim, perm):
    hidden = w.shape[1]
    return w.reshape(n_heads, head_dim, hidden)[:, perm, :].reshape(n_heads * head_dim, hidden)


# ---------------------------------------------------------------- tests


@settings(max_examples=60, deadline=None)
@given(
    n_heads=st.integers(1, 4),
    half_dim=st.integers(1, 16),
    extra=st.integers(0, 3),
    partial=st.booleans(),
    source=st.sampled_from(LAYOUTS),
    seed=st.integers(0, 2**32 - 1),
)
def test_converted_weights_keep_attention_scores(n_heads, half_dim, extra, partial, source, seed):
    rng = np.random.default_rng(seed)
    head_dim = 2 * half_dim + 2 * extra if partial else 2 * half_dim
    rotary_dim = 2 * half_dim
    hidden = 12
    target = "half" if source == "interleaved" else "interleaved"
    x = rng.standard_normal((9, hidden))
    wq = rng.standard_normal((n_heads * head_dim, hidden))
    wk = rng.standard_normal((n_heads * head_dim, hidden))
    q_pos = rng.integers(0, 50_000, size=9).astype(np.float64)
    k_pos = rng.integers(0, 50_000, size=9).astype(np.float64)

    before = attention_scores(x, wq, wk, n_heads, head_dim, rotary_dim, source, q_pos, k_pos)
    perm = rope_permutation(head_dim, source, target, rotary_dim=rotary_dim if partial else None)
    wq2 = permute_rows(wq, n_heads, head_dim, perm)
    wk2 = permute_rows(wk, n_heads, head_dim, perm)
    after = attention_scores(x, wq2, wk2, n_heads, head_dim, rotary_dim, target, q_pos, k_pos)
    assert_close(after, before, atol=1e-10, rtol=1e-10)

    # ...while keeping the old weights and only switching the kernel breaks them (rotary_dim >= 4)
    if half_dim >= 2:
        wrong = attention_scores(x, wq, wk, n_heads, head_dim, rotary_dim, target, q_pos, k_pos)
        assert not np.allclose(wrong, before)


def test_matches_convert_llama_weights_to_hf_permute():
    # transformers: w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)
    n_heads, head_dim, hidden = 4, 16, 8
    w = np.random.default_rng(0).standard_normal((n_heads * head_dim, hidden))
    hf = (
        w.reshape(n_heads, head_dim // 2, 2, hidden)
        .transpose(0, 2, 1, 3)
        .reshape(n_heads * head_dim, hidden)
    )
    perm = rope_permutation(head_dim, "interleaved", "half")
    assert_equal(permute_rows(w, n_heads, head_dim, perm), hf)


@pytest.mark.parametrize("head_dim", [2, 4, 8, 64, 128])
def test_values_and_inverse(head_dim):
    i2h = rope_permutation(head_dim, "interleaved", "half")
    h2i = rope_permutation(head_dim, "half", "interleaved")
    half = head_dim // 2
    assert_equal(i2h[:half], np.arange(0, head_dim, 2), backend="numpy", dtype="int64")
    assert_equal(i2h[half:], np.arange(1, head_dim, 2))
    assert_equal(i2h[h2i], np.arange(head_dim))
    assert_equal(h2i[i2h], np.arange(head_dim), backend="numpy", dtype="int64")  # h2i's dtype
    assert_equal(np.sort(i2h), np.arange(head_dim))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_identity_for_equal_layouts(layout):
    assert_equal(rope_permutation(10, layout, layout), np.arange(10), dtype="int64")


def test_partial_rotary_leaves_tail_in_place():
    perm = rope_permutation(10, "interleaved", "half", rotary_dim=6)
    assert_equal(perm, [0, 2, 4, 1, 3, 5, 6, 7, 8, 9])


def test_odd_head_dim_is_fine_when_only_even_part_rotates():
    assert_equal(rope_permutation(5, "half", "interleaved", rotary_dim=4), [0, 2, 1, 3, 4])


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (
            (8, "neox", "half"),
            {},
            "Unknown from_layout 'neox'. Expected one of: half, interleaved.",
        ),
        ((8, "half", "gptj"), {}, "Unknown to_layout 'gptj'. Expected one of: half, interleaved."),
        ((0, "half", "interleaved"), {}, "head_dim must be an integer >= 1"),
        ((7, "half", "interleaved"), {}, "head_dim must be even"),
        ((8, "half", "interleaved"), {"rotary_dim": 3}, "rotary_dim must be even"),
        (
            (8, "half", "interleaved"),
            {"rotary_dim": 10},
            r"rotary_dim must be an integer in \[0, head_dim=8\]",
        ),
    ],
)
def test_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rope_permutation(*args, **kwargs)
