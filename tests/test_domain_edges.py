"""No silent wrong answers at the edges of the numeric domain.

Every finite position of every dtype (int8 to uint64 over their whole range, float32 to
3.4e38, float64 to 1.8e308), integer offsets of any size and frequencies of any finite
size are encoded exactly, compared with mpmath; where a device or traced kernel cannot
(floats beyond its range), the result is NaN, never a plausible wrong number. Low
precision outputs are within one ulp (eager), or within the stated bound (traced).
Bad inputs get clear errors, and requests that cannot fit in memory are refused
before anything is allocated.
"""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core._kernel.angles import exact_turns, inv_2pi_fixed
from pe_core._kernel.inputs import LowPrecisionPositionsWarning
from pe_core._kernel.placement import kernel_limit
from pe_core_backends import force_device_path, get_namespace
from tests.conftest import assert_close, to_numpy

mpmath = pytest.importorskip("mpmath")

#: Tolerances against mpmath per output dtype (the targets of docs/precision.md).
ATOL = {"float32": 1e-6, "float64": 1e-12}

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}

D = 8  # four frequencies, from 1 down to 1e-3 rad per position


def _frequencies(d: int = D, spec: Any = None) -> tuple[float, ...]:
    return tuple(float(w) for w in pe_core.frequencies(d, spec))


def exact_sin_cos(x: int | float, omegas: tuple[float, ...], offset: int | float = 0) -> np.ndarray:
    """``[sin, cos]`` pairs of ``(x + offset) * w`` from mpmath, interleaved, float64."""
    out = []
    for w in omegas:
        # enough bits for the exact product, then for the reduction
        bits = _bits(x) + _bits(offset) + _bits(w) + 160
        with mpmath.workprec(bits):
            angle = (mpmath.mpf(x) + mpmath.mpf(offset)) * mpmath.mpf(w)
            turns = angle / (2 * mpmath.pi)
            reduced = (turns - mpmath.nint(turns)) * 2 * mpmath.pi
            out += [float(mpmath.sin(reduced)), float(mpmath.cos(reduced))]
    return np.array(out, dtype=np.float64)


def _bits(v: int | float) -> int:
    """Bits of ``v`` as an exact binary number, above and below the point."""
    if isinstance(v, int):
        return abs(v).bit_length() + 1
    if v == 0:
        return 1
    exponent = math.frexp(v)[1]
    return abs(exponent) + 64


def exact_table(values: list, omegas: tuple[float, ...], offset: int | float = 0) -> np.ndarray:
    return np.stack([exact_sin_cos(v, omegas, offset) for v in values])


def _on(backend: str, values: np.ndarray) -> Any:
    return get_namespace(backend).asarray(values)


def _backend_takes(backend: str, dtype_name: str) -> bool:
    """Whether ``backend`` can hold ``dtype_name`` arrays as given here."""
    if backend == "jax":
        import jax

        return not dtype_name.endswith("64") or bool(jax.config.jax_enable_x64)
    if backend == "tensorflow":
        return True
    return True


# --------------------------------------------------------------------------- constants


def test_inv_2pi_matches_mpmath() -> None:
    for bits in (240, 1024, 2304):
        with mpmath.workprec(bits + 64):
            expected = int(mpmath.floor(mpmath.mpf(2) ** bits / (2 * mpmath.pi)))
        assert abs(inv_2pi_fixed(bits) - expected) <= 1


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=4),
    st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False),
)
def test_exact_turns_any_float_any_frequency(values: list[float], omega: float) -> None:
    turns = exact_turns(np.array(values), (omega,))
    for v, t in zip(values, turns[:, 0], strict=True):
        with mpmath.workprec(2400):
            exact = mpmath.mpf(v) * mpmath.mpf(omega) / (2 * mpmath.pi)
            expected = float(exact - mpmath.nint(exact))
        assert abs(t - expected) <= 1e-18 + 1e-15 * abs(expected)


# ----------------------------------------------------------------- integer positions


