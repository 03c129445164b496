"""Position ids computed from the data: padding masks, padded token ids, packed
sequences and NaViT's patch masks, on any backend.

Every function takes an array of NumPy, JAX, PyTorch or TensorFlow (or Python data,
computed with NumPy) and returns position ids of the same backend, on the same
device, as integers: int64, int32 on JAX without ``jax_enable_x64``. The values of a
framework array are never read back to the host: checks that would need them run
only for NumPy and Python input (each function says which), and every size comes
from static shapes, so the functions run under ``jax.jit``, ``torch.compile`` and
``tf.function``.

* :func:`from_attention_mask`: generation's rule, ``cumsum(mask) - 1`` on tokens,
  ``padding_value`` on padding (left-padded batches);
* :func:`from_input_ids`: RoBERTa's (and fairseq's ``make_positions``) numbering from
  ``padding_idx + 1``;
* :func:`from_cu_seqlens`: a position per token of packed sequences given their
  cumulative lengths (flash-attention's varlen ``cu_seqlens``);
* :func:`from_patch_attention_mask`: NaViT's fractional buckets of Idefics2, Idefics3
  and SmolVLM, for images of any size on a fixed ``num_patches_per_side`` grid;
* :func:`from_table_cells`: TAPAS's count that restarts in every table cell.

>>> from pe_core import position_ids
>>> position_ids.from_attention_mask([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]).tolist()
[[1, 1, 0, 1, 2], [0, 1, 2, 3, 4]]
>>> position_ids.from_cu_seqlens([0, 3, 5]).tolist()
[0, 1, 2, 0, 1]
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, overload

import numpy as np

from pe_core import device_tables
from pe_core.typing import (
    Array,
    BackendLike,
    HostArrayLike,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import choice, is_integer, positive_int
from pe_core_backends import Namespace, backend_of, canonical_backend, get_namespace

__all__ = [
    "NAVIT_RULES",
    "from_attention_mask",
    "from_cu_seqlens",
    "from_input_ids",
    "from_patch_attention_mask",
    "from_table_cells",
    "navit_bucket_table",
]

NavitRule = Literal["transformers", "transformers4", "exact"]

#: The coordinate rules :func:`from_patch_attention_mask` can reproduce.
NAVIT_RULES: tuple[str, ...] = ("transformers", "transformers4", "exact")


# --------------------------------------------------------------------------- inputs


def _namespace(
    obj: Any, backend: BackendLike | None, what: str
) -> tuple[Namespace, Any, np.ndarray | None]:
    """``(namespace, array, host values)``: ``obj`` as an array of the backend it
    computes on, and its values as NumPy when they are on the host for checking (NumPy
    and Python input; ``None`` for a framework's array, whose values are not read)."""
    source = backend_of(obj)
    if source is None:
        if isinstance(obj, (bool, np.bool_)) or np.ndim(obj) == 0:
            raise TypeError(f"{what} must be an array. Received: {obj!r}")
        obj = np.asarray(obj)
        if obj.size == 0 and obj.dtype.kind == "f":
            obj = obj.astype(np.int64)  # an empty list
        source = "numpy"
    xp = _lookup(source)
    values = obj if xp.numpy_arrays else None
    if values is not None and (values.dtype == object or values.dtype.kind not in "biuf"):
        raise TypeError(
            f"{what} must be an array of booleans or integers. Received dtype: {values.dtype}"
        )
    if backend is not None:
        target = _lookup(canonical_backend(backend))
        if target is not xp:
            if values is None:
                raise TypeError(
                    f"{what} is a {xp.name} array and backend={target.name!r} was asked for: "
                    "pe_core does not move a framework's array to another framework (that "
                    "would read it back to the host). Pass a NumPy array, or call with "
                    "backend=None."
                )
            return target, target.asarray(_fit_host(values, target, what)), values
    return xp, obj, values


#: array class -> its backend's namespace, whether its values are on the host, its
#: dtypes' kinds (dtypes that passed the host check) and the output dtype where the
#: backend's int64 support cannot change (``None`` otherwise): filled by eager calls
_CLASSES: dict[type, tuple[Namespace, bool, dict[Any, str], tuple[str, Any] | None]] = {}


def _inputs(
    obj: Any, backend: BackendLike | None, what: str
) -> tuple[Namespace, Any, np.ndarray | None, str, str, Any]:
    """``(namespace, array, host values, kind, output dtype name, output dtype)``: what
    :func:`_namespace`, :func:`_kind` (its kind not yet checked against what the caller
    allows: :func:`_allow` does) and :func:`_wide` give, in one pass.

    An eager call with an array of a class and dtype seen before takes a few dict
    lookups; anything else (Python data, ``backend=``, a trace) the general path.
    """
    if backend is None:
        entry = _CLASSES.get(type(obj))
        if entry is not None:
            xp, on_host, kinds, out = entry
            if not xp.is_tracing():
                kind = kinds.get(obj.dtype)
                if kind is not None:
                    if out is None:
                        out = _wide(xp)
                    return xp, obj, obj if on_host else None, kind, out[0], out[1]
    xp, arr, host = _namespace(obj, backend, what)
    kind = xp.kind(xp.dtype_of(arr))
    if not xp.is_tracing():
        if backend is None and arr is obj:
            source = backend_of(obj)
            if source is not None and _lookup(source) is xp:
                entry = _CLASSES.get(type(obj))
                if entry is None:
                    # the base class's int64 support is static (JAX's follows its x64 flag)
                    static = type(xp).supports is Namespace.supports
                    entry = (xp, host is not None, {}, _wide(xp) if static else None)
                    _CLASSES[type(obj)] = entry
                entry[2][obj.dtype] = kind
    wide, dtype = _wide(xp)
    return xp, arr, host, kind, wide, dtype


def _allow(xp: Namespace, x: Any, kind: str, what: str, allowed: str = "bool or int") -> None:
    """Refuse a dtype kind other than ``allowed`` (the message of :func:`_kind`)."""
    if kind != "int" and (kind != "bool" or allowed == "int"):
        wanted = "booleans or integers" if "bool" in allowed else "integers"
        raise TypeError(f"{what} must be an array of {wanted}. Received dtype: {xp.dtype_of(x)}")


def _fit_host(values: np.ndarray, xp: Namespace, what: str) -> np.ndarray:
    """Host integers as int64, or int32 where ``xp`` has no int64 (JAX without x64)."""
    if values.dtype.kind not in "iu" or xp.supports("int64"):
        return values
    info = np.iinfo(np.int32)
    if values.size and not (info.min <= values.min() and values.max() <= info.max):
        raise ValueError(
            f"{what} do not fit in int32, the widest integer of backend {xp.name!r} now "
            f"(enable jax_enable_x64 for int64). Received values from {values.min()} to "
            f"{values.max()}"
        )
    return values.astype(np.int32)


#: dtype object -> its kind (``'bool'``, ``'int'``...), filled as dtypes are seen
_KINDS: dict[Any, str] = {}


def _kind(xp: Namespace, x: Any, what: str, allowed: str = "bool or int") -> str:
    """``'bool'`` or ``'int'``: the kind of ``x``'s dtype, refused otherwise."""
    if xp.is_tracing():  # a tracer (torch.compile) may not hash every key of the cache
        kind = xp.kind(xp.dtype_of(x))
    else:
        cached = _KINDS.get(x.dtype)
        if cached is None:
            cached = _KINDS[x.dtype] = xp.kind(xp.dtype_of(x))
        kind = cached
    if kind not in allowed.split(" or "):
        wanted = "booleans or integers" if "bool" in allowed else "integers"
        raise TypeError(f"{what} must be an array of {wanted}. Received dtype: {xp.dtype_of(x)}")
    return kind


def _integer(value: object, name: str) -> int:
    if type(value) is int:  # the common case, without the slower ABC check
        return value
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer. Received: {value!r}")
    return int(value)  # type: ignore[call-overload]


#: (namespace, whether it has int64 now) -> the output dtype's name and object
_WIDE: dict[tuple[Namespace, bool], tuple[str, Any]] = {}


def _wide(xp: Namespace) -> tuple[str, Any]:
    """The output dtype: int64, or int32 where the backend has no int64 now (JAX
    without x64), as ``(name, dtype object)``."""
    if xp.is_tracing():
        name = "int64" if xp.supports("int64") else "int32"
        return name, xp.dtype(name)
    key = (xp, xp.supports("int64"))
    wide = _WIDE.get(key)
    if wide is None:
        name = "int64" if key[1] else "int32"
        wide = _WIDE[key] = (name, xp.dtype(name))
    return wide


#: backend name -> its namespace (the registry's lookup imports on every call)
_NAMESPACES: dict[str, Namespace] = {}


def _lookup(name: str) -> Namespace:
    xp = _NAMESPACES.get(name)
    if xp is None:
        xp = get_namespace(name)
        if not xp.is_tracing():
            _NAMESPACES[name] = xp
    return xp


def _check_fits(xp: Namespace, wide: str, what: str, *values: int) -> None:
    """Refuse results that the output dtype cannot hold (int32 on JAX without x64)."""
    info = np.iinfo(wide)
    for value in values:
        if not info.min <= value <= info.max:
            hint = " (enable jax_enable_x64 for int64)" if wide == "int32" else ""
            raise ValueError(
                f"{what} reaches {value}, which does not fit in {wide}, the output dtype of "
                f"backend {xp.name!r}{hint}."
            )


def _check_binary(values: np.ndarray, what: str) -> None:
    """Host masks hold 0 and 1 only (the first other value is named)."""
    if values.dtype.kind == "b":
        return
    # integers: as unsigned of the same width, a negative value is above 1 too
    if not (values.view(f"u{values.dtype.itemsize}") > 1).any():
        return
    bad = (values != 0) & (values != 1)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{what} must hold 0 (padding) and 1 (tokens) only. Received: {values[index].item()!r} "
            f"at index {index}"
        )


