"""T5's relative position buckets: transformers' numbers exactly, and their properties.

The reference is transformers' own ``T5Attention._relative_position_bucket`` (float32
PyTorch on the CPU) and ``compute_bias``; x-transformers' ``RelativePositionBias`` is a
second codebase. ``arithmetic="exact"`` is checked against the real-number formula
evaluated with mpmath.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, assert_equal, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from reference import hf_t5_compute_bias, t5_bucket_reference

import pe_core
from pe_core.t5 import bucket_thresholds, t5_bucket_matrix, t5_relative_bias, t5_relative_bucket
from pe_core_backends import get_namespace

#: (num_buckets, max_distance, bidirectional): T5's encoder and decoder, and configs
#: whose float32 boundaries differ from the real-number ones (found by a sweep of 372
#: configs; see docs/relative.md).
T5_CONFIGS = [(32, 128, True), (32, 128, False)]
FLOAT32_DIFFERS = [(128, 10**6, True), (100, 10**6, True), (320, 100_000, True), (48, 10**6, False)]

#: Every integer relative position with |r| <= R is compared.
R = 10**6


def _hf_bucket(relative: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int):
    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    out = t5.T5Attention._relative_position_bucket(
        torch.as_tensor(relative),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    return out.numpy()


def _float64_bucket(relative: np.ndarray, bidirectional: bool, num_buckets: int, md: int):
    """transformers' formula line by line, in float64 (what a float64 log would give)."""
    rel = relative.astype(np.int64)
    out = np.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        out += (rel > 0) * n
        a = np.abs(rel)
    else:
        a = -np.minimum(rel, 0)
    max_exact = n // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(a, 1).astype(np.float64) / max_exact)
            / math.log(md / max_exact)
            * (n - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, n - 1)
    return out + np.where(a < max_exact, a, large)


def _exact_bucket(a: int, n: int, md: int) -> int:
    """The real-number bucket of a distance ``a >= 0`` on one side (mpmath, 60 digits)."""
    mpmath = pytest.importorskip("mpmath")
    max_exact = n // 2
    if a < max_exact:
        return a
    with mpmath.workdps(60):
        steps = mpmath.log(mpmath.mpf(a) / max_exact) / mpmath.log(mpmath.mpf(md) / max_exact)
        return min(max_exact + int(mpmath.floor(steps * (n - max_exact))), n - 1)


# --------------------------------------------------------------------------- transformers


@pytest.mark.parametrize("config", T5_CONFIGS + FLOAT32_DIFFERS)
def test_every_position_up_to_a_million_is_transformers_bucket(config) -> None:
    num_buckets, max_distance, bidirectional = config
    relative = np.arange(-R, R + 1)
    expected = _hf_bucket(relative, bidirectional, num_buckets, max_distance)
    got = t5_relative_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert got.dtype == np.int64
    mismatch = np.flatnonzero(got != expected)
    assert mismatch.size == 0, f"first mismatches at r = {relative[mismatch[:5]].tolist()}"


def test_float64_log_disagrees_with_transformers_where_pe_core_does_not() -> None:
    """float64 arithmetic moves the boundary of r = +-14427 for (100 buckets, 10**6)."""
    relative = np.arange(-20_000, 20_001)
    expected = _hf_bucket(relative, True, 100, 10**6)
    float64 = _float64_bucket(relative, True, 100, 10**6)
    differs = relative[float64 != expected]
    assert differs.size > 0 and set(np.abs(differs).tolist()) == {14427}
    assert_equal(t5_relative_bucket(relative, num_buckets=100, max_distance=10**6), expected)


