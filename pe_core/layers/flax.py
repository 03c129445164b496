"""Flax layers, for both Flax APIs: NNX modules and linen modules.

* NNX (``flax.nnx.Module``): :class:`SinusoidalEncoding` and :class:`RotaryEmbedding`;
* linen (``flax.linen.Module``): :class:`LinenSinusoidalEncoding` and
  :class:`LinenRotaryEmbedding`.

All four are thin wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`, configured by the neutral mixins of
:mod:`pe_core.layers`, and hold no variables. They work eagerly and under
``jax.jit``, ``jax.vmap``, ``nnx.scan`` and ``nn.scan``; offsets may be Python ints
(encoded exactly on the host, a constant of the compiled program) or JAX integers
(traced, encoded exactly on the device).

>>> import jax.numpy as jnp
>>> from pe_core.layers.flax import SinusoidalEncoding
>>> y = SinusoidalEncoding(8)(jnp.zeros((2, 3, 8)))
>>> y.shape, [round(float(v), 3) for v in y[0, 1, :2]]  # sin 1, cos 1
((2, 3, 8), [0.841, 0.54])
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.core import FrozenDict

from pe_core.encoding import encode
from pe_core.layers import RotaryEmbeddingConfig, SinusoidalEncodingConfig, per_example_shape
from pe_core.rope import apply_rope
from pe_core.spec import Spec

__all__ = [
    "LinenRotaryEmbedding",
    "LinenSinusoidalEncoding",
    "RotaryEmbedding",
    "SinusoidalEncoding",
]

Offset = int | jax.Array


def _check_offset(offset: object) -> Offset:
    if isinstance(offset, (jax.Array, np.ndarray)) or hasattr(offset, "__jax_array__"):
        offset = jnp.asarray(offset)
        if not (
            jnp.issubdtype(offset.dtype, jnp.integer) or jnp.issubdtype(offset.dtype, jnp.floating)
        ):
            raise TypeError(
                f"offset must be an int or an integer/float array. Received dtype: {offset.dtype}"
            )
        return offset
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):
        raise TypeError(
            "offset must be an int or an array of per-example offsets (batch,). "
            f"Received: {offset!r}"
        )
    return int(offset)


def _check_input(x: Any) -> jax.Array:
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq, d_model). Received: shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must be a floating array. Received dtype: {x.dtype}")
    return x


def _sinusoidal(config: SinusoidalEncodingConfig, x: jax.Array, offset: object) -> jax.Array:
    """The encoding to add to ``x`` (``(..., seq, d_model)``) at positions from ``offset``."""
    config.check_input_features(x.shape[-1])
    offset = _check_offset(offset)
    length = x.shape[-2]
    if isinstance(offset, int):
        rows = config.cache_rows(offset, length)
        if rows is not None and x.dtype != jnp.float64:
            return jnp.asarray(rows, dtype=x.dtype)
        positions: Any = range(offset, offset + length)
        return encode(positions, config.d_model, spec=config.spec, backend="jax", dtype=x.dtype)
    positions = _positions(offset, length, x.shape)
    return encode(positions, config.d_model, spec=config.spec, dtype=x.dtype)


def _positions(offset: Offset, length: int, x_shape: tuple[int, ...]) -> Any:
    """``offset + arange(length)``: ``(length,)``, or ``(batch, 1, ..., length)`` for
    per-example offsets ``(batch,)``."""
    if isinstance(offset, int):
        return offset + jnp.arange(length)
    shape = per_example_shape(tuple(offset.shape), tuple(x_shape))
    return jnp.reshape(offset, shape)[..., None] + jnp.arange(length, dtype=offset.dtype)


def _rope_positions(x: jax.Array, positions: Any, offset: object) -> Any:
    offset = _check_offset(offset)
    if positions is not None:
        if not isinstance(offset, int) or offset != 0:
            raise ValueError("Pass either positions or offset, not both.")
        return positions
    if isinstance(offset, int):
        return range(offset, offset + x.shape[-2])  # exact on the host when not traced
    return _positions(offset, x.shape[-2], x.shape)


def _rope(config: RotaryEmbeddingConfig, q: Any, k: Any, positions: Any, offset: object) -> Any:
    q, k = jnp.asarray(q), jnp.asarray(k)
    for x in (q, k):
        if x.ndim < 2:
            raise ValueError(f"q and k must have shape (..., seq, head_dim). Received: {x.shape}")
        config.check_input_features(x.shape[-1])
    scaling = _thaw(config.scaling)
    return tuple(
        apply_rope(
            x,
            _rope_positions(x, positions, offset),
            base=config.base,
            layout=config.layout,
            rotary_dim=config.rotary_dim,
            scaling=scaling,
        )
        for x in (q, k)
    )


def _hashable(obj: Any) -> Any:
    """``scaling`` as hashable data (Flax keeps module attributes in hashable graphs)."""
    if isinstance(obj, Mapping):
        return FrozenDict({k: _hashable(v) for k, v in obj.items()})
    if isinstance(obj, (list, tuple)):
        return tuple(_hashable(v) for v in obj)
    return obj


def _thaw(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _thaw(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return [_thaw(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- NNX


class SinusoidalEncoding(SinusoidalEncodingConfig, nnx.Module):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` (NNX).

    Parameters
    ----------
    d_model : int
        Features of the input (its last axis).
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or preset name; ``"vaswani"`` by default.
    dropout : float
        Dropout rate after the addition (``nnx.Dropout``), 0 by default.
    max_len : int, optional
        Size of an optional cache of rows ``0 .. max_len - 1`` (used for Python int
        offsets). Never a limit: longer sequences are computed on the fly, same values.
    rngs : nnx.Rngs, optional
        Random streams for dropout (or pass ``rngs`` when calling).

    Notes
    -----
    Holds no variables: the encoding is computed in the input's dtype (angles exact in
    float32, only the result rounded), under ``jax.jit`` a constant for int offsets
    and a few fused elementwise operations for array offsets. ``model.eval()`` turns
    dropout off, as for any NNX module.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> layer = SinusoidalEncoding(4)
    >>> y = jax.jit(layer)(jnp.zeros((2, 1, 4)), jnp.array([0, 10**6]))
    >>> [round(float(v), 4) for v in y[:, 0, 0]]  # sin 0, sin 1e6
    [0.0, -0.35]
    >>> layer(jnp.zeros((1, 3, 6)))
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 6 features but the layer was built with d_model=4.
    """

    def __init__(
        self,
        d_model: int,
        *,
        spec: Spec | str | None = None,
        dropout: float = 0.0,
        max_len: int | None = None,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        super().__init__(d_model, spec=spec, dropout=dropout, max_len=max_len)
        self.dropout_layer = nnx.Dropout(self.dropout, rngs=rngs) if self.dropout else None

    def __call__(
        self,
        x: jax.Array,
        offset: Offset = 0,
        *,
        deterministic: bool | None = None,
        rngs: nnx.Rngs | None = None,
    ) -> jax.Array:
        """``dropout(x + encoding)`` for ``x`` of shape ``(..., seq, d_model)``; ``offset``
        is an int or an array of per-example offsets ``(batch,)``."""
        x = _check_input(x)
        x = x + _sinusoidal(self, x, offset)
        if self.dropout_layer is None:
            return x
        return self.dropout_layer(x, deterministic=deterministic, rngs=rngs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sinusoidal_repr()})"


