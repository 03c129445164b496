"""pe_core.validation: one message format, TypeError for types, ValueError for values."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pe_core
import pe_core.analysis
from pe_core import alibi_slopes, rope_permutation
from pe_core.validation import choice, finite_real, is_integer, optional_str, positive_int


@given(st.integers(1, 2**70))
def test_positive_int_returns_python_ints(n):
    out = positive_int(n, "n")
    assert out == n and type(out) is int
    assert positive_int(np.int64(min(n, 2**62)), "n") == min(n, 2**62)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-3, ValueError),
        (2.0, TypeError),
        (True, TypeError),
        ("2", TypeError),
        (None, TypeError),
        (np.float32(2), TypeError),
    ],
)
def test_positive_int_rejects(value, error):
    message = f"n_heads must be an integer >= 1. Received: {value!r}"
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        positive_int(value, "n_heads")


def test_positive_int_minimum_and_what():
    assert positive_int(0, "offset", minimum=0) == 0
    with pytest.raises(ValueError, match=r"^d must be an integer >= 2 \(features\)\. Received: 1$"):
        positive_int(1, "d", minimum=2, what="features")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_real_accepts_finite_floats(value):
    assert finite_real(value, "x") == value
    if value > 0:
        assert finite_real(value, "x", greater_than=0) == value
    else:
        with pytest.raises(ValueError, match=r"^x must be a finite number > 0\. Received: "):
            finite_real(value, "x", greater_than=0)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (10**400, ValueError),
        (True, TypeError),
        ("1.5", TypeError),
        (None, TypeError),
        (1 + 2j, TypeError),
    ],
)
def test_finite_real_rejects(value, error):
    with pytest.raises(error, match=r"^base must be a finite number\. Received: "):
        finite_real(value, "base")


def test_choice_and_optional_str():
    assert choice("split", "layout", ("interleaved", "split")) == "split"
    for bad in ("SPLIT", 1, None, ["split"]):
        with pytest.raises(ValueError, match=r"^Unknown layout .*\. Expected one of: a, b\.$"):
            choice(bad, "layout", ("a", "b"))
    assert optional_str(None, "t") is None and optional_str("x", "t") == "x"
    with pytest.raises(TypeError, match=r"^t must be a string or None\. Received: b'x'$"):
        optional_str(b"x", "t")


def test_is_integer():
    assert is_integer(3) and is_integer(np.int8(3))
    assert not any(is_integer(v) for v in (True, np.bool_(True), 3.0, "3", None))


@pytest.mark.parametrize(
    "call",
    [
        lambda: alibi_slopes(2.5),
        lambda: rope_permutation(2.5, "half", "interleaved"),
    ],
)
def test_wrong_integer_types_raise_type_error_everywhere(call):
    with pytest.raises(TypeError, match=r"must be an integer >= 1\. Received: 2\.5"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: alibi_slopes(0),
        lambda: rope_permutation(0, "half", "interleaved"),
    ],
)
def test_non_positive_integers_raise_value_error_everywhere(call):
    with pytest.raises(ValueError, match=r"must be an integer >= 1\. Received: 0"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: pe_core.analysis.similarity_by_distance(8, max_distance=2.5),
        lambda: pe_core.analysis.resolution_report(8, max_len=True),
        lambda: pe_core.encode(pe_core.grid((2, 2)), 8.0, spec=pe_core.Spec(axes=2)),
        lambda: pe_core.frequencies(8.0),
    ],
)
def test_a_wrong_type_of_count_is_a_type_error_everywhere(call) -> None:
    """One check vocabulary: a count of the wrong type is a TypeError, in one format."""
    with pytest.raises(TypeError, match=r"must be an integer >= \d+.*\. Received: "):
        call()
