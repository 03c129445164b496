"""The engine of :mod:`pe_core.resample`: PyTorch's interpolation weights, built on the
host, applied as matrix products on any backend.

``torch.nn.functional.interpolate(x, size, mode, align_corners=False, antialias)`` in
``"bilinear"`` and ``"bicubic"`` mode is separable: each output axis is a weighted sum
along one input axis, with weights that depend only on the two sizes. This module
writes those weights as a dense ``(out, in)`` matrix in float64, exactly as PyTorch's
CPU kernels define them (``aten/src/ATen/native/UpSample.h`` and
``cpu/UpSampleKernel.cpp``):

* the scale is ``in / out`` (the ``size=`` semantics: no ``scale_factor``);
* without antialiasing, output ``i`` reads the source coordinate
  ``(i + 0.5) * scale - 0.5``. Linear weights clamp it at ``0`` first, take
  ``i0 = min(floor(x), in - 1)``, ``l = clip(x - i0, 0, 1)`` and weigh ``i0`` by
  ``1 - l`` and ``min(i0 + 1, in - 1)`` by ``l``. Cubic weights use Keys' kernel
  with ``A = -0.75`` on the four taps ``i0 - 1 .. i0 + 2``, each index clamped into
  ``[0, in - 1]`` (the border row repeated);
* with antialiasing (``_upsample_*_aa``, Pillow's filter), output ``i`` is centred on
  ``c = scale * (i + 0.5)``; the filter (triangle for linear, Keys with ``A = -0.5``
  for cubic) is stretched by ``scale`` when downsampling (support
  ``interp_size / 2 * max(scale, 1)``), evaluated on the inputs
  ``xmin = max(int(c - support + 0.5), 0) .. min(int(c + support + 0.5), in) - 1`` at
  ``(j - c + 0.5) / max(scale, 1)`` and normalised to sum to one.

The matrices are cached per ``(in, out, mode, antialias)`` on the host, and placed on
the table's device once through :mod:`pe_core.device_tables`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core._kernel.compiled import compiled
from pe_core._kernel.inputs import working_dtype
from pe_core_backends import Namespace

#: Modes and their tap counts (PyTorch's ``interp_size``).
INTERP_SIZE = {"bilinear": 2, "bicubic": 4}


def _cubic1(x: float, a: float) -> float:
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0


def _cubic2(x: float, a: float) -> float:
    return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a


def _aa_filter(x: float, mode: str) -> float:
    x = abs(x)
    if mode == "bilinear":
        return 1.0 - x if x < 1.0 else 0.0
    if x < 1.0:
        return _cubic1(x, -0.5)
    if x < 2.0:
        return _cubic2(x, -0.5)
    return 0.0


@functools.lru_cache(maxsize=512)
def _weights(in_size: int, out_size: int, mode: str, antialias: bool) -> np.ndarray:
    w = np.zeros((out_size, in_size), dtype=np.float64)
    scale = in_size / out_size
    if antialias:
        support = INTERP_SIZE[mode] * 0.5 * (scale if scale >= 1.0 else 1.0)
        invscale = 1.0 / scale if scale >= 1.0 else 1.0
        for i in range(out_size):
            center = scale * (i + 0.5)
            xmin = max(int(center - support + 0.5), 0)
            xmax = min(int(center + support + 0.5), in_size)
            taps = [_aa_filter((j - center + 0.5) * invscale, mode) for j in range(xmin, xmax)]
            total = math.fsum(taps)
            for j, tap in zip(range(xmin, xmax), taps, strict=True):
                w[i, j] = tap / total if total != 0.0 else tap
        return w
    for i in range(out_size):
        real = scale * (i + 0.5) - 0.5
        if mode == "bilinear":
            real = max(real, 0.0)
        i0 = min(math.floor(real), in_size - 1)
        lam = min(max(real - i0, 0.0), 1.0)
        if mode == "bilinear":
            w[i, i0] += 1.0 - lam
            w[i, min(i0 + 1, in_size - 1)] += lam
            continue
        a = -0.75
        x2 = 1.0 - lam
        coeffs = (_cubic2(lam + 1.0, a), _cubic1(lam, a), _cubic1(x2, a), _cubic2(x2 + 1.0, a))
        for k, c in enumerate(coeffs):
            w[i, min(max(i0 - 1 + k, 0), in_size - 1)] += c
    return w


def weights(in_size: int, out_size: int, mode: str, antialias: bool) -> np.ndarray:
    """The float64 ``(out_size, in_size)`` matrix of PyTorch's 1-D interpolation weights
    (a read-only array from a cache).

    >>> weights(2, 4, "bilinear", False).tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    >>> (7 * weights(4, 2, "bilinear", True)).round(12).tolist()  # triangle widened by 2
    [[3.0, 3.0, 1.0, 0.0], [0.0, 1.0, 3.0, 3.0]]
    """
    out = _weights(in_size, out_size, mode, antialias)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=512)
def _host_matrix(in_size: int, out_size: int, mode: str, antialias: bool, dtype: str) -> np.ndarray:
    # writable (torch.from_numpy warns on read-only arrays); never handed out, only read
    return _weights(in_size, out_size, mode, antialias).astype(dtype)


@functools.lru_cache(maxsize=512)
def _rows(in_size: int, out_size: int, mode: str, antialias: bool) -> tuple[tuple[float, ...], ...]:
    """The weights as plain Python data, for tracing compilers to embed as a constant."""
    return tuple(tuple(row) for row in _weights(in_size, out_size, mode, antialias).tolist())


def _rows_constant(
    in_size: int, out_size: int, mode: str, antialias: bool
) -> tuple[tuple[float, ...], ...]:
    # a plain function (not the cache wrapper) so torch.compile can embed its result
    return _rows(in_size, out_size, mode, antialias)


def placed_weights(
    xp: Namespace, in_size: int, out_size: int, mode: str, antialias: bool, like: Any, dtype: str
) -> Any:
    """The weight matrix as ``xp``'s array of ``dtype`` on ``like``'s device: from the
    device cache for concrete arrays, a constant of the trace while tracing (built by
    :meth:`~pe_core_backends.Namespace.host_constant`, which ``torch.compile`` runs once
    instead of tracing into it)."""
    if xp.is_tracing() or xp.is_traced(like):
        rows = xp.host_constant(_rows_constant, in_size, out_size, mode, antialias)
        return xp.asarray(rows, dtype=xp.dtype(dtype), like=like)

    def build() -> np.ndarray:
        return _host_matrix(in_size, out_size, mode, antialias, dtype)

    key = ("resample weights", in_size, out_size, mode, antialias)
    return device_tables.cached(xp, key, like, dtype, build, private=True)


def run(
    xp: Namespace, kernel: Callable[..., Any], arrays: tuple[Any, ...], static: tuple[Any, ...]
) -> Any:
    """``kernel(xp, *arrays, *static)``; on backends that compile every eager operation
    on its own (JAX), as one compiled program per ``static`` configuration."""
    if xp.compile_eager_kernels and not xp.is_tracing() and not any(map(xp.is_traced, arrays)):
        return compiled(xp.name, kernel, *static)(*arrays)
    return kernel(xp, *arrays, *static)


def resize_grid(
    xp: Namespace, grid: Any, old: tuple[int, int], new: tuple[int, int], mode: str, antialias: bool
) -> Any:
    """``grid`` of shape ``(N, H, W, C)`` resized to ``(N, h, w, C)`` in its own dtype
    (computed in the working dtype: float32 for float16/bfloat16)."""
    (h_in, w_in), (h_out, w_out) = old, new
    n, channels = xp.shape(grid)[0], xp.shape(grid)[-1]
    name = xp.dtype_of(grid)
    work = working_dtype(name)  # float64 in float64, the others in float32
    x = grid if name == work else xp.astype(grid, xp.dtype(work))
    # the cheaper order first: (H then W) costs h_out*W*(H + w_out), (W then H) H*w_out*(W + h_out)
    h_first = h_out * w_in * (h_in + w_out) <= h_in * w_out * (w_in + h_out)
    for axis in ("h", "w") if h_first else ("w", "h"):
        if axis == "h" and h_in != h_out:
            wh = placed_weights(xp, h_in, h_out, mode, antialias, x, work)
            rows = xp.shape(x)[2]
            x = xp.matmul(wh, xp.reshape(x, (n, h_in, rows * channels)))
            x = xp.reshape(x, (n, h_out, rows, channels))
            h_in = h_out
        elif axis == "w" and w_in != w_out:
            ww = placed_weights(xp, w_in, w_out, mode, antialias, x, work)
            x = xp.matmul(ww, x)  # (w_out, w_in) @ (N, H, w_in, C), broadcast over N, H
            w_in = w_out
    return x if name == work else xp.astype(x, xp.dtype(name))


# -- the kernels of pe_core.resample: kernel(xp, *arrays, *static sizes) -------------------
def pos_embed_kernel(
    xp: Namespace,
    table: Any,
    prefix: int,
    old: tuple[int, int],
    new: tuple[int, int],
    mode: str,
    antialias: bool,
) -> Any:
    """``(N, prefix + old_h * old_w, C)`` -> ``(N, prefix + new_h * new_w, C)``."""
    n, _, channels = xp.shape(table)
    grid = xp.reshape(table[:, prefix:] if prefix else table, (n, old[0], old[1], channels))
    out = resize_grid(xp, grid, old, new, mode, antialias)
    out = xp.reshape(out, (n, new[0] * new[1], channels))
    return xp.concat([table[:, :prefix], out], axis=1) if prefix else out


def naflex_kernel(
    xp: Namespace,
    table: Any,
    pairs: tuple[tuple[int, int], ...],
    length: int,
    mode: str,
    antialias: bool,
) -> Any:
    """``(H, W, C)`` -> ``(B, length, C)``: each image's grid, padded with its first row."""
    height, width, channels = xp.shape(table)
    grid = xp.expand_dims(table, 0)
    blocks = []
    for h, w in pairs:
        rows = resize_grid(xp, grid, (height, width), (h, w), mode, antialias)
        rows = xp.reshape(rows, (h * w, channels))
        if length > h * w:
            rows = xp.concat([rows, xp.broadcast_to(rows[:1], (length - h * w, channels))], axis=0)
        blocks.append(rows)
    return xp.stack(blocks, axis=0)


