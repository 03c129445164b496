"""Framework layers: the framework-neutral configuration they share.

The layers themselves live in one module per framework, each imported only when
asked for:

* :mod:`pe_core.layers.torch`: ``torch.nn.Module`` layers;
* :mod:`pe_core.layers.flax`: ``flax.nnx.Module`` and ``flax.linen.Module`` layers;
* :mod:`pe_core.layers.keras`: Keras 3 layers (JAX, TensorFlow and PyTorch backends).

Each offers the same two layers, thin wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`, so a model gives the same numbers in every framework:

* ``SinusoidalEncoding(d_model, *, spec=None, dropout=0.0, max_len=None)`` adds the
  encoding of positions ``offset, offset + 1, ...`` to ``(batch, seq, d_model)`` inputs
  (PyTorch: ``SinusoidalEncoding(d_model, dropout, max_len, *, spec=None,
  batch_first=True)``, the textbook module's argument order, and seq-first inputs with
  ``batch_first=False``);
* ``RotaryEmbedding(head_dim, *, base=10000.0, layout="half", rotary_dim=None,
  scaling=None, layer_type=None)`` rotates queries and keys ``(..., seq, head_dim)``.

This module holds what does not depend on a framework (einops' layer design): the
mixins :class:`SinusoidalEncodingConfig` and :class:`RotaryEmbeddingConfig` validate and
store the configuration, the ``max_len`` cache table is built here with NumPy, and
:func:`sequence_bucket` defines the buckets of compiled code. Importing it loads no
framework.

The ``max_len`` policy, identical in every framework: positions are computed on the fly
by default, exactly, whatever their size. ``max_len`` only bounds an optional cache of
the rows ``0 .. max_len - 1``; positions at or past ``max_len`` are computed on the fly
and get the same values (up to float32 rounding). A sequence longer than ``max_len`` is
never an error.

>>> from pe_core.layers import SinusoidalEncodingConfig
>>> config = SinusoidalEncodingConfig(64, spec="fairseq", max_len=128)
>>> config.d_model, config.spec.name, config.max_len
(64, 'fairseq', 128)
>>> SinusoidalEncodingConfig(64, dropout=1.5)
Traceback (most recent call last):
...
ValueError: dropout must be a number in [0, 1). Received: 1.5
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from pe_core.frequency import check_d
from pe_core.presets import PRESETS, resolve_spec
from pe_core.rope_layout import LAYOUTS
from pe_core.rope_spec import RopeSpec, thaw
from pe_core.spec import Spec
from pe_core.validation import positive_int

__all__ = [
    "MIN_BUCKET",
    "ROPE_LAYOUTS",
    "AlibiBiasConfig",
    "PatchEncodingConfig",
    "RotaryEmbeddingConfig",
    "RotaryEmbeddingNDConfig",
    "SinusoidalEncodingConfig",
    "T5RelativeBiasConfig",
    "cached_table",
    "check_dropout",
    "check_features",
    "check_grid_shape",
    "check_max_len",
    "check_rope_arguments",
    "patch_grid",
    "per_example_shape",
    "sequence_bucket",
    "spec_from_config",
    "spec_to_config",
]

#: The smallest bucket of :func:`sequence_bucket`.
MIN_BUCKET = 16

#: The pair layouts RoPE layers accept (see :mod:`pe_core.rope_layout`).
ROPE_LAYOUTS: tuple[str, ...] = LAYOUTS


# --------------------------------------------------------------------------- validation


def check_dropout(rate: object) -> float:
    """Validate a dropout rate in ``[0, 1)`` and return it as a float.

    >>> check_dropout(0.1)
    0.1
    >>> check_dropout(True)
    Traceback (most recent call last):
    ...
    TypeError: dropout must be a number in [0, 1). Received: True
    """
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"dropout must be a number in [0, 1). Received: {rate!r}")
    if not (0.0 <= float(rate) < 1.0):
        raise ValueError(f"dropout must be a number in [0, 1). Received: {rate!r}")
    return float(rate)


def check_max_len(max_len: object) -> int | None:
    """Validate ``max_len`` (``None`` or a positive int, the size of the optional cache).

    >>> check_max_len(None), check_max_len(512)
    (None, 512)
    >>> check_max_len(0)
    Traceback (most recent call last):
    ...
    ValueError: max_len must be None or a positive integer (it only bounds an optional cache). Received: 0
    """
    if max_len is None:
        return None
    message = (
        "max_len must be None or a positive integer (it only bounds an optional cache). "
        f"Received: {max_len!r}"
    )
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral):
        raise TypeError(message)
    if max_len <= 0:
        raise ValueError(message)
    return int(max_len)


def _check_positive_int(value: object, name: str, what: str) -> int:
    return positive_int(value, name, what=what)


def check_features(actual: int, expected: int, name: str) -> None:
    """Raise unless an input's last axis ``actual`` equals the layer's ``expected`` size.

    >>> check_features(32, 64, "d_model")
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 32 features but the layer was built with d_model=64.
    """
    if actual != expected:
        raise ValueError(
            f"The input's last axis has {actual} features but the layer was built with "
            f"{name}={expected}."
        )


def check_rope_arguments(
    head_dim: int,
    base: float,
    layout: str,
    rotary_dim: int | None,
    scaling: Any,
    layer_type: str | None = None,
) -> None:
    """Raise now what :func:`pe_core.rope.apply_rope` would raise at call time.

    Builds the :class:`~pe_core.rope_spec.RopeSpec` of these arguments and its
    frequencies for ``head_dim`` (rope types that depend on the sequence length are
    checked with their init-time frequencies).
    """
    RotaryEmbeddingConfig.rope_spec_for(head_dim, base, layout, rotary_dim, scaling, layer_type)


def per_example_shape(
    offset_shape: tuple[int | None, ...], x_shape: tuple[int | None, ...]
) -> tuple[int, ...]:
    """The shape to give an offset before adding ``arange(seq)`` to it.

    An offset is a scalar (one offset for everything) or holds one offset per example
    along the first axis of ``x`` (``(batch,)``). It is reshaped to the returned shape
    (``(batch, 1, ..., 1)``, ``x.ndim - 2`` axes) and then ``offset[..., None] +
    arange(seq)`` gives positions ``(batch, 1, ..., seq)`` that broadcast against
    ``x.shape[:-1]``.

    >>> per_example_shape((), (2, 5, 8)), per_example_shape((2,), (2, 4, 5, 8))
    ((), (-1, 1))
    >>> per_example_shape((3,), (2, 5, 8))
    Traceback (most recent call last):
    ...
    ValueError: offset must be a scalar or hold one offset per example, shape (batch,) = (2,). Received: offset of shape (3,)
    """
    if len(offset_shape) == 0:
        return ()
    batch = x_shape[0] if len(x_shape) >= 3 else None
    if (
        len(offset_shape) != 1
        or len(x_shape) < 3
        or (offset_shape[0] not in (1, None) and batch is not None and offset_shape[0] != batch)
    ):
        expected = (
            f"(batch,) = ({batch},)"
            if len(x_shape) >= 3
            else "() for an input without a batch axis"
        )
        raise ValueError(
            f"offset must be a scalar or hold one offset per example, shape {expected}. "
            f"Received: offset of shape {tuple(offset_shape)}"
        )
    return (-1,) + (1,) * (len(x_shape) - 3)


# --------------------------------------------------------------------------- specs as data


def spec_to_config(spec: Spec) -> str | dict[str, Any]:
    """A JSON-ready form of ``spec``: its preset name, or a dict of its fields.

    >>> spec_to_config(PRESETS["whisper"])
    'whisper'
    >>> spec_to_config(Spec(base=500.0))["base"]
    500.0
    """
    if spec.name in PRESETS and spec == PRESETS[spec.name]:
        return spec.name
    for name, preset in PRESETS.items():
        if spec == preset:
            return name
    config: dict[str, Any] = {f.name: getattr(spec, f.name) for f in fields(spec)}
    if config["frequencies"] is not None:
        config["frequencies"] = list(config["frequencies"])
    return config


def spec_from_config(config: Spec | str | dict[str, Any] | None) -> Spec:
    """Inverse of :func:`spec_to_config` (also accepts a :class:`~pe_core.Spec` or ``None``).

    >>> spec_from_config(spec_to_config(Spec(base=500.0))) == Spec(base=500.0)
    True
    """
    if isinstance(config, dict):
        values = dict(config)
        if values.get("frequencies") is not None:
            values["frequencies"] = tuple(values["frequencies"])
        return Spec(**values)
    return resolve_spec(config)


# --------------------------------------------------------------------------- tables, buckets


@functools.lru_cache(maxsize=32)
def cached_table(d_model: int, spec: Spec, max_len: int, dtype: str = "float32") -> np.ndarray:
    """The read-only NumPy table of positions ``0 .. max_len - 1`` (the ``max_len`` cache).

    >>> cached_table(8, Spec(), 4).shape
    (4, 8)
    """
    from pe_core.encoding import encode

    table = encode(range(max_len), d_model, spec=spec, dtype=dtype)
    table.setflags(write=False)
    return table


def sequence_bucket(length: Any, minimum: int = MIN_BUCKET) -> int:
    """The bucket of a sequence length: the smallest power of two ``> length``, at least 16.

    Compiled layers (``torch.compile``) encode positions for the whole bucket and slice
    the first ``length`` rows, so the shapes they trace depend on the bucket only: any
    length within a bucket (1 to 15, 16 to 31, 32 to 63, ...) reuses one compiled graph.
    Written with comparisons only, so a symbolic length (a ``torch.SymInt``) yields the
    range guards ``bucket / 2 <= length < bucket`` rather than a specialisation (the
    bucket is strictly larger than the length, so slicing it never equates the two).

    >>> [sequence_bucket(n) for n in (1, 15, 16, 31, 32, 100)]
    [16, 16, 32, 32, 64, 128]
    """
    bucket = minimum
    while length >= bucket:
        bucket *= 2
    return bucket


# --------------------------------------------------------------------------- mixins


class SinusoidalEncodingConfig:
    """Configuration of the ``SinusoidalEncoding`` layers (a framework-neutral mixin).

    Parameters
    ----------
    d_model : int
        Features of the inputs the encoding is added to (odd only with a Spec whose
        ``odd_d`` is ``"zero_pad"``).
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or a preset name; ``"vaswani"`` (the textbook
        ``PositionalEncoding``) by default.
    dropout : float
        Dropout rate applied after the addition, in ``[0, 1)``.
    max_len : int, optional
        Size of an optional cache of the rows ``0 .. max_len - 1``. Never a limit:
        longer sequences are computed on the fly.

    Raises
    ------
    TypeError, ValueError
        For an argument of the wrong type or value; the message names it.

    Examples
    --------
    >>> SinusoidalEncodingConfig(5, spec="vaswani")
    Traceback (most recent call last):
    ...
    ValueError: d must be even for a Spec with odd_d='raise'. Received: d=5. Use an even d, or Spec(odd_d='zero_pad') to append a zero column.
    """

    d_model: int
    spec: Spec
    dropout: float
    max_len: int | None

    def __init__(
        self,
        d_model: int,
        *,
        spec: Spec | str | None = None,
        dropout: float = 0.0,
        max_len: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_sinusoidal(d_model, spec, dropout, max_len)
        self.d_model, self.spec, self.dropout, self.max_len = values

    @staticmethod
    def validate_sinusoidal(
        d_model: object, spec: object, dropout: object, max_len: object
    ) -> tuple[int, Spec, float, int | None]:
        """Validated ``(d_model, spec, dropout, max_len)``; raises naming a bad value."""
        resolved = spec_from_config(spec)  # type: ignore[arg-type]
        d = _check_positive_int(d_model, "d_model", "the number of features")
        check_d(d, resolved)
        return d, resolved, check_dropout(dropout), check_max_len(max_len)

    def check_input_features(self, n_features: int) -> None:
        """Raise ``ValueError`` naming both sizes unless ``n_features == d_model``."""
        check_features(n_features, self.d_model, "d_model")

    def cache_rows(self, offset: int, length: int) -> np.ndarray | None:
        """Rows ``offset .. offset + length - 1`` of the ``max_len`` cache, or ``None``
        when there is no cache or they reach past it (then compute on the fly)."""
        if self.max_len is None or offset < 0 or offset + length > self.max_len:
            return None
        return cached_table(self.d_model, self.spec, self.max_len)[offset : offset + length]

    def sinusoidal_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data (the spec via :func:`spec_to_config`)."""
        return {
            "d_model": self.d_model,
            "spec": spec_to_config(self.spec),
            "dropout": self.dropout,
            "max_len": self.max_len,
        }

    def sinusoidal_repr(self) -> str:
        """``d_model=..., spec=..., ...`` for ``repr``."""
        parts = [f"d_model={self.d_model}", f"spec={spec_to_config(self.spec)!r}"]
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        if self.max_len is not None:
            parts.append(f"max_len={self.max_len}")
        return ", ".join(parts)


