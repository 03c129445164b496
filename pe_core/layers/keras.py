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
from typing import Any

import keras
import numpy as np
from keras import ops

from pe_core.encoding import encode
from pe_core.layers import RotaryEmbeddingConfig, SinusoidalEncodingConfig, per_example_shape
from pe_core.rope import apply_rope
from pe_core.spec import Spec

__all__ = ["RotaryEmbedding", "SinusoidalEncoding"]

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _dtype_name(x: Any) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def _check_offset(offset: object) -> Any:
    if isinstance(offset, bool):
        raise TypeError(
            f"offset must be an int or a tensor of per-example offsets. Received: {offset!r}"
        )
    if isinstance(offset, numbers.Integral):
        return int(offset)
    if keras.ops.is_tensor(offset) or isinstance(offset, np.ndarray):
        offset = ops.convert_to_tensor(offset)
        kind = _dtype_name(offset)
        if not (kind.startswith(("int", "uint")) or kind in _FLOATS):
            raise TypeError(
                f"offset must be an int or an integer/float tensor. Received dtype: {kind}"
            )
        return offset
    raise TypeError(
        f"offset must be an int or a tensor of per-example offsets (batch,). Received: {offset!r}"
    )


def _positions(offset: Any, length: Any, x_shape: tuple[int | None, ...]) -> Any:
    """``offset + arange(length)`` as a backend tensor: ``(length,)``, or
    ``(batch, 1, ..., length)`` for per-example offsets ``(batch,)``."""
    if isinstance(offset, int):
        return ops.arange(length, dtype="int32") + offset
    shape = per_example_shape(tuple(offset.shape), x_shape)
    steps = ops.arange(length, dtype=_dtype_name(offset))
    return ops.expand_dims(ops.reshape(offset, shape), -1) + steps


def _unknown_tf_shape(*tensors: Any) -> bool:
    """A TensorFlow graph tensor with an unknown (``None``) dimension among ``tensors``."""
    return keras.backend.backend() == "tensorflow" and any(
        None in tuple(t.shape) for t in tensors if t is not None and not isinstance(t, range)
    )


def _encode_positions(positions: Any, d: int, spec: Spec, dtype: str) -> Any:
    """``encode`` on a backend tensor; TensorFlow graphs with unknown dims are mapped."""
    if _unknown_tf_shape(positions):
        import tensorflow as tf

        flat = tf.reshape(positions, [-1])
        pe = tf.vectorized_map(lambda p: encode(p, d, spec=spec, dtype=dtype), flat)
        return tf.reshape(pe, tf.concat([tf.shape(positions), [d]], 0))
    return encode(positions, d, spec=spec, dtype=dtype)


def _rope_rows(x: Any, positions: Any, rotate: Any) -> Any:
    """``rotate(x, positions)`` for a TensorFlow graph tensor with unknown dims: row by row
    (``tf.vectorized_map`` turns it back into whole-tensor operations)."""
    import tensorflow as tf

    shape = tf.shape(x)
    if isinstance(positions, range):
        positions = tf.range(positions.start, positions.stop)
    positions = tf.broadcast_to(tf.convert_to_tensor(positions), shape[:-1])
    rows = tf.reshape(x, tf.stack([-1, shape[-1]]))
    rows.set_shape([None, x.shape[-1]])
    flat_positions = tf.reshape(positions, [-1])
    out = tf.vectorized_map(
        lambda args: rotate(args[0][None], args[1][None])[0], (rows, flat_positions)
    )
    return tf.reshape(out, shape)


