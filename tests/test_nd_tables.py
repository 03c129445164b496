"""N-D sinusoidal tables: ``pe_core.grid``, ``Spec(axes=k)`` in ``encode``, the N-D presets.

The references below restate each codebase line by line in NumPy, from its public
source:

* MAE ``util/pos_embed.py`` (facebookresearch/mae, current version: float32 ``omega``)
  and DiT ``models.py`` (facebookresearch/DiT: float64 ``omega``),
  ``get_2d_sincos_pos_embed``;
* tensor2tensor ``tensor2tensor/layers/common_attention.py``, ``add_timing_signal_nd``;
* diffusers ``models/embeddings.py``, ``get_2d_sincos_pos_embed`` (installed: also
  compared with the function itself);
* positional-encodings ``torch_encodings.py``, ``PositionalEncoding2D`` and ``3D``
  (installed: also compared with the modules themselves).

The float32 comparisons use the codebases' own float32 angle error as the tolerance,
``4 * 2**-23 * max(1, |angle|)`` (see ``tests/preset_references.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, assert_equal, positions_on, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from preset_references import _cos, _exp, _f32_pow, _sin
from reference import schedule, table

import pe_core
from pe_core import Spec
from pe_core_backends import get_namespace

ATOL32 = 1e-6
ATOL64 = 1e-12
ND_PRESETS = sorted(name for name, spec in pe_core.PRESETS.items() if spec.axes > 1)


def f32_tolerance(angles: np.ndarray) -> np.ndarray:
    """A codebase's float32 error bound for angles ``angles`` (broadcast per feature)."""
    return 4 * 2.0**-23 * np.maximum(1.0, np.abs(angles))


# -- references, restated line by line ---------------------------------------------


def mae_get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False, omega_dtype=np.float32):
    """MAE ``util/pos_embed.py`` (``omega_dtype=np.float64``: DiT ``models.py``)::

        grid_h = np.arange(grid_size, dtype=np.float32)
        grid_w = np.arange(grid_size, dtype=np.float32)
        grid = np.meshgrid(grid_w, grid_h)  # here w goes first
        grid = np.stack(grid, axis=0)
        grid = grid.reshape([2, 1, grid_size, grid_size])
        pos_embed = get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
        if cls_token:
            pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)

    Run as written, this is MAE's (or DiT's) own arithmetic.
    """
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, grid_size, grid_size])
    pos_embed = _mae_from_grid(embed_dim, grid, omega_dtype)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed


def _mae_from_grid(embed_dim, grid, omega_dtype):
    assert embed_dim % 2 == 0
    # use half of dimensions to encode grid_h
    emb_h = _mae_1d(embed_dim // 2, grid[0], omega_dtype)  # (H*W, D/2)
    emb_w = _mae_1d(embed_dim // 2, grid[1], omega_dtype)  # (H*W, D/2)
    return np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)


def _mae_1d(embed_dim, pos, omega_dtype):
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=omega_dtype)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = np.einsum("m,d->md", pos, omega)  # (M, D/2), outer product
    emb_sin = np.sin(out)  # (M, D/2)
    emb_cos = np.cos(out)  # (M, D/2)
    return np.concatenate([emb_sin, emb_cos], axis=1)  # (M, D)


def diffusers_2d(embed_dim, grid_size, *, base_size=16, interpolation_scale=1.0, extra_tokens=0):
    """diffusers ``get_2d_sincos_pos_embed`` with ``cls_token=True`` when
    ``extra_tokens > 0``, in float64 throughout (diffusers forms the grid in float32)::

        grid_h = arange(grid_size[0]) / (grid_size[0] / base_size) / interpolation_scale
        grid_w = arange(grid_size[1]) / (grid_size[1] / base_size) / interpolation_scale
        grid = torch.meshgrid(grid_w, grid_h, indexing="xy")  # here w goes first
        grid = torch.stack(grid, dim=0).reshape([2, 1, grid_size[1], grid_size[0]])
        pos_embed = get_2d_sincos_pos_embed_from_grid(embed_dim, grid)  # MAE's, float64
        if cls_token and extra_tokens > 0:
            pos_embed = torch.concat([torch.zeros([extra_tokens, embed_dim]), pos_embed])
    """
    if isinstance(grid_size, int):
        grid_size = (grid_size, grid_size)
    grid_h = np.arange(grid_size[0], dtype=np.float64) / (grid_size[0] / base_size)
    grid_h = grid_h / interpolation_scale
    grid_w = np.arange(grid_size[1], dtype=np.float64) / (grid_size[1] / base_size)
    grid_w = grid_w / interpolation_scale
    grid = np.meshgrid(grid_w, grid_h, indexing="xy")  # here w goes first
    grid = np.stack(grid, axis=0).reshape([2, 1, grid_size[1], grid_size[0]])
    pos_embed = _mae_from_grid(embed_dim, grid, np.float64)
    if extra_tokens > 0:
        pos_embed = np.concatenate([np.zeros([extra_tokens, embed_dim]), pos_embed], axis=0)
    return pos_embed


