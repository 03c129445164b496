"""The framework-neutral configuration of the ``RelativePositionBias`` layers.

The mixin validates and stores the window, the heads and the prefix tokens, gives
them back as JSON-ready data and computes the bias with
:func:`pe_core.relative_index.relative_position_bias`, so the PyTorch, Flax and Keras
layers take the same arguments and give the same numbers for the same table.

>>> config = RelativePositionBiasConfig(7, 4)
>>> config.window_size, config.table_shape()
((7, 7), (169, 4))
"""

from __future__ import annotations

from typing import Any

from pe_core.layers._config import LayerConfig
from pe_core.relative_index import num_relative_distance, relative_position_bias
from pe_core.validation import positive_int

__all__ = ["RelativePositionBiasConfig"]


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
        super().__init__(**kwargs)
        values = self.validate_bias(window_size, n_heads, prefix_tokens)
        self.window_size, self.n_heads, self.prefix_tokens = values

    @staticmethod
    def validate_bias(
        window_size: Any, n_heads: Any, prefix_tokens: Any
    ) -> tuple[tuple[int, int], int, int]:
        """Validated ``(window_size, n_heads, prefix_tokens)``."""
        num_relative_distance(window_size, prefix_tokens=prefix_tokens)  # raises if wrong
        if isinstance(window_size, (list, tuple)):
            window = (int(window_size[0]), int(window_size[1]))
        else:
            window = (int(window_size), int(window_size))
        heads = positive_int(n_heads, "n_heads", what="attention heads")
        return window, heads, int(prefix_tokens)

    def table_shape(self) -> tuple[int, int]:
        """``(num_relative_distance, n_heads)``: the learned table's shape."""
        rows = num_relative_distance(self.window_size, prefix_tokens=self.prefix_tokens)
        return rows, self.n_heads

    def _bias(self, table: Any, backend: str) -> Any:
        """The bias ``(n_heads, N, N)`` of the learned ``table`` of ``backend``."""
        return relative_position_bias(
            table, self.window_size, prefix_tokens=self.prefix_tokens, backend=backend
        )

    def _layer_config(self) -> dict[str, Any]:
        return self.bias_config()

    def _layer_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.bias_config().items())

    def _validated_fields(self) -> dict[str, Any]:
        names = ("window_size", "n_heads", "prefix_tokens")
        values = self.validate_bias(*(getattr(self, name) for name in names))
        return dict(zip(names, values, strict=True))

    def bias_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "window_size": self.window_size,
            "n_heads": self.n_heads,
            "prefix_tokens": self.prefix_tokens,
        }
