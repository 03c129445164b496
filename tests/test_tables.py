"""The table path (runs of consecutive positions) equals the exact per-element kernel."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from reference import exact_table

import pe_core
from pe_core._kernel.tables import block_shape, contiguous_start

ATOL32 = 1e-6


@given(
    start=st.one_of(st.integers(-(10**6), 10**6), st.integers(2**24 - 10**5, 2**24)),
    n=st.integers(64, 3000),
    spec=st.sampled_from(sorted(n for n, s in pe_core.PRESETS.items() if s.axes == 1)),
    d=st.sampled_from([32, 64, 33]),
)
def test_table_path_matches_general_kernel(
    backend: str, start: int, n: int, spec: str, d: int
) -> None:
    if d % 2 and pe_core.PRESETS[spec].odd_d == "raise":
        d += 1
    positions = np.arange(start, start + n)
    fast = pe_core.encode(positions_on(backend, positions), d, spec=spec)
    general = pe_core.encode(positions[:, None], d, spec=spec, dtype="float64")[:, 0]
    assert_close(fast, general, atol=ATOL32, backend=backend, dtype="float32")


def test_table_path_against_mpmath_at_large_positions(backend: str) -> None:
    positions = np.arange(2**24 - 1024, 2**24)
    d = 64
    out = to_numpy(pe_core.encode(positions_on(backend, positions), d))
    rows = np.array([0, 1, 511, 1000, 1023])
    expected = exact_table(positions[rows], pe_core.frequencies(d), "interleaved", d)
    assert_close(out[rows], expected, atol=ATOL32, rtol=1e-7)


def test_table_path_float64(backend: str) -> None:
    if backend == "jax":
        pytest.skip("float64 on JAX needs jax_enable_x64, which pe_core never sets")
    positions = np.arange(10**9, 10**9 + 2048)
    out = pe_core.encode(positions, 16, backend=backend, dtype="float64")
    rows = [0, 777, 2047]
    expected = exact_table(positions[rows], pe_core.frequencies(16), "interleaved", 16)
    for row, want in zip(rows, expected, strict=True):  # row by row: TensorFlow indexing
        assert_close(out[row], want, atol=1e-12, rtol=1e-7, backend=backend, dtype="float64")


def test_shapes_other_than_a_vector() -> None:
    positions = np.arange(4096).reshape(2, 2048)
    out = pe_core.encode(positions, 64)
    expected = pe_core.encode(positions, 64, dtype="float64")
    assert_close(out, expected, atol=ATOL32, rtol=1e-7, dtype="float32")


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["vaswani", "whisper"])
def test_out_argument_is_written_and_returned(backend_name: str, layout: str) -> None:
    from pe_core_backends import get_namespace, is_installed

    if not is_installed(backend_name):
        pytest.skip(f"{backend_name} not installed")
    xp = get_namespace(backend_name)
    for n in (4096, 3000, 10):  # whole blocks, a partial block, the direct kernel
        buffer = xp.asarray(np.full((n, 128), 7.0, dtype=np.float32))
        positions = xp.asarray(np.arange(5, 5 + n))
        result = pe_core.encode(positions, 128, spec=layout, out=buffer)
        assert result is buffer
        expected = pe_core.encode(np.arange(5, 5 + n), 128, spec=layout, dtype="float64")
        assert_close(buffer, expected, atol=ATOL32, rtol=1e-7, backend=backend_name)


def test_out_argument_validation() -> None:
    with pytest.raises(ValueError, match=r"out must have shape \(10, 8\) and dtype float32"):
        pe_core.encode(range(10), 8, out=np.empty((10, 4), np.float32))
    with pytest.raises(TypeError, match="out must be a NumPy array or a torch tensor"):
        pe_core.encode(range(10), 8, out=[0.0] * 80)


def test_contiguous_detection() -> None:
    assert contiguous_start(np.arange(3, 10)) == 3
    assert contiguous_start(np.arange(3, 10, dtype=np.float32)) == 3
    assert contiguous_start(np.arange(3, 10) + 0.5) is None
    assert contiguous_start(np.array([1, 2, 4])) is None
    assert contiguous_start(np.arange(10)[::-1]) is None
    assert contiguous_start(None) is None


@pytest.mark.parametrize("n", [1, 2, 63, 64, 1000, 8192, 65536, 100_003])
def test_block_shape_covers_every_row(n: int) -> None:
    blocks, block = block_shape(n)
    assert blocks * block >= n > (blocks - 1) * block
    assert block & (block - 1) == 0
