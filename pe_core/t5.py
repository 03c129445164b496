"""T5's relative position buckets and the attention bias they index, on any backend.

T5 (Raffel et al., 2020) gives each head a learned scalar per *bucket* of the relative
position ``r = key_position - query_position``. With ``B`` buckets (halved when
bidirectional, the upper half for ``r > 0``) and ``a = |r|`` (or ``max(-r, 0)`` for
causal attention), the first ``B/2`` buckets are exact (``a < max_exact``) and the
others grow logarithmically up to ``max_distance``:

    bucket(a) = max_exact + floor(log(a / max_exact) / log(max_distance / max_exact)
                                  * (B - max_exact)),   clamped to B - 1.

The codebases (Mesh TensorFlow, transformers' ``T5Attention._relative_position_bucket``,
x-transformers' ``RelativePositionBias``) evaluate that formula in float32, and float32
decides the buckets of the distances that sit on a boundary. pe_core never takes the
log on the device: the bucket is ``max_exact`` plus the number of *thresholds* the
distance reaches, integers found once on the host (:func:`bucket_thresholds`) by
replaying the float32 arithmetic of transformers' PyTorch code. The result is
transformers' bucket, bit for bit, for every integer distance, on every backend, traced
or not (integer comparisons only). ``arithmetic="exact"`` uses the real-number
boundaries instead. See ``docs/relative.md`` for where the two differ.

>>> from pe_core.t5 import t5_relative_bucket
>>> t5_relative_bucket([-200, -20, -3, 0, 3, 20, 200]).tolist()
[15, 10, 3, 0, 19, 26, 31]
"""

from __future__ import annotations

import numbers
from typing import Any, Literal, overload

import numpy as np