def t2t_add_timing_signal_nd(shape, channels, *, float32=False, min_timescale=1.0, max=1.0e4):
    """tensor2tensor ``add_timing_signal_nd`` on ``x = zeros([1, *shape, channels])``::

        num_dims = len(x.get_shape().as_list()) - 2
        channels = common_layers.shape_list(x)[-1]
        num_timescales = channels // (num_dims * 2)
        log_timescale_increment = (
            math.log(float(max_timescale) / float(min_timescale)) /
            (tf.to_float(num_timescales) - 1))
        inv_timescales = min_timescale * tf.exp(
            tf.to_float(tf.range(num_timescales)) * -log_timescale_increment)
        for dim in range(num_dims):
          length = common_layers.shape_list(x)[dim + 1]
          position = tf.to_float(tf.range(length))
          scaled_time = tf.expand_dims(position, 1) * tf.expand_dims(inv_timescales, 0)
          signal = tf.concat([tf.sin(scaled_time), tf.cos(scaled_time)], axis=1)
          prepad = dim * 2 * num_timescales
          postpad = channels - (dim + 1) * 2 * num_timescales
          signal = tf.pad(signal, [[0, 0], [prepad, postpad]])
          for _ in range(1 + dim):
            signal = tf.expand_dims(signal, 0)
          for _ in range(num_dims - 1 - dim):
            signal = tf.expand_dims(signal, -2)
          x += signal

    Unlike ``get_timing_signal_1d`` there is no ``max(..., 1)`` guard: with one
    timescale per axis (``2 * num_dims <= channels < 4 * num_dims``) the increment is
    ``log(...) / 0 = inf`` and the signal NaN. Returns ``x[0]`` (float32 when
    ``float32``: TF's arithmetic, transcendental functions correctly rounded).
    """
    num_dims = len(shape)
    num_timescales = channels // (num_dims * 2)
    dtype = np.float32 if float32 else np.float64
    with np.errstate(divide="ignore", invalid="ignore"):
        log_inc = dtype(math.log(float(max) / float(min_timescale))) / (
            dtype(num_timescales) - dtype(1)
        )
        inv_timescales = dtype(min_timescale) * _exp(
            np.arange(num_timescales, dtype=dtype) * -log_inc, float32
        )
    x = np.zeros((1, *shape, channels), dtype=dtype)
    for dim in range(num_dims):
        length = shape[dim]
        position = np.arange(length, dtype=dtype)
        scaled_time = position[:, None] * inv_timescales[None, :]
        signal = np.concatenate([_sin(scaled_time, float32), _cos(scaled_time, float32)], 1)
        prepad = dim * 2 * num_timescales
        postpad = channels - (dim + 1) * 2 * num_timescales
        signal = np.pad(signal, [[0, 0], [prepad, postpad]])
        for _ in range(1 + dim):
            signal = np.expand_dims(signal, 0)
        for _ in range(num_dims - 1 - dim):
            signal = np.expand_dims(signal, -2)
        x = x + signal
    return x[0]


