"""The engine of :mod:`pe_core.resample`: PyTorch's interpolation weights, built on the
host, applied as gathered and weighed taps on any backend.

``torch.nn.functional.interpolate(x, size, mode, align_corners=False, antialias)`` in
``"bilinear"`` and ``"bicubic"`` mode is separable: each output axis is a weighted sum
along one input axis, with weights that depend only on the two sizes. This module
builds those weights in float64 (vectorised), exactly as PyTorch's CPU kernels define
them (``aten/src/ATen/native/UpSample.h`` and
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

Each output keeps only its taps with a nonzero weight (:func:`taps`: indices clamped at
a border merged into one), gathered from the input and weighed, so an infinite or NaN
cell reaches exactly the outputs whose weights touch it (a dense product would compute
``0 * inf`` everywhere). The taps are cached per ``(in, out, mode, antialias)`` on the
host, and placed on the table's device once through :mod:`pe_core.device_tables`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core._kernel.compiled import compiled
from pe_core._kernel.inputs import check_request_size, working_dtype
from pe_core.validation import is_integer, positive_int
from pe_core_backends import Namespace, backend_of, get_namespace

#: Two sizes: ``(h, w)`` of a grid, or ``(in, out)`` of a side.
Pair = tuple[int, int]

#: Modes and their tap counts (PyTorch's ``interp_size``).
INTERP_SIZE = {"bilinear": 2, "bicubic": 4}


#: The largest grid side (input or output) resampled: the tap tables of a side are
#: ``side x taps`` numbers, built on the host.
MAX_SIDE = 2**20

#: Tap tables of at most this many outputs are cached (larger ones are built per call).
_CACHED_OUTPUTS = 2**16


# -- the checks of pe_core.resample ---------------------------------------------------------
def array(x: Any, name: str, ndim: int | tuple[int, ...]) -> tuple[Namespace, tuple[int, ...]]:
    """The namespace and static shape of a floating array ``x`` of rank ``ndim``."""
    source = backend_of(x)
    if source is None:
        raise TypeError(
            f"{name} must be an array (NumPy, JAX, PyTorch or TensorFlow). "
            f"Received: {type(x).__name__}"
        )
    xp = get_namespace(source)
    ranks = (ndim,) if isinstance(ndim, int) else ndim
    shape = xp.shape(x)
    if len(shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(f"{name} must have {want} axes. Received: shape {tuple(shape)}")
    if any(not is_integer(n) for n in shape):
        raise ValueError(f"{name} must have a static shape. Received: shape {tuple(shape)}")
    dtype = xp.dtype_of(x)
    if xp.kind(dtype) != "float":
        raise TypeError(f"{name} must have a floating dtype. Received: dtype {dtype}")
    return xp, tuple(int(n) for n in shape)


def size(value: object, name: str) -> Pair:
    """An ``int`` (a square) or a pair of ints ``>= 1`` as ``(h, w)``."""
    if is_integer(value):
        n = positive_int(value, name)
        return n, n
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return positive_int(value[0], f"{name}[0]"), positive_int(value[1], f"{name}[1]")
    raise TypeError(f"{name} must be an integer or a pair (h, w) of integers. Received: {value!r}")


def check_request(
    xp: Namespace,
    table: Any,
    sides: Sequence[Pair],
    mode: str,
    antialias: bool,
    out_elements: int,
    what: str,
) -> None:
    """Refuse, before any work, a resize with a side beyond :data:`MAX_SIDE` or whose
    result and working memory cannot fit in the memory available (host memory: for a
    table on an accelerator only the host-side taps are counted, the device's own
    allocator answers for the rest)."""
    extra, taps_most = 0, 1
    for size_in, size_out in sides:
        for side in (size_in, size_out):
            if side > MAX_SIDE:
                raise ValueError(
                    f"{what} resamples grid sides up to 2**20 = {MAX_SIDE}; a side of "
                    f"{side} was asked for ({size_in} -> {size_out}). Resample in pieces "
                    "or with fewer cells per side."
                )
        if size_in != size_out:
            extra += tap_bytes(size_in, size_out, mode, antialias)
            taps_most = max(taps_most, tap_count_bound(size_in, size_out, mode, antialias))
    name = xp.dtype_of(table)
    extra += out_elements * (taps_most + 1) * (8 if name == "float64" else 4)  # gathered taps
    check_request_size(out_elements, name, what=what, extra_bytes=extra, like=table)


def square_side(n: int, name: str, what: str) -> int:
    """The side of the square grid of ``n`` rows (an error naming ``name`` if none)."""
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(
            f"{name} is needed: {what} ({n}) is not a square number of rows. Received: {name}=None"
        )
    return side


def pos_embed_grid(shape: tuple[int, ...], prefix: int, old_size: object) -> Pair:
    """The ``(old_h, old_w)`` grid of a ``(N, rows, C)`` table's rows after ``prefix``."""
    rows = shape[1]
    if rows < prefix:
        raise ValueError(
            f"table has {rows} rows, fewer than num_prefix_tokens={prefix}. Received: shape {shape}"
        )
    if old_size is None:
        side = square_side(rows - prefix, "old_size", "the table minus its prefix rows")
        return side, side
    old = size(old_size, "old_size")
    if old[0] * old[1] != rows - prefix:
        raise ValueError(
            f"old_size {old} holds {old[0] * old[1]} rows, the table "
            f"{rows - prefix} after its {prefix} prefix rows. Received: old_size={old_size!r}"
        )
    return old


