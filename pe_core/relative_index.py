"""Relative index tables: the integer matrices that gather a learned bias or embedding.

Many models learn one bias (or one embedding) per *relative position* and gather it
with a precomputed integer table. The tables are small, exact integers; this module
builds each one once on the host from Python sizes (static under ``jax.jit``,
``torch.compile`` and ``tf.function``) and hands it over as an integer array of the
backend asked for (int64; int32 on JAX without x64, the widest integer it has):

* :func:`relative_position_index`: Swin's window index and BEiT's, class token
  included (``prefix_tokens=1``); :func:`num_relative_distance` is its table's length
  and :func:`relative_position_bias` the gathered bias ``(heads, N, N)``;
* :func:`swinv2_coords_table`: SwinV2's log-spaced continuous coordinates;
* :func:`clipped_relative_position`: Shaw et al.'s clipped distance index
  (W2V-BERT, SpeechT5, Granite Speech), with its own left and right limits;
* :func:`levit_attention_offsets`: LeViT's attention-bias offsets;
* :func:`deberta_log_bucket` and :func:`deberta_relative_position`: DeBERTa's
  log-bucketed relative positions, computed with integer comparisons only, also on
  device and traced arrays;
* :func:`esmfold_relative_bins`: ESMFold's clamped residue distances with the masked bin;
* :func:`funnel_relative_positions`, :func:`funnel_pooled_positions` and
  :func:`funnel_block_positions`: Funnel Transformer's relative distances and pooled
  positions (its sinusoid embeddings are in :mod:`pe_core.funnel`).

>>> from pe_core.relative_index import relative_position_index
>>> relative_position_index(2).tolist()  # Swin, a 2 x 2 window
[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
"""

from __future__ import annotations

import decimal
import functools
import math
import numbers
from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np

from pe_core._kernel.inputs import check_request_size, choose_backend
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
from pe_core.validation import choice, positive_int
from pe_core_backends import backend_of, canonical_backend, get_namespace

__all__ = [
    "DEBERTA_ARITHMETICS",
    "clipped_relative_position",
    "deberta_log_bucket",
    "deberta_relative_position",
    "esmfold_relative_bins",
    "funnel_block_positions",
    "funnel_pooled_positions",
    "funnel_relative_positions",
    "levit_attention_offsets",
    "num_relative_distance",
    "relative_position_bias",
    "relative_position_index",
    "swinv2_coords_table",
]

DebertaArithmetic = Literal["exact", "float32"]

#: The arithmetics :func:`deberta_log_bucket` can follow.
DEBERTA_ARITHMETICS: tuple[str, ...] = ("exact", "float32")


# --------------------------------------------------------------------------- helpers


def _window(value: object, name: str = "window_size") -> tuple[int, int]:
    """``(height, width)`` from an int or a pair of ints, each >= 1."""
    message = (
        f"{name} must be an integer >= 1 or a pair of them (height, width). Received: {value!r}"
    )
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(message)
        items = tuple(value)
    else:
        items = (value, value)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise TypeError(message)
        if item < 1:
            raise ValueError(message)
    return int(items[0]), int(items[1])


def _int_namespace(backend: BackendLike | None, like: Any) -> Any:
    if backend is None and like is not None:
        backend = backend_of(like)
    xp, _ = choose_backend(None, backend)
    return xp


def _wide(xp: Any) -> str:
    """The integer dtype of the results: int64, int32 where the backend has no int64."""
    return "int64" if xp.supports("int64") else "int32"


def _place(xp: Any, host: np.ndarray, like: Any = None, what: str = "the table") -> Any:
    """A host integer table as an array of ``xp`` (int64, or int32 where that is the
    widest; values that do not fit are refused)."""
    wide = _wide(xp)
    if wide == "int32" and host.size:
        info = np.iinfo(np.int32)
        if host.min() < info.min or host.max() > info.max:
            raise ValueError(
                f"{what} does not fit in int32, the widest integer of backend {xp.name!r} now "
                f"(enable jax_enable_x64 for int64). Received values from {host.min()} to "
                f"{host.max()}"
            )
    host = np.array(host, dtype=wide)  # a writable, contiguous copy
    return xp.from_host(host, like=like)


def _anchor(xp: Any, like: Any) -> Any:
    """``like`` when it is an array of ``xp`` (whose device a new table follows)."""
    return like if like is not None and backend_of(like) == xp.name else None


def _host_values(kind: str, *args: Any) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """The table ``kind`` as plain Python data: its shape and its values."""
    table = _TABLES[kind](*args)
    return tuple(int(n) for n in table.shape), tuple(table.ravel().tolist())


def _table(xp: Any, kind: str, args: tuple[Any, ...], like: Any, dtype: str | None = None) -> Any:
    """The host table ``_TABLES[kind](*args)`` as an array of ``xp``: integers as
    :func:`_place` gives them, or ``dtype``. While a compiler traces (``torch.compile``)
    the table is built once, outside the trace, and embedded as a constant."""
    if not xp.is_tracing():
        host = _TABLES[kind](*args)
        if dtype is None:
            return _place(xp, host, like)
        return xp.from_host(np.array(host, dtype=dtype), like=like)
    shape, values = xp.host_constant(_host_values, kind, *args)
    name = dtype or _wide(xp)
    if name == "int32" and values and (min(values) < -(2**31) or max(values) >= 2**31):
        raise ValueError(
            f"the table does not fit in int32, the widest integer of backend {xp.name!r} now "
            "(enable jax_enable_x64 for int64)"
        )
    return xp.reshape(xp.asarray(values, dtype=xp.dtype(name), like=like), shape)


def _check_size(n_elements: int, what: str) -> None:
    check_request_size(n_elements, "int64", what=what, extra_bytes=16 * n_elements)


def _holds_bool(obj: Any) -> bool:
    """Whether a (nested) list or tuple holds a Python bool."""
    if isinstance(obj, bool):
        return True
    return isinstance(obj, (list, tuple)) and any(_holds_bool(v) for v in obj)


