"""Keras 3 layers: :class:`SinusoidalEncoding` and :class:`RotaryEmbedding`.

They run on the JAX, TensorFlow and PyTorch Keras backends (and NumPy for inference),
whichever ``KERAS_BACKEND`` selects; this module never sets it. Both are thin wrappers
around :func:`pe_core.encode` and :func:`pe_core.rope.apply_rope`, configured by the
neutral mixins of :mod:`pe_core.layers`, hold no weights, and are registered for
serialization (package ``"pe_core"``): ``get_config`` and a ``.keras`` save/load round
trip give identical outputs.

Under a mixed-precision policy (``keras.mixed_precision.set_global_policy(
"mixed_bfloat16")``) the inputs arrive in bfloat16; the angles are still computed
exactly in float32 (float64 for float64 inputs) and only the encoding is rounded.

>>> import numpy as np
>>> from pe_core.layers.keras import SinusoidalEncoding
>>> y = SinusoidalEncoding(8)(np.zeros((2, 3, 8), "float32"))
>>> tuple(y.shape), [round(float(v), 3) for v in np.asarray(y)[0, 1, :2]]  # sin 1, cos 1
((2, 3, 8), [0.841, 0.54])
"""

from __future__ import annotations

import numbers
from typing import Any, cast

import keras
import numpy as np
from keras import ops

from pe_core._kernel.inputs import working_dtype
from pe_core.fourier import fourier_features
from pe_core.layers._checks import (
    check_features,
    check_offset,
    check_sequence_input,
    offset_dtype,
    per_example_shape,
    scores_shape,
)
from pe_core.layers._config import (
    LayerConfig,
    RotaryEmbeddingConfig,
    SinusoidalEncodingConfig,
    TimestepsConfig,
)
from pe_core.layers._config_index import (
    AlibiBiasConfig,
    RelativePositionBiasConfig,
    T5RelativeBiasConfig,
)
from pe_core.layers._config_nd import (
    FourierFeaturesConfig,
    PatchEncodingConfig,
    RotaryEmbeddingNDConfig,
    patch_grid,
)
from pe_core.layers._tables import placed_patch_table, placed_rows, resized_for
from pe_core.typing import Interpolation
from pe_core_backends import Namespace, get_namespace

__all__ = [
    "AlibiBias",
    "FourierFeatures",
    "RelativePositionBias",
    "RotaryEmbedding",
    "RotaryEmbeddingND",
    "SinusoidalEncoding",
    "SinusoidalPatchEncoding",
    "T5RelativeBias",
    "Timesteps",
    "assign_resampled",
    "custom_objects",
    "load_model",
]

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _dtype_name(x: Any) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def _floating_dtype(x: Any) -> str:
    """The dtype name of ``x``, which must be floating."""
    dtype = _dtype_name(x)
    if dtype not in _FLOATS:
        raise TypeError(f"inputs must be floating. Received dtype: {dtype}")
    return dtype


def _constant(host: np.ndarray, dtype: str) -> Any:
    """A host table as a backend tensor of ``dtype`` (a constant of traced code)."""
    return ops.cast(ops.convert_to_tensor(np.asarray(host)), dtype)


#: The Keras backends whose eager tensors pe_core places tables on.
_PLACED_BACKENDS = ("jax", "numpy", "tensorflow", "torch")


def _eager_namespace(x: Any) -> Namespace | None:
    """pe_core's namespace of the Keras backend when ``x`` is a concrete (eager) tensor
    of it, else ``None`` (symbolic tensors, traced functions: keep the traced path)."""
    backend = keras.backend.backend()
    xp = get_namespace(backend) if backend in _PLACED_BACKENDS else None
    return None if xp is None or xp.is_tracing() or xp.is_traced(x) else xp


def _check_offset(offset: object) -> Any:
    if isinstance(offset, bool):
        raise TypeError(
            f"offset must be an int or a tensor of per-example offsets. Received: {offset!r}"
        )
    if isinstance(offset, numbers.Integral) or not (
        keras.ops.is_tensor(offset) or isinstance(offset, np.ndarray)
    ):
        return check_offset(offset)
    tensor = ops.convert_to_tensor(offset)
    kind = _dtype_name(tensor)
    ok = kind.startswith(("int", "uint")) or kind in _FLOATS
    return check_offset(offset, tensor, None if ok else kind)