def positional_encodings_nd(shape, channels, *, float32=False):
    """positional-encodings ``PositionalEncoding2D`` / ``3D`` (torch_encodings.py)::

        self.org_channels = channels
        channels = int(np.ceil(channels / 4) * 2)        # 3-D: np.ceil(channels / 6) * 2
        inv_freq = 1.0 / (10000 ** (torch.arange(0, channels, 2).float() / channels))
        ...
        pos_x = torch.arange(x, dtype=self.inv_freq.dtype)      # and pos_y (pos_z)
        sin_inp_x = torch.einsum("i,j->ij", pos_x, self.inv_freq)
        emb_x = get_emb(sin_inp_x).unsqueeze(1)                 # stack(sin, cos), flatten
        emb = torch.zeros((x, y, self.channels * 2))
        emb[:, :, : self.channels] = emb_x
        emb[:, :, self.channels : 2 * self.channels] = emb_y
        return emb[None, :, :, :orig_ch]

    ``float32``: float32 exponent, pow, reciprocal, products and sin/cos.
    """
    num_dims = len(shape)
    ch = int(np.ceil(channels / (2 * num_dims)) * 2)
    if float32:
        inv_freq = np.float32(1.0) / _f32_pow(
            10000, np.arange(0, ch, 2).astype(np.float32) / np.float32(ch)
        )
    else:
        inv_freq = 1.0 / (10000.0 ** (np.arange(0, ch, 2).astype(np.float64) / ch))
    emb = np.zeros((*shape, ch * num_dims), dtype=np.float32 if float32 else np.float64)
    for dim, length in enumerate(shape):
        pos = np.arange(length).astype(inv_freq.dtype)
        sin_inp = np.einsum("i,j->ij", pos, inv_freq)
        one = np.stack((_sin(sin_inp, float32), _cos(sin_inp, float32)), -1)
        one = one.reshape(length, ch)
        index = [None] * num_dims
        index[dim] = slice(None)
        emb[..., dim * ch : (dim + 1) * ch] = one[tuple(index)]
    return emb[..., :channels]


def nd_reference(coords: np.ndarray, d: int, spec: Spec) -> np.ndarray:
    """float64 N-D table from the rule of ``pe_core.nd`` stated directly."""
    k = spec.axes
    shares = spec.axis_shares or (1,) * k
    n, rest = divmod(d, 2 * sum(shares))
    if rest and spec.odd_d == "truncate":
        n += 1
    if spec.axis_order == "reversed":
        order = list(range(k - 1, -1, -1))
    elif spec.axis_order == "forward":
        order = list(range(k))
    else:
        order = list(spec.axis_order)
    coords = np.asarray(coords, dtype=np.float64) + spec.offset
    firsts, seconds = [], []
    for a in order:
        pairs = n * shares[a]
        if spec.frequencies is not None:
            omegas = np.array(spec.frequencies)
        else:
            omegas = schedule(2 * pairs, base=spec.base, denominator=spec.denominator)
        block = table(coords[..., a], omegas, spec.layout, 2 * pairs)
        if spec.order == "cos_sin":  # swap the two slots of every pair
            if spec.layout == "interleaved":
                block = block.reshape(*block.shape[:-1], pairs, 2)[..., ::-1].reshape(block.shape)
            else:
                block = np.concatenate([block[..., pairs:], block[..., :pairs]], axis=-1)
        firsts.append(block[..., :pairs] if spec.axis_layout == "split" else block)
        seconds.append(block[..., pairs:] if spec.axis_layout == "split" else block[..., :0])
    out = np.concatenate(firsts + seconds, axis=-1)
    if out.shape[-1] < d:
        out = np.concatenate([out, np.zeros((*out.shape[:-1], d - out.shape[-1]))], axis=-1)
    return out[..., :d]


# -- strategies -----------------------------------------------------------------------


@st.composite
def nd_cases(draw: st.DrawFn, fractional: bool = True) -> tuple[Spec, int, np.ndarray]:
    """An N-D spec (or preset), a d it accepts, and coordinates of shape (m, axes)."""
    preset = draw(st.sampled_from([None, *ND_PRESETS]))
    if preset is not None:
        spec = pe_core.PRESETS[preset]
    else:
        spec = Spec(
            base=draw(st.sampled_from([100.0, 10000.0, 5e5])),
            denominator=draw(st.sampled_from(["d", "half_minus_one"])),
            layout=draw(st.sampled_from(["interleaved", "split"])),
            offset=draw(st.integers(-3, 3)),
            odd_d=draw(st.sampled_from(["raise", "zero_pad", "truncate"])),
            axes=draw(st.integers(2, 4)),
            axis_order=draw(st.sampled_from(["forward", "reversed"])),
        )
    k = spec.axes
    n = draw(st.integers(1, 8))
    unit = 2 * sum(spec.axis_shares or (1,) * k)
    d = unit * n
    if spec.odd_d != "raise":
        d += draw(st.integers(0, unit - 1))
    m = draw(st.integers(1, 6))
    if fractional and draw(st.booleans()):
        # multiples of 1/8 below 2**12: exact in float32, so every backend sees them
        values = st.integers(-(2**15), 2**15).map(lambda v: v / 8)
        dtype = np.float64
    else:
        values = st.integers(-10_000, 10_000)
        dtype = np.int64
    flat = draw(st.lists(values, min_size=m * k, max_size=m * k))
    return spec, d, np.array(flat, dtype=dtype).reshape(m, k)