def _rank(x: Any, what: str, ranks: tuple[int, ...] | int, shape_text: str) -> Any:
    """``x.shape`` (a size may be ``None`` in a TensorFlow trace), its rank checked."""
    shape = x.shape
    rank = len(shape)
    ok = rank >= ranks if isinstance(ranks, int) else rank in ranks
    if not ok:
        raise ValueError(f"{what} must have shape {shape_text}. Received: shape {tuple(shape)}")
    return shape


# --------------------------------------------------------------------------- masks and ids


@overload
def from_attention_mask(
    attention_mask: HostArrayLike, *, padding_value: int = 1, backend: NumpyBackend | None = None
) -> NDArray: ...


@overload
def from_attention_mask(
    attention_mask: TorchTensor, *, padding_value: int = 1, backend: None = None
) -> TorchTensor: ...


@overload
def from_attention_mask(
    attention_mask: JaxArray, *, padding_value: int = 1, backend: None = None
) -> JaxArray: ...


@overload
def from_attention_mask(
    attention_mask: Any, *, padding_value: int = 1, backend: TorchBackend
) -> TorchTensor: ...


@overload
def from_attention_mask(
    attention_mask: Any, *, padding_value: int = 1, backend: JaxBackend
) -> JaxArray: ...


@overload
def from_attention_mask(
    attention_mask: Any, *, padding_value: int = 1, backend: TensorFlowBackend
) -> TFTensor: ...