def _positions(offset: Any, x: Any) -> Any:
    """``offset + arange(seq)`` for ``x`` ``(..., seq, d)`` as a backend tensor:
    ``(seq,)``, or ``(batch, 1, ..., seq)`` for per-example offsets ``(batch,)``."""
    # x.shape[-2]: None or symbolic (jax.export) when unknown
    length = ops.shape(x)[-2] if x.shape[-2] is None else x.shape[-2]
    if isinstance(offset, int):
        return ops.arange(length, dtype=offset_dtype(offset, keras.backend.backend())) + offset
    shape = per_example_shape(tuple(offset.shape), tuple(x.shape))
    steps = ops.arange(length, dtype=_dtype_name(offset))
    return ops.expand_dims(ops.reshape(offset, shape), -1) + steps


def _frequencies_weight(layer: Any, **options: Any) -> Any:
    """``layer``'s weight ``frequencies``, initialised to its ``initial_frequencies()``
    (``options``: more ``add_weight`` arguments)."""
    initial = layer.initial_frequencies()
    init = keras.initializers.Constant(initial)
    return layer.add_weight(shape=initial.shape, initializer=init, name="frequencies", **options)


class _Configured(keras.layers.Layer):
    """What every layer here adds to ``keras.layers.Layer``: its ``get_config``, the
    configuration's arguments, and its ``repr``."""

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **cast(LayerConfig, self)._layer_config()}

    def __repr__(self) -> str:
        text = cast(LayerConfig, self)._layer_repr()
        return f"<{type(self).__name__} name={self.name}, built={self.built}, {text}>"


class _Layer(_Configured):
    """A layer whose output has the input's shape, with a clear error for tensors of
    unknown rank (a ``tf.function`` signature of shape ``None``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        backend = keras.backend.backend()
        for i, arg in enumerate(args):
            if backend in _PLACED_BACKENDS and keras.ops.is_tensor(arg):
                get_namespace(backend).check_known_rank(arg, f"{type(self).__name__}'s input {i}")
        return super().__call__(*args, **kwargs)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape)


class _PairLayer(_Layer):
    """A layer called with ``(query, key)``, returning both with their shapes."""

    def compute_output_shape(  # type: ignore[override]  # Keras passes one shape per input
        self, query_shape: tuple[int | None, ...], key_shape: tuple[int | None, ...]
    ) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        return tuple(query_shape), tuple(key_shape)


@keras.saving.register_keras_serializable(package="pe_core")
class SinusoidalEncoding(SinusoidalEncodingConfig, _Layer):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` to its input.

    Parameters
    ----------
    d_model, spec, max_len
        As for :class:`~pe_core.layers.SinusoidalEncodingConfig`.
    dropout : float
        Dropout rate after the addition (``keras.layers.Dropout``), 0 by default.
    **kwargs
        ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Notes
    -----
    ``call(inputs, offset=0, training=None)``: ``inputs`` is ``(..., seq, d_model)``,
    ``offset`` an int or a tensor of per-example offsets ``(batch,)``. Masks pass
    through. The default spec gives keras-hub's ``SinePositionEncoding`` numbers; a spec
    is saved as its preset name, or as its fields. On the TensorFlow backend, graphs whose sequence length is unknown
    (``None``) are supported too.

    Examples
    --------
    >>> import numpy as np
    >>> layer = SinusoidalEncoding(4, spec="vaswani", max_len=64)
    >>> layer.get_config()["spec"], layer.get_config()["max_len"]
    ('vaswani', 64)
    >>> x = np.zeros((2, 1, 4), "float32")
    >>> y = layer(x, offset=np.array([0, 10**6]))
    >>> [round(float(v), 4) for v in np.asarray(y)[:, 0, 0]]  # sin 0, sin 1e6
    [0.0, -0.35]
    >>> layer(np.zeros((1, 3, 6), "float32"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ...The input's last axis has 6 features but the layer was built with d_model=4...
    """

    def _setup(self) -> None:
        self.dropout_layer = keras.layers.Dropout(self.dropout) if self.dropout else None
        self.supports_masking = True

    def call(self, inputs: Any, offset: Any = 0, training: bool | None = None) -> Any:
        check_sequence_input(tuple(inputs.shape), "inputs")
        self.check_input_features(inputs.shape[-1])
        _floating_dtype(inputs)
        x = inputs + self._encoding(inputs, offset, private=True)
        return x if self.dropout_layer is None else self.dropout_layer(x, training=training)

    def encoding(self, inputs: Any, offset: Any = 0) -> Any:
        """The encoding to add to ``inputs``, in their dtype: ``(seq, d_model)`` for an int
        offset, ``(batch, 1, ..., seq, d_model)`` for per-example offsets ``(batch,)``."""
        return self._encoding(inputs, offset, private=False)

    def _encoding(self, inputs: Any, offset: Any, *, private: bool) -> Any:
        dtype = _dtype_name(inputs)
        offset = _check_offset(offset)
        length = inputs.shape[-2]  # None or symbolic (jax.export) when unknown
        if isinstance(offset, int) and isinstance(length, int):
            xp = _eager_namespace(inputs)
            if xp is not None:  # built on the host once, kept on the inputs' device
                return placed_rows(xp, self, offset, length, inputs, dtype, private=private)
            return _constant(self._host_rows(offset, length, dtype), dtype)
        positions = _positions(offset, inputs)
        if keras.backend.backend() == "tensorflow" and None in tuple(positions.shape):
            import tensorflow as tf  # a graph with unknown sizes: encode is mapped over them

            flat = tf.reshape(positions, [-1])
            pe = tf.vectorized_map(lambda p: self._encode(p, dtype), flat)
            return tf.reshape(pe, tf.concat([tf.shape(positions), [self.d_model]], 0))
        return self._encode(positions, dtype)