class RotaryEmbeddingConfig:
    """Configuration of the ``RotaryEmbedding`` layers (a framework-neutral mixin).

    Parameters
    ----------
    head_dim : int
        Features per head of the queries and keys (their last axis).
    base : float
        RoPE base (``rope_theta``), a finite number > 1.
    layout : {"half", "interleaved"}
        Pair layout: rotate-half (GPT-NeoX, Llama, Hugging Face) or interleaved
        (GPT-J, RoFormer); see :mod:`pe_core.rope_layout`.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (even, at most ``head_dim``);
        all of them by default.
    scaling : dict, optional
        Context-extension scaling (a rope-parameters dict such as
        ``{"rope_type": "linear", "factor": 2.0}``, or a whole model config), handed to
        :func:`pe_core.rope.apply_rope` unchanged and checked at construction. A
        transformers ``PretrainedConfig`` (anything with ``to_dict()``) is stored as its
        ``to_dict()``.
    layer_type : str, optional
        With a model config whose rope differs per layer type (Gemma 3): the layer
        type whose rope this layer applies, e.g. ``"sliding_attention"``.

    Examples
    --------
    >>> RotaryEmbeddingConfig(64, rotary_dim=32).rotary_dim
    32
    >>> RotaryEmbeddingConfig(64, layout="neox")
    Traceback (most recent call last):
    ...
    ValueError: Unknown layout 'neox'. Expected one of: half, interleaved.
    """

    head_dim: int
    base: float
    layout: str
    rotary_dim: int | None
    scaling: Any
    layer_type: str | None
    #: The validated configuration that :func:`pe_core.rope.apply_rope` receives.
    rope_spec: RopeSpec

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: Any = None,
        layer_type: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.head_dim, self.rope_spec = self.rope_spec_for(
            head_dim, base, layout, rotary_dim, scaling, layer_type
        )
        spec = self.rope_spec
        self.base, self.layout, self.rotary_dim = spec.base, spec.layout, spec.rotary_dim
        self.scaling = None if spec.scaling is None else thaw(spec.scaling)
        self.layer_type = spec.layer_type

    @staticmethod
    def validate_rotary(
        head_dim: object,
        base: object,
        layout: object,
        rotary_dim: object,
        scaling: object,
        layer_type: object = None,
    ) -> tuple[int, float, str, int | None, Any]:
        """Validated ``(head_dim, base, layout, rotary_dim, scaling)`` (``layer_type`` is
        checked with them: a string or ``None``); see :meth:`rope_spec_for`."""
        head_dim, spec = RotaryEmbeddingConfig.rope_spec_for(
            head_dim, base, layout, rotary_dim, scaling, layer_type
        )
        plain = None if spec.scaling is None else thaw(spec.scaling)
        return head_dim, spec.base, spec.layout, spec.rotary_dim, plain

    @staticmethod
    def rope_spec_for(
        head_dim: object,
        base: object,
        layout: object,
        rotary_dim: object,
        scaling: object,
        layer_type: object = None,
    ) -> tuple[int, RopeSpec]:
        """``(head_dim, spec)``: the validated :class:`~pe_core.rope_spec.RopeSpec` of
        these arguments, with its frequencies built once for ``head_dim`` (so a bad
        ``scaling`` raises now, not at the first call)."""
        head_dim = positive_int(head_dim, "head_dim", what="features per head")
        if scaling is not None and not isinstance(scaling, Mapping):
            if not callable(getattr(scaling, "to_dict", None)):
                raise TypeError(
                    "scaling must be None or a dict (rope parameters such as "
                    "{'rope_type': 'linear', 'factor': 2.0}, or a model config). "
                    f"Received: {scaling!r}"
                )
        spec = RopeSpec(
            base=base,  # type: ignore[arg-type]
            layout=layout,  # type: ignore[arg-type]
            rotary_dim=rotary_dim,  # type: ignore[arg-type]
            scaling=scaling,  # type: ignore[arg-type]
            layer_type=layer_type,  # type: ignore[arg-type]
        )
        spec.constants(head_dim)  # head_dim even, rotary_dim fits, scaling computes
        return head_dim, spec

    def check_input_features(self, n_features: int) -> None:
        """Raise ``ValueError`` naming both sizes unless ``n_features == head_dim``."""
        check_features(n_features, self.head_dim, "head_dim")

    def rotary_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "head_dim": self.head_dim,
            "base": self.base,
            "layout": self.layout,
            "rotary_dim": self.rotary_dim,
            "scaling": None if self.scaling is None else dict(self.scaling),
            "layer_type": self.layer_type,
        }

    def rotary_repr(self) -> str:
        """``head_dim=..., base=..., ...`` for ``repr``."""
        parts = [f"head_dim={self.head_dim}", f"base={self.base:g}", f"layout={self.layout!r}"]
        if self.rotary_dim is not None:
            parts.append(f"rotary_dim={self.rotary_dim}")
        if self.scaling is not None:
            parts.append(f"scaling={self.scaling!r}")
        if self.layer_type is not None:
            parts.append(f"layer_type={self.layer_type!r}")
        return ", ".join(parts)


