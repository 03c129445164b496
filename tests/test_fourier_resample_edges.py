"""The edges of pe_core.fourier, pe_core.resample and pe_core.rope_variants on every
backend: requests beyond the memory or the documented limits refused up front with the
size in the message, integer extremes exact or refused, non-finite table cells kept to
the outputs their weights touch (as ``F.interpolate``), host memory proportional to the
output."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import assert_close, to_numpy

from pe_core import fourier, resample, rope_variants
from pe_core._resample import weights
from pe_core_backends import get_namespace

MODES = [(mode, aa) for mode in ("bicubic", "bilinear") for aa in (False, True)]
HUGE = 2**24  # a grid side beyond resample's 2**20
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def on(backend: str, x: np.ndarray):
    return get_namespace(backend).asarray(x)


def table_on(backend: str, shape: tuple[int, ...]):
    return on(backend, np.ones(shape, np.float32))


# -- sizes refused before any work ------------------------------------------------------
RESAMPLE_CALLS = {  # name: (table shape, call)
    "resample_pos_embed": ((1, 17, 2), lambda t: resample.resample_pos_embed(t, (HUGE, HUGE))),
    "interpolate_pos_encoding": (
        (1, 17, 2),
        lambda t: resample.interpolate_pos_encoding(t, HUGE, HUGE, 1),
    ),
    "resize_naflex_pos_embed": (
        (4, 4, 2),
        lambda t: resample.resize_naflex_pos_embed(t, [(HUGE, 1)], HUGE),
    ),
    "resize_rel_pos_bias_table": (
        (9, 2),
        lambda t: resample.resize_rel_pos_bias_table(t, (HUGE // 2, 3)),
    ),
    "get_rel_pos": ((5, 2), lambda t: resample.get_rel_pos(HUGE, 1, t)),
}


@pytest.mark.parametrize("name", sorted(RESAMPLE_CALLS))
def test_resample_sides_beyond_the_limit_are_refused_by_size(backend: str, name: str) -> None:
    shape, call = RESAMPLE_CALLS[name]
    table = table_on(backend, shape)
    with pytest.raises(ValueError, match=r"2\*\*20 = 1048576; a side of (1677721[56]|33554431)"):
        call(table)


def test_decomposed_sizes_beyond_the_limit_are_refused(backend: str) -> None:
    """(add_decomposed_rel_pos takes its sizes from the attention array it is given.)"""
    q, r = table_on(backend, (1, 4, 2)), table_on(backend, (3, 2))
    for k_size in ((HUGE, 1), (1, HUGE)):
        with pytest.raises(ValueError, match="a side of 33554431"):
            resample.decomposed_rel_pos(q, r, r, (2, 2), k_size)


def test_resample_beyond_the_memory_is_refused_with_its_size(backend: str) -> None:
    """Sides within the limit, a result of 2**38 rows: refused before anything is built
    (a host table, or a framework's CPU table: host memory)."""
    table = table_on(backend, (1, 5, 4))
    with pytest.raises(ValueError, match=r"resample_pos_embed would need about .* TiB"):
        resample.resample_pos_embed(table, (2**19, 2**19))


def test_python_integers_of_any_size_are_refused_by_name() -> None:
    table = np.ones((1, 5, 2), np.float32)
    for size in (2**63, 2**70, np.int64(2**62), np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match="side of"):
            resample.resample_pos_embed(table, (1, size))
    with pytest.raises(ValueError, match="new_size"):
        resample.resample_pos_embed(table, (-(2**63), 2))


FOURIER_CALLS = {
    "box_fourier_embedding": lambda c: fourier.box_fourier_embedding(c, 2**33),
    "perceiver_fourier_features": lambda c: fourier.perceiver_fourier_features(
        c[..., :2], 2**33, (4, 4)
    ),
    "fourier_features": lambda c: fourier.fourier_features(c, np.ones((4, 2**16))),
}


@pytest.mark.parametrize("name", sorted(FOURIER_CALLS))
def test_fourier_requests_beyond_the_memory_are_refused_with_their_size(
    backend: str, name: str
) -> None:
    coords = np.zeros((2**18, 4), np.float32)
    for c in (coords, on(backend, coords)):  # host coordinates and the backend's
        with pytest.raises(ValueError, match=r"would need about [0-9.]+ [GT]iB"):
            FOURIER_CALLS[name](c)


def test_perceiver_positions_beyond_the_memory_are_refused(backend: str) -> None:
    with pytest.raises(ValueError, match="perceiver_positions would need"):
        fourier.perceiver_positions((2**20, 2**20), backend=backend)


def test_box_embedding_host_memory_is_proportional_to_the_output() -> None:
    """embed_dim=2**18 for one box: a 8 MiB float32 result; the peak is the output, the
    constants and a block of float64 temporaries, not tens of times the output."""
    fourier.box_fourier_embedding(np.zeros((1, 4)), 8)  # warm the imports
    tracemalloc.start()
    try:
        out = fourier.box_fourier_embedding(np.zeros((1, 4)), 2**18)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.nbytes == 2**23
    assert peak < 3 * out.nbytes, peak / out.nbytes


def test_perceiver_and_features_host_memory_is_proportional_to_the_output() -> None:
    pos = np.zeros((64, 2))
    tracemalloc.start()
    try:
        out = fourier.perceiver_fourier_features(pos, 2**14, (8, 8))
        peak_perceiver = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        feats = fourier.fourier_features(np.zeros(2**12), np.ones(2**10))
        peak_features = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert peak_perceiver < 3 * out.nbytes, peak_perceiver / out.nbytes
    assert peak_features < 3 * feats.nbytes, peak_features / feats.nbytes


# -- integer extremes -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_fourier_integers_beyond_2_53_are_refused_on_every_backend(
    backend: str, dtype: str
) -> None:
    """2**53 + 1 is refused (it used to pass as float(2**53) and give [0, 1], exact
    [0, -1]); 2**53 itself is exact."""
    xp = get_namespace(backend)
    for coords in (
        np.array([2**53 + 1], dtype),
        np.array([2**64 - 1 if dtype == "uint64" else -(2**63)], dtype),
    ):
        with pytest.raises(ValueError, match=f"Received the coordinate {int(coords[0])}"):
            fourier.fourier_features(coords, [0.5], backend=backend)
        if xp.supports("float32"):  # host integers with the backend's frequencies
            with pytest.raises(ValueError, match="at most 2\\*\\*53"):
                fourier.fourier_features(coords, on(backend, np.ones(1, np.float32)))
    got = fourier.fourier_features(
        np.array([2**53], dtype),
        [0.5],
        dtype="float64" if xp.supports("float64") else None,
        backend=backend,
    )
    assert_close(got, np.array([[0.0, 1.0]]), atol=1e-7)


