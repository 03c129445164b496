"""Tests for the public property-test toolkit :mod:`pe_core.testing`.

``check_encoding`` must pass on correct encodings (pe_core's own on every backend, and
an independent textbook formula) and catch each deliberately broken one, naming the
property that breaks. Every ``check_*`` function of :mod:`pe_core.testing.checks`
(encodings, RoPE, across backends) passes on pe_core and fails on a deliberately wrong
implementation; the references agree with independent formulas; the checks load
without Hypothesis.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal
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


ONE_AXIS_PRESETS = sorted(n for n, s in pe_core.PRESETS.items() if s.axes == 1)


@pytest.mark.parametrize("preset", ONE_AXIS_PRESETS)
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
    # an odd d: zero_pad encodes d - 1 features, truncate computes d + 1 and keeps d
    pairs = (d + 1) // 2 if spec.odd_d == "truncate" else d // 2
    assert pe_core.frequencies(d, spec).shape == (pairs,)
    assert d % 2 == 0 or spec.odd_d in ("zero_pad", "truncate")


def test_reference_matches_the_textbook_formula():
    positions = np.arange(50)
    assert_close(pt.reference_encoding(positions, 16), textbook(positions, 16), atol=1e-13)


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
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_TIMEOUT)


def test_checks_work_without_hypothesis_and_strategies_say_how_to_get_it():
    """``import pe_core.testing`` and the checks need no Hypothesis; its strategies do."""
    code = """
import sys
sys.modules["hypothesis"] = None  # as if not installed
import numpy as np, pe_core, pe_core.testing as pt
error = pt.check_agreement(lambda p, d: pe_core.encode(p, d), None, 8, np.arange(10))
assert error < 1e-6
try:
    from pe_core.testing import specs
except ImportError as exc:
    assert "pip install 'pe-core[test]'" in str(exc), exc
else:
    raise AssertionError("specs imported without hypothesis")
try:
    pt.check_encoding
except ImportError as exc:
    assert "pip install 'pe-core[test]'" in str(exc), exc
else:
    raise AssertionError("check_encoding loaded without hypothesis")
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_TIMEOUT)


#: Every public name of pe_core.testing before it became a package.
NAMES_BEFORE_THE_SPLIT = (
    "PROPERTIES EncodingFunction HostReadError check_agreement check_bounded check_encoding "
    "check_linear_relation check_relative_dot check_uniqueness dims float_positions "
    "forbid_host_reads int_positions position_arrays reference_encoding specs uniqueness_window"
).split()


def test_every_public_name_is_still_importable_from_pe_core_testing():
    from pe_core.host_reads import HostReadError, forbid_host_reads

    for name in [*NAMES_BEFORE_THE_SPLIT, *pt.__all__]:
        assert getattr(pt, name) is not None, name
    assert set(NAMES_BEFORE_THE_SPLIT) <= set(pt.__all__) <= set(dir(pt))
    assert pt.HostReadError is HostReadError and pt.forbid_host_reads is forbid_host_reads
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        pt.nope  # noqa: B018