# --------------------------------------------------------------------------- relative bias


class T5RelativeBiasConfig:
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
        super().__init__(**kwargs)
        values = self.validate_t5(n_heads, num_buckets, max_distance, bidirectional)
        self.n_heads, self.num_buckets, self.max_distance, self.bidirectional = values

    @staticmethod
    def validate_t5(
        n_heads: object, num_buckets: object, max_distance: object, bidirectional: object
    ) -> tuple[int, int, int, bool]:
        """Validated ``(n_heads, num_buckets, max_distance, bidirectional)``."""
        from pe_core.t5 import t5_relative_bucket

        heads = _check_positive_int(n_heads, "n_heads", "attention heads")
        t5_relative_bucket(
            0,
            bidirectional=bidirectional,  # type: ignore[arg-type]
            num_buckets=num_buckets,  # type: ignore[arg-type]
            max_distance=max_distance,  # type: ignore[arg-type]
        )
        return heads, int(num_buckets), int(max_distance), bool(bidirectional)  # type: ignore[call-overload]

    def t5_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "n_heads": self.n_heads,
            "num_buckets": self.num_buckets,
            "max_distance": self.max_distance,
            "bidirectional": self.bidirectional,
        }

    def t5_repr(self) -> str:
        """``n_heads=..., num_buckets=..., ...`` for ``repr``."""
        return ", ".join(f"{k}={v!r}" for k, v in self.t5_config().items())


