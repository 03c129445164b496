"""apply_rope on a tuple (q, k): one call, the same result as one call per array."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal, to_numpy

import pe_core
from pe_core_backends import get_namespace


def _arrays(backend: str, dtype: str = "float32") -> tuple[object, object, np.ndarray]:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 3, 16)).astype(dtype)  # (batch, heads, seq, head_dim)
    k = rng.standard_normal((2, 2, 3, 16)).astype(dtype)  # fewer key heads
    xp = get_namespace(backend)
    return xp.asarray(q), xp.asarray(k), np.array([[[5, 6, 7]], [[1000, 1001, 1002]]])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_tuple_equals_separate_calls(backend: str, layout: str) -> None:
    q, k, pos = _arrays(backend)
    pos = get_namespace(backend).asarray(pos)
    rq, rk = pe_core.apply_rope((q, k), pos, layout=layout, rotary_dim=12)
    assert_close(rq, to_numpy(pe_core.apply_rope(q, pos, layout=layout, rotary_dim=12)), atol=0)
    assert_close(rk, to_numpy(pe_core.apply_rope(k, pos, layout=layout, rotary_dim=12)), atol=0)


def test_list_with_scaling_and_host_positions() -> None:
    q, k, _ = _arrays("numpy")
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    out = pe_core.apply_rope([q, k], range(3), scaling=scaling)
    assert isinstance(out, tuple) and len(out) == 2
    for x, y in zip((q, k), out, strict=True):
        assert_equal(y, pe_core.apply_rope(x, range(3), scaling=scaling))


def test_mixed_dtypes_get_their_own_factors() -> None:
    q, _, _ = _arrays("numpy")
    k = _arrays("numpy", "float64")[1]
    rq, rk = pe_core.apply_rope((q, k), np.arange(3))
    assert rq.dtype == np.float32 and rk.dtype == np.float64
    assert_equal(rk, pe_core.apply_rope(k, np.arange(3)))


def test_each_array_is_checked_against_the_positions() -> None:
    q, _, _ = _arrays("numpy")
    k = np.zeros((2, 2, 5, 16), np.float32)  # seq 5 against positions of length 3
    with pytest.raises(ValueError, match="does not broadcast"):
        pe_core.apply_rope((q, k), np.arange(3))


def test_empty_tuple_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        pe_core.apply_rope((), np.arange(3))


def test_nd_sections_take_tuples_too() -> None:
    q, k, _ = _arrays("numpy")
    coords = np.stack(np.meshgrid(np.arange(3), np.arange(1), indexing="ij"), -1).reshape(3, 2)
    rq, rk = pe_core.apply_rope((q, k), coords, sections=(4, 4))
    assert_equal(rq, pe_core.apply_rope(q, coords, sections=(4, 4)))
    assert_equal(rk, pe_core.apply_rope(k, coords, sections=(4, 4)))
