"""The few-positions lane of apply_rope gives what the general route gives, and only
takes the calls it can check."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core import _rope_lane
from pe_core.rope_spec import RopeSpec
from pe_core.testing import reference_rope
from pe_core_backends import force_device_path

LANE_BACKENDS = ["numpy", "torch"]


def _array(backend: str, values: np.ndarray) -> object:
    if backend == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(np.ascontiguousarray(values))
    return values


CASES = [
    {},
    {"layout": "interleaved"},
    {"rotary_dim": 32},
    {"rotary_dim": 32, "layout": "interleaved"},
    {"base": 500000.0},
]


@pytest.mark.parametrize("backend", LANE_BACKENDS)
@pytest.mark.parametrize("kwargs", CASES)
def test_a_decode_step_takes_the_lane_and_equals_the_general_route(backend, kwargs) -> None:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 8, 1, 64)).astype(np.float32)
    k = rng.standard_normal((4, 2, 1, 64)).astype(np.float32)
    pos = np.array([4095, 17, 0, 2**20 + 3])[:, None, None]
    xq, xk, p = _array(backend, q), _array(backend, k), _array(backend, pos)
    lane = _rope_lane.few_positions_rope(
        (xq, xk),
        p,
        kwargs.get("base", 10000.0),
        kwargs.get("layout", "half"),
        kwargs.get("rotary_dim"),
        None,
    )
    assert lane is not None  # the lane took it
    general_q = pe_core.apply_rope(xq, p, check_values=True, **kwargs)  # skips the lane
    general_k = pe_core.apply_rope(xk, p, check_values=True, **kwargs)
    assert_equal(lane[0], general_q, backend=backend, dtype="float32")
    assert_equal(lane[1], general_k, backend=backend, dtype="float32")
    expected = reference_rope(q, pos, **kwargs)
    assert_close(lane[0], expected, atol=2e-6, backend=backend)
    # the public call, one array at a time and as a tuple
    assert_equal(pe_core.apply_rope(xq, p, **kwargs), general_q, backend=backend)
    both = pe_core.apply_rope((xq, xk), p, **kwargs)
    assert_equal(both[1], general_k, backend=backend)


@pytest.mark.parametrize("backend", LANE_BACKENDS)
def test_scaled_configs_and_specs_take_the_lane(backend) -> None:
    x = _array(backend, np.random.default_rng(1).standard_normal((3, 1, 64)).astype(np.float32))
    pos = _array(backend, np.array([[5], [70000], [123]]))
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    spec = RopeSpec(base=1e6, scaling=yarn)
    assert _rope_lane.few_positions_rope(x, pos, 10000.0, "half", None, spec) is not None
    assert_equal(
        pe_core.apply_rope(x, pos, spec=spec),
        pe_core.apply_rope(x, pos, spec=spec, check_values=True),
        backend=backend,
    )
    # the attention factor of yarn is applied (cos and sin scaled)
    unscaled = pe_core.apply_rope(x, pos, base=1e6)
    assert not np.allclose(np.asarray(pe_core.apply_rope(x, pos, spec=spec)), np.asarray(unscaled))


@given(
    st.lists(st.integers(-(2**25), 2**25), min_size=1, max_size=64),
    st.sampled_from(["half", "interleaved"]),
    st.sampled_from([2, 8, 128]),
)
def test_any_few_integer_positions_give_the_general_route(positions, layout, head_dim) -> None:
    pos = np.array(positions)
    x = np.random.default_rng(len(positions)).standard_normal((len(positions), head_dim))
    x = x.astype(np.float32)
    lane = pe_core.apply_rope(x, pos, layout=layout)
    assert_equal(lane, pe_core.apply_rope(x, pos, layout=layout, check_values=True))


def test_positions_changed_in_place_are_read_again() -> None:
    torch = pytest.importorskip("torch")
    q = torch.randn(2, 4, 1, 16)
    pos = torch.tensor([3, 9])[:, None, None]
    first = pe_core.apply_rope(q, pos)
    pos += 100  # the same tensor, new values: the kept factors must not be reused
    second = pe_core.apply_rope(q, pos)
    assert_equal(second, pe_core.apply_rope(q, pos.clone(), check_values=True))
    assert not torch.equal(first, second)


def test_a_bad_argument_after_a_good_one_is_still_refused() -> None:
    x = np.ones((3, 8), np.float32)
    pe_core.apply_rope(x, np.arange(3), rotary_dim=4)  # caches the constants of 4
    with pytest.raises(TypeError, match="rotary_dim must be an integer"):
        pe_core.apply_rope(x, np.arange(3), rotary_dim=4.0)
    with pytest.raises(TypeError, match="rotary_dim must be an integer"):
        pe_core.apply_rope(x, np.arange(3), rotary_dim=True)


@pytest.mark.parametrize(
    "case",
    [
        "float64 x",
        "float16 x",
        "65 positions",
        "huge positions",
        "float positions",
        "dynamic scaling",
        "positions of another backend",
        "grad",
        "forced device path",
    ],
)
def test_other_calls_leave_the_lane(case) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 1, 8)
    pos: object = torch.tensor([[3], [4]])
    args: tuple[object, ...] = (10000.0, "half", None, None)
    if case == "float64 x":
        x = x.double()
    elif case == "float16 x":
        x = x.half()
    elif case == "65 positions":
        x, pos = torch.randn(65, 8), torch.arange(65)
    elif case == "huge positions":
        pos = torch.tensor([[2**40], [4]])
    elif case == "float positions":
        pos = torch.tensor([[3.5], [4.0]])
    elif case == "dynamic scaling":
        args = (10000.0, "half", None, RopeSpec(scaling={"rope_type": "dynamic", "factor": 2.0}))
    elif case == "positions of another backend":
        pos = np.array([[3], [4]]).tolist()
    elif case == "grad":
        x.requires_grad_(True)
    if case == "forced device path":
        with force_device_path():
            assert _rope_lane.few_positions_rope(x, pos, *args) is None
    else:
        assert _rope_lane.few_positions_rope(x, pos, *args) is None
    # and the public call still answers (the general route)
    if case not in ("dynamic scaling",):
        pe_core.apply_rope(x, pos)


def test_a_non_contiguous_x_takes_the_lane_with_the_contiguous_bits() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(8, 1, 2).transpose(0, 2)  # a view, as transformers' q and k are
    pos = torch.tensor([[3], [4]])
    lane = _rope_lane.few_positions_rope(x, pos, 10000.0, "half", None, None)
    assert lane is not None
    assert torch.equal(lane, pe_core.apply_rope(x.contiguous(), pos))


def test_gradients_flow_where_the_lane_steps_aside() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 1, 8, dtype=torch.float64, requires_grad=True)
    pe_core.apply_rope(x.float(), torch.tensor([[3], [4]])).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_a_scalar_beside_the_first_array_gets_the_general_routes_error() -> None:
    q = np.ones((2, 1, 8), np.float32)
    assert (
        _rope_lane.few_positions_rope((q, np.float32(1.0)), 3, 10000.0, "half", None, None) is None
    )
    with pytest.raises(ValueError, match="at least one axis"):
        pe_core.apply_rope((q, np.array(1.0, np.float32)), 3)


@pytest.mark.slow
def test_a_first_call_inside_torch_compile_fullgraph_traces() -> None:
    """In a fresh process, the first apply_rope and encode calls are made while
    torch.compile(fullgraph=True) traces: the lanes must step aside without filling a
    cache dynamo cannot follow."""
    pytest.importorskip("torch")
    script = textwrap.dedent(
        """
        import torch, pe_core
        q, pos = torch.randn(2, 1, 1, 8), torch.tensor([3, 5])[:, None, None]
        rope = torch.compile(lambda q, p: pe_core.apply_rope(q, p), fullgraph=True)
        table = torch.compile(lambda p: pe_core.encode(p, 8), fullgraph=True)
        print(tuple(rope(q, pos).shape), tuple(table(torch.arange(4)).shape))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[0] == "(2, 1, 1, 8) (4, 8)"
