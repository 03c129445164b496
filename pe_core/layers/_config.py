"""The framework-neutral configuration of the layers: mixins, and specs as data.

Each layer class of :mod:`pe_core.layers.torch`, :mod:`~pe_core.layers.flax` and
:mod:`~pe_core.layers.keras` inherits one mixin of this module (einops' layer design):
its ``__init__`` is the layer's constructor, written once for every framework; it
validates the arguments, stores them and gives them back as JSON-ready data
(``_layer_config``) and for ``repr`` (``_layer_repr``), so every framework takes and
refuses the same arguments with the same messages. A framework class adds only what
its framework needs: a ``_setup`` hook run once the configuration is stored (its
sub-layers and weights), and its call. Flax linen's dataclass fields are made from
the same ``__init__`` (:func:`config_parameters`). The mixins also hold what a layer
computes with :mod:`pe_core` whatever the framework (the host tables of the
``max_len`` cache, the calls of :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope` with the layer's configuration). The N-D mixins are in
:mod:`pe_core.layers._config_nd` (with Fourier features'), the relative-bias ones in
:mod:`pe_core.layers._config_index`.

>>> spec_to_config(Spec(base=500.0))["base"]
500.0
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import fields
from typing import Any

import numpy as np

from pe_core._kernel.inputs import working_dtype
from pe_core._schedule import check_d
from pe_core.encoding import encode
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
from pe_core.timestep import timestep_embedding
from pe_core.typing import RopeConfig, RopeLayout
from pe_core.validation import positive_int

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


def layer_repr(layer: Any) -> str:
    """``Name(key=value, ...)``: the class name and the configuration's ``repr`` text.

    >>> layer_repr(TimestepsConfig(320, True, 0))
    'TimestepsConfig(num_channels=320, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1)'
    """
    try:
        text = layer._layer_repr()
    except AttributeError:  # asked for while the constructor runs (framework messages)
        text = "..."
    return f"{type(layer).__name__}({text})"


def config_parameters(cls: type) -> tuple[inspect.Parameter, ...]:
    """The parameters of the configuration ``__init__`` that ``cls`` inherits (the first
    one in its MRO defined in the neutral modules), without ``self`` and ``**kwargs``.

    >>> [p.name for p in config_parameters(TimestepsConfig)][:3]
    ['num_channels', 'flip_sin_to_cos', 'downscale_freq_shift']
    """
    config = next(
        c for c in cls.__mro__ if c.__module__.startswith(__name__) and "__init__" in vars(c)
    )
    parameters = inspect.signature(config).parameters.values()
    return tuple(p for p in parameters if p.kind is not p.VAR_KEYWORD)


def setup_keywords(cls: type) -> tuple[inspect.Parameter, ...]:
    """The keyword-only parameters of ``cls._setup``: a framework's constructor keywords
    beyond the configuration's (NNX's ``rngs``)."""
    parameters = inspect.signature(cls._setup).parameters.values()  # type: ignore[attr-defined]
    return tuple(p for p in parameters if p.kind is p.KEYWORD_ONLY)


class InitSignature:
    """A layer class's ``__signature__``: its constructor's parameters.

    Those of its ``__init__`` without ``self``; where that is the configuration's, whose
    ``**kwargs`` only feed the framework's base class, the keyword-only parameters of
    the class's ``_setup`` (NNX's ``rngs``) replace them when the base takes none
    (``keeps_kwargs=False``). So :func:`inspect.signature` and IDEs show the arguments
    (and not NNX's metaclass ``(*args, **kwargs)``); instances have none (their
    ``__call__`` is theirs).

    >>> class Layer(TimestepsConfig):
    ...     __signature__ = InitSignature()
    >>> list(inspect.signature(Layer).parameters)
    ['num_channels', 'flip_sin_to_cos', 'downscale_freq_shift', 'scale']
    """

    def __get__(self, obj: object, owner: type) -> inspect.Signature:
        if obj is not None:
            raise AttributeError("__signature__")
        signature = inspect.signature(owner.__init__)  # type: ignore[misc]
        parameters = list(signature.parameters.values())[1:]
        if parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD:
            parameters = parameters[:-1] + list(setup_keywords(owner))
        return signature.replace(parameters=parameters)


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


# --------------------------------------------------------------------------- mixins


class LayerConfig:
    """The face every mixin shows the framework modules.

    A mixin's ``__init__`` declares the constructor (typed, with its defaults) and hands
    its ``locals()`` to :meth:`_configure`; its ``_validate`` returns the validated
    values by name. The framework layer inherits both and overrides :meth:`_setup`.
    """

    def _configure(self, arguments: dict[str, Any]) -> None:
        """Initialise the framework's base class with ``arguments["kwargs"]`` (less the
        keyword-only parameters of :meth:`_setup`, NNX's ``rngs``), then store the
        validated arguments, then run :meth:`_setup` (with those keywords)."""
        kwargs = dict(arguments["kwargs"])
        setup = {p.name: kwargs.pop(p.name) for p in setup_keywords(type(self)) if p.name in kwargs}
        super().__init__(**kwargs)
        values = {k: v for k, v in arguments.items() if k not in ("self", "kwargs")}
        for name, value in self._validate(**values).items():
            setattr(self, name, value)
        self._setup(**setup)

    def _setup(self) -> None:
        """What a framework layer builds from its stored configuration (nothing here)."""

    @staticmethod
    def _validate(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _frozen(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` as Flax keeps them (hashable); see the rotary mixin."""
        return values

    def _layer_config(self) -> dict[str, Any]:
        """The constructor arguments as JSON-ready data."""
        return {p.name: getattr(self, p.name) for p in config_parameters(type(self))}

    def _layer_repr(self) -> str:
        """``key=value, ...`` for ``repr``."""
        return ", ".join(f"{k}={v!r}" for k, v in self._layer_config().items())

    def _set_parts(self, *names: str) -> list[str]:
        """``name=value`` for ``repr`` of those of ``names`` that are set (not ``None`` or 0)."""
        return [f"{n}={getattr(self, n)!r}" for n in names if getattr(self, n) not in (None, 0)]


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
        self._configure(locals())

    @staticmethod
    def _validate(d_model: Any, spec: Any, dropout: Any, max_len: Any) -> dict[str, Any]:
        """The validated arguments; raises naming a bad value."""
        resolved = spec_from_config(spec)
        d = positive_int(d_model, "d_model", what="the number of features")
        check_d(d, resolved)
        return {
            "d_model": d,
            "spec": resolved,
            "dropout": check_dropout(dropout),
            "max_len": check_max_len(max_len),
        }

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
        :func:`pe_core.encode` at the working dtype (float16/bfloat16 outputs get the
        float32 encoding rounded once, as in traced code)."""
        rows = None if dtype_name == "float64" else self.cache_rows(offset, length)
        if rows is not None:
            return rows
        return self._encode(range(offset, offset + length), working_dtype(dtype_name))

    def _encode(self, positions: Any, dtype: Any, **kwargs: Any) -> Any:
        """:func:`pe_core.encode` of ``positions`` with this layer's ``d_model`` and spec."""
        return encode(positions, self.d_model, spec=self.spec, dtype=dtype, **kwargs)

    def _layer_config(self) -> dict[str, Any]:
        return {**super()._layer_config(), "spec": spec_to_config(self.spec)}

    sinusoidal_config = _layer_config

    def _layer_repr(self) -> str:
        parts = [f"d_model={self.d_model}", spec_repr(self.spec)]
        return ", ".join(parts + self._set_parts("dropout", "max_len"))