def _as_integers(obj: Any, xp: Any, what: str) -> Any:
    """``obj`` (Python integers, NumPy or any backend's integer array) as an integer
    array of ``xp``: int32 or int64 (int64 for host input, int32 on JAX without x64)."""
    source = backend_of(obj)
    if source is None:
        array = np.asarray(obj)
        if array.dtype.kind == "b" or _holds_bool(obj):
            raise TypeError(f"{what} must be integers, not booleans. Received: {obj!r}")
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise TypeError(f"{what} must be integers. Received dtype: {array.dtype}")
        if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{what} must fit in int64. Received a value of {array.max()}")
        return _place(xp, array.astype(np.int64), what=what)
    if source != xp.name:
        values = get_namespace(source).concrete(obj)
        if values is None:
            raise TypeError(
                f"{what} is a traced {source} value and cannot be moved to another backend; "
                "call with backend=None (or the same backend) inside compiled code."
            )
        if values.dtype.kind not in "iu":
            raise TypeError(f"{what} must be integers. Received dtype: {values.dtype}")
        return _place(xp, values.astype(np.int64), what=what)
    name = xp.dtype_of(obj)
    if xp.kind(name) != "int":
        raise TypeError(f"{what} must be integers. Received dtype: {name}")
    if name not in ("int32", "int64"):
        obj = xp.astype(obj, xp.dtype(_wide(xp)))
    return obj


# --------------------------------------------------------------------------- Swin / BEiT


def num_relative_distance(window_size: int | tuple[int, int], *, prefix_tokens: int = 0) -> int:
    """Rows of the learned table that :func:`relative_position_index` gathers from.

    ``(2 Wh - 1) (2 Ww - 1)`` window offsets, and three more with a class token
    (BEiT's ``num_relative_distance``: class to token, token to class, class to class).

    Examples
    --------
    >>> num_relative_distance(7), num_relative_distance((14, 14), prefix_tokens=1)
    (169, 732)
    """
    height, width = _window(window_size)
    prefix = _prefix(prefix_tokens)
    return (2 * height - 1) * (2 * width - 1) + (3 if prefix else 0)


def _prefix(value: object) -> int:
    prefix = positive_int(value, "prefix_tokens", minimum=0)
    if prefix > 1:
        raise ValueError(
            "prefix_tokens must be 0 (Swin: window tokens only) or 1 (BEiT, Data2VecVision: "
            f"one class token before the window tokens). Received: {prefix}"
        )
    return prefix


@functools.lru_cache(maxsize=32)
def _window_index(height: int, width: int, prefix: int) -> np.ndarray:
    grid_rows, grid_cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    rows, cols = grid_rows.reshape(-1), grid_cols.reshape(-1)  # row-major tokens
    d_row = rows[:, None] - rows[None, :] + (height - 1)
    d_col = cols[:, None] - cols[None, :] + (width - 1)
    index = d_row * (2 * width - 1) + d_col
    if prefix:
        distances = (2 * height - 1) * (2 * width - 1)
        n = height * width + 1
        full = np.empty((n, n), dtype=np.int64)
        full[1:, 1:] = index
        full[0, :] = distances  # class token to every token
        full[:, 0] = distances + 1  # every token to the class token
        full[0, 0] = distances + 2  # class token to itself
        index = full
    index = index.astype(np.int64)
    index.setflags(write=False)
    return index


@overload
def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: NumpyBackend | None = None,
    like: None = None,
) -> NDArray: ...


@overload
def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: TorchBackend,
    like: None = None,
) -> TorchTensor: ...


@overload
def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: JaxBackend,
    like: None = None,
) -> JaxArray: ...


@overload
def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: TensorFlowBackend,
    like: None = None,
) -> TFTensor: ...


@overload
def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array: ...


