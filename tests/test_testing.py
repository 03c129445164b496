"""Tests for the public property-test toolkit :mod:`pe_core.testing`.

``check_encoding`` must pass on correct encodings (pe_core's own on every backend, and
an independent textbook formula) and catch each deliberately broken one, naming the
property that breaks.
"""

from __future__ import annotations

import importlib
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core import testing as pt


def textbook(positions: np.ndarray, d: int, base: float = 10000.0) -> np.ndarray:
    """The "Attention Is All You Need" formula in float64, written independently."""
    p = np.asarray(positions, dtype=np.float64)[..., None]
    angle = p / np.power(base, np.arange(0, d, 2) / d)
    pe = np.empty(p.shape[:-1] + (d,))
    pe[..., 0::2] = np.sin(angle)
    pe[..., 1::2] = np.cos(angle)
    return pe


def failed_properties(message: str) -> set[str]:
    """The property names check_encoding's report lists as ``[name]`` sections."""
    return set(re.findall(r"^\[([a-z ]+)\] ", message, flags=re.MULTILINE))


# -- correct encodings pass ---------------------------------------------------


@pytest.mark.parametrize("preset", sorted(pe_core.PRESETS))
def test_pe_core_encode_passes_for_every_preset(preset):
    pt.check_encoding(lambda p, d: pe_core.encode(p, d, spec=preset), preset, seed=0)


def test_pe_core_encode_passes_with_the_defaults():
    pt.check_encoding(lambda p, d: pe_core.encode(p, d))


def test_independent_textbook_implementation_passes():
    pt.check_encoding(textbook, "vaswani", seed=1)


def test_pe_core_encode_passes_for_a_custom_spec_with_odd_d():
    spec = pe_core.Spec(base=500.0, layout="split", offset=3, odd_d="zero_pad")
    pt.check_encoding(lambda p, d: pe_core.encode(p, d, spec=spec), spec, d=17, seed=2)


def test_pe_core_encode_passes_on_every_backend(backend):
    pt.check_encoding(lambda p, d: pe_core.encode(p, d, backend=backend), max_examples=15, seed=3)


def test_pe_core_encode_on_jax_passes_for_integer_positions():
    pytest.importorskip("jax")
    pt.check_encoding(
        lambda p, d: pe_core.encode(p, d, backend="jax"),
        d=16,
        max_examples=10,
        fractional=False,
        seed=3,
    )


def test_pe_core_encode_on_jax_keeps_float64_positions():
    """JAX without x64 would round float64 positions: pe_core encodes them on the host."""
    pytest.importorskip("jax")
    positions = np.array([123.456789, 1e6 + 0.1])
    pt.check_agreement(lambda p, d: pe_core.encode(p, d, backend="jax"), None, 8, positions)


def test_pe_core_encode_on_jax_keeps_int64_positions_beyond_int32():
    pytest.importorskip("jax")
    positions = np.array([2**33 + 5, -(2**34) + 3])  # float64 reference still exact here
    pt.check_agreement(lambda p, d: pe_core.encode(p, d, backend="jax"), None, 8, positions)


# -- broken encodings are caught ----------------------------------------------