class QueryKeyConfig(LayerConfig):
    """What the rotary mixins share: the check of queries and keys ``(..., seq, head_dim)``."""

    head_dim: int

    def _check_query_key(
        self, *shapes: tuple[int | None, ...], names: str = "q and k", known_seq: bool = False
    ) -> None:
        """Raise unless each shape is ``(..., seq, head_dim)`` (with a known ``seq`` when
        ``known_seq``), naming the first that is not."""
        for shape in shapes:
            check_query_key(shape, self.head_dim, names, known_seq=known_seq)


class RotaryEmbeddingConfig(QueryKeyConfig):
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
        layout: RopeLayout = "half",
        rotary_dim: int | None = None,
        scaling: RopeConfig | None = None,
        layer_type: str | None = None,
        trainable_frequencies: bool = False,
        frequency_heads: int | None = None,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(
        head_dim: Any, trainable_frequencies: Any = False, frequency_heads: Any = None, **rope: Any
    ) -> dict[str, Any]:
        """The validated arguments (``scaling`` as plain data) and ``rope_spec``: the
        :class:`~pe_core.rope_spec.RopeSpec` of the rope arguments, with its frequencies
        built once for ``head_dim`` (so a bad ``head_dim`` or ``scaling`` raises now, not
        at the first call)."""
        check_scaling_type(rope["scaling"])
        spec = RopeSpec(**rope)
        spec.constants(head_dim)  # head_dim an even int, rotary_dim fits, scaling computes
        trainable_frequencies = check_flag(trainable_frequencies, "trainable_frequencies")
        if frequency_heads is not None:
            if not trainable_frequencies:
                raise ValueError(
                    "frequency_heads applies to trainable frequencies only: pass "
                    "trainable_frequencies=True."
                )
            frequency_heads = positive_int(frequency_heads, "frequency_heads")
        return {
            "head_dim": int(head_dim),
            "rope_spec": spec,
            **{name: getattr(spec, name) for name in ("base", "layout", "rotary_dim")},
            "scaling": None if spec.scaling is None else thaw(spec.scaling),
            "layer_type": spec.layer_type,
            "trainable_frequencies": trainable_frequencies,
            "frequency_heads": frequency_heads,
        }

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

    def check_input_features(self, n_features: int) -> None:
        """Raise ``ValueError`` naming both sizes unless ``n_features == head_dim``."""
        check_features(n_features, self.head_dim, "head_dim")

    @staticmethod
    def _known_positions(offset: Any, length: Any) -> range | None:
        """``range(offset, offset + length)`` when both are Python ints (known on the host:
        exact cos/sin there), else ``None`` (compute positions in the framework)."""
        if isinstance(offset, int) and isinstance(length, int):
            return range(offset, offset + length)
        return None

    def _rotate(self, x: Any, positions: Any) -> Any:
        """:func:`~pe_core.rope.apply_rope` of ``x`` with this layer's configuration (at
        its trainable ``frequencies`` with ``trainable_frequencies``)."""
        if getattr(self, "trainable_frequencies", False):
            frequencies = self._frequencies()
            return apply_rope(x, positions, frequencies=frequencies, layout=self.layout)
        return apply_rope(x, positions, spec=self.rope_spec)

    def _frequencies(self) -> Any:
        """The trainable frequencies as an array of the framework (its weight's value)."""
        raise NotImplementedError

    def _frozen(self, values: dict[str, Any]) -> dict[str, Any]:
        return {**values, "scaling": values["rope_spec"].scaling}

    def _layer_config(self) -> dict[str, Any]:
        config = super()._layer_config()
        config["scaling"] = None if self.scaling is None else dict(self.scaling)
        if not config["trainable_frequencies"]:
            del config["trainable_frequencies"], config["frequency_heads"]
        return config

    rotary_config = _layer_config

    def _layer_repr(self) -> str:
        """The rope applied (:func:`rope_repr`: the effective base, rope type and
        factors), not only the arguments."""
        parts = rope_repr(self.rope_spec, self.head_dim)
        if getattr(self, "trainable_frequencies", False):
            parts += self._set_parts("trainable_frequencies", "frequency_heads")
        return ", ".join(parts)


