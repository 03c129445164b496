"""``encode``: the sinusoidal encoding of any positions on any backend.

The public face: the decode-step lane when it takes the call, else the spec resolved
once and the call handed to the 1-D engine (:mod:`pe_core._sinusoidal`) or, for an N-D
spec, to the N-D engine built on it (:mod:`pe_core._sinusoidal_nd`).
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from pe_core._learned import encode_frequencies, framework_frequencies
from pe_core._sinusoidal import encode_1d, few_integer_positions
from pe_core._sinusoidal_nd import encode_nd
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import (
    ArrayT,
    BackendLike,
    DTypeLike,
    HostArrayLike,
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
from pe_core_backends import any_dtensor, backend_of, encode_on_shards, get_namespace


# fmt: off
@overload
def encode(pos: HostArrayLike, d: int, *, spec: Spec | PresetLike | None = None,
           backend: NumpyBackend | None = None, dtype: DTypeLike = None, out: None = None, like: None = None,
           check_values: bool = False, frequencies: HostArrayLike | None = None) -> NDArray: ...
@overload
def encode(pos: ArrayT, d: int, *, spec: Spec | PresetLike | None = None,
           backend: None = None, dtype: DTypeLike = None, out: ArrayT | None = None, like: Any = None,
           check_values: bool = False, frequencies: Any = None) -> ArrayT: ...
@overload
def encode(pos: Any, d: int, *, spec: Spec | PresetLike | None = None,
           backend: TorchBackend, dtype: DTypeLike = None, out: Any = None, like: Any = None,
           check_values: bool = False, frequencies: Any = None) -> TorchTensor: ...
@overload
def encode(pos: Any, d: int, *, spec: Spec | PresetLike | None = None,
           backend: JaxBackend, dtype: DTypeLike = None, out: Any = None, like: Any = None,
           check_values: bool = False, frequencies: Any = None) -> JaxArray: ...
@overload
def encode(pos: Any, d: int, *, spec: Spec | PresetLike | None = None,
           backend: TensorFlowBackend, dtype: DTypeLike = None, out: Any = None, like: Any = None,
           check_values: bool = False, frequencies: Any = None) -> TFTensor: ...
@overload
def encode(pos: HostArrayLike, d: int, *, spec: Spec | PresetLike | None = None,
           backend: BackendLike | None = None, dtype: DTypeLike = None, out: Any = None, like: Any = None,
           check_values: bool = False, frequencies: Any = None) -> Any: ...
# fmt: on


def encode(
    pos: Any,
    d: int,
    *,
    spec: Spec | PresetLike | None = None,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
    out: Any = None,
    like: Any = None,
    check_values: bool = False,
    frequencies: Any = None,
) -> Any:
    """Sinusoidal positional encoding of ``pos`` with ``d`` features.

    Parameters
    ----------
    pos : int, float, sequence, range or array
        Positions of any shape; integer or floating (fractional and negative
        positions are valid). Arrays may come from NumPy, JAX, PyTorch or TensorFlow.
        With a spec of ``axes > 1``: coordinates of shape ``(..., axes)``, such as
        :func:`~pe_core.grid` makes; the result has shape ``(..., d)`` (see
        :mod:`pe_core.nd`).
    d : int
        Number of features.
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or a preset name (see :data:`~pe_core.PRESETS`);
        ``"vaswani"`` by default.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute. ``None`` follows the type of ``pos`` (a torch tensor gives a
        torch tensor on the same device), else of ``like`` or ``out``; Python values
        give NumPy.
    dtype : str or dtype, optional
        Output dtype, float32 by default (or ``out``'s dtype); float64, float16 and
        bfloat16 where the backend has them. The angle is always computed exactly
        (see :mod:`pe_core._kernel.angles`); a low-precision dtype only rounds the result.
    out : array, optional
        A NumPy array or torch tensor of shape ``shape(pos) + (d,)`` to write into
        (for callers who refill a buffer); it is returned.
    like : array, optional
        An array whose backend and device the result should follow when ``pos`` is
        host data (a Python range, a NumPy array): the table is built on the host and
        moved to that device once, then reused from a cache (see :doc:`devices`).
    check_values : bool
        Positions on an accelerator are never read back by default, so NaN, infinite
        or out-of-range positions there give NaN rows instead of an error. ``True``
        reads them and raises as for host positions (this synchronises).
    frequencies : sequence of float or array, optional
        Angular frequencies (radians per position), one per sin/cos pair, replacing
        the spec's schedule (``d = 2 * len``). Host values (a sequence, a NumPy array)
        are ``Spec(frequencies=...)``: exact. A torch, JAX or TensorFlow array of shape
        ``(..., d/2)`` (trainable frequencies, :mod:`pe_core.trainable`) gives
        ``sin``/``cos`` of ``pos[..., None] * frequencies`` computed where the
        frequencies live, in float32 (float64 for ``dtype="float64"``),
        differentiable in them; the spec then gives only ``layout`` and ``offset``.

    Returns
    -------
    array
        Shape ``shape(pos) + (d,)``, values in ``[-1, 1]``.

    Raises
    ------
    ValueError
        Host positions that are NaN or infinite; a bad ``d``, ``dtype`` or ``out``; an
        output too large for the memory (said before allocating anything). Every
        finite position is encoded exactly (see :doc:`precision`).

    Notes
    -----
    The call classifies its positions once (:mod:`pe_core._kernel.placement`) and picks a
    route. Positions known on the host take the cheapest exact route of
    :mod:`pe_core._kernel.host_tables` (a float64 pass for small calls, angle-addition tables
    for runs of consecutive positions, lookups for other integer positions). Positions
    on an accelerator or being traced take the exact integer kernel of
    :mod:`pe_core._kernel.angles` on the device, with no host read and no synchronisation.
    All routes are within 1e-6 of the true value in float32.

    Examples
    --------
    >>> import numpy as np
    >>> pe = encode(range(3), 4)
    >>> pe.shape, pe.dtype
    ((3, 4), dtype('float32'))
    >>> [round(float(v), 3) for v in pe[1]]  # [sin 1, cos 1, sin .01, cos .01]
    [0.841, 0.54, 0.01, 1.0]
    >>> bool(abs(encode(10**6, 2)[0] - np.sin(10**6)) < 1e-6)  # exact at large positions
    True
    >>> buffer = np.empty((4096, 64), np.float32)
    >>> encode(range(4096), 64, out=buffer) is buffer
    True
    """
    if any_dtensor(pos, out, like):  # torch.distributed.tensor: on the local shard
        options = dict(locals(), out=None)  # the arguments, before any other local is bound
        on_shard: Any = encode  # the implementation, not the stubs
        return encode_on_shards(
            lambda pos, like: on_shard(**{**options, "pos": pos, "like": like}),
            pos,
            out=out,
            like=like,
        )
    if frequencies is not None:
        if framework_frequencies(frequencies):  # trainable: pos * f on the device
            _check_broadcast(pos, frequencies)
            return encode_frequencies(
                pos, d, frequencies, resolve_spec(spec), backend, dtype, out, like, check_values
            )
        values = frequencies.tolist() if hasattr(frequencies, "tolist") else frequencies
        spec = resolve_spec(spec).replace(frequencies=values)
    if spec is backend is dtype is out is like is None and not check_values:
        # a decode step or short prompt: the few-positions lane, if it takes the call
        table = few_integer_positions(pos, d)
        if table is not None:
            return table
    spec = resolve_spec(spec)
    if spec.axes > 1:  # N-D coordinates: one 1-D encoding per axis, concatenated
        return encode_nd(pos, d, spec, backend, dtype, out, like, check_values)
    return encode_1d(pos, d, spec, backend, dtype, out, like, check_values)


def _check_broadcast(pos: Any, frequencies: Any) -> None:
    """Refuse framework ``frequencies`` whose leading axes do not broadcast against the
    positions' shape (``pos[..., None] * frequencies``), naming both shapes."""
    pos_source, freq_source = backend_of(pos), backend_of(frequencies)
    if pos_source is not None:
        pos_shape = tuple(get_namespace(pos_source).shape(pos))
    elif isinstance(pos, range):
        pos_shape = (len(pos),)
    else:
        try:
            pos_shape = np.shape(pos)
        except ValueError:
            return  # ragged data: the positions' own checks name it
    freq_shape = tuple(get_namespace(freq_source).shape(frequencies)) if freq_source else ()
    if any(n is None for n in (*pos_shape, *freq_shape)) or not freq_shape:
        return  # unknown while tracing, or a scalar: checked where the product is formed
    try:
        np.broadcast_shapes((*pos_shape, 1), freq_shape)
    except ValueError:
        raise ValueError(
            "frequencies given as a framework array must have shape (..., d/2) with "
            "leading axes that broadcast against the positions' shape (the angles are "
            f"pos[..., None] * frequencies): frequencies of shape {freq_shape} do not "
            f"broadcast against positions of shape {pos_shape}. Use shape "
            f"({freq_shape[-1]},), or leading axes of size 1 or equal to the positions'."
        ) from None