def swapped_sin_cos(p, d):
    return textbook(p, d).reshape(p.shape + (d // 2, 2))[..., ::-1].reshape(p.shape + (d,))


def wrong_base(p, d):
    return textbook(p, d, base=1000.0)


def off_by_one(p, d):
    return textbook(p + 1, d)


def split_layout(p, d):
    pe = textbook(p, d)
    return np.concatenate([pe[..., 0::2], pe[..., 1::2]], axis=-1)


def float16_angle(p, d):
    w = np.power(10000.0, -np.arange(0, d, 2) / d)
    with np.errstate(all="ignore"):
        angle = (np.asarray(p, dtype=np.float64)[..., None] * w).astype(np.float16)
        angle = angle.astype(np.float64)
        return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(p.shape + (d,))


def constant(p, d):
    return np.full(p.shape + (d,), 0.5)


def scaled(p, d):
    return 1.5 * textbook(p, d)


BROKEN = [
    # (fn, the properties it must fail, whether no other property may fail)
    pytest.param(swapped_sin_cos, {"agreement", "linear relation"}, False, id="swapped-sin-cos"),
    pytest.param(wrong_base, {"agreement", "linear relation"}, False, id="wrong-base"),
    pytest.param(off_by_one, {"agreement"}, True, id="off-by-one"),
    pytest.param(split_layout, {"agreement", "linear relation"}, False, id="split-layout"),
    pytest.param(float16_angle, {"agreement"}, False, id="float16-angle"),
    pytest.param(constant, {"agreement", "uniqueness", "linear relation"}, False, id="constant"),
    pytest.param(scaled, {"bounded", "agreement"}, True, id="scaled-1.5"),
]


@pytest.mark.parametrize(("fn", "must_fail", "exactly"), BROKEN)
def test_broken_encodings_are_caught(fn, must_fail, exactly):
    with pytest.raises(AssertionError) as info:
        pt.check_encoding(fn, "vaswani", max_examples=30, seed=0)
    message = str(info.value)
    failed = failed_properties(message)
    assert must_fail <= failed, message
    if exactly:  # the other properties hold for this bug, and must not be blamed
        assert failed == must_fail, message
    for name in must_fail:
        assert f"property {name!r} failed" in message
    assert "spec: Spec(" in message and "d: " in message


def test_report_names_the_minimised_counterexample():
    with pytest.raises(AssertionError) as info:
        pt.check_encoding(off_by_one, "vaswani", max_examples=30, seed=0)
    message = str(info.value)
    # Hypothesis shrinks to the smallest d and position.
    assert "d: 2" in message
    assert "positions: [0]" in message
    assert "minimised by Hypothesis" in message


def test_an_exception_in_fn_is_reported_as_a_failure():
    def crashes(p, d):
        raise RuntimeError("boom")

    with pytest.raises(AssertionError, match=r"\[bounded\] fn raised RuntimeError: boom"):
        pt.check_encoding(crashes, max_examples=5, seed=0)


def test_a_wrong_shape_is_reported():
    with pytest.raises(AssertionError, match=r"returned shape \(1, 3\); expected \(1, 4\)"):
        pt.check_agreement(lambda p, d: np.zeros((1, 3)), None, 4, [0])


def test_check_encoding_validates_its_arguments():
    with pytest.raises(ValueError, match="d must be even"):
        pt.check_encoding(textbook, "vaswani", d=5)
    with pytest.raises(ValueError, match="Unknown preset 'bert'"):
        pt.check_encoding(textbook, "bert")


def test_outputs_of_other_backends_are_converted():
    torch = pytest.importorskip("torch")
    pt.check_agreement(lambda p, d: torch.as_tensor(textbook(p, d)), None, 6, np.arange(5))


# -- the single properties ----------------------------------------------------


def test_uniqueness_window_of_vaswani_d8():
    window, bound = pt.uniqueness_window(8)
    assert window == math.floor(2 * math.pi * 1000)
    assert bound == pytest.approx(2 * math.sin(0.0005))


def test_uniqueness_window_without_nonzero_frequencies():
    assert pt.uniqueness_window(2, pe_core.Spec(frequencies=(0.0,))) == (0, 0.0)
    assert pt.uniqueness_window(2, pe_core.Spec(frequencies=(7.0,))) == (1, 0.0)


@given(pt.specs().flatmap(lambda s: pt.dims(s, max_d=32).map(lambda d: (s, d))), st.data())
def test_uniqueness_bound_holds_for_the_reference(spec_and_d, data):
    """The derivation in check_uniqueness: ||PE(p) - PE(q)|| >= 2 sin(w_min / 2)."""
    spec, d = spec_and_d
    window, bound = pt.uniqueness_window(d, spec)
    if window < 2:
        return
    p = data.draw(st.integers(0, window - 1))
    q = data.draw(st.integers(0, window - 1).filter(lambda v: v != p))
    ref = pt.reference_encoding([p, q], d, spec)
    assert np.linalg.norm(ref[0] - ref[1]) >= bound * (1 - 1e-9)


def test_uniqueness_bound_is_tight_for_one_pair():
    spec = pe_core.Spec(frequencies=(0.25,))
    window, bound = pt.uniqueness_window(2, spec)
    ref = pt.reference_encoding([0, 1, window - 1], 2, spec)
    assert np.linalg.norm(ref[0] - ref[1]) == pytest.approx(bound)
    assert np.linalg.norm(ref[0] - ref[2]) >= bound


def test_check_uniqueness_catches_a_repeating_encoding():
    def period_100(p, d):  # correct only below 100
        return pe_core.encode(p % 100, d)

    pt.check_uniqueness(period_100, None, 8, np.arange(100))
    with pytest.raises(AssertionError, match="positions 0 and 100 have encodings 0 apart"):
        pt.check_uniqueness(period_100, None, 8, np.arange(101))


def test_check_uniqueness_rejects_bad_positions():
    fn = pe_core.encode
    with pytest.raises(ValueError, match="distinct"):
        pt.check_uniqueness(fn, None, 8, [1, 1])
    with pytest.raises(ValueError, match="integer"):
        pt.check_uniqueness(fn, None, 8, [0.5, 1.5])
    with pytest.raises(ValueError, match="spanning fewer than N = 6283"):
        pt.check_uniqueness(fn, None, 8, [0, 6283])


def test_check_linear_relation_with_fractional_positions_and_negative_k():
    def fn(p, d):
        return pe_core.encode(p, d, spec="tensor2tensor")

    pt.check_linear_relation(fn, "tensor2tensor", 9, np.array([0.5, 3.25, 1e5 + 0.75]), -777)


def test_check_relative_dot_with_arrays():
    pt.check_relative_dot(pe_core.encode, "whisper", 32, np.arange(4), np.arange(4) * 1000, 123)


def test_check_bounded_catches_nan():
    with pytest.raises(AssertionError, match=r"'bounded' failed.*nan"):
        pt.check_bounded(lambda p, d: np.full(p.shape + (d,), np.nan), None, 4, [0])


# -- strategies and reference -------------------------------------------------


@given(pt.specs().flatmap(lambda s: pt.dims(s).map(lambda d: (s, d))), st.data())
def test_pe_core_agrees_with_the_reference_on_drawn_specs(spec_and_d, data):
    spec, d = spec_and_d
    positions = data.draw(pt.position_arrays(st.one_of(pt.int_positions(), pt.float_positions())))
    pt.check_agreement(lambda p, d_: pe_core.encode(p, d_, spec=spec), spec, d, positions)


@given(pt.specs().flatmap(lambda s: pt.dims(s).map(lambda d: (s, d))))
def test_dims_are_accepted_by_their_spec(spec_and_d):
    spec, d = spec_and_d
    assert pe_core.frequencies(d, spec).shape == (d // 2,)
    assert d % 2 == 0 or spec.odd_d == "zero_pad"


def test_reference_matches_the_textbook_formula():
    positions = np.arange(50)
    np.testing.assert_allclose(
        pt.reference_encoding(positions, 16), textbook(positions, 16), rtol=0, atol=1e-13
    )


@given(pt.position_arrays(), pt.position_arrays(pt.float_positions()))
def test_position_arrays_dtypes(ints, floats):
    assert ints.dtype == np.int64 and floats.dtype == np.float64
    assert 1 <= ints.size <= 8 and ints.ndim == 1


# -- packaging ----------------------------------------------------------------


def test_import_pe_core_does_not_load_the_toolkit():
    code = (
        "import sys, pe_core; "
        "assert 'pe_core.testing' not in sys.modules, 'pe_core.testing loaded'; "
        "assert 'hypothesis' not in sys.modules, 'hypothesis loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_hypothesis_gives_an_actionable_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    monkeypatch.delitem(sys.modules, "pe_core.testing")
    with pytest.raises(ImportError, match=r"pip install 'pe-core\[test\]'"):
        importlib.import_module("pe_core.testing")