def spatial_pairs(spatial_shapes: Any) -> list[Pair]:
    """Static ``(h, w)`` pairs from a sequence of pairs or an integer ``(B, 2)`` array of
    any framework (read on the host: the sizes fix the output's shape)."""
    source = backend_of(spatial_shapes)
    if source is not None and not get_namespace(source).numpy_arrays:
        xp = get_namespace(source)
        values = xp.concrete(spatial_shapes)
        if values is None:
            raise TypeError(
                f"spatial_shapes is a traced {source} value: the sizes fix the shape of the "
                "result, so they must be known when the call is traced (pass Python "
                "integers or a NumPy array inside compiled code)."
            )
        if values.dtype.kind not in "iu":
            raise TypeError(
                f"spatial_shapes must hold integers. Received a {xp.dtype_of(spatial_shapes)} "
                f"{source} array"
            )
        spatial_shapes = values
    try:
        pairs = [tuple(p) for p in spatial_shapes]
    except TypeError:
        raise TypeError(
            f"spatial_shapes must be a sequence of (h, w) pairs. Received: {spatial_shapes!r}"
        ) from None
    if not pairs:
        raise ValueError("spatial_shapes must hold at least one (h, w) pair. Received: []")
    return [size(list(p), f"spatial_shapes[{i}]") for i, p in enumerate(pairs)]


def resize_bias_table(
    xp: Namespace,
    table: Any,
    shape: tuple[int, ...],
    new: Pair,
    old_window_size: object,
    extra: int,
    mode: str,
    antialias: bool,
) -> Any:
    """``pe_core.resample.resize_rel_pos_bias_table`` once its arguments are checked: a
    ``(heads, H, W)`` or flat ``(rows, heads)`` table's offsets resized to ``new``."""
    if len(shape) == 3:
        if extra:
            raise ValueError(
                "num_extra_tokens must be 0 for a (heads, H, W) table. "
                f"Received: num_extra_tokens={extra}"
            )
        old = (shape[1], shape[2])
        if old_window_size is not None:
            oh, ow = size(old_window_size, "old_window_size")
            if (2 * oh - 1, 2 * ow - 1) != old:
                raise ValueError(
                    f"old_window_size {(oh, ow)} has {(2 * oh - 1, 2 * ow - 1)} offsets, "
                    f"the table {old}. Received: old_window_size={old_window_size!r}"
                )
        kernel: Callable[..., Any] = cube_bias_kernel
        static: tuple[Any, ...] = (new, mode, antialias)
        out_elements = shape[0] * new[0] * new[1]
    else:
        rows = shape[0]
        if rows < extra:
            raise ValueError(
                f"table has {rows} rows, fewer than num_extra_tokens={extra}. "
                f"Received: shape {shape}"
            )
        if old_window_size is None:
            side = square_side(rows - extra, "old_window_size", "the table minus its extra rows")
            old = (side, side)
        else:
            oh, ow = size(old_window_size, "old_window_size")
            old = (2 * oh - 1, 2 * ow - 1)
            if old[0] * old[1] != rows - extra:
                raise ValueError(
                    f"old_window_size {(oh, ow)} has {old[0] * old[1]} offsets, the table "
                    f"{rows - extra} rows before its {extra} extra rows. "
                    f"Received: old_window_size={old_window_size!r}"
                )
        kernel, static = flat_bias_kernel, (extra, old, new, mode, antialias)
        out_elements = (new[0] * new[1] + extra) * shape[1]
    if old == new:
        return table
    sides = ((old[0], new[0]), (old[1], new[1]))
    check_request(xp, table, sides, mode, antialias, out_elements, "resize_rel_pos_bias_table")
    return run(xp, kernel, (table,), static)