class AlibiBiasConfig:
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
        super().__init__(**kwargs)
        values = self.validate_alibi(n_heads, alibi_bias_max, causal)
        self.n_heads, self.alibi_bias_max, self.causal = values

    @staticmethod
    def validate_alibi(
        n_heads: object, alibi_bias_max: object, causal: object
    ) -> tuple[int | None, float, bool]:
        """Validated ``(n_heads, alibi_bias_max, causal)``."""
        from pe_core.alibi import alibi_slopes

        heads = None if n_heads is None else _check_positive_int(n_heads, "n_heads", "heads")
        alibi_slopes(1, alibi_bias_max=alibi_bias_max)  # type: ignore[arg-type]
        if not isinstance(causal, (bool, np.bool_)):
            raise TypeError(f"causal must be True or False. Received: {causal!r}")
        return heads, float(alibi_bias_max), bool(causal)  # type: ignore[arg-type]

    def alibi_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "n_heads": self.n_heads,
            "alibi_bias_max": self.alibi_bias_max,
            "causal": self.causal,
        }

    def alibi_repr(self) -> str:
        """``n_heads=..., alibi_bias_max=..., causal=...`` for ``repr``."""
        return ", ".join(f"{k}={v!r}" for k, v in self.alibi_config().items())


# --------------------------------------------------------------------------- N-D layers


