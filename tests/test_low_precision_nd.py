"""Low-precision N-D routes: within the ulp bound of the 1-D route, and no silent rounding
of low-precision grid coordinates (docs/precision.md)."""

from __future__ import annotations

import numpy as np
import pytest

import pe_core
from pe_core.rope_nd import pair_axes
from pe_core_backends import get_namespace
from tests.conftest import assert_close, positions_on, to_numpy
from tests.reference import exact_sin_cos

LOW = ["bfloat16", "float16"]


def _ulp(exact: np.ndarray, dtype_name: str) -> np.ndarray:
    """The spacing of ``dtype_name`` numbers at ``exact`` (subnormals included)."""
    digits, emin = {"bfloat16": (8, -126), "float16": (11, -14)}[dtype_name]
    scale = np.floor(np.log2(np.maximum(np.abs(exact), 2.0**emin)))
    return 2.0 ** (scale - (digits - 1))


def _low_precision_eager(backend: str, dtype_name: str) -> None:
    xp = get_namespace(backend)
    if dtype_name not in xp.float_dtypes or not xp.supports("float64"):
        pytest.skip(f"{backend} has no {dtype_name} or no float64 here")


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved", "blocks"])
@pytest.mark.parametrize("dtype_name", LOW)
def test_nd_rope_within_one_ulp_eager(backend: str, dtype_name: str, section_layout: str) -> None:
    """N-D apply_rope rotates in float64 and rounds once, as 1-D does: within one ulp of
    the exact rotation of the low-precision input, where a*cos - b*sin cancels too."""
    _low_precision_eager(backend, dtype_name)
    xp = get_namespace(backend)
    rng = np.random.default_rng(3)
    n, hd, sections = 48, 16, (4, 2, 2)
    pos = rng.integers(0, 10**5, (n, len(sections)))
    axes = pair_axes(sections, section_layout)
    w = 10000.0 ** (-np.arange(0, hd, 2) / hd)
    s = np.empty((n, hd // 2))
    c = np.empty_like(s)
    for j, a in enumerate(axes):
        sj, cj = exact_sin_cos(pos[:, a], w[j : j + 1])
        s[:, j], c[:, j] = sj[:, 0], cj[:, 0]
    a = rng.standard_normal((n, hd // 2))
    # b chosen so that a*cos - b*sin nearly cancels (the hard case)
    b = a * c / np.where(np.abs(s) > 1e-3, s, 1.0) * (1 + rng.standard_normal(a.shape) * 1e-3)
    x = xp.astype(xp.asarray(np.concatenate([a, b], -1)), xp.dtype(dtype_name))
    xs = to_numpy(x).astype(np.float64)
    if section_layout == "blocks":  # each axis's block of 2 * s_a features rotated alone
        pieces, start, pair = [], 0, 0
        for k in sections:
            xa, xb = xs[:, start : start + k], xs[:, start + k : start + 2 * k]
            ca, sa = c[:, pair : pair + k], s[:, pair : pair + k]
            pieces += [xa * ca - xb * sa, xb * ca + xa * sa]
            start, pair = start + 2 * k, pair + k
        exact = np.concatenate(pieces, -1)
    else:
        xa, xb = xs[:, : hd // 2], xs[:, hd // 2 :]
        exact = np.concatenate([xa * c - xb * s, xb * c + xa * s], -1)
    got = pe_core.apply_rope(
        x, positions_on(backend, pos), sections=sections, section_layout=section_layout
    )
    assert_close(got, exact, atol=_ulp(exact, dtype_name), backend=backend, dtype=dtype_name)


@pytest.mark.parametrize("dtype_name", LOW)
def test_nd_encode_within_one_ulp_eager(backend: str, dtype_name: str) -> None:
    """N-D encode: one exact 1-D encoding per axis, each rounded once."""
    _low_precision_eager(backend, dtype_name)
    coords = np.array([[22, 355], [103993, 7], [0, 312689], [833719, 104348]])
    got = pe_core.encode(
        positions_on(backend, coords), 8, spec=pe_core.Spec(axes=2), dtype=dtype_name
    )
    w = 10000.0 ** (-np.arange(0, 4, 2) / 4)
    blocks = []
    for a in range(2):
        s, c = exact_sin_cos(coords[:, a], w)
        blocks.append(np.stack([s, c], -1).reshape(len(coords), 4))  # layout="interleaved"
    exact = np.concatenate(blocks, -1)
    assert_close(got, exact, atol=_ulp(exact, dtype_name), backend=backend, dtype=dtype_name)


@pytest.mark.parametrize("dtype_name", LOW)
def test_grid_refuses_low_precision_coordinates_it_would_round(
    backend: str, dtype_name: str
) -> None:
    xp = get_namespace(backend)
    if dtype_name not in xp.float_dtypes:
        pytest.skip(f"{backend} has no {dtype_name}")
    limit = {"bfloat16": 256, "float16": 2048}[dtype_name]
    exact = pe_core.grid((limit + 1, 2), backend=backend, dtype=dtype_name)
    np.testing.assert_array_equal(to_numpy(exact)[:, 0, 0], np.arange(limit + 1))
    with pytest.raises(ValueError, match=f"up to {limit + 1} are not exact in dtype {dtype_name}"):
        pe_core.grid((2, limit + 2), backend=backend, dtype=dtype_name)