@pytest.mark.parametrize("config", T5_CONFIGS)
def test_float32_float64_and_exact_agree_for_t5s_configs(config) -> None:
    num_buckets, max_distance, bidirectional = config
    relative = np.arange(-R, R + 1)
    kwargs = {"bidirectional": bidirectional, "num_buckets": num_buckets}
    ours = t5_relative_bucket(relative, max_distance=max_distance, **kwargs)
    exact = t5_relative_bucket(relative, max_distance=max_distance, arithmetic="exact", **kwargs)
    assert_equal(ours, exact)
    assert_equal(ours, _float64_bucket(relative, bidirectional, num_buckets, max_distance))


def test_the_tie_distances_16_32_64_take_the_upper_bucket() -> None:
    """log(r / 8) / log(16) * 8 is exactly 2, 4 and 6 there: a boundary, not below it."""
    expected = _hf_bucket(-np.array([15, 16, 31, 32, 63, 64]), False, 16, 128)
    assert_equal(expected, [9, 10, 11, 12, 13, 14])
    ours = t5_relative_bucket([-15, -16, -31, -32, -63, -64], bidirectional=False, num_buckets=16)
    assert_equal(ours, expected)


@pytest.mark.parametrize("config", FLOAT32_DIFFERS)
def test_exact_arithmetic_is_the_real_number_bucket(config) -> None:
    num_buckets, max_distance, bidirectional = config
    n = num_buckets // 2 if bidirectional else num_buckets
    thresholds = bucket_thresholds(n, max_distance, "exact")
    # every boundary and its neighbours, where rounding could matter
    distances = sorted({a + s for a in thresholds for s in (-1, 0, 1)} | {0, 1, n // 2})
    sign = 1 if bidirectional else -1
    got = t5_relative_bucket(
        [sign * a for a in distances],
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
        arithmetic="exact",
    )
    offset = n if bidirectional else 0
    expected = [_exact_bucket(a, n, max_distance) + (offset if a > 0 else 0) for a in distances]
    assert_equal(got, expected)
    float32 = t5_relative_bucket(
        [sign * a for a in distances],
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert float32.tolist() != expected  # these configs are the ones where they differ


# --------------------------------------------------------------------------- backends


@given(data=st.data())
def test_every_backend_gives_transformers_buckets(backend: str, data: st.DataObject) -> None:
    num_buckets = data.draw(st.integers(4, 80), label="num_buckets")
    bidirectional = data.draw(st.booleans(), label="bidirectional")
    n = num_buckets // 2 if bidirectional else num_buckets
    max_distance = data.draw(st.integers(n // 2 + 1, 5000), label="max_distance")
    relative = np.array(
        data.draw(st.lists(st.integers(-20_000, 20_000), min_size=1, max_size=64)), np.int64
    )
    expected = _hf_bucket(relative, bidirectional, num_buckets, max_distance)
    xp = get_namespace(backend)
    rel = relative.astype(np.int32) if backend == "jax" else relative
    got = t5_relative_bucket(
        xp.asarray(rel),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert xp.kind(xp.dtype_of(got)) == "int"
    assert_equal(got, expected, backend=backend)


def test_traced_buckets_equal_eager_ones(backend: str) -> None:
    # the extremes of the dtype too: transformers' own code overflows there (|-2**63|),
    # so their buckets come from the Python-int restatement of it
    wide = "int32" if backend == "jax" else "int64"
    info = np.iinfo(wide)
    extremes = [int(info.min), int(info.min) + 1, int(info.max) - 1, int(info.max)]
    relative = np.concatenate([np.arange(-3000, 3000, 7), np.array(extremes)]).astype(wide)
    expected = np.concatenate(
        [
            _hf_bucket(relative[: -len(extremes)], True, 32, 128),
            [t5_bucket_reference(v, True, 32, 128, "float32") for v in extremes],
        ]
    )
    if backend == "jax":
        jax = pytest.importorskip("jax")
        got = jax.jit(t5_relative_bucket)(relative)
    elif backend == "torch":
        torch = pytest.importorskip("torch")
        got = torch.compile(t5_relative_bucket, fullgraph=True)(torch.as_tensor(relative))
    elif backend == "tensorflow":
        tf = pytest.importorskip("tensorflow")
        got = tf.function(t5_relative_bucket, jit_compile=True)(tf.constant(relative))
    else:
        pytest.skip("NumPy does not trace")
    assert_equal(got, expected, backend=backend)


# --------------------------------------------------------------------------- properties


def _side(num_buckets: int, bidirectional: bool) -> int:
    return num_buckets // 2 if bidirectional else num_buckets


@given(
    num_buckets=st.integers(4, 128),
    bidirectional=st.booleans(),
    data=st.data(),
)
def test_buckets_are_in_range_monotone_and_symmetric(
    backend: str, num_buckets: int, bidirectional: bool, data: st.DataObject
) -> None:
    n = _side(num_buckets, bidirectional)
    max_exact = n // 2
    max_distance = data.draw(st.integers(max_exact + 1, 600), label="max_distance")
    distances = np.arange(2048)  # one shape: eager JAX compiles each new one
    xp = get_namespace(backend)
    kwargs = {
        "bidirectional": bidirectional,
        "num_buckets": num_buckets,
        "max_distance": max_distance,
    }
    ints = np.int32 if backend == "jax" else np.int64
    before = to_numpy(t5_relative_bucket(xp.asarray((-distances).astype(ints)), **kwargs))
    after = to_numpy(t5_relative_bucket(xp.asarray(distances.astype(ints)), **kwargs))
    for side in (before, after):
        assert side.min() >= 0 and side.max() < num_buckets
    # keys before the query: exact buckets, then monotone, saturating at max_distance
    assert_equal(before[:max_exact], distances[:max_exact])
    assert np.all(np.diff(before) >= 0)
    saturated = before[distances >= max_distance]
    assert_equal(saturated, np.full_like(saturated, n - 1))
    assert np.all(before[distances < max_distance] <= n - 1)
    if bidirectional:  # keys after it: the same buckets, shifted to the upper half
        assert after[0] == 0
        assert_equal(after[1:], before[1:] + n)
    else:  # a decoder sees no keys after the query: all share bucket 0
        assert_equal(after, np.zeros_like(after))


@given(data=st.data())
def test_thresholds_are_where_the_bucket_steps(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 200), label="n")
    max_distance = data.draw(st.integers(n // 2 + 1, 10**5), label="max_distance")
    thresholds = bucket_thresholds(n, max_distance)
    # non-decreasing: with max_distance close to max_exact several buckets start together
    assert list(thresholds) == sorted(thresholds)
    assert len(thresholds) <= n - n // 2 - 1
    kwargs = {"bidirectional": False, "num_buckets": n, "max_distance": max_distance}
    at = t5_relative_bucket([-t for t in thresholds], **kwargs)
    below = t5_relative_bucket([-(t - 1) for t in thresholds], **kwargs)
    for k in range(len(thresholds)):  # bucket max_exact + k + 1 starts at thresholds[k]
        assert at[k] >= n // 2 + k + 1 > below[k]


# --------------------------------------------------------------------------- bias


@given(
    q_len=st.sampled_from([1, 40]),  # few shapes: eager JAX compiles each new one
    extra=st.sampled_from([0, 300]),
    offset=st.integers(0, 300),
    is_decoder=st.booleans(),
)
def test_bias_is_transformers_compute_bias(
    backend: str, q_len: int, extra: int, offset: int, is_decoder: bool
) -> None:
    table = np.random.default_rng(q_len).standard_normal((32, 3)).astype(np.float32)
    k_len = q_len + extra
    expected = hf_t5_compute_bias(table, q_len, k_len, offset, is_decoder)
    got = t5_relative_bias(
        q_len,
        k_len,
        get_namespace(backend).asarray(table),
        offset=offset,
        bidirectional=not is_decoder,
    )
    assert to_numpy(got).shape == (1, 3, q_len, k_len)
    assert_equal(got, expected, backend=backend)  # a gather: bit for bit


def test_per_example_and_traced_offsets(backend: str) -> None:
    xp = get_namespace(backend)
    table = np.random.default_rng(0).standard_normal((32, 2)).astype(np.float32)
    offsets = np.array([0, 5, 300], dtype=np.int32)
    got = to_numpy(t5_relative_bias(4, 9, xp.asarray(table), offset=xp.asarray(offsets)))
    assert got.shape == (3, 2, 4, 9)
    for b, off in enumerate(offsets):
        assert_equal(got[b], t5_relative_bias(4, 9, table, offset=int(off))[0])
    matrix = to_numpy(t5_bucket_matrix(4, 9, offset=xp.asarray(offsets)))
    assert matrix.shape == (3, 4, 9)
    rel = np.arange(9)[None, None, :] - (np.arange(4)[None, :, None] + offsets[:, None, None])
    assert_equal(matrix, t5_relative_bucket(rel))


def test_x_transformers_relative_position_bias() -> None:
    torch = pytest.importorskip("torch")
    xt = pytest.importorskip("x_transformers.x_transformers")
    for causal in (False, True):
        module = xt.RelativePositionBias(scale=1.0, causal=causal, num_buckets=32, heads=4)
        table = module.relative_attention_bias.weight
        with torch.no_grad():
            expected = module(5, 12)  # queries are the last 5 of 12 positions
            got = t5_relative_bias(5, 12, table, offset=12 - 5, bidirectional=not causal)
        assert_equal(got[0], expected)  # torch both: the same dtype and device too


def test_gradients_reach_the_table(backend: str) -> None:
    table = np.random.default_rng(1).standard_normal((32, 2)).astype(np.float32)
    weights = np.random.default_rng(2).standard_normal((1, 2, 3, 7)).astype(np.float32)
    buckets = t5_bucket_matrix(3, 7)
    expected = np.zeros_like(table)
    for h in range(2):
        np.add.at(expected[:, h], buckets.ravel(), weights[0, h].ravel())
    if backend == "torch":
        torch = pytest.importorskip("torch")
        t = torch.tensor(table, requires_grad=True)
        (t5_relative_bias(3, 7, t) * torch.as_tensor(weights)).sum().backward()
        grad = t.grad.numpy()
    elif backend == "jax":
        jax = pytest.importorskip("jax")
        grad = np.asarray(jax.grad(lambda t: (t5_relative_bias(3, 7, t) * weights).sum())(table))
    elif backend == "tensorflow":
        tf = pytest.importorskip("tensorflow")
        t = tf.Variable(table)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(t5_relative_bias(3, 7, t) * weights)
        grad = tf.convert_to_tensor(tape.gradient(loss, t)).numpy()
    else:
        pytest.skip("NumPy has no gradients")
    assert_close(grad, expected, atol=1e-5, rtol=1e-7)


# --------------------------------------------------------------------------- errors


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(TypeError, match="must be integers"):
        t5_relative_bucket([0.5])
    with pytest.raises(ValueError, match="num_buckets must be at least 4"):
        t5_relative_bucket(0, num_buckets=3)
    with pytest.raises(ValueError, match="max_distance must exceed max_exact = 8"):
        t5_relative_bucket(0, max_distance=8)
    with pytest.raises(ValueError, match="Unknown arithmetic 'float64'"):
        t5_relative_bucket(0, arithmetic="float64")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"shape \(num_buckets, n_heads\)"):
        t5_relative_bias(2, 2, np.zeros(32))
    with pytest.raises(ValueError, match="query_length must be an integer >= 1"):
        t5_bucket_matrix(0, 3)
    with pytest.raises(ValueError, match=r"one offset per example"):
        t5_bucket_matrix(2, 3, offset=np.zeros((2, 2), np.int64))
    assert pe_core.t5_relative_bucket is t5_relative_bucket