def _int_values(name: str) -> st.SearchStrategy[list[int]]:
    lo, hi = INT_RANGES[name]
    edges = [v for v in (lo, hi, lo + 1, hi - 1, 0, 2**31, 2**55 + 3, 2**63 - 1) if lo <= v <= hi]
    one = st.one_of(st.integers(lo, hi), st.sampled_from(edges))
    return st.lists(one, min_size=1, max_size=6)


@given(data=st.data())
def test_integer_positions_of_every_dtype_are_exact_on_the_host(
    backend: str, data: st.DataObject
) -> None:
    names = [n for n in INT_RANGES if _backend_takes(backend, n)]
    dtype_name = data.draw(st.sampled_from(names))
    values = data.draw(_int_values(dtype_name))
    array = np.array(values, dtype=dtype_name)
    expected = exact_table(values, _frequencies())
    out = "float64" if get_namespace(backend).supports("float64") else "float32"
    got = pe_core.encode(_on(backend, array), D, dtype=out)
    assert_close(got, expected, atol=ATOL[out], backend=backend, dtype=out)


@given(data=st.data())
def test_integer_positions_of_every_dtype_are_exact_on_the_device_path(
    backend: str, data: st.DataObject
) -> None:
    if backend == "numpy":
        pytest.skip("NumPy has no device path")
    names = [n for n in INT_RANGES if _backend_takes(backend, n)]
    dtype_name = data.draw(st.sampled_from(names))
    values = data.draw(_int_values(dtype_name))
    positions = _on(backend, np.array(values, dtype=dtype_name))
    expected = exact_table(values, _frequencies())
    with force_device_path():
        got = pe_core.encode(positions, D)
    assert_close(got, expected, atol=ATOL["float32"], backend=backend, dtype="float32")


@pytest.mark.parametrize("dtype_name", list(INT_RANGES))
def test_integer_extremes_of_every_dtype(backend: str, dtype_name: str) -> None:
    if not _backend_takes(backend, dtype_name):
        pytest.skip(f"{backend} holds no {dtype_name} arrays here")
    lo, hi = INT_RANGES[dtype_name]
    values = sorted({lo, hi, lo + 1, hi - 1, 0})
    positions = _on(backend, np.array(values, dtype=dtype_name))
    got = pe_core.encode(positions, D)
    assert_close(got, exact_table(values, _frequencies()), atol=ATOL["float32"])


@pytest.mark.slow
def test_integer_extremes_under_jit_and_tf_function(backend: str) -> None:
    if backend not in ("jax", "tensorflow"):
        pytest.skip("traced on JAX / TensorFlow")
    dtype_name = "uint32" if backend == "jax" else "int64"  # the widest each holds here
    lo, hi = INT_RANGES[dtype_name]
    values = sorted({lo, hi, lo + 1, hi - 1, max(lo, 0), min(hi, 2**31 + 5)})
    positions = _on(backend, np.array(values, dtype=dtype_name))
    if backend == "jax":
        import jax

        got = jax.jit(lambda p: pe_core.encode(p, D))(positions)
    else:
        import tensorflow as tf

        got = tf.function(lambda p: pe_core.encode(p, D))(positions)
    assert_close(got, exact_table(values, _frequencies()), atol=ATOL["float32"])


# ------------------------------------------------------------------- float positions


FLOAT_WIDTHS = {"float32": 32, "float64": 64}


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@given(data=st.data())
def test_float_positions_of_any_size_are_exact_on_the_host(
    backend: str, dtype_name: str, data: st.DataObject
) -> None:
    xp = get_namespace(backend)
    if not xp.supports(dtype_name):
        pytest.skip(f"{backend} holds no {dtype_name} arrays here")
    floats = st.floats(width=FLOAT_WIDTHS[dtype_name], allow_nan=False, allow_infinity=False)
    values = data.draw(st.lists(floats, min_size=1, max_size=5))
    array = np.array(values, dtype=dtype_name)
    expected = exact_table([float(v) for v in array], _frequencies())
    out = "float64" if xp.supports("float64") else "float32"
    got = pe_core.encode(_on(backend, array), D, dtype=out)
    assert_close(got, expected, atol=ATOL[out], backend=backend, dtype=out)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@given(data=st.data())
