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
  positions (defined with its sinusoid embeddings in :mod:`pe_core.funnel`).

>>> from pe_core.relative_index import relative_position_index
>>> relative_position_index(2).tolist()  # Swin, a 2 x 2 window
[[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
"""

from __future__ import annotations

from typing import Any, Literal, overload

from pe_core._index import place as _place
from pe_core._index import window as _window  # noqa: F401  (registers its host tables)
from pe_core._index.log_buckets import deberta_buckets
from pe_core._index.window import esmfold_bins
from pe_core._kernel.inputs import choose_backend
from pe_core.funnel import (  # their home; re-exported here, where they were first
    funnel_block_positions,
    funnel_pooled_positions,
    funnel_relative_positions,
)
from pe_core.typing import (
    ArrayT,
    BackendArrayT,
    BackendLike,
    HostData,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    SupportsArray,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import check_elements, choice, flag, is_integer, known_size, positive_int
from pe_core_backends import backend_of, get_namespace

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

Window = int | tuple[int, int]

# --------------------------------------------------------------------------- Swin / BEiT


def num_relative_distance(window_size: Window, *, prefix_tokens: int = 0) -> int:
    """Rows of the learned table that :func:`relative_position_index` gathers from.

    ``(2 Wh - 1) (2 Ww - 1)`` window offsets, and three more with a class token
    (BEiT's ``num_relative_distance``: class to token, token to class, class to class).

    Examples
    --------
    >>> num_relative_distance(7), num_relative_distance((14, 14), prefix_tokens=1)
    (169, 732)
    """
    height, width = _place.window(window_size)
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


@overload
def relative_position_index(
    window_size: Window,
    *,
    prefix_tokens: int = 0,
    backend: NumpyBackend | None = None,
    like: None = None,
) -> NDArray: ...
@overload
def relative_position_index(
    window_size: Window, *, prefix_tokens: int = 0, backend: TorchBackend, like: None = None
) -> TorchTensor: ...
@overload
def relative_position_index(
    window_size: Window, *, prefix_tokens: int = 0, backend: JaxBackend, like: None = None
) -> JaxArray: ...
@overload
def relative_position_index(
    window_size: Window, *, prefix_tokens: int = 0, backend: TensorFlowBackend, like: None = None
) -> TFTensor: ...
@overload
def relative_position_index(
    window_size: Window,
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
    like: SupportsArray | None = None,
) -> Any: ...


def relative_position_index(
    window_size: Window,
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
    like: SupportsArray | None = None,
) -> Any:
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
    height, width = _place.window(window_size)
    prefix = _prefix(prefix_tokens)
    n = height * width + prefix
    args = (height, width, prefix)
    return _place.build("relative_position_index", n * n, "window", args, backend, like)


def relative_position_bias(
    table: BackendArrayT | HostData,
    window_size: Window,
    *,
    prefix_tokens: int = 0,
    backend: BackendLike | None = None,
) -> BackendArrayT:
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
    xp, array, shape = _place.learned_table(table, backend)
    if len(shape) != 2 or shape[0] != rows:
        raise ValueError(
            f"table must have shape (num_relative_distance, heads) = ({rows}, heads) for "
            f"window_size={window_size!r}, prefix_tokens={prefix_tokens!r}. Received: shape {shape}"
        )
    (height, width), prefix = _place.window(window_size), _prefix(prefix_tokens)
    n = height * width + prefix
    flat = xp.reshape(_place.table(xp, "window", (height, width, prefix), array), (-1,))
    gathered = xp.matrix_transpose(xp.take(array, flat, axis=0))  # (heads, N * N)
    return xp.reshape(gathered, (int(shape[1]), n, n))


# --------------------------------------------------------------------------- SwinV2


def swinv2_coords_table(
    window_size: Window,
    *,
    pretrained_window_size: Window | None = None,
    convention: str = "transformers",
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
    dtype: str = "float32",
) -> BackendArrayT:
    """SwinV2's log-spaced coordinates of the window offsets (the input of its bias MLP).

    For each offset ``(dy, dx)``, ``|dy| < Wh``, ``|dx| < Ww``, the pair
    ``f(8 dy / (P_h - 1)), f(8 dx / (P_w - 1))`` with ``f(x) = sign(x) log2(|x| + 1) /
    log2(8)`` and ``P`` the pretrained window (the window itself by default): the pretraining
    window's offsets span ``[-log2(9) / 3, log2(9) / 3]``, about ``[-1.057, 1.057]``.

    Without ``pretrained_window_size``, a window of height 1 is where the codebases part:
    transformers' ``Swinv2SelfAttention`` normalises neither axis then (its ``elif
    window_size[0] > 1``), so ``(1, Ww)`` gets ``f(8 dx)``; timm's
    ``swin_transformer_v2.WindowAttention`` (and the original SwinV2 code) divides each
    axis by its own ``W - 1``, so ``(1, Ww)`` gets ``f(8 dx / (Ww - 1))``. ``convention``
    chooses. Windows of height > 1, and any ``pretrained_window_size``, agree.

    Parameters
    ----------
    window_size : int or (int, int)
        The window ``(Wh, Ww)``, each >= 1.
    pretrained_window_size : int or (int, int), optional
        The window the model was pretrained with (SwinV2's ``pretrained_window_size``,
        ``0`` there meaning none), each >= 2; the window itself when ``None``.
    convention : {"transformers", "timm"}
        Whose rule normalises a window of height 1 without ``pretrained_window_size``:
        transformers' (neither axis, the default) or timm's (each axis of size > 1 by
        its own ``W - 1``).
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
        divides ``0`` by ``Ww - 1 = 0`` there when ``Wh > 1`` and gets NaN; timm does on
        either axis of size 1).

    Examples
    --------
    >>> swinv2_coords_table(2, dtype="float64")[:, 0, 0].round(4).tolist()  # log2(9) / 3
    [-1.0566, 0.0, 1.0566]
    >>> round(float(swinv2_coords_table(3, pretrained_window_size=5)[0, 0, 0]), 6)
    -0.773976
    >>> swinv2_coords_table((1, 3), dtype="float64")[0, :, 1].round(4).tolist()  # f(8 dx)
    [-1.3625, -1.0566, 0.0, 1.0566, 1.3625]
    >>> timm = swinv2_coords_table((1, 3), convention="timm", dtype="float64")
    >>> timm[0, :, 1].round(4).tolist()  # f(8 dx / 2)
    [-1.0566, -0.774, 0.0, 0.774, 1.0566]
    """
    height, width = _place.window(window_size)
    convention = choice(convention, "convention", ("transformers", "timm"))
    if pretrained_window_size is None:
        # the divisors (1: none); transformers' `elif window_size[0] > 1` skips both axes
        flat = convention == "transformers" and height == 1
        scale = (1, 1) if flat else (height, width)
    else:
        scale = _place.window(pretrained_window_size, "pretrained_window_size")
        if min(scale) < 2:
            raise ValueError(
                "pretrained_window_size must be an integer >= 2 or a pair of them "
                f"(None for the window itself). Received: {pretrained_window_size!r}"
            )
    name = choice(dtype, "dtype", ("float32", "float64"))
    n = (2 * height - 1) * (2 * width - 1) * 2
    args = (height, width, scale)
    return _place.build("swinv2_coords_table", n, "swinv2", args, backend, like, name)


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
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
    reverse = flag(query_minus_key, "query_minus_key")
    largest = shift + min(right, (q_len if reverse else k_len) - 1)
    if largest >= 2**63:
        raise ValueError(
            f"the largest index offset + min(max_right, distance) = {largest} does not fit "
            f"in int64. Received: offset={shift}, max_right={right}"
        )
    args = (q_len, k_len, left, right, shift, reverse)
    return _place.build("clipped_relative_position", q_len * k_len, "clipped", args, backend, like)


# --------------------------------------------------------------------------- LeViT


def levit_attention_offsets(
    resolution: int,
    *,
    stride: int = 1,
    resolution_out: int | None = None,
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
    out = most if resolution_out is None else positive_int(resolution_out, "resolution_out")
    if out > most:
        raise ValueError(
            f"resolution_out must be at most (resolution - 1) // stride + 1 = {most} (a "
            f"query beyond the keys has offsets outside LeViT's table). Received: {out}"
        )
    args = (res, step, out)
    return _place.build(
        "levit_attention_offsets", out * out * res * res, "levit", args, backend, like
    )


# --------------------------------------------------------------------------- ESMFold


def esmfold_relative_bins(
    residue_index: ArrayT | HostData, bins: int, *, mask: Any = None
) -> ArrayT:
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
    xp = get_namespace(backend_of(residue_index) or "numpy")
    index = _place.as_integers(residue_index, xp, "residue_index")
    if len(index.shape) < 1:
        raise ValueError("residue_index must have at least one axis (..., L). Received a scalar")
    n = known_size(index)  # (None while sizes are symbolic under torch.compile)
    check_elements(n and n * int(index.shape[-1]), "esmfold_relative_bins", like=index)
    mask = None if mask is None else _place.as_mask(mask, xp, index)
    return esmfold_bins(xp, index, size, mask)


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


def deberta_log_bucket(
    relative_pos: BackendArrayT | HostData,
    bucket_size: int,
    max_position: int,
    *,
    arithmetic: DebertaArithmetic = "exact",
    backend: BackendLike | None = None,
) -> BackendArrayT:
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
    check_elements(known_size(relative_pos), "deberta_log_bucket", like=relative_pos)
    xp, _ = choose_backend(None, backend, source=backend_of(relative_pos))
    rel = _place.as_integers(relative_pos, xp, "relative_pos", uint64=True)
    return deberta_buckets(xp, rel, mid, int(max_position), arithmetic)


def deberta_relative_position(
    query_size: int,
    key_size: int,
    *,
    bucket_size: int = -1,
    max_position: int = -1,
    arithmetic: DebertaArithmetic = "exact",
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
        if not is_integer(value):
            raise TypeError(f"{name} must be an integer (<= 0 for no buckets). Received: {value!r}")
    mid = 0
    if bucket_size > 0 and max_position > 0:
        mid = _check_deberta(bucket_size, max_position, arithmetic)
    args = (q_len, k_len, mid, int(max_position), arithmetic)
    return _place.build("deberta_relative_position", q_len * k_len, "deberta", args, backend, like)
