"""The lane for a few NumPy integer positions gives what the general route gives."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pe_core
from pe_core import _sinusoidal
from pe_core.timestep import timestep_spec


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.int32, np.uint16]),
        hnp.array_shapes(min_dims=0, max_dims=2, max_side=8),
        elements=st.integers(0, 2**15),
    ),
    st.sampled_from([2, 8, 64, 512]),
)
def test_lane_equals_the_general_route(pos: np.ndarray, d: int) -> None:
    lane = _sinusoidal.few_integer_positions(pos, d)
    general = pe_core.encode(pos, d, spec="vaswani")  # a named spec skips the lane
    if pos.size == 0:
        assert lane is None
        return
    assert lane is not None and lane.dtype == np.float32 and lane.shape == general.shape
    assert_equal(lane, general)
    assert_equal(pe_core.encode(pos, d), general)


@pytest.mark.parametrize(
    "pos, d",
    [
        (np.arange(65), 8),  # more than FEW_POSITIONS
        (np.array([2**40]), 8),  # beyond the float64 pass: the exact route
        (np.array([1.5]), 8),  # not integers
        (np.array([3]), 7),  # odd d: the spec's odd_d policy decides
    ],
)
def test_other_inputs_leave_the_lane(pos: np.ndarray, d: int) -> None:
    assert _sinusoidal.few_integer_positions(pos, d) is None


def test_large_positions_stay_exact() -> None:
    got = pe_core.encode(np.array([2**40 + 3]), 2, dtype="float64")
    assert abs(got[0, 0] - np.sin(float(2**40 + 3))) < 1e-6


def test_odd_d_is_still_refused() -> None:
    with pytest.raises(ValueError):
        pe_core.encode(np.array([3]), 7)


def test_few_cpu_tensor_positions_take_the_lane() -> None:
    torch = pytest.importorskip("torch")
    pos = torch.tensor([[1000, 3], [0, 2**20]])
    lane = _sinusoidal.few_integer_positions(pos, 64)
    assert lane is not None and isinstance(lane, torch.Tensor)
    assert lane.dtype == torch.float32 and lane.shape == (2, 2, 64)
    general = pe_core.encode(pos, 64, check_values=True)  # check_values skips the lane
    assert_equal(lane, general)
    assert_equal(pe_core.encode(pos, 64), general)
    pos += 7  # in place: read again
    expected = pe_core.encode(pos.numpy().copy(), 64, spec="vaswani")  # the general route
    assert_equal(pe_core.encode(pos, 64).numpy(), expected)


def test_tensors_the_host_cannot_read_for_free_leave_the_lane() -> None:
    torch = pytest.importorskip("torch")
    from pe_core_backends import force_device_path

    with force_device_path():  # as on an accelerator: no host read
        assert _sinusoidal.few_integer_positions(torch.arange(3), 8) is None
    assert _sinusoidal.few_integer_positions(torch.arange(3.0), 8) is None  # not integers
    batched = torch.func.vmap(lambda p: pe_core.encode(p, 8))(torch.arange(6).reshape(2, 3))
    expected = pe_core.encode(np.arange(6).reshape(2, 3), 8)
    assert_close(batched.numpy(), expected, atol=1e-6, rtol=1e-7)


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.uint16, np.float32, np.float64]),
        hnp.array_shapes(min_dims=0, max_dims=2, max_side=8),
        elements=st.integers(0, 1000),
    ),
    st.sampled_from([2, 64, 320]),
    st.booleans(),
    st.sampled_from([1.0, 1000.0]),
)
def test_spec_lane_equals_the_general_route(
    pos: np.ndarray, d: int, flip: bool, scale: float
) -> None:
    """Timestep-style specs (explicit frequencies, cos first): the lane's bits are the
    general route's (``dtype=`` skips the lane)."""
    if pos.dtype.kind == "f":
        pos = np.asarray(pos / 1000)  # fractional timesteps in [0, 1]
    spec = timestep_spec(d, flip, 0, scale)
    lane = _sinusoidal.few_spec_positions(pos, d, spec)
    general = pe_core.encode(pos, d, spec=spec, dtype="float32")
    assert lane is not None and lane.dtype == np.float32
    assert_equal(lane, general)
    assert_equal(
        pe_core.timestep_embedding(
            pos, d, flip_sin_to_cos=flip, downscale_freq_shift=0, scale=scale
        ),
        general,
    )


@pytest.mark.parametrize(
    "pos, d",
    [
        (np.arange(65), 8),  # more than FEW_POSITIONS
        (np.arange(16, 48), 320),  # a run: the angle-addition tables
        (np.array([2**40]), 8),  # beyond the float64 pass
        (np.array([np.nan]), 8),  # refused by the general route
        (np.array([3]), 7),  # odd d
        (np.array([True]), 8),  # not numbers
        (np.array([3.0], np.float16), 8),  # low precision: the general route warns
    ],
)
def test_other_inputs_leave_the_spec_lane(pos: np.ndarray, d: int) -> None:
    assert _sinusoidal.few_spec_positions(pos, d, timestep_spec(d)) is None


def test_non_finite_timesteps_leave_the_spec_lane() -> None:
    spec = timestep_spec(8)
    for bad in ([1.0, np.nan], [np.inf], [np.nan, 2.0, 3.0]):
        assert _sinusoidal.few_spec_positions(np.array(bad), 8, spec) is None


@given(
    hnp.arrays(np.int64, st.integers(1, 300), elements=st.integers(0, 4095)),
    st.sampled_from([64, 320, 1280]),
    st.sampled_from(["split", "interleaved"]),
    st.integers(0, 3),
)
def test_cached_rows_hold_the_small_call_numbers(
    pos: np.ndarray, d: int, layout: str, offset: int
) -> None:
    """Integer positions looked up in the cached table: each row is the one float64
    pass's row for that position (the small-call route's numbers, bit for bit)."""
    from pe_core._kernel import host_tables
    from pe_core._kernel.tables import contiguous_start

    omegas = tuple(10000.0 ** (-2 * i / d) for i in range(d // 2))
    expected = host_tables.small_sin_cos(pos, omegas, offset=offset, layout=layout)
    got = host_tables.rows_sin_cos(pos, omegas, offset=offset, layout=layout)
    assert_equal(got, expected)
    spec = pe_core.Spec(layout=layout, offset=offset)
    is_run = contiguous_start(pos) is not None  # runs take the angle-addition tables
    if not is_run and host_tables.rows_fit(pos, d // 2, float(pos.max()), offset):
        assert_equal(pe_core.encode(pos, d, spec=spec), expected)