def check_rel_request(
    xp: Namespace, table: Any, axes: Sequence[tuple[int, int, int]], out_elements: int, what: str
) -> None:
    """:func:`check_request` for SAM's offsets: per axis ``(L, q, k)``, the table of
    ``L`` offsets resized (linearly) to ``2 max(q, k) - 1``, and the ``q x k`` index."""
    sides = [(length, 2 * max(q, k) - 1) for length, q, k in axes]
    index = sum(q * k for _, q, k in axes)
    check_request(xp, table, sides, "bilinear", False, out_elements + 3 * index, what)


def rel_axes(
    xp: Namespace, dim: int, tables: tuple[Any, Any], q: Pair, k: Pair
) -> list[tuple[int, int, int]]:
    """SAM's ``(rel_pos_h, rel_pos_w)`` checked against a query of ``dim`` channels on
    ``xp``: per axis ``(L, q, k)`` for :func:`check_rel_request`."""
    axes = []
    for name, table, q_side, k_side in zip(("rel_pos_h", "rel_pos_w"), tables, q, k, strict=True):
        other, shape = array(table, name, 2)
        if other.name != xp.name:
            raise TypeError(
                f"{name} must be a {xp.name} array like the query. Received: a {other.name} array"
            )
        if shape[1] != dim:
            raise ValueError(
                f"{name} has {shape[1]} channels, the query {dim}. Received: shape {shape}"
            )
        axes.append((shape[0], q_side, k_side))
    return axes


def key_path(path: object) -> tuple[Any, ...]:
    """``"a/b/c"`` or a sequence of keys as a non-empty tuple of keys."""
    if isinstance(path, str):
        keys: tuple[Any, ...] = tuple(path.split("/"))
    elif isinstance(path, (tuple, list)):
        keys = tuple(path)
    else:
        raise TypeError(f"path must be a string 'a/b/c' or a sequence of keys. Received: {path!r}")
    if not keys or any(k == "" for k in keys):
        raise ValueError(f"path must name at least one key, none empty. Received: {path!r}")
    return keys


def replace_in_tree(tree: Any, path: object, leaf: Callable[[Any], Any]) -> Any:
    """``tree`` with ``leaf(value)`` at ``path``: the mappings on the path rebuilt (each
    as its own type), the others shared."""
    keys = key_path(path)

    def rebuilt(level: Any, depth: int) -> Any:
        where = "/".join(str(k) for k in keys[:depth]) or "tree"
        if not isinstance(level, Mapping):
            raise TypeError(f"{where} must be a mapping. Received: {type(level).__name__}")
        key = keys[depth]
        if key not in level:
            raise KeyError(
                f"path {'/'.join(str(k) for k in keys)!r}: {key!r} is not in {where}; "
                f"its keys are {sorted(map(str, level))}"
            )
        new = leaf(level[key]) if depth + 1 == len(keys) else rebuilt(level[key], depth + 1)
        items = {k: (new if k == key else v) for k, v in level.items()}
        kind: Any = type(level)  # dict, FrozenDict, State...: built from a dict
        return items if kind is dict else kind(items)

    return rebuilt(tree, 0)


# -- PyTorch's taps -------------------------------------------------------------------------
def _cubic1(x: Any, a: float) -> Any:
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0


def _cubic2(x: Any, a: float) -> Any:
    return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a


def _aa_filter(x: np.ndarray, mode: str) -> np.ndarray:
    x = np.abs(x)
    if mode == "bilinear":
        return np.where(x < 1.0, 1.0 - x, 0.0)
    return np.where(x < 1.0, _cubic1(x, -0.5), np.where(x < 2.0, _cubic2(x, -0.5), 0.0))


