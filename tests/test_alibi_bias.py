"""alibi_bias: linear in distance, one slope per head, causal mask, end alignment, backends.

The reference restates transformers' BLOOM ``build_alibi_tensor`` (bias ``slope * j``
for key ``j``, all keys unmasked) plus the causal mask of the ALiBi paper's code. It
differs from ``alibi_bias`` by ``slope * (query position)``, one constant per row, so
the attention weights (the softmax) must agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, assert_equal, to_numpy
from hypothesis import given
from hypothesis import strategies as st

from pe_core.alibi import alibi_bias, alibi_slopes
from pe_core_backends import get_namespace


def bloom_alibi(num_heads: int, k_len: int) -> np.ndarray:
    """transformers' BLOOM build_alibi_tensor for an all-ones mask: (heads, 1, k_len)."""
    closest = 2 ** math.floor(math.log2(num_heads))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = base ** np.arange(1, 1 + closest, dtype=np.float64)
    if closest != num_heads:
        extra_base = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
        n_extra = min(closest, num_heads - closest)
        slopes = np.concatenate([slopes, extra_base ** np.arange(1, 1 + 2 * n_extra, 2)])
    attention_mask = np.ones(k_len)
    arange_tensor = ((np.cumsum(attention_mask) - 1) * attention_mask)[None, None, :]
    return slopes[:, None, None] * arange_tensor


def causal_mask(q_len: int, k_len: int) -> np.ndarray:
    """-inf for keys after the query; queries are the last q_len of k_len positions."""
    query_position = np.arange(q_len)[:, None] + (k_len - q_len)
    return np.where(np.arange(k_len)[None, :] > query_position, -np.inf, 0.0)


def softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


lengths = st.tuples(st.integers(1, 12), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1]))


@given(lengths=lengths, n_heads=st.integers(1, 20))
def test_linear_in_distance_with_one_slope_per_head(backend, lengths, n_heads):
    q_len, k_len = lengths
    out = alibi_bias(q_len, k_len, n_heads, backend=backend, dtype=None)
    slopes = alibi_slopes(n_heads)
    distance = (np.arange(q_len)[:, None] + k_len - q_len) - np.arange(k_len)[None, :]
    allowed = distance >= 0
    expected = np.where(allowed, -slopes[:, None, None] * distance, -np.inf)  # -inf: masked
    assert_close(out, expected, atol=0, rtol=2e-7, backend=backend, dtype="float32")
    # the diagonal (a query on its own position) is exactly zero, every head
    diagonal = to_numpy(out)[:, distance == 0]
    assert_equal(diagonal, np.zeros_like(diagonal))
    # exactly the float32 slope times the integer distance, rounded once
    slope32 = slopes.astype(np.float32).astype(np.float64)[:, None, None]
    exact32 = (-slope32 * distance).astype(np.float32)
    assert_equal(out, np.where(allowed, exact32, -np.inf), backend=backend, dtype="float32")


@given(lengths=lengths, n_heads=st.integers(1, 20))
def test_matches_bloom_up_to_a_per_row_constant(lengths, n_heads):
    q_len, k_len = lengths
    ours = alibi_bias(q_len, k_len, n_heads, dtype="float64")
    bloom = bloom_alibi(n_heads, k_len) + causal_mask(q_len, k_len)
    allowed = np.isfinite(bloom)
    assert_equal(np.isfinite(ours), allowed)
    # ours - bloom = -slope * (query position), the same for every key of a row
    query_position = np.arange(q_len)[:, None] + (k_len - q_len)
    offset = -alibi_slopes(n_heads)[:, None, None] * query_position
    with np.errstate(invalid="ignore"):  # -inf - -inf in the masked entries
        difference = np.where(allowed, ours - bloom, 0.0)
    assert_close(difference, np.where(allowed, offset, 0.0), atol=1e-12, rtol=1e-7)
    scores = np.random.default_rng(q_len * 31 + k_len).standard_normal((n_heads, q_len, k_len))
    assert_close(softmax(scores + ours), softmax(scores + bloom), atol=1e-12, rtol=1e-7)


def test_kv_cache_decoding_rows_equal_the_full_matrix(backend):
    """Queries aligned to the end: the last q rows of the square bias."""
    full = to_numpy(alibi_bias(9, 9, 6, backend=backend))
    for q_len in (1, 3, 9):
        tail = alibi_bias(q_len, 9, 6, backend=backend)
        assert_close(tail, full[:, -q_len:], atol=0, backend=backend, dtype="float32")


def test_non_causal_is_symmetric_and_linear(backend):
    out = alibi_bias(5, 5, 4, causal=False, backend=backend)
    bias = to_numpy(out)
    assert_equal(out, np.swapaxes(bias, -1, -2), backend=backend, dtype="float32")
    distance = np.abs(np.arange(5)[:, None] - np.arange(5)[None, :])
    expected = -alibi_slopes(4).astype(np.float32)[:, None, None] * distance
    assert_close(out, expected, atol=0, rtol=1e-7)
    assert np.isfinite(bias).all()
    # with fewer queries, distances are measured from the aligned query positions
    tail = alibi_bias(2, 5, 4, causal=False, backend=backend)
    assert_equal(tail, bias[:, -2:], backend=backend, dtype="float32")


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_dtypes(backend, dtype):
    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes or not xp.supports(dtype):
        with pytest.raises(ValueError, match=dtype):
            alibi_bias(2, 3, 2, backend=backend, dtype=dtype)
        return
    bias = alibi_bias(2, 3, 2, backend=backend, dtype=dtype)
    expected = alibi_bias(2, 3, 2, dtype="float64")
    assert_close(bias, expected, atol=0, rtol=2**-8, backend=backend, dtype=dtype)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 3, 2), {}, ValueError, r"q_len must be an integer >= 1. Received: 0"),
        ((2, 0, 2), {}, ValueError, r"k_len must be an integer >= 1. Received: 0"),
        ((4, 3, 2), {}, ValueError, r"q_len must not exceed k_len.*q_len=4, k_len=3"),
        ((2, 3, 0), {}, ValueError, r"n_heads must be an integer >= 1. Received: 0"),
        ((2.0, 3, 2), {}, TypeError, r"q_len must be an integer >= 1. Received: 2.0"),
        ((2, 3, True), {}, TypeError, r"n_heads must be an integer >= 1"),
        ((2, 3, 2), {"backend": "tf2"}, ValueError, r"Unknown backend 'tf2'"),
        ((2, 3, 2), {"dtype": "int32"}, ValueError, r"dtype must be a floating dtype"),
    ],
)
def test_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        alibi_bias(*args, **kwargs)