def flat_bias_kernel(
    xp: Namespace,
    table: Any,
    extra: int,
    old: tuple[int, int],
    new: tuple[int, int],
    mode: str,
    antialias: bool,
) -> Any:
    """``(old_h * old_w + extra, heads)`` -> ``(new_h * new_w + extra, heads)``."""
    rows, heads = xp.shape(table)
    grid = xp.reshape(table[: rows - extra] if extra else table, (1, old[0], old[1], heads))
    out = xp.reshape(resize_grid(xp, grid, old, new, mode, antialias), (new[0] * new[1], heads))
    return xp.concat([out, table[rows - extra :]], axis=0) if extra else out


def cube_bias_kernel(
    xp: Namespace, table: Any, new: tuple[int, int], mode: str, antialias: bool
) -> Any:
    """``(heads, H, W)`` -> ``(heads, h, w)``."""
    heads, src_h, src_w = xp.shape(table)
    out = resize_grid(xp, xp.expand_dims(table, -1), (src_h, src_w), new, mode, antialias)
    return xp.reshape(out, (heads, new[0], new[1]))


def rel_index(q_size: int, k_size: int) -> np.ndarray:
    """SAM's index of query ``i`` and key ``j`` into the ``2 max(q, k) - 1`` offsets."""
    q_coords = np.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k_coords = np.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    relative = (q_coords - k_coords) + (k_size - 1) * max(q_size / k_size, 1.0)
    return relative.astype(np.int64)  # truncation, as torch's .long()


