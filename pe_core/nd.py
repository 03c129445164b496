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
from typing import Any

import numpy as np

from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core_backends import Namespace, backend_of, canonical_backend, get_namespace

__all__ = ["axis_pairs", "grid", "grid_encoding"]


# -- the feature split ----------------------------------------------------------------


#: (d, spec) -> _split's result; a plain dict, so that compilers tracing a call
#: (torch.compile) read it like any global instead of stepping into a cache wrapper.
_SPLITS: dict[tuple[int, Spec], tuple[int, int, Spec]] = {}


def _split(d: int, spec: Spec) -> tuple[int, int, Spec]:
    """``(pairs per axis, zero columns appended, the 1-D spec of one axis)``; a negative
    count of zero columns is the number of features truncated."""
    found = _SPLITS.get((d, spec))
    if found is None:
        if len(_SPLITS) >= 256:
            _SPLITS.clear()
        found = _SPLITS[(d, spec)] = _new_split(d, spec)
    return found


def _new_split(d: int, spec: Spec) -> tuple[int, int, Spec]:
    k = spec.axes
    n, rest = divmod(d, 2 * k)
    if rest and spec.odd_d == "raise":
        raise ValueError(
            f"d must be a multiple of 2 * axes = {2 * k} for a Spec with axes={k} and "
            f"odd_d='raise' (every axis gets the same number of sin/cos pairs). Received: "
            f"d={d}. Use a multiple of {2 * k}, or Spec(odd_d='zero_pad') to append zero "
            "columns, or Spec(odd_d='truncate') to round up and keep the first d features."
        )
    if rest and spec.odd_d == "truncate":
        n += 1
    if n == 0:
        raise ValueError(
            f"d={d} is too small for axes={k}: every axis needs at least one sin/cos pair "
            f"(d >= {2 * k})."
        )
    if spec.frequencies is not None and len(spec.frequencies) != n:
        raise ValueError(
            f"Spec.frequencies has {len(spec.frequencies)} entries but d={d} with axes={k} "
            f"gives every axis {n} sin/cos pairs (one frequency per pair, shared by the axes)."
        )
    axis_spec = spec.replace(axes=1, axis_order="forward", odd_d="raise")
    return n, d - 2 * k * n, axis_spec


def check_nd_d(d: object, spec: Spec) -> int:
    """Validate ``d`` for an N-D ``spec`` (``spec.axes > 1``) and return it as an int.

    >>> check_nd_d(8, Spec(axes=2))
    8
    >>> check_nd_d(6, Spec(axes=2))
    Traceback (most recent call last):
    ...
    ValueError: d must be a multiple of 2 * axes = 4 for a Spec with axes=2 and odd_d='raise' (every axis gets the same number of sin/cos pairs). Received: d=6. Use a multiple of 4, or Spec(odd_d='zero_pad') to append zero columns, or Spec(odd_d='truncate') to round up and keep the first d features.
    """
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):
        raise TypeError(f"d must be a positive integer (the number of features). Received: {d!r}")
    d = int(d)
    if d <= 0:
        raise ValueError(f"d must be a positive integer (the number of features). Received: d={d}")
    _split(d, spec)
    return d


def axis_pairs(d: int, spec: Spec | str | None = None) -> int:
    """The number of sin/cos pairs each axis gets from ``d`` features.

    Parameters
    ----------
    d : int
        Number of features of the N-D encoding.
    spec : Spec or str, optional
        A spec or preset name; with ``axes == 1`` this is ``d // 2``.

    Returns
    -------
    int
        ``n``: every axis is encoded with ``2 * n`` features and the frequencies of
        ``pe_core.frequencies(2 * n, spec)`` (see the module docstring for how an
        indivisible ``d`` is handled).

    Examples
    --------
    >>> axis_pairs(768, "mae_2d")
    192
    >>> axis_pairs(10, "positional_encodings_2d")  # ceil(10 / 4) pairs, truncated to 10
    3
    >>> axis_pairs(10, "tensor2tensor_2d")  # 10 // 4 pairs and two zero columns
    2
    """
    spec = resolve_spec(spec)
    if spec.axes == 1:
        from pe_core.frequency import check_d

        return check_d(d, spec) // 2
    return _split(check_nd_d(d, spec), spec)[0]


def _axis_of_block(spec: Spec) -> list[int]:
    """The coordinate each block of features encodes, in feature order."""
    axes = list(range(spec.axes))
    return axes[::-1] if spec.axis_order == "reversed" else axes


# -- grids ----------------------------------------------------------------------------


def _check_shape(shape: object) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
    sizes = []
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
        if n < 0:
            raise ValueError(f"shape must be a sequence of non-negative ints. Received: {shape!r}")
        sizes.append(int(n))
    if not sizes:
        raise ValueError("shape must have at least one axis. Received: ()")
    return tuple(sizes)