def test_float_positions_on_the_device_path_are_exact_or_nan(
    backend: str, dtype_name: str, data: st.DataObject
) -> None:
    xp = get_namespace(backend)
    if backend == "numpy" or not xp.supports(dtype_name):
        pytest.skip(f"no device path for {dtype_name} on {backend}")
    floats = st.floats(width=FLOAT_WIDTHS[dtype_name], allow_nan=False, allow_infinity=False)
    values = data.draw(st.lists(floats, min_size=1, max_size=5))
    array = np.array(values, dtype=dtype_name)
    expected = exact_table([float(v) for v in array], _frequencies())
    positions = _on(backend, array)
    with force_device_path():
        got = pe_core.encode(positions, D)
        checked = pe_core.encode(positions, D, check_values=True)
    beyond = np.abs(array.astype(np.float64)) >= kernel_limit(xp)
    # beyond the kernel's limit: the documented NaN, never a plausible number
    nan_beyond = np.where(beyond[:, None], np.nan, expected)
    assert_close(got, nan_beyond, atol=ATOL["float32"], rtol=1e-7, backend=backend)
    assert_close(checked, expected, atol=ATOL["float32"])  # read: exact on the host


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_low_precision_positions_at_their_extremes(backend: str, dtype_name: str) -> None:
    xp = get_namespace(backend)
    if dtype_name not in xp.float_dtypes:
        pytest.skip(f"{backend} has no {dtype_name}")
    top = 65504.0 if dtype_name == "float16" else 3.3895313892515355e38
    values = np.array([top, -top, top / 3, 3.0], dtype=np.float32)
    positions = xp.astype(xp.asarray(values), xp.dtype(dtype_name))
    exact = [float(v) for v in to_numpy(positions)]
    with pytest.warns(LowPrecisionPositionsWarning):
        got = pe_core.encode(positions, D)
    assert_close(got, exact_table(exact, _frequencies()), atol=ATOL["float32"])


def test_float32_beyond_2_31_under_jit_is_nan_without_int64() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    values = np.array([3.0, 2.0**31, 1e38, -3e9], np.float32)
    got = jax.jit(lambda p: pe_core.encode(p, D))(jnp.asarray(values))
    limit = kernel_limit(get_namespace("jax"))
    beyond = np.abs(values) >= limit
    expected = exact_table([float(v) for v in values], _frequencies())
    expected[beyond] = np.nan
    assert_close(got, expected, atol=ATOL["float32"], backend="jax", dtype="float32")


@pytest.mark.parametrize("value", [2.0**31, 1e20, 1e300, 2.0**55 + 4, 1.7976931348623157e308])
def test_huge_float64_positions_match_mpmath(value: float) -> None:
    got = pe_core.encode(np.array([value, -value]), D, dtype="float64")
    assert_close(got, exact_table([value, -value], _frequencies()), atol=ATOL["float64"])


# -------------------------------------------------------------- offsets, frequencies


@pytest.mark.parametrize("offset", [2**53 + 1, 2**62 + 7, 10**30, -(10**40) - 3, 2.5])
def test_integer_offsets_of_any_size_stay_exact(offset: int | float) -> None:
    spec = pe_core.Spec(offset=offset)
    assert spec.offset == offset and type(spec.offset) is type(offset)
    values = [0, 5, 2**40]
    got = pe_core.encode(np.array(values), D, spec=spec, dtype="float64")
    assert_close(got, exact_table(values, _frequencies(), offset), atol=ATOL["float64"])


def test_integer_offset_on_the_device_path_and_under_jit(backend: str) -> None:
    if backend == "numpy":
        pytest.skip("no device path")
    offset = 2**53 + 1
    spec = pe_core.Spec(offset=offset)
    positions = _on(backend, np.array([0, 3], np.int32))
    expected = exact_table([0, 3], _frequencies(), offset)
    with force_device_path():
        assert_close(pe_core.encode(positions, D, spec=spec), expected, atol=ATOL["float32"])


