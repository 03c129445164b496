"""Fourier features: ``sin`` and ``cos`` of ``2pi * coords @ frequencies``.

:func:`fourier_features` is the one formula behind random Fourier features (Tancik et
al., 2020), SAM's random positional embedding, diffusers' ``GaussianFourierProjection``
and NeRF's frequency encoding; :func:`perceiver_fourier_features` (with the position
grid :func:`perceiver_positions`) and :func:`box_fourier_embedding` (GLIGEN) are two
fixed choices of the frequencies, in their codebases' feature order.

The angle is reduced in turns with a split of every product whose large part is exact
(:mod:`pe_core._fourier`): the features stay within about ``1e-6`` of the exact ones
where the plain float32 formula loses ``2pi * 6e-8 * |x f|`` (``4e-4`` at a thousand
turns). See the Fourier features page of the documentation for the bound.

>>> import numpy as np
>>> from pe_core.fourier import fourier_features
>>> fourier_features(np.array([0.25, 0.5]), np.array([1.0])).round(6).tolist()
[[1.0, 0.0], [0.0, -1.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pe_core import _fourier
from pe_core._fourier import Call
from pe_core._kernel.inputs import (
    as_positions,
    check_finite,
    check_request_size,
    choose_backend,
    resolve_dtype,
    working_dtype,
)
from pe_core.typing import (
    ArrayLike,
    BackendArrayT,
    BackendLike,
    DTypeLike,
    HostArrayLike,
    HostData,
    NDArray,
    SinCosOrder,
)
from pe_core.validation import choice, finite_real, positive_int, positive_ints
from pe_core_backends import BACKENDS, HOST, backend_info, backend_of, get_namespace

__all__ = [
    "ORDERS",
    "box_fourier_embedding",
    "feature_error_bound",
    "fourier_features",
    "perceiver_fourier_features",
    "perceiver_positions",
]

#: The values of ``order``: which half comes first.
ORDERS = ("sin_cos", "cos_sin")

_ON_HOST = (None, "numpy")


def fourier_features(
    coords: BackendArrayT | HostData,
    frequencies: BackendArrayT | HostArrayLike,
    *,
    order: SinCosOrder = "sin_cos",
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """``concat(sin(2pi coords @ frequencies), cos(2pi coords @ frequencies))``.

    Parameters
    ----------
    coords : array_like
        Points, shape ``(..., k)`` with ``frequencies`` of shape ``(k, m)``, or shape
        ``(...)`` (one number per point, any shape, a scalar included) with
        ``frequencies`` of shape ``(m,)``. Python data, NumPy or any backend's array;
        floating values (integers too on the host). Framework arrays stay where they
        are; nothing is read back to the host.
    frequencies : array_like
        The matrix ``B`` in cycles per unit of ``coords`` (the ``2pi`` is applied here),
        any sign. A NumPy array (or Python data) is a fixed, finite host constant,
        split on the host for the exact reduction. An array of a framework (a
        ``torch.nn.Parameter``, a ``tf.Variable``, a JAX array under ``jax.grad``) is
        used where it lives, and gradients reach it; ``coords`` then move to its
        framework and device (host data) or must already be there.
    order : {"sin_cos", "cos_sin"}
        ``"sin_cos"``: the ``m`` sines, then the ``m`` cosines (SAM, Tancik et al.,
        diffusers' default); ``"cos_sin"``: the cosines first (diffusers'
        ``flip_sin_to_cos=True``).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; by default the framework of ``frequencies``, else of
        ``coords``, else NumPy.
    dtype : str or dtype, optional
        float32 by default; float64, float16 or bfloat16 where the backend has them.

    Returns
    -------
    array
        Shape ``coords.shape[:-1] + (2m,)`` (``coords.shape + (2m,)`` for 1-D
        ``frequencies``).

    Raises
    ------
    TypeError
        Coordinates or frequencies that are not real numbers; integer coordinates of a
        framework (cast them to a floating dtype); frequencies of one framework with
        coordinates of another.
    ValueError
        Shapes that do not fit, NaN or infinite host values, an unknown ``order``,
        backend or dtype.

    Notes
    -----
    Host coordinates (Python data, NumPy) are computed on the host in float64 and
    rounded once: within ``2**-24`` plus
    ``2**-53 * (8 (k**2 + 2) + 2**-8 (k + 5) S)`` of the exact features for float32,
    ``S = sum_j |x_j f_j|``. Framework coordinates are computed where they live in
    float32 (float64 when the coordinates, frequencies or output are float64): within
    ``2**-24 * (8 (k**2 + 2) + 2**-8 (k + 5) S)`` (:func:`feature_error_bound`), under
    IEEE arithmetic without fused multiply-adds. Host coordinates given with framework
    frequencies are converted to the working dtype first (rounded to float32 there).

    Examples
    --------
    SAM's random positional embedding of points in ``[0, 1]**2`` is
    ``fourier_features(2 * coords - 1, G)`` with its ``(2, m)`` Gaussian matrix ``G``:

    >>> import numpy as np
    >>> G = np.random.default_rng(0).normal(size=(2, 4))
    >>> pts = np.array([[0.5, 0.5], [0.0, 1.0]])
    >>> f = fourier_features(2 * pts - 1, G)
    >>> f.shape, f.dtype
    ((2, 8), dtype('float32'))
    >>> f[0].tolist()  # the centre maps to 0: sin 0, cos 0
    [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]

    One number per point with 1-D frequencies (diffusers' ``GaussianFourierProjection``):

    >>> f = fourier_features([0.0, 0.125], [1.0, 2.0], order="cos_sin")
    >>> f.astype(np.float64).round(6).tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.707107, 0.0, 0.707107, 1.0]]
    """
    which = choice(order, "order", ORDERS)
    return _fourier.features(_prepare(coords, frequencies, backend, dtype), which)


def feature_error_bound(
    coords: ArrayLike, frequencies: ArrayLike, *, dtype: DTypeLike = "float32"
) -> NDArray:
    """The bound on ``|fourier_features(...) - exact|`` that pe_core states, per feature.

    For host ``coords`` and ``frequencies`` (NumPy; the ``(..., k)`` / ``(k, m)`` or
    ``(...)`` / ``(m,)`` shapes of :func:`fourier_features`) and a float32 or float64
    device computation: ``u * (8 (k**2 + 2) + 2**-8 (k + 5) S)`` with ``u`` the
    working dtype's unit roundoff and ``S = sum_j |x_j f_j|`` per feature, repeated
    for the sine and the cosine half, plus half a unit in the last place of the output
    dtype. (Host computations are more accurate: float64 throughout.)

    Examples
    --------
    >>> b = feature_error_bound(np.array([[0.5, -0.25]]), np.ones((2, 3)))
    >>> b.shape, bool(b.max() < 1e-5)
    ((1, 6), True)
    """
    x_shape, f_shape = np.shape(coords), np.shape(frequencies)
    products = math.prod(x_shape) * (f_shape[-1] if f_shape else 1)  # the |x_j f_j|
    check_request_size(products, "float64", what="feature_error_bound", extra_bytes=16 * products)
    return _fourier.feature_bound(coords, frequencies, HOST.dtype_name(dtype))


def perceiver_fourier_features(
    pos: BackendArrayT | HostData,
    num_bands: int,
    max_resolution: Sequence[int] = (224, 224),
    concat_pos: bool = True,
    sine_only: bool = False,
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """Perceiver's Fourier position encoding (transformers ``generate_fourier_features``).

    For each axis ``i`` of ``pos`` the ``num_bands`` frequencies
    ``f_i = linspace(1, max_resolution[i] / 2, num_bands)`` (up to the Nyquist
    frequency of the grid) give ``sin(pi * pos_i * f_i)`` and ``cos(pi * pos_i * f_i)``:
    ``fourier_features`` of each axis with frequencies ``f_i / 2``.

    Parameters
    ----------
    pos : array_like
        Positions, shape ``(..., d)``, typically :func:`perceiver_positions` (in
        ``[-1, 1]``).
    num_bands : int
        Frequency bands per axis, >= 1.
    max_resolution : sequence of int
        The grid size per axis, ``d`` numbers >= 1.
    concat_pos : bool
        Put the ``d`` raw positions first (transformers' default).
    sine_only : bool
        Only the sines.
    backend, dtype
        As for :func:`fourier_features`.

    Returns
    -------
    array
        Shape ``(..., d * (1 if concat_pos else 0) + d * num_bands * (1 if sine_only
        else 2))``, ordered ``[pos_1 .. pos_d, sin(pi f_{1,1} pos_1) .. sin(pi f_{1,K}
        pos_1), .., sin(.. pos_d), cos(..)]``: transformers' order.

    Notes
    -----
    transformers computes the bands of the first batch element's positions
    (``pos[0]``) and repeats them for the whole batch; here each point's own positions
    are encoded. The two agree whenever the batch shares its positions, as Perceiver's
    own grids do. With ``concat_pos=False`` transformers returns that element's bands
    alone (no batch axis); here the shape is ``pos.shape[:-1] + (...)`` always.

    Examples
    --------
    >>> pos = perceiver_positions((2, 3))
    >>> perceiver_fourier_features(pos, 4, (2, 3)).shape
    (2, 3, 18)
    >>> perceiver_fourier_features([[0.5]], 2, (4,), concat_pos=False).round(6).tolist()
    [[1.0, 0.0, 0.0, -1.0]]
    """
    bands = positive_int(num_bands, "num_bands")
    resolution = positive_ints(max_resolution, "max_resolution", what="one per axis")
    shape = _shape_of(pos)
    if not shape or shape[-1] != len(resolution):
        raise ValueError(
            f"pos must have shape (..., {len(resolution)}): one axis per entry of "
            f"max_resolution {resolution}. Received: shape {shape}"
        )
    width = len(resolution) * ((1 if concat_pos else 0) + bands * (1 if sine_only else 2))
    _check_size(pos, shape, width, len(resolution) * bands, dtype, "perceiver_fourier_features")
    call = _prepare(pos, ((1.0,),) * len(resolution), backend, dtype)
    return _fourier.perceiver(call, bands, resolution, concat_pos, sine_only)


def perceiver_positions(
    index_dims: Sequence[int],
    output_range: tuple[float, float] = (-1.0, 1.0),
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
    """Perceiver's position grid (transformers ``build_linear_positions``).

    Shape ``(*index_dims, len(index_dims))``: entry ``[i_1, .., i_d, a]`` is
    ``linspace(lo, hi, index_dims[a])[i_a]``, computed in float64 and rounded once.

    Examples
    --------
    >>> perceiver_positions((2, 3))[1].tolist()
    [[1.0, -1.0], [1.0, 0.0], [1.0, 1.0]]
    """
    dims = positive_ints(index_dims, "index_dims")
    if not isinstance(output_range, (tuple, list)) or len(output_range) != 2:
        raise TypeError(f"output_range must be a pair (low, high). Received: {output_range!r}")
    low = finite_real(output_range[0], "output_range[0]")
    high = finite_real(output_range[1], "output_range[1]")
    if backend is None and like is not None:
        backend = backend_of(like)
    xp, _ = choose_backend(None, backend)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    check_request_size(math.prod(dims) * len(dims), out_name, what="perceiver_positions")
    return _fourier.positions(xp, dims, low, high, (out_name, out_dtype), like)


def box_fourier_embedding(
    box: BackendArrayT | HostData,
    embed_dim: int = 8,
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """GLIGEN's Fourier embedding of boxes (diffusers ``get_fourier_embeds_from_boundingbox``).

    With ``w_e = 100 ** (e / embed_dim)`` for ``e = 0 .. embed_dim - 1`` (radians per
    unit: no ``2pi``), the features of a box ``b = (b_1, .., b_c)`` are ordered
    ``[sin(w_0 b_1) .. sin(w_0 b_c), cos(w_0 b_1) .. cos(w_0 b_c), sin(w_1 b_1), ..]``.

    Parameters
    ----------
    box : array_like
        Shape ``(..., c)``: boxes ``(x0, y0, x1, y1)`` for ``c = 4`` (diffusers takes
        ``(batch, boxes, 4)``).
    embed_dim : int
        The number of frequencies (GLIGEN's ``fourier_freqs``, 8), >= 1.
    backend, dtype
        As for :func:`fourier_features`.

    Returns
    -------
    array
        Shape ``(..., embed_dim * 2 * c)``.

    Examples
    --------
    >>> e = box_fourier_embedding(np.zeros((1, 2, 4)))
    >>> e.shape, e[0, 0, :8].tolist()
    ((1, 2, 64), [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    """
    n = positive_int(embed_dim, "embed_dim")
    shape = _shape_of(box)
    if len(shape) < 1:
        raise ValueError(
            f"box must have shape (..., c), c numbers per box. Received: shape {shape}"
        )
    _check_size(box, shape, 2 * n * shape[-1], n, dtype, "box_fourier_embedding")
    call = _prepare(box, ((1.0,),) * shape[-1], backend, dtype)
    return _fourier.box(call, n, shape[-1])


# -- shared steps -----------------------------------------------------------------------


def _prepare(coords: Any, frequencies: Any, backend: Any, dtype: Any) -> Call:
    """Validate once and choose where to compute."""
    freq_source = _source(frequencies)
    coord_source = _source(coords)
    host_freqs = freq_source in _ON_HOST
    if not host_freqs:
        if backend is not None and choose_backend(None, backend)[0].name != freq_source:
            raise TypeError(
                f"frequencies are a {freq_source} array, so backend must be {freq_source!r} "
                f"or None. Received: backend={backend!r}"
            )
        if coord_source not in _ON_HOST and coord_source != freq_source:
            raise TypeError(
                "coords and frequencies must be arrays of one framework. Received: coords "
                f"of {coord_source}, frequencies of {freq_source}"
            )
        backend = freq_source
    xp, coord_source = choose_backend(coords, backend, source=coord_source)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    on_host = coord_source in _ON_HOST and host_freqs
    working = "float64" if on_host else working_dtype(out_name)
    if host_freqs:
        key = _frequency_key(frequencies)
        f_shape, freqs = xp.host_constant(_fourier.frequency_constants, key, working)
    else:
        freqs = frequencies
        f_dtype = xp.dtype_of(freqs)
        if xp.kind(f_dtype) != "float":
            raise TypeError(f"frequencies must have a floating dtype. Received dtype: {f_dtype}")
        f_shape = tuple(xp.shape(freqs))
        if len(f_shape) not in (1, 2) or 0 in f_shape:
            raise ValueError(
                "frequencies must have shape (m,) or (k, m) with k, m >= 1. Received: "
                f"shape {f_shape}"
            )
    shape = getattr(coords, "shape", None)
    if coord_source in _ON_HOST and shape is not None:  # sized before the float64 copy
        _check_shapes(tuple(shape), f_shape, out_name, host_output=on_host)
    if on_host:
        # Host coordinates and frequencies: float64 on the host, rounded once.
        x = _host_coords(coords)
        vector = _check_shapes(x.shape, f_shape, out_name)
        return Call(HOST, xp, x, freqs, True, "float64", out_name, out_dtype, vector)
    if coord_source in _ON_HOST:  # host coordinates with a framework's frequencies
        host = _host_coords(coords)  # checked on the host (integers exact in float64)
        staged = host if xp.supports("float64") else host.astype(np.float32)
        x = xp.asarray(staged, like=freqs)  # onto the frequencies' device
    else:
        x = as_positions(coords, xp, coord_source, what="coords")
    c_dtype = xp.dtype_of(x)
    if xp.kind(c_dtype) != "float":
        raise TypeError(
            "coords of a framework must have a floating dtype (an integer beyond 2**24 "
            f"would be rounded in float32). Received dtype: {c_dtype}. Cast them first."
        )
    wide = "float64" in (out_name, c_dtype) or (not host_freqs and xp.dtype_of(freqs) == "float64")
    if wide and working != "float64" and xp.supports("float64"):
        working = "float64"  # float64 coordinates: the constants in float64 too
        if host_freqs:
            f_shape, freqs = xp.host_constant(_fourier.frequency_constants, key, working)
    if c_dtype != working:
        x = xp.astype(x, xp.dtype(working))
    c_shape = tuple(xp.shape(x))
    vector = _check_shapes(c_shape, f_shape, out_name, host_output=False)
    if not host_freqs:
        if xp.dtype_of(freqs) != working:
            freqs = xp.astype(freqs, xp.dtype(working))
        if len(f_shape) == 1:
            freqs = xp.expand_dims(freqs, 0)
    return Call(xp, None, x, freqs, host_freqs, working, out_name, out_dtype, vector)


def _source(obj: Any) -> str | None:
    """``backend_of``, with Python data and NumPy arrays recognised first (Python data is
    what compiled callers pass as constants, and compilers cannot walk its classes)."""
    if isinstance(obj, (list, tuple, int, float)):
        return None
    if isinstance(obj, (np.ndarray, np.generic)):
        return "numpy"
    for name in BACKENDS:  # each registry row's isinstance check: a torch.nn.Parameter too
        if backend_info(name).is_array(obj):
            return name
    return backend_of(obj)


def _frequency_key(frequencies: Any) -> tuple:
    """Host frequencies as a nested tuple of floats (hashable, a constant to compilers)."""
    if isinstance(frequencies, np.ndarray):
        if frequencies.dtype.kind not in "iuf":
            raise TypeError(f"frequencies must be real numbers. Received: {frequencies!r}")
        frequencies = frequencies.astype(np.float64).tolist()
    elif isinstance(frequencies, np.generic):
        frequencies = float(frequencies)
    return _freeze(frequencies)


def _freeze(values: Any) -> Any:
    if isinstance(values, (list, tuple)):
        return tuple(_freeze(v) for v in values)
    if isinstance(values, bool) or not isinstance(values, (int, float, np.integer, np.floating)):
        raise TypeError(f"frequencies must be real numbers. Received: {values!r}")
    return float(values)


def _host_coords(coords: Any) -> np.ndarray:
    x = as_positions(coords, HOST, backend_of(coords), what="coords")
    values = np.asarray(x)
    check_finite(HOST, x, what="coords", values=values)
    if values.dtype.kind in "iu" and values.size:
        # compared as integers: float(2**53 + 1) would round to 2**53 and pass
        low, high = int(values.min()), int(values.max())
        if max(high, -low) > 2**53:
            raise ValueError(
                "integer coords must be at most 2**53 in magnitude (exact in float64). "
                f"Received the coordinate {high if high > -low else low}"
            )
    return np.asarray(values, dtype=np.float64)


def _check_shapes(
    c_shape: tuple[int, ...], f_shape: tuple[int, ...], out_name: str, host_output: bool = True
) -> bool:
    """Whether the frequencies are 1-D (one number per point); checks the coords' shape
    and the request's size."""
    vector, (k, m) = len(f_shape) == 1, (1, *f_shape) if len(f_shape) == 1 else f_shape
    if not vector and (not c_shape or c_shape[-1] != k):
        raise ValueError(
            f"coords must have shape (..., {k}) for frequencies of shape {f_shape} (one "
            f"coordinate per row). Received: shape {c_shape}"
        )
    points = c_shape if vector else c_shape[:-1]
    if all(n is not None for n in points):
        n_points = math.prod(points)
        # host computations work in blocks; a framework's temporaries are its own
        extra = _fourier.BLOCK if host_output else n_points * k * m * 8 * 6
        check_request_size(
            n_points * 2 * m,
            out_name,
            what="fourier_features",
            extra_bytes=extra,
            host_output=host_output,
        )
    return vector


def _check_size(
    coords: Any, shape: tuple[int, ...], width: int, n_frequencies: int, dtype: Any, what: str
) -> None:
    """Refuse, before any work, a request whose output ``shape[:-1] + (width,)`` and
    host constants (three float64 numbers per frequency) cannot fit in memory."""
    name = "float32" if dtype is None else HOST.dtype_name(dtype)
    points = math.prod(n for n in shape[:-1] if n is not None)
    on_host = _source(coords) in _ON_HOST  # computed in blocks on the host, then moved
    check_request_size(
        points * width,
        name,
        what=what,
        extra_bytes=24 * n_frequencies + (_fourier.BLOCK if on_host else 0),
        host_output=on_host,
    )


def _shape_of(obj: Any) -> tuple[int, ...]:
    source = _source(obj)
    if source is None:
        try:
            return tuple(np.shape(obj))
        except ValueError as exc:
            raise TypeError(f"expected numbers of one shape. Received: {obj!r}") from exc
    return tuple(get_namespace(source).shape(obj))
