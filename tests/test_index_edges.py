"""Index tables and position ids at their edges: every accepted size in bounded work,
every request beyond memory refused up front with its size, integer extremes exact or
refused, on every backend."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from conftest import assert_equal, positions_on, to_numpy

from pe_core import funnel, position_ids, t5
from pe_core import relative_index as ri
from pe_core_backends import get_namespace

BIG = 2**40


def _wide(backend: str) -> str:
    return "int64" if get_namespace(backend).supports("int64") else "int32"


# --------------------------------------------------------------------------- DeBERTa


@pytest.mark.parametrize(
    ("bucket_size", "max_position"), [(2**16, 2**17 + 7), (2**24, 2**23 + 3), (2**20, 2**22)]
)
def test_deberta_buckets_are_direct_for_every_bucket_size(bucket_size, max_position) -> None:
    rel = np.array([5, -(2**63), 2**63 - 1, 2**40 + 3, -(2**20) - 1], dtype=np.int64)
    tracemalloc.start()
    start = time.perf_counter()
    for arithmetic in ("exact", "float32"):
        out = ri.deberta_log_bucket(rel, bucket_size, max_position, arithmetic=arithmetic)
        assert out[0] == 5 and -out[1] >= out[2] > 0
        table = ri.deberta_relative_position(
            2, 3000, bucket_size=bucket_size, max_position=max_position, arithmetic=arithmetic
        )
        assert table.shape == (2, 3000)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 5  # was 122 s (2**16) and no answer (2**20, 2**24)
    assert peak < 8 * 2**20


def test_deberta_exact_agrees_with_the_integer_definition_at_large_buckets() -> None:
    mid, most = 2**15, 2**17 + 7
    k, top = mid - 1, most - 1
    values = [mid + 1, mid + 2, 3 * mid, 10**6 + 7]
    out = ri.deberta_log_bucket(values, 2 * mid, most).tolist()
    for a, b in zip(values, out, strict=True):
        steps = b - mid  # x(a) <= steps < x(a) + 1, in integers
        assert a**k * mid**steps <= top**steps * mid**k
        assert a**k * mid ** (steps - 1) > top ** (steps - 1) * mid**k


def test_deberta_uint64_is_exact() -> None:
    values = np.array([2**63, 2**64 - 1], np.uint64)
    assert ri.deberta_log_bucket(values, 256, 512).tolist() == [3690, 3753]
    assert ri.deberta_log_bucket([2**63, 2**64 - 1], 256, 512).tolist() == [3690, 3753]
    with pytest.raises(ValueError, match="int64"):
        ri.deberta_log_bucket([2**64], 256, 512)


def test_deberta_device_arrays_at_the_extremes(backend: str) -> None:
    wide = _wide(backend)
    info = np.iinfo(wide)
    rel = np.array([info.min, info.min + 1, info.max, -1, 0, 129], dtype=wide)
    expected = ri.deberta_log_bucket(rel.astype(np.int64), 256, 512)
    got = ri.deberta_log_bucket(positions_on(backend, rel), 256, 512)
    assert_equal(got, positions_on(backend, expected.astype(wide)))
    if backend != "numpy":  # thresholds beyond the cap: refused up front, NumPy computes
        with pytest.raises(ValueError, match="thresholds"):
            ri.deberta_log_bucket(positions_on(backend, rel), 2**18, 2**19 + 7)


# --------------------------------------------------------------------------- ESMFold


def test_esmfold_bins_at_the_extremes(backend: str) -> None:
    wide = _wide(backend)
    info = np.iinfo(wide)
    index = np.array([info.min, info.max, 0, info.max - 1, info.min + 2], dtype=wide)
    got = to_numpy(ri.esmfold_relative_bins(positions_on(backend, index), 4))
    exact = np.array(
        [[max(-4, min(4, int(j) - int(i))) + 5 for j in index] for i in index], dtype=np.int64
    )
    np.testing.assert_array_equal(got, exact)


def test_esmfold_refuses_uint64_beyond_int64() -> None:
    with pytest.raises(ValueError, match="int64"):
        ri.esmfold_relative_bins(np.array([0, 2**63], np.uint64), 4)


# --------------------------------------------------------------------------- sizes


SIZE_LIMITS = {
    "relative_position_index": lambda: ri.relative_position_index(BIG),
    "clipped_relative_position": lambda: ri.clipped_relative_position(BIG, BIG, max_left=3),
    "levit_attention_offsets": lambda: ri.levit_attention_offsets(BIG),
    "deberta_relative_position": lambda: ri.deberta_relative_position(BIG, BIG),
    "esmfold_relative_bins": lambda: ri.esmfold_relative_bins(np.zeros(2**21, np.int64), 4),
    "t5_bucket_matrix": lambda: t5.t5_bucket_matrix(BIG, BIG),
    "t5_num_buckets": lambda: t5.t5_bucket_matrix(2, 2, num_buckets=2**40),
    "funnel_block_positions": lambda: funnel.funnel_block_positions(BIG, 0),
    "funnel_block_index": lambda: funnel.funnel_block_positions(4, BIG),
    "funnel_pooled_positions": lambda: funnel.funnel_pooled_positions(range(4), BIG),
    "funnel_relative_positions": lambda: funnel.funnel_relative_positions(
        list(range(4)), stride=1, shift=BIG
    ),
    "funnel_position_embeds": lambda: funnel.funnel_position_embeds(BIG, 8),
    "from_cu_seqlens_total": lambda: position_ids.from_cu_seqlens([0, 3], total_length=BIG),
    "from_cu_seqlens_last": lambda: position_ids.from_cu_seqlens([0, BIG]),
    "navit_bucket_table": lambda: position_ids.navit_bucket_table(70, BIG),
    "from_patch_attention_mask": lambda: position_ids.from_patch_attention_mask(
        np.ones((1, 2, 2), bool), BIG
    ),
}


@pytest.mark.parametrize("name", sorted(SIZE_LIMITS))
def test_huge_requests_are_refused_up_front(name: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"memory|at most|fit in"):
        SIZE_LIMITS[name]()
    assert time.perf_counter() - start < 2


def test_table_cells_are_proportional_to_the_output() -> None:
    types = np.zeros((1, 2**17, 3), np.int64)
    types[0, 100:, 1] = np.arange(2**17 - 100) // 7 + 1
    tracemalloc.start()
    out = position_ids.from_table_cells(types)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20  # the (seq, seq) pairs would be 16 GiB
    assert out[0, :3].tolist() == [0, 1, 2] and out[0, 100:108].tolist() == [0, 1, 2, 3, 4, 5, 6, 0]


def test_table_cells_agree_with_the_pairwise_rule(backend: str) -> None:
    rng = np.random.default_rng(5)
    for seq in (1, 33):
        types = rng.integers(0, 3, (2, seq, 3))
        expected = np.array(
            [
                [
                    t - min(j for j in range(seq) if (row[j, 1:3] == row[t, 1:3]).all())
                    for t in range(seq)
                ]
                for row in types
            ]
        )
        got = position_ids.from_table_cells(positions_on(backend, types.astype(_wide(backend))))
        np.testing.assert_array_equal(to_numpy(got), expected)


# --------------------------------------------------------------------------- position ids


def test_padding_value_beyond_the_output_dtype_is_named(backend: str) -> None:
    mask = positions_on(backend, np.array([[1, 0]], _wide(backend)))
    for value in (2**63, -(2**63) - 1, 2**70):
        with pytest.raises(ValueError, match=f"{value}.*does not fit"):
            position_ids.from_attention_mask(mask, padding_value=value)


def test_cu_seqlens_beyond_int64_are_named() -> None:
    with pytest.raises(ValueError, match="9223372036854775808 at index 1"):
        position_ids.from_cu_seqlens(np.array([0, 2**63], np.uint64))


def test_eager_cu_seqlens_without_total_length(backend: str) -> None:
    cu = positions_on(backend, np.array([0, 3, 5], _wide(backend)))
    got = position_ids.from_cu_seqlens(cu)
    assert to_numpy(got).tolist() == [0, 1, 2, 0, 1]


def test_traced_cu_seqlens_need_total_length() -> None:
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError, match="total_length"):
        jax.jit(position_ids.from_cu_seqlens)(jax.numpy.array([0, 3, 5]))
    fixed = jax.jit(lambda c: position_ids.from_cu_seqlens(c, total_length=5))
    assert np.asarray(fixed(jax.numpy.array([0, 3, 5]))).tolist() == [0, 1, 2, 0, 1]


def test_funnel_positions_beyond_int64_are_named() -> None:
    with pytest.raises(ValueError, match="fit in int64"):
        funnel.funnel_pooled_positions([2**63], 1)
    assert funnel.funnel_block_positions(8, BIG, separate_cls=False).tolist() == [0]