@keras.saving.register_keras_serializable(package="pe_core")
class RotaryEmbedding(RotaryEmbeddingConfig, _PairLayer):
    """Rotates queries and keys by their positions (RoPE), with :func:`~pe_core.rope.apply_rope`.

    Parameters
    ----------
    head_dim, base, layout, rotary_dim, scaling, layer_type, trainable_frequencies, frequency_heads
        As for :class:`~pe_core.layers.RotaryEmbeddingConfig`.
    **kwargs
        ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Notes
    -----
    ``call(query, key, positions=None, offset=0)`` returns the rotated ``(query, key)``
    (bfloat16 under ``mixed_bfloat16``); shapes, dtypes and positions as for the
    configuration. ``scaling`` is saved in the config as JSON. With
    ``trainable_frequencies=True`` the layer holds one trainable weight,
    ``frequencies`` (:mod:`pe_core.trainable`).

    Examples
    --------
    >>> import numpy as np
    >>> rope = RotaryEmbedding(8)
    >>> q, k = np.random.default_rng(0).standard_normal((2, 1, 4, 8)).astype("float32")
    >>> q1, k1 = rope(q, k)
    >>> q2, k2 = rope(q, k, offset=100)
    >>> scores = [np.asarray(a) @ np.asarray(b).swapaxes(-1, -2) for a, b in [(q1, k1), (q2, k2)]]
    >>> bool(np.allclose(*scores, atol=1e-5))  # relative positions only
    True
    """

    def _setup(self) -> None:
        if self.trainable_frequencies:
            self.frequencies = _frequencies_weight(self)

    def _frequencies(self) -> Any:
        return self.frequencies.value

    def call(self, query: Any, key: Any, positions: Any = None, offset: Any = 0) -> tuple[Any, Any]:
        self._check_query_key(tuple(query.shape), tuple(key.shape), names="query and key")
        offset = _check_offset(offset)
        if positions is not None and (not isinstance(offset, int) or offset != 0):
            raise ValueError("Pass either positions or offset, not both.")
        return self.rotate(query, positions, offset), self.rotate(key, positions, offset)

    def rotate(self, x: Any, positions: Any = None, offset: Any = 0) -> Any:
        """:func:`~pe_core.rope.apply_rope` of one tensor with this layer's configuration."""
        if positions is None:
            positions = self._known_positions(offset, x.shape[-2])
            if positions is None:
                positions = _positions(offset, x)
        elif not isinstance(positions, range):
            positions = ops.convert_to_tensor(positions)
        return self._rotate(x, positions)


