"""The framework-neutral configuration of the relative-bias layers (T5, ALiBi, Swin).

The mixins validate and store the layers' arguments, give them back as JSON-ready
data and compute the bias with :func:`pe_core.t5.t5_relative_bias`,
:func:`pe_core.alibi_bias` and :func:`pe_core.relative_index.relative_position_bias`,
so the PyTorch, Flax and Keras layers take the same arguments and give the same
numbers for the same table.

>>> config = RelativePositionBiasConfig(7, 4)
>>> config.window_size, config.table_shape()
((7, 7), (169, 4))
"""

from __future__ import annotations

from typing import Any

from pe_core.alibi import alibi_bias
from pe_core.layers._checks import check_features, check_flag, scores_shape
from pe_core.layers._config import LayerConfig
from pe_core.relative_index import num_relative_distance, relative_position_bias
from pe_core.t5 import t5_relative_bias, t5_relative_bucket
from pe_core.validation import finite_real, positive_int


class T5RelativeBiasConfig(LayerConfig):
    """Configuration of the ``T5RelativeBias`` layers (a framework-neutral mixin).

    Parameters
    ----------
    n_heads : int
        Attention heads: the learned table is ``(num_buckets, n_heads)``.
    num_buckets : int
        T5's ``relative_attention_num_buckets`` (32).
    max_distance : int
        T5's ``relative_attention_max_distance`` (128).
    bidirectional : bool
        ``True`` for encoders (T5's ``not is_decoder``), ``False`` for decoders.

    Notes
    -----
    The bias of ``query_length`` queries and ``key_length`` keys is ``(1, n_heads,
    query_length, key_length)`` (``(batch, ...)`` for per-example offsets ``(batch,)``),
    to add to the scores: ``compute_bias`` of transformers' ``T5Attention``, bit for bit
    in its buckets. ``offset`` is the position of the first query (the cached tokens):
    an int or an integer array, scalar or ``(batch,)``.

    Examples
    --------
    >>> T5RelativeBiasConfig(8).t5_config()
    {'n_heads': 8, 'num_buckets': 32, 'max_distance': 128, 'bidirectional': True}
    >>> T5RelativeBiasConfig(8, num_buckets=2)
    Traceback (most recent call last):
    ...
    ValueError: num_buckets must be at least 4 when bidirectional=True (at least one exact bucket per side). Received: 2
    """

    n_heads: int
    num_buckets: int
    max_distance: int
    bidirectional: bool

    def __init__(
        self,
        n_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(
        n_heads: Any, num_buckets: Any, max_distance: Any, bidirectional: Any
    ) -> dict[str, Any]:
        heads = positive_int(n_heads, "n_heads", what="attention heads")
        t5_relative_bucket(
            0, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )
        return {
            "n_heads": heads,
            "num_buckets": int(num_buckets),
            "max_distance": int(max_distance),
            "bidirectional": bool(bidirectional),
        }

    def _bias(
        self, table: Any, query_length: Any, key_length: Any, offset: Any, backend: str
    ) -> Any:
        """:func:`pe_core.t5.t5_relative_bias` with the learned ``table`` and this layer's
        configuration: ``(1, n_heads, query_length, key_length)``."""
        options: dict[str, Any] = {
            "bidirectional": self.bidirectional,
            "max_distance": self.max_distance,
        }
        return t5_relative_bias(
            query_length, key_length, table, offset=offset, backend=backend, **options
        )

    t5_config = LayerConfig._layer_config


class AlibiBiasConfig(LayerConfig):
    """Configuration of the ``AlibiBias`` layers (a framework-neutral mixin).

    Parameters
    ----------
    n_heads : int, optional
        Attention heads (required by the PyTorch and Flax layers, which are called with
        lengths; the Keras layer reads it from the scores when ``None``).
    alibi_bias_max : float
        The slope rule's ``8`` (keras-hub ``AlibiBias(alibi_bias_max)``): head ``k`` of
        ``p`` (a power of two) has slope ``2 ** (-alibi_bias_max * k / p)``; see
        :func:`pe_core.alibi_slopes`.
    causal : bool
        As for :func:`pe_core.alibi_bias`: ``True`` includes the causal mask (``-inf``
        for keys after the query); ``False`` is the symmetric ``-slope * |distance|``.

    Examples
    --------
    >>> AlibiBiasConfig(4, alibi_bias_max=16).alibi_config()
    {'n_heads': 4, 'alibi_bias_max': 16.0, 'causal': True}
    """

    n_heads: int | None
    alibi_bias_max: float
    causal: bool

    def __init__(
        self,
        n_heads: int | None = None,
        *,
        alibi_bias_max: float = 8.0,
        causal: bool = True,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(n_heads: Any, alibi_bias_max: Any, causal: Any) -> dict[str, Any]:
        heads = None if n_heads is None else positive_int(n_heads, "n_heads", what="heads")
        return {
            "n_heads": heads,
            "alibi_bias_max": finite_real(alibi_bias_max, "alibi_bias_max", greater_than=0),
            "causal": check_flag(causal, "causal"),
        }

    def _bias(
        self, query_length: Any, key_length: Any, n_heads: int | None = None, **kwargs: Any
    ) -> Any:
        """:func:`pe_core.alibi_bias` with this layer's configuration (``n_heads`` the
        layer's by default; ``kwargs`` its ``backend``, ``dtype``, ``like``), with a
        leading batch axis: ``(1, n_heads, query_length, key_length)``."""
        heads = self.n_heads if n_heads is None else n_heads
        assert heads is not None
        options = {"causal": self.causal, "alibi_bias_max": self.alibi_bias_max, **kwargs}
        return alibi_bias(query_length, key_length, heads, **options)[None]

    alibi_config = LayerConfig._layer_config


class AlibiHeadsConfig(AlibiBiasConfig):
    """:class:`AlibiBiasConfig` whose ``n_heads`` is required: the layers called with
    lengths, not scores (PyTorch, Flax).

    >>> AlibiHeadsConfig(None)
    Traceback (most recent call last):
    ...
    TypeError: n_heads must be a positive integer (attention heads). Received: None
    """

    n_heads: int

    def __init__(
        self, n_heads: int, *, alibi_bias_max: float = 8.0, causal: bool = True, **kwargs: Any
    ) -> None:
        if n_heads is None:
            raise TypeError("n_heads must be a positive integer (attention heads). Received: None")
        self._configure(locals())


class RelativePositionBiasConfig(LayerConfig):
    """Configuration of the ``RelativePositionBias`` layers (a framework-neutral mixin).

    Parameters
    ----------
    window_size : int or (int, int)
        The attention window ``(Wh, Ww)`` (an int for a square window), each >= 1.
    n_heads : int
        Attention heads: the learned table is ``(num_relative_distance, n_heads)``.
    prefix_tokens : int
        0 (Swin) or 1 (BEiT's class token, three more table rows).

    Notes
    -----
    The bias is ``(n_heads, N, N)``, ``N = Wh * Ww + prefix_tokens``:
    ``bias[h, i, j] = table[relative_position_index(window_size)[i, j], h]``. The table
    starts at zeros (BEiT's initialisation; Swin draws it from a truncated normal of
    standard deviation 0.02, which a user can assign).

    Examples
    --------
    >>> RelativePositionBiasConfig((2, 3), 2, prefix_tokens=1).bias_config()
    {'window_size': (2, 3), 'n_heads': 2, 'prefix_tokens': 1}
    >>> RelativePositionBiasConfig(0, 2)
    Traceback (most recent call last):
    ...
    ValueError: window_size must be an integer >= 1 or a pair of them (height, width). Received: 0
    """

    window_size: tuple[int, int]
    n_heads: int
    prefix_tokens: int

    def __init__(
        self, window_size: Any, n_heads: int, *, prefix_tokens: int = 0, **kwargs: Any
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(window_size: Any, n_heads: Any, prefix_tokens: Any) -> dict[str, Any]:
        num_relative_distance(window_size, prefix_tokens=prefix_tokens)  # raises if wrong
        pair = window_size if isinstance(window_size, (list, tuple)) else (window_size, window_size)
        window = (int(pair[0]), int(pair[1]))
        heads = positive_int(n_heads, "n_heads", what="attention heads")
        return {"window_size": window, "n_heads": heads, "prefix_tokens": int(prefix_tokens)}

    def table_shape(self) -> tuple[int, int]:
        """``(num_relative_distance, n_heads)``: the learned table's shape."""
        rows = num_relative_distance(self.window_size, prefix_tokens=self.prefix_tokens)
        return rows, self.n_heads

    def _check_scores(self, shape: tuple[int | None, ...]) -> None:
        """Raise unless ``shape`` is ``(batch, n_heads, N, N)``, naming what differs."""
        heads, q_len, k_len = scores_shape(shape)
        check_features(heads, self.n_heads, "n_heads")
        n = self.window_size[0] * self.window_size[1] + self.prefix_tokens
        for length, name in ((q_len, "query_length"), (k_len, "key_length")):
            if length is not None and length != n:
                raise ValueError(
                    f"attention_scores must have {name} N = Wh * Ww + prefix_tokens = {n}. "
                    f"Received: shape {shape}"
                )

    def _bias(self, table: Any, backend: str) -> Any:
        """The bias ``(n_heads, N, N)`` of the learned ``table`` of ``backend``."""
        return relative_position_bias(
            table, self.window_size, prefix_tokens=self.prefix_tokens, backend=backend
        )

    bias_config = LayerConfig._layer_config
