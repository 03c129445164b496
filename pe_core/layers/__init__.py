"""Framework layers: the framework-neutral configuration they share.

The layers themselves live in one module per framework, each imported only when
asked for:

* :mod:`pe_core.layers.torch`: ``torch.nn.Module`` layers;
* :mod:`pe_core.layers.flax`: ``flax.nnx.Module`` and ``flax.linen.Module`` layers;
* :mod:`pe_core.layers.keras`: Keras 3 layers (JAX, TensorFlow and PyTorch backends).

Each offers the same two layers, thin wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`, so a model gives the same numbers in every framework:

* ``SinusoidalEncoding(d_model, *, spec=None, dropout=0.0, max_len=None)`` adds the
  encoding of positions ``offset, offset + 1, ...`` to ``(batch, seq, d_model)`` inputs;
* ``RotaryEmbedding(head_dim, *, base=10000.0, layout="half", rotary_dim=None,
  scaling=None)`` rotates queries and keys ``(..., seq, head_dim)``.

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
from pe_core.spec import Spec

__all__ = [
    "MIN_BUCKET",
    "ROPE_LAYOUTS",
    "RotaryEmbeddingConfig",
    "SinusoidalEncodingConfig",
    "cached_table",
    "check_dropout",
    "check_features",
    "check_max_len",
    "check_rope_arguments",
    "per_example_shape",
    "sequence_bucket",
    "spec_from_config",
    "spec_to_config",
]

#: The smallest bucket of :func:`sequence_bucket`.
MIN_BUCKET = 16

#: The pair layouts RoPE layers accept (see :mod:`pe_core.rope_layout`).
ROPE_LAYOUTS: tuple[str, ...] = ("half", "interleaved")


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
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer ({what}). Received: {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer ({what}). Received: {value!r}")
    return int(value)


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
    head_dim: int, base: float, layout: str, rotary_dim: int | None, scaling: Any
) -> None:
    """Raise now what :func:`pe_core.rope.apply_rope` would raise at call time.

    Rotates one NumPy row at position 0 with these arguments (rope types that depend on
    the sequence length are checked with a length of 1).
    """
    from pe_core.rope import apply_rope

    row = np.zeros((1, head_dim), dtype=np.float32)
    apply_rope(row, 0, base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling)


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
        :func:`pe_core.rope.apply_rope` unchanged and checked at construction.

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

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        values = self.validate_rotary(head_dim, base, layout, rotary_dim, scaling)
        self.head_dim, self.base, self.layout, self.rotary_dim, self.scaling = values

    @staticmethod
    def validate_rotary(
        head_dim: object, base: object, layout: object, rotary_dim: object, scaling: object
    ) -> tuple[int, float, str, int | None, Any]:
        """Validated ``(head_dim, base, layout, rotary_dim, scaling)``."""
        head_dim = _check_positive_int(head_dim, "head_dim", "features per head")
        if head_dim % 2:
            raise ValueError(
                f"head_dim must be even: RoPE rotates pairs of features. Received: {head_dim}"
            )
        if (
            isinstance(base, bool)
            or not isinstance(base, numbers.Real)
            or not (math.isfinite(float(base)) and float(base) > 1)
        ):
            raise ValueError(f"base (rope_theta) must be a finite number > 1. Received: {base!r}")
        if layout not in ROPE_LAYOUTS:
            raise ValueError(
                f"Unknown layout {layout!r}. Expected one of: {', '.join(ROPE_LAYOUTS)}."
            )
        if rotary_dim is not None:
            rotary_dim = _check_positive_int(rotary_dim, "rotary_dim", "features rotated per head")
            if rotary_dim % 2 or rotary_dim > head_dim:
                raise ValueError(
                    f"rotary_dim must be even and at most head_dim={head_dim}. "
                    f"Received: {rotary_dim}"
                )
        if scaling is not None:
            if not isinstance(scaling, Mapping):
                raise TypeError(
                    "scaling must be None or a dict (rope parameters such as "
                    "{'rope_type': 'linear', 'factor': 2.0}, or a model config). "
                    f"Received: {scaling!r}"
                )
            scaling = dict(scaling)
        check_rope_arguments(head_dim, float(base), str(layout), rotary_dim, scaling)
        return head_dim, float(base), str(layout), rotary_dim, scaling

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
        }

    def rotary_repr(self) -> str:
        """``head_dim=..., base=..., ...`` for ``repr``."""
        parts = [f"head_dim={self.head_dim}", f"base={self.base:g}", f"layout={self.layout!r}"]
        if self.rotary_dim is not None:
            parts.append(f"rotary_dim={self.rotary_dim}")
        if self.scaling is not None:
            parts.append(f"scaling={self.scaling!r}")
        return ", ".join(parts)