# --------------------------------------------------------------------------- relative bias


@keras.saving.register_keras_serializable(package="pe_core")
class T5RelativeBias(T5RelativeBiasConfig, _Layer):
    """T5's learned relative position bias, with :func:`pe_core.t5.t5_relative_bias`.

    Parameters
    ----------
    n_heads, num_buckets, max_distance, bidirectional
        As for :class:`~pe_core.layers.T5RelativeBiasConfig`.
    **kwargs
        ``keras.layers.Layer`` arguments.

    Notes
    -----
    ``call(attention_scores, offset=0)`` returns ``attention_scores + bias`` for scores
    ``(batch, n_heads, query_length, key_length)`` (Keras layers take tensors, as
    keras-hub's ``AlibiBias`` does); :meth:`bias` returns the bias ``(1, n_heads,
    query_length, key_length)`` itself (see the configuration), the numbers of the
    PyTorch and Flax layers. The weight ``relative_attention_bias`` is ``(num_buckets,
    n_heads)``, initialised ``RandomNormal(stddev=1.0)`` (``nn.Embedding``'s default).

    Examples
    --------
    >>> import numpy as np
    >>> layer = T5RelativeBias(2)
    >>> tuple(layer(np.zeros((1, 2, 3, 4), "float32")).shape), tuple(layer.bias(1, 4).shape)
    ((1, 2, 3, 4), (1, 2, 1, 4))
    """

    def build(self, input_shape: Any = None) -> None:
        self.relative_attention_bias = self.add_weight(
            shape=(self.num_buckets, self.n_heads),
            initializer=keras.initializers.RandomNormal(stddev=1.0),
            name="relative_attention_bias",
        )
        self.built = True

    def bias(self, query_length: int, key_length: int, offset: Any = 0) -> Any:
        """The bias ``(1, n_heads, query_length, key_length)`` (``(batch, ...)`` for
        per-example offsets)."""
        if not self.built:
            self.build()
        if not isinstance(offset, int) and not isinstance(offset, np.integer):
            offset = ops.convert_to_tensor(offset)
        table = self.relative_attention_bias.value
        return self._bias(table, query_length, key_length, offset, keras.backend.backend())

    def call(self, attention_scores: Any, offset: Any = 0) -> Any:
        heads, q_len, k_len = scores_shape(tuple(attention_scores.shape))
        check_features(heads, self.n_heads, "n_heads")
        bias = self.bias(q_len, k_len, offset)
        return attention_scores + ops.cast(bias, _dtype_name(attention_scores))


@keras.saving.register_keras_serializable(package="pe_core")
class FourierFeatures(FourierFeaturesConfig, _Layer):
    """Random Fourier features of :func:`pe_core.fourier_features` (Keras 3); the twin of
    the PyTorch and Flax ``FourierFeatures``.

    Parameters
    ----------
    in_features, num_frequencies, scale, trainable, order, seed
        As for :class:`~pe_core.layers.FourierFeaturesConfig`.
    **kwargs
        ``keras.layers.Layer`` arguments.

    Notes
    -----
    ``call(coords)`` maps ``(..., in_features)`` to ``(..., 2 * num_frequencies)`` with
    the float32 weight ``frequencies`` (NumPy's ``default_rng(seed)`` draw, the same
    matrix as the other frameworks'), trainable when ``trainable``.

    Examples
    --------
    >>> import numpy as np
    >>> layer = FourierFeatures(2, 3)
    >>> tuple(layer(np.zeros((4, 2), "float32")).shape)
    (4, 6)
    """

    def _setup(self) -> None:
        self.frequencies = _frequencies_weight(self, trainable=self.trainable, dtype="float32")

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return (*tuple(input_shape)[:-1], 2 * self.num_frequencies)

    def call(self, coords: Any) -> Any:
        _floating_dtype(coords)
        return fourier_features(coords, self.frequencies.value, order=self.order)