@keras.saving.register_keras_serializable(package="pe_core")
class SinusoidalEncoding(SinusoidalEncodingConfig, keras.layers.Layer):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` to its input.

    Parameters
    ----------
    d_model : int
        Features of the input (its last axis).
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or preset name; ``"vaswani"`` by default (keras-hub's
        ``SinePositionEncoding`` numbers). Saved as the preset name, or as its fields.
    dropout : float
        Dropout rate after the addition (``keras.layers.Dropout``), 0 by default.
    max_len : int, optional
        Size of an optional cache of rows ``0 .. max_len - 1`` (used for int offsets).
        Never a limit: longer sequences are computed on the fly, same values.
    **kwargs
        ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Notes
    -----
    ``call(inputs, offset=0, training=None)``: ``inputs`` is ``(..., seq, d_model)``,
    ``offset`` an int or a tensor of per-example offsets ``(batch,)``. Masks pass
    through. On the TensorFlow backend, graphs whose sequence length is unknown
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

    def __init__(
        self,
        d_model: int,
        *,
        spec: Spec | str | dict[str, Any] | None = None,
        dropout: float = 0.0,
        max_len: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(d_model, spec=spec, dropout=dropout, max_len=max_len, **kwargs)
        self.dropout_layer = keras.layers.Dropout(self.dropout) if self.dropout else None
        self.supports_masking = True

    def call(self, inputs: Any, offset: Any = 0, training: bool | None = None) -> Any:
        x = inputs
        if len(x.shape) < 2:
            raise ValueError(
                f"inputs must have shape (..., seq, d_model). Received: shape {tuple(x.shape)}"
            )
        self.check_input_features(x.shape[-1])
        dtype = _dtype_name(x)
        if dtype not in _FLOATS:
            raise TypeError(f"inputs must be floating. Received dtype: {dtype}")
        x = x + self.encoding(x, offset)
        if self.dropout_layer is not None:
            x = self.dropout_layer(x, training=training)
        return x

    def encoding(self, inputs: Any, offset: Any = 0) -> Any:
        """The encoding to add to ``inputs``, in their dtype: ``(seq, d_model)`` for an int
        offset, ``(batch, 1, ..., seq, d_model)`` for per-example offsets ``(batch,)``."""
        dtype = _dtype_name(inputs)
        offset = _check_offset(offset)
        length = inputs.shape[-2]
        if isinstance(offset, int) and length is not None:
            host = self.cache_rows(offset, length) if dtype != "float64" else None
            if host is None:
                host = encode(
                    range(offset, offset + length),
                    self.d_model,
                    spec=self.spec,
                    dtype="float64" if dtype == "float64" else "float32",
                )
            return ops.cast(ops.convert_to_tensor(np.asarray(host)), dtype)
        if length is None:
            length = ops.shape(inputs)[-2]
        positions = _positions(offset, length, tuple(inputs.shape))
        return _encode_positions(positions, self.d_model, self.spec, dtype)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return tuple(input_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(self.sinusoidal_config())
        return config


@keras.saving.register_keras_serializable(package="pe_core")
class RotaryEmbedding(RotaryEmbeddingConfig, keras.layers.Layer):
    """Rotates queries and keys by their positions (RoPE), with :func:`~pe_core.rope.apply_rope`.

    Parameters
    ----------
    head_dim : int
        Features per head (the last axis of query and key), even.
    base : float
        ``rope_theta``, > 1 (10000 by default).
    layout : {"half", "interleaved"}
        ``"half"`` (rotate-half: GPT-NeoX, Llama, Hugging Face) or ``"interleaved"``
        (GPT-J, RoFormer).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (even, <= head_dim).
    scaling : dict, optional
        Context-extension rope parameters or a model config, as for
        :func:`~pe_core.rope.apply_rope` (saved in the config as JSON).
    **kwargs
        ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Notes
    -----
    ``call(query, key, positions=None, offset=0)``: query and key ``(..., seq,
    head_dim)`` (e.g. ``(batch, heads, seq, head_dim)``; key may have another seq);
    positions ``offset + arange(seq)`` for each (``offset`` an int or per-example
    ``(batch,)``), or explicit ``positions`` broadcasting against ``(..., seq)``.
    Returns the rotated ``(query, key)`` in their dtype (bfloat16 under
    ``mixed_bfloat16``); the angles and the rotation run in float32.

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

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            head_dim, base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling, **kwargs
        )

    def call(self, query: Any, key: Any, positions: Any = None, offset: Any = 0) -> tuple[Any, Any]:
        for x in (query, key):
            if len(x.shape) < 2:
                raise ValueError(
                    f"query and key must have shape (..., seq, head_dim). Received: {tuple(x.shape)}"
                )
            self.check_input_features(x.shape[-1])
        offset = _check_offset(offset)
        if positions is not None and (not isinstance(offset, int) or offset != 0):
            raise ValueError("Pass either positions or offset, not both.")
        return self.rotate(query, positions, offset), self.rotate(key, positions, offset)

    def rotate(self, x: Any, positions: Any = None, offset: Any = 0) -> Any:
        """:func:`~pe_core.rope.apply_rope` of one tensor with this layer's configuration."""
        if positions is None:
            length = x.shape[-2]
            if isinstance(offset, int) and length is not None:
                positions = range(offset, offset + length)
            else:
                if length is None:
                    length = ops.shape(x)[-2]
                positions = _positions(offset, length, tuple(x.shape))
        elif not isinstance(positions, range):
            positions = ops.convert_to_tensor(positions)

        def rotate(x: Any, positions: Any) -> Any:
            return apply_rope(
                x,
                positions,
                base=self.base,
                layout=self.layout,
                rotary_dim=self.rotary_dim,
                scaling=self.scaling,
            )

        if _unknown_tf_shape(x, positions):
            return _rope_rows(x, positions, rotate)
        return rotate(x, positions)

    def compute_output_shape(
        self, query_shape: tuple[int | None, ...], key_shape: tuple[int | None, ...]
    ) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        return tuple(query_shape), tuple(key_shape)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(self.rotary_config())
        return config