def test_box_and_perceiver_integer_sizes_are_checked() -> None:
    for bad in (0, -1, 2**64, 1.5):
        with pytest.raises((ValueError, TypeError)):
            fourier.box_fourier_embedding(np.zeros((1, 4)), bad)
        with pytest.raises((ValueError, TypeError)):
            fourier.perceiver_fourier_features(np.zeros((1, 2)), bad, (4, 4))


def _llama4_reference(p: int, floor_scale: int, attn_scale: float = 0.1) -> float:
    import mpmath

    with mpmath.workdps(40):
        return float(mpmath.log(mpmath.mpf((p + 1) // floor_scale) + 1) * attn_scale + 1)


FLOOR_SCALES = (1, 3, 8192, 2**31 - 1, 2**31, 2**62 + 7, 2**63, 2**63 + 5, 2**64, 2**70)


def _backend_int_dtypes(backend: str) -> list[str]:
    xp = get_namespace(backend)
    names = [n for n in INT_DTYPES if xp.supports(n)] if hasattr(xp, "supports") else []
    if backend == "jax" and not xp.supports("int64"):
        names = [n for n in names if n not in ("int64", "uint64")]
    return names


def test_llama4_scales_are_exact_for_every_integer_dtype_and_extreme(backend: str) -> None:
    """Against an mpmath reference: every integer dtype the backend has, at 0, 1, the
    dtype's top and its neighbours, for floor_scale from 1 to 2**70 (the cases that gave
    NaN, 1.0 instead of 1.5549, crashes and OverflowError)."""
    pytest.importorskip("mpmath")
    xp = get_namespace(backend)
    wide = xp.supports("float64")
    dtype = "float64" if wide else "float32"
    atol = 4e-16 * 6 if wide else 4e-7 * 6
    for name in _backend_int_dtypes(backend):
        top = int(np.iinfo(name).max)
        values = sorted({0, 1, 2, top // 2, top - 1, top, min(8191, top), min(8192, top)})
        host = np.array(values, dtype=name)
        try:
            array = xp.asarray(host)
        except Exception:  # pragma: no cover - a dtype the framework cannot hold
            continue
        if xp.dtype_of(array) != name:
            continue
        for floor_scale in FLOOR_SCALES:
            want = np.array([_llama4_reference(v, floor_scale) for v in values])
            got = rope_variants.llama4_attention_scales(array, floor_scale=floor_scale, dtype=dtype)
            assert_close(got, want, atol=atol, err_msg=f"{name} floor_scale={floor_scale}")
            host_got = rope_variants.llama4_attention_scales(
                host, floor_scale=floor_scale, dtype="float64"
            )
            assert_close(host_got, want, atol=4e-16 * 6, err_msg=f"host {name} {floor_scale}")


def test_llama4_host_python_integers_to_uint64_top() -> None:
    got = rope_variants.llama4_attention_scales(
        [2**63 - 1, 2**63, 2**64 - 1], floor_scale=1, dtype="float64"
    )
    want = [_llama4_reference(p, 1) for p in (2**63 - 1, 2**63, 2**64 - 1)]
    assert_close(got, np.array(want), atol=4e-15)
    got = rope_variants.llama4_attention_scales(range(2**64 - 3, 2**64), floor_scale=2**64)
    assert_close(got, np.array([1.0, 1.0, np.float32(1 + 0.1 * np.log(2))]), atol=0.0)
    with pytest.raises(ValueError, match="min\\(positions\\) = -1"):
        rope_variants.llama4_attention_scales(np.array([-1, 2], np.int8))


def test_vjepa2_rope_at_int64_extremes_is_the_exact_rotation(backend: str) -> None:
    """head_dim 6 in 3 blocks of 2: one frequency (1 rad per position) per block, so
    block a turns by the position itself; against mpmath's cos/sin of the integer."""
    mpmath = pytest.importorskip("mpmath")
    xp = get_namespace(backend)
    top = 2**63 - 1 if xp.supports("int64") else 2**31 - 1
    positions = [top, -top, 2**53 + 1 if xp.supports("int64") else 2**24 + 1]
    pos = np.array([positions], dtype="int64" if xp.supports("int64") else "int32")
    x = np.full((1, 6), 1.0, np.float32)
    got = to_numpy(rope_variants.vjepa2_rope(on(backend, x), on(backend, pos)))
    want = []
    for t in positions:
        with mpmath.workdps(60):
            c, s = float(mpmath.cos(t)), float(mpmath.sin(t))
        want += [c - s, c + s]
    assert_close(got[0], np.array(want), atol=3e-6)


# -- non-finite cells -------------------------------------------------------------------
GRIDS = [((8, 8), (16, 16)), ((8, 8), (5, 5)), ((8, 8), (8, 16)), ((7, 9), (13, 4))]


def _touched(old, new, mode, aa, cell) -> np.ndarray:
    """The outputs whose nonzero 2-D weights (products of the 1-D ones) reach ``cell``."""
    wh = weights(old[0], new[0], mode, aa) if old[0] != new[0] else np.eye(old[0])
    ww = weights(old[1], new[1], mode, aa) if old[1] != new[1] else np.eye(old[1])
    return (wh[:, cell[0]] != 0)[:, None] & (ww[:, cell[1]] != 0)[None, :]


@pytest.mark.parametrize(("mode", "aa"), MODES)
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_non_finite_cell_reaches_only_the_outputs_its_weights_touch(
    backend: str, mode: str, aa: bool, bad: float
) -> None:
    """And as F.interpolate: its infinities where it has them, its finite values
    elsewhere; where its kernel multiplies a zero weight by the cell (NaN), pe_core has
    the signed infinity of the nonzero weights."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for old, new in GRIDS[:2] if get_namespace(backend).compile_eager_kernels else GRIDS:
        for cell in [(0, 0), (3, 4), (old[0] - 1, old[1] - 1)]:
            grid = rng.normal(size=(*old, 2))
            grid[cell] = bad
            table = grid.reshape(1, old[0] * old[1], 2).astype(np.float32)
            got = to_numpy(
                resample.resample_pos_embed(
                    on(backend, table),
                    new,
                    old_size=old,
                    num_prefix_tokens=0,
                    interpolation=mode,
                    antialias=aa,
                )
            ).reshape(*new, 2)
            ref = (
                F.interpolate(
                    torch.from_numpy(grid).permute(2, 0, 1)[None],
                    size=new,
                    mode=mode,
                    align_corners=False,
                    antialias=aa,
                )[0]
                .permute(1, 2, 0)
                .numpy()
            )
            touched = _touched(old, new, mode, aa, cell)[..., None] & np.ones(2, bool)
            where = f"{backend} {mode} aa={aa} {old}->{new} cell {cell} {bad}"
            assert np.array_equal(~np.isfinite(got), touched), where
            assert not (~np.isfinite(got) & np.isfinite(ref)).any(), where
            inf = np.isinf(ref)
            assert np.array_equal(got[inf], ref[inf]), where
            if np.isnan(bad):
                assert np.isnan(got[touched]).all(), where
            finite = np.isfinite(ref)
            scale = float(np.abs(ref[finite]).max())
            assert_close(got[finite], ref[finite], atol=2e-6 * scale, err_msg=where)