from pe_core._index import place as _place
from pe_core._index import t5 as _t5
from pe_core._index.log_buckets import SEARCHED as _SEARCHED
from pe_core._index.log_buckets import t5_thresholds
from pe_core._index.t5 import MAX_OFFSET, _kernel
from pe_core._kernel.inputs import check_request_size, choose_backend, known_size
from pe_core.typing import (
    BackendArrayT,
    BackendLike,
    HostData,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import check_elements, choice, flag, integer, is_integer, positive_int
from pe_core_backends import backend_of

__all__ = [
    "ARITHMETICS",
    "bucket_thresholds",
    "t5_bucket_matrix",
    "t5_relative_bias",
    "t5_relative_bucket",
]

# _kernel and _SEARCHED stay importable from here (the engine is pe_core._index.t5)
__engine__ = (_kernel, _SEARCHED, MAX_OFFSET)

Arithmetic = Literal["float32", "exact"]

#: The arithmetics :func:`t5_relative_bucket` can reproduce.
ARITHMETICS: tuple[str, ...] = ("float32", "exact")


#: The most buckets per side (after halving when bidirectional): T5 uses 16 (32 in all).
MAX_BUCKETS_PER_SIDE = 1024


def _config(
    bidirectional: Any, num_buckets: Any, max_distance: Any, arithmetic: Any
) -> tuple[int, int, int, str, bool]:
    """``(n, max_exact, max_distance, arithmetic, bidirectional)`` for the engine, after
    validating the T5 options (``n``: buckets per side)."""
    side = 2 if flag(bidirectional, "bidirectional") else 1
    n = integer(num_buckets, "num_buckets") // side
    if n < 2:
        raise ValueError(
            f"num_buckets must be at least {2 * side} when bidirectional={bool(bidirectional)} "
            f"(at least one exact bucket per side). Received: {num_buckets!r}"
        )
    if n > MAX_BUCKETS_PER_SIDE:
        raise ValueError(
            f"num_buckets must give at most {MAX_BUCKETS_PER_SIDE} buckets per side (the "
            "thresholds are found in exact integer arithmetic, and the kernel compares "
            f"each distance with each of them). Received: {num_buckets!r} ({n} per side)"
        )
    max_exact = n // 2
    most = integer(max_distance, "max_distance")
    if most <= max_exact:
        raise ValueError(
            f"max_distance must exceed max_exact = {max_exact} (the exact buckets of "
            f"num_buckets={num_buckets}). Received: {max_distance!r}"
        )
    choice(arithmetic, "arithmetic", ARITHMETICS)
    return n, max_exact, most, arithmetic, bool(bidirectional)


def bucket_thresholds(
    num_buckets: int, max_distance: int, arithmetic: Arithmetic = "float32"
) -> tuple[int, ...]:
    """The distances at which the logarithmic buckets start, for one side.

    Parameters
    ----------
    num_buckets : int
        Buckets of one side: T5's ``num_buckets`` after halving when bidirectional.
    max_distance : int
        T5's ``max_distance``.
    arithmetic : {"float32", "exact"}
        ``"float32"``: the boundaries of transformers' PyTorch code, whose float32
        arithmetic this replays (``float32(a) / max_exact``, a correctly rounded float32
        log, division by ``float32(math.log(max_distance / max_exact))``, product with
        ``num_buckets - max_exact``, truncation). ``"exact"``: the real-number
        boundaries ``max_exact * (max_distance / max_exact) ** (k / (num_buckets -
        max_exact))``, rounded up, found in integer arithmetic.

    Returns
    -------
    tuple of int
        ``t_1 < t_2 < ...``: a distance ``a >= max_exact`` falls in bucket
        ``max_exact + #{k : a >= t_k}``, which never exceeds ``num_buckets - 1``.
        Thresholds beyond ``2**66`` (reached by no distance pe_core accepts) are left
        out.

    Examples
    --------
    >>> bucket_thresholds(16, 128)  # T5's defaults: 32 buckets, bidirectional
    (12, 16, 23, 32, 46, 64, 91)
    """
    if is_integer(num_buckets):  # a search per bucket: refused before it starts
        steps = int(num_buckets) - int(num_buckets) // 2
        check_elements(steps, "bucket_thresholds", per_element=72)
    return t5_thresholds(num_buckets, max_distance, arithmetic)


def t5_relative_bucket(
    relative_position: BackendArrayT | HostData,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    arithmetic: Arithmetic = "float32",
) -> BackendArrayT:
    """T5's bucket of each relative position (``key_position - query_position``).

    Equal to transformers' ``T5Attention._relative_position_bucket`` for every integer
    relative position, on every backend.

    Parameters
    ----------
    relative_position : int, sequence or integer array
        Relative positions ``memory_position - context_position`` of any shape, from
        NumPy, JAX, PyTorch or TensorFlow (traced values included).
    bidirectional : bool
        ``True`` (encoders): half the buckets for keys before the query, half for keys
        after it (``r > 0``). ``False`` (decoders): keys after the query (``r > 0``)
        share bucket 0 with ``r = 0``.
    num_buckets : int
        Buckets in all (T5: 32): at least 4 when bidirectional, 2 otherwise; at most
        1024 per side (``MAX_BUCKETS_PER_SIDE``), 2048 in all when bidirectional.
    max_distance : int
        Distances at or beyond it share the last bucket of their side (T5: 128); must
        exceed ``max_exact``, a quarter of ``num_buckets`` when bidirectional (half
        otherwise).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; the backend of ``relative_position`` by default (NumPy for
        Python values).
    arithmetic : {"float32", "exact"}
        ``"float32"`` (default): transformers' buckets, whose float32 log decides the
        distances on a boundary. ``"exact"``: the real-number boundaries.

    Returns
    -------
    array
        Integer buckets in ``[0, num_buckets)``, the shape of ``relative_position``
        (int64; int32 on JAX without x64).

    Raises
    ------
    TypeError
        Non-integer relative positions or options.
    ValueError
        Too few buckets, ``max_distance <= max_exact``, an unknown arithmetic.

    Examples
    --------
    >>> t5_relative_bucket(range(-2, 3)).tolist()  # exact buckets near 0
    [2, 1, 0, 17, 18]
    >>> t5_relative_bucket([5, -5, -200], bidirectional=False).tolist()
    [0, 5, 31]
    """
    n, max_exact, most, mode, bidi = _config(bidirectional, num_buckets, max_distance, arithmetic)
    check_elements(known_size(relative_position), "t5_relative_bucket", like=relative_position)
    source = backend_of(relative_position)
    xp, _ = choose_backend(None, backend, source=source)
    rel, carry = _t5.as_relative(relative_position, xp, source, "relative_position")
    thresholds = _t5.thresholds(xp, n, most, mode)
    return _t5.buckets(xp, rel, carry, n, max_exact, thresholds, bidi)


# fmt: off
@overload
def t5_bucket_matrix(query_length: int, key_length: int, *, offset: Any = 0,
    bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
    backend: NumpyBackend | None = None, like: None = None, arithmetic: Arithmetic = "float32") -> NDArray: ...
@overload
def t5_bucket_matrix(query_length: int, key_length: int, *, offset: Any = 0,
    bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
    backend: TorchBackend, like: None = None, arithmetic: Arithmetic = "float32") -> TorchTensor: ...
@overload
def t5_bucket_matrix(query_length: int, key_length: int, *, offset: Any = 0,
    bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
    backend: JaxBackend, like: None = None, arithmetic: Arithmetic = "float32") -> JaxArray: ...
@overload
def t5_bucket_matrix(query_length: int, key_length: int, *, offset: Any = 0,
    bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
    backend: TensorFlowBackend, like: None = None, arithmetic: Arithmetic = "float32") -> TFTensor: ...
@overload
def t5_bucket_matrix(query_length: int, key_length: int, *, offset: Any = 0,
    bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
    backend: BackendLike | None = None, like: Any = None, arithmetic: Arithmetic = "float32") -> Any: ...
# fmt: on


def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    like: Any = None,
    arithmetic: Arithmetic = "float32",
) -> Any:
    """The buckets of ``key_position - query_position`` for every query and key.

    Query ``i`` sits at position ``offset + i`` and key ``j`` at ``j``, as in
    transformers' ``T5Attention.compute_bias(query_length, key_length,
    past_seen_tokens=offset)``: ``offset`` is the number of cached tokens when decoding.

    Parameters
    ----------
    query_length, key_length : int
        Numbers of queries and keys, >= 1.
    offset : int or integer array
        Position of the first query: an int, or an integer array (any backend, traced
        included) that is a scalar or holds one offset per example ``(batch,)``.
    bidirectional, num_buckets, max_distance, arithmetic
        As for :func:`t5_relative_bucket`.
    backend : str, optional
        Where to build the matrix; that of ``like``, else of an array ``offset``, else
        NumPy.
    like : array, optional
        An array whose backend and device the matrix follows (e.g. the bias table).

    Returns
    -------
    array
        Integer buckets ``(query_length, key_length)``, or ``(batch, query_length,
        key_length)`` for per-example offsets ``(batch,)``.

    Examples
    --------
    >>> t5_bucket_matrix(2, 3).tolist()
    [[0, 17, 18], [1, 0, 17]]
    >>> t5_bucket_matrix(1, 3, offset=2, bidirectional=False).tolist()  # one decode step
    [[2, 1, 0]]
    """
    q_len = positive_int(query_length, "query_length")
    k_len = positive_int(key_length, "key_length")
    config = _config(bidirectional, num_buckets, max_distance, arithmetic)
    offset, offset_source = _t5.offset_and_source(offset)
    like_backend = backend_of(like) if like is not None else None
    xp, _ = choose_backend(None, backend, source=like_backend or offset_source)
    anchor = like if like_backend == xp.name else None
    check_elements(q_len * k_len, "t5_bucket_matrix", like=anchor)
    buckets = _t5.diagonal_buckets(xp, q_len, k_len, offset, offset_source, anchor, config)
    return xp.expand_diagonals(buckets, q_len, k_len, like=anchor)


