"""docs/precision.md, "Across backends", tested exactly as it is stated: ``encode`` of eager
host positions gives the same bits on every backend in float32 and float64, whatever the
positions (permutations, reversals, strides, per-row offsets, padding, fractional values,
an encoding offset), with one exception: on PyTorch a run of consecutive integers with at
least ``BUILDS_MIN_PAIRS`` sin/cos pairs may be multiplied out by PyTorch itself, within
``2**-22`` (float32) or ``2**-51`` (float64) of NumPy's table.

The sizes reach every host route: the few-positions lane, the small float64 pass, the
lookup of other integer positions (at least 64 rows and 16,384 pairs), the exact
per-element kernel and the run tables.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core._kernel.routes import BUILDS_MIN_PAIRS
from pe_core._kernel.tables import contiguous_start
from pe_core_backends import get_namespace
from tests.conftest import positions_on, to_numpy

#: The most a run's entry may differ from NumPy's on PyTorch (both within 2**-23).
RUN_GAP = {"float32": 2.0**-22, "float64": 2.0**-51}

#: Positions stay int32 (JAX without x64 holds them as they are).
LIMIT = 2**31 - 2**17

KINDS = ("permutation", "reversed", "strided", "row_offsets", "left_padded", "scattered", "run")


@st.composite
def position_sets(draw) -> np.ndarray:
    """Integer positions of one of :data:`KINDS`, 1 to 4096 of them."""
    kind = draw(st.sampled_from(KINDS))
    n = draw(st.sampled_from([1, 20, 64, 300, 1024, 2048]))
    start = draw(st.integers(-LIMIT, LIMIT))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    run = start + np.arange(n, dtype=np.int64)
    if kind == "permutation":
        values = rng.permutation(run)
    elif kind == "reversed":
        values = run[::-1]
    elif kind == "strided":
        step = draw(st.sampled_from([-3, -1, 2, 5, 16]))
        values = start + step * np.arange(n, dtype=np.int64)
    elif kind == "row_offsets":  # per-example offsets + arange: (rows, n)
        rows = draw(st.integers(1, 2))
        offsets = rng.integers(0, 2048, size=rows) + start
        values = offsets[:, None] + np.arange(n, dtype=np.int64)
    elif kind == "left_padded":
        pad = draw(st.integers(0, n))
        values = np.concatenate([np.zeros(pad, np.int64), run[: n - pad]])
    elif kind == "scattered":  # a narrow or a wide spread
        spread = draw(st.sampled_from([n, 64 * n, 2**30]))
        values = start + rng.integers(0, spread, size=n)
    else:
        values = run
    return np.clip(values, -LIMIT, LIMIT).astype(np.int32)


def _torch_may_build(backend: str, values: np.ndarray, d: int) -> bool:
    """The stated exception: a run on PyTorch with at least BUILDS_MIN_PAIRS pairs."""
    run = contiguous_start(values) is not None
    return backend == "torch" and run and values.size * (d // 2) >= BUILDS_MIN_PAIRS


def _check(backend: str, values: np.ndarray, d: int, spec=None) -> None:
    xp = get_namespace(backend)
    for dtype in ("float32", "float64"):
        if not xp.supports(dtype):
            continue
        want = pe_core.encode(values, d, dtype=dtype, spec=spec)
        for got in (
            pe_core.encode(positions_on(backend, values), d, dtype=dtype, spec=spec),
            pe_core.encode(values, d, dtype=dtype, spec=spec, backend=backend),
        ):
            got = to_numpy(got)
            if _torch_may_build(backend, values, d):
                np.testing.assert_allclose(got, want, rtol=0, atol=RUN_GAP[dtype])
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{backend} {dtype}")


@given(values=position_sets(), d=st.sampled_from([2, 16, 64, 130]))
def test_integer_positions_give_the_same_bits_on_every_backend(backend, values, d):
    _check(backend, values, d)


@given(
    values=position_sets(),
    d=st.sampled_from([16, 64]),
    offset=st.one_of(st.integers(-(2**40), 2**40), st.floats(-1e6, 1e6).map(lambda v: round(v, 3))),
    layout=st.sampled_from(["interleaved", "split"]),
)
def test_an_encoding_offset_keeps_the_bits(backend, values, d, offset, layout):
    _check(backend, values, d, pe_core.Spec(offset=offset, layout=layout))


@given(values=position_sets(), shift=st.sampled_from([0.0, 0.5, 0.25]))
def test_float_positions_give_the_same_bits_on_every_backend(backend, values, shift):
    """Integral floats (the lookup takes them) and fractional ones (the exact kernel)."""
    floats = (values.astype(np.float64) / 64 + shift).astype(np.float32)
    _check(backend, floats, 64)


def test_the_reported_permutation_is_bit_identical(backend):
    """A permutation, a reversal and a strided set of 4096 positions at d = 64: PyTorch
    built their tables with its own complex product (53,210 of 262,144 values off by up
    to 6e-8) before they took NumPy's lookup on every backend."""
    rng = np.random.default_rng(0)
    for values in (rng.permutation(4096), np.arange(4096)[::-1], np.arange(0, 8192, 2)):
        _check(backend, values.astype(np.int32), 64)
