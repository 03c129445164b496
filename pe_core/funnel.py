"""Funnel Transformer's relative sinusoid position embeddings, on pe_core's exact encoding.

Funnel Transformer (Dai et al., 2020) embeds relative distances with the sinusoid

    [sin(p w_0), ..., sin(p w_{n-1}) | cos(p w_0), ..., cos(p w_{n-1})],
    w_i = 1 / 10000 ** (i / n),  n = d_model / 2,

that is ``10000 ** (-2 i / d_model)``: the ``"d"`` denominator of :class:`~pe_core.Spec`
(``i / (d/2) = 2 i / d``) in the split layout, :data:`FUNNEL` (the same frequencies as
Transformer-XL's). transformers' ``FunnelAttentionStructure.get_position_embeds`` builds
one of two inputs:

* ``attention_type="relative_shift"``: per block, the embeddings of the distances
  :func:`~pe_core.relative_index.funnel_relative_positions` gives for the block's own
  positions (stride ``2 ** block``) and, from block 1 on, for its pooled queries on the
  previous block's keys (stride ``2 ** (block - 1)``, shift 2);
* ``attention_type="factorized"``: ``phi = [sin | sin]``, ``pi = [cos | cos]``,
  ``psi = [cos | sin]`` and ``omega = [-sin | cos]`` of the absolute positions
  ``0 .. seq_len - 1``.

transformers forms ``p * w`` in the model's dtype and gathers the rows from a table of
the distances ``-2 seq_len .. 2 seq_len - 1``; here each angle is exact and each distance
is encoded directly (so also where that table is too short and transformers' gather fails:
with three blocks, ``seq_len`` 1 and 2, and 3, 4, 6 with ``separate_cls`` and no
``truncate_seq``). Its dropout on the sin and cos terms (training only) is not applied.

>>> from pe_core.funnel import funnel_position_embeds
>>> blocks = funnel_position_embeds(4, 8, num_blocks=2)
>>> [tuple(None if e is None else e.shape for e in block) for block in blocks]
[((8, 8), None), ((4, 8), (8, 8))]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core._index import funnel as _funnel
from pe_core._index import place as _place
from pe_core.encoding import encode
from pe_core.spec import Spec
from pe_core.typing import BackendArrayT, BackendLike
from pe_core.validation import choice, flag, is_integer, positive_int
from pe_core_backends import backend_of, get_namespace

__all__ = [
    "FUNNEL",
    "FUNNEL_ATTENTION_TYPES",
    "funnel_block_positions",
    "funnel_pooled_positions",
    "funnel_position_embeds",
    "funnel_relative_positions",
]

#: The Spec of Funnel Transformer's sinusoid: frequencies ``10000 ** (-i / (d/2))``,
#: ``[sin | cos]`` layout.
FUNNEL = Spec(layout="split", name="funnel")

#: The attention types of ``FunnelConfig.attention_type``.
FUNNEL_ATTENTION_TYPES: tuple[str, ...] = ("relative_shift", "factorized")


def funnel_position_embeds(
    seq_len: int,
    d_model: int,
    *,
    attention_type: str = "relative_shift",
    num_blocks: int = 3,
    separate_cls: bool = True,
    truncate_seq: bool = True,
    backend: str | None = None,
    dtype: Any = None,
    like: Any = None,
) -> Any:
    """The position inputs of Funnel Transformer's attention (``get_position_embeds``).

    Parameters
    ----------
    seq_len : int
        Tokens of the input, >= 1.
    d_model : int
        Features, even and >= 2 (transformers' gather needs ``2 * (d_model // 2) ==
        d_model``).
    attention_type : {"relative_shift", "factorized"}
        ``FunnelConfig.attention_type``.
    num_blocks : int
        ``len(FunnelConfig.block_sizes)``, >= 1 (``"relative_shift"`` only).
    separate_cls, truncate_seq : bool
        ``FunnelConfig.separate_cls`` and ``truncate_seq`` (``"relative_shift"`` only).
    backend, dtype, like
        As for :func:`~pe_core.encode`: NumPy float32 by default; ``like`` puts the
        tables on an array's backend and device.

    Returns
    -------
    list or tuple
        ``"relative_shift"``: a list of ``num_blocks`` pairs ``(no_pooling, pooling)``
        (transformers gives lists), each ``(len(r), d_model)`` with rows
        ``encode(r, d_model, spec=FUNNEL)`` of the distances ``r`` of
        :func:`~pe_core.relative_index.funnel_relative_positions`; ``pooling`` is None
        in block 0. ``"factorized"``: ``(phi, pi, psi, omega)``, each
        ``(seq_len, d_model)``.

    Raises
    ------
    TypeError, ValueError
        A size that is not an int >= 1, an odd ``d_model``, an unknown
        ``attention_type``, a flag that is not a bool.

    Examples
    --------
    >>> phi, pi, psi, omega = funnel_position_embeds(3, 4, attention_type="factorized")
    >>> omega[0].tolist(), psi[0].tolist()  # position 0: [-sin 0, -sin 0 | cos 0, cos 0]
    ([0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0])
    >>> funnel_position_embeds(3, 5)
    Traceback (most recent call last):
    ...
    ValueError: d_model must be an even integer >= 2 (Funnel's [sin | cos] halves). Received: 5
    """
    n = positive_int(seq_len, "seq_len")
    if not is_integer(d_model):
        raise TypeError(f"d_model must be an even integer >= 2. Received: {d_model!r}")
    if d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be an even integer >= 2 (Funnel's [sin | cos] halves). Received: {d_model}"
        )
    d = int(d_model)
    kind = choice(attention_type, "attention_type", FUNNEL_ATTENTION_TYPES)
    blocks = positive_int(num_blocks, "num_blocks")
    sep, trunc = _flags(separate_cls, truncate_seq)
    if backend is None and like is not None:
        backend = backend_of(like)

    def embed(positions: Any) -> Any:
        return encode(positions, d, spec=FUNNEL, backend=backend, dtype=dtype, like=like)

    if kind == "factorized":
        pos = np.arange(n, dtype=np.int64)
        table = embed(pos)  # [sin | cos]
        xp = get_namespace(backend_of(table) or "numpy")
        sin, cos = table[:, : d // 2], table[:, d // 2 :]
        phi, pi, psi = (xp.concat(pair, axis=-1) for pair in ([sin, sin], [cos, cos], [cos, sin]))
        omega = embed(-pos)  # [sin(-p w) | cos(-p w)] = [-sin | cos], exactly
        return (phi, pi, psi, omega)

    out: list[Any] = []
    pos = funnel_block_positions(n, 0).tolist()
    for block in range(blocks):
        pooling = None  # block 0 has no pooling
        if block:
            pooled = funnel_block_positions(n, block, separate_cls=sep, truncate_seq=trunc).tolist()
            pooling = embed(funnel_relative_positions(pos, 2 ** (block - 1), pooled, shift=2))
            pos = pooled
        out.append((embed(funnel_relative_positions(pos, 2**block)), pooling))
    return out


# --------------------------------------------------------------------------- index tables


def _flags(separate_cls: object, truncate_seq: object) -> tuple[bool, bool]:
    return flag(separate_cls, "separate_cls"), flag(truncate_seq, "truncate_seq")


def funnel_pooled_positions(
    pos: Any,
    block_index: int,
    *,
    separate_cls: bool = True,
    truncate_seq: bool = True,
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
    values = _funnel.int_list(pos, "pos")
    block = positive_int(block_index, "block_index")
    sep, trunc = _flags(separate_cls, truncate_seq)
    _funnel.check_block(block, sep)
    xp = _place.int_namespace(backend, like)
    pooled = _funnel.pool(values, block, sep, trunc)
    return _place.place(xp, np.array(pooled, dtype=np.int64), _place.anchor(xp, like))


def funnel_block_positions(
    seq_len: int,
    block_index: int,
    *,
    separate_cls: bool = True,
    truncate_seq: bool = True,
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
    sep, trunc = _flags(separate_cls, truncate_seq)
    _funnel.check_block(block, sep)
    args = (n, block, sep, trunc)
    return _place.build("funnel_block_positions", n, "funnel_block", args, backend, like)


def funnel_relative_positions(
    pos: Any,
    stride: int,
    pooled_pos: Any = None,
    *,
    shift: int = 1,
    backend: BackendLike | None = None,
    like: BackendArrayT | None = None,
) -> BackendArrayT:
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
    keys = _funnel.int_list(pos, "pos")
    queries = keys if pooled_pos is None else _funnel.int_list(pooled_pos, "pooled_pos")
    step = positive_int(stride, "stride")
    times = positive_int(shift, "shift")
    max_dist = queries[0] - keys[0] + times * len(queries) * step
    min_dist = queries[0] - keys[-1]
    if max_dist < min_dist - 1:
        raise ValueError(
            "funnel_relative_positions needs max_dist >= min_dist - 1 (keys in ascending "
            f"order). Received: max_dist = {max_dist}, min_dist = {min_dist}"
        )
    n = (max_dist - min_dist) // step + 1
    args = (keys, step, queries, times)
    return _place.build("funnel_relative_positions", n, "funnel", args, backend, like)