def grid(
    shape: int | Sequence[int],
    *,
    backend: str | None = None,
    dtype: Any = None,
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
        the backend has.
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
    if dtype is None:
        name = "int64" if xp.supports("int64") else "int32"
    else:
        name = xp.dtype_name(dtype)
    target = xp.dtype(name)
    axes = np.meshgrid(*(np.arange(n, dtype=np.int64) for n in sizes), indexing="ij")
    coords = np.stack(axes, axis=-1)
    if name in ("int32", "int64", "float16", "float32", "float64"):
        return xp.asarray(coords.astype(name), like=like)
    return xp.astype(xp.asarray(coords.astype(np.float32), like=like), target)


def _scaled_coordinates(
    sizes: tuple[int, ...], base_size: float | None, interpolation_scale: float
) -> np.ndarray:
    """The coordinates of :func:`grid_encoding`: per axis ``i / (n / base_size) / s``."""
    axes = []
    for n in sizes:
        values: np.ndarray = np.arange(n, dtype=np.float64 if base_size is not None else np.int64)
        if base_size is not None:
            values = values / (n / base_size)
        if interpolation_scale != 1.0:
            values = values / interpolation_scale
        axes.append(values)
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)


def _check_scale(name: str, value: object, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and float(value) > 0)
    ):
        raise ValueError(f"{name} must be a finite number > 0. Received: {value!r}")
    return float(value)


