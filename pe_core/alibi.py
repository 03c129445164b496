"""ALiBi (Press et al., 2022): per-head slopes and the attention bias they define.

:func:`alibi_slopes` is pure NumPy float64; :func:`alibi_bias` builds the
``(n_heads, q_len, k_len)`` bias on any backend.

The slope rule follows the paper's reference ``get_slopes`` (ofirpress/attention_with_linear_biases)
and BLOOM's ``build_alibi_tensor`` in transformers. For ``n`` heads with ``p``
the largest power of two ``<= n``:

* the first ``p`` slopes are ``2 ** (-8 * k / p)`` for ``k = 1 .. p``;
* the remaining ``n - p`` slopes are the odd-indexed members of the ``2p``-head
  sequence, ``2 ** (-8 * k / (2 p))`` for ``k = 1, 3, 5, ..``.

The bias of head ``h`` for query ``i`` and key ``j`` is ``-slopes[h] * (i + k_len - q_len - j)``:
queries are the last ``q_len`` of the ``k_len`` positions (KV-cache decoding).

>>> from pe_core.alibi import alibi_slopes
>>> alibi_slopes(4).tolist()
[0.25, 0.0625, 0.015625, 0.00390625]
"""

from __future__ import annotations

from typing import overload

import numpy as np

from pe_core import device_tables
from pe_core._index import place as _place
from pe_core._kernel.inputs import check_request_size, resolve_dtype, working_dtype
from pe_core.typing import (
    Array,
    BackendLike,
    DTypeLike,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import finite_real, positive_int

__all__ = ["alibi_bias", "alibi_slopes"]


def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> np.ndarray:
    """Per-head ALiBi slopes, closest-power-of-two rule included.

    Parameters
    ----------
    n_heads : int
        Number of attention heads, >= 1.
    alibi_bias_max : float
        The ``8`` of the rule (keras-hub ``AlibiBias(alibi_bias_max)``, MPT
        ``alibi_bias_max``): the first ``p`` slopes are ``2 ** (-alibi_bias_max * k / p)``.
        A finite number > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n_heads,)``. Head ``h`` adds
        ``-slopes[h] * (i - j)`` to the score of query ``i`` on key ``j``.
        The values are computed as ``2.0 ** exponent`` with the exponent
        evaluated in float64, so powers of two come out exact. BLOOM instead
        raises a float32 base to integer powers, which differs in the last
        bits.

    Raises
    ------
    TypeError
        If ``n_heads`` is not an integer (``bool`` and floats included).
    ValueError
        If ``n_heads`` < 1.

    Examples
    --------
    >>> alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]
    True
    >>> s = alibi_slopes(12)  # 8 heads of the 8-rule, then 4 odd ones of the 16-rule
    >>> s[8:].tolist() == [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    True
    """
    n = positive_int(n_heads, "n_heads")
    top = finite_real(alibi_bias_max, "alibi_bias_max", greater_than=0)
    check_request_size(n, "float64", what="alibi_slopes", extra_bytes=16 * n)
    p = 1 << (n.bit_length() - 1)  # largest power of two <= n
    k = np.arange(1, p + 1, dtype=np.float64)
    slopes = np.power(2.0, -top * k / p)
    if p != n:
        k_extra = np.arange(1, 2 * (n - p), 2, dtype=np.float64)
        slopes = np.concatenate([slopes, np.power(2.0, -top * k_extra / (2 * p))])
    return slopes


# fmt: off
@overload
def alibi_bias(q_len: int, k_len: int, n_heads: int, *, causal: bool = True,
    backend: NumpyBackend | None = None, dtype: DTypeLike | None = None, like: None = None,
    alibi_bias_max: float = 8.0) -> NDArray: ...
@overload
def alibi_bias(q_len: int, k_len: int, n_heads: int, *, causal: bool = True, backend: TorchBackend,
    dtype: DTypeLike | None = None, like: None = None, alibi_bias_max: float = 8.0
) -> TorchTensor: ...
@overload
def alibi_bias(q_len: int, k_len: int, n_heads: int, *, causal: bool = True, backend: JaxBackend,
    dtype: DTypeLike | None = None, like: None = None, alibi_bias_max: float = 8.0) -> JaxArray: ...
@overload
def alibi_bias(q_len: int, k_len: int, n_heads: int, *, causal: bool = True,
    backend: TensorFlowBackend, dtype: DTypeLike | None = None, like: None = None,
    alibi_bias_max: float = 8.0) -> TFTensor: ...
@overload
def alibi_bias(q_len: int, k_len: int, n_heads: int, *, causal: bool = True,
    backend: BackendLike | None = None, dtype: DTypeLike | None = None, like: Array | None = None,
    alibi_bias_max: float = 8.0) -> Array: ...
# fmt: on


def alibi_bias(
    q_len: int,
    k_len: int,
    n_heads: int,
    *,
    causal: bool = True,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
    like: Array | None = None,
    alibi_bias_max: float = 8.0,
) -> Array:
    """The ALiBi attention bias ``(n_heads, q_len, k_len)``, added to ``q @ k.T / sqrt(d)``.

    Parameters
    ----------
    q_len : int
        Number of queries, >= 1. Queries are aligned to the *end* of the keys: query
        ``i`` sits at position ``i + k_len - q_len`` (the ``q_len`` newest tokens of a
        KV cache holding ``k_len``), so ``q_len <= k_len``.
    k_len : int
        Number of keys, >= 1; key ``j`` sits at position ``j``.
    n_heads : int
        Number of heads, >= 1; head ``h`` uses ``alibi_slopes(n_heads)[h]``.
    causal : bool
        ``True``: ``bias[h, i, j] = -slope_h * (i + k_len - q_len - j)`` for keys at or
        before the query, ``-inf`` for keys after it (the causal mask). ``False``:
        ``-slope_h * |i + k_len - q_len - j|`` everywhere (``|i - j|`` when the lengths
        are equal), the symmetric form used by bidirectional models.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to build the bias; the backend of ``like``, else NumPy, by default.
    dtype : str or dtype, optional
        float32 by default; float64, float16 or bfloat16 where the backend has them.
        The product ``slope * distance`` is formed in float32 (float64 for float64)
        and rounded once to ``dtype``.
    like : array, optional
        An array (e.g. the attention scores) whose backend and device the bias
        follows. The bias is exact integers times slopes, built on the host: on an
        accelerator it is moved there once and reused from a bounded cache
        (:mod:`pe_core.device_tables`), so repeated calls do no transfer.
    alibi_bias_max : float
        The slope rule's ``8``, as for :func:`alibi_slopes`.

    Returns
    -------
    array
        Shape ``(n_heads, q_len, k_len)``. On the diagonal (the query's own position)
        the bias is ``0``; it falls linearly, by ``slope_h`` per position, with the
        distance to older keys.

    Raises
    ------
    TypeError
        Non-integer lengths or head count.
    ValueError
        ``q_len`` or ``k_len`` < 1, ``q_len > k_len``, ``n_heads`` < 1, an unknown
        backend or dtype.

    Notes
    -----
    BLOOM (transformers' ``build_alibi_tensor``) and the paper's code add
    ``+slope_h * j`` instead, which differs from this bias by ``slope_h * (i + k_len -
    q_len)``, the same for every key of a query, so the softmax is unchanged.

    Examples
    --------
    >>> b = alibi_bias(3, 3, 2)
    >>> b.shape, b.dtype
    ((2, 3, 3), dtype('float32'))
    >>> b[0].tolist()  # slope 1/16 for head 0 of 2
    [[0.0, -inf, -inf], [-0.0625, 0.0, -inf], [-0.125, -0.0625, 0.0]]
    >>> alibi_bias(1, 4, 1)[0].tolist()  # one new query after 3 cached keys
    [[-0.01171875, -0.0078125, -0.00390625, 0.0]]
    >>> alibi_bias(2, 2, 1, causal=False)[0].tolist()
    [[0.0, -0.00390625], [-0.00390625, 0.0]]
    """
    q_len = positive_int(q_len, "q_len")
    k_len = positive_int(k_len, "k_len")
    if q_len > k_len:
        raise ValueError(
            "q_len must not exceed k_len: queries are the last q_len of the k_len positions. "
            f"Received: q_len={q_len}, k_len={k_len}"
        )
    slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
    xp = _place.int_namespace(backend, like)
    out_name, out_dtype = resolve_dtype(xp, dtype)
    working = working_dtype(out_name)
    check_request_size(  # the output and the host's (q_len, k_len) offsets, before any
        len(slopes) * q_len * k_len, out_name, what="alibi_bias", extra_bytes=24 * q_len * k_len
    )
    anchor = _place.anchor(xp, like)
    if anchor is not None and xp.on_accelerator(anchor):
        key = ("alibi", q_len, k_len, n_heads, bool(causal), float(alibi_bias_max))
        return device_tables.cached(
            xp, key, like, out_name, lambda: _host_bias(q_len, k_len, slopes, causal, working)
        )
    bias_host = _host_bias(q_len, k_len, slopes, causal, working)
    bias = xp.from_host(bias_host, like=anchor)
    if out_name != working:
        bias = xp.astype(bias, out_dtype)
    return bias


def _host_bias(
    q_len: int, k_len: int, slopes: np.ndarray, causal: bool, working: str
) -> np.ndarray:
    """The bias on the host in the working dtype (the product formed there)."""
    # Signed offset key - query (<= 0 for keys at or before the query), exact integers.
    offset = np.arange(k_len)[None, :] - (np.arange(q_len)[:, None] + (k_len - q_len))
    if causal:
        offset = np.where(offset > 0, -np.inf, offset)  # slope * -inf = -inf: the mask
    else:
        offset = -np.abs(offset)
    return slopes.astype(working).reshape(-1, 1, 1) * offset.astype(working)
