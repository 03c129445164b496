"""The framework-neutral configuration of the layers: mixins, and specs as data.

Each layer class of :mod:`pe_core.layers.torch`, :mod:`~pe_core.layers.flax` and
:mod:`~pe_core.layers.keras` inherits one mixin of this module (einops' layer design):
it validates the constructor's arguments, stores them and gives them back as
JSON-ready data (``*_config``) and for ``repr`` (``*_repr``), so every framework takes
and refuses the same arguments with the same messages. The mixins also hold what a
layer computes with :mod:`pe_core` whatever the framework (the host tables of the
``max_len`` cache, the calls of :func:`pe_core.encode`, :func:`pe_core.rope.apply_rope`,
:func:`pe_core.t5.t5_relative_bias` and :func:`pe_core.alibi_bias` with the layer's
configuration), so a framework module only wires them into its module class. The N-D
mixins are in :mod:`pe_core.layers._config_nd`.

>>> spec_to_config(Spec(base=500.0))["base"]
500.0
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import fields
from typing import Any

import numpy as np

from pe_core._schedule import check_d
from pe_core.alibi import alibi_bias
from pe_core.encoding import encode
from pe_core.fourier import ORDERS
from pe_core.layers._checks import (
    check_dropout,
    check_features,
    check_flag,
    check_max_len,
    check_query_key,
    check_scaling_type,
)
from pe_core.presets import PRESETS, resolve_spec
from pe_core.rope import apply_rope
from pe_core.rope_spec import RopeSpec, thaw
from pe_core.spec import Spec
from pe_core.t5 import t5_relative_bias, t5_relative_bucket
from pe_core.typing import RopeLayout, SinCosOrder
from pe_core.validation import choice, finite_real, positive_int

__all__ = [
    "AlibiBiasConfig",
    "FourierFeaturesConfig",
    "InitSignature",
    "LayerConfig",
    "RotaryEmbeddingConfig",
    "SinusoidalEncodingConfig",
    "T5RelativeBiasConfig",
    "cached_table",
    "host_dtype",
    "layer_repr",
    "rope_repr",
    "short_repr",
    "spec_from_config",
    "spec_repr",
    "spec_to_config",
    "timesteps_repr",
]


# --------------------------------------------------------------------------- specs as data


def spec_to_config(spec: Spec) -> str | dict[str, Any]:
    """A JSON-ready form of ``spec``: its preset name, or a dict of its fields.

    >>> spec_to_config(PRESETS["whisper"])
    'whisper'
    >>> spec_to_config(Spec(base=500.0))["base"]
    500.0
    """
    if spec.name is not None and PRESETS.get(spec.name) == spec:
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


# --------------------------------------------------------------------------- reprs
#
# The text every framework's repr shows (torch ``extra_repr``, Flax ``__repr__``, Keras
# ``__repr__``): the values a layer computes with, not only the arguments it was given.


def short_repr(value: Any) -> str:
    """``repr(value)``, a sequence of more than four values as ``[first, ..., last] (n)``."""
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"[{value[0]!r}, ..., {value[-1]!r}] ({len(value)} values)"
    return repr(value)


def spec_repr(spec: Spec) -> str:
    """``spec=...`` for ``repr``: a preset's name, or the fields of another spec that
    differ from :class:`~pe_core.Spec`'s defaults, and the base and layout it uses.

    >>> spec_repr(PRESETS["vaswani"])
    "spec='vaswani' (base=10000, layout='interleaved')"
    >>> spec_repr(Spec(base=500.0, axes=2))
    "spec=Spec(base=500.0, axes=2) (base=500, layout='interleaved')"
    """
    config = spec_to_config(spec)
    base = "" if spec.frequencies is not None else f"base={spec.base:.12g}, "  # unused then
    used = f"({base}layout={spec.layout!r})"
    if isinstance(config, str):
        return f"spec={config!r} {used}"
    default = Spec()
    changed = [
        f"{f.name}={short_repr(getattr(spec, f.name))}"
        for f in fields(spec)
        if f.name != "name" and getattr(spec, f.name) != getattr(default, f.name)
    ]
    return f"spec=Spec({', '.join(changed)}) {used}"


def rope_repr(spec: RopeSpec, head_dim: int) -> list[str]:
    """The ``key=value`` parts a rotary layer's ``repr`` shows: the rope it applies to heads
    of ``head_dim`` features (:meth:`RopeSpec.summary <pe_core.RopeSpec.summary>`), so
    a ``rope_theta`` or a scaling read from a model config shows as used.

    >>> config = {"rope_theta": 5e5, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    >>> ", ".join(rope_repr(RopeSpec(scaling=config), 16))
    "head_dim=16, base=500000, layout='half', rope_type='linear', factor=4.0"
    """
    summary = spec.summary(head_dim)
    parts = [
        f"head_dim={head_dim}",
        f"base={summary['rope_theta']:.12g}",
        f"layout={spec.layout!r}",
    ]
    if summary["rotary_dim"] != head_dim:
        parts.append(f"rotary_dim={summary['rotary_dim']}")
    if summary["rope_type"] != "default":
        parts.append(f"rope_type={summary['rope_type']!r}")
    shown = {"rope_type", "rope_theta", "head_dim", "rotary_dim", "attention_factor"}
    parts += [f"{k}={short_repr(thaw(v))}" for k, v in summary.items() if k not in shown]
    if summary["attention_factor"] != 1.0:
        parts.append(f"attention_factor={summary['attention_factor']!r}")
    if spec.layer_type is not None:
        parts.append(f"layer_type={spec.layer_type!r}")
    if spec.rotary_features != "first":
        parts.append(f"rotary_features={spec.rotary_features!r}")
    return parts


def timesteps_repr(
    num_channels: Any, flip_sin_to_cos: Any, downscale_freq_shift: Any, scale: Any
) -> str:
    """``num_channels=..., flip_sin_to_cos=..., ...`` for a ``Timesteps`` layer's ``repr``.

    >>> timesteps_repr(320, True, 0, 1)
    'num_channels=320, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1'
    """
    return (
        f"num_channels={num_channels}, flip_sin_to_cos={flip_sin_to_cos}, "
        f"downscale_freq_shift={downscale_freq_shift}, scale={scale}"
    )


def layer_repr(layer: Any) -> str:
    """``Name(key=value, ...)``: the class name and the configuration's ``repr`` text.

    >>> layer_repr(AlibiBiasConfig(4))
    'AlibiBiasConfig(n_heads=4, alibi_bias_max=8.0, causal=True)'
    """
    try:
        text = layer._layer_repr()
    except AttributeError:  # asked for while the constructor runs (framework messages)
        text = "..."
    return f"{type(layer).__name__}({text})"


class InitSignature:
    """A class's ``__signature__``: its ``__init__`` without ``self``.

    For classes whose metaclass ``__call__`` takes ``(*args, **kwargs)`` (Flax NNX's),
    so that :func:`inspect.signature` and IDEs show the constructor's parameters; a
    subclass gets its own ``__init__``'s. Instances have none (their ``__call__``
    is theirs).

    >>> class Layer:
    ...     __signature__ = InitSignature()
    ...     def __init__(self, d_model: int, *, dropout: float = 0.0) -> None: ...
    >>> list(inspect.signature(Layer).parameters)
    ['d_model', 'dropout']
    """

    def __get__(self, obj: object, owner: type) -> inspect.Signature:
        if obj is not None:
            raise AttributeError("__signature__")
        signature = inspect.signature(owner.__init__)  # type: ignore[misc]
        return signature.replace(parameters=list(signature.parameters.values())[1:])


# --------------------------------------------------------------------------- host tables


@functools.lru_cache(maxsize=32)
def cached_table(d_model: int, spec: Spec, max_len: int, dtype: str = "float32") -> np.ndarray:
    """The read-only NumPy table of positions ``0 .. max_len - 1`` (the ``max_len`` cache).

    >>> cached_table(8, Spec(), 4).flags.writeable
    False
    """
    table = encode(range(max_len), d_model, spec=spec, dtype=dtype)
    table.setflags(write=False)
    return table


def host_dtype(dtype_name: str) -> str:
    """The dtype of a host table for ``dtype_name`` output: float64 for float64, else
    float32 (float16/bfloat16 inputs get the float32 encoding rounded once, as in
    traced code).

    >>> host_dtype("bfloat16"), host_dtype("float64")
    ('float32', 'float64')
    """
    return "float64" if dtype_name == "float64" else "float32"


# --------------------------------------------------------------------------- mixins


class LayerConfig:
    """The face every mixin shows the framework modules: its constructor arguments as
    JSON-ready data, for ``repr``, and validated again (for dataclass-style modules,
    Flax linen, whose fields are set before they can be checked)."""

    def _layer_config(self) -> dict[str, Any]:
        raise NotImplementedError

    def _layer_repr(self) -> str:
        raise NotImplementedError

    def _validated_fields(self) -> dict[str, Any]:
        raise NotImplementedError


class SinusoidalEncodingConfig(LayerConfig):
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
        spec: Spec | str | dict[str, Any] | None = None,
        dropout: float = 0.0,
        max_len: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_sinusoidal(d_model, spec, dropout, max_len)
        self.d_model, self.spec, self.dropout, self.max_len = values

    @staticmethod
    def validate_sinusoidal(
        d_model: Any, spec: Any, dropout: Any, max_len: Any
    ) -> tuple[int, Spec, float, int | None]:
        """Validated ``(d_model, spec, dropout, max_len)``; raises naming a bad value."""
        resolved = spec_from_config(spec)
        d = positive_int(d_model, "d_model", what="the number of features")
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

    def _host_rows(self, offset: int, length: int, dtype_name: str) -> np.ndarray:
        """Rows ``offset .. offset + length - 1`` on the host for ``dtype_name`` output:
        from the ``max_len`` cache when they fit in it (not for float64), else
        :func:`pe_core.encode` at :func:`host_dtype`."""
        rows = None if dtype_name == "float64" else self.cache_rows(offset, length)
        if rows is not None:
            return rows
        positions = range(offset, offset + length)
        return encode(positions, self.d_model, spec=self.spec, dtype=host_dtype(dtype_name))

    def _encode(self, positions: Any, dtype: Any, **kwargs: Any) -> Any:
        """:func:`pe_core.encode` of ``positions`` with this layer's ``d_model`` and spec."""
        return encode(positions, self.d_model, spec=self.spec, dtype=dtype, **kwargs)

    def _layer_config(self) -> dict[str, Any]:
        return self.sinusoidal_config()

    def _layer_repr(self) -> str:
        return self.sinusoidal_repr()

    def _validated_fields(self) -> dict[str, Any]:
        names = ("d_model", "spec", "dropout", "max_len")
        values = self.validate_sinusoidal(*(getattr(self, name) for name in names))
        return dict(zip(names, values, strict=True))

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
        parts = [f"d_model={self.d_model}", spec_repr(self.spec)]
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        if self.max_len is not None:
            parts.append(f"max_len={self.max_len}")
        return ", ".join(parts)


class RotaryEmbeddingConfig(LayerConfig):
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
    trainable_frequencies : bool
        Hold the frequencies as a trainable weight named ``frequencies`` (float32,
        shape ``(rotary_dim/2,)``), initialised to the schedule of ``base``,
        ``rotary_dim`` and ``scaling`` (scaling types with an attention factor other
        than 1 are refused); the angles are then ``pos * frequencies`` on the device
        (:mod:`pe_core.trainable`), differentiable. ``False`` (the default): exact
        constants, no state.
    frequency_heads : int, optional
        With ``trainable_frequencies``: one row of frequencies per head, shape
        ``(frequency_heads, rotary_dim/2)`` (queries and keys ``(..., heads, seq,
        head_dim)`` with ``heads == frequency_heads``).

    Notes
    -----
    The layers take queries and keys ``(..., seq, head_dim)`` (e.g. ``(batch, heads,
    seq, head_dim)``; the keys may have another ``seq``) and return both rotated, in
    their own dtypes (the angles and the rotation run in float32). Positions are
    ``offset + arange(seq)`` for each, with ``offset`` an int or per-example offsets
    ``(batch,)``; or pass ``positions`` explicitly (broadcasting against ``(..., seq)``,
    the same for queries and keys), not both.

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
    layout: RopeLayout
    rotary_dim: int | None
    scaling: Any
    layer_type: str | None
    #: The validated configuration that :func:`pe_core.rope.apply_rope` receives.
    rope_spec: RopeSpec
    trainable_frequencies: bool
    frequency_heads: int | None

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: Any = None,
        layer_type: str | None = None,
        trainable_frequencies: bool = False,
        frequency_heads: int | None = None,
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
        self.trainable_frequencies, self.frequency_heads = self._check_trainable(
            trainable_frequencies, frequency_heads
        )

    def _check_trainable(
        self, trainable_frequencies: object, frequency_heads: object
    ) -> tuple[bool, int | None]:
        if not isinstance(trainable_frequencies, bool):
            raise TypeError(
                f"trainable_frequencies must be True or False. Received: {trainable_frequencies!r}"
            )
        if frequency_heads is None:
            return trainable_frequencies, None
        if not trainable_frequencies:
            raise ValueError(
                "frequency_heads applies to trainable frequencies only: pass "
                "trainable_frequencies=True."
            )
        return True, positive_int(frequency_heads, "frequency_heads")

    def initial_frequencies(self) -> np.ndarray:
        """The float32 initial value of the trainable ``frequencies``: the schedule's
        ``inv_freq`` (``(rotary_dim/2,)``, or repeated to ``(frequency_heads,
        rotary_dim/2)``).

        >>> RotaryEmbeddingConfig(4, base=100.0, trainable_frequencies=True).initial_frequencies()
        array([1. , 0.1], dtype=float32)
        """
        inv_freq, attention_factor = self.rope_spec.constants(self.head_dim)
        if attention_factor != 1.0:
            raise ValueError(
                "trainable_frequencies does not take a scaling type with an attention "
                f"factor ({attention_factor!r} here): the factor would not be learned. "
                "Use a scaling without one (linear, llama3, ntk), or fixed frequencies."
            )
        values = np.asarray(inv_freq, dtype=np.float32)
        if self.frequency_heads is not None:
            values = np.tile(values, (self.frequency_heads, 1))
        return values

    def _rotate_trainable(self, x: Any, positions: Any, frequencies: Any) -> Any:
        """:func:`~pe_core.rope.apply_rope` of ``x`` at the layer's trainable frequencies."""
        return apply_rope(x, positions, frequencies=frequencies, layout=self.layout)

    @staticmethod
    def validate_rotary(
        head_dim: Any,
        base: Any,
        layout: Any,
        rotary_dim: Any,
        scaling: Any,
        layer_type: Any = None,
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
        head_dim: Any,
        base: Any,
        layout: Any,
        rotary_dim: Any,
        scaling: Any,
        layer_type: Any = None,
    ) -> tuple[int, RopeSpec]:
        """``(head_dim, spec)``: the validated :class:`~pe_core.rope_spec.RopeSpec` of
        these arguments, with its frequencies built once for ``head_dim`` (so a bad
        ``head_dim`` or ``scaling`` raises now, not at the first call)."""
        check_scaling_type(scaling)
        spec = RopeSpec(
            base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling, layer_type=layer_type
        )
        spec.constants(head_dim)  # head_dim an even int, rotary_dim fits, scaling computes
        return int(head_dim), spec

    def check_input_features(self, n_features: int) -> None:
        """Raise ``ValueError`` naming both sizes unless ``n_features == head_dim``."""
        check_features(n_features, self.head_dim, "head_dim")

    def _check_query_key(self, *shapes: tuple[int | None, ...], names: str = "q and k") -> None:
        """Raise unless each shape is ``(..., seq, head_dim)``, naming the first that is not."""
        for shape in shapes:
            check_query_key(shape, self.head_dim, names)

    @staticmethod
    def _known_positions(offset: Any, length: Any) -> range | None:
        """``range(offset, offset + length)`` when both are Python ints (known on the host:
        exact cos/sin there), else ``None`` (compute positions in the framework)."""
        if isinstance(offset, int) and isinstance(length, int):
            return range(offset, offset + length)
        return None

    def _rotate(self, x: Any, positions: Any) -> Any:
        """:func:`~pe_core.rope.apply_rope` of ``x`` with this layer's configuration."""
        return apply_rope(x, positions, spec=self.rope_spec)

    def _layer_config(self) -> dict[str, Any]:
        return self.rotary_config()

    def _layer_repr(self) -> str:
        return self.rotary_repr()

    def _validated_fields(self) -> dict[str, Any]:
        """The validated fields, ``scaling`` as the spec holds it (hashable), and the spec."""
        arguments = (self.base, self.layout, self.rotary_dim, self.scaling, self.layer_type)
        head_dim, spec = self.rope_spec_for(self.head_dim, *arguments)
        return {
            "rope_spec": spec,
            "head_dim": head_dim,
            "base": spec.base,
            "layout": spec.layout,
            "rotary_dim": spec.rotary_dim,
            "scaling": spec.scaling,
        }

    def rotary_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        config = {
            "head_dim": self.head_dim,
            "base": self.base,
            "layout": self.layout,
            "rotary_dim": self.rotary_dim,
            "scaling": None if self.scaling is None else dict(self.scaling),
            "layer_type": self.layer_type,
        }
        if getattr(self, "trainable_frequencies", False):
            config["trainable_frequencies"] = True
            config["frequency_heads"] = self.frequency_heads
        return config

    def rotary_repr(self) -> str:
        """``head_dim=..., base=..., ...`` for ``repr``: the rope applied (:func:`rope_repr`:
        the effective base, rope type and factors), not only the arguments."""
        parts = rope_repr(self.rope_spec, self.head_dim)
        if getattr(self, "trainable_frequencies", False):
            parts.append("trainable_frequencies=True")
            if self.frequency_heads is not None:
                parts.append(f"frequency_heads={self.frequency_heads}")
        return ", ".join(parts)


# --------------------------------------------------------------------------- relative bias


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
        super().__init__(**kwargs)
        values = self.validate_t5(n_heads, num_buckets, max_distance, bidirectional)
        self.n_heads, self.num_buckets, self.max_distance, self.bidirectional = values

    @staticmethod
    def validate_t5(
        n_heads: Any, num_buckets: Any, max_distance: Any, bidirectional: Any
    ) -> tuple[int, int, int, bool]:
        """Validated ``(n_heads, num_buckets, max_distance, bidirectional)``."""
        heads = positive_int(n_heads, "n_heads", what="attention heads")
        t5_relative_bucket(
            0,
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
        return heads, int(num_buckets), int(max_distance), bool(bidirectional)

    def _bias(
        self, table: Any, query_length: Any, key_length: Any, offset: Any, backend: str
    ) -> Any:
        """:func:`pe_core.t5.t5_relative_bias` with the learned ``table`` and this layer's
        configuration: ``(1, n_heads, query_length, key_length)``."""
        return t5_relative_bias(
            query_length,
            key_length,
            table,
            offset=offset,
            bidirectional=self.bidirectional,
            max_distance=self.max_distance,
            backend=backend,
        )

    def _layer_config(self) -> dict[str, Any]:
        return self.t5_config()

    def _layer_repr(self) -> str:
        return self.t5_repr()

    def _validated_fields(self) -> dict[str, Any]:
        names = ("n_heads", "num_buckets", "max_distance", "bidirectional")
        values = self.validate_t5(*(getattr(self, name) for name in names))
        return dict(zip(names, values, strict=True))

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
        super().__init__(**kwargs)
        values = self.validate_alibi(n_heads, alibi_bias_max, causal)
        self.n_heads, self.alibi_bias_max, self.causal = values

    @staticmethod
    def validate_alibi(
        n_heads: Any, alibi_bias_max: Any, causal: Any
    ) -> tuple[int | None, float, bool]:
        """Validated ``(n_heads, alibi_bias_max, causal)``."""
        heads = None if n_heads is None else positive_int(n_heads, "n_heads", what="heads")
        bias_max = finite_real(alibi_bias_max, "alibi_bias_max", greater_than=0)
        return heads, bias_max, check_flag(causal, "causal")

    @staticmethod
    def _require_heads(n_heads: Any) -> None:
        """Raise unless ``n_heads`` is given (layers called with lengths, not scores)."""
        if n_heads is None:
            raise TypeError("n_heads must be a positive integer (attention heads). Received: None")

    def _bias(
        self, query_length: Any, key_length: Any, n_heads: int | None = None, **kwargs: Any
    ) -> Any:
        """:func:`pe_core.alibi_bias` with this layer's configuration (``n_heads`` the
        layer's by default; ``kwargs`` its ``backend``, ``dtype``, ``like``), with a
        leading batch axis: ``(1, n_heads, query_length, key_length)``."""
        heads = self.n_heads if n_heads is None else n_heads
        assert heads is not None
        bias = alibi_bias(
            query_length,
            key_length,
            heads,
            causal=self.causal,
            alibi_bias_max=self.alibi_bias_max,
            **kwargs,
        )
        return bias[None]

    def _layer_config(self) -> dict[str, Any]:
        return self.alibi_config()

    def _layer_repr(self) -> str:
        return self.alibi_repr()

    def _validated_fields(self) -> dict[str, Any]:
        names = ("n_heads", "alibi_bias_max", "causal")
        values = self.validate_alibi(*(getattr(self, name) for name in names))
        return dict(zip(names, values, strict=True))

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


class FourierFeaturesConfig(LayerConfig):
    """Configuration of the ``FourierFeatures`` layers (a framework-neutral mixin).

    Random Fourier features (:func:`pe_core.fourier_features`) of points with
    ``in_features`` coordinates through a Gaussian ``(in_features, num_frequencies)``
    matrix ``B ~ N(0, scale**2)`` (cycles per unit), drawn with ``seed``.

    Parameters
    ----------
    in_features : int
        Coordinates per point ``k`` (SAM: 2), >= 1.
    num_frequencies : int
        Frequencies ``m`` (the output has ``2m`` features), >= 1.
    scale : float
        The standard deviation of ``B`` (SAM's ``scale``; diffusers'
        ``GaussianFourierProjection(scale)``), a finite number > 0.
    trainable : bool
        ``B`` a trainable parameter (``True``) or a fixed buffer (``False``).
    order : {"sin_cos", "cos_sin"}
        Which half comes first, as for :func:`pe_core.fourier_features`.
    seed : int
        Seed of NumPy's ``default_rng`` that draws ``B`` (the same matrix in every
        framework).

    Examples
    --------
    >>> c = FourierFeaturesConfig(2, 4, scale=10.0)
    >>> c.initial_frequencies().shape, c.fourier_config()["order"]
    ((2, 4), 'sin_cos')
    """

    in_features: int
    num_frequencies: int
    scale: float
    trainable: bool
    order: SinCosOrder
    seed: int

    def __init__(
        self,
        in_features: int,
        num_frequencies: int,
        *,
        scale: float = 1.0,
        trainable: bool = False,
        order: str = "sin_cos",
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_fourier(in_features, num_frequencies, scale, trainable, order, seed)
        (
            self.in_features,
            self.num_frequencies,
            self.scale,
            self.trainable,
            self.order,
            self.seed,
        ) = values

    @staticmethod
    def validate_fourier(
        in_features: Any, num_frequencies: Any, scale: Any, trainable: Any, order: Any, seed: Any
    ) -> tuple[int, int, float, bool, Any, int]:
        """Validated ``(in_features, num_frequencies, scale, trainable, order, seed)``."""
        return (
            positive_int(in_features, "in_features"),
            positive_int(num_frequencies, "num_frequencies"),
            finite_real(scale, "scale", greater_than=0),
            check_flag(trainable, "trainable"),
            choice(order, "order", ORDERS),
            positive_int(seed, "seed", minimum=0),
        )

    def initial_frequencies(self) -> np.ndarray:
        """The float64 ``(in_features, num_frequencies)`` Gaussian matrix ``B``."""
        rng = np.random.default_rng(self.seed)
        return rng.normal(size=(self.in_features, self.num_frequencies)) * self.scale

    def _layer_config(self) -> dict[str, Any]:
        return self.fourier_config()

    def _layer_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.fourier_config().items())

    def _validated_fields(self) -> dict[str, Any]:
        names = ("in_features", "num_frequencies", "scale", "trainable", "order", "seed")
        values = self.validate_fourier(*(getattr(self, name) for name in names))
        return dict(zip(names, values, strict=True))

    def fourier_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {
            "in_features": self.in_features,
            "num_frequencies": self.num_frequencies,
            "scale": self.scale,
            "trainable": self.trainable,
            "order": self.order,
            "seed": self.seed,
        }