@pytest.mark.parametrize(
    "spec",
    [
        pe_core.Spec(frequencies=(1e100, 3.0, 1e300, 1.7e308)),
        pe_core.Spec(min_timescale=1e-300),
        pe_core.Spec(frequencies=(5e-324, 4.0, 1e10, 1e-300)),
    ],
    ids=["explicit", "min_timescale", "tiny"],
)
def test_frequencies_of_any_size(backend: str, spec: pe_core.Spec) -> None:
    w = _frequencies(D, spec)
    ints = [0, 3, -7, 2**40 + 1]
    floats = [0.5, 3.25, -7.125, 1e300]
    xp = get_namespace(backend)
    out = "float64" if xp.supports("float64") else "float32"
    for values in (ints, floats):
        got = pe_core.encode(np.array(values), D, spec=spec, backend=backend, dtype=out)
        assert_close(got, exact_table(values, w), atol=ATOL[out], backend=backend)
    if backend == "numpy":
        return
    with force_device_path():  # integers exact; fractions at fast frequencies: NaN
        dint = pe_core.encode(_on(backend, np.array(ints[:3], np.int32)), D, spec=spec)
        dfl = pe_core.encode(_on(backend, np.array([0.5, 3.0], np.float32)), D, spec=spec)
    assert_close(dint, exact_table(ints[:3], w), atol=ATOL["float32"], rtol=1e-7, backend=backend)
    fast = np.repeat(np.abs(np.array(w)) / (2 * math.pi) > 0.5, 2)
    expected = exact_table([0.5, 3.0], w)
    expected[0, fast] = np.nan
    assert_close(dfl, expected, atol=1e-6, rtol=1e-7, backend=backend)


# ------------------------------------------------------------ relative, shift, rope


@pytest.mark.parametrize("k", [2**55 + 3, 2**60, 2**63 - 1, -(2**63), 1e20, 1e300])
def test_relative_matrix_and_shift_at_any_k(k: int | float) -> None:
    m = pe_core.relative_matrix(k, 4, dtype="float64")
    s, c = exact_sin_cos(k, _frequencies(4))[:2]
    assert_close(m[:2, :2], [[c, s], [-s, c]], atol=ATOL["float64"], rtol=1e-7, dtype="float64")
    pe = pe_core.encode(np.arange(3), 4, dtype="float64")
    shifted = pe_core.shift(pe, k)
    expected = np.stack([exact_sin_cos(k, _frequencies(4), offset=p) for p in range(3)])
    assert_close(shifted, expected, atol=1e-12, rtol=1e-7)


def test_relative_matrix_uint64_k_on_the_host(backend: str) -> None:
    k = np.array([2**64 - 1, 2**63], np.uint64)
    if not _backend_takes(backend, "uint64"):
        pytest.skip("no uint64 arrays here")
    m = pe_core.relative_matrix(_on(backend, k), 2)
    expected = []
    for v in k.tolist():
        s, c = exact_sin_cos(v, _frequencies(2))
        expected.append([[c, s], [-s, c]])
    assert_close(m, expected, atol=1e-6, rtol=1e-7, backend=backend)


@pytest.mark.parametrize("p", [2**55 + 3, 2**63 - 1, 1e300])
def test_apply_rope_at_huge_positions(backend: str, p: int | float) -> None:
    x = np.random.default_rng(0).standard_normal((2, 8))
    w = tuple(10000.0 ** (-np.arange(0, 8, 2) / 8))
    sc = exact_sin_cos(p, w).reshape(4, 2)
    s, c = sc[:, 0], sc[:, 1]
    a, b = x[:, :4], x[:, 4:]
    expected = np.concatenate([a * c - b * s, b * c + a * s], -1)
    xp = get_namespace(backend)
    work = "float64" if xp.supports("float64") else "float32"
    got = pe_core.apply_rope(xp.asarray(x.astype(work)), np.array([p, p]))
    assert_close(got, expected, atol=10 * ATOL[work], backend=backend)


def test_torch_layer_at_a_huge_offset() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import SinusoidalEncoding

    layer = SinusoidalEncoding(D)
    got = layer(torch.zeros(1, 3, D, dtype=torch.float64), offset=2**62)
    expected = exact_table([2**62, 2**62 + 1, 2**62 + 2], _frequencies())
    assert_close(got[0], expected, atol=ATOL["float64"])


