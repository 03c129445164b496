"""Arrays of no pe_core backend: Array API namespaces and lazy (dask) arrays.

An array of another Array API namespace (``array_api_strict``) is refused with a
``TypeError`` that says how to pass it, unless ``backend=`` names where to compute (then
it is imported through DLPack and the result is that backend's array). A dask array is
never computed behind the caller's back: refused whatever ``backend`` says, while
``dask.array.map_blocks`` keeps it lazy.
"""

from __future__ import annotations

import numpy as np
import pytest

import pe_core
from pe_core_backends import check_foreign


class _Namespaced:
    """Any object with ``__array_namespace__`` (and nothing else)."""

    def __array_namespace__(self, api_version: object = None) -> object:
        return np


def test_foreign_namespace_is_refused_with_a_way_out() -> None:
    xps = pytest.importorskip("array_api_strict")
    pos = xps.asarray([0, 5, 9])
    x = xps.ones((3, 8), dtype=xps.float32)
    calls = {
        "pos": lambda: pe_core.encode(pos, 8),
        "x": lambda: pe_core.apply_rope(x, [0, 1, 2]),
        "timesteps": lambda: pe_core.timestep_embedding(pos, 8),
    }
    for what, call in calls.items():
        with pytest.raises(TypeError, match="Array API namespace 'array_api_strict'") as info:
            call()
        message = str(info.value)
        assert message.startswith(what) and f"np.asarray({what})" in message
        assert "backend='numpy'" in message
    with pytest.raises(TypeError, match="'numpy'"):  # a namespace of its own, not a backend
        check_foreign(_Namespaced(), what="pos")


def test_foreign_namespace_with_backend_is_exact() -> None:
    xps = pytest.importorskip("array_api_strict")
    values = np.array([0, 5, 9, 2**20])
    got = pe_core.encode(xps.asarray(values), 8, backend="numpy", dtype="float64")
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, pe_core.encode(values, 8, dtype="float64"))
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    rotated = pe_core.apply_rope(xps.asarray(x), values, backend="numpy")
    np.testing.assert_array_equal(rotated, pe_core.apply_rope(x, values))
    # positions of another namespace beside a backend's x follow x, like any array
    np.testing.assert_array_equal(
        pe_core.apply_rope(x, xps.asarray(values)), pe_core.apply_rope(x, values)
    )


def test_dask_is_never_computed_silently() -> None:
    da = pytest.importorskip("dask.array")
    pos = da.arange(6, chunks=3)
    x = da.ones((6, 8), chunks=3, dtype=np.float32)
    calls = [
        ("pos", lambda: pe_core.encode(pos, 8)),
        ("pos", lambda: pe_core.encode(pos, 8, backend="numpy")),
        ("x", lambda: pe_core.apply_rope(x, range(6))),
        ("pos", lambda: pe_core.apply_rope(np.ones((6, 8), np.float32), pos)),
        ("timesteps", lambda: pe_core.timestep_embedding(pos, 8)),
    ]
    for what, call in calls:
        with pytest.raises(TypeError, match="lazy array") as info:
            call()
        assert str(info.value).startswith(what) and f"{what}.compute()" in str(info.value)
    # the way the message names: per block, still lazy until computed
    lazy = pos.map_blocks(
        lambda block: pe_core.encode(block, 8), new_axis=1, chunks=(pos.chunks[0], (8,))
    )
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), pe_core.encode(np.arange(6), 8))