@keras.saving.register_keras_serializable(package="pe_core")
class AlibiBias(AlibiBiasConfig, _Layer):
    """ALiBi: adds :func:`pe_core.alibi_bias` to attention scores (keras-hub's interface).

    Parameters
    ----------
    n_heads : int, optional
        Attention heads; read from the scores when ``None`` (as keras-hub does).
    alibi_bias_max, causal
        As for :class:`~pe_core.layers.AlibiBiasConfig`.
    **kwargs
        ``keras.layers.Layer`` arguments.

    Notes
    -----
    ``call(attention_scores)`` returns ``attention_scores + bias`` for scores ``(batch,
    n_heads, query_length, key_length)``; queries are the last ``query_length`` keys.
    keras-hub's ``AlibiBias`` adds ``slope * (j - (key_length - 1))`` to every query
    row instead: for each query that differs from this bias by a constant on the keys
    at or before it, so the softmax under a causal mask is the same, and for one
    decoding step (``query_length == 1``) the two are equal. :meth:`bias` returns the
    bias ``(1, n_heads, query_length, key_length)``. No weights.

    Examples
    --------
    >>> import numpy as np
    >>> layer = AlibiBias(alibi_bias_max=8)
    >>> np.asarray(layer(np.zeros((1, 2, 1, 3), "float32")))[0, :, 0].tolist()
    [[-0.125, -0.0625, 0.0], [-0.0078125, -0.00390625, 0.0]]
    """

    def bias(
        self, query_length: int, key_length: int, n_heads: int | None = None, dtype: Any = None
    ) -> Any:
        """The bias ``(1, n_heads, query_length, key_length)`` (float32 by default)."""
        if n_heads is None and self.n_heads is None:
            raise ValueError("n_heads is not known: build the layer with n_heads, or pass it.")
        dtype = dtype or "float32"
        host = self._bias(query_length, key_length, n_heads, dtype=working_dtype(dtype))
        return _constant(host, dtype)

    def call(self, attention_scores: Any) -> Any:
        heads, q_len, k_len = scores_shape(tuple(attention_scores.shape))
        if self.n_heads is not None:
            check_features(heads, self.n_heads, "n_heads")
        dtype = _dtype_name(attention_scores)
        return attention_scores + self.bias(q_len, k_len, heads, dtype)


# --------------------------------------------------------------------------- N-D layers


@keras.saving.register_keras_serializable(package="pe_core")
class SinusoidalPatchEncoding(PatchEncodingConfig, _Layer):
    """Adds the N-D sinusoidal encoding of a patch grid to patch tokens.

    Parameters
    ----------
    d_model, grid_shape, spec
        As for :class:`~pe_core.layers.PatchEncodingConfig`.
    dropout : float
        Dropout rate after the addition.
    **kwargs
        ``keras.layers.Layer`` arguments.

    Notes
    -----
    ``call(inputs, training=None)``. The encoding is built exactly on the host (float32,
    float64 for float64 inputs) and cast to the inputs' dtype. No weights.

    Examples
    --------
    >>> import numpy as np
    >>> layer = SinusoidalPatchEncoding(8, grid_shape=(2, 3), spec="mae_2d")
    >>> tuple(layer(np.zeros((1, 6, 8), "float32")).shape)
    (1, 6, 8)
    """

    def _setup(self) -> None:
        self.dropout_layer = keras.layers.Dropout(self.dropout) if self.dropout else None

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        shape, flat = patch_grid(self, tuple(inputs.shape), None)
        dtype = _floating_dtype(inputs)
        spec = self.spec_for(len(shape), shape)
        xp = _eager_namespace(inputs)
        if xp is not None:  # built on the host once, kept on the inputs' device
            pe = placed_patch_table(xp, self, spec, shape, inputs, dtype, flat=flat)
        else:
            pe = _constant(self._host_table(spec, shape, dtype, flat), dtype)
        x = inputs + pe
        return x if self.dropout_layer is None else self.dropout_layer(x, training=training)


