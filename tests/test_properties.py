"""The property suite: every backend obeys the math of the sinusoidal encoding.

Tolerances (float32 output): the exact value rounded to float32 is off by at most
6e-8; pe_core's reduced angle is accurate to about 3e-7 rad (see pe_core/angles.py)
and each backend's float32 sin/cos adds a few ulps. ``ATOL32 = 1e-6`` is the
documented guarantee and leaves a margin of about 2x over the worst case observed.
float64 output is held to ``ATOL64 = 1e-12``.
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from conftest import assert_close, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from reference import exact_table, schedule, table

import pe_core
from pe_core import PRESETS, Spec

ATOL32 = 1e-6
ATOL64 = 1e-12

specs = st.one_of(
    st.sampled_from([PRESETS[n] for n in sorted(PRESETS) if PRESETS[n].axes == 1]),
    st.builds(
        Spec,
        base=st.floats(10.0, 1e6),
        denominator=st.sampled_from(["d", "half_minus_one"]),
        layout=st.sampled_from(["interleaved", "split"]),
        offset=st.integers(-5, 5),
        odd_d=st.sampled_from(["raise", "zero_pad"]),
        order=st.sampled_from(["sin_cos", "cos_sin"]),
    ),
)


def dims_for(spec: Spec) -> st.SearchStrategy[int]:
    if spec.odd_d == "zero_pad":
        return st.integers(1, 65)
    return st.integers(1, 32).map(lambda n: 2 * n)


def reference_for(positions: np.ndarray, d: int, spec: Spec) -> np.ndarray:
    return in_order(
        table(
            np.asarray(positions, np.float64) + spec.offset,
            pe_core.frequencies(d, spec),
            spec.layout,
            d,
        ),
        spec,
    )


def in_order(sin_first: np.ndarray, spec: Spec) -> np.ndarray:
    """A sin-first table in ``spec.order``: with ``"cos_sin"`` the two slots of every
    pair (interleaved) or the two halves (split) swapped; a pad column stays last."""
    if spec.order == "sin_cos":
        return sin_first
    d = sin_first.shape[-1]
    n = d // 2
    body, pad = sin_first[..., : 2 * n], sin_first[..., 2 * n :]
    if spec.layout == "interleaved":
        body = body.reshape(*body.shape[:-1], n, 2)[..., ::-1].reshape(body.shape)
    else:
        body = np.concatenate([body[..., n:], body[..., :n]], axis=-1)
    return np.concatenate([body, pad], axis=-1)


@given(data=st.data())
def test_agrees_with_float64_reference(backend: str, data: st.DataObject) -> None:
    spec = data.draw(specs, label="spec")
    d = data.draw(dims_for(spec), label="d")
    positions = data.draw(
        hnp.arrays(
            np.int64, hnp.array_shapes(max_dims=2, max_side=6), elements=st.integers(-1000, 100_000)
        ),
        label="positions",
    )
    out = pe_core.encode(positions_on(backend, positions), d, spec=spec)
    assert_close(
        out, reference_for(positions, d, spec), atol=ATOL32, backend=backend, dtype="float32"
    )


@given(data=st.data())
def test_fractional_positions_agree(backend: str, data: st.DataObject) -> None:
    spec = data.draw(specs, label="spec")
    d = data.draw(dims_for(spec), label="d")
    positions = data.draw(
        hnp.arrays(np.float32, st.integers(1, 8), elements=st.floats(-3000, 3000, width=32)),
        label="positions",
    )
    out = pe_core.encode(positions_on(backend, positions), d, spec=spec)
    assert_close(
        out, reference_for(positions.astype(np.float64), d, spec), atol=ATOL32, backend=backend
    )


@pytest.mark.parametrize("preset", sorted(n for n in PRESETS if PRESETS[n].axes == 1))
def test_exact_at_large_positions(backend: str, preset: str) -> None:
    """Against mpmath for integer positions up to 2**24 (the documented float32 bound)."""
    spec = PRESETS[preset]
    rng = np.random.default_rng(7)
    positions = np.concatenate([[0, 2**24, 2**24 - 1, 10**6 + 3], rng.integers(0, 2**24, 4)])
    d = 64
    expected = exact_table(positions + spec.offset, pe_core.frequencies(d, spec), spec.layout, d)
    expected = in_order(expected, spec)
    out = pe_core.encode(positions_on(backend, positions), d, spec=spec)
    assert_close(out, expected, atol=ATOL32, backend=backend)


def test_fractional_exact_up_to_2_pow_20(backend: str) -> None:
    positions = np.array([2.0**20 - 0.5, -(2.0**20) + 0.25, 123456.75, -0.125], dtype=np.float32)
    d = 32
    expected = exact_table(positions.astype(np.float64), pe_core.frequencies(d), "interleaved", d)
    assert_close(pe_core.encode(positions_on(backend, positions), d), expected, atol=ATOL32)


def test_float64_output(backend: str) -> None:
    if backend == "jax":
        import jax

        if not jax.config.jax_enable_x64:
            with pytest.raises(ValueError, match="jax_enable_x64"):
                pe_core.encode([1, 2], 8, backend="jax", dtype="float64")
            return
    positions = np.array([0, 7, 12345, 2**24, 2**30 + 11])
    d = 16
    expected = exact_table(positions, pe_core.frequencies(d), "interleaved", d)
    out = pe_core.encode(positions, d, backend=backend, dtype="float64")
    assert_close(out, expected, atol=ATOL64, backend=backend, dtype="float64")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_output_is_the_rounded_exact_value(backend: str, dtype: str) -> None:
    """Low precision is a storage format: the result is the exact value, rounded once."""
    from pe_core_backends import get_namespace

    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes:
        with pytest.raises(ValueError, match=dtype):
            pe_core.encode([1], 4, backend=backend, dtype=dtype)
        return
    positions = np.array([0, 1, 999, 65_537, 2**24])
    d = 16
    exact = exact_table(positions, pe_core.frequencies(d), "interleaved", d)
    out = pe_core.encode(positions, d, backend=backend, dtype=dtype)
    mantissa = {"float16": 10, "bfloat16": 7}[dtype]
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-14))) - mantissa)
    assert_close(out, exact, atol=ulp, backend=backend, dtype=dtype)  # one ulp per element


@given(
    positions=st.one_of(
        hnp.arrays(np.int64, st.integers(1, 16), elements=st.integers(0, 2**24)),
        hnp.arrays(np.float64, st.integers(1, 16), elements=st.floats(-(2.0**24), 2.0**24)),
    ),
    d=st.integers(1, 64).map(lambda n: 2 * n),
)
def test_bounded_and_finite(backend: str, positions: np.ndarray, d: int) -> None:
    out = to_numpy(pe_core.encode(positions_on(backend, positions), d))
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out) <= 1.0)


@given(spec=specs, data=st.data())
def test_distinct_positions_give_distinct_encodings(
    backend: str, spec: Spec, data: st.DataObject
) -> None:
    """Uniqueness on [0, N) with N = floor(2*pi / w_min), the longest wavelength.

    Two positions p != q collide only if (p - q) * w_i is a multiple of 2*pi for every
    pair i. The slowest pair alone rules that out while |p - q| * w_min < 2*pi, and its
    chord then has length 2*sin(theta/2) with theta in [w_min, 2*pi - w_min], so
    ||PE(p) - PE(q)|| >= 2*sin(w_min / 2).
    """
    d = data.draw(dims_for(spec).filter(lambda n: n >= 2), label="d")
    w_min = float(np.min(pe_core.frequencies(d, spec)))
    n_unique = math.floor(2 * math.pi / w_min)
    p = data.draw(st.integers(0, n_unique - 1), label="p")
    q = data.draw(st.integers(0, n_unique - 1).filter(lambda v: v != p), label="q")
    out = to_numpy(pe_core.encode(positions_on(backend, np.array([p, q])), d, spec=spec))
    gap = np.linalg.norm(out[0] - out[1])
    assert gap >= 2 * math.sin(w_min / 2) - 4 * ATOL32 * math.sqrt(d)


@given(spec=specs, data=st.data())
def test_linear_relation(backend: str, spec: Spec, data: st.DataObject) -> None:
    """PE(pos + k) = M_k @ PE(pos), and shift(PE(pos), k) = PE(pos + k)."""
    d = data.draw(dims_for(spec), label="d")
    positions = data.draw(
        hnp.arrays(np.int64, st.integers(1, 6), elements=st.integers(-(10**5), 10**5))
    )
    k = data.draw(st.integers(-(10**6), 10**6), label="k")
    pe = pe_core.encode(positions_on(backend, positions), d, spec=spec)
    moved = pe_core.encode(positions_on(backend, positions + k), d, spec=spec)
    M = to_numpy(pe_core.relative_matrix(k, d, spec, backend=backend))
    assert_close(to_numpy(pe) @ M.T, to_numpy(moved), atol=4 * ATOL32, rtol=1e-7)
    assert_close(pe_core.shift(pe, k, spec), to_numpy(moved), atol=4 * ATOL32, backend=backend)


def test_shift_broadcasts_k_over_leading_axes(backend: str) -> None:
    positions = np.arange(12).reshape(3, 4)
    k = np.array([[1], [100], [-7]])
    pe = pe_core.encode(positions_on(backend, positions), 8)
    out = pe_core.shift(pe, positions_on(backend, k))
    assert_close(
        out, reference_for(positions + k, 8, PRESETS["vaswani"]), atol=4 * ATOL32, backend=backend
    )


@given(
    spec=specs,
    a=st.integers(-(2**24), 2**24),
    b=st.integers(-(2**24), 2**24),
    data=st.data(),
)
def test_relative_matrix_group_laws(
    backend: str, spec: Spec, a: int, b: int, data: st.DataObject
) -> None:
    """M_a M_b = M_(a+b); M_k is orthogonal; M_(-k) = M_k^T."""
    d = data.draw(dims_for(spec), label="d")
    Ma = to_numpy(pe_core.relative_matrix(a, d, spec, backend=backend))
    Mb = to_numpy(pe_core.relative_matrix(b, d, spec, backend=backend))
    Mab = to_numpy(pe_core.relative_matrix(a + b, d, spec, backend=backend))
    M_neg = to_numpy(pe_core.relative_matrix(-a, d, spec, backend=backend))
    assert_close(Ma @ Mb, Mab, atol=4 * ATOL32, rtol=1e-7)
    assert_close(Ma @ Ma.T, np.eye(d), atol=4 * ATOL32, rtol=1e-7)
    assert_close(M_neg, Ma.T, atol=2 * ATOL32, rtol=1e-7)


@given(spec=specs, data=st.data())
def test_relative_dot_product_depends_on_k_alone(
    backend: str, spec: Spec, data: st.DataObject
) -> None:
    d = data.draw(dims_for(spec), label="d")
    k = data.draw(st.integers(-5000, 5000), label="k")
    p = np.array(
        data.draw(st.lists(st.integers(-(10**5), 10**5), min_size=2, max_size=6), label="p")
    )
    pe = to_numpy(pe_core.encode(positions_on(backend, p), d, spec=spec))
    pe_k = to_numpy(pe_core.encode(positions_on(backend, p + k), d, spec=spec))
    dots = np.sum(pe * pe_k, axis=-1)
    expected = float(np.sum(np.cos(k * pe_core.frequencies(d, spec))))
    assert_close(dots, np.full_like(dots, expected), atol=d * ATOL32, rtol=1e-7)


def test_schedule_matches_the_formulas() -> None:
    for d in (2, 8, 512, 4096):
        assert_close(pe_core.frequencies(d), schedule(d), atol=0, rtol=1e-14, dtype="float64")
        assert_close(
            pe_core.frequencies(d, "tensor2tensor"),
            schedule(d, denominator="half_minus_one"),
            atol=0,
            rtol=1e-14,
        )
    explicit = pe_core.frequencies(8, Spec(frequencies=(1, 2, 3, 4)))
    assert_close(explicit, [1, 2, 3, 4], atol=0, rtol=1e-7)


@pytest.mark.parametrize("k", [2**24, -(2**24) + 17, 10**6 + 1])
def test_relative_matrix_exact_for_large_k(backend: str, k: int) -> None:
    """M_k's rotation angles are exact at large k, like encode's."""
    from reference import exact_sin_cos

    d = 32
    omegas = pe_core.frequencies(d)
    s, c = exact_sin_cos(np.array([k]), omegas)
    M = to_numpy(pe_core.relative_matrix(k, d, backend=backend))
    assert_close(M[0::2, 0::2].diagonal(), c[0], atol=ATOL32, rtol=1e-7)  # cos on the diagonal
    assert_close(M[0::2, 1::2].diagonal(), s[0], atol=ATOL32, rtol=1e-7)  # sin row of each block
    pe = pe_core.encode(positions_on(backend, np.array([3, 4])), d)
    shifted = pe_core.shift(pe, k)
    expected = exact_table(np.array([3 + k, 4 + k]), omegas, "interleaved", d)
    assert_close(shifted, expected, atol=4 * ATOL32, rtol=1e-7, backend=backend)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_output_near_zero_is_within_one_ulp(backend: str, dtype: str) -> None:
    """Eager calls on backends with float64 round the exact value once, even near zero.

    The positions are numerators of continued-fraction approximations of pi, so
    sin(p) with w = 1 is tiny (down to 1e-7), where float32's absolute error of ~1e-7
    would be many ulps of the output dtype.
    """
    from pe_core_backends import get_namespace

    xp = get_namespace(backend)
    if dtype not in xp.float_dtypes or not xp.supports("float64"):
        pytest.skip(f"{backend} computes {dtype} output through float32 (no float64 here)")
    positions = np.array([355, 103_993, 104_348, 208_341, 312_689, 833_719, 1_146_408])
    exact = exact_table(positions, pe_core.frequencies(2), "interleaved", 2)
    out = pe_core.encode(positions, 2, backend=backend, dtype=dtype)
    mantissa, tiny = {"float16": (10, 2.0**-24), "bfloat16": (7, 2.0**-133)}[dtype]
    ulp = np.maximum(np.exp2(np.floor(np.log2(np.abs(exact))) - mantissa), tiny)
    assert_close(out, exact, atol=ulp, backend=backend, dtype=dtype)  # one ulp per element