@overload
def from_attention_mask(
    attention_mask: TFTensor, *, padding_value: int = 1, backend: None = None
) -> TFTensor: ...


@overload
def from_attention_mask(
    attention_mask: Any, *, padding_value: int = 1, backend: BackendLike | None = None
) -> Array: ...


def from_attention_mask(
    attention_mask: Any, *, padding_value: int = 1, backend: BackendLike | None = None
) -> Array:
    """Position ids of a padded batch from its attention mask: generation's rule.

    Token ``i`` gets the number of tokens before it (``cumsum(mask, -1) - 1``); padding
    gets ``padding_value``. For a left-padded prompt the first real token is at 0
    whatever the padding, which is what transformers' ``generate`` feeds a decoder
    whose ``position_ids`` are not given.

    Parameters
    ----------
    attention_mask : array of bool or int, shape (..., seq)
        1 (or ``True``) for tokens, 0 for padding; positions count along the last axis.
        NumPy and Python masks must hold 0 and 1 only. The values of a framework array
        are not read (that would be a host read): for other values it gives
        transformers' numbers, the running sum of the mask minus 1, padding where it
        is 0.
    padding_value : int
        The id written at padding places. 1 by default, as transformers 4's
        ``prepare_inputs_for_generation`` (``masked_fill_(attention_mask == 0, 1)``)
        and the models that keep that line (Idefics, Qwen2.5-Omni, Qwen3-Omni-MoE).
        transformers 5's ``GenerationMixin._prepare_position_ids_for_generation``
        writes 0. Either is harmless where attention ignores padding.
    backend : str, optional
        The backend to compute on: that of ``attention_mask`` by default (NumPy for
        Python data). A NumPy mask may be sent to another backend; a framework's
        array is not moved to another framework.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the mask's backend and device.

    Raises
    ------
    TypeError
        A mask that is not an array of booleans or integers; a non-integer
        ``padding_value``.
    ValueError
        A 0-d mask; host mask values other than 0 and 1.

    Examples
    --------
    >>> mask = [[0, 0, 1, 1], [1, 1, 1, 1]]
    >>> from_attention_mask(mask).tolist()
    [[1, 1, 0, 1], [0, 1, 2, 3]]
    >>> from_attention_mask(mask, padding_value=0).tolist()  # transformers 5's generate
    [[0, 0, 0, 1], [0, 1, 2, 3]]
    """
    xp, mask, host, kind, wide, dtype = _inputs(attention_mask, backend, "attention_mask")
    if type(padding_value) is not int:
        padding_value = _integer(padding_value, "padding_value")
    if kind != "int" and kind != "bool":
        _allow(xp, mask, kind, "attention_mask")
    if len(mask.shape) < 1:
        _rank(mask, "attention_mask", 1, "(..., seq)")
    if host is not None:
        _check_binary(host, "attention_mask")
    if wide == "int32":
        _check_fits(xp, wide, "padding_value", padding_value)
    padding = ~mask if kind == "bool" else mask == 0
    return xp.fill_where(xp.cumsum(mask, -1, dtype) - 1, padding, padding_value)