class RotaryEmbedding(RotaryEmbeddingConfig, nnx.Module):
    """Rotates queries and keys by their positions (RoPE) (NNX).

    Parameters
    ----------
    head_dim : int
        Features per head (the last axis of q and k), even.
    base : float
        ``rope_theta``, > 1 (10000 by default).
    layout : {"half", "interleaved"}
        ``"half"`` (rotate-half: GPT-NeoX, Llama, Hugging Face) or ``"interleaved"``
        (GPT-J, RoFormer).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (even, <= head_dim).
    scaling : dict, optional
        Context-extension rope parameters or a model config, as for
        :func:`~pe_core.rope.apply_rope`.

    Notes
    -----
    ``__call__(q, k, positions=None, offset=0)``: q and k ``(..., seq, head_dim)``
    (e.g. ``(batch, heads, seq, head_dim)``; k may have another seq); positions
    ``offset + arange(seq)`` for each (``offset`` an int or per-example ``(batch,)``),
    or explicit ``positions`` broadcasting against ``(..., seq)``. Returns the rotated
    ``(q, k)`` in their dtypes; the angles and the rotation run in float32.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> rope = RotaryEmbedding(8)
    >>> q, k = jax.random.normal(jax.random.key(0), (2, 1, 2, 4, 8))  # (batch, heads, seq, hd)
    >>> q1, k1 = rope(q, k)
    >>> q2, k2 = rope(q, k, offset=jnp.array([100]))  # per-example offsets (batch,)
    >>> bool(jnp.allclose(q1 @ k1.mT, q2 @ k2.mT, atol=1e-5))  # relative positions only
    True
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(head_dim, base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling)
        self.scaling = _hashable(self.scaling)

    def __call__(
        self, q: jax.Array, k: jax.Array, positions: Any = None, offset: Offset = 0
    ) -> tuple[jax.Array, jax.Array]:
        """``(rope(q), rope(k))``."""
        return _rope(self, q, k, positions, offset)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.rotary_repr()})"


# --------------------------------------------------------------------------- linen


class LinenSinusoidalEncoding(SinusoidalEncodingConfig, nn.Module):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` (linen).

    The linen twin of :class:`SinusoidalEncoding`: the same arguments as dataclass
    fields, validated at construction; ``__call__(x, offset=0, *, deterministic=True)``
    (dropout draws from the ``"dropout"`` rng collection when ``deterministic=False``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> layer = LinenSinusoidalEncoding(4, spec="vaswani")
    >>> y = layer.apply({}, jnp.zeros((1, 2, 4)), offset=1)
    >>> [round(float(v), 3) for v in y[0, 0, :2]]  # sin 1, cos 1
    [0.841, 0.54]
    >>> LinenSinusoidalEncoding(4, dropout=-0.5)
    Traceback (most recent call last):
    ...
    ValueError: dropout must be a number in [0, 1). Received: -0.5
    """

    d_model: int
    spec: Spec | str | None = None
    dropout: float = 0.0
    max_len: int | None = None

    def __post_init__(self) -> None:
        values = self.validate_sinusoidal(self.d_model, self.spec, self.dropout, self.max_len)
        for name, value in zip(("d_model", "spec", "dropout", "max_len"), values, strict=True):
            object.__setattr__(self, name, value)
        super().__post_init__()

    @nn.compact
    def __call__(
        self, x: jax.Array, offset: Offset = 0, *, deterministic: bool = True
    ) -> jax.Array:
        x = _check_input(x)
        x = x + _sinusoidal(self, x, offset)
        if not self.dropout:
            return x
        return nn.Dropout(rate=self.dropout)(x, deterministic=deterministic)


