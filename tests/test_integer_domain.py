"""Integers at the edges of the documented domain: exact, or refused naming the value.

The domain (docs/precision.md, "Integers"): positions are integers in ``[-2**63, 2**64)``
(int64 or uint64), ranges and layer offsets included; T5 relative positions are any
value of an integer dtype. Each case below failed before: a range crossing ``2**63``
wrapped to ``-2**63``, T5's buckets of ``-2**63`` came out negative. The references are
Python-int arithmetic: mpmath's sin/cos of ``p * w`` for the exact integer ``p``, and a
restatement of transformers' ``T5Attention._relative_position_bucket`` on Python ints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
from conftest import assert_equal, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from reference import t5_bucket_reference

import pe_core
from pe_core import position_ids, t5
from pe_core_backends import force_device_path, get_namespace

D = 4
SPEC = pe_core.Spec(layout="interleaved")


def _exact_table(positions: list[int], d: int = D, layout: str = "interleaved") -> np.ndarray:
    """sin/cos of ``p * w`` at 120 digits, ``p`` the exact Python int."""
    omegas = np.asarray(pe_core.frequencies(d), dtype=np.float64)
    rows = []
    with mpmath.workdps(120):
        for p in positions:
            angles = [mpmath.mpf(int(p)) * mpmath.mpf(float(w)) for w in omegas]
            s = [float(mpmath.sin(a)) for a in angles]
            c = [float(mpmath.cos(a)) for a in angles]
            if layout == "interleaved":
                rows.append([v for pair in zip(s, c, strict=True) for v in pair])
            else:
                rows.append(s + c)
    return np.array(rows)


def _close(got: Any, positions: list[int], layout: str = "interleaved") -> None:
    np.testing.assert_allclose(
        to_numpy(got).reshape(len(positions), -1), _exact_table(positions, layout=layout), atol=1e-6
    )


# --------------------------------------------------------------------------- sinusoidal

TOP = [2**63 - 2, 2**63 - 1, 2**63]

#: (what is passed, the exact positions it means)
EXACT_POSITIONS: list[tuple[Any, list[int]]] = [
    (range(2**63 - 2, 2**63 + 1), TOP),  # crosses 2**63: wrapped to -2**63 before
    (range(0, 2**63 + 2, 2**62), [0, 2**62, 2**63]),  # a reshape error before
    (range(2**64 - 1, 2**64 - 4, -1), [2**64 - 1, 2**64 - 2, 2**64 - 3]),
    (range(2**63, 2**63 + 2), [2**63, 2**63 + 1]),  # OverflowError before
    (range(-(2**63), -(2**63) + 2), [-(2**63), -(2**63) + 1]),
    (list(TOP), TOP),  # NumPy stores this list as float64: refused before
]


@pytest.mark.parametrize(("positions", "exact"), EXACT_POSITIONS, ids=repr)
def test_ranges_and_lists_to_2_64_are_exact(backend: str, positions: Any, exact: list) -> None:
    _close(pe_core.encode(positions, D, spec=SPEC, backend=backend), exact)


@pytest.mark.parametrize(("positions", "exact"), EXACT_POSITIONS[:3], ids=repr)
def test_apply_rope_of_ranges_to_2_64_is_exact(positions: Any, exact: list) -> None:
    x = np.zeros((len(exact), D))
    x[:, 0] = 1.0  # rotated into (cos, sin) of the fastest pair
    y = pe_core.apply_rope(x, positions, layout="interleaved")
    expected = _exact_table(exact)
    np.testing.assert_allclose(y[:, :2], expected[:, [1, 0]], atol=1e-12)


#: (call, error type, words the message must hold)
REFUSED: list[tuple[str, Callable[[], Any], type, str]] = [
    (
        "range with negatives and values from 2**63 on",
        lambda: pe_core.encode(range(-1, 2**63 + 1, 2**63 + 1), D),
        ValueError,
        "[-2**63, 2**63) or in [0, 2**64)",
    ),
    (
        "range beyond 2**64",
        lambda: pe_core.encode(range(2**64 - 1, 2**64 + 1), D),
        ValueError,
        "18446744073709551616",
    ),
    (
        "list beyond 2**64",
        lambda: pe_core.encode([2**64], D),
        ValueError,
        "[-2**63, 2**64)",
    ),
    (
        "position ids past int64",
        lambda: position_ids.from_input_ids([[8, 9, 7]], padding_idx=1, past_length=2**63 - 2),
        ValueError,
        "9223372036854775810",
    ),
    (
        "position ids past 2**64",
        lambda: position_ids.from_input_ids([[8]], padding_idx=1, past_length=2**64),
        ValueError,
        "does not fit in int64",
    ),
    (
        "clipped relative index past int64",
        lambda: pe_core.clipped_relative_position(3, 3, max_left=2, offset=2**63 - 1),
        ValueError,
        "9223372036854775809",
    ),
    (
        "T5 offset beyond 2**64",
        lambda: pe_core.t5_bucket_matrix(1, 2, offset=2**64 + 1),
        ValueError,
        "[-2**64, 2**64]",
    ),
    (
        "T5 positions mixing -1 and 2**63",
        lambda: pe_core.t5_relative_bucket([-1, 2**63]),
        ValueError,
        "9223372036854775808",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_integers_outside_the_domain_are_refused(
    name: str, call: Callable[[], Any], error: type, words: str
) -> None:
    with pytest.raises(error, match=None) as info:
        call()
    assert words in str(info.value), str(info.value)


def test_position_ids_at_the_top_of_int64_are_exact() -> None:
    ids = position_ids.from_input_ids([[8, 9, 7]], padding_idx=1, past_length=2**63 - 6)
    assert ids.tolist() == [[2**63 - 4, 2**63 - 3, 2**63 - 2]]


@pytest.mark.parametrize("offset", [2**63 - 2, 2**64 - 3, -(2**63)])
def test_torch_layers_take_offsets_across_2_63(offset: int) -> None:
    torch = pytest.importorskip("torch")
    layers = pytest.importorskip("pe_core.layers.torch")
    exact = [offset, offset + 1, offset + 2]
    encoding = layers.SinusoidalEncoding(D, spec=SPEC)
    _close(encoding(torch.zeros(3, D), offset=offset), exact)
    rope = layers.RotaryEmbedding(D, layout="interleaved")
    q = torch.zeros(1, 1, 3, D, dtype=torch.float64)
    q[..., 0] = 1.0
    rotated = rope(q, q, offset=offset)[0][0, 0].numpy()
    np.testing.assert_allclose(rotated[:, :2], _exact_table(exact)[:, [1, 0]], atol=1e-12)


def test_torch_tensor_offsets_that_wrap_give_nan_rows() -> None:
    torch = pytest.importorskip("torch")
    layers = pytest.importorskip("pe_core.layers.torch")
    encoding = layers.SinusoidalEncoding(D, spec=SPEC)
    out = encoding(torch.zeros(3, D), offset=torch.tensor(2**63 - 2)).numpy()
    _close(out[:2], [2**63 - 2, 2**63 - 1])
    assert np.isnan(out[2]).all()  # 2**63 wrapped to -2**63: not the position asked for


def test_flax_offsets_exact_eagerly_and_nan_where_a_traced_one_wraps() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    flax_layers = pytest.importorskip("pe_core.layers.flax")
    layer = flax_layers.SinusoidalEncoding(D, spec=SPEC)
    x = jnp.zeros((3, D))
    for offset in (2**31 - 2, 2**63 - 2, 2**64 - 3):
        _close(layer(x, offset=offset), [offset, offset + 1, offset + 2])
    # jax.jit turns an int argument into int32 without x64 (int64 with it)
    top = 2**63 - 2 if jax.config.jax_enable_x64 else 2**31 - 2
    out = np.asarray(jax.jit(lambda x, o: layer(x, offset=o))(x, top))
    _close(out[:2], [top, top + 1])
    assert np.isnan(out[2]).all()
    rope = flax_layers.RotaryEmbedding(D, layout="interleaved")
    q = jnp.zeros((1, 1, 3, D)).at[..., 0].set(1.0)
    rotated = np.asarray(jax.jit(lambda q, o: rope(q, q, offset=o)[0])(q, top))[0, 0]
    np.testing.assert_allclose(rotated[:2, :2], _exact_table([top, top + 1])[:, [1, 0]], atol=1e-6)
    assert np.isnan(rotated[2]).all()


# --------------------------------------------------------------------------- T5 buckets


CONFIGS = [(32, 128, True), (32, 128, False), (8, 20, True), (6, 10**6, False)]
DTYPES = ["int32", "int64", "uint64", "uint32", "int8"]


def _extremes(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    return [v for v in (lo, lo + 1, -128, -1, 0, 1, 127, hi - 1, hi) if lo <= v <= hi]


@st.composite
def _relative_positions(draw: Any) -> tuple[str, list[int]]:
    dtype = draw(st.sampled_from(DTYPES))
    info = np.iinfo(dtype)
    values = st.one_of(
        st.sampled_from(_extremes(dtype)),
        st.integers(int(info.min), int(info.max)),
        st.integers(max(int(info.min), -300), min(int(info.max), 300)),
    )
    return dtype, draw(st.lists(values, min_size=1, max_size=12))


@given(
    case=_relative_positions(),
    config=st.sampled_from(CONFIGS),
    arithmetic=st.sampled_from(["float32", "exact"]),
)
def test_buckets_over_every_dtype_range_equal_the_python_int_restatement(
    case: tuple[str, list[int]], config: tuple[int, int, bool], arithmetic: str
) -> None:
    dtype, values = case
    num_buckets, max_distance, bidirectional = config
    got = pe_core.t5_relative_bucket(
        np.array(values, dtype=dtype),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
        arithmetic=arithmetic,
    )
    expected = [
        t5_bucket_reference(v, bidirectional, num_buckets, max_distance, arithmetic) for v in values
    ]
    assert got.tolist() == expected
    assert all(0 <= b < num_buckets for b in got.tolist())


def _backend_dtypes(xp: Any) -> list[str]:
    # JAX without x64 has int32/uint32 as its widest integers
    return ["int32", "uint32"] if not xp.supports("int64") else ["int32", "int64", "uint64"]


@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_at_the_extremes_on_every_backend(backend: str, bidirectional: bool) -> None:
    xp = get_namespace(backend)
    for dtype in _backend_dtypes(xp):
        values = _extremes(dtype)
        got = pe_core.t5_relative_bucket(
            xp.asarray(np.array(values, dtype=dtype)), bidirectional=bidirectional
        )
        expected = [t5_bucket_reference(v, bidirectional, 32, 128, "float32") for v in values]
        assert_equal(got, np.array(expected, dtype=xp.dtype_of(got)), backend=backend)


def _matrix_reference(q: int, k: int, offset: int, bidirectional: bool) -> list[list[int]]:
    return [
        [t5_bucket_reference(j - (offset + i), bidirectional, 32, 128, "float32") for j in range(k)]
        for i in range(q)
    ]


MATRIX_OFFSETS = [2**63 - 1, 2**63, -(2**63), 2**64 - 1, -(2**64), 2**31 - 1, -(2**31) - 1, 5]


@pytest.mark.parametrize("bidirectional", [True, False])
def test_bucket_matrix_offsets_beyond_the_signed_range(backend: str, bidirectional: bool) -> None:
    xp = get_namespace(backend)
    for offset in MATRIX_OFFSETS:
        got = pe_core.t5_bucket_matrix(
            3, 4, offset=offset, bidirectional=bidirectional, backend=backend
        )
        expected = np.array(_matrix_reference(3, 4, offset, bidirectional))
        assert_equal(got, expected.astype(xp.dtype_of(got)), backend=backend, err_msg=str(offset))
    # array offsets (per example) at the extremes of the widest integer dtypes
    for dtype in _backend_dtypes(xp):
        offsets = _extremes(dtype)[:2] + _extremes(dtype)[-2:]
        got = pe_core.t5_bucket_matrix(
            2,
            3,
            offset=xp.asarray(np.array(offsets, dtype=dtype)),
            bidirectional=bidirectional,
        )
        expected = np.array([_matrix_reference(2, 3, o, bidirectional) for o in offsets])
        assert_equal(got, expected.astype(xp.dtype_of(got)), backend=backend, err_msg=dtype)


def test_t5_bias_offsets_beyond_int64_index_the_last_buckets() -> None:
    table = np.arange(64.0).reshape(32, 2)
    for offset in (2**63 + 3, -(2**64)):
        buckets = np.array(_matrix_reference(2, 3, offset, True))
        got = pe_core.t5_relative_bias(2, 3, table, offset=offset)
        np.testing.assert_array_equal(got[0], np.moveaxis(table[buckets], -1, 0))


def test_a_threshold_at_the_distance_of_the_minimum_counts_for_it_alone() -> None:
    # |-2**31| = 2**31 reaches a threshold of 2**31 that -2**31 + 1 does not: the
    # kernel then compares without clamping the minimum (thresholds chosen by hand)
    rel = np.array([-(2**31), -(2**31) + 1, 2**31 - 1], dtype=np.int32)
    numpy = get_namespace("numpy")
    got = t5._kernel(numpy, rel, 16, 8, (2**30, 2**31), True)
    assert got.tolist() == [8 + 2, 8 + 1, 16 + 8 + 1]


def test_offsets_and_shifts_beyond_int64_are_exact(backend: str) -> None:
    big = SPEC.replace(offset=2**63 - 1)
    _close(pe_core.encode(range(3), D, spec=big, backend=backend), [2**63 - 1, 2**63, 2**63 + 1])
    shifted = pe_core.shift(pe_core.encode([0], D, spec=SPEC, backend=backend), 2**64 - 1, SPEC)
    _close(shifted, [2**64 - 1])


def test_device_positions_with_an_offset_beyond_2_64_are_exact() -> None:
    torch = pytest.importorskip("torch")
    with force_device_path():
        got = pe_core.encode(torch.arange(3), D, spec=SPEC.replace(offset=2**70))
    _close(got, [2**70, 2**70 + 1, 2**70 + 2])