# -------------------------------------------------------------------- low precision


def _ulp(exact: np.ndarray, dtype_name: str) -> np.ndarray:
    """The spacing of ``dtype_name`` numbers at ``exact`` (subnormals included)."""
    digits, emin = {"bfloat16": (8, -126), "float16": (11, -14)}[dtype_name]
    scale = np.floor(np.log2(np.maximum(np.abs(exact), 2.0**emin)))
    return 2.0 ** (scale - (digits - 1))


#: Positions whose angle at w = 1 nearly hits a multiple of pi (convergents of pi).
NEAR_ZERO = [22, 333, 355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943]


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_low_precision_encode_within_one_ulp_eager(backend: str, dtype_name: str) -> None:
    xp = get_namespace(backend)
    if dtype_name not in xp.float_dtypes or not xp.supports("float64"):
        pytest.skip(f"{backend} has no {dtype_name} or no float64 here")
    rng = np.random.default_rng(1)
    for values in (NEAR_ZERO, list(range(100_000, 100_128)), rng.integers(0, 2**40, 64).tolist()):
        got = pe_core.encode(np.array(values), 16, backend=backend, dtype=dtype_name)
        exact = exact_table(values, _frequencies(16))
        one_ulp = _ulp(exact, dtype_name)
        assert_close(got, exact, atol=one_ulp, backend=backend, dtype=dtype_name)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_low_precision_apply_rope_within_one_ulp_eager(backend: str, dtype_name: str) -> None:
    xp = get_namespace(backend)
    if dtype_name not in xp.float_dtypes or not xp.supports("float64"):
        pytest.skip(f"{backend} has no {dtype_name} or no float64 here")
    rng = np.random.default_rng(2)
    n, hd = 64, 16
    pos = rng.integers(0, 10**6, n)
    w = tuple(10000.0 ** (-np.arange(0, hd, 2) / hd))
    sc = exact_table(pos.tolist(), w).reshape(n, hd // 2, 2)
    s, c = sc[..., 0], sc[..., 1]
    # b chosen so that a*cos - b*sin nearly cancels (the hard case)
    a = rng.standard_normal((n, hd // 2))
    b = a * c / np.where(np.abs(s) > 1e-3, s, 1.0) * (1 + rng.standard_normal((n, hd // 2)) * 1e-3)
    x = xp.astype(xp.asarray(np.concatenate([a, b], -1)), xp.dtype(dtype_name))
    xs = to_numpy(x)
    a, b = xs[:, : hd // 2], xs[:, hd // 2 :]
    exact = np.concatenate([a * c - b * s, b * c + a * s], -1)
    got = pe_core.apply_rope(x, pos)
    assert_close(got, exact, atol=_ulp(exact, dtype_name), backend=backend, dtype=dtype_name)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_low_precision_traced_encode_within_the_stated_bound(dtype_name: str) -> None:
    """float32 work (JAX without x64): 0.5 ulp + 3e-7 absolute (docs/precision.md)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    if jax.config.jax_enable_x64:
        pytest.skip("with x64 the traced kernel works in float64")
    values = NEAR_ZERO + list(range(1000, 1128))
    fn = jax.jit(lambda p: pe_core.encode(p, 16, dtype=dtype_name))
    got = fn(jnp.asarray(values, jnp.int32))
    exact = exact_table(values, _frequencies(16))
    bound = 0.5 * _ulp(exact, dtype_name) + 3e-7  # per element
    assert_close(got, exact, atol=bound, backend="jax", dtype=dtype_name)


# ------------------------------------------------------- crashes and unclear errors


def test_torch_unsigned_positions_beyond_2_31() -> None:
    torch = pytest.importorskip("torch")
    for dtype, values in ((torch.uint32, [2**31, 2**32 - 1]), (torch.uint64, [2**63, 2**64 - 1])):
        numpy_dtype = "uint32" if dtype == torch.uint32 else "uint64"
        tensor = torch.from_numpy(
            np.array(values, numpy_dtype).view(np.int64 if "64" in numpy_dtype else np.int32)
        ).view(dtype)
        expected = exact_table(values, _frequencies())
        assert_close(pe_core.encode(tensor, D), expected, atol=ATOL["float32"])
        with force_device_path():
            assert_close(pe_core.encode(tensor, D), expected, atol=ATOL["float32"])


@pytest.mark.parametrize("rows", [100, 8192])
def test_non_contiguous_out(backend: str, rows: int) -> None:
    xp = get_namespace(backend)
    if not xp.mutable:
        pytest.skip("out= needs a mutable backend")
    buffer = xp.zeros((rows, 2 * D), xp.dtype("float32"))[:, ::2]
    positions = np.random.default_rng(0).permutation(rows)
    result = pe_core.encode(_on(backend, positions), D, out=buffer)
    assert result is buffer
    assert_close(buffer, to_numpy(pe_core.encode(positions, D)), atol=1e-6)


@pytest.mark.parametrize("value", [10**30, [0, 2**64], [-1, 2**63 + 1]])
def test_python_ints_numpy_cannot_hold_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match=r"2\*\*6[34]"):
        pe_core.encode(value, 4)


def test_python_ints_in_range_are_exact() -> None:
    got = pe_core.encode([2**63, 2**64 - 1], 4, dtype="float64")
    assert_close(got, exact_table([2**63, 2**64 - 1], _frequencies(4)), atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"base": 10**400}, ValueError, "Spec.base must be a finite number"),
        ({"min_timescale": 5e-324}, ValueError, "inverse is a finite float64"),
        ({"frequencies": ((1.0, 2.0),)}, TypeError, "flat sequence of numbers.*item 0"),
        ({"frequencies": (1.0, None)}, TypeError, "flat sequence of numbers.*item 1"),
        ({"frequencies": (10**400,)}, ValueError, "Spec.frequencies must be finite"),
        ({"offset": float("inf")}, ValueError, "Spec.offset must be a finite number"),
    ],
)
def test_spec_values_get_clear_errors(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        pe_core.Spec(**kwargs)


def test_spec_accepts_numpy_scalars() -> None:
    spec = pe_core.Spec(base=np.float32(500), offset=np.int64(2), min_timescale=np.float64(1))
    assert spec == pe_core.Spec(base=500.0, offset=2)
    assert type(spec.offset) is int and type(spec.base) is float
    assert pe_core.Spec(frequencies=np.array([1.0, 0.5])).frequencies == (1.0, 0.5)


@pytest.mark.parametrize("positions", [[0.0, float("nan")], [float("inf")], None, [True, False]])
def test_xpos_scale_refuses_bad_positions(positions: Any) -> None:
    from pe_core.rope_scaling import xpos_scale

    with pytest.raises((ValueError, TypeError), match="positions must"):
        xpos_scale(positions, 4)


# ------------------------------------------------------------------- huge requests


@pytest.mark.parametrize(
    "call",
    [
        lambda: pe_core.encode([0, 1], 2**31),
        lambda: pe_core.encode(range(2**40), 512),
        lambda: pe_core.relative_matrix(0, 2**20),
        lambda: pe_core.alibi_bias(2**20, 2**20, 64),
    ],
    ids=["encode-d", "encode-rows", "relative_matrix", "alibi_bias"],
)
def test_requests_that_cannot_fit_are_refused_at_once(call: Any) -> None:
    """Refused before anything is allocated (memory is checked, not time)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(ValueError, match=r"would need about [\d.]+ [KMGT]iB of memory"):
            call()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak / 2**20:.1f} MiB"


# ----------------------------------------------------------------- numpy bfloat16


def test_numpy_bfloat16_output_through_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    got = pe_core.encode(np.arange(4), 8, dtype="bfloat16")
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    exact = exact_table(list(range(4)), _frequencies())
    half_ulp = (0.5 + 1e-9) * _ulp(exact, "bfloat16")  # rounded once, to nearest
    assert_close(got, exact, atol=half_ulp, backend="numpy", dtype="bfloat16")