def _torch_taps(in_size: int, out_size: int, mode: str, antialias: bool) -> tuple:
    """PyTorch's taps ``(index, weight)``, each ``(out_size, K)``, in its order (indices
    may repeat where PyTorch clamps them at a border); float64, vectorised."""
    i = np.arange(out_size, dtype=np.float64)
    scale = in_size / out_size
    if antialias:
        support = INTERP_SIZE[mode] * 0.5 * (scale if scale >= 1.0 else 1.0)
        invscale = 1.0 / scale if scale >= 1.0 else 1.0
        center = scale * (i + 0.5)
        xmin = np.maximum(np.trunc(center - support + 0.5), 0.0).astype(np.int64)
        xmax = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64)
        width = int((xmax - xmin).max())
        index = xmin[:, None] + np.arange(width)
        inside = index < xmax[:, None]
        taps = np.where(inside, _aa_filter((index - center[:, None] + 0.5) * invscale, mode), 0.0)
        total = np.zeros(out_size)
        for k in range(width):  # PyTorch's order: tap by tap
            total = total + taps[:, k]
        safe = np.where(total != 0.0, total, 1.0)
        return np.where(inside, index, in_size - 1), taps / safe[:, None]
    real = scale * (i + 0.5) - 0.5
    if mode == "bilinear":
        real = np.maximum(real, 0.0)
    i0 = np.minimum(np.floor(real), in_size - 1).astype(np.int64)
    lam = np.clip(real - i0, 0.0, 1.0)
    if mode == "bilinear":
        index = np.stack([i0, np.minimum(i0 + 1, in_size - 1)], axis=1)
        return index, np.stack([1.0 - lam, lam], axis=1)
    a, x2 = -0.75, 1.0 - lam
    weight = np.stack(
        [_cubic2(lam + 1.0, a), _cubic1(lam, a), _cubic1(x2, a), _cubic2(x2 + 1.0, a)]
    )
    index = np.clip(i0[None, :] + np.arange(-1, 3)[:, None], 0, in_size - 1)
    return index.T, weight.T


def _build_taps(in_size: int, out_size: int, mode: str, antialias: bool) -> tuple:
    """``(index, weight, padded)``: each output's taps with a nonzero weight, one per
    input index (repeated indices merged, summed in PyTorch's order), left-aligned in
    ``(out_size, T)`` arrays; shorter rows are padded with index ``in_size`` (a zero
    row appended to the input) and weight 0, and ``padded`` says whether any is."""
    index, weight = _torch_taps(in_size, out_size, mode, antialias)
    weight = weight.copy()
    for k in range(1, index.shape[1]):  # repeated indices are adjacent: merge forward
        same = index[:, k] == index[:, k - 1]
        weight[same, k] = weight[same, k - 1] + weight[same, k]
        weight[same, k - 1] = 0.0
    keep = weight != 0.0
    order = np.argsort(~keep, axis=1, kind="stable")
    count = int(keep.sum(axis=1).max())
    index = np.take_along_axis(index, order, axis=1)[:, :count]
    weight = np.take_along_axis(weight, order, axis=1)[:, :count]
    kept = np.take_along_axis(keep, order, axis=1)[:, :count]
    index = np.where(kept, index, in_size)
    for part in (index, weight):
        part.flags.writeable = False
    return index, weight, bool((~kept).any())


_cached_taps = functools.lru_cache(maxsize=512)(_build_taps)


def taps(in_size: int, out_size: int, mode: str, antialias: bool) -> tuple:
    """:func:`_build_taps`, cached for the sizes of position tables.

    >>> index, weight, padded = taps(2, 4, "bilinear", False)
    >>> index.tolist(), weight.tolist(), padded
    ([[0, 2], [0, 1], [0, 1], [1, 2]], [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [1.0, 0.0]], True)
    """
    if out_size <= _CACHED_OUTPUTS and in_size <= _CACHED_OUTPUTS:
        return _cached_taps(in_size, out_size, mode, antialias)
    return _build_taps(in_size, out_size, mode, antialias)


@functools.lru_cache(maxsize=512)
def weights(in_size: int, out_size: int, mode: str, antialias: bool) -> np.ndarray:
    """The float64 ``(out_size, in_size)`` matrix of PyTorch's 1-D interpolation weights
    (a read-only array from a cache; for reading, the resize itself uses :func:`taps`).

    >>> weights(2, 4, "bilinear", False).tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    >>> (7 * weights(4, 2, "bilinear", True)).round(12).tolist()  # triangle widened by 2
    [[3.0, 3.0, 1.0, 0.0], [0.0, 1.0, 3.0, 3.0]]
    """
    index, weight, _ = taps(in_size, out_size, mode, antialias)
    dense = np.zeros((out_size, in_size + 1), dtype=np.float64)
    np.put_along_axis(dense, index, weight, axis=1)
    out = dense[:, :in_size]
    out.flags.writeable = False
    return out


