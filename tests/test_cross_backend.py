"""What "the same numbers on every backend" means, tested exactly as docs/precision.md
("Across backends") states it: eager host positions that are not a run of consecutive
integers give the same bits everywhere; runs (the table path, whose last complex product
each framework rounds its own way) differ from NumPy by at most 2**-22 in float32 and
2**-51 in float64."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core._kernel.tables import contiguous_start
from pe_core_backends import get_namespace
from tests.conftest import positions_on, to_numpy

#: the largest difference from NumPy of a run's entry (both products are within 2**-23)
RUN_GAP = {"float32": 2.0**-22, "float64": 2.0**-51}

_ints = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=24)
_floats = st.lists(
    st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=24
)
_runs = st.tuples(st.integers(-(2**31), 2**31 - 5000), st.sampled_from([2, 300, 4096]))


def _dtypes(backend: str) -> list[str]:
    xp = get_namespace(backend)
    return [name for name in ("float32", "float64") if xp.supports(name)]


def _positions(values: list) -> np.ndarray:
    array = np.asarray(values)
    return array.astype(np.float32) if array.dtype.kind == "f" else array.astype(np.int32)


@given(values=st.one_of(_ints, _floats), d=st.integers(1, 24).map(lambda k: 2 * k))
def test_host_positions_give_the_same_bits_on_every_backend(
    backend: str, values: list, d: int
) -> None:
    positions = _positions(values)
    for dtype in _dtypes(backend):
        got = to_numpy(pe_core.encode(positions_on(backend, positions), d, dtype=dtype))
        want = pe_core.encode(positions, d, dtype=dtype)
        if contiguous_start(positions) is None:
            np.testing.assert_array_equal(got, want)
        else:  # a short run of consecutive integers: the table path
            np.testing.assert_allclose(got, want, rtol=0, atol=RUN_GAP[dtype])


@given(run=_runs, d=st.sampled_from([2, 16, 64]))
def test_runs_differ_from_numpy_by_at_most_the_stated_gap(
    backend: str, run: tuple[int, int], d: int
) -> None:
    start, n = run
    for dtype in _dtypes(backend):
        got = to_numpy(pe_core.encode(range(start, start + n), d, backend=backend, dtype=dtype))
        want = pe_core.encode(range(start, start + n), d, dtype=dtype)
        np.testing.assert_allclose(got, want, rtol=0, atol=RUN_GAP[dtype])


def test_numpy_table_route_agrees_with_its_per_element_route() -> None:
    """The gap bounds two roundings of one product: on NumPy the table route of a run and
    the per-element route of the same positions (shuffled, so not a run) agree to it."""
    values = np.arange(4096)
    table = pe_core.encode(range(4096), 64)
    shuffled = np.random.default_rng(0).permutation(values)
    per_element = pe_core.encode(shuffled, 64)[np.argsort(shuffled)]
    np.testing.assert_allclose(table, per_element, rtol=0, atol=RUN_GAP["float32"])
    assert contiguous_start(shuffled) is None
