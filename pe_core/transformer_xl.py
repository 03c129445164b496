"""Transformer-XL's relative sinusoidal embedding, on pe_core's exact encoding.

Transformer-XL (Dai et al., 2019) encodes *relative distances*: with ``mem_len`` cached
tokens and ``q_len`` current ones (``klen = mem_len + q_len`` keys) it embeds the
descending distances ``klen - 1, klen - 2, ..., 0`` (each clamped to ``clamp_len`` when
that is > 0) and its attention reads row ``klen - 1 - (i - j)`` for query ``i`` and key
``j`` after the "relative shift". The embedding of a distance ``p`` is

    [sin(p w_0), ..., sin(p w_{d/2-1}) | cos(p w_0), ..., cos(p w_{d/2-1})],
    w_i = 1 / 10000 ** (2 i / d),

the split layout with the paper's frequencies: :data:`TRANSFORMER_XL`, a
:class:`~pe_core.Spec`. The original ``PositionalEmbedding`` (kimiyoung/transformer-xl,
and transformers' deprecated ``TransfoXLModel``) forms ``p * w`` in float32; here the
angle is exact (see :mod:`pe_core._kernel.angles`).

>>> from pe_core.transformer_xl import transformer_xl_embedding, transformer_xl_positions
>>> transformer_xl_positions(3, mem_len=2).tolist()
[4, 3, 2, 1, 0]
>>> transformer_xl_embedding(3, 4, mem_len=2).shape
(5, 4)
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from pe_core.encoding import encode
from pe_core.spec import Spec
from pe_core.typing import (
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
from pe_core.validation import check_elements, is_integer, positive_int
from pe_core_backends import backend_of

__all__ = ["TRANSFORMER_XL", "transformer_xl_embedding", "transformer_xl_positions"]

#: The Spec of Transformer-XL's ``PositionalEmbedding``: frequencies ``10000 ** (-2i/d)``,
#: ``[sin | cos]`` layout.
TRANSFORMER_XL = Spec(layout="split", name="transformer_xl")


def transformer_xl_positions(
    q_len: int, *, mem_len: int = 0, clamp_len: int | None = None
) -> np.ndarray:
    """The distances Transformer-XL embeds: ``klen - 1, ..., 1, 0``, clamped.

    Parameters
    ----------
    q_len : int
        Current tokens (queries), >= 1.
    mem_len : int
        Cached tokens (memory) before them, >= 0; ``klen = mem_len + q_len``.
    clamp_len : int, optional
        Distances above it are replaced by it. ``None``, or an int <= 0, clamps nothing
        (the original's ``if clamp_len > 0`` rule, so configs port unchanged).

    Returns
    -------
    numpy.ndarray
        int64, shape ``(klen,)``.

    Examples
    --------
    >>> transformer_xl_positions(4).tolist()
    [3, 2, 1, 0]
    >>> transformer_xl_positions(2, mem_len=3, clamp_len=2).tolist()
    [2, 2, 2, 1, 0]
    """
    return _positions(q_len, mem_len, clamp_len, "transformer_xl_positions")


def _positions(q_len: Any, mem_len: Any, clamp_len: Any, what: str) -> np.ndarray:
    q_len = positive_int(q_len, "q_len")
    mem_len = positive_int(mem_len, "mem_len", minimum=0)
    if clamp_len is not None and not is_integer(clamp_len):
        raise TypeError(
            f"clamp_len must be None or an integer (<= 0 clamps nothing). Received: {clamp_len!r}"
        )
    # the distances and their clamped copy, before either is built
    check_elements(mem_len + q_len, what, per_element=16)
    positions = np.arange(mem_len + q_len - 1, -1, -1, dtype=np.int64)
    if clamp_len is not None and clamp_len > 0:
        positions = np.minimum(positions, int(clamp_len))
    return positions


# fmt: off
@overload
def transformer_xl_embedding(q_len: int, d: int, *, mem_len: int = 0, clamp_len: int | None = None,
    backend: NumpyBackend | None = None, dtype: DTypeLike = None, like: None = None) -> NDArray: ...
@overload
def transformer_xl_embedding(q_len: int, d: int, *, mem_len: int = 0, clamp_len: int | None = None,
    backend: TorchBackend, dtype: DTypeLike = None, like: None = None) -> TorchTensor: ...
@overload
def transformer_xl_embedding(q_len: int, d: int, *, mem_len: int = 0, clamp_len: int | None = None,
    backend: JaxBackend, dtype: DTypeLike = None, like: None = None) -> JaxArray: ...
@overload
def transformer_xl_embedding(q_len: int, d: int, *, mem_len: int = 0, clamp_len: int | None = None,
    backend: TensorFlowBackend, dtype: DTypeLike = None, like: None = None) -> TFTensor: ...
@overload
def transformer_xl_embedding(q_len: int, d: int, *, mem_len: int = 0, clamp_len: int | None = None,
    backend: BackendLike | None = None, dtype: DTypeLike = None, like: Any = None) -> Any: ...
# fmt: on


def transformer_xl_embedding(
    q_len: int,
    d: int,
    *,
    mem_len: int = 0,
    clamp_len: int | None = None,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
    like: Any = None,
) -> Any:
    """Transformer-XL's relative position embedding ``R``: ``(mem_len + q_len, d)``.

    Row ``r`` encodes the distance ``klen - 1 - r`` (clamped), as the original
    ``PositionalEmbedding(d)(pos_seq)`` does, without its middle batch axis of size 1
    (add ``[:, None]`` for the original's ``(klen, 1, d)``).

    Parameters
    ----------
    q_len : int
        Current tokens (queries), >= 1.
    d : int
        Features (``d_model``), even.
    mem_len : int
        Cached tokens before them, >= 0.
    clamp_len : int, optional
        Clamp distances above it (``None`` or <= 0: no clamp).
    backend, dtype, like
        As for :func:`~pe_core.encode`: NumPy float32 by default; ``like`` puts the
        table on an array's backend and device (built once there, then cached).

    Returns
    -------
    array
        ``(mem_len + q_len, d)``; row ``r`` is ``encode(klen - 1 - r, d,
        spec=TRANSFORMER_XL)``.

    Examples
    --------
    >>> import numpy as np
    >>> R = transformer_xl_embedding(2, 4, mem_len=1)
    >>> R.shape, R[-1].tolist()  # the last row is distance 0: [sin 0, sin 0 | cos 0, cos 0]
    ((3, 4), [0.0, 0.0, 1.0, 1.0])
    >>> bool(np.allclose(R[0], [np.sin(2), np.sin(0.02), np.cos(2), np.cos(0.02)]))
    True
    """
    positions = _positions(q_len, mem_len, clamp_len, "transformer_xl_embedding")
    if backend is None and like is not None:
        backend = backend_of(like)
    return encode(positions, d, spec=TRANSFORMER_XL, backend=backend, dtype=dtype, like=like)