def tap_count_bound(in_size: int, out_size: int, mode: str, antialias: bool) -> int:
    """An upper bound on the taps per output (before building them): PyTorch's filter
    width, stretched by the shrink factor with antialiasing."""
    scale = max(in_size / out_size, 1.0) if antialias else 1.0
    return 2 * math.ceil(INTERP_SIZE[mode] * scale) + 2


def tap_bytes(in_size: int, out_size: int, mode: str, antialias: bool) -> int:
    """An upper bound on the host bytes of building :func:`taps` (before building them):
    a few float64 and int64 arrays of ``out_size x taps``."""
    return out_size * tap_count_bound(in_size, out_size, mode, antialias) * 8 * 6


def _rows_constant(in_size: int, out_size: int, mode: str, antialias: bool) -> tuple:
    """The taps as plain Python data, for tracing compilers to embed as a constant (a
    plain function, not a cache wrapper, so torch.compile can embed its result)."""
    index, weight, padded = taps(in_size, out_size, mode, antialias)
    return tuple(map(tuple, index.tolist())), tuple(map(tuple, weight.tolist())), padded


def placed_taps(
    xp: Namespace, in_size: int, out_size: int, mode: str, antialias: bool, like: Any, dtype: str
) -> tuple[Any, Any, bool]:
    """The taps as ``xp``'s arrays on ``like``'s device: ``(index (out * T,), weight
    (out, 1, T) of dtype, padded)``; from the device cache for concrete arrays, a
    constant of the trace while tracing (built by
    :meth:`~pe_core_backends.Namespace.host_constant`, which ``torch.compile`` runs once
    instead of tracing into it)."""
    wide = "int64" if xp.supports("int64") else "int32"
    if xp.is_tracing() or xp.is_traced(like):
        index, weight, padded = xp.host_constant(_rows_constant, in_size, out_size, mode, antialias)
        placed_index = xp.asarray(index, dtype=xp.dtype(wide), like=like)
        placed_weight = xp.asarray(weight, dtype=xp.dtype(dtype), like=like)
    else:
        index, weight, padded = taps(in_size, out_size, mode, antialias)
        key = ("resample taps", in_size, out_size, mode, antialias)
        placed_index = device_tables.cached(
            xp, (*key, "index"), like, wide, lambda: index, private=True
        )
        placed_weight = device_tables.cached(
            xp, (*key, "weight"), like, dtype, lambda: weight, private=True
        )
    n, t = xp.shape(placed_weight)
    return xp.reshape(placed_index, (n * t,)), xp.reshape(placed_weight, (n, 1, t)), padded


def run(
    xp: Namespace, kernel: Callable[..., Any], arrays: tuple[Any, ...], static: tuple[Any, ...]
) -> Any:
    """``kernel(xp, *arrays, *static)``; on backends that compile every eager operation
    on its own (JAX), as one compiled program per ``static`` configuration."""
    if xp.compile_eager_kernels and not xp.is_tracing() and not any(map(xp.is_traced, arrays)):
        return compiled(xp.name, kernel, *static)(*arrays)
    return kernel(xp, *arrays, *static)


def resize_grid(xp: Namespace, grid: Any, old: Pair, new: Pair, mode: str, antialias: bool) -> Any:
    """``grid`` of shape ``(N, H, W, C)`` resized to ``(N, h, w, C)`` in its own dtype
    (computed in the working dtype: float32 for float16/bfloat16).

    Each axis is one pass: the taps of every output gathered and weighed (a product of
    ``(1, T)`` weights with ``(T, ...)`` gathered rows). Only taps with a nonzero weight
    are read, so a non-finite cell reaches only the outputs whose weights touch it."""
    (h_in, w_in), (h_out, w_out) = old, new
    name = xp.dtype_of(grid)
    work = working_dtype(name)  # float64 in float64, the others in float32
    x = grid if name == work else xp.astype(grid, xp.dtype(work))
    # the cheaper order first: each pass reads taps x (its output) values
    th = _tap_count(h_in, h_out, mode, antialias)
    tw = _tap_count(w_in, w_out, mode, antialias)
    h_first = h_out * th * w_in + h_out * w_out * tw <= h_in * w_out * tw + h_out * th * w_out
    for axis in (1, 2) if h_first else (2, 1):
        size_in, size_out = (h_in, h_out) if axis == 1 else (w_in, w_out)
        if size_in == size_out:
            continue
        index, weight, padded = placed_taps(xp, size_in, size_out, mode, antialias, x, work)
        n, h, w, c = xp.shape(x)
        if padded:  # padded taps read a zero row (weight 0 times 0, never 0 times inf)
            shape = (n, 1, w, c) if axis == 1 else (n, h, 1, c)
            x = xp.concat([x, xp.zeros(shape, xp.dtype(work), like=x)], axis=axis)
        taps_per = xp.shape(weight)[2]
        if axis == 1:  # long rows: one product of (1, T) weights with (T, W * C) per output
            rows = xp.take(xp.reshape(x, (n, -1, w * c)), index, axis=1)  # (N, out * T, W * C)
            rows = xp.reshape(rows, (n, size_out, taps_per, w * c))
            x = xp.reshape(xp.matmul(weight, rows), (n, size_out, w, c))
            continue
        # short rows (C): tap by tap, each a scaled gather of (N * H, out, C)
        rows = xp.take(xp.reshape(x, (n * h, -1, c)), index, axis=1)  # (N * H, out * T, C)
        rows = xp.reshape(rows, (n * h, size_out, taps_per, c))
        out = weight[:, 0, 0:1] * rows[:, :, 0]  # (out, 1) against (N * H, out, C)
        for t in range(1, taps_per):
            out = out + weight[:, 0, t : t + 1] * rows[:, :, t]
        x = xp.reshape(out, (n, h, size_out, c))
    return x if name == work else xp.astype(x, xp.dtype(name))