def relative_position_index(
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """Swin's (and BEiT's) relative position index of a window.

    Token ``t = r * Ww + c`` of a ``Wh x Ww`` window (row-major) attends to token
    ``s = r' * Ww + c'`` with the learned bias of row
    ``(r - r' + Wh - 1) * (2 Ww - 1) + (c - c' + Ww - 1)`` of a
    ``((2 Wh - 1) (2 Ww - 1), heads)`` table. With ``prefix_tokens=1`` a class token
    comes first (BEiT, Data2VecVision): its row and column use three extra table rows,
    ``D`` (class to token), ``D + 1`` (token to class) and ``D + 2`` (class to class),
    ``D = (2 Wh - 1) (2 Ww - 1)``.

    Parameters
    ----------
    window_size : int or (int, int)
        The window ``(Wh, Ww)``; an int for a square window. Each >= 1.
    prefix_tokens : int
        0 (Swin, SwinV2, Swin2SR, Donut) or 1 (BEiT's class token).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to return the table; the backend of ``like``, else NumPy.
    like : array, optional
        An array whose backend and device the table follows.

    Returns
    -------
    array
        ``(N, N)`` integers, ``N = Wh * Ww + prefix_tokens``, in
        ``[0, num_relative_distance(window_size, prefix_tokens=prefix_tokens))``: int64
        (int32 on JAX without x64). transformers' Swin stores it flattened
        (``relative_position_index.view(-1)``); BEiT's
        ``generate_relative_position_index`` returns this matrix.

    Raises
    ------
    TypeError, ValueError
        A window size that is not an int >= 1 (or a pair of them); ``prefix_tokens``
        other than 0 or 1.

    Examples
    --------
    >>> relative_position_index(1, prefix_tokens=1).tolist()  # one token and the class token
    [[3, 1], [2, 0]]
    >>> relative_position_index((2, 3)).shape
    (6, 6)
    """
    height, width = _window(window_size)
    prefix = _prefix(prefix_tokens)
    xp = _int_namespace(backend, like)
    n = height * width + prefix
    _check_size(n * n, "relative_position_index")
    return _table(xp, "window", (height, width, prefix), _anchor(xp, like))


@overload
def relative_position_bias(
    table: HostArrayLike,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def relative_position_bias(
    table: TorchTensor,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: None = None,
) -> TorchTensor: ...


@overload
def relative_position_bias(
    table: JaxArray,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: None = None,
) -> JaxArray: ...


@overload
def relative_position_bias(
    table: Array,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: TorchBackend,
) -> TorchTensor: ...


@overload
def relative_position_bias(
    table: Array, window_size: int | tuple[int, int], *, prefix_tokens: int = 0, backend: JaxBackend
) -> JaxArray: ...


@overload
def relative_position_bias(
    table: Array,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: TensorFlowBackend,
) -> TFTensor: ...


@overload
def relative_position_bias(
    table: TFTensor,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: None = None,
) -> TFTensor: ...


@overload
def relative_position_bias(
    table: Array,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
) -> Array: ...


def relative_position_bias(
    table: Array,
    window_size: int | tuple[int, int],
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
) -> Array:
    """The Swin (or BEiT) attention bias: the learned table gathered by the index.

    ``bias[h, i, j] = table[relative_position_index(window_size)[i, j], h]``, the
    ``relative_position_bias`` of transformers' ``SwinSelfAttention`` and
    ``BeitRelativePositionBias`` (before the ``unsqueeze(0)``).

    Parameters
    ----------
    table : array
        The learned ``(num_relative_distance(window_size, prefix_tokens=...), heads)``
        table (``relative_position_bias_table``) of any backend; gradients flow to it
        (a gather).
    window_size, prefix_tokens
        As for :func:`relative_position_index`.
    backend : str, optional
        The table's backend, when the caller knows it (found from the table otherwise;
        the layers pass theirs, which ``torch.compile`` needs for a ``Parameter``).

    Returns
    -------
    array
        ``(heads, N, N)`` on the table's backend and device, in its dtype: add it to the
        scores ``(batch, heads, N, N)``.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.arange(18.0).reshape(9, 2)  # row r, head h -> 2 r + h
    >>> relative_position_bias(table, 2)[1].tolist()
    [[9.0, 7.0, 3.0, 1.0], [11.0, 9.0, 5.0, 3.0], [15.0, 13.0, 9.0, 7.0], [17.0, 15.0, 11.0, 9.0]]
    """
    rows = num_relative_distance(window_size, prefix_tokens=prefix_tokens)
    source = canonical_backend(backend) if backend is not None else backend_of(table)
    if source is None:
        table = np.asarray(table)
        source = "numpy"
    shape = tuple(table.shape)
    if len(shape) != 2 or shape[0] != rows:
        raise ValueError(
            f"table must have shape (num_relative_distance, heads) = ({rows}, heads) for "
            f"window_size={window_size!r}, prefix_tokens={prefix_tokens!r}. Received: shape {shape}"
        )
    xp = get_namespace(source)
    height, width = _window(window_size)
    n = height * width + _prefix(prefix_tokens)
    flat = xp.reshape(_table(xp, "window", (height, width, _prefix(prefix_tokens)), table), (-1,))
    gathered = xp.matrix_transpose(xp.take(table, flat, axis=0))  # (heads, N * N)
    return xp.reshape(gathered, (int(shape[1]), n, n))


# --------------------------------------------------------------------------- SwinV2


def swinv2_coords_table(
    window_size: int | tuple[int, int],
    *,
    pretrained_window_size: int | tuple[int, int] | None = None,
    backend: BackendLike | None = None,
    like: Array | None = None,
    dtype: str = "float32",
) -> Array:
    """SwinV2's log-spaced coordinates of the window offsets (the input of its bias MLP).

    For each offset ``(dy, dx)``, ``|dy| < Wh``, ``|dx| < Ww``, the pair
    ``f(8 dy / (P_h - 1)), f(8 dx / (P_w - 1))`` with ``f(x) = sign(x) log2(|x| + 1) /
    log2(8)`` and ``P`` the pretrained window (the window itself by default): the pretraining
    window's offsets span ``[-log2(9) / 3, log2(9) / 3]``, about ``[-1.057, 1.057]``.

    Parameters
    ----------
    window_size : int or (int, int)
        The window ``(Wh, Ww)``, each >= 1.
    pretrained_window_size : int or (int, int), optional
        The window the model was pretrained with (SwinV2's ``pretrained_window_size``,
        ``0`` there meaning none), each >= 2; the window itself when ``None``.
    backend, like
        Where to return the table, as for :func:`relative_position_index`.
    dtype : {"float32", "float64"}
        The result's dtype; the values are computed in float64 and rounded once.

    Returns
    -------
    array
        ``(2 Wh - 1, 2 Ww - 1, 2)``: transformers' ``relative_coords_table[0]``
        (``Swinv2SelfAttention``). Its row ``dy + Wh - 1``, column ``dx + Ww - 1`` is
        the row ``relative_position_index`` gathers for that offset, once flattened.
        An axis of size 1 has the single offset 0, whose coordinate is 0 (transformers
        divides by ``Ww - 1 = 0`` there when ``Wh > 1`` and gets NaN).

    Examples
    --------
    >>> swinv2_coords_table(2, dtype="float64")[:, 0, 0].round(4).tolist()  # log2(9) / 3
    [-1.0566, 0.0, 1.0566]
    >>> round(float(swinv2_coords_table(3, pretrained_window_size=5)[0, 0, 0]), 6)
    -0.773976
    """
    height, width = _window(window_size)
    if pretrained_window_size is None:
        scale = (height, width)
    else:
        p_h, p_w = _window(pretrained_window_size, "pretrained_window_size")
        if p_h < 2 or p_w < 2:
            raise ValueError(
                "pretrained_window_size must be an integer >= 2 or a pair of them "
                f"(None for the window itself). Received: {pretrained_window_size!r}"
            )
        scale = (p_h, p_w)
    name = choice(dtype, "dtype", ("float32", "float64"))
    xp = _int_namespace(backend, like)
    _check_size((2 * height - 1) * (2 * width - 1) * 2, "swinv2_coords_table")
    if name == "float64" and not xp.supports("float64"):
        raise ValueError(f"backend {xp.name!r} has no float64 now. Received: dtype={dtype!r}")
    return _table(xp, "swinv2", (height, width, scale), _anchor(xp, like), dtype=name)


@functools.lru_cache(maxsize=32)
def _coords_table(height: int, width: int, scale: tuple[int, int]) -> np.ndarray:
    axes = []
    for size, pre in zip((height, width), scale, strict=True):
        offsets = np.arange(-(size - 1), size, dtype=np.float64)
        if pre > 1:
            offsets = offsets / (pre - 1)
        x = offsets * 8.0
        axes.append(np.sign(x) * np.log2(np.abs(x) + 1.0) / 3.0)  # log2(8) = 3
    dy, dx = np.meshgrid(axes[0], axes[1], indexing="ij")
    table = np.stack([dy, dx], axis=-1)
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- Shaw


def clipped_relative_position(
    query_length: int,
    key_length: int,
    *,
    max_left: int,
    max_right: int | None = None,
    offset: int | None = None,
    query_minus_key: bool = False,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """Shaw et al.'s clipped relative position index: ``clip(d, -max_left, max_right)
    + offset``.

    ``d = j - i`` for query ``i`` and key ``j`` (``i - j`` with ``query_minus_key``);
    each distance beyond the limits shares the last index of its side. The models
    differ in their limits, direction and offset:

    ======================  ==========================================================
    model (transformers)    call
    ======================  ==========================================================
    W2V-BERT relative_key   ``max_left=left_max_position_embeddings,
                            max_right=right_max_position_embeddings``
    SpeechT5                ``max_left=max_length, max_right=max_length - 1,
                            query_minus_key=True`` (``pe_k`` has ``2 * max_length`` rows)
    Granite Speech          ``max_left=context_size, offset=max_pos_emb,
                            query_minus_key=True``
    ======================  ==========================================================

    Parameters
    ----------
    query_length, key_length : int
        Queries ``i = 0 .. query_length - 1`` and keys ``j = 0 .. key_length - 1``, >= 1.
    max_left : int
        Distances below ``-max_left`` are clipped to it, >= 0.
    max_right : int, optional
        Distances above ``max_right`` are clipped to it, >= 0; ``max_left`` by default.
    offset : int, optional
        Added after clipping, >= 0 (``max_left`` by default, so indices start at 0).
    query_minus_key : bool
        ``False``: ``d = key - query``; ``True``: ``d = query - key``.
    backend, like
        Where to return the table, as for :func:`relative_position_index`.

    Returns
    -------
    array
        ``(query_length, key_length)`` integers (int64; int32 on JAX without x64) in
        ``[offset - max_left, offset + max_right]``: the rows of an embedding with
        ``max_left + max_right + 1`` rows when ``offset = max_left``.

    Examples
    --------
    >>> clipped_relative_position(3, 4, max_left=1).tolist()
    [[1, 2, 2, 2], [0, 1, 2, 2], [0, 0, 1, 2]]
    >>> clipped_relative_position(1, 4, max_left=2, max_right=1, query_minus_key=True).tolist()
    [[2, 1, 0, 0]]
    """
    q_len = positive_int(query_length, "query_length")
    k_len = positive_int(key_length, "key_length")
    left = positive_int(max_left, "max_left", minimum=0)
    right = left if max_right is None else positive_int(max_right, "max_right", minimum=0)
    shift = left if offset is None else positive_int(offset, "offset", minimum=0)
    if not isinstance(query_minus_key, (bool, np.bool_)):
        raise TypeError(f"query_minus_key must be True or False. Received: {query_minus_key!r}")
    largest = shift + min(right, (q_len if query_minus_key else k_len) - 1)
    if largest >= 2**63:
        raise ValueError(
            f"the largest index offset + min(max_right, distance) = {largest} does not fit "
            f"in int64. Received: offset={shift}, max_right={right}"
        )
    xp = _int_namespace(backend, like)
    _check_size(q_len * k_len, "clipped_relative_position")
    args = (q_len, k_len, left, right, shift, bool(query_minus_key))
    return _table(xp, "clipped", args, _anchor(xp, like))


def _clipped_host(
    q_len: int, k_len: int, left: int, right: int, shift: int, reverse: bool
) -> np.ndarray:
    distance = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]
    if reverse:
        distance = -distance
    return np.clip(distance, -left, right) + shift


# --------------------------------------------------------------------------- LeViT


def levit_attention_offsets(
    resolution: int,
    *,
    stride: int = 1,
    resolution_out: int | None = None,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """LeViT's attention-bias index: one learned bias per ``(|dy|, |dx|)`` offset.

    Query ``(y, x)`` of the ``resolution_out`` grid sits at ``(y * stride, x *
    stride)`` of the ``resolution`` grid of keys ``(y', x')``; the pair reads the bias
    ``|y stride - y'| * resolution + |x stride - x'|``, the order in which
    transformers' ``LevitAttention`` (``stride=1``) and ``LevitAttentionSubsample``
    number the offsets as they first meet them (their ``attention_bias_idxs``).

    Parameters
    ----------
    resolution : int
        Side of the square grid of keys, >= 1.
    stride : int
        Subsampling stride of the queries, >= 1 (``LevitAttentionSubsample``: 2).
    resolution_out : int, optional
        Side of the grid of queries, at most ``(resolution - 1) // stride + 1`` (the
        default, LeViT's ``resolution_out``).
    backend, like
        Where to return the table, as for :func:`relative_position_index`.

    Returns
    -------
    array
        ``(resolution_out ** 2, resolution ** 2)`` integers in ``[0, resolution ** 2)``,
        the columns of ``attention_biases`` ``(heads, resolution ** 2)``.

    Examples
    --------
    >>> levit_attention_offsets(2).tolist()
    [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    >>> levit_attention_offsets(3, stride=2).shape
    (4, 9)
    """
    res = positive_int(resolution, "resolution")
    step = positive_int(stride, "stride")
    most = (res - 1) // step + 1
    if resolution_out is None:
        out = most
    else:
        out = positive_int(resolution_out, "resolution_out")
        if out > most:
            raise ValueError(
                f"resolution_out must be at most (resolution - 1) // stride + 1 = {most} (a "
                f"query beyond the keys has offsets outside LeViT's table). Received: {out}"
            )
    xp = _int_namespace(backend, like)
    _check_size(out * out * res * res, "levit_attention_offsets")
    return _table(xp, "levit", (res, step, out), _anchor(xp, like))


def _levit_host(res: int, step: int, out: int) -> np.ndarray:
    qy, qx = (
        a.reshape(-1) * step for a in np.meshgrid(np.arange(out), np.arange(out), indexing="ij")
    )
    ky, kx = (a.reshape(-1) for a in np.meshgrid(np.arange(res), np.arange(res), indexing="ij"))
    return np.abs(qy[:, None] - ky[None, :]) * res + np.abs(qx[:, None] - kx[None, :])


# --------------------------------------------------------------------------- ESMFold


def esmfold_relative_bins(residue_index: Any, bins: int, *, mask: Any = None) -> Any:
    """ESMFold's relative position bins of residue indices (``EsmFoldRelativePosition``).

    ``clip(r[..., j] - r[..., i], -bins, bins) + bins + 1`` for residues ``i``, ``j``
    of each sequence, and bin 0 for the pairs where either residue is masked out.

    Parameters
    ----------
    residue_index : integer array
        ``(..., L)`` residue indices on any backend (traced included); Python
        integers become NumPy.
    bins : int
        ESMFold's ``position_bins``, >= 1: the embedding has ``2 * bins + 2`` rows.
    mask : array, optional
        ``(..., L)`` booleans (or 0/1 numbers) of the residues that are present, on the
        backend of ``residue_index``.

    Returns
    -------
    array
        ``(..., L, L)`` integers in ``[0, 2 * bins + 2)`` on the backend of
        ``residue_index``, its integer dtype (int32 or int64).

    Examples
    --------
    >>> esmfold_relative_bins([0, 1, 5], 2).tolist()
    [[3, 4, 5], [2, 3, 5], [1, 1, 3]]
    >>> esmfold_relative_bins([0, 1, 5], 2, mask=[1, 1, 0]).tolist()
    [[3, 4, 0], [2, 3, 0], [0, 0, 0]]
    """
    size = positive_int(bins, "bins")
    source = backend_of(residue_index)
    xp = get_namespace(source or "numpy")
    index = _as_integers(residue_index, xp, "residue_index")
    if len(index.shape) < 1:
        raise ValueError("residue_index must have at least one axis (..., L). Received a scalar")
    diff = xp.expand_dims(index, -2) - xp.expand_dims(index, -1)
    diff = xp.where(diff < -size, xp.zeros_like(diff) - size, diff)
    diff = xp.where(diff > size, xp.zeros_like(diff) + size, diff) + (size + 1)
    if mask is None:
        return diff
    if backend_of(mask) is None:
        mask = xp.asarray(np.asarray(mask))
    elif backend_of(mask) != xp.name:
        raise TypeError(
            f"mask must be on the backend of residue_index ({xp.name!r}). "
            f"Received a {backend_of(mask)} array"
        )
    if tuple(mask.shape) != tuple(index.shape):
        raise ValueError(
            "mask must have the shape of residue_index. Received: "
            f"{tuple(mask.shape)} and {tuple(index.shape)}"
        )
    if xp.kind(xp.dtype_of(mask)) != "bool":
        mask = mask != 0
    keep = xp.expand_dims(mask, -2) & xp.expand_dims(mask, -1)
    return xp.where(keep, diff, xp.zeros_like(diff))


# --------------------------------------------------------------------------- DeBERTa


def _check_deberta(bucket_size: object, max_position: object, arithmetic: object) -> int:
    """``mid = bucket_size // 2`` after validating DeBERTa's options."""
    size = positive_int(bucket_size, "bucket_size", minimum=2)
    if size > 2**24:
        raise ValueError(
            "bucket_size must be at most 2**24 (DeBERTa's float32 keeps the positions "
            f"below bucket_size // 2 exact up to there). Received: {size}"
        )
    mid = size // 2
    most = positive_int(max_position, "max_position")
    if most - 1 <= mid:
        raise ValueError(
            f"max_position must exceed bucket_size // 2 + 1 = {mid + 1} (the log buckets "
            f"divide by log((max_position - 1) / (bucket_size // 2))). Received: {most}"
        )
    choice(arithmetic, "arithmetic", DEBERTA_ARITHMETICS)
    return mid


def _round_float32(a: int) -> int:
    """``a >= 0`` rounded to the nearest float32 (ties to even), as an int."""
    bits = a.bit_length()
    if bits <= 24:
        return a
    shift = bits - 24
    q, r = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return q << shift


def _log_float32_scalar(x: float) -> np.float32:
    """``log(x)`` correctly rounded to float32 (Decimal's ``ln`` at 40 digits)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        exact = decimal.Decimal(float(x)).ln()
    guess = np.float32(float(exact))
    candidates = (
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    )
    return min(candidates, key=lambda c: abs(decimal.Decimal(float(c)) - exact))


def _log_float32(x: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 ``log`` of positive float32 values: float64's log
    rounded once, and Decimal's where a float32 rounding boundary is too close."""
    wide = np.log(x.astype(np.float64))
    out = wide.astype(np.float32)
    centre = out.astype(np.float64)
    below = np.nextafter(out, np.float32(-np.inf)).astype(np.float64)
    above = np.nextafter(out, np.float32(np.inf)).astype(np.float64)
    tolerance = 4 * np.spacing(np.abs(wide)) + 1e-300
    unsure = (np.abs(wide - (centre + below) / 2) <= tolerance) | (
        np.abs(wide - (centre + above) / 2) <= tolerance
    )
    for i in np.flatnonzero(unsure):
        out[i] = _log_float32_scalar(float(x[i]))
    return out


def _float32_steps(values: np.ndarray, mid: int, max_position: int) -> np.ndarray:
    """transformers' ``ceil(log(abs_pos / mid) / log(tensor((max_position - 1) / mid))
    * (mid - 1))`` in float32, for float32 values of ``abs_pos`` (a correctly rounded
    float32 log)."""
    f32 = np.float32
    ratio = values / f32(mid)
    denominator = _log_float32_scalar(float(f32((max_position - 1) / mid)))
    scaled = (_log_float32(ratio) / denominator) * f32(mid - 1)
    return np.ceil(scaled).astype(np.int64)


def _float32_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` of each float32 step count ``1, 2, ...`` (``a <= limit``)."""
    top = np.array([_round_float32(limit)], dtype=np.float32)
    count = int(_float32_steps(top, mid, max_position)[0])
    if count <= 0:
        return ()
    steps = np.arange(1, count + 1)
    # Positive float32 values are ordered as their bit patterns: search those.
    lo = np.full(count, np.array(np.float32(mid)).view(np.uint32))  # 0 steps
    hi = np.full(count, top.view(np.uint32)[0])  # >= every step
    while True:
        live = hi - lo > 1
        if not live.any():
            break
        middle = lo + (hi - lo) // 2
        reached = _float32_steps(middle.view(np.float32), mid, max_position) >= steps
        hi = np.where(live & reached, middle, hi)
        lo = np.where(live & ~reached, middle, lo)
    thresholds = []
    for value in hi.view(np.float32).tolist():  # the smallest float32 of each step count
        if value <= 2**24:
            first = math.ceil(value)
        else:  # the smallest integer that rounds up to it
            below = int(np.nextafter(np.float32(value), np.float32(0)))
            first = (below + int(value)) // 2
            if _round_float32(first) < value:
                first += 1
        thresholds.append(first)
    return tuple(thresholds)


def _exact_reaches(a: int, steps: int, mid: int, max_position: int) -> bool:
    """Whether ``(mid - 1) log(a / mid) / log((max_position - 1) / mid) > steps``, in
    integers: ``a ** (mid - 1) * mid ** steps > (max_position - 1) ** steps *
    mid ** (mid - 1)``."""
    k = mid - 1
    return a**k * mid**steps > (max_position - 1) ** steps * mid**k


def _exact_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` with ``ceil(x(a)) >= n + 1`` for ``n = 0, 1, ...`` (``a <= limit``),
    ``x(a) = (mid - 1) log(a / mid) / log((max_position - 1) / mid)``: the real
    threshold ``mid r ** (n / (mid - 1))`` from 45-digit Decimals, exact checks when it
    is within 1e-20 of an integer."""
    k = mid - 1
    if k == 0:
        return ()
    thresholds = []
    with decimal.localcontext() as ctx:
        ctx.prec = 45
        log_ratio = (decimal.Decimal(max_position - 1) / decimal.Decimal(mid)).ln()
        near = decimal.Decimal("1e-20")
        steps = 0
        while True:
            real = decimal.Decimal(mid) * (log_ratio * steps / k).exp()
            whole = int(real)
            if real - whole < near or whole + 1 - real < near:
                first = max(whole - 1, mid)
                while not _exact_reaches(first, steps, mid, max_position):
                    first += 1
            else:
                first = whole + 1
            if first > limit:
                break
            thresholds.append(first)
            steps += 1
    return tuple(thresholds)


@functools.lru_cache(maxsize=32)
def _deberta_thresholds(
    mid: int, max_position: int, arithmetic: str, limit: int
) -> tuple[int, ...]:
    if arithmetic == "exact":
        return _exact_thresholds(mid, max_position, limit)
    return _float32_thresholds(mid, max_position, limit)


def _thresholds(mid: int, max_position: int, arithmetic: str, limit: int) -> tuple[int, ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _deberta_thresholds(mid, max_position, arithmetic, limit)


def _negated(mid: int, max_position: int, arithmetic: str, limit: int) -> tuple[int, ...]:
    """The thresholds negated (descending), one placeholder when there are none."""
    return tuple(-t for t in _thresholds(mid, max_position, arithmetic, limit)) or (0,)


def _count(mid: int, max_position: int, arithmetic: str, limit: int) -> int:
    return len(_thresholds(mid, max_position, arithmetic, limit))


@functools.lru_cache(maxsize=32)
def _negated_array(
    mid: int, max_position: int, arithmetic: str, limit: int, dtype: str
) -> np.ndarray:
    return np.array(_negated(mid, max_position, arithmetic, limit), dtype=dtype)


def _bucket_kernel(xp: Any, rel: Any, mid: int, negated: Any, count: int) -> Any:
    """DeBERTa's buckets of the integer array ``rel``: a binary search of ``-|rel|``
    among the negated thresholds (descending), integer operations only."""
    dtype = xp.dtype(xp.dtype_of(rel))
    neg = xp.where(rel < 0, rel, -rel)  # -|rel|, exact at the most negative integer too
    steps = xp.zeros_like(rel)
    size = 1 << max(count.bit_length() - 1, 0)
    while count and size:
        candidate = steps + size
        index = xp.where(candidate > count, xp.zeros_like(candidate) + count, candidate) - 1
        reached = (candidate <= count) & (neg <= xp.take(negated, index, axis=0))
        steps = xp.where(reached, candidate, steps)
        size //= 2
    sign = xp.astype(rel > 0, dtype) - xp.astype(rel < 0, dtype)
    return xp.where(neg >= -mid, rel, sign * (steps + mid))


@functools.lru_cache(maxsize=32)
def _compiled_bucket_kernel(backend: str, mid: int, count: int) -> Any:
    xp = get_namespace(backend)
    return xp.compile(lambda rel, negated: _bucket_kernel(xp, rel, mid, negated, count))


def deberta_log_bucket(
    relative_pos: Any,
    bucket_size: int,
    max_position: int,
    *,
    arithmetic: DebertaArithmetic = "exact",
    backend: BackendLike | None = None,
) -> Any:
    """DeBERTa's log-bucketed relative positions (``make_log_bucket_position``).

    With ``mid = bucket_size // 2``, positions with ``|r| <= mid`` stay as they are
    and the others become ``sign(r) * (mid + ceil((mid - 1) * log(|r| / mid) /
    log((max_position - 1) / mid)))``; nothing is clamped (DeBERTa clamps to its
    attention span later).

    The result is found with integer comparisons only, on the device and traced: the
    thresholds where the bucket grows are integers computed once on the host, and a
    binary search among them places each ``|r|``. transformers (DeBERTa-v2/v3)
    evaluates the formula in float32, which moves a bucket at rare distances where the
    real value sits just above an integer (``bucket_size=64, max_position=256``:
    ``r = 10134`` has ``(mid - 1) log(...) / log(...) = 86.0000013``, bucket 119, where
    float32 gives 118).

    Parameters
    ----------
    relative_pos : int, sequence or integer array
        Relative positions (DeBERTa: ``query - key``) of any shape, from NumPy, JAX,
        PyTorch or TensorFlow (traced values included).
    bucket_size : int
        DeBERTa's ``position_buckets`` (256 in DeBERTa-v3), in ``[2, 2**24]``.
    max_position : int
        DeBERTa's ``max_relative_positions`` (512), > ``bucket_size // 2 + 1``.
    arithmetic : {"exact", "float32"}
        ``"exact"`` (default): the real-number formula, in integer arithmetic.
        ``"float32"``: transformers' float32 evaluation, replayed with a correctly
        rounded float32 log (PyTorch's vectorised CPU log is off by one ulp at rare
        arguments, where its own buckets then differ by one).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; the backend of ``relative_pos`` by default (NumPy for
        Python values).

    Returns
    -------
    array
        Integer buckets, the shape of ``relative_pos``: its dtype (int32 or int64; int64
        for Python input, int32 on JAX without x64). transformers returns them as
        float32 and converts them to int64 in ``build_relative_position``.

    Raises
    ------
    TypeError
        Non-integer positions or options.
    ValueError
        ``bucket_size`` outside ``[2, 2**24]``, ``max_position <= bucket_size // 2 + 1``,
        an unknown arithmetic.

    Examples
    --------
    >>> deberta_log_bucket([-300, -129, -128, 0, 5, 128, 129, 300], 256, 512).tolist()
    [-207, -129, -128, 0, 5, 128, 129, 207]
    >>> deberta_log_bucket([10134], 64, 256).tolist(), deberta_log_bucket(
    ...     [10134], 64, 256, arithmetic="float32").tolist()
    ([119], [118])
    """
    mid = _check_deberta(bucket_size, max_position, arithmetic)
    source = backend_of(relative_pos)
    xp, _ = choose_backend(None, backend, source=source)
    rel = _as_integers(relative_pos, xp, "relative_pos")
    name = xp.dtype_of(rel)
    limit = 2**63 if name == "int64" else 2**31
    config = (mid, int(max_position), arithmetic, limit)
    if xp.is_tracing():  # torch.compile: the thresholds are built outside the trace
        negated = xp.asarray(xp.host_constant(_negated, *config), dtype=xp.dtype(name), like=rel)
        count = xp.host_constant(_count, *config)
    else:
        negated = xp.asarray(_negated_array(*config, name), like=rel)
        count = _count(*config)
    if xp.compile_eager_kernels and not xp.is_tracing() and not xp.is_traced(rel):
        return _compiled_bucket_kernel(xp.name, mid, count)(rel, negated)
    return _bucket_kernel(xp, rel, mid, negated, count)


def deberta_relative_position(
    query_size: int,
    key_size: int,
    *,
    bucket_size: int = -1,
    max_position: int = -1,
    arithmetic: DebertaArithmetic = "exact",
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """DeBERTa's relative positions ``query - key`` (``build_relative_position``).

    Parameters
    ----------
    query_size, key_size : int
        Numbers of queries and keys, >= 1.
    bucket_size, max_position : int
        Both > 0: the positions are log-bucketed by :func:`deberta_log_bucket`; both
        ``-1`` (the default, as in transformers) or any value <= 0: plain ``i - j``.
    arithmetic : {"exact", "float32"}
        As for :func:`deberta_log_bucket`.
    backend, like
        Where to return the table, as for :func:`relative_position_index`.

    Returns
    -------
    array
        ``(query_size, key_size)`` integers (int64; int32 on JAX without x64).
        transformers returns them with a leading axis, ``(1, query_size, key_size)``.

    Examples
    --------
    >>> deberta_relative_position(2, 3).tolist()
    [[0, -1, -2], [1, 0, -1]]
    >>> deberta_relative_position(1, 300, bucket_size=256, max_position=512)[0, -3:].tolist()
    [-206, -206, -206]
    """
    q_len = positive_int(query_size, "query_size")
    k_len = positive_int(key_size, "key_size")
    for value, name in ((bucket_size, "bucket_size"), (max_position, "max_position")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer (<= 0 for no buckets). Received: {value!r}")
    xp = _int_namespace(backend, like)
    _check_size(q_len * k_len, "deberta_relative_position")
    mid = 0
    if bucket_size > 0 and max_position > 0:
        mid = _check_deberta(bucket_size, max_position, arithmetic)
    limit = 2**63 if xp.supports("int64") else 2**31
    args = (q_len, k_len, mid, int(max_position), arithmetic, limit)
    return _table(xp, "deberta", args, _anchor(xp, like))


def _deberta_host(
    q_len: int, k_len: int, mid: int, max_position: int, arithmetic: str, limit: int
) -> np.ndarray:
    distance = np.arange(q_len)[:, None] - np.arange(k_len)[None, :]
    if mid:  # log buckets
        thresholds = np.array(_thresholds(mid, max_position, arithmetic, limit), np.int64)
        size = np.abs(distance)
        steps = np.searchsorted(thresholds, size, side="right")
        distance = np.where(size <= mid, distance, np.sign(distance) * (mid + steps))
    return distance


# --------------------------------------------------------------------------- Funnel


def _int_list(value: object, name: str) -> tuple[int, ...]:
    """A sequence of Python (or NumPy) integers as a tuple of ints; host data only."""
    message = f"{name} must be a non-empty sequence of integers (host data). Received: {value!r}"
    source = None if isinstance(value, np.ndarray) else backend_of(value)
    if source is not None:
        raise TypeError(
            f"{name} must be host integers (a list, range or NumPy array): Funnel's positions "
            f"fix the sizes of its tables. Received a {source} array"
        )
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(message)
    items = list(value.tolist() if isinstance(value, np.ndarray) else value)
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, numbers.Integral):
            raise TypeError(message)
    if not items:
        raise ValueError(message)
    return tuple(int(item) for item in items)


def _funnel_flag(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False. Received: {value!r}")
    return bool(value)


def _funnel_pool(
    pos: tuple[int, ...], block: int, separate_cls: bool, truncate: bool
) -> tuple[int, ...]:
    """Funnel's ``stride_pool_pos``, on a tuple of ints."""
    if not separate_cls:
        return pos[::2]
    kept = pos[1:-1] if truncate else pos[1:]
    return (1 - 2**block,) + kept[::2]


def _funnel_relative_host(
    pos: tuple[int, ...], stride: int, pooled: tuple[int, ...], shift: int
) -> np.ndarray:
    max_dist = pooled[0] - pos[0] + shift * len(pooled) * stride
    min_dist = pooled[0] - pos[-1]
    return np.arange(max_dist, min_dist - 1, -stride, dtype=np.int64)


def funnel_pooled_positions(
    pos: Any,
    block_index: int,
    *,
    separate_cls: bool = True,
    truncate_seq: bool = True,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """Funnel Transformer's positions after a pooling (``stride_pool_pos``).

    Every second position is kept. With ``separate_cls`` the class token (first) is
    kept apart: the pooled sequence starts at ``1 - 2 ** block_index`` (the class
    token seen as the first token of the block before the first real one), followed by
    every second position of ``pos[1:]`` (``pos[1:-1]`` with ``truncate_seq``).

    Parameters
    ----------
    pos : sequence of int
        The positions before the pooling (host integers, non-empty): ``range(seq_len)``
        before block 1, then the previous result.
    block_index : int
        The block the pooled positions enter, >= 1.
    separate_cls, truncate_seq : bool
        ``FunnelConfig.separate_cls`` and ``FunnelConfig.truncate_seq``.
    backend, like
        Where to return the positions, as for :func:`relative_position_index`.

    Returns
    -------
    array
        1-D integers (int64; int32 on JAX without x64).

    Examples
    --------
    >>> funnel_pooled_positions(range(6), 1).tolist()
    [-1, 1, 3]
    >>> funnel_pooled_positions(range(6), 1, truncate_seq=False).tolist()
    [-1, 1, 3, 5]
    >>> funnel_pooled_positions(range(6), 1, separate_cls=False).tolist()
    [0, 2, 4]
    """
    values = _int_list(pos, "pos")
    block = positive_int(block_index, "block_index")
    sep = _funnel_flag(separate_cls, "separate_cls")
    trunc = _funnel_flag(truncate_seq, "truncate_seq")
    xp = _int_namespace(backend, like)
    pooled = _funnel_pool(values, block, sep, trunc)
    return _place(xp, np.array(pooled, dtype=np.int64), _anchor(xp, like))


def funnel_block_positions(
    seq_len: int,
    block_index: int,
    *,
    separate_cls: bool = True,
    truncate_seq: bool = True,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """The positions of Funnel Transformer's block ``block_index`` for ``seq_len`` tokens.

    ``range(seq_len)`` in block 0, then :func:`funnel_pooled_positions` once per block
    (the ``pooled_pos`` of ``FunnelAttentionStructure.get_position_embeds``).

    Parameters
    ----------
    seq_len : int
        Tokens of the input, >= 1.
    block_index : int
        The block, >= 0.
    separate_cls, truncate_seq, backend, like
        As for :func:`funnel_pooled_positions`.

    Examples
    --------
    >>> [funnel_block_positions(8, b).tolist() for b in range(3)]
    [[0, 1, 2, 3, 4, 5, 6, 7], [-1, 1, 3, 5], [-3, 1]]
    """
    n = positive_int(seq_len, "seq_len")
    block = positive_int(block_index, "block_index", minimum=0)
    sep = _funnel_flag(separate_cls, "separate_cls")
    trunc = _funnel_flag(truncate_seq, "truncate_seq")
    xp = _int_namespace(backend, like)
    _check_size(n, "funnel_block_positions")
    pos = _funnel_positions(n, block, sep, trunc)
    return _place(xp, np.array(pos, dtype=np.int64), _anchor(xp, like))


def _funnel_positions(n: int, block: int, sep: bool, trunc: bool) -> tuple[int, ...]:
    pos = tuple(range(n))
    for b in range(1, block + 1):
        pos = _funnel_pool(pos, b, sep, trunc)
    return pos


def funnel_relative_positions(
    pos: Any,
    stride: int,
    pooled_pos: Any = None,
    *,
    shift: int = 1,
    backend: BackendLike | None = None,
    like: Array | None = None,
) -> Array:
    """Funnel Transformer's relative position vector (``relative_pos``).

    The descending distances ``max_dist, max_dist - stride, ..., >= min_dist`` with
    ``max_dist = pooled_pos[0] - pos[0] + shift * len(pooled_pos) * stride`` and
    ``min_dist = pooled_pos[0] - pos[-1]``: the rows of the relative embedding that
    ``FunnelRelMultiheadAttention`` reads, after its relative shift, for queries
    ``pooled_pos`` and keys ``pos``.

    Parameters
    ----------
    pos : sequence of int
        Key positions (host integers, non-empty).
    stride : int
        Spacing of the positions, >= 1 (``2 ** block_index`` in Funnel; ``2 **
        (block_index - 1)`` for pooled queries on unpooled keys).
    pooled_pos : sequence of int, optional
        Query positions (non-empty); ``pos`` by default.
    shift : int
        >= 1: 1 for queries and keys of the same block, 2 for pooled queries.
    backend, like
        Where to return the vector, as for :func:`relative_position_index`.

    Returns
    -------
    array
        1-D integers (int64; int32 on JAX without x64), as ``torch.arange(max_dist,
        min_dist - 1, -stride)``.

    Raises
    ------
    TypeError, ValueError
        Positions that are not non-empty host integers, a stride or shift < 1, or
        positions whose ``max_dist < min_dist - 1`` (the descending range is empty the
        wrong way: torch refuses that ``arange``).

    Examples
    --------
    >>> funnel_relative_positions(range(4), 1).tolist()
    [4, 3, 2, 1, 0, -1, -2, -3]
    >>> funnel_relative_positions(range(4), 1, [-1, 1], shift=2).tolist()
    [3, 2, 1, 0, -1, -2, -3, -4]
    """
    keys = _int_list(pos, "pos")
    queries = keys if pooled_pos is None else _int_list(pooled_pos, "pooled_pos")
    step = positive_int(stride, "stride")
    times = positive_int(shift, "shift")
    max_dist = queries[0] - keys[0] + times * len(queries) * step
    min_dist = queries[0] - keys[-1]
    if max_dist < min_dist - 1:
        raise ValueError(
            "funnel_relative_positions needs max_dist >= min_dist - 1 (keys in ascending "
            f"order). Received: max_dist = {max_dist}, min_dist = {min_dist}"
        )
    xp = _int_namespace(backend, like)
    _check_size((max_dist - min_dist) // step + 1, "funnel_relative_positions")
    return _table(xp, "funnel", (keys, step, queries, times), _anchor(xp, like))


#: The host tables, by name (see :func:`_table`).
_TABLES: dict[str, Callable[..., np.ndarray]] = {
    "window": _window_index,
    "swinv2": _coords_table,
    "clipped": _clipped_host,
    "levit": _levit_host,
    "deberta": _deberta_host,
    "funnel": _funnel_relative_host,
}
