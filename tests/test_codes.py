"""binary_encode, normalized_positions, learned_table_init: values, backends, defects."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st

from pe_core.codes import binary_encode, learned_table_init, normalized_positions

# --------------------------------------------------------------------------- binary


@given(d=st.integers(1, 40), data=st.data())
def test_binary_columns_are_the_bits(backend, d, data):
    positions = np.array(
        data.draw(st.lists(st.integers(0, min(2**d, 2**31) - 1), min_size=1, max_size=8))
    )
    out = binary_encode(positions_on(backend, positions), d)
    expected = [[(int(p) >> j) & 1 for j in range(d)] for p in positions]
    assert_close(out, np.array(expected), atol=0, backend=backend, dtype="float32")
    # reading the bits back gives the position
    weights = 2.0 ** np.arange(d)
    assert_equal(to_numpy(out) @ weights, positions)


def test_binary_lowest_bit_changes_fastest():
    table = binary_encode(range(16), 4)
    changes = np.abs(np.diff(table, axis=0)).sum(axis=0)
    assert_equal(changes, [15.0, 7.0, 3.0, 1.0])  # column j flips every 2**j positions
    assert binary_encode(np.array([[5, 6]]), 3).shape == (1, 2, 3)


def test_binary_wide_and_float_positions():
    assert_equal(binary_encode(2**62 + 1, 70)[[0, 61, 62, 63, 69]], [1, 0, 1, 0, 0])
    assert_equal(binary_encode([3.0, 4.0], 3), binary_encode([3, 4], 3), dtype="float32")


def test_binary_backend_and_dtype(backend):
    out = binary_encode([1, 2], 4, backend=backend, dtype="float16")
    assert_equal(out, [[1, 0, 0, 0], [0, 1, 0, 0]], backend=backend, dtype="float16")


@pytest.mark.parametrize(
    ("pos", "d", "error", "match"),
    [
        ([0, -1], 4, ValueError, r"pos must be >= 0; found -1 at index \(1,\)"),
        ([0.5], 4, ValueError, r"pos must be finite integers \(whole numbers\); found 0.5"),
        ([float("inf")], 4, ValueError, r"pos must be finite integers"),
        ([3, 16], 4, ValueError, r"pos must be < 2\*\*d = 16 \(d=4 bits\); found 16 .* larger d"),
        ([2**63 - 1], 64, None, None),
        ([1], 0, ValueError, r"d must be an integer >= 1. Received: 0"),
        ([1], 2.0, TypeError, r"d must be an integer >= 1"),
        ([True], 2, TypeError, r"not booleans"),
    ],
)
def test_binary_bad_input(pos, d, error, match):
    if error is None:
        assert binary_encode(pos, d).sum() == 63
        return
    with pytest.raises(error, match=match):
        binary_encode(pos, d)


def test_binary_traced_positions_are_refused():
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError, match="traced"):
        jax.jit(lambda p: binary_encode(p, 4, backend="numpy"))(np.arange(3))


# --------------------------------------------------------------------------- normalized


@given(length=st.integers(1, 2000))
def test_normalized_positions(backend, length):
    out = normalized_positions(length, backend=backend)
    expected = np.arange(length) / max(length - 1, 1)
    assert_close(out, expected, atol=0, rtol=6e-8, backend=backend, dtype="float32")
    values = to_numpy(out)
    assert values[0] == 0.0 and (length == 1 or values[-1] == 1.0)


def test_normalized_neighbour_distance_depends_on_length():
    steps = {n: float(np.diff(normalized_positions(n, dtype="float64"))[0]) for n in (3, 4, 11)}
    assert steps == {3: 0.5, 4: 1 / 3, 11: 0.1}


def test_normalized_bad_input():
    with pytest.raises(ValueError, match=r"length must be an integer >= 1. Received: 0"):
        normalized_positions(0)
    with pytest.raises(TypeError, match=r"length must be an integer >= 1. Received: 3.0"):
        normalized_positions(3.0)
    with pytest.raises(ValueError, match=r"dtype must be a floating dtype"):
        normalized_positions(3, dtype="int64")


# --------------------------------------------------------------------------- learned table


def test_learned_table_is_bert_truncated_normal():
    table = learned_table_init(512, 768, seed=3, dtype="float64")
    assert table.shape == (512, 768)
    assert np.abs(table).max() <= 0.04  # truncated at 2 std
    assert abs(table.mean()) < 2e-4
    # std of N(0, 1) truncated to [-2, 2] is 0.8796
    assert abs(table.std() / 0.02 - 0.8796) < 0.005
    assert np.abs(table).max() > 0.039  # the tails go up to the cut


def test_learned_table_same_on_every_backend(backend):
    reference = learned_table_init(16, 8, seed=11)
    out = learned_table_init(16, 8, seed=11, backend=backend)
    assert_close(out, reference, atol=0, backend=backend, dtype="float32")
    assert not np.array_equal(to_numpy(learned_table_init(16, 8, seed=12)), reference)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_positions": 0, "d": 4}, ValueError, r"n_positions must be an integer >= 1"),
        ({"n_positions": 4, "d": -1}, ValueError, r"d must be an integer >= 1"),
        ({"n_positions": 4, "d": 4, "std": 0.0}, ValueError, r"std must be a finite number > 0"),
        ({"n_positions": 4, "d": 4, "seed": -1}, ValueError, r"seed must be a non-negative"),
    ],
)
def test_learned_table_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        learned_table_init(**kwargs)