# -- grid -----------------------------------------------------------------------------


def test_grid_is_row_major_integer_coordinates() -> None:
    g = pe_core.grid((3, 4))
    rows, cols = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    assert_equal(g, np.stack([rows, cols], axis=-1), backend="numpy", dtype="int64")
    flat = g.reshape(-1, 2)
    assert_equal(flat[:5], [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)])
    video = pe_core.grid((2, 3, 4))
    assert video.shape == (2, 3, 4, 3)
    assert_equal(video[1, 2, 3], [1, 2, 3])
    assert_equal(pe_core.grid(5), [[0], [1], [2], [3], [4]])
    assert pe_core.grid((0, 3)).shape == (0, 3, 2)


def test_grid_on_every_backend(backend: str) -> None:
    xp = get_namespace(backend)
    g = pe_core.grid((3, 5), backend=backend)
    expected_int = "int64" if xp.supports("int64") else "int32"
    assert xp.dtype_of(g) == expected_int
    assert_close(g, pe_core.grid((3, 5)), atol=0, backend=backend)
    assert_close(
        pe_core.grid((2, 2), backend=backend, dtype="float32"),
        pe_core.grid((2, 2)),
        atol=0,
        backend=backend,
        dtype="float32",
    )


@pytest.mark.parametrize(
    ("shape", "error"),
    [((2, -1), ValueError), ((), ValueError), ((2.0, 3), TypeError), ("ab", TypeError)],
)
def test_grid_rejects_bad_shapes(shape: object, error: type) -> None:
    with pytest.raises(error, match="shape must"):
        pe_core.grid(shape)  # type: ignore[arg-type]


# -- Spec(axes=...) -------------------------------------------------------------------


