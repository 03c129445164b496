"""pe_core.analysis against brute force: every pair of positions, in float64 NumPy."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pe_core import Spec
from pe_core.analysis import (
    ResolutionReport,
    resolution_report,
    similarity,
    similarity_by_distance,
    similarity_matrix,
)
from pe_core.testing import reference_encoding, specs
from tests.conftest import assert_close, assert_equal, positions_on, to_numpy

SPECS = [
    "vaswani",
    "fairseq",  # split layout, offset 2
    Spec(odd_d="zero_pad", layout="split"),
    Spec(base=50.0, denominator="half_minus_one"),
]


def brute_similarity(table: np.ndarray, metric: str) -> np.ndarray:
    if metric == "dot":
        return table @ table.T
    if metric == "euclidean":
        return np.sqrt(((table[:, None, :] - table[None, :, :]) ** 2).sum(-1))
    norms = np.linalg.norm(table, axis=-1)
    denominator = norms[:, None] * norms[None, :]
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, (table @ table.T) / safe, 0.0)


def tolerance_for(backend: str) -> float:
    return 2e-5 if backend == "jax" else 1e-9  # JAX without x64 computes in float32


# -- similarity ------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclidean"])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_similarity_is_brute_force(backend, metric, spec):
    d = 9 if isinstance(spec, Spec) and spec.odd_d == "zero_pad" else 12
    positions = np.array([0, 1, 2, 7, 50, 51, 300, 1000])
    got = similarity(positions_on(backend, positions), d, spec, metric=metric)
    expected = brute_similarity(reference_encoding(positions, d, spec), metric)
    scale = d if metric == "dot" else 1.0
    assert_close(got, expected, atol=tolerance_for(backend) * scale * 10, backend=backend)


def test_similarity_follows_the_backend_argument(backend):
    positions = [0, 1, 2, 7, 50, 51, 300, 1000]  # the shape above: JAX compiles once
    got = similarity(positions, 12, backend=backend)
    expected = brute_similarity(reference_encoding(positions, 12), "cosine")
    assert_close(got, expected, atol=1e-5, backend=backend)


def test_similarity_dtype_float32():
    got = similarity(range(5), 8, dtype="float32", metric="euclidean")
    expected = brute_similarity(reference_encoding(np.arange(5), 8), "euclidean")
    assert_close(got, expected, atol=1e-5, rtol=1e-7, backend="numpy", dtype="float32")


def test_similarity_matrix_of_any_code(backend):
    from pe_core_backends import get_namespace

    bits = ((np.arange(16)[:, None] >> np.arange(4)) & 1).astype(np.float32)
    xp = get_namespace(backend)
    for metric in ("cosine", "dot", "euclidean"):
        got = similarity_matrix(xp.asarray(bits), metric=metric)
        assert_close(
            got, brute_similarity(bits.astype(np.float64), metric), atol=1e-6, backend=backend
        )
    # a zero vector (position 0) has cosine 0 with everything
    assert_equal(to_numpy(similarity_matrix(xp.asarray(bits)))[0], np.zeros(16))


def test_similarity_matrix_wide_and_empty_tables():
    wide = np.random.default_rng(0).normal(size=(3, 40))
    for metric in ("cosine", "dot", "euclidean"):
        assert_close(
            similarity_matrix(wide, metric=metric),
            brute_similarity(wide, metric),
            atol=1e-12,
            rtol=1e-7,
            backend="numpy",
            dtype="float64",
        )
    for metric in ("cosine", "dot", "euclidean"):
        assert similarity_matrix(np.zeros((0, 4)), metric=metric).shape == (0, 0)


def test_similarity_euclidean_blocks():
    """Large enough to be computed in several row blocks."""
    table = np.random.default_rng(1).normal(size=(1100, 8))
    from pe_core import _analysis

    old = _analysis.BLOCK_VALUES
    _analysis.BLOCK_VALUES = 5000
    try:
        got = similarity_matrix(table, metric="euclidean")
    finally:
        _analysis.BLOCK_VALUES = old
    want = brute_similarity(table, "euclidean")[::37]
    assert_close(got[::37], want, atol=1e-12, rtol=1e-7, backend="numpy", dtype="float64")


# -- similarity by distance ----------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "dot", "euclidean"])
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_by_distance_is_every_pair_at_that_distance(backend, metric, spec):
    d = 9 if isinstance(spec, Spec) and spec.odd_d == "zero_pad" else 16
    K = 300
    got = similarity_by_distance(d, spec, max_distance=K, metric=metric, backend=backend)
    for p in (0, 17, 5000):
        table = reference_encoding(np.arange(p, p + K + 1), d, spec)
        expected = brute_similarity(table, metric)[0]
        scale = d if metric == "dot" else 1.0
        assert_close(got, expected, atol=tolerance_for(backend) * scale * 10, backend=backend)


@pytest.mark.parametrize("d", [2, 8, 64, 512])
def test_by_distance_is_the_cos_sum(d):
    """cosine(k) = sum_i cos(k w_i) / (d/2), the formula the docs derive."""
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    k = np.arange(2001)
    cos_sum = np.cos(k[:, None] * w).sum(-1)
    assert_close(
        similarity_by_distance(d, max_distance=2000),
        cos_sum / (d / 2),
        atol=1e-12,
        rtol=1e-7,
        dtype="float64",
    )
    assert_close(
        similarity_by_distance(d, max_distance=2000, metric="dot"), cos_sum, atol=1e-10, rtol=1e-7
    )
    assert_close(
        similarity_by_distance(d, max_distance=2000, metric="euclidean") ** 2,
        2 * (d / 2 - cos_sum),
        atol=1e-9,
        rtol=1e-7,
    )


@given(spec=specs(), d=st.integers(1, 24), k=st.integers(0, 3000), p=st.integers(0, 10**6))
def test_by_distance_hypothesis(spec, d, k, p):
    if d % 2 and spec.odd_d == "raise":
        d += 1
    if spec.frequencies is not None:
        d = 2 * len(spec.frequencies) + (d % 2 if spec.odd_d == "zero_pad" else 0)
    table = reference_encoding(np.array([p, p + k]), d, spec)
    expected = brute_similarity(table, "cosine")[0, 1]
    got = similarity_by_distance(d, spec, max_distance=k)[k]
    assert abs(got - expected) < 1e-8


def test_by_distance_near_collision_keeps_digits():
    """Frequencies with exact periods: the distance at the period is tiny, not noise."""
    spec = Spec(frequencies=(2 * math.pi / 5, 2 * math.pi / 10))
    got = similarity_by_distance(4, spec, max_distance=20, metric="euclidean")
    assert got[10] < 1e-14 and got[20] < 1e-14
    assert got[5] > 1.0


def test_by_distance_zero_features():
    """d = 1 zero-padded: one zero feature, every encoding the same zero vector."""
    spec = Spec(odd_d="zero_pad")
    assert_equal(similarity_by_distance(1, spec, max_distance=3), np.zeros(4))
    assert_equal(similarity_by_distance(1, spec, max_distance=3, metric="euclidean"), np.zeros(4))


# -- resolution reports --------------------------------------------------------------


def brute_report(table: np.ndarray, min_separation: int, tolerance: float) -> dict:
    n = len(table)
    distance = brute_similarity(table, "euclidean")
    cosine = brute_similarity(table, "cosine")
    i, j = np.triu_indices(n, 1)
    far = (j - i) >= min_separation
    close = distance[i, j] < tolerance
    return {
        "min_distance": distance[i, j].min(),
        "max_far_cosine": cosine[i, j][far].max() if far.any() else None,
        "distinguishable_length": int(j[close].min()) if close.any() else n,
        "distance": distance,
        "cosine": cosine,
    }


def check_report(report: ResolutionReport, brute: dict, atol: float) -> None:
    p, q = report.min_distance_pair
    assert 0 <= p < q < report.max_len
    assert report.min_distance == pytest.approx(brute["min_distance"], abs=atol)
    assert brute["distance"][p, q] == pytest.approx(brute["min_distance"], abs=atol)
    if brute["max_far_cosine"] is None:
        assert report.max_far_cosine is None and report.max_far_cosine_pair is None
    else:
        p, q = report.max_far_cosine_pair
        assert q - p >= report.min_separation and 0 <= p < q < report.max_len
        assert report.max_far_cosine == pytest.approx(brute["max_far_cosine"], abs=atol)
        assert brute["cosine"][p, q] == pytest.approx(brute["max_far_cosine"], abs=atol)
    assert report.distinguishable_length == brute["distinguishable_length"]


REPORT_CASES = [
    (8, "vaswani", 400, 50, 1e-3),
    (4, Spec(base=30.0), 500, 20, 0.05),  # near-collisions within reach
    (6, "tensor2tensor", 300, 299, 1e-3),
    (7, "flax", 300, 1, 1e-3),
    (4, Spec(frequencies=(2 * math.pi / 5, 2 * math.pi / 10)), 60, 3, 1e-6),  # period 10
    (4, Spec(frequencies=(2 * math.pi / 5, 2 * math.pi / 10)), 60, 60, 1e-6),  # nothing far
    (6, "fairseq", 250, 30, 1.4),  # a tolerance above the neighbours' distance
]


@pytest.mark.parametrize(("d", "spec", "max_len", "min_separation", "tolerance"), REPORT_CASES)
def test_sinusoidal_report_is_brute_force(d, spec, max_len, min_separation, tolerance):
    report = resolution_report(
        d, spec, max_len=max_len, min_separation=min_separation, tolerance=tolerance
    )
    brute = brute_report(reference_encoding(np.arange(max_len), d, spec), min_separation, tolerance)
    check_report(report, brute, atol=1e-9)
    assert report.code == "sinusoidal" and report.d == d and report.max_len == max_len


def test_sinusoidal_report_on_every_backend(backend):
    expected = resolution_report(8, "whisper", max_len=3000, min_separation=100)
    got = resolution_report(8, "whisper", max_len=3000, min_separation=100, backend=backend)
    assert got.min_distance_pair == expected.min_distance_pair
    assert got.max_far_cosine_pair == expected.max_far_cosine_pair
    assert got.distinguishable_length == expected.distinguishable_length
    assert got.min_distance == pytest.approx(expected.min_distance, abs=tolerance_for(backend))
    assert got.max_far_cosine == pytest.approx(expected.max_far_cosine, abs=tolerance_for(backend))


def test_sinusoidal_report_never_forms_pairs():
    """The k-only path: 20 000 positions at d = 512 would be 4e8 pairs by brute force.

    Memory, not time, is what is checked (a busy machine must not fail the suite): the pairs
    would need gigabytes; the path by distance needs a few rows of ``max_len``.
    """
    resolution_report(64, max_len=1000)  # warm caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        report = resolution_report(512, max_len=20_000, min_separation=1000)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert report.min_distance_pair == (0, 1)


def test_report_summary_and_frozen():
    report = resolution_report(16, max_len=50, min_separation=60)
    assert report.max_far_cosine is None
    assert "no pair that far apart" in report.summary()
    with pytest.raises(AttributeError):
        report.max_len = 3  # type: ignore[misc]


# -- the other codes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "max_len", "min_separation", "tolerance"),
    [(9, 300, 16, 1e-3), (7, 70, 3, 1e-3), (6, 64, 8, 1.2), (10, 200, 200, 0.5), (8, 256, 1, 1)],
)
def test_binary_report_is_brute_force(d, max_len, min_separation, tolerance):
    bits = ((np.arange(max_len)[:, None] >> np.arange(d)) & 1).astype(np.float64)
    report = resolution_report(
        d, max_len=max_len, min_separation=min_separation, tolerance=tolerance, code="binary"
    )
    check_report(report, brute_report(bits, min_separation, tolerance), atol=1e-12)
    assert report.code == "binary" and report.spec is None


def test_binary_report_needs_enough_bits():
    assert resolution_report(8, max_len=256, code="binary").distinguishable_length == 256
    with pytest.raises(ValueError, match="max_len must be <= 2\\*\\*d = 256: a 8-bit binary code"):
        resolution_report(8, max_len=257, code="binary")


def test_binary_report_on_every_backend(backend):
    expected = resolution_report(7, max_len=100, min_separation=5, code="binary")
    got = resolution_report(7, max_len=100, min_separation=5, code="binary", backend=backend)
    assert got == expected


@pytest.mark.parametrize(
    ("max_len", "min_separation", "tolerance"),
    [(50, 5, 1e-3), (50, 49, 0.03), (2, 1, 1e-3), (300, 10, 0.01), (12, 12, 0.5)],
)
def test_normalized_report_is_brute_force(max_len, min_separation, tolerance):
    values = np.arange(max_len) / (max_len - 1)
    report = resolution_report(
        1, max_len=max_len, min_separation=min_separation, tolerance=tolerance, code="normalized"
    )
    brute = brute_report(values[:, None], min_separation, tolerance)
    # the code depends on the length: a sequence of n tokens is distinguishable when
    # its neighbours, 1/(n-1) apart, are at least `tolerance` apart
    lengths = [n for n in range(1, max_len + 1) if n < 2 or 1 / (n - 1) >= tolerance]
    brute["distinguishable_length"] = max(lengths)
    check_report(report, brute, atol=1e-12)


def test_normalized_report_on_every_backend(backend):
    expected = resolution_report(1, max_len=3000, min_separation=7, code="normalized")
    got = resolution_report(1, max_len=3000, min_separation=7, code="normalized", backend=backend)
    assert got.distinguishable_length == expected.distinguishable_length == 1001
    assert got.max_far_cosine_pair == expected.max_far_cosine_pair
    assert got.min_distance == pytest.approx(expected.min_distance, rel=1e-3)


def test_normalized_report_long():
    report = resolution_report(1, max_len=100_000, tolerance=1e-3, code="normalized")
    assert report.distinguishable_length == 1001
    assert report.min_distance == pytest.approx(1 / 99_999)
    assert report.max_far_cosine == 1.0  # every positive number points the same way


def test_scalar_cosine_with_signs():
    from pe_core._analysis import scalar_max_cosine as _scalar_max_cosine

    assert _scalar_max_cosine(np.array([-1.0, 0.0, 1.0]), 2) == (-1.0, (0, 2))
    assert _scalar_max_cosine(np.array([-1.0, 0.0, 1.0]), 1) == (0.0, (0, 1))
    assert _scalar_max_cosine(np.array([-2.0, 0.0, -1.0]), 2) == (1.0, (0, 2))
    assert _scalar_max_cosine(np.array([1.0, -1.0, 0.0, -3.0]), 2) == (1.0, (1, 3))


# -- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: similarity(range(3), 8, metric="cos"), "Unknown metric 'cos'. Expected one of"),
        (lambda: similarity([[0, 1]], 8), "positions must be one-dimensional"),
        (lambda: similarity_matrix(np.zeros(3)), r"shape \(n, d\). Received shape: \(3,\)"),
        (
            lambda: similarity_by_distance(8, max_distance=-1),
            "max_distance must be an integer >= 0",
        ),
        (lambda: similarity_by_distance(8, max_distance=3, dtype="float16"), "float32 or float64"),
        (lambda: resolution_report(8, max_len=1), "max_len must be an integer >= 2. Received: 1"),
        (lambda: resolution_report(8, max_len=9, min_separation=0), "min_separation"),
        (lambda: resolution_report(8, max_len=9, tolerance=0), "tolerance must be a finite"),
        (lambda: resolution_report(8, max_len=9, code="gray"), "Unknown code 'gray'"),
        (lambda: resolution_report(8, "fairseq", max_len=9, code="binary"), "sinusoidal code only"),
        (lambda: resolution_report(7, max_len=9), "d must be even"),
    ],
)
def test_errors_name_the_bad_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()