def test_the_checks_module_does_not_load_hypothesis():
    code = (
        "import sys, pe_core.testing, pe_core.testing.checks, pe_core.cli; "
        "assert 'hypothesis' not in sys.modules, 'hypothesis loaded'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_TIMEOUT)


# -- references ---------------------------------------------------------------------


def test_exact_reference_matches_float64_on_small_positions():
    pytest.importorskip("mpmath")
    spec = pe_core.PRESETS["fairseq"]
    for grid in (np.arange(-50, 50), np.linspace(-3, 3, 13)):
        want = pt.reference_encoding(grid, 17, spec)
        assert_close(pt.exact_encoding(grid, 17, spec), want, atol=1e-13, rtol=1e-7)


def test_exact_reference_at_huge_positions_matches_high_precision_mpmath():
    mpmath = pytest.importorskip("mpmath")
    positions = np.array([2**62 + 3, -(2**63), 1e300, -3.5e30, 2.0**40 + 0.5])
    w = pe_core.frequencies(6)
    got = pt.exact_encoding(positions, 6, frequencies=w)
    with mpmath.workprec(4000):
        for row, p in zip(got, positions.tolist(), strict=True):
            angles = [mpmath.mpf(p) * mpmath.mpf(float(v)) for v in w]
            expected = [float(f(a)) for a in angles for f in (mpmath.sin, mpmath.cos)]
            assert_equal(row, expected)


def test_exact_reference_rejects_frequencies_of_the_wrong_length():
    pytest.importorskip("mpmath")
    with pytest.raises(
        ValueError, match=r"frequencies must hold 4 values \(one per pair\)\. Received: 3"
    ):
        pt.exact_encoding([0], 8, frequencies=[1.0, 0.1, 0.01])


def complex_rope(x: np.ndarray, pos: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Interleaved RoPE written independently: pairs as complex numbers times e^(i p w)."""
    d = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(
        1j * np.asarray(pos, dtype=np.float64)[..., None] * base ** (-np.arange(0, d, 2) / d)
    )
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def test_reference_rope_matches_complex_multiplication():
    rng = np.random.default_rng(0)
    x, pos = rng.normal(size=(7, 12)), np.array([0, 1, 5, 1000, -3, 2.5, 2**20])
    interleaved = pt.reference_rope(x, pos, layout="interleaved")
    assert_close(interleaved, complex_rope(x, pos), atol=1e-12)
    # "half" pairs (j, j + d/2): the same rotation on permuted features
    perm = np.stack([np.arange(6), np.arange(6) + 6], axis=-1).reshape(-1)
    half = pt.reference_rope(x[..., np.argsort(perm)], pos, layout="half")
    assert_close(half[..., perm], complex_rope(x, pos), atol=1e-12)


def test_reference_rope_partial_rotary_leaves_the_rest():
    rng = np.random.default_rng(1)
    x, pos = rng.normal(size=(3, 8)), np.array([1, 2, 3])
    out = pt.reference_rope(x, pos, rotary_dim=4, layout="interleaved", base=100.0)
    assert_equal(out[:, 4:], x[:, 4:])
    assert_close(out[:, :4], complex_rope(x[:, :4], pos, base=100.0), atol=1e-12, rtol=1e-7)
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        pt.reference_rope(x, pos, rotary_dim=3)
    with pytest.raises(ValueError, match="Unknown layout 'neox'"):
        pt.reference_rope(x, pos, layout="neox")


# -- the checks without Hypothesis: they pass on pe_core and fail on broken code --------


def encoder(backend: str, spec: str | None = None):
    return lambda p, d: pe_core.encode(p, d, spec=spec, backend=backend)


def test_checks_return_the_measured_error(backend):
    fn, positions = encoder(backend), np.arange(0, 3000, 7)
    assert 0 <= pt.check_agreement(fn, None, 16, positions, 1e-6) < 1e-6
    assert pt.check_bounded(fn, None, 16, positions, 0.0) == 0.0
    assert pt.check_uniqueness(fn, None, 16, atol=1e-6) == 0.0
    assert 0 <= pt.check_linear_relation(fn, None, 16, positions, [1, -5, 4096], 1e-6) < 3e-6


def test_property_failure_carries_the_numbers():
    with pytest.raises(pt.PropertyFailure) as info:
        pt.check_agreement(off_by_one, "vaswani", 8, np.arange(4), 1e-6)
    failure = info.value
    assert isinstance(failure, AssertionError)
    assert failure.name == "agreement" and failure.tolerance == 1e-6
    assert failure.error == pytest.approx(
        np.abs(textbook(np.arange(1, 5), 8) - textbook(np.arange(4), 8)).max()
    )
    assert failure.worst.startswith("position ")


def test_check_agreement_against_mpmath_catches_float32_angles():
    pytest.importorskip("mpmath")
    big = np.array([10**6, 2**24 - 1, 12345678])
    assert pt.check_agreement(encoder("numpy"), None, 32, big, 1e-6, reference="mpmath") < 1e-6
    with pytest.raises(AssertionError, match="differs from the mpmath reference"):
        pt.check_agreement(float32_textbook, None, 32, big, 1e-6, reference="mpmath")


def float32_textbook(p, d):
    angle = np.asarray(p, dtype=np.float32)[..., None] * np.power(
        np.float32(10000.0), -np.arange(0, d, 2, dtype=np.float32) / np.float32(d)
    )
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(angle.shape[:-1] + (d,))


def test_check_agreement_takes_a_precomputed_reference():
    positions = np.arange(5)
    table = pt.reference_encoding(positions, 6)
    assert pt.check_agreement(textbook, None, 6, positions, reference=table) < 1e-12
    with pytest.raises(AssertionError, match="differs from the given reference"):
        pt.check_agreement(textbook, None, 6, positions, reference=-table)
    with pytest.raises(ValueError, match=r"reference has shape \(5, 4\)"):
        pt.check_agreement(textbook, None, 6, positions, reference=table[:, :4])
    with pytest.raises(ValueError, match="Unknown reference 'float32'"):
        pt.check_agreement(textbook, None, 6, positions, reference="float32")


def test_check_linear_relation_with_many_shifts_names_the_failing_one():
    def slow_after_1000(p, d):  # right below 1000, off by one position above
        return textbook(np.where(p >= 1000, p + 1, p), d)

    pt.check_linear_relation(slow_after_1000, None, 8, np.arange(10), [1, 5, 900])
    with pytest.raises(AssertionError, match="for k=2000"):
        pt.check_linear_relation(slow_after_1000, None, 8, np.arange(10), [1, 5, 2000])


def test_check_relative_dot_exact_catches_a_scaled_encoding():
    positions = np.arange(0, 5000, 500)
    pt.check_relative_dot(scaled, None, 16, positions, positions[::-1], [1, 77])  # p-independent
    with pytest.raises(AssertionError, match=r"but exactly sum cos\(k w_i\)"):
        pt.check_relative_dot(scaled, None, 16, positions, positions[::-1], [1, 77], exact=True)
    assert pt.check_relative_dot(textbook, None, 16, 3, 4000, [1, 77], exact=True) < 1e-12


def test_check_shift_passes_for_pe_core_shift(backend):
    fn = encoder(backend, "fairseq")
    positions = np.array([0, 3, 1000, 2**20])
    moved = lambda pe, k: pe_core.shift(pe, k, "fairseq")  # noqa: E731
    assert pt.check_shift(fn, moved, "fairseq", 16, positions, [1, -7, 65537], 1e-6) < 3e-6


def test_check_shift_catches_a_wrong_shift_and_a_changed_array_type():
    fn = encoder("numpy")
    positions = np.arange(6)
    with pytest.raises(AssertionError, match=r"differs from fn\(p \+ k\) .* for k=3"):
        pt.check_shift(
            fn, lambda pe, k: pe_core.shift(pe, k + (k == 3)), None, 8, positions, [0, 3]
        )
    with pytest.raises(AssertionError, match="returned a list array for a numpy float32 input"):
        pt.check_shift(fn, lambda pe, k: pe_core.shift(pe, k).tolist(), None, 8, positions, 2)


def test_check_cross_backend_agreement_passes_for_pe_core():
    from pe_core_backends import installed_backends

    names = installed_backends()
    positions = np.concatenate([np.arange(100), [2**24, 10**7]])
    error = pt.check_cross_backend_agreement(
        lambda b: pe_core.encode(positions, 32, backend=b), names
    )
    assert error == 0.0  # the same bits everywhere
    x = np.random.default_rng(0).uniform(-1, 1, (len(positions), 32)).astype(np.float32)
    rope = lambda b: pe_core.apply_rope(x, positions, backend=b)  # noqa: E731
    assert pt.check_cross_backend_agreement(rope, names, atol=5e-7) <= 5e-7


def test_check_cross_backend_agreement_catches_differences():
    torch = pytest.importorskip("torch")

    def nudged(b):
        out = pe_core.encode(np.arange(5), 4, backend=b)
        return out + 1e-6 if b == "torch" else out

    with pytest.raises(AssertionError, match=r"fn\('torch'\) differs from fn\('numpy'\)"):
        pt.check_cross_backend_agreement(nudged, ["numpy", "torch"], atol=5e-7)
    with pytest.raises(AssertionError, match=r"fn\('torch'\) returned a numpy float32 array"):
        pt.check_cross_backend_agreement(lambda b: pe_core.encode([0], 4), ["numpy", "torch"])

    def wider(b):
        return pe_core.encode([0], 4, backend=b, dtype=torch.float64 if b == "torch" else None)

    with pytest.raises(AssertionError, match="returned torch float64 of shape"):
        pt.check_cross_backend_agreement(wider, ["numpy", "torch"])


# -- RoPE checks ----------------------------------------------------------------------


def rope_inputs(n: int = 40, head_dim: int = 16):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (n, head_dim)).astype(np.float32)
    positions = np.concatenate([np.arange(n - 4), [2**24, 10**6, 12345678, -999]])
    return x, positions


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_checks_pass_for_apply_rope(backend, layout):
    x, positions = rope_inputs()

    def rope(x, p):
        return pe_core.apply_rope(x, p, layout=layout, base=500000.0, backend=backend)

    options = {"layout": layout, "base": 500000.0}
    assert pt.check_rope_agreement(rope, x, positions, atol=1e-6, **options) < 1e-6
    assert pt.check_rope_norm(rope, x, positions, atol=1e-6) < 1e-6
    q, k = x[:20], x[20:]
    error = pt.check_rope_relative_scores(
        rope, q, k, positions[:20], positions[20:], [1, -3, 2**20]
    )
    assert error < 1e-6


def test_rope_agreement_with_partial_rotary():
    x, positions = rope_inputs()
    rope = lambda x, p: pe_core.apply_rope(x, p, rotary_dim=8)  # noqa: E731
    pt.check_rope_agreement(rope, x, positions, rotary_dim=8, atol=1e-6)
    with pytest.raises(AssertionError, match="'rope agreement' failed"):
        pt.check_rope_agreement(rope, x, positions, atol=1e-6)  # the reference rotates all 16


def test_rope_agreement_catches_the_other_layout_and_a_wrong_base():
    x, positions = rope_inputs()
    rope = lambda x, p: pe_core.apply_rope(x, p)  # noqa: E731
    with pytest.raises(AssertionError, match=r"rope: base=10000\.0, layout='interleaved'"):
        pt.check_rope_agreement(rope, x, positions, layout="interleaved")
    with pytest.raises(AssertionError, match="differs from the float64 reference"):
        pt.check_rope_agreement(rope, x, positions, base=1000.0)
    with pytest.raises(AssertionError, match=r"returned shape \(40, 8\); expected x's shape"):
        pt.check_rope_agreement(lambda x, p: x[:, :8], x, positions)


def test_rope_relative_scores_hold_for_any_frequencies_but_not_absolute_positions():
    x, positions = rope_inputs()
    q, k, m, n = x[:20], x[20:], positions[:20], positions[20:]
    wrong_base = lambda x, p: pe_core.apply_rope(x, p, base=77.0)  # noqa: E731
    pt.check_rope_relative_scores(wrong_base, q, k, m, n, [5, -1000])  # still relative
    absolute = lambda x, p: x + 0.05 * textbook(p, x.shape[-1])  # noqa: E731
    with pytest.raises(AssertionError, match="'rope relative scores' failed"):
        pt.check_rope_relative_scores(absolute, q, k, m, n, [5, -1000])
    with pytest.raises(ValueError, match="same shape"):
        pt.check_rope_relative_scores(wrong_base, q, k[:3], m, n, 1)


def test_rope_norm_catches_scaling():
    x, positions = rope_inputs()
    yarn_like = lambda x, p: 1.1 * pe_core.apply_rope(x, p)  # noqa: E731
    pt.check_rope_agreement(lambda x, p: pe_core.apply_rope(x, p), x, positions)
    with pytest.raises(pt.PropertyFailure) as info:
        pt.check_rope_norm(yarn_like, x, positions, atol=1e-6)
    assert info.value.name == "rope norm" and info.value.error == pytest.approx(0.1, rel=1e-5)


# -- running a check ----------------------------------------------------------------


def test_run_check_reports_a_pass_with_the_measured_error():
    encode = lambda p, d: pe_core.encode(p, d)  # noqa: E731
    outcome = pt.run_check(lambda: pt.check_agreement(encode, None, 8, np.arange(100)))
    assert outcome.status == "PASS" and outcome.message == ""
    assert 0 <= outcome.error < 1e-6


def test_run_check_reports_a_failure_with_its_numbers():
    doubled = lambda p, d: 2 * pe_core.encode(p, d)  # noqa: E731
    outcome = pt.run_check(lambda: pt.check_bounded(doubled, None, 4, np.arange(3)))
    assert outcome.status == "FAIL" and outcome.error == 1.0
    assert outcome.message.startswith("error 1 > tolerance 1e-05; worst: position ")


def test_run_check_reports_any_other_exception_as_an_error_on_one_line():
    def crash():
        raise RuntimeError("first line\n  second line")

    outcome = pt.run_check(crash)
    assert outcome.status == "ERROR" and math.isnan(outcome.error)
    assert outcome.message == "RuntimeError: first line second line"

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pt.run_check(interrupted)