@keras.saving.register_keras_serializable(package="pe_core")
class RotaryEmbeddingND(RotaryEmbeddingNDConfig, _PairLayer):
    """N-D rotary embedding: rotary pairs split among coordinate axes (``sections``).

    ``call(query, key, positions=None)``: ``positions`` ``(..., seq, len(sections))``,
    or ``None`` for the layer's ``grid_shape`` flattened row-major. The parameters are
    :class:`~pe_core.layers.RotaryEmbeddingNDConfig`'s, and ``keras.layers.Layer``'s
    ``**kwargs``. No weights.

    Examples
    --------
    >>> import numpy as np
    >>> rope = RotaryEmbeddingND(8, (2, 2), grid_shape=(2, 3))
    >>> q, k = rope(np.ones((1, 6, 8), "float32"), np.ones((1, 6, 8), "float32"))
    >>> tuple(q.shape)
    (1, 6, 8)
    """

    def call(self, query: Any, key: Any, positions: Any = None) -> tuple[Any, Any]:
        shapes = (tuple(query.shape), tuple(key.shape))
        self._check_query_key(*shapes, names="query and key", known_seq=True)
        if positions is not None:
            positions = ops.convert_to_tensor(positions)
        return self._rotate(query, positions), self._rotate(key, positions)


def assign_resampled(
    variable: Any,
    table: Any,
    *,
    new_size: int | tuple[int, int] | None = None,
    old_size: int | tuple[int, int] | None = None,
    num_prefix_tokens: int = 1,
    interpolation: Interpolation = "bicubic",
    antialias: bool = False,
) -> Any:
    """Load a checkpoint's position table into a Keras weight with another grid.

    ``variable`` (a ``keras.Variable`` such as ``layer.pos_embed`` or an entry of
    ``model.weights``) has the shape ``(N, prefix + h * w, C)``; ``table`` is
    resized with :func:`pe_core.resample_pos_embed` (PyTorch's ``F.interpolate``
    numbers) to the grid ``(h, w)`` and assigned. ``table`` is a NumPy array (a
    checkpoint) or a tensor of the Keras backend; it stays in its framework.

    Parameters
    ----------
    variable : keras.Variable
        The weight to fill.
    table : array
        ``(N, prefix + old_h * old_w, C)``.
    new_size : int or (int, int), optional
        The variable's grid; by default the square its rows fill.
    old_size, num_prefix_tokens, interpolation, antialias
        As in :func:`pe_core.resample_pos_embed`.

    Returns
    -------
    keras.Variable
        ``variable``, now holding the resized table (cast to its dtype).

    Raises
    ------
    ValueError
        The resized table's shape is not the variable's (another ``N`` or ``C``, or
        ``new_size`` not its grid).

    Examples
    --------
    >>> import keras, numpy as np
    >>> weight = keras.Variable(np.zeros((1, 1 + 4 * 4, 8), "float32"))
    >>> checkpoint = np.random.default_rng(0).normal(size=(1, 1 + 2 * 2, 8))
    >>> weight = assign_resampled(weight, checkpoint.astype("float32"))
    >>> from pe_core import resample_pos_embed
    >>> want = resample_pos_embed(checkpoint.astype("float32"), 4)
    >>> bool(np.allclose(keras.ops.convert_to_numpy(weight), want))
    True
    """
    options = {k: v for k, v in locals().items() if k not in ("variable", "table", "new_size")}
    if not isinstance(variable, keras.Variable):
        raise TypeError(f"variable must be a keras.Variable. Received: {type(variable).__name__}")
    resized = resized_for(tuple(int(n) for n in variable.shape), table, new_size, **options)
    variable.assign(ops.cast(resized, variable.dtype))
    return variable


# ------------------------------------------------------------------ timestep embeddings


