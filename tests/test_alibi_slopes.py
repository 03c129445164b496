"""Tests for pe_core.alibi.alibi_slopes against the ALiBi paper's rule and BLOOM's code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, assert_equal
from hypothesis import given
from hypothesis import strategies as st

from pe_core.alibi import alibi_slopes


def bloom_slopes(num_heads: int) -> np.ndarray:
    """The slope part of transformers' BLOOM ``build_alibi_tensor``, restated in float64."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = np.float64(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))))
    powers = np.arange(1, 1 + closest_power_of_2, dtype=np.int32)
    slopes = np.power(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = np.float64(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))))
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = np.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=np.int32)
        slopes = np.concatenate([slopes, np.power(extra_base, extra_powers)], axis=0)
    return slopes


def ofirpress_get_slopes(n: int) -> list[float]:
    """``get_slopes`` from ofirpress/attention_with_linear_biases."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + ofirpress_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def test_eight_heads_are_negative_powers_of_two():
    s = alibi_slopes(8)
    assert_equal(s, [2.0**-k for k in range(1, 9)], backend="numpy", dtype="float64")


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64, 128, 256])
def test_powers_of_two_follow_geometric_rule(n):
    i = np.arange(1, n + 1)
    assert_close(alibi_slopes(n), 2.0 ** (-8.0 * i / n), atol=0, rtol=1e-15, dtype="float64")
    assert alibi_slopes(n)[0] == 2.0 ** (-8.0 / n)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 20, 24, 40, 48, 71, 96, 112])
def test_non_powers_match_bloom_and_ofirpress(n):
    s = alibi_slopes(n)
    assert_close(s, bloom_slopes(n), atol=0, rtol=1e-14, backend="numpy", dtype="float64")
    assert_close(s, ofirpress_get_slopes(n), atol=0, rtol=1e-14)


def test_twelve_heads_explicit():
    # 8 slopes of the 8-head rule, then the odd members of the 16-head rule
    want = [2.0**-k for k in range(1, 9)] + [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    assert_close(alibi_slopes(12), want, atol=0, rtol=1e-15)


def test_bloom_176b_heads():
    s = alibi_slopes(112)  # BLOOM-176B: 64 + 48 heads
    assert_close(s[:64], 2.0 ** (-8.0 * np.arange(1, 65) / 64), atol=0, rtol=1e-15)
    assert_close(s[64:], 2.0 ** (-8.0 * np.arange(1, 96, 2) / 128), atol=0, rtol=1e-15)


@given(st.integers(1, 4096))
def test_properties(n):
    s = alibi_slopes(n)
    assert np.all((s > 0) & (s < 1))
    assert len(np.unique(s)) == n
    assert_close(s, bloom_slopes(n), atol=0, rtol=1e-13, backend="numpy", dtype="float64")


@pytest.mark.parametrize("bad", [0, -3])
def test_error_non_positive(bad):
    with pytest.raises(ValueError, match=f"n_heads must be an integer >= 1. Received: {bad}"):
        alibi_slopes(bad)


@pytest.mark.parametrize("bad", [8.0, "8", True, None])
def test_error_non_int(bad):
    with pytest.raises(TypeError, match="n_heads must be an integer >= 1"):
        alibi_slopes(bad)


def test_numpy_integer_accepted():
    assert_equal(alibi_slopes(np.int64(12)), alibi_slopes(12), dtype="float64")