def rel_pos_kernel(xp: Namespace, rel_pos: Any, q_size: int, k_size: int) -> Any:
    """SAM's ``get_rel_pos``: ``(L, C)`` -> ``(q_size, k_size, C)``."""
    length, channels = xp.shape(rel_pos)
    needed = 2 * max(q_size, k_size) - 1
    table = rel_pos
    if length != needed:
        grid = xp.reshape(rel_pos, (1, length, 1, channels))
        resized = resize_grid(xp, grid, (length, 1), (needed, 1), "bilinear", False)
        table = xp.reshape(resized, (needed, channels))
    wide = xp.dtype("int64" if xp.supports("int64") else "int32")
    index = xp.asarray(rel_index(q_size, k_size), dtype=wide, like=rel_pos)
    return xp.take(table, index, axis=0)


def decomposed_kernel(
    xp: Namespace,
    query: Any,
    rel_pos_h: Any,
    rel_pos_w: Any,
    q_size: tuple[int, int],
    k_size: tuple[int, int],
) -> Any:
    """The bias ``(B, q_h, q_w, k_h, k_w)`` of SAM's decomposed relative positions."""
    (qh, qw), (kh, kw) = q_size, k_size
    batch, _, dim = xp.shape(query)
    r_h = rel_pos_kernel(xp, rel_pos_h, qh, kh)  # (qh, kh, C)
    r_w = rel_pos_kernel(xp, rel_pos_w, qw, kw)  # (qw, kw, C)
    q = xp.expand_dims(xp.reshape(query, (batch, qh, qw, dim)), 3)  # (B, qh, qw, 1, C)
    # (B, qh, qw, 1, C) @ (qh, 1, C, kh): batch axes (B, qh, qw) against (qh, 1)
    rel_h = xp.matmul(q, xp.expand_dims(xp.matrix_transpose(r_h), 1))[:, :, :, 0]
    rel_w = xp.matmul(q, xp.matrix_transpose(r_w))[:, :, :, 0]  # against (qw,)
    return xp.expand_dims(rel_h, -1) + xp.expand_dims(rel_w, -2)


def add_decomposed_kernel(
    xp: Namespace,
    attn: Any,
    query: Any,
    rel_pos_h: Any,
    rel_pos_w: Any,
    q_size: tuple[int, int],
    k_size: tuple[int, int],
) -> Any:
    """``attn`` ``(B, q_h * q_w, k_h * k_w)`` plus the decomposed bias."""
    batch, rows, cols = xp.shape(attn)
    bias = decomposed_kernel(xp, query, rel_pos_h, rel_pos_w, q_size, k_size)
    out = xp.reshape(attn, (batch, q_size[0], q_size[1], k_size[0], k_size[1])) + bias
    return xp.reshape(out, (batch, rows, cols))