def _tap_count(in_size: int, out_size: int, mode: str, antialias: bool) -> int:
    # plain arithmetic (compilers trace it), not the taps themselves
    return 0 if in_size == out_size else tap_count_bound(in_size, out_size, mode, antialias)


# -- the kernels of pe_core.resample: kernel(xp, *arrays, *static sizes) -------------------
def pos_embed_kernel(
    xp: Namespace, table: Any, prefix: int, old: Pair, new: Pair, mode: str, antialias: bool
) -> Any:
    """``(N, prefix + old_h * old_w, C)`` -> ``(N, prefix + new_h * new_w, C)``."""
    n, _, channels = xp.shape(table)
    grid = xp.reshape(table[:, prefix:] if prefix else table, (n, old[0], old[1], channels))
    out = resize_grid(xp, grid, old, new, mode, antialias)
    out = xp.reshape(out, (n, new[0] * new[1], channels))
    return xp.concat([table[:, :prefix], out], axis=1) if prefix else out


def naflex_kernel(
    xp: Namespace, table: Any, pairs: tuple[Pair, ...], length: int, mode: str, antialias: bool
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
    xp: Namespace, table: Any, extra: int, old: Pair, new: Pair, mode: str, antialias: bool
) -> Any:
    """``(old_h * old_w + extra, heads)`` -> ``(new_h * new_w + extra, heads)``."""
    rows, heads = xp.shape(table)
    grid = xp.reshape(table[: rows - extra] if extra else table, (1, old[0], old[1], heads))
    out = xp.reshape(resize_grid(xp, grid, old, new, mode, antialias), (new[0] * new[1], heads))
    return xp.concat([out, table[rows - extra :]], axis=0) if extra else out


def cube_bias_kernel(xp: Namespace, table: Any, new: Pair, mode: str, antialias: bool) -> Any:
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
    wide = xp.dtype("int64" if xp.supports("int64") else "int32")
    index = xp.asarray(rel_index(q_size, k_size), dtype=wide, like=rel_pos)
    if length != needed:
        grid = xp.reshape(rel_pos, (1, length, 1, channels))
        resized = resize_grid(xp, grid, (length, 1), (needed, 1), "bilinear", False)
        rel_pos = xp.reshape(resized, (needed, channels))
    return xp.take(rel_pos, index, axis=0)


def decomposed_kernel(
    xp: Namespace, query: Any, rel_pos_h: Any, rel_pos_w: Any, q_size: Pair, k_size: Pair
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
    xp: Namespace, attn: Any, query: Any, rel_pos_h: Any, rel_pos_w: Any, q_size: Pair, k_size: Pair
) -> Any:
    """``attn`` ``(B, q_h * q_w, k_h * k_w)`` plus the decomposed bias."""
    batch, rows, cols = xp.shape(attn)
    bias = decomposed_kernel(xp, query, rel_pos_h, rel_pos_w, q_size, k_size)
    out = xp.reshape(attn, (batch, q_size[0], q_size[1], k_size[0], k_size[1])) + bias
    return xp.reshape(out, (batch, rows, cols))