def check_grid_shape(grid_shape: object) -> tuple[int, ...] | None:
    """Validate a grid shape: ``None`` or a non-empty sequence of positive ints.

    >>> check_grid_shape([14, 14])
    (14, 14)
    >>> check_grid_shape((4, 0))
    Traceback (most recent call last):
    ...
    ValueError: grid_shape must be None or a non-empty sequence of positive integers. Received: (4, 0)
    """
    if grid_shape is None:
        return None
    message = (
        "grid_shape must be None or a non-empty sequence of positive integers. "
        f"Received: {grid_shape!r}"
    )
    if isinstance(grid_shape, (str, bytes)) or not hasattr(grid_shape, "__iter__"):
        raise TypeError(message)
    sizes = tuple(grid_shape)  # type: ignore[call-overload]
    if not sizes or any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in sizes):
        raise TypeError(message) if sizes else ValueError(message)
    if any(n <= 0 for n in sizes):
        raise ValueError(message)
    return tuple(int(n) for n in sizes)


class PatchEncodingConfig:
    """Configuration of the ``SinusoidalPatchEncoding`` layers (a framework-neutral mixin).

    Parameters
    ----------
    d_model : int
        Features of the patch tokens.
    grid_shape : sequence of int, optional
        The patch grid ``(H, W)`` (or ``(T, H, W)``, ...) for inputs whose tokens are
        flattened, ``(batch, H * W, d_model)``. Inputs ``(batch, H, W, d_model)`` carry
        their grid in their shape.
    spec : Spec or str, optional
        An N-D :class:`~pe_core.Spec` or preset (``"mae_2d"``, ``"tensor2tensor_2d"``,
        ...) whose ``axes`` is the number of grid axes; ``Spec(axes=k)`` (the paper's
        frequencies per axis) for a ``k``-axis grid by default.
    dropout : float
        Dropout rate after the addition, in ``[0, 1)``.

    Examples
    --------
    >>> config = PatchEncodingConfig(64, grid_shape=(14, 14), spec="mae_2d")
    >>> config.spec_for(2).name, config.grid_shape
    ('mae_2d', (14, 14))
    >>> PatchEncodingConfig(64, grid_shape=(2, 3, 4), spec="mae_2d")
    Traceback (most recent call last):
    ...
    ValueError: The spec encodes 2 coordinate axes but the patch grid has 3 axes (grid_shape (2, 3, 4)). Use a spec with axes=3.
    """

    d_model: int
    grid_shape: tuple[int, ...] | None
    spec: Spec | None
    dropout: float

    def __init__(
        self,
        d_model: int,
        *,
        grid_shape: Any = None,
        spec: Spec | str | dict[str, Any] | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_patch(d_model, grid_shape, spec, dropout)
        self.d_model, self.grid_shape, self.spec, self.dropout = values

    @staticmethod
    def validate_patch(
        d_model: object, grid_shape: object, spec: object, dropout: object
    ) -> tuple[int, tuple[int, ...] | None, Spec | None, float]:
        """Validated ``(d_model, grid_shape, spec, dropout)`` (``spec`` ``None`` = default)."""
        d = _check_positive_int(d_model, "d_model", "the number of features")
        shape = check_grid_shape(grid_shape)
        resolved = None if spec is None else spec_from_config(spec)  # type: ignore[arg-type]
        if shape is not None:
            _check_patch_spec(d, resolved or Spec(axes=len(shape)), shape)
        elif resolved is not None:
            check_d(d, resolved)
        return d, shape, resolved, check_dropout(dropout)

    def spec_for(self, axes: int, shape: tuple[int, ...] | None = None) -> Spec:
        """The spec of a ``axes``-axis grid (raises if the layer's spec has other axes)."""
        spec = self.spec if self.spec is not None else Spec(axes=axes)
        if spec.axes != axes:
            _check_patch_spec(self.d_model, spec, shape or (None,) * axes)  # type: ignore[arg-type]
        return spec

    def patch_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "d_model": self.d_model,
            "grid_shape": None if self.grid_shape is None else list(self.grid_shape),
            "spec": None if self.spec is None else spec_to_config(self.spec),
            "dropout": self.dropout,
        }

    def patch_repr(self) -> str:
        """``d_model=..., grid_shape=..., ...`` for ``repr``."""
        parts = [f"d_model={self.d_model}"]
        if self.grid_shape is not None:
            parts.append(f"grid_shape={self.grid_shape}")
        if self.spec is not None:
            parts.append(f"spec={spec_to_config(self.spec)!r}")
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        return ", ".join(parts)