def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: BackendArrayT | HostData,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """T5's position bias: the ``(num_buckets, n_heads)`` table indexed by the buckets.

    The result of transformers' ``T5Attention.compute_bias(query_length, key_length,
    past_seen_tokens=offset)`` with ``relative_attention_bias.weight = table``.

    Parameters
    ----------
    query_length, key_length : int
        Numbers of queries and keys, >= 1.
    table : array
        The learned bias table ``(num_buckets, n_heads)`` (``nn.Embedding.weight``):
        NumPy, JAX, PyTorch or TensorFlow. Gradients flow to it (the bias is a gather).
        ``num_buckets`` is its first axis.
    offset : int or integer array
        Position of the first query (cached tokens); an int, or per-example offsets
        ``(batch,)``.
    bidirectional, max_distance, arithmetic
        As for :func:`t5_relative_bucket` (T5: encoders bidirectional, decoders not).
    backend : str, optional
        The table's backend, when the caller knows it (found from the table otherwise).

    Returns
    -------
    array
        ``(1, n_heads, query_length, key_length)`` (``(batch, ...)`` for per-example
        offsets) on the table's backend and device, in its dtype: add it to the scores
        ``(batch, n_heads, query_length, key_length)``.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.arange(64.0).reshape(32, 2)   # bucket b, head h -> 2 b + h
    >>> t5_relative_bias(2, 3, table)[0, 1].tolist()  # head 1
    [[1.0, 35.0, 37.0], [3.0, 1.0, 35.0]]
    """
    xp, array, shape = _place.learned_table(table, backend)
    if len(shape) != 2:
        raise ValueError(f"table must have shape (num_buckets, n_heads). Received: shape {shape}")
    q_len = positive_int(query_length, "query_length")
    k_len = positive_int(key_length, "key_length")
    config = _config(bidirectional, int(shape[0]), max_distance, arithmetic)
    offset, _ = _t5.offset_and_source(offset)
    n_heads = int(shape[1]) if is_integer(shape[1]) else 1  # (unknown while tracing)
    n_pairs = (known_size(offset) or 1) * q_len * k_len  # the bias, then its buckets
    check_request_size(
        n_pairs * n_heads,
        xp.dtype_of(array),
        what="t5_relative_bias",
        extra_bytes=24 * n_pairs,
        like=array,
    )
    scalar = isinstance(offset, numbers.Integral)
    if (
        xp.compile_eager_kernels
        and not (xp.is_tracing() or xp.is_traced(array) or xp.is_traced(offset))
        and not (scalar and not _t5.fits_wide(int(offset), xp))
    ):
        # Eager JAX: one compiled program per shape and configuration (the offset is
        # an argument: decode steps reuse it), not one compilation per operation.
        if scalar:
            offset = _t5.fit_int(np.array(int(offset)), xp, "offset")
        return _t5.bias_program(xp, q_len, k_len, *config)(array, offset)
    return _t5.bias(xp, array, q_len, k_len, offset, *config)
