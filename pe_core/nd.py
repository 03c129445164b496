"""N-D sinusoidal positions: patches of an image, frames and patches of a video, voxels.

A :class:`~pe_core.Spec` with ``axes = k > 1`` describes an encoding of coordinates
``x = (x_0, ..., x_{k-1})``, read from the last axis of the positions (for example
``pe_core.grid((h, w))``, whose last axis holds ``(row, column)``). It concatenates
``k`` one-dimensional encodings, one per coordinate, each computed by the exact 1-D
kernel of :func:`~pe_core.encode` with the spec's schedule, layout and offset::

    axis_order="forward":   PE(x) = [PE_1(x_0) | PE_1(x_1) | ... | PE_1(x_{k-1})]
    axis_order="reversed":  PE(x) = [PE_1(x_{k-1}) | ... | PE_1(x_1) | PE_1(x_0)]

How the ``d`` features split: every axis gets the same number ``n`` of sin/cos pairs
(``2n`` features), and ``PE_1`` is the 1-D encoding with ``2n`` features, with the
frequencies of ``pe_core.frequencies(d, spec)`` (those of a 1-D encoding of ``2n``
features, the same for every axis). When ``d`` is a multiple
of ``2k``, ``n = d / (2k)``. Otherwise ``Spec.odd_d`` decides, as it does for an odd
``d`` in 1-D:

* ``"raise"``: a ValueError (MAE and diffusers need ``d`` divisible by 4 in 2-D);
* ``"zero_pad"``: ``n = d // (2k)`` pairs per axis, then ``d - 2kn`` zero columns at
  the end (tensor2tensor ``add_timing_signal_nd``);
* ``"truncate"``: ``n = ceil(d / (2k))`` pairs per axis, of which the first ``d``
  features are kept, so the last block loses its slowest features (the
  positional-encodings package's ``PositionalEncoding2D`` and ``3D``).

Fractional coordinates are valid (an interpolated grid); :func:`grid_encoding` makes
the scaled grids of diffusers and PixArt (``base_size``, ``interpolation_scale``).

The relative property holds per axis: ``PE(x + t) = M_t PE(x)``, where ``M_t`` is
block-diagonal with the 1-D rotation ``M_{t_a}`` of each axis in that axis's block (and
the identity on zero-padding columns). :func:`~pe_core.relative_matrix` and
:func:`~pe_core.shift` accept N-D specs and shifts ``t`` of shape ``(..., k)``.

>>> import numpy as np, pe_core
>>> pe = pe_core.encode(pe_core.grid((2, 3)), 8, spec=pe_core.Spec(axes=2))
>>> pe.shape
(2, 3, 8)
>>> expected = np.concatenate([pe_core.encode(1, 4), pe_core.encode(2, 4)])  # row 1, column 2
>>> bool(np.allclose(pe[1, 2], expected, atol=1e-7))
True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from pe_core._kernel.inputs import check_request_size

# The N-D engines, also importable from here: check_nd_d, encode_nd, relative_matrix_nd
# and shift_nd are what encode, relative_matrix and shift call for axes > 1.
from pe_core._relative import relative_matrix_nd as relative_matrix_nd
from pe_core._relative import shift_nd as shift_nd
from pe_core._schedule import axis_pairs, axis_widths
from pe_core._schedule import check_nd_d as check_nd_d
from pe_core._sinusoidal import encode_1d
from pe_core._sinusoidal_nd import encode_nd
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import (
    BackendLike,
    DTypeLike,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    PresetLike,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import is_integer
from pe_core_backends import backend_of, canonical_backend, get_namespace

__all__ = ["axis_pairs", "axis_widths", "grid", "grid_encoding"]


# -- the feature split ----------------------------------------------------------------


# -- grids ----------------------------------------------------------------------------


def _check_shape(shape: object) -> tuple[int, ...]:
    if is_integer(shape):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
    sizes = []
    for n in shape:
        if not is_integer(n):
            raise TypeError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
        if n < 0:
            raise ValueError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
        sizes.append(int(n))
    if not sizes:
        raise ValueError("shape must have at least one axis. Received: ()")
    return tuple(sizes)


# fmt: off
@overload
def grid(shape: int | Sequence[int], *, backend: NumpyBackend | None = None,
    dtype: DTypeLike = None, like: None = None) -> NDArray: ...
@overload
def grid(shape: int | Sequence[int], *, backend: TorchBackend, dtype: DTypeLike = None,
    like: None = None) -> TorchTensor: ...
@overload
def grid(shape: int | Sequence[int], *, backend: JaxBackend, dtype: DTypeLike = None,
    like: None = None) -> JaxArray: ...
@overload
def grid(shape: int | Sequence[int], *, backend: TensorFlowBackend, dtype: DTypeLike = None,
    like: None = None) -> TFTensor: ...
@overload
def grid(shape: int | Sequence[int], *, backend: BackendLike | None = None, dtype: DTypeLike = None,
    like: Any = None) -> Any: ...
# fmt: on


def grid(
    shape: int | Sequence[int],
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
    like: Any = None,
) -> Any:
    """Integer coordinates of every cell of a grid, row-major.

    Parameters
    ----------
    shape : int or sequence of int
        Grid size per axis, axis 0 first: ``(h, w)`` for an image of ``h x w`` patches,
        ``(t, h, w)`` for a video.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        NumPy by default, or that of ``like``.
    dtype : str or dtype, optional
        ``int64`` by default (``int32`` on JAX without x64); any integer or float dtype
        the backend has that holds every coordinate exactly (a ValueError otherwise:
        bfloat16 holds the integers up to 256, float16 up to 2048).
    like : array, optional
        An array whose backend and device the grid should follow.

    Returns
    -------
    array
        Shape ``(*shape, len(shape))``: ``grid(shape)[i, j, ...] == (i, j, ...)``. Pass
        it to :func:`~pe_core.encode` with a spec of ``axes == len(shape)``.

    Examples
    --------
    >>> g = grid((2, 3))
    >>> g.shape, g.dtype
    ((2, 3, 2), dtype('int64'))
    >>> g[1, 2].tolist()
    [1, 2]
    >>> g.reshape(-1, 2).tolist()  # flattened row by row, as patch sequences are
    [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    """
    sizes = _check_shape(shape)
    if backend is None and like is not None:
        backend = backend_of(like)
    xp = get_namespace(canonical_backend(backend) if backend is not None else "numpy")
    default = "int64" if xp.supports("int64") else "int32"
    name = default if dtype is None else xp.dtype_name(dtype)
    target = xp.dtype(name)
    _check_grid_dtype(name, sizes)
    _check_coordinates(sizes, "grid")
    axes = np.meshgrid(*(np.arange(n, dtype=np.int64) for n in sizes), indexing="ij")
    coords = np.stack(axes, axis=-1)
    if name in ("int32", "int64", "float16", "float32", "float64"):
        return xp.asarray(coords.astype(name), like=like)
    return xp.astype(xp.asarray(coords.astype(np.float32), like=like), target)


# the largest integer up to which every integer is exact in each float dtype
_EXACT_INTEGERS = {"float16": 2**11, "bfloat16": 2**8, "float32": 2**24, "float64": 2**53}


def _check_grid_dtype(name: str, sizes: tuple[int, ...]) -> None:
    """Refuse a ``dtype`` that cannot hold every coordinate of the grid exactly (a
    float16/bfloat16 grid would otherwise be rounded, an int8 one wrap around)."""
    largest = max(sizes, default=0) - 1
    if name in _EXACT_INTEGERS:
        limit = _EXACT_INTEGERS[name]
        kind = f"every integer above {limit} is rounded"
    else:
        limit = int(np.iinfo(name).max)
        kind = f"its largest value is {limit}"
    if largest > limit:
        raise ValueError(
            f"grid coordinates up to {largest} are not exact in dtype {name} ({kind}). "
            f"Received shape: {sizes}. Use an integer dtype (the default) or float32, "
            "and keep low precision for the encoding (encode(..., dtype=...))."
        )


def _check_coordinates(sizes: tuple[int, ...], what: str) -> None:
    """Refuse, before any is built, more coordinates than memory holds (eight bytes
    each, with the per-axis meshes and the stacked copy)."""
    n = math.prod(sizes) * len(sizes)
    check_request_size(n, "int64", what=what, extra_bytes=16 * n)


def _check_scale(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and float(value) > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0. Received: {value!r}")
    return float(value)


def _axis_scales(value: object, n_axes: int) -> tuple[float, ...]:
    """``interpolation_scale`` as one finite scale > 0 per axis."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != n_axes:
            raise ValueError(
                f"interpolation_scale must be a number or one number per axis ({n_axes}). "
                f"Received: {value!r}"
            )
        return tuple(_check_scale("interpolation_scale", v) for v in value)
    return (_check_scale("interpolation_scale", value),) * n_axes


# fmt: off
@overload
def grid_encoding(d: int, shape: int | Sequence[int], *, spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None, interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0, backend: NumpyBackend | None = None, dtype: DTypeLike = None
) -> NDArray: ...
@overload
def grid_encoding(d: int, shape: int | Sequence[int], *, spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None, interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0, backend: TorchBackend, dtype: DTypeLike = None) -> TorchTensor: ...
@overload
def grid_encoding(d: int, shape: int | Sequence[int], *, spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None, interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0, backend: JaxBackend, dtype: DTypeLike = None) -> JaxArray: ...
@overload
def grid_encoding(d: int, shape: int | Sequence[int], *, spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None, interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0, backend: TensorFlowBackend, dtype: DTypeLike = None) -> TFTensor: ...
@overload
def grid_encoding(d: int, shape: int | Sequence[int], *, spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None, interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0, backend: BackendLike | None = None, dtype: DTypeLike = None) -> Any: ...
# fmt: on


def grid_encoding(
    d: int,
    shape: int | Sequence[int],
    *,
    spec: Spec | PresetLike | None = "mae_2d",
    base_size: float | None = None,
    interpolation_scale: float | Sequence[float] = 1.0,
    extra_tokens: int = 0,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
) -> Any:
    """The flattened table of a grid's encodings, as vision models store it.

    Row ``r`` encodes grid cell ``np.unravel_index(r, shape)`` (row-major), after
    ``extra_tokens`` rows of zeros (class or register tokens). With the default spec
    this is MAE's ``get_2d_sincos_pos_embed(d, size)`` (and DiT's) for ``shape =
    (size, size)``; with ``base_size`` it is diffusers' ``get_2d_sincos_pos_embed(d,
    shape, base_size=..., interpolation_scale=...)`` (PixArt, SD3), whose grid spans
    ``base_size / interpolation_scale`` units on every axis whatever its resolution.

    Parameters
    ----------
    d : int
        Number of features.
    shape : int or sequence of int
        Grid size per axis, axis 0 first (``(h, w)``).
    spec : Spec or str
        An N-D spec with ``axes == len(shape)``; ``"mae_2d"`` by default.
    base_size : float, optional
        Coordinate ``i`` on an axis of ``n`` cells becomes ``i / (n / base_size)``
        (diffusers' formula, evaluated in float64). ``None`` keeps integer coordinates.
    interpolation_scale : float or sequence of float
        Every coordinate is then divided by it; a sequence gives one scale per axis
        (diffusers' ``get_3d_sincos_pos_embed`` divides the frame by
        ``temporal_interpolation_scale`` and the row and column by
        ``spatial_interpolation_scale``: ``(temporal, spatial, spatial)``).
    extra_tokens : int
        Zero rows placed first (diffusers' ``extra_tokens`` when ``cls_token=True``).
    backend, dtype
        As for :func:`~pe_core.encode`.

    Returns
    -------
    array
        Shape ``(extra_tokens + prod(shape), d)``.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import Spec, encode
    >>> table = grid_encoding(16, (3, 4), extra_tokens=1)
    >>> table.shape
    (13, 16)
    >>> bool(np.all(table[0] == 0))
    True
    >>> # cell (row 1, column 2) is row 1 + 4*1 + 2; MAE encodes the column first
    >>> per_axis = Spec(layout="split")  # 8 features per axis: [sin | cos]
    >>> expected = np.concatenate([encode(2, 8, spec=per_axis), encode(1, 8, spec=per_axis)])
    >>> bool(np.allclose(table[1 + 4 * 1 + 2], expected, atol=1e-7))
    True
    """
    sizes = _check_shape(shape)
    resolved = resolve_spec(spec)
    if resolved.axes != len(sizes):
        raise ValueError(
            f"spec must have axes == len(shape) = {len(sizes)}. Received: axes={resolved.axes}"
        )
    base = None if base_size is None else _check_scale("base_size", base_size)
    scales = _axis_scales(interpolation_scale, len(sizes))
    if not is_integer(extra_tokens):
        raise TypeError(f"extra_tokens must be a non-negative int. Received: {extra_tokens!r}")
    if extra_tokens < 0:
        raise ValueError(f"extra_tokens must be a non-negative int. Received: {extra_tokens!r}")
    _check_coordinates(sizes, "grid_encoding")  # the engine checks the table itself
    axes = []  # the coordinates per axis: i / (n / base_size) / interpolation_scale
    for n, scale in zip(sizes, scales, strict=True):
        values: np.ndarray = np.arange(n, dtype=np.float64 if base is not None else np.int64)
        if base is not None:
            values = values / (n / base)
        if scale != 1.0:
            values = values / scale
        axes.append(values)
    coords = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(sizes))
    engine = encode_nd if resolved.axes > 1 else encode_1d
    table = engine(coords, d, resolved, backend, dtype)
    if not extra_tokens:
        return table
    xp = get_namespace(backend_of(table) or "numpy")
    zeros = xp.zeros((int(extra_tokens), xp.shape(table)[-1]), table.dtype, like=table)
    return xp.concat([zeros, table], axis=0)


# -- encode ---------------------------------------------------------------------------


# -- the relative property ------------------------------------------------------------