@keras.saving.register_keras_serializable(package="pe_core")
class Timesteps(TimestepsConfig, _Configured):
    """diffusers' ``Timesteps`` as a Keras layer: :func:`pe_core.timestep_embedding`.

    ``Timesteps(num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1)``;
    ``call(timesteps)`` returns the float32 ``timesteps.shape + (num_channels,)``
    embedding on the Keras backend in use, exact at any timestep and scale. No weights;
    ``get_config`` round-trips. Invalid configurations fail at construction.
    """

    def call(self, timesteps: Any) -> Any:
        backend = keras.backend.backend()
        return self._timesteps(timesteps, backend if backend in _PLACED_BACKENDS else None)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return (*input_shape, self.num_channels)


@keras.saving.register_keras_serializable(package="pe_core")
class RelativePositionBias(RelativePositionBiasConfig, _Layer):
    """Swin's (and BEiT's) learned relative position bias of a window, with
    :func:`pe_core.relative_index.relative_position_bias`.

    Parameters
    ----------
    window_size, n_heads, prefix_tokens
        As for :class:`~pe_core.layers._config_index.RelativePositionBiasConfig`.
    **kwargs
        ``keras.layers.Layer`` arguments.

    Notes
    -----
    ``call(attention_scores)`` returns ``attention_scores + bias`` for scores
    ``(batch, n_heads, N, N)``; :meth:`bias` returns the bias ``(n_heads, N, N)``
    itself, the numbers of the PyTorch and Flax layers for the same table. The weight
    ``relative_position_bias_table`` is ``(num_relative_distance, n_heads)``, zeros at
    first.

    Examples
    --------
    >>> import numpy as np
    >>> layer = RelativePositionBias(2, 3)
    >>> tuple(layer(np.zeros((1, 3, 4, 4), "float32")).shape), tuple(layer.bias().shape)
    ((1, 3, 4, 4), (3, 4, 4))
    """

    def build(self, input_shape: Any = None) -> None:
        self.relative_position_bias_table = self.add_weight(
            shape=self.table_shape(), initializer="zeros", name="relative_position_bias_table"
        )
        self.built = True

    def bias(self) -> Any:
        """The bias ``(n_heads, N, N)``."""
        if not self.built:
            self.build()
        return self._bias(self.relative_position_bias_table.value, keras.backend.backend())

    def call(self, attention_scores: Any) -> Any:
        self._check_scores(tuple(attention_scores.shape))
        return attention_scores + ops.cast(self.bias(), _dtype_name(attention_scores))


# --------------------------------------------------------------------------- loading

#: Every layer class of this module (registered for serialization, package "pe_core").
_LAYERS = tuple(globals()[name] for name in __all__ if name[0].isupper())


def custom_objects() -> dict[str, type]:
    """This module's layers by the names Keras saves them under (``"pe_core>Name"``),
    for ``keras.saving.load_model(path, custom_objects=...)`` or
    ``keras.saving.custom_object_scope``.

    Keras finds a registered layer of a ``.keras`` file only once the module that
    registers it has been imported; a process that loads a model without importing
    :mod:`pe_core.layers.keras` gets Keras's "Could not locate class" error. Import
    this module (or call :func:`load_model`) before loading.

    Examples
    --------
    >>> custom_objects()["pe_core>SinusoidalEncoding"] is SinusoidalEncoding
    True
    """
    return {f"pe_core>{layer.__name__}": layer for layer in _LAYERS}


def load_model(filepath: Any, **kwargs: Any) -> Any:
    """``keras.saving.load_model(filepath, **kwargs)`` with this module's layers known
    (:func:`custom_objects`, beside any ``custom_objects`` given).

    Examples
    --------
    >>> import os, tempfile
    >>> import keras, numpy as np
    >>> inputs = keras.Input((3, 8))
    >>> model = keras.Model(inputs, SinusoidalEncoding(8)(inputs))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> model.save(path)
    >>> x = np.zeros((1, 3, 8), "float32")
    >>> bool(np.array_equal(np.asarray(load_model(path)(x)), np.asarray(model(x))))
    True
    """
    objects = {**custom_objects(), **dict(kwargs.pop("custom_objects", None) or {})}
    return keras.saving.load_model(filepath, custom_objects=objects, **kwargs)
