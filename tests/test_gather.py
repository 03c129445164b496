"""Angle addition by lookup (pe_core._kernel.gather) against float64 and mpmath references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import assert_close, assert_equal
from hypothesis import given
from hypothesis import strategies as st
from reference import exact_sin_cos

import pe_core
from pe_core._kernel.angles import reduced_angles
from pe_core._kernel.gather import gather_plan, gathered_unit_complex
from pe_core_backends import get_namespace, is_installed

ATOL32 = 3e-7
ATOL64 = 1e-14
W = tuple(pe_core.frequencies(64))  # 32 frequencies from 1 down to 1e-4


@pytest.fixture(params=["numpy", "torch"])
def mutable(request: pytest.FixtureRequest) -> str:
    if not is_installed(request.param):
        pytest.skip(f"backend {request.param!r} is not installed")
    return request.param


def _like(backend: str) -> Any:
    if backend == "torch":
        import torch

        return torch.zeros(())
    return None


def _reference(values: np.ndarray, omegas: tuple[float, ...], offset: float) -> np.ndarray:
    """float64 ``(n_rows, n, 2)`` of [sin, cos] from the exact float64 reduction."""
    numpy = get_namespace("numpy")
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind == "f":
        flat = flat.astype(np.int64)
    angles = reduced_angles(numpy, flat, omegas, offset=offset, working="float64")
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1)


def _gathered(backend: str, values: np.ndarray, **kwargs: Any) -> Any:
    """The table on ``backend`` (its own array type), or ``None`` when lookup does not pay."""
    xp = get_namespace(backend)
    return gathered_unit_complex(xp, values, W, like=_like(backend), **kwargs)


def _positions(kind: str, lo: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "permutation":
        return lo + rng.permutation(n)
    if kind == "offsets":  # per-example offsets, (4, n // 4)
        offsets = rng.integers(0, 3 * n, 4)
        return lo + offsets[:, None] + np.arange(n // 4)
    if kind == "left_padded":  # zeros, then a run, per row
        lengths = rng.integers(1, n // 4, 4)
        rows = np.arange(n // 4)[None, :] - (n // 4 - lengths[:, None])
        return lo + np.maximum(rows, 0)
    return lo + rng.integers(0, 4 * n, n)  # scattered


@given(
    kind=st.sampled_from(["permutation", "offsets", "left_padded", "scattered"]),
    lo=st.one_of(
        st.integers(-(10**6), 10**6),
        st.integers(-(2**40), 2**40),
        st.sampled_from([0, 2**31 - 700, -(2**31)]),
    ),
    n=st.sampled_from([512, 700, 1024]),
    offset=st.sampled_from([0.0, 0.5, 2.0, -1.25]),
    seed=st.integers(0, 2**16),
    form=st.sampled_from(["sin_cos", "cos_sin"]),
)
def test_matches_float64_reference(
    mutable: str, kind: str, lo: int, n: int, offset: float, seed: int, form: str
) -> None:
    values = _positions(kind, lo, n, seed)
    got = _gathered(mutable, values, offset=offset, form=form)
    assert got is not None
    expected = _reference(values, W, offset)
    if form == "cos_sin":
        expected = expected[..., ::-1]
    expected = expected.reshape(values.size, -1)
    assert_close(got, expected, atol=ATOL32, backend=mutable, dtype="float32")


def test_float64_working(mutable: str) -> None:
    values = 10**9 + np.random.default_rng(1).permutation(2048)
    got = _gathered(mutable, values, working="float64", offset=0.5)
    assert got is not None
    expected = _reference(values, W, 0.5).reshape(values.size, -1)
    assert_close(got, expected, atol=ATOL64, backend=mutable, dtype="float64")


def test_against_mpmath_at_large_positions(mutable: str) -> None:
    values = 2**40 - 3000 + np.random.default_rng(2).permutation(2048)
    got = _gathered(mutable, values, offset=0.5)
    rows = [0, 1, 777, 2047]
    s, c = exact_sin_cos(values[rows] + 0.5, np.array(W))
    expected = np.stack([s, c], axis=-1).reshape(len(rows), -1)  # sin, cos interleaved
    assert_close(got[rows], expected, atol=ATOL32, backend=mutable, dtype="float32")


def test_float_values_and_shapes(mutable: str) -> None:
    values = np.random.default_rng(3).permutation(1024).reshape(4, 16, 16) - 100
    got = _gathered(mutable, values.astype(np.float32))
    assert tuple(got.shape) == (1024, 64)
    assert_equal(got, _gathered(mutable, values))  # the same library and dtype too


@pytest.mark.parametrize("chunk_bytes", [1000, 4096, 10**9])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
def test_chunks_and_layouts(mutable: str, chunk_bytes: int, layout: str) -> None:
    values = np.random.default_rng(4).permutation(701) - 350  # 701 rows: no chunk divides it
    got = _gathered(mutable, values, layout=layout, chunk_bytes=chunk_bytes)
    pairs = _reference(values, W, 0.0)
    if layout == "interleaved":
        expected = pairs.reshape(values.size, -1)
    else:
        expected = np.concatenate([pairs[..., 0], pairs[..., 1]], axis=-1)
    assert_close(got, expected, atol=ATOL32, backend=mutable, dtype="float32")


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("extra", [0, 1])
def test_out_written_in_place(mutable: str, layout: str, extra: int) -> None:
    xp = get_namespace(mutable)
    values = np.random.default_rng(5).permutation(600)
    width = 2 * len(W) + extra  # extra: the constant column of odd d, set to zero
    out = xp.asarray(np.full((600, width), 7.0, np.float32), like=_like(mutable))
    result = gathered_unit_complex(
        xp, values, W, layout=layout, out=out, like=_like(mutable), chunk_bytes=3000
    )
    assert result is out
    fresh = _gathered(mutable, values, layout=layout)
    assert_equal(out[:, : 2 * len(W)], fresh)  # the same library and dtype too
    assert_equal(out[:, 2 * len(W) :], np.zeros((600, extra)))


def test_bad_out_raises() -> None:
    xp = get_namespace("numpy")
    values = np.arange(600)[::-1]
    with pytest.raises(ValueError, match="shape"):
        gathered_unit_complex(xp, values, W, out=np.empty((600, 10), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        gathered_unit_complex(xp, values, W, out=np.empty((600, 64), np.float64))
    with pytest.raises(ValueError, match="form"):
        gathered_unit_complex(xp, values, W, form="sin")


@pytest.mark.parametrize(
    "values",
    [
        np.arange(1024) + 0.5,  # fractional
        np.where(np.arange(1024) == 3, np.nan, np.arange(1024)),  # NaN
        np.where(np.arange(1024) == 3, np.inf, np.arange(1024)),  # infinite
        np.arange(1024) * 1000,  # spread too widely for small tables
        np.array([0, 2**60]).repeat(512),  # beyond the exact integer range
        np.arange(8),  # decode-sized: compute directly
        np.arange(1024).astype(bool),
    ],
    ids=["fractional", "nan", "inf", "too-wide", "huge", "small", "bool"],
)
def test_not_applicable_returns_none(mutable: str, values: np.ndarray) -> None:
    assert _gathered(mutable, values) is None


def test_immutable_backends_return_none() -> None:
    for name in ("jax", "tensorflow"):
        if is_installed(name):
            assert gathered_unit_complex(get_namespace(name), np.arange(1024)[::-1], W) is None


def test_plan() -> None:
    assert gather_plan(np.arange(-5, 1019)[::-1], len(W)) == (-5, 32, 32)
    assert gather_plan(np.arange(1024), 0) is None