def grid_encoding(
    d: int,
    shape: int | Sequence[int],
    *,
    spec: Spec | str | None = "mae_2d",
    base_size: float | None = None,
    interpolation_scale: float = 1.0,
    extra_tokens: int = 0,
    backend: str | None = None,
    dtype: Any = None,
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
    interpolation_scale : float
        Every coordinate is then divided by it.
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
    base = _check_scale("base_size", base_size, allow_none=True)
    scale = _check_scale("interpolation_scale", interpolation_scale, allow_none=False)
    if isinstance(extra_tokens, bool) or not isinstance(extra_tokens, numbers.Integral):
        raise TypeError(f"extra_tokens must be a non-negative int. Received: {extra_tokens!r}")
    if extra_tokens < 0:
        raise ValueError(f"extra_tokens must be a non-negative int. Received: {extra_tokens!r}")
    assert scale is not None
    coords = _scaled_coordinates(sizes, base, scale).reshape(-1, len(sizes))
    from pe_core.encoding import encode

    table = encode(coords, d, spec=resolved, backend=backend, dtype=dtype)
    if not extra_tokens:
        return table
    xp = get_namespace(backend_of(table) or "numpy")
    zeros = xp.zeros((int(extra_tokens), xp.shape(table)[-1]), table.dtype, like=table)
    return xp.concat([zeros, table], axis=0)


# -- encode ---------------------------------------------------------------------------


def _coordinates(coords: Any, spec: Spec, what: str = "coordinates") -> tuple[Any, str | None]:
    """``coords`` as an array of its own backend (NumPy for Python values), checked to
    hold ``spec.axes`` coordinates on its last axis."""
    from pe_core.positions import as_positions

    source = backend_of(coords)
    if source is None:
        coords = as_positions(coords, get_namespace("numpy"), None, what=what)
    xp = get_namespace(source or "numpy")
    shape = xp.shape(coords)
    if not shape or shape[-1] != spec.axes:
        raise ValueError(
            f"{what} for a Spec with axes={spec.axes} must have a last axis of size "
            f"{spec.axes} (one coordinate per axis). Received shape: {tuple(shape)}"
        )
    return coords, source


def encode_nd(
    coords: Any,
    d: int,
    spec: Spec,
    backend: str | None = None,
    dtype: Any = None,
    out: Any = None,
    like: Any = None,
    check_values: bool = False,
) -> Any:
    """:func:`~pe_core.encode` for a spec with ``axes > 1`` (it calls this).

    One exact 1-D encoding per coordinate axis, concatenated in the spec's
    ``axis_order``; then the zero columns or the truncation of ``odd_d``.
    """
    from pe_core.encoding import encode

    d = check_nd_d(d, spec)
    n, extra, axis_spec = _split(d, spec)
    if backend is None and backend_of(coords) is None:  # Python values follow like / out
        backend = _anchor_backend(like, out)
    coords, _ = _coordinates(coords, spec)
    if out is not None:
        backend, dtype, like = _follow_out(out, backend, dtype, like)
    blocks = [
        encode(
            coords[..., axis],
            2 * n,
            spec=axis_spec,
            backend=backend,
            dtype=dtype,
            like=like,
            check_values=check_values,
        )
        for axis in _axis_of_block(spec)
    ]
    xp = get_namespace(backend_of(blocks[0]) or "numpy")
    table = _join_blocks(xp, blocks, extra, d)
    return table if out is None else _write_out(xp, table, out)


def _anchor_backend(like: Any, out: Any) -> str | None:
    """The backend of ``like``, else of ``out``: where Python coordinates are encoded."""
    anchors = [backend_of(a) for a in (like, out) if a is not None]
    return next((name for name in anchors if name is not None), None)


def _follow_out(out: Any, backend: str | None, dtype: Any, like: Any) -> tuple[Any, Any, Any]:
    """``(backend, dtype, like)``, each taken from ``out`` where the caller gave none."""
    out_backend = backend_of(out)
    if out_backend is None:
        raise TypeError(
            f"out must be a NumPy array or a torch tensor. Received: {type(out).__name__}"
        )
    return (
        backend if backend is not None else out_backend,
        out.dtype if dtype is None else dtype,
        out if like is None else like,
    )


def _join_blocks(xp: Namespace, blocks: list[Any], extra: int, d: int) -> Any:
    """The per-axis blocks side by side, then ``extra`` zero columns (``odd_d="zero_pad"``)
    or, for a negative ``extra``, only the first ``d`` features (``"truncate"``)."""
    if extra > 0:
        blocks = blocks + [xp.zeros_like(blocks[0][..., :1])] * extra
    table = xp.concat(blocks, axis=-1)
    return table[..., :d] if extra < 0 else table


def _write_out(xp: Namespace, table: Any, out: Any) -> Any:
    """``table`` copied into ``out``, checked to have its shape and dtype."""
    expected = (*xp.shape(table),)
    if xp.shape(out) != expected or xp.dtype_of(out) != xp.dtype_of(table):
        raise ValueError(
            f"out must have shape {expected} and dtype {xp.dtype_of(table)}. "
            f"Received: shape {xp.shape(out)}, dtype {xp.dtype_of(out)}"
        )
    if not xp.mutable:
        raise TypeError(f"out must be a NumPy array or a torch tensor. Received: {type(out)}")
    return xp.copy_into(out, table)


# -- the relative property ------------------------------------------------------------


def _check_relative(d: int, spec: Spec) -> tuple[int, int, Spec]:
    n, extra, axis_spec = _split(check_nd_d(d, spec), spec)
    if extra < 0:
        raise ValueError(
            f"Spec(odd_d='truncate') with d={d} and axes={spec.axes} drops the last "
            f"{-extra} feature(s) of the last block, so no matrix maps PE(x) to PE(x + t). "
            f"Use a d that is a multiple of {2 * spec.axes}."
        )
    return n, extra, axis_spec


def relative_matrix_nd(
    k: Any, d: int, spec: Spec, backend: str | None = None, dtype: Any = None
) -> Any:
    """:func:`~pe_core.relative_matrix` for a spec with ``axes > 1`` (it calls this).

    ``k`` has shape ``(..., axes)``; the result ``(..., d, d)`` is block-diagonal, the
    1-D rotation of shift ``k[..., a]`` in the block of axis ``a``, the identity on the
    zero-padding columns.
    """
    from pe_core.relative import relative_matrix

    n, extra, axis_spec = _check_relative(d, spec)
    k, _ = _coordinates(k, spec, what="k")
    blocks = [
        relative_matrix(k[..., axis], 2 * n, axis_spec, backend=backend, dtype=dtype)
        for axis in _axis_of_block(spec)
    ]
    xp = get_namespace(backend_of(blocks[0]) or "numpy")
    zero = xp.zeros_like(blocks[0])
    width = len(blocks)
    rows = []
    for b, block in enumerate(blocks):
        row = [zero] * b + [block] + [zero] * (width - 1 - b)
        row += [zero[..., :1]] * extra
        rows.append(xp.concat(row, axis=-1))
    matrix = xp.concat(rows, axis=-2)
    if extra:
        lead = xp.shape(matrix)[:-2]
        corner = np.zeros((extra, d))
        corner[:, d - extra :] = np.eye(extra)
        bottom = xp.asarray(corner, dtype=matrix.dtype, like=matrix)
        matrix = xp.concat([matrix, xp.broadcast_to(bottom, (*lead, extra, d))], axis=-2)
    return matrix


def shift_nd(encoding: Any, k: Any, spec: Spec) -> Any:
    """:func:`~pe_core.shift` for a spec with ``axes > 1`` (it calls this): each
    axis's block is shifted by ``k[..., a]``; zero-padding columns stay as they are."""
    from pe_core.relative import shift

    source = backend_of(encoding)
    if source is None:
        encoding = np.asarray(encoding)
        source = "numpy"
    xp = get_namespace(source)
    shape = xp.shape(encoding)
    if not shape:
        raise ValueError("encoding must have at least one axis (the features).")
    n, extra, axis_spec = _check_relative(shape[-1], spec)
    k, _ = _coordinates(k, spec, what="k")
    parts = [
        shift(encoding[..., 2 * n * b : 2 * n * (b + 1)], k[..., axis], axis_spec)
        for b, axis in enumerate(_axis_of_block(spec))
    ]
    if extra:
        parts.append(encoding[..., shape[-1] - extra :])
    return xp.concat(parts, axis=-1)