def _check_patch_spec(d: int, spec: Spec, shape: tuple[int, ...]) -> None:
    if spec.axes != len(shape):
        raise ValueError(
            f"The spec encodes {spec.axes} coordinate axes but the patch grid has "
            f"{len(shape)} axes (grid_shape {shape}). Use a spec with axes={len(shape)}."
        )
    check_d(d, spec)


class RotaryEmbeddingNDConfig:
    """Configuration of the ``RotaryEmbeddingND`` layers (a framework-neutral mixin).

    Parameters
    ----------
    head_dim : int
        Features per head of the queries and keys.
    sections : sequence of int
        Rotary pairs per coordinate axis (``sum(sections) == head_dim / 2``, or
        ``rotary_dim / 2``), as for ``pe_core.apply_rope(..., sections=...)``.
    base : float
        RoPE base, > 1.
    layout : {"half", "interleaved"}
        Pair layout (see :mod:`pe_core.rope_layout`).
    section_layout : {"contiguous", "interleaved"}
        Which pairs follow which axis (M-RoPE contiguous, Qwen3-VL interleaved).
    frequencies : None, "per_axis" or sequence of float
        The pair frequencies: the 1-D schedule, one schedule per axis, or explicit.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features.
    grid_shape : sequence of int, optional
        A default grid: without explicit positions, token ``t`` of a sequence of
        ``prod(grid_shape)`` tokens gets the coordinates of ``pe_core.grid(grid_shape)``
        in row-major order.

    Examples
    --------
    >>> RotaryEmbeddingNDConfig(8, (2, 2), grid_shape=(4, 4)).sections
    (2, 2)
    >>> RotaryEmbeddingNDConfig(8, (2, 1))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ...
    """

    head_dim: int
    sections: tuple[int, ...]
    base: float
    layout: str
    section_layout: str
    frequencies: str | tuple[float, ...] | None
    rotary_dim: int | None
    grid_shape: tuple[int, ...] | None

    def __init__(
        self,
        head_dim: int,
        sections: Any,
        *,
        base: float = 10000.0,
        layout: str = "half",
        section_layout: str = "contiguous",
        frequencies: Any = None,
        rotary_dim: int | None = None,
        grid_shape: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_rope_nd(
            head_dim, sections, base, layout, section_layout, frequencies, rotary_dim, grid_shape
        )
        (
            self.head_dim,
            self.sections,
            self.base,
            self.layout,
            self.section_layout,
            self.frequencies,
            self.rotary_dim,
            self.grid_shape,
        ) = values

    @staticmethod
    def validate_rope_nd(
        head_dim: object,
        sections: object,
        base: object,
        layout: object,
        section_layout: object,
        frequencies: object,
        rotary_dim: object,
        grid_shape: object,
    ) -> tuple[Any, ...]:
        """Validated arguments, in constructor order (checked by rotating one row)."""
        from pe_core.rope import apply_rope

        d = _check_positive_int(head_dim, "head_dim", "features per head")
        if isinstance(sections, (str, bytes)) or not hasattr(sections, "__iter__"):
            raise TypeError(
                f"sections must be a sequence of pair counts, one per axis. Received: {sections!r}"
            )
        parts = tuple(sections)  # type: ignore[call-overload]
        if frequencies is not None and not isinstance(frequencies, str):
            frequencies = tuple(float(w) for w in frequencies)  # type: ignore[attr-defined]
        shape = check_grid_shape(grid_shape)
        if shape is not None and len(shape) != len(parts):
            raise ValueError(
                f"grid_shape has {len(shape)} axes but sections has {len(parts)} "
                f"(one per axis). Received: grid_shape={shape}, sections={parts}"
            )
        row = np.zeros((1, d), dtype=np.float32)
        apply_rope(
            row,
            np.zeros((1, len(parts)), dtype=np.int64),
            base=base,  # type: ignore[arg-type]
            layout=layout,  # type: ignore[arg-type]
            rotary_dim=rotary_dim,  # type: ignore[arg-type]
            sections=parts,
            section_layout=section_layout,  # type: ignore[arg-type]
            frequencies=frequencies,  # type: ignore[arg-type]
        )
        return (
            d,
            tuple(int(s) for s in parts),
            float(base),  # type: ignore[arg-type]
            str(layout),
            str(section_layout),
            frequencies,
            None if rotary_dim is None else int(rotary_dim),  # type: ignore[call-overload]
            shape,
        )

    def rope_nd_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pe_core.rope.apply_rope` for this layer."""
        return {
            "base": self.base,
            "layout": self.layout,
            "rotary_dim": self.rotary_dim,
            "sections": self.sections,
            "section_layout": self.section_layout,
            "frequencies": self.frequencies,
        }

    def grid_positions(self, length: int) -> np.ndarray:
        """``pe_core.grid(grid_shape)`` flattened to ``(length, axes)`` (host integers)."""
        from pe_core.nd import grid

        if self.grid_shape is None:
            raise ValueError(
                "Pass positions (..., seq, axes), or build the layer with grid_shape=."
            )
        if math.prod(self.grid_shape) != length:
            raise ValueError(
                f"The sequence has {length} tokens but grid_shape {self.grid_shape} holds "
                f"{math.prod(self.grid_shape)}."
            )
        return np.asarray(grid(self.grid_shape)).reshape(length, len(self.grid_shape))

    def rope_nd_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        frequencies = self.frequencies
        return {
            "head_dim": self.head_dim,
            "sections": list(self.sections),
            "base": self.base,
            "layout": self.layout,
            "section_layout": self.section_layout,
            "frequencies": list(frequencies) if isinstance(frequencies, tuple) else frequencies,
            "rotary_dim": self.rotary_dim,
            "grid_shape": None if self.grid_shape is None else list(self.grid_shape),
        }

    def rope_nd_repr(self) -> str:
        """``head_dim=..., sections=..., ...`` for ``repr``."""
        parts = [f"head_dim={self.head_dim}", f"sections={self.sections}"]
        for key in ("base", "layout", "section_layout", "frequencies", "rotary_dim", "grid_shape"):
            value = getattr(self, key)
            default = {"base": 10000.0, "layout": "half", "section_layout": "contiguous"}
            if value is not None and value != default.get(key):
                parts.append(f"{key}={value!r}")
        return ", ".join(parts)


def patch_grid(
    config: PatchEncodingConfig, x_shape: tuple[int, ...], grid_shape: Any
) -> tuple[tuple[int, ...], bool]:
    """``(grid shape, flattened?)`` of patch tokens of shape ``x_shape``.

    ``(batch, N, d)`` inputs are flattened grids of ``grid_shape`` (the call's, else the
    layer's), ``(batch, H, W, ..., d)`` inputs carry their grid; raises naming the
    mismatch.

    >>> patch_grid(PatchEncodingConfig(8, grid_shape=(2, 3)), (4, 6, 8), None)
    ((2, 3), True)
    >>> patch_grid(PatchEncodingConfig(8), (4, 2, 3, 8), None)
    ((2, 3), False)
    """
    if len(x_shape) < 3:
        raise ValueError(
            "x must have shape (batch, H * W, d_model) or (batch, H, W, d_model). "
            f"Received: shape {x_shape}"
        )
    check_features(x_shape[-1], config.d_model, "d_model")
    shape = check_grid_shape(grid_shape) or config.grid_shape
    if len(x_shape) == 3 and shape is not None:
        if math.prod(shape) != x_shape[1]:
            raise ValueError(
                f"The input has {x_shape[1]} patch tokens but the grid {shape} holds "
                f"{math.prod(shape)}."
            )
        return shape, True
    spatial = tuple(int(n) for n in x_shape[1:-1])
    if len(x_shape) == 3:
        raise ValueError(
            "Flattened patch tokens (batch, H * W, d_model) need a grid_shape (the layer's "
            f"or forward's). Received: shape {x_shape}"
        )
    if check_grid_shape(grid_shape) is not None and shape != spatial:
        raise ValueError(f"grid_shape {shape} does not match the input's grid {spatial}.")
    return spatial, False