class LinenRotaryEmbedding(RotaryEmbeddingConfig, nn.Module):
    """Rotates queries and keys by their positions (RoPE) (linen).

    The linen twin of :class:`RotaryEmbedding`: the same arguments as dataclass fields,
    validated at construction; ``__call__(q, k, positions=None, offset=0)``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> rope = LinenRotaryEmbedding(4, layout="interleaved")
    >>> q, k = rope.apply({}, jnp.ones((1, 2, 4)), jnp.ones((1, 2, 4)), offset=1)
    >>> [round(float(v), 3) for v in q[0, 0, :2]]  # (1, 1) turned by 1 radian
    [-0.301, 1.382]
    """

    head_dim: int
    base: float = 10000.0
    layout: str = "half"
    rotary_dim: int | None = None
    scaling: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        values = self.validate_rotary(
            self.head_dim, self.base, self.layout, self.rotary_dim, self.scaling
        )
        names = ("head_dim", "base", "layout", "rotary_dim", "scaling")
        for name, value in zip(names, values, strict=True):
            object.__setattr__(self, name, _hashable(value) if name == "scaling" else value)
        super().__post_init__()

    def __call__(
        self, q: jax.Array, k: jax.Array, positions: Any = None, offset: Offset = 0
    ) -> tuple[jax.Array, jax.Array]:
        return _rope(self, q, k, positions, offset)