class TimestepsConfig(LayerConfig):
    """Configuration of the ``Timesteps`` layers (a framework-neutral mixin): the
    constructor of ``diffusers.models.embeddings.Timesteps``, refused at construction
    when :func:`pe_core.timestep_embedding` would refuse it.

    Parameters
    ----------
    num_channels : int
        ``embedding_dim`` (>= 2).
    flip_sin_to_cos : bool
        ``[cos | sin]`` instead of ``[sin | cos]``.
    downscale_freq_shift : float
        As for :func:`~pe_core.timestep_embedding`.
    scale : float
        Multiplies every angle (1000 in QwenImage's and AuraFlow's time embedders).

    Examples
    --------
    >>> TimestepsConfig(320, True, 0)._layer_repr()
    'num_channels=320, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1'
    """

    num_channels: int
    flip_sin_to_cos: bool
    downscale_freq_shift: float
    scale: float

    def __init__(
        self,
        num_channels: int,
        flip_sin_to_cos: bool,
        downscale_freq_shift: float,
        scale: float = 1,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(num_channels: Any, **options: Any) -> dict[str, Any]:
        """The arguments as given, once one small embedding accepts them."""
        timestep_embedding(0, num_channels, **options)
        return {"num_channels": num_channels, **options}

    def _layer_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._layer_config().items())

    def _timesteps(self, timesteps: Any, backend: str | None = None) -> Any:
        """:func:`pe_core.timestep_embedding` of ``timesteps`` with this configuration."""
        options = self._layer_config()
        return timestep_embedding(
            timesteps, options.pop("num_channels"), backend=backend, **options
        )
