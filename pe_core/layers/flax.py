"""Flax layers, for both Flax APIs: NNX modules and linen modules.

* NNX (``flax.nnx.Module``): :class:`SinusoidalEncoding` and :class:`RotaryEmbedding`;
* linen (``flax.linen.Module``): :class:`LinenSinusoidalEncoding` and
  :class:`LinenRotaryEmbedding`.

All four are thin wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`, configured by the neutral mixins of
:mod:`pe_core.layers`, and hold no variables. They work eagerly and under
``jax.jit``, ``jax.vmap``, ``nnx.scan`` and ``nn.scan``; offsets may be Python ints
(encoded exactly on the host: a constant of the compiled program, or eagerly a table
placed on the input's device once and reused from :mod:`pe_core.device_tables`) or JAX
integers (traced, encoded exactly on the device).

>>> import jax.numpy as jnp
>>> from pe_core.layers.flax import SinusoidalEncoding
>>> y = SinusoidalEncoding(8)(jnp.zeros((2, 3, 8)))
>>> y.shape, [round(float(v), 3) for v in y[0, 1, :2]]  # sin 1, cos 1
((2, 3, 8), [0.841, 0.54])
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from pe_core.encoding import encode
from pe_core.fourier import fourier_features
from pe_core.layers._checks import check_offset, check_sequence_input, per_example_shape
from pe_core.layers._config import (
    InitSignature,
    LayerConfig,
    RotaryEmbeddingConfig,
    SinusoidalEncodingConfig,
    TimestepsConfig,
    config_parameters,
    layer_repr,
)
from pe_core.layers._config_index import (
    AlibiHeadsConfig,
    RelativePositionBiasConfig,
    T5RelativeBiasConfig,
)
from pe_core.layers._config_nd import (
    FourierFeaturesConfig,
    PatchEncodingConfig,
    RotaryEmbeddingNDConfig,
    patch_grid,
)
from pe_core.layers._tables import nan_where_wrapped, placed_patch_table, placed_rows
from pe_core.nd import grid
from pe_core_backends import get_namespace

__all__ = [
    "AlibiBias",
    "FourierFeatures",
    "LinenAlibiBias",
    "LinenFourierFeatures",
    "LinenRelativePositionBias",
    "LinenRotaryEmbedding",
    "LinenRotaryEmbeddingND",
    "LinenSinusoidalEncoding",
    "LinenSinusoidalPatchEncoding",
    "LinenT5RelativeBias",
    "LinenTimesteps",
    "RelativePositionBias",
    "RotaryEmbedding",
    "RotaryEmbeddingND",
    "SinusoidalEncoding",
    "SinusoidalPatchEncoding",
    "T5RelativeBias",
    "Timesteps",
]

Offset = int | jax.Array

_JAX = get_namespace("jax")


def _check_offset(offset: object) -> Offset:
    if not (isinstance(offset, (jax.Array, np.ndarray)) or hasattr(offset, "__jax_array__")):
        return cast(Offset, check_offset(offset, noun="an array"))
    array = jnp.asarray(offset)
    ok = jnp.issubdtype(array.dtype, jnp.integer) or jnp.issubdtype(array.dtype, jnp.floating)
    return cast(Offset, check_offset(offset, array, None if ok else array.dtype, "an array"))


def _eager(x: jax.Array) -> bool:
    """Whether ``x`` is concrete and nothing is being traced (no ``jax.jit``, ``vmap``...)."""
    return not _JAX.is_traced(x) and not _JAX.is_tracing()


def _check_floating(x: jax.Array) -> None:
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must be a floating array. Received dtype: {x.dtype}")


def _positions(offset: Offset, length: int, x_shape: tuple[int, ...]) -> Any:
    """``offset + arange(length)``: ``(length,)``, or ``(batch, 1, ..., length)`` for
    per-example offsets ``(batch,)``."""
    if isinstance(offset, int):
        return offset + jnp.arange(length)
    shape = per_example_shape(tuple(offset.shape), tuple(x_shape))
    return jnp.reshape(offset, shape)[..., None] + jnp.arange(length, dtype=offset.dtype)


def _sinusoidal(config: SinusoidalEncodingConfig, x: Any, offset: object) -> jax.Array:
    """``x + encoding`` for ``x`` of shape ``(..., seq, d_model)`` at positions from ``offset``."""
    x = jnp.asarray(x)
    check_sequence_input(x.shape)
    _check_floating(x)
    config.check_input_features(x.shape[-1])
    offset = _check_offset(offset)
    length = x.shape[-2]
    if isinstance(offset, int) and isinstance(length, int):  # not symbolic (jax.export)
        if _eager(x):  # built on the host once, kept on x's device
            return x + placed_rows(_JAX, config, offset, length, x, _JAX.dtype_of(x))
        rows = config.cache_rows(offset, length)
        if rows is not None and x.dtype != jnp.float64:
            return x + jnp.asarray(rows, dtype=x.dtype)
        return x + config._encode(range(offset, offset + length), x.dtype, backend="jax")
    positions = _positions(offset, length, x.shape)
    return x + nan_where_wrapped(_JAX, positions, config._encode(positions, x.dtype))


def _rope(
    self: RotaryEmbeddingConfig,
    q: jax.Array,
    k: jax.Array,
    positions: Any = None,
    offset: Offset = 0,
) -> tuple[jax.Array, jax.Array]:
    """``(rope(q), rope(k))``."""
    q, k = jnp.asarray(q), jnp.asarray(k)
    self._check_query_key(q.shape, k.shape)
    offset = _check_offset(offset)
    if positions is not None and (not isinstance(offset, int) or offset != 0):
        raise ValueError("Pass either positions or offset, not both.")

    def rotated(x: jax.Array) -> Any:
        known = positions if positions is not None else self._known_positions(offset, x.shape[-2])
        if known is not None:  # given, or exact on the host
            return self._rotate(x, known)
        steps = _positions(offset, x.shape[-2], x.shape)
        return nan_where_wrapped(_JAX, steps, self._rotate(x, steps))

    return rotated(q), rotated(k)


def _patch_encoding(config: PatchEncodingConfig, x: Any, grid_shape: Any) -> jax.Array:
    x = jnp.asarray(x)
    shape, flat = patch_grid(config, tuple(x.shape), grid_shape)
    _check_floating(x)
    spec = config.spec_for(len(shape), shape)
    if _eager(x):  # built on the host once, kept on x's device
        return x + placed_patch_table(_JAX, config, spec, shape, x, _JAX.dtype_of(x), flat=flat)
    pe = encode(grid(shape), config.d_model, spec=spec, backend="jax", dtype=x.dtype)
    return x + (jnp.reshape(pe, (-1, config.d_model)) if flat else pe)


def _rope_nd(
    config: RotaryEmbeddingNDConfig, q: jax.Array, k: jax.Array, positions: Any = None
) -> tuple[jax.Array, jax.Array]:
    q, k = jnp.asarray(q), jnp.asarray(k)
    config._check_query_key(q.shape, k.shape)
    return config._rotate(q, positions), config._rotate(k, positions)


def _nnx_dropout(
    layer: nnx.Dropout | None, x: jax.Array, deterministic: bool | None, rngs: nnx.Rngs | None
) -> jax.Array:
    return x if layer is None else layer(x, deterministic=deterministic, rngs=rngs)


def _linen_dropout(rate: float, x: jax.Array, deterministic: bool) -> jax.Array:
    return nn.Dropout(rate=rate)(x, deterministic=deterministic) if rate else x


class _NNXModule(nnx.Module):
    """What every NNX layer here adds to ``nnx.Module``: its ``repr`` (and ``str``), the
    configuration's, the signature of its constructor, and ``rngs`` handed to its
    ``_setup``."""

    __signature__ = InitSignature()

    def __init__(self) -> None:  # what the configuration's **kwargs reach: nothing
        super().__init__()

    def __repr__(self) -> str:
        return layer_repr(cast(LayerConfig, self))

    __str__ = __repr__


class _LinenModule(nn.Module):
    """What every linen layer here adds to ``nn.Module``: its dataclass fields, made from
    the configuration's constructor (less the names in the class keyword ``skip``;
    ``defaults`` replaces some defaults), validated at construction and stored
    validated by the configuration. The class keyword ``init=False`` is for type checkers
    only (PEP 681): they read the configuration's constructor, not these fields."""

    def __init_subclass__(
        cls, skip: tuple[str, ...] = (), defaults: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        kwargs.pop("init", None)  # the dataclass __init__ is made all the same
        if any(issubclass(base, LayerConfig) for base in cls.__bases__):
            fields = {}
            for parameter in config_parameters(cls):
                if parameter.name not in skip:
                    fields[parameter.name] = parameter.annotation
                    default = (defaults or {}).get(parameter.name, parameter.default)
                    if default is not parameter.empty:
                        setattr(cls, parameter.name, default)
            cls.__annotations__ = {**fields, **inspect.get_annotations(cls)}
        super().__init_subclass__(**kwargs)

    def __post_init__(self) -> None:
        config = cast(LayerConfig, self)
        fields = {field.name for field in dataclasses.fields(self)}
        names = [p.name for p in config_parameters(type(self)) if p.name in fields]
        values = config._validate(**{name: getattr(self, name) for name in names})
        for name, value in config._frozen(values).items():
            object.__setattr__(self, name, value)
        super().__post_init__()

    def __repr__(self) -> str:
        return layer_repr(cast(LayerConfig, self))


# --------------------------------------------------------------------------- NNX


class SinusoidalEncoding(SinusoidalEncodingConfig, _NNXModule):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` (NNX).

    Parameters
    ----------
    d_model, spec, max_len
        As for :class:`~pe_core.layers.SinusoidalEncodingConfig`.
    dropout : float
        Dropout rate after the addition (``nnx.Dropout``), 0 by default.
    **kwargs
        ``rngs`` (``nnx.Rngs``, optional): random streams for dropout (or pass ``rngs``
        when calling).

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

    def _setup(self, *, rngs: nnx.Rngs | None = None) -> None:
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
        return _nnx_dropout(self.dropout_layer, _sinusoidal(self, x, offset), deterministic, rngs)


class RotaryEmbedding(RotaryEmbeddingConfig, _NNXModule):
    """Rotates queries and keys by their positions (RoPE) (NNX).

    Parameters
    ----------
    head_dim, base, layout, rotary_dim, scaling, layer_type, trainable_frequencies, frequency_heads
        As for :class:`~pe_core.layers.RotaryEmbeddingConfig`.

    Notes
    -----
    ``__call__(q, k, positions=None, offset=0)`` returns the rotated ``(q, k)``; shapes,
    dtypes and positions as for the configuration. With ``trainable_frequencies=True``
    the module holds one ``nnx.Param``, ``frequencies`` (:mod:`pe_core.trainable`).

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

    def _setup(self) -> None:
        self.scaling = self.rope_spec.scaling  # hashable: Flax keeps it in its graphs
        if self.trainable_frequencies:
            self.frequencies = nnx.Param(jnp.asarray(self.initial_frequencies()))

    def _frequencies(self) -> jax.Array:
        return cast(jax.Array, self.frequencies[...])

    __call__ = _rope


# --------------------------------------------------------------------------- linen

#: The rotary arguments LinenRotaryEmbedding does not take (it holds no variables).
_TRAINABLE = ("trainable_frequencies", "frequency_heads")


class LinenSinusoidalEncoding(SinusoidalEncodingConfig, _LinenModule, init=False):
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

    @nn.compact
    def __call__(
        self, x: jax.Array, offset: Offset = 0, *, deterministic: bool = True
    ) -> jax.Array:
        return _linen_dropout(self.dropout, _sinusoidal(self, x, offset), deterministic)


class LinenRotaryEmbedding(RotaryEmbeddingConfig, _LinenModule, skip=_TRAINABLE, init=False):
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

    __call__ = _rope


# --------------------------------------------------------------------------- relative bias


class T5RelativeBias(T5RelativeBiasConfig, _NNXModule):
    """T5's learned relative position bias (NNX), with :func:`pe_core.t5.t5_relative_bias`.

    Parameters
    ----------
    n_heads, num_buckets, max_distance, bidirectional
        As for :class:`~pe_core.layers.T5RelativeBiasConfig`.
    **kwargs
        ``rngs`` (``nnx.Rngs``, required): for the initial table, an
        ``nnx.Embed(num_buckets, n_heads)`` named ``relative_attention_bias`` (its
        ``embedding`` is T5's weight).

    Notes
    -----
    ``__call__(query_length, key_length, offset=0)`` returns the bias ``(1, n_heads,
    query_length, key_length)``, as for the configuration; the lengths are Python ints
    (static under ``jax.jit``), ``offset`` may be traced.

    Examples
    --------
    >>> from flax import nnx
    >>> layer = T5RelativeBias(4, rngs=nnx.Rngs(0))
    >>> layer(3, 5).shape
    (1, 4, 3, 5)
    """

    def _setup(self, *, rngs: nnx.Rngs) -> None:  # type: ignore[override]
        self.relative_attention_bias = nnx.Embed(self.num_buckets, self.n_heads, rngs=rngs)

    def __call__(self, query_length: int, key_length: int, offset: Any = 0) -> jax.Array:
        table = self.relative_attention_bias.embedding[...]
        return self._bias(table, query_length, key_length, offset, "jax")


class AlibiBias(AlibiHeadsConfig, _NNXModule):
    """The ALiBi bias of :func:`pe_core.alibi_bias` (NNX), with ``alibi_bias_max``.

    ``__call__(query_length, key_length, dtype=jnp.float32)`` returns ``(1, n_heads,
    query_length, key_length)``, queries the last ``query_length`` keys; a constant of
    the compiled program under ``jax.jit``. No variables.

    Examples
    --------
    >>> AlibiBias(2)(1, 3)[0, :, 0].tolist()  # one decode step, slopes 1/16 and 1/256
    [[-0.125, -0.0625, 0.0], [-0.0078125, -0.00390625, 0.0]]
    """

    def __call__(self, query_length: int, key_length: int, dtype: Any = jnp.float32) -> jax.Array:
        return cast(jax.Array, self._bias(query_length, key_length, backend="jax", dtype=dtype))


class LinenT5RelativeBias(T5RelativeBiasConfig, _LinenModule, init=False):
    """T5's learned relative position bias (linen); the twin of :class:`T5RelativeBias`.

    The table is the param ``relative_attention_bias`` ``(num_buckets, n_heads)``,
    initialised with ``nn.initializers.normal(1.0)`` like ``nn.Embed``'s default
    variance. ``__call__(query_length, key_length, offset=0)``.

    Examples
    --------
    >>> import jax
    >>> layer = LinenT5RelativeBias(4)
    >>> variables = layer.init(jax.random.key(0), 3, 5)
    >>> variables["params"]["relative_attention_bias"].shape, layer.apply(variables, 3, 5).shape
    ((32, 4), (1, 4, 3, 5))
    """

    @nn.compact
    def __call__(self, query_length: int, key_length: int, offset: Any = 0) -> jax.Array:
        table = self.param(
            "relative_attention_bias", nn.initializers.normal(1.0), (self.num_buckets, self.n_heads)
        )
        return self._bias(table, query_length, key_length, offset, "jax")


class LinenAlibiBias(AlibiHeadsConfig, _LinenModule, init=False):
    """The ALiBi bias (linen); the twin of :class:`AlibiBias`.

    Examples
    --------
    >>> LinenAlibiBias(4, alibi_bias_max=16).apply({}, 2, 2).shape
    (1, 4, 2, 2)
    """

    __call__ = AlibiBias.__call__


class FourierFeatures(FourierFeaturesConfig, _NNXModule):
    """Random Fourier features of :func:`pe_core.fourier_features` (NNX); the twin of the
    PyTorch ``FourierFeatures``.

    ``__call__(coords)`` maps ``(..., in_features)`` to ``(..., 2 * num_frequencies)`` with
    the layer's float32 matrix ``frequencies``: an ``nnx.Param`` when ``trainable``
    (``nnx.grad`` reaches it), a plain ``nnx.Variable`` otherwise. The matrix is NumPy's
    ``default_rng(seed)`` draw, the same as the other frameworks'.

    Examples
    --------
    >>> layer = FourierFeatures(2, 3, scale=2.0)
    >>> layer(jnp.zeros((4, 2))).shape
    (4, 6)
    """

    def _setup(self) -> None:
        initial = jnp.asarray(self.initial_frequencies().astype(np.float32))
        self.frequencies = nnx.Param(initial) if self.trainable else nnx.Variable(initial)

    def __call__(self, coords: jax.Array) -> jax.Array:
        _check_floating(coords)
        return fourier_features(coords, self.frequencies[...], order=self.order)


class LinenFourierFeatures(FourierFeaturesConfig, _LinenModule, init=False):
    """Random Fourier features (linen); the twin of :class:`FourierFeatures`. The matrix is
    the ``"params"`` entry ``frequencies`` when ``trainable``, else the ``"constants"``
    entry.

    Examples
    --------
    >>> layer = LinenFourierFeatures(2, 3)
    >>> variables = layer.init(jax.random.key(0), jnp.zeros((1, 2)))
    >>> list(variables), layer.apply(variables, jnp.zeros((4, 2))).shape
    (['constants'], (4, 6))
    """

    @nn.compact
    def __call__(self, coords: jax.Array) -> jax.Array:
        _check_floating(coords)
        initial = self.initial_frequencies().astype(np.float32)
        if self.trainable:
            freqs = self.param("frequencies", lambda _: jnp.asarray(initial))
        else:
            freqs = self.variable("constants", "frequencies", lambda: jnp.asarray(initial)).value
        return fourier_features(coords, freqs, order=self.order)


# --------------------------------------------------------------------------- N-D layers


class SinusoidalPatchEncoding(PatchEncodingConfig, _NNXModule):
    """Adds the N-D sinusoidal encoding of a patch grid to patch tokens (NNX).

    Parameters
    ----------
    d_model, grid_shape, spec
        As for :class:`~pe_core.layers.PatchEncodingConfig`.
    dropout : float
        Dropout rate after the addition.
    **kwargs
        ``rngs`` (``nnx.Rngs``, optional): for dropout.

    Notes
    -----
    ``__call__(x, grid_shape=None, *, deterministic=None, rngs=None)``. The encoding is
    built exactly on the host: a constant of the program under ``jax.jit``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> SinusoidalPatchEncoding(8, grid_shape=(2, 3), spec="mae_2d")(jnp.zeros((1, 6, 8))).shape
    (1, 6, 8)
    """

    def _setup(self, *, rngs: nnx.Rngs | None = None) -> None:
        self.dropout_layer = nnx.Dropout(self.dropout, rngs=rngs) if self.dropout else None

    def __call__(
        self,
        x: jax.Array,
        grid_shape: Any = None,
        *,
        deterministic: bool | None = None,
        rngs: nnx.Rngs | None = None,
    ) -> jax.Array:
        x = _patch_encoding(self, x, grid_shape)
        return _nnx_dropout(self.dropout_layer, x, deterministic, rngs)


class RotaryEmbeddingND(RotaryEmbeddingNDConfig, _NNXModule):
    """N-D rotary embedding (NNX): rotary pairs split among coordinate axes.

    ``__call__(q, k, positions=None)``: ``positions`` ``(..., seq, len(sections))``, or
    ``None`` for the layer's ``grid_shape`` flattened row-major. The parameters are
    :class:`~pe_core.layers.RotaryEmbeddingNDConfig`'s.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> rope = RotaryEmbeddingND(8, (2, 2), grid_shape=(2, 3))
    >>> q, k = rope(jnp.ones((1, 6, 8)), jnp.ones((1, 6, 8)))
    >>> q.shape
    (1, 6, 8)
    """

    __call__ = _rope_nd


class LinenSinusoidalPatchEncoding(PatchEncodingConfig, _LinenModule, init=False):
    """The linen twin of :class:`SinusoidalPatchEncoding`:
    ``__call__(x, grid_shape=None, *, deterministic=True)``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> LinenSinusoidalPatchEncoding(8).apply({}, jnp.zeros((1, 2, 3, 8))).shape
    (1, 2, 3, 8)
    """

    @nn.compact
    def __call__(
        self, x: jax.Array, grid_shape: Any = None, *, deterministic: bool = True
    ) -> jax.Array:
        return _linen_dropout(self.dropout, _patch_encoding(self, x, grid_shape), deterministic)


class LinenRotaryEmbeddingND(RotaryEmbeddingNDConfig, _LinenModule, init=False):
    """The linen twin of :class:`RotaryEmbeddingND`: ``__call__(q, k, positions=None)``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> rope = LinenRotaryEmbeddingND(8, (2, 2), frequencies="per_axis")
    >>> q, k = rope.apply({}, jnp.ones((3, 8)), jnp.ones((3, 8)), jnp.zeros((3, 2), int))
    >>> bool(jnp.all(q == 1.0))  # coordinates (0, 0): not rotated
    True
    """

    __call__ = _rope_nd


class RelativePositionBias(RelativePositionBiasConfig, _NNXModule):
    """Swin's (and BEiT's) learned relative position bias of a window (NNX), with
    :func:`pe_core.relative_index.relative_position_bias`.

    Parameters
    ----------
    window_size, n_heads, prefix_tokens
        As for :class:`~pe_core.layers._config_index.RelativePositionBiasConfig`.

    Notes
    -----
    ``__call__()`` returns the bias ``(n_heads, N, N)``, ``N = Wh * Ww +
    prefix_tokens``. The table is the ``nnx.Param`` ``relative_position_bias_table``
    ``(num_relative_distance, n_heads)``, zeros at first.

    Examples
    --------
    >>> layer = RelativePositionBias((2, 3), 2, prefix_tokens=1)
    >>> layer.relative_position_bias_table.shape, layer().shape
    ((18, 2), (2, 7, 7))
    """

    def _setup(self) -> None:
        self.relative_position_bias_table = nnx.Param(jnp.zeros(self.table_shape()))

    def __call__(self) -> jax.Array:
        return cast(jax.Array, self._bias(self.relative_position_bias_table[...], "jax"))


class LinenRelativePositionBias(RelativePositionBiasConfig, _LinenModule, init=False):
    """Swin's (and BEiT's) learned relative position bias (linen); the twin of
    :class:`RelativePositionBias`: the param ``relative_position_bias_table``
    ``(num_relative_distance, n_heads)``, zeros at first, and ``__call__()``.

    Examples
    --------
    >>> import jax
    >>> layer = LinenRelativePositionBias(2, 4)
    >>> variables = layer.init(jax.random.key(0))
    >>> variables["params"]["relative_position_bias_table"].shape
    (9, 4)
    >>> layer.apply(variables).shape
    (4, 4, 4)
    """

    @nn.compact
    def __call__(self) -> jax.Array:
        table = self.param(
            "relative_position_bias_table", nn.initializers.zeros, self.table_shape()
        )
        return cast(jax.Array, self._bias(table, "jax"))


# ------------------------------------------------------------------ timestep embeddings


class Timesteps(TimestepsConfig, _NNXModule):
    """diffusers' ``Timesteps`` (NNX): :func:`pe_core.timestep_embedding` of the timesteps.

    ``Timesteps(num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1)``, the
    constructor of ``diffusers.models.embeddings.Timesteps``; ``__call__(timesteps)``
    returns the float32 ``timesteps.shape + (num_channels,)`` embedding, exact at any
    timestep and scale, eager or under ``jax.jit``. No variables.

    Examples
    --------
    >>> e = Timesteps(8, flip_sin_to_cos=True, downscale_freq_shift=0)(jnp.array([0, 3]))
    >>> e.shape, e[0].tolist()
    ((2, 8), [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    """

    def __call__(self, timesteps: Any) -> jax.Array:
        return cast(jax.Array, self._timesteps(timesteps, "jax"))


class LinenTimesteps(
    TimestepsConfig,
    _LinenModule,
    defaults={"flip_sin_to_cos": False, "downscale_freq_shift": 1.0, "scale": 1.0},
):
    """The linen twin of :class:`Timesteps` (fields ``num_channels``,
    ``flip_sin_to_cos``, ``downscale_freq_shift``, ``scale``). No variables.

    Examples
    --------
    >>> layer = LinenTimesteps(6, flip_sin_to_cos=False, downscale_freq_shift=1)
    >>> layer.apply({}, jnp.array([0.0])).tolist()
    [[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]]
    """

    __call__ = Timesteps.__call__
