"""The comparators of ``tests/conftest.py`` fail when they should.

``assert_close`` and ``assert_equal`` check library, dtype and shape as well as values;
each check is shown to catch a wrong library, a wrong dtype, a wrong shape and wrong
values, so no test built on them can pass silently. They pass on matching input, with
``expected`` from NumPy, Python data or the same framework as ``actual``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal

from pe_core_backends import get_namespace

X32 = np.array([[0.25, -1.5], [2.0, 3.0]], dtype=np.float32)


def on(backend: str, values: np.ndarray) -> object:
    return get_namespace(backend).asarray(values)


# -- matching input passes ------------------------------------------------------------


def test_both_pass_on_matching_input(backend):
    out = on(backend, X32)
    assert_close(out, X32, atol=0, backend=backend, dtype="float32")
    assert_close(out, X32.astype(np.float64) + 1e-7, atol=2e-7, backend=backend)
    assert_close(out, X32 * (1 + 1e-7), atol=0, rtol=2e-7)
    assert_close(out, X32.tolist(), atol=0)  # expected as Python data
    assert_equal(out, X32, backend=backend, dtype="float32")
    assert_equal(out, on(backend, X32))  # expected from the same framework


def test_nans_in_the_same_places_are_equal():
    values = np.array([np.nan, 1.0, np.inf])
    assert_close(values, values.copy(), atol=0)
    assert_equal(values, values.copy())


# -- each check can fail --------------------------------------------------------------


@pytest.mark.parametrize("compare", ["close", "equal"])
def test_a_wrong_library_fails(compare):
    torch = pytest.importorskip("torch")
    out = torch.tensor(X32)
    with pytest.raises(AssertionError, match=r"expected a numpy array, got torch\.Tensor"):
        check(compare, out, X32, backend="numpy")
    with pytest.raises(AssertionError, match="expected a torch array"):
        check(compare, X32, X32, backend="torch")
    with pytest.raises(AssertionError, match="not an array"):
        check(compare, X32.tolist(), X32, backend="numpy")


def test_a_framework_expected_needs_the_same_framework_dtype_and_device():
    torch = pytest.importorskip("torch")
    expected = torch.tensor(X32)
    for compare in ("close", "equal"):
        with pytest.raises(AssertionError, match="expected is a torch array"):
            check(compare, X32, expected)
        with pytest.raises(AssertionError, match="dtype float64 != expected dtype float32"):
            check(compare, expected.double(), expected)
        check(compare, expected.clone(), expected)
        with pytest.raises(AssertionError, match="device meta != expected device cpu"):
            check(compare, torch.zeros(2, 2, device="meta"), expected)


@pytest.mark.parametrize("compare", ["close", "equal"])
def test_a_wrong_dtype_fails(compare, backend):
    out = on(backend, X32)
    with pytest.raises(AssertionError, match="expected dtype float64, got float32"):
        check(compare, out, X32, dtype="float64")
    with pytest.raises(AssertionError, match="expected dtype int32"):
        check(compare, np.arange(3, dtype=np.int64), np.arange(3), dtype="int32")


@pytest.mark.parametrize("compare", ["close", "equal"])
def test_a_wrong_shape_fails_and_nothing_is_broadcast(compare):
    with pytest.raises(AssertionError, match=r"shape \(2, 2\) != expected shape \(2,\)"):
        check(compare, X32, X32[0])
    with pytest.raises(AssertionError, match=r"shape \(1, 2, 2\) != expected shape \(2, 2\)"):
        check(compare, X32[None], X32)
    with pytest.raises(AssertionError, match="shape"):
        check(compare, np.zeros(3), np.float64(0.0))  # a scalar is not broadcast either


def test_wrong_values_fail(backend):
    out = on(backend, X32)
    bumped = X32.astype(np.float64)
    bumped[1, 0] += 1e-5
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_close(out, bumped, atol=1e-6)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_close(out, bumped, atol=0, rtol=1e-6)
    assert_close(out, bumped, atol=2e-5)  # the same difference inside the tolerance
    with pytest.raises(AssertionError, match="not equal"):
        assert_equal(out, bumped)
    with pytest.raises(AssertionError, match="not equal"):
        assert_equal(out, np.nextafter(X32, np.float32(np.inf)))  # one ulp off
    with pytest.raises(AssertionError):
        assert_close(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), atol=1.0)


def test_a_per_element_atol_bounds_each_element():
    bounds = np.array([[1e-3, 1e-3], [1e-6, 1e-6]])
    assert_close(X32 + [[5e-4, 0], [0, 0]], X32, atol=bounds)
    assert_close(X32 + 1e-4, X32, atol=np.array([2e-4, 2e-4]))  # broadcast over rows
    with pytest.raises(AssertionError, match=r"1 of 4 elements .* at \(1, 0\)"):
        assert_close(X32 + [[5e-4, 0], [5e-4, 0]], X32, atol=bounds)
    with pytest.raises(AssertionError, match="1 of 4"):
        assert_close(X32 + [[0, 0], [0, 1e-5]], X32, atol=bounds, rtol=1e-7)
    nans = np.array([[np.nan, 1.0]])
    assert_close(nans, nans.copy(), atol=np.zeros(2))
    with pytest.raises(AssertionError, match="1 of 2"):
        assert_close(nans, [[0.0, 1.0]], atol=np.ones(2))


def test_assert_equal_compares_large_integers_exactly():
    big = np.array([2**62, 2**53 + 1], dtype=np.int64)
    with pytest.raises(AssertionError, match="not equal"):
        assert_equal(big, big - np.array([0, 1]))  # equal once rounded to float64
    assert_equal(big, big.copy(), dtype="int64")


def test_err_msg_is_part_of_every_failure():
    with pytest.raises(AssertionError, match="row 7"):
        assert_close(X32, X32 + 1, atol=0, err_msg="row 7")
    with pytest.raises(AssertionError, match="row 7"):
        assert_equal(X32, X32[0], err_msg="row 7")
    with pytest.raises(AssertionError, match="row 7"):
        assert_equal(X32, X32, dtype="float16", err_msg="row 7")


def check(compare: str, actual: object, expected: object, **kwargs: object) -> None:
    if compare == "close":
        assert_close(actual, expected, atol=0, **kwargs)
    else:
        assert_equal(actual, expected, **kwargs)