def test_spec_axes_validation() -> None:
    assert Spec().axes == 1 and Spec(axes=3).axes == 3
    assert type(Spec(axes=np.int64(2)).axes) is int and Spec(axes=np.int64(2)) == Spec(axes=2)
    assert hash(Spec(axes=2)) != hash(Spec()) or Spec(axes=2) != Spec()
    with pytest.raises(ValueError, match=r"Spec\.axes must be an integer >= 1.*Received: 0"):
        Spec(axes=0)
    with pytest.raises(TypeError, match=r"Spec\.axes must be an integer >= 1.*Received: True"):
        Spec(axes=True)
    with pytest.raises(TypeError, match=r"Spec\.axes"):
        Spec(axes=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Unknown Spec\.axis_order .*one of: forward, reversed"):
        Spec(axes=2, axis_order="backward")  # type: ignore[arg-type]
    # one axis: positional-encodings' rule, ceil(d / 2) pairs cut to d (test_spec_order.py)
    assert pe_core.encode([0, 1], 3, spec=Spec(odd_d="truncate")).shape == (2, 3)


def test_nd_d_rules_and_errors() -> None:
    coords = pe_core.grid((2, 2))
    with pytest.raises(ValueError, match=r"multiple of 2 \* axes = 4.*Received: d=6"):
        pe_core.encode(coords, 6, spec="mae_2d")
    with pytest.raises(ValueError, match="too small for axes=2"):
        pe_core.encode(coords, 3, spec="tensor2tensor_2d")
    with pytest.raises(ValueError, match=r"last axis of size 2.*Received shape: \(5,\)"):
        pe_core.encode(range(5), 8, spec="mae_2d")
    with pytest.raises(ValueError, match="last axis of size 3"):
        pe_core.encode(coords, 12, spec="positional_encodings_3d")
    with pytest.raises(ValueError, match=r"Spec\.frequencies has 3 entries"):
        pe_core.encode(coords, 8, spec=Spec(axes=2, frequencies=(1.0, 0.5, 0.25)))
    with pytest.raises(TypeError, match="booleans"):
        pe_core.encode([[True, False]], 8, spec="mae_2d")
    assert pe_core.nd.axis_pairs(10, "positional_encodings_2d") == 3
    assert pe_core.nd.axis_pairs(10, "tensor2tensor_2d") == 2
    assert pe_core.nd.axis_pairs(8, "vaswani") == 4
    assert_close(pe_core.frequencies(16, "mae_2d"), schedule(8), atol=0, rtol=1e-7)


def test_one_axis_spec_is_unchanged() -> None:
    """axes=1 keeps the 1-D path: (n,) positions give (n, d)."""
    assert_equal(pe_core.encode(range(5), 8, spec=Spec(axes=1)), pe_core.encode(range(5), 8))


# -- properties on every backend ------------------------------------------------------


@given(case=nd_cases())
def test_encode_matches_float64_reference(backend: str, case) -> None:
    spec, d, coords = case
    out = pe_core.encode(positions_on(backend, coords), d, spec=spec)
    assert_close(out, nd_reference(coords, d, spec), atol=ATOL32, backend=backend, dtype="float32")
    assert float(np.max(np.abs(to_numpy(out)))) <= 1.0
    numpy64 = pe_core.encode(coords, d, spec=spec, dtype="float64")
    assert_close(numpy64, nd_reference(coords, d, spec), atol=ATOL64, backend="numpy")
    assert_close(out, numpy64, atol=ATOL32, backend=backend)


@given(case=nd_cases(fractional=False), shift=st.integers(-500, 500), axis=st.integers(0, 3))
def test_per_axis_shift_is_a_fixed_rotation(backend: str, case, shift: int, axis: int) -> None:
    """PE(p + t e_a) = M_(t e_a) PE(p) for an axis a; M is orthogonal."""
    spec, d, coords = case
    if spec.odd_d == "truncate" and d % (2 * spec.axes):
        with pytest.raises(ValueError, match="no matrix maps"):
            pe_core.relative_matrix([0] * spec.axes, d, spec, backend=backend)
        return
    xp = get_namespace(backend)
    dtype = "float64" if xp.supports("float64") else "float32"
    atol = ATOL64 * 1e2 if dtype == "float64" else 1e-5
    pe = to_numpy(pe_core.encode(positions_on(backend, coords), d, spec=spec, dtype=dtype))
    t = np.zeros(spec.axes, dtype=np.int64)
    t[axis % spec.axes] = shift
    m = to_numpy(pe_core.relative_matrix(t, d, spec, backend=backend, dtype=dtype))
    expected = nd_reference(coords + t, d, spec)
    assert_close(pe @ m.T, expected, atol=atol, rtol=1e-7)
    assert_close(m @ m.T, np.eye(d), atol=atol, rtol=1e-7)
    shifted = pe_core.shift(pe_core.encode(coords, d, spec=spec, dtype="float64"), t, spec)
    assert_close(shifted, expected, atol=1e-10, rtol=1e-7)


@given(case=nd_cases(fractional=False), shifts=st.lists(st.integers(-99, 99), min_size=4))
def test_relative_matrix_is_the_block_diagonal_of_the_axes(case, shifts: list[int]) -> None:
    spec, d, _ = case
    if spec.odd_d == "truncate" and d % (2 * spec.axes):
        return
    t = np.array(shifts[: spec.axes])
    widths = pe_core.nd.axis_widths(d, spec)
    one_axis = spec.replace(
        axes=1, axis_order="forward", odd_d="raise", axis_shares=None, axis_layout="blocks"
    )
    if isinstance(spec.axis_order, tuple):
        order = list(spec.axis_order)
    else:
        order = list(range(spec.axes)[::-1] if spec.axis_order == "reversed" else range(spec.axes))
    expected = np.eye(d)
    start = 0
    for axis in order:
        rows = slice(start, start + widths[axis])
        expected[rows, rows] = pe_core.relative_matrix(
            t[axis], widths[axis], one_axis, dtype="float64"
        )
        start += widths[axis]
    if spec.axis_layout == "split":  # features: every block's first half, then the second halves
        halves, starts = [], np.cumsum([0] + [widths[a] for a in order])
        for part in (0, 1):
            for b, axis in enumerate(order):
                n = widths[axis] // 2
                halves.extend(range(starts[b] + part * n, starts[b] + (part + 1) * n))
        perm = np.array(halves + list(range(start, d)))
        expected = expected[np.ix_(perm, perm)]
    got = pe_core.relative_matrix(t, d, spec, dtype="float64")
    assert_close(got, expected, atol=0, rtol=1e-7, dtype="float64")
    stack = pe_core.relative_matrix(np.stack([t, -t]), d, spec, dtype="float64")
    assert_close(stack[1], expected.T, atol=1e-15, rtol=1e-7)


def test_out_and_like(backend: str) -> None:
    coords = pe_core.grid((3, 4))
    buffer = np.empty((3, 4, 16), np.float32)
    assert pe_core.encode(coords, 16, spec="mae_2d", out=buffer) is buffer
    expected = nd_reference(coords, 16, pe_core.PRESETS["mae_2d"])
    assert_close(buffer, expected, atol=0, rtol=1e-6, dtype="float32")
    xp = get_namespace(backend)
    like = xp.asarray(np.zeros(1, np.float32))
    table = pe_core.encode(coords.tolist(), 16, spec="mae_2d", like=like)  # Python values
    assert_close(table, buffer, atol=ATOL32, backend=backend, dtype="float32")


def test_device_path_without_host_reads(backend: str) -> None:
    """Coordinates on an accelerator (forced here) take the device kernel, with no read."""
    if backend == "numpy":
        pytest.skip("NumPy arrays are host values")
    from pe_core.host_reads import forbid_host_reads
    from pe_core_backends import force_device_path

    coords = np.array([[3, 4], [1000, -7], [2**20, 5]])
    on_device = positions_on(backend, coords)
    for spec, d in (("tensor2tensor_2d", 19), ("positional_encodings_2d", 10), ("mae_2d", 16)):
        with force_device_path(), forbid_host_reads():
            out = pe_core.encode(on_device, d, spec=spec)
        assert_close(
            out, nd_reference(coords, d, pe_core.PRESETS[spec]), atol=ATOL32, backend=backend
        )


# -- traced equals eager --------------------------------------------------------------


def test_jax_jit_equals_eager() -> None:
    jax = pytest.importorskip("jax")
    coords = pe_core.grid((5, 6), backend="jax")
    for spec, d in (("mae_2d", 32), ("positional_encodings_2d", 10), ("tensor2tensor_2d", 19)):
        traced = jax.jit(lambda c, s=spec, d=d: pe_core.encode(c, d, spec=s))(coords)
        eager = pe_core.encode(coords, d, spec=spec)
        assert_close(traced, to_numpy(eager), atol=ATOL32, backend="jax", dtype="float32")
    video = pe_core.grid((2, 3, 4), backend="jax") + 1000
    traced = jax.jit(lambda c: pe_core.encode(c, 24, spec="tensor2tensor_3d"))(video)
    assert_close(traced, pe_core.encode(to_numpy(video), 24, spec="tensor2tensor_3d"), atol=1e-6)


def test_tf_function_equals_eager() -> None:
    tf = pytest.importorskip("tensorflow")
    video = pe_core.grid((2, 3, 4), backend="tensorflow") + 1000
    fn = tf.function(
        lambda c: pe_core.encode(c, 12, spec="positional_encodings_3d"), jit_compile=True
    )
    eager = pe_core.encode(video, 12, spec="positional_encodings_3d")
    assert_close(fn(video), to_numpy(eager), atol=ATOL32, backend="tensorflow", dtype="float32")


@pytest.mark.slow
def test_torch_compile_equals_eager() -> None:
    """One small case: dynamo traces the N-D path in one graph."""
    torch = pytest.importorskip("torch")
    coords = pe_core.grid((3, 4), backend="torch")
    fn = torch.compile(
        lambda c: pe_core.encode(c, 16, spec="mae_2d"), fullgraph=True, backend="eager"
    )
    assert_close(fn(coords), to_numpy(pe_core.encode(coords, 16, spec="mae_2d")), atol=ATOL32)


# -- parity with the codebases --------------------------------------------------------


def test_every_nd_preset_has_a_reference() -> None:
    covered = {
        "mae_2d",
        "tensor2tensor_2d",
        "tensor2tensor_3d",
        "positional_encodings_2d",
        "positional_encodings_3d",
        "cogvideox",  # tests/test_spec_order.py: diffusers get_3d_sincos_pos_embed
        "timm_sincos_2d",  # tests/test_spec_order.py: timm build_sincos2d_pos_embed
    }
    assert set(ND_PRESETS) == covered
    for name in ND_PRESETS:
        assert pe_core.PRESET_SOURCES[name]


@pytest.mark.parametrize(("d", "size"), [(32, 7), (64, 14), (768, 14), (1024, 16)])
def test_mae_and_dit(d: int, size: int) -> None:
    """MAE (float32 omega: its own float32 numbers) and DiT (float64 omega)."""
    mae = mae_get_2d_sincos_pos_embed(d, size, cls_token=True)
    assert_equal(mae, mae.astype(np.float32), dtype="float64")  # float32 numbers, float64 array
    dit = mae_get_2d_sincos_pos_embed(d, size, cls_token=True, omega_dtype=np.float64)
    assert dit.dtype == np.float64
    ours32 = pe_core.grid_encoding(d, (size, size), extra_tokens=1)
    ours64 = pe_core.grid_encoding(d, (size, size), extra_tokens=1, dtype="float64")
    assert_close(ours64, dit, atol=ATOL64, rtol=1e-7, dtype="float64")
    assert_close(ours32, dit, atol=ATOL32, rtol=1e-7, dtype="float32")
    angles = np.tile(size * np.ones(d), (1 + size * size, 1))  # |angle| <= size - 1
    assert_close(ours32, mae, atol=f32_tolerance(angles))
    grid_rows = pe_core.encode(pe_core.grid((size, size)), d, spec="mae_2d").reshape(-1, d)
    assert_equal(grid_rows, ours32[1:])


@pytest.mark.parametrize(
    ("d", "shape", "base_size", "scale", "extra"),
    [
        (64, (16, 16), 16, 1.0, 0),
        (64, (8, 12), 16, 1.0, 1),
        (96, (12, 8), 8, 2.0, 4),
        (1152, (32, 32), 32, 1.0, 0),
        (32, (5, 3), 7, 0.5, 2),
    ],
)
def test_diffusers_get_2d_sincos_pos_embed(d, shape, base_size, scale, extra) -> None:
    reference = diffusers_2d(
        d, shape, base_size=base_size, interpolation_scale=scale, extra_tokens=extra
    )
    ours64 = pe_core.grid_encoding(
        d, shape, base_size=base_size, interpolation_scale=scale, extra_tokens=extra,
        dtype="float64",
    )  # fmt: skip
    assert_close(ours64, reference, atol=ATOL64, rtol=1e-7, dtype="float64")
    ours32 = pe_core.grid_encoding(
        d, shape, base_size=base_size, interpolation_scale=scale, extra_tokens=extra
    )
    assert_close(ours32, reference, atol=ATOL32, rtol=1e-7, dtype="float32")

    embeddings = pytest.importorskip("diffusers.models.embeddings")
    torch = pytest.importorskip("torch")
    real = embeddings.get_2d_sincos_pos_embed(
        d,
        shape,
        cls_token=extra > 0,
        extra_tokens=extra,
        interpolation_scale=scale,
        base_size=base_size,
    )
    real = real.to(torch.float64).numpy()
    # diffusers rounds the coordinates to float32 first: |angle error| <= 2**-24 * |x|
    max_coord = base_size / scale
    assert_close(ours64, real, atol=2.0**-23 * max_coord + ATOL64, rtol=1e-7)
    # given diffusers' own float32 coordinates, pe_core gives diffusers' numbers
    coords32 = torch.stack(
        torch.meshgrid(
            *[torch.arange(n, dtype=torch.float32) / (n / base_size) / scale for n in shape],
            indexing="ij",
        ),
        -1,
    ).numpy()
    same = pe_core.encode(coords32.reshape(-1, 2), d, spec="mae_2d", dtype="float64")
    assert_close(same, real[extra:], atol=ATOL64, rtol=1e-7)


@pytest.mark.parametrize(
    ("shape", "channels"),
    [((5, 7), 16), ((5, 7), 18), ((4, 6), 19), ((9, 3), 64), ((3, 4, 5), 24), ((3, 4, 5), 29)],
)
def test_tensor2tensor_add_timing_signal_nd(shape, channels) -> None:
    spec = "tensor2tensor_2d" if len(shape) == 2 else "tensor2tensor_3d"
    reference = t2t_add_timing_signal_nd(shape, channels)
    ours64 = pe_core.encode(pe_core.grid(shape), channels, spec=spec, dtype="float64")
    assert_close(ours64, reference, atol=ATOL64, rtol=1e-7, dtype="float64")
    ours32 = pe_core.encode(pe_core.grid(shape), channels, spec=spec)
    reference32 = t2t_add_timing_signal_nd(shape, channels, float32=True)
    angle = max(shape)  # positions < max(shape), frequencies <= 1
    bound = 4 * 2.0**-23 * angle
    assert_close(ours32, reference32, atol=bound, dtype="float32")


def test_tensor2tensor_nd_with_one_timescale_is_nan_there_finite_here() -> None:
    """t2t divides by num_timescales - 1 = 0 (no guard in the N-D version)."""
    reference = t2t_add_timing_signal_nd((3, 3), 6)
    assert_equal(reference[..., :4], np.full((3, 3, 4), np.nan))
    assert_equal(reference[..., 4:], np.zeros((3, 3, 2)))
    ours = pe_core.encode(pe_core.grid((3, 3)), 6, spec="tensor2tensor_2d", dtype="float64")
    # one pair per axis at frequency 1 (min_timescale), as max(n - 1, 1) gives
    expected = np.stack(
        [np.sin(pe_core.grid((3, 3))[..., 0]), np.cos(pe_core.grid((3, 3))[..., 0])], -1
    )
    assert_close(ours[..., :2], expected, atol=ATOL64, rtol=1e-7)
    assert_equal(ours[..., 4:], np.zeros((3, 3, 2)))


@pytest.mark.parametrize(
    ("shape", "channels"),
    [((5, 7), 16), ((5, 7), 10), ((4, 6), 6), ((4, 6), 7), ((6, 5), 33), ((8, 8), 64)]
    + [((3, 4, 5), 24), ((3, 4, 5), 10), ((2, 3, 4), 7), ((2, 3, 4), 64)],
)
def test_positional_encodings_nd(shape, channels) -> None:
    spec = "positional_encodings_2d" if len(shape) == 2 else "positional_encodings_3d"
    reference = positional_encodings_nd(shape, channels)
    ours64 = pe_core.encode(pe_core.grid(shape), channels, spec=spec, dtype="float64")
    assert_close(ours64, reference, atol=ATOL64, rtol=1e-7, dtype="float64")
    ours32 = pe_core.encode(pe_core.grid(shape), channels, spec=spec)
    assert_close(ours32, reference, atol=ATOL32, rtol=1e-7, dtype="float32")
    bound = 4 * 2.0**-23 * max(shape)
    reference32 = positional_encodings_nd(shape, channels, float32=True)
    assert_close(ours32, reference32, atol=bound)

    encodings = pytest.importorskip("positional_encodings.torch_encodings")
    torch = pytest.importorskip("torch")
    module = (
        encodings.PositionalEncoding2D if len(shape) == 2 else encodings.PositionalEncoding3D
    )(channels)
    real = module(torch.zeros((1, *shape, channels)))[0].numpy()
    assert real.dtype == np.float32
    assert_close(ours32, real, atol=bound)
    assert_close(reference32, real, atol=bound)


def test_positional_encodings_tf_2d() -> None:
    encodings = pytest.importorskip("positional_encodings.tf_encodings")
    tf = pytest.importorskip("tensorflow")
    shape, channels = (5, 6), 10
    real = encodings.TFPositionalEncoding2D(channels)(tf.zeros((1, *shape, channels)))[0]
    ours = pe_core.encode(pe_core.grid(shape), channels, spec="positional_encodings_2d")
    assert_close(ours, real.numpy(), atol=4 * 2.0**-23 * max(shape))


# -- the figure -----------------------------------------------------------------------


def test_plot_grid_similarity_shows_cosines_of_the_grid() -> None:
    pytest.importorskip("matplotlib")
    from pe_core.plots import plot_grid_similarity

    fig = plot_grid_similarity((5, 6), 16, patches=[(1, 2), (4, 5)])
    pe = nd_reference(pe_core.grid((5, 6)), 16, pe_core.PRESETS["mae_2d"]).reshape(-1, 16)
    for ax, (row, col) in zip(fig.axes, [(1, 2), (4, 5)], strict=False):
        reference = pe[row * 6 + col]
        cosines = pe @ reference / (np.linalg.norm(pe, axis=1) * np.linalg.norm(reference))
        shown = ax.images[0].get_array()
        assert_close(shown, cosines.reshape(5, 6), atol=1e-12, rtol=1e-7)
    with pytest.raises(ValueError, match="axes == 2"):
        plot_grid_similarity(spec="tensor2tensor_3d")
    with pytest.raises(ValueError, match="patches must lie in the 3 x 3 grid"):
        plot_grid_similarity((3, 3), 8, patches=[(3, 0)])