@overload
def from_input_ids(
    input_ids: HostArrayLike,
    padding_idx: int,
    past_length: int = 0,
    *,
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def from_input_ids(
    input_ids: TorchTensor, padding_idx: int, past_length: int = 0, *, backend: None = None
) -> TorchTensor: ...


@overload
def from_input_ids(
    input_ids: JaxArray, padding_idx: int, past_length: int = 0, *, backend: None = None
) -> JaxArray: ...


@overload
def from_input_ids(
    input_ids: Any, padding_idx: int, past_length: int = 0, *, backend: TorchBackend
) -> TorchTensor: ...


@overload
def from_input_ids(
    input_ids: Any, padding_idx: int, past_length: int = 0, *, backend: JaxBackend
) -> JaxArray: ...


@overload
def from_input_ids(
    input_ids: Any, padding_idx: int, past_length: int = 0, *, backend: TensorFlowBackend
) -> TFTensor: ...


@overload
def from_input_ids(
    input_ids: TFTensor, padding_idx: int, past_length: int = 0, *, backend: None = None
) -> TFTensor: ...


@overload
def from_input_ids(
    input_ids: Any, padding_idx: int, past_length: int = 0, *, backend: BackendLike | None = None
) -> Array: ...


def from_input_ids(
    input_ids: Any, padding_idx: int, past_length: int = 0, *, backend: BackendLike | None = None
) -> Array:
    """RoBERTa's position ids: tokens count from ``padding_idx + 1``, padding gets
    ``padding_idx``.

    The numbers of transformers' ``create_position_ids_from_input_ids`` (in
    transformers 5 a staticmethod of ``RobertaEmbeddings`` and its copies: XLM-R,
    CamemBERT, Longformer, MPNet, ...; its third argument is ``cache_length``) and of
    fairseq's ``utils.make_positions``: token ``i`` of a row gets ``padding_idx +
    past_length + (number of non-padding tokens up to and including i)``.

    Parameters
    ----------
    input_ids : array of int, shape (..., seq)
        Token ids; positions count along the last axis.
    padding_idx : int
        The padding token's id (1 for RoBERTa), which is also the position id of padding
        and the one below the first token's.
    past_length : int
        Tokens already processed (a KV cache): the count starts after them. >= 0.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the ids' backend and device.

    Raises
    ------
    TypeError
        Ids that are not integers (booleans included); a non-integer ``padding_idx``
        or ``past_length``.
    ValueError
        0-d ids; ``past_length < 0``; results beyond int32 on JAX without x64.

    Examples
    --------
    >>> from_input_ids([[0, 31414, 232, 2, 1, 1]], padding_idx=1).tolist()
    [[2, 3, 4, 5, 1, 1]]
    >>> from_input_ids([[8, 9]], padding_idx=1, past_length=4).tolist()
    [[6, 7]]
    """
    xp, ids, _, kind, wide, dtype = _inputs(input_ids, backend, "input_ids")
    if kind != "int":
        _allow(xp, ids, kind, "input_ids", "int")
    pad = padding_idx if type(padding_idx) is int else _integer(padding_idx, "padding_idx")
    past = past_length  # a plain int >= 0 is the common case, without the general check
    if type(past) is not int or past < 0:
        past = positive_int(past_length, "past_length", minimum=0)
    shape = _rank(ids, "input_ids", 1, "(..., seq)")
    _check_fits(xp, wide, "the largest position id", pad, pad + past + int(shape[-1] or 0))
    keep = ids != pad
    return xp.fill_where(xp.cumsum(keep, -1, dtype) + (pad + past), ~keep, pad)


# --------------------------------------------------------------------------- packed sequences


@overload
def from_cu_seqlens(
    cu_seqlens: HostArrayLike,
    *,
    total_length: int | None = None,
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def from_cu_seqlens(
    cu_seqlens: TorchTensor, *, total_length: int | None = None, backend: None = None
) -> TorchTensor: ...


@overload
def from_cu_seqlens(
    cu_seqlens: JaxArray, *, total_length: int | None = None, backend: None = None
) -> JaxArray: ...


@overload
def from_cu_seqlens(
    cu_seqlens: Any, *, total_length: int | None = None, backend: TorchBackend
) -> TorchTensor: ...


@overload
def from_cu_seqlens(
    cu_seqlens: Any, *, total_length: int | None = None, backend: JaxBackend
) -> JaxArray: ...


@overload
def from_cu_seqlens(
    cu_seqlens: Any, *, total_length: int | None = None, backend: TensorFlowBackend
) -> TFTensor: ...


@overload
def from_cu_seqlens(
    cu_seqlens: TFTensor, *, total_length: int | None = None, backend: None = None
) -> TFTensor: ...


@overload
def from_cu_seqlens(
    cu_seqlens: Any, *, total_length: int | None = None, backend: BackendLike | None = None
) -> Array: ...


def from_cu_seqlens(
    cu_seqlens: Any, *, total_length: int | None = None, backend: BackendLike | None = None
) -> Array:
    """Position ids of packed sequences from their cumulative lengths.

    ``cu_seqlens = [0, n_1, n_1 + n_2, ...]`` (flash-attention's varlen input) packs
    sequences of lengths ``n_1, n_2, ...`` one after the other; token ``t`` gets its
    place in its own sequence, ``t - cu_seqlens[k]`` for the last ``k`` with
    ``cu_seqlens[k] <= t``. ``[0, 3, 5]`` gives ``[0, 1, 2, 0, 1]``.

    Parameters
    ----------
    cu_seqlens : array of int, shape (n + 1,)
        Starting at 0 and non-decreasing (an empty sequence repeats a value).
    total_length : int, optional
        The number of tokens, the output's length: required for framework arrays (it
        sizes the output, and pe_core does not read ``cu_seqlens[-1]`` back from a
        device; pass the packed input's ``shape[0]``); ``cu_seqlens[-1]`` by default
        for NumPy and Python input. Tokens from ``cu_seqlens[-1]`` on (trailing
        padding) count as one more sequence; a shorter ``total_length`` keeps the first
        ``total_length`` ids.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (total_length,)
        int64 (int32 on JAX without x64), on ``cu_seqlens``' backend and device.

    Raises
    ------
    TypeError
        Non-integer ``cu_seqlens`` or ``total_length``; a framework array without
        ``total_length``.
    ValueError
        Not 1-D or empty; for NumPy and Python input, a first value other than 0 or a
        decrease (the value and its index are named).

    Notes
    -----
    The values of a framework array are not read on the host, so the two value checks
    cannot raise for them. They run on the device instead, without a synchronisation:
    an invalid ``cu_seqlens`` gives ``-1`` at every place, an id no embedding table
    accepts, never plausible positions.

    Examples
    --------
    >>> from_cu_seqlens([0, 3, 5]).tolist()
    [0, 1, 2, 0, 1]
    >>> from_cu_seqlens([0, 2, 2, 3], total_length=5).tolist()  # an empty one, 2 padding
    [0, 1, 0, 0, 1]
    """
    xp, cu, host, kind, wide, dtype = _inputs(cu_seqlens, backend, "cu_seqlens")
    _allow(xp, cu, kind, "cu_seqlens", "int")
    shape = _rank(cu, "cu_seqlens", (1,), "(n + 1,)")
    if shape[0] == 0:
        raise ValueError("cu_seqlens must hold at least one value (its leading 0). Received: []")
    if host is not None:
        values = host.astype(np.int64, copy=False)
        if values[0] != 0:
            raise ValueError(f"cu_seqlens must start at 0. Received: {values[0]} at index 0")
        decreases = values[1:] < values[:-1]
        if decreases.any():
            k = int(np.argmax(decreases)) + 1
            raise ValueError(
                "cu_seqlens must be non-decreasing (cumulative lengths). Received: "
                f"{values[k]} at index {k} after {values[k - 1]}"
            )
        if total_length is None:
            total_length = int(values[-1])
    elif total_length is None:
        raise TypeError(
            f"from_cu_seqlens needs total_length= for a {xp.name} array: it sizes the "
            "output, and pe_core does not read cu_seqlens[-1] back from the device. Pass "
            "the packed input's length (its shape[0])."
        )
    total = positive_int(total_length, "total_length", minimum=0)
    if wide == "int32":
        _check_fits(xp, wide, "total_length", total)
    if xp.dtype_of(cu) != wide:
        cu = xp.astype(cu, dtype)
    tokens = xp.arange(total, dtype, like=cu)
    index = xp.searchsorted(cu, tokens, side="right") - 1
    if host is None:  # checked on the host, cu_seqlens starts at 0 and index is >= 0
        index = xp.where(index >= 0, index, 0)  # < 0 only where cu_seqlens[0] > 0: flagged
    if xp.dtype_of(index) != wide:
        index = xp.astype(index, dtype)
    out = tokens - xp.take(cu, index, axis=0)
    if host is not None:
        return out
    # The value checks, on the device: no synchronisation, -1 everywhere if they fail.
    bad = xp.sum(cu[1:] < cu[:-1], 0, dtype) + xp.astype(cu[0] != 0, dtype)
    return xp.where(bad == 0, out, -1)


# --------------------------------------------------------------------------- table cells


@overload
def from_table_cells(
    token_type_ids: HostArrayLike,
    *,
    max_position_embeddings: int | None = None,
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def from_table_cells(
    token_type_ids: TorchTensor, *, max_position_embeddings: int | None = None, backend: None = None
) -> TorchTensor: ...


@overload
def from_table_cells(
    token_type_ids: JaxArray, *, max_position_embeddings: int | None = None, backend: None = None
) -> JaxArray: ...


@overload
def from_table_cells(
    token_type_ids: Any, *, max_position_embeddings: int | None = None, backend: TorchBackend
) -> TorchTensor: ...


@overload
def from_table_cells(
    token_type_ids: Any, *, max_position_embeddings: int | None = None, backend: JaxBackend
) -> JaxArray: ...


@overload
def from_table_cells(
    token_type_ids: Any, *, max_position_embeddings: int | None = None, backend: TensorFlowBackend
) -> TFTensor: ...


@overload
def from_table_cells(
    token_type_ids: TFTensor, *, max_position_embeddings: int | None = None, backend: None = None
) -> TFTensor: ...


@overload
def from_table_cells(
    token_type_ids: Any,
    *,
    max_position_embeddings: int | None = None,
    backend: BackendLike | None = None,
) -> Array: ...


def from_table_cells(
    token_type_ids: Any,
    *,
    max_position_embeddings: int | None = None,
    backend: BackendLike | None = None,
) -> Array:
    """TAPAS's position ids with ``reset_position_index_per_cell``: the count restarts
    in every table cell.

    Token ``t`` gets ``t - f``, where ``f`` is the first token of its cell: the first
    token of the same row with the same column id and row id. The question and the
    padding (column 0, row 0) form one cell that starts at 0, so they keep their
    absolute positions. With ``max_position_embeddings`` the ids are capped at
    ``max_position_embeddings - 1``. These are the ``position_ids`` of transformers'
    ``TapasEmbeddings.forward`` for a config with ``reset_position_index_per_cell=True``
    (its ``reduce_min`` over the product of the column and row index maps), without
    needing the type vocabulary sizes.

    Parameters
    ----------
    token_type_ids : array of int, shape (..., seq, k), k >= 3
        TAPAS's token types: ``[..., 1]`` is the column id and ``[..., 2]`` the row id
        (the other types are not used).
    max_position_embeddings : int, optional
        The position table's size (TAPAS's config, 1024 by default there): ids are at
        most one less. No cap by default.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the ids' backend and device.

    Raises
    ------
    TypeError
        Ids that are not integers; a non-integer ``max_position_embeddings``.
    ValueError
        Fewer than 2 axes or fewer than 3 token types; ``max_position_embeddings < 1``.

    Notes
    -----
    Cells are found by comparing every pair of tokens of a sequence, ``(..., seq,
    seq)`` booleans: 262 144 per sequence of TAPAS's 512 tokens.

    Examples
    --------
    >>> types = [[[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 1, 1], [0, 1, 1], [0, 2, 1]]]
    >>> from_table_cells(types).tolist()  # question, header of column 1, two cells
    [[0, 1, 0, 0, 1, 0]]
    """
    xp, types, _ = _namespace(token_type_ids, backend, "token_type_ids")
    _kind(xp, types, "token_type_ids", "int")
    shape = _rank(types, "token_type_ids", 2, "(..., seq, k) with k >= 3")
    if shape[-1] is not None and shape[-1] < 3:
        raise ValueError(
            "token_type_ids must have shape (..., seq, k) with k >= 3 (column ids at [..., 1], "
            f"row ids at [..., 2]). Received: shape {tuple(shape)}"
        )
    cap = None
    if max_position_embeddings is not None:
        cap = positive_int(max_position_embeddings, "max_position_embeddings") - 1
    _, dtype = _wide(xp)
    seq = int(shape[-2])
    column, row = types[..., 1], types[..., 2]
    same = (xp.expand_dims(column, -1) == xp.expand_dims(column, -2)) & (
        xp.expand_dims(row, -1) == xp.expand_dims(row, -2)
    )  # (..., seq, seq): token i and token j share a cell
    # the first token of i's cell: the number of tokens before the first match
    first = xp.sum(xp.cumsum(same, -1, dtype) == 0, -1, dtype)
    out = xp.arange(seq, dtype, like=types) - first
    if cap is not None and cap < seq - 1:  # ids never exceed seq - 1 otherwise
        out = xp.fill_where(out, out > cap, cap)
    return out


# --------------------------------------------------------------------------- NaViT buckets


def _torch_arange_float32(start: float, end: float, step: float, vector_width: int) -> np.ndarray:
    """``torch.arange(start, end, step)`` in float32 as PyTorch's CPU kernel rounds it.

    The length is ``ceil((end - start) / step)``; values are ``start + step * i`` in
    float64 rounded to float32, except in the vectorised part of the loop (blocks of
    ``2 * vector_width``), where each vector of ``vector_width`` values starts from its
    first value rounded to float32 and adds ``j * step`` in float64 before rounding
    again (``Vectorized<float>::arange(base, step)``). ``vector_width=0``: no vectors.
    """
    size = max(math.ceil((end - start) / step), 0)
    index = np.arange(size, dtype=np.float64)
    serial = (start + step * index).astype(np.float32)
    if vector_width == 0:
        return serial
    vectorised = (size // (2 * vector_width)) * (2 * vector_width)
    i = np.arange(vectorised)
    first = i - i % vector_width
    base = (start + step * first.astype(np.float64)).astype(np.float32).astype(np.float64)
    serial[:vectorised] = (base + (i - first) * step).astype(np.float32)
    return serial


@functools.lru_cache(maxsize=64)
def _navit_table(
    num_patches_per_side: int, max_patches: int, rule: str, vector_width: int
) -> tuple[tuple[int, ...], ...]:
    n = num_patches_per_side
    rows: list[tuple[int, ...]] = [(0,) * max_patches]  # an image of no patches: all padding
    index = np.arange(max_patches)
    if rule == "exact":
        for count in range(1, max_patches + 1):
            rows.append(tuple(int(v) for v in np.minimum(index * n // count, n - 1)))
        return tuple(rows)
    boundaries = _torch_arange_float32(1 / n, 1.0, 1 / n, vector_width)
    ceiling = np.float32(1.0 - 1e-6)
    for count in range(1, max_patches + 1):
        if rule == "transformers":
            step = np.float32(1.0) / np.float32(count)
            coords = np.minimum(index.astype(np.float32) * step, ceiling)
        else:  # transformers4: torch.arange(0, 1 - 1e-6, 1 / count) per image, where
            # count is a 0-d integer tensor: the step is 1 / count rounded to float32
            step64 = float(np.float32(1.0) / np.float32(count))
            inside = _torch_arange_float32(0.0, 1 - 1e-6, step64, vector_width)
            coords = np.full(max_patches, ceiling, dtype=np.float32)
            coords[: min(len(inside), max_patches)] = inside[:max_patches]
        # torch.bucketize(coords, boundaries, right=True): boundaries <= coordinate
        buckets = np.searchsorted(boundaries, coords, side="right")
        rows.append(tuple(int(v) for v in buckets))
    return tuple(rows)


def _navit_rows(n: int, size: int, rule: str, width: int) -> tuple[tuple[int, ...], ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _navit_table(n, size, rule, width)


def navit_bucket_table(
    num_patches_per_side: int,
    max_patches: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
) -> np.ndarray:
    """The bucket of every patch row (or column) ``i`` of an image ``count`` patches
    high (or wide): ``table[count, i]``, as :func:`from_patch_attention_mask` uses it.

    Parameters
    ----------
    num_patches_per_side : int
        The position grid's side ``n`` (``image_size // patch_size``): buckets are
        ``0 .. n - 1``.
    max_patches : int
        The largest image side in patches: the table has shape
        ``(max_patches + 1, max_patches)`` (row 0, no patches, is all 0).
    rule, vector_width
        As for :func:`from_patch_attention_mask`.

    Returns
    -------
    numpy.ndarray
        int64.

    Examples
    --------
    >>> navit_bucket_table(4, 3, rule="exact").tolist()
    [[0, 0, 0], [0, 3, 3], [0, 2, 3], [0, 1, 2]]
    """
    n = positive_int(num_patches_per_side, "num_patches_per_side")
    m = positive_int(max_patches, "max_patches")
    rule = choice(rule, "rule", NAVIT_RULES)  # type: ignore[assignment]
    width = _vector_width(vector_width)
    return np.array(_navit_table(n, m, rule, width), dtype=np.int64)


def _vector_width(value: object) -> int:
    width = positive_int(value, "vector_width", minimum=0)
    if width & (width - 1):
        raise ValueError(
            f"vector_width must be 0 or a power of two (floats per CPU vector). Received: {value!r}"
        )
    return width


@overload
def from_patch_attention_mask(
    patch_attention_mask: HostArrayLike,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: TorchTensor,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: None = None,
) -> TorchTensor: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: JaxArray,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: None = None,
) -> JaxArray: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: Any,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: TorchBackend,
) -> TorchTensor: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: Any,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: JaxBackend,
) -> JaxArray: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: Any,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: TensorFlowBackend,
) -> TFTensor: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: TFTensor,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: None = None,
) -> TFTensor: ...


@overload
def from_patch_attention_mask(
    patch_attention_mask: Any,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: BackendLike | None = None,
) -> Array: ...


def from_patch_attention_mask(
    patch_attention_mask: Any,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: BackendLike | None = None,
) -> Array:
    """NaViT's fractional position ids of variable-size images (Idefics2, Idefics3,
    SmolVLM): the ``position_ids`` of transformers' ``Idefics2VisionEmbeddings.forward``.

    An image ``h x w`` patches large (its patch mask's ``True`` rows and columns) is
    mapped onto the learned ``n x n`` grid (``n = num_patches_per_side``): patch
    ``(i, j)`` gets ``bucket(i, h) * n + bucket(j, w)``, where ``bucket(i, h)`` is the
    bucket of the fractional coordinate ``i / h`` among the boundaries ``1/n, 2/n,
    ...`` (``torch.bucketize(..., right=True)``). Padding patches get 0.

    The buckets depend on float32 rounding where ``i / h`` falls on a boundary
    ``k / n`` (an image whose side is a multiple of ``n``'s factors), and transformers'
    rounding has changed over versions and depends on the CPU: ``rule`` and
    ``vector_width`` choose whose numbers to reproduce. They are found once per
    configuration on the host (a small ``(max_side + 1, max_side)`` table of integers)
    and gathered on the device, so every backend gives the same numbers exactly.

    Parameters
    ----------
    patch_attention_mask : array of bool or int, shape (batch, max_h, max_w)
        ``True`` on an image's patches, ``False`` on padding. As transformers, each
        image's height is the count of ``True`` in its first column and its width the
        count in its first row (the processors' masks are top-left rectangles).
    num_patches_per_side : int
        ``image_size // patch_size`` of the vision config (70 for Idefics2's 980/14,
        Idefics3's 364/14 is 26, SmolVLM's 512/16 is 32).
    rule : {"transformers", "transformers4", "exact"}
        ``"transformers"``: transformers 5's vectorised code, coordinates
        ``float32(i) * (1 / float32(h))`` clamped at ``float32(1 - 1e-6)``.
        ``"transformers4"``: transformers 4's loop over images, coordinates
        ``torch.arange(0, 1 - 1e-6, 1 / h)`` in float32 (the code the released
        checkpoints were trained with); the two differ for some sizes (``n = 2``:
        patch 29 of ``h = 58``, patch 55 of ``h = 110``). ``"exact"``: real-number arithmetic, ``bucket(i, h) =
        floor(i * n / h)``.
    vector_width : int
        For the two transformers rules: floats per CPU vector of the PyTorch build that
        made the boundaries ``torch.arange(1/n, 1, 1/n)`` (PyTorch rounds the values of
        its vectorised loop differently): 8 for AVX2 (the default), 16 for AVX512, 0 for
        the scalar loop. ``torch.backends.cpu.get_cpu_capability()`` tells.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (batch, max_h * max_w)
        int64 (int32 on JAX without x64), on the mask's backend and device: the
        ``position_embedding`` indices, row-major over the patch grid.

    Raises
    ------
    TypeError
        A mask that is not booleans or integers; non-integer options.
    ValueError
        A mask that is not 3-D; host mask values other than 0 and 1; an unknown
        ``rule``; a ``vector_width`` that is not 0 or a power of two.

    Examples
    --------
    >>> mask = [[[1, 1, 1, 0], [1, 1, 1, 0]]]  # one image, 2 x 3 patches of 2 x 4
    >>> from_patch_attention_mask(mask, 4).tolist()
    [[0, 1, 2, 0, 8, 9, 10, 0]]
    """
    xp, mask, host = _namespace(patch_attention_mask, backend, "patch_attention_mask")
    n = positive_int(num_patches_per_side, "num_patches_per_side")
    rule = choice(rule, "rule", NAVIT_RULES)  # type: ignore[assignment]
    width = _vector_width(vector_width)
    kind = _kind(xp, mask, "patch_attention_mask")
    shape = _rank(mask, "patch_attention_mask", (3,), "(batch, max_h, max_w)")
    if host is not None:
        _check_binary(host, "patch_attention_mask")
    max_h, max_w = int(shape[1]), int(shape[2])
    wide, dtype = _wide(xp)
    if wide == "int32":
        _check_fits(xp, wide, "the largest position id", n * n - 1)
    keep = mask if kind == "bool" else mask != 0
    heights = xp.sum(keep[:, :, 0], 1, dtype)  # (batch,)
    widths = xp.sum(keep[:, 0, :], 1, dtype)
    rows = xp.take(_table(xp, n, max_h, rule, width, wide, mask), heights, axis=0)
    cols = xp.take(_table(xp, n, max_w, rule, width, wide, mask), widths, axis=0)
    ids = xp.expand_dims(rows * n, 2) + xp.expand_dims(cols, 1)  # (batch, max_h, max_w)
    return xp.where(xp.merge_last_two(keep), xp.merge_last_two(ids), 0)


def _table(xp: Namespace, n: int, size: int, rule: str, width: int, wide: str, like: Any) -> Any:
    """The ``(size + 1, size)`` bucket table as an array of ``xp`` beside ``like``."""
    key = ("navit_buckets", n, size, rule, width)

    def build() -> np.ndarray:
        return np.array(_navit_table(n, size, rule, width), dtype=wide)

    if xp.is_tracing() or xp.is_traced(like):
        # a constant of the traced program, from plain Python data
        rows = xp.host_constant(_navit_rows, n, size, rule, width)
        return xp.asarray(rows, dtype=xp.dtype(wide), like=like)
    return device_tables.cached(xp, key, like, wide, build, private=True)
