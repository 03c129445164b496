"""``RopeSpec``: the configuration of a rotary embedding as frozen, validated data.

A :class:`RopeSpec` holds what :func:`pe_core.rope.apply_rope` needs besides the
arrays: ``base``, ``layout``, ``rotary_dim``, the context-extension ``scaling`` (held
as a :class:`FrozenMapping`, so the spec is hashable and can key caches or be a static
argument under ``jax.jit``) and the ``layer_type`` that picks a layer's rope from a
model config. It validates everything it can without the head size in
``__post_init__``; :meth:`RopeSpec.constants` builds (and caches) the frequencies for
one head size, raising what the scaling rules reject.

>>> import numpy as np
>>> from pe_core import RopeSpec, apply_rope
>>> spec = RopeSpec(base=10000.0, scaling={"rope_type": "linear", "factor": 2.0})
>>> inv_freq, attention_factor = spec.constants(head_dim=4)
>>> inv_freq, attention_factor
((0.5, 0.005), 1.0)
>>> x = np.ones((3, 4), dtype=np.float32)
>>> bool(np.array_equal(apply_rope(x, range(3), spec=spec),
...                     apply_rope(x, range(3), scaling={"rope_type": "linear", "factor": 2.0})))
True
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from pe_core._scaling._config import _checked_rope_type
from pe_core.rope_layout import LAYOUTS, ROTARY_FEATURES
from pe_core.rope_scaling import (
    check_config_keys,
    check_config_rope,
    config_mapping,
    needs_seq_len,
    rope_config_for_layer,
    rope_frequencies,
    rope_summary,
)
from pe_core.typing import RopeConfig, RopeLayout, RotaryFeatures
from pe_core.validation import choice, even_int, finite_real, optional_str, positive_int

__all__ = ["FrozenMapping", "RopeSpec", "freeze", "rope_constants", "thaw"]


class FrozenMapping(Mapping[str, Any]):
    """A read-only, hashable mapping (nested mappings frozen, sequences as tuples).

    Equal to a ``dict`` with the same items. Build one with :func:`freeze`.

    >>> frozen = freeze({"rope_type": "longrope", "short_factor": [1.0, 2.0]})
    >>> frozen["short_factor"], hash(frozen) == hash(freeze(dict(frozen)))
    ((1.0, 2.0), True)
    """

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)
        self._hash = hash(frozenset(self._items.items()))  # once: it keys caches per call

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMapping):  # the cache lookups' case: compare in C
            return self._hash == other._hash and self._items == other._items
        return super().__eq__(other)

    def __repr__(self) -> str:
        return repr(self._items)


def freeze(obj: Any) -> Any:
    """A hashable copy of a config: mappings become :class:`FrozenMapping` (string
    keys), lists, tuples and NumPy arrays tuples, NumPy scalars Python scalars.

    >>> freeze({"a": [1, {"b": 2}]})
    {'a': (1, {'b': 2})}
    """
    if isinstance(obj, FrozenMapping):
        return obj
    if isinstance(obj, Mapping):
        return FrozenMapping({str(k): freeze(v) for k, v in obj.items()})
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(v) for v in obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def thaw(obj: Any) -> Any:
    """The plain (JSON-ready) copy of a frozen config: ``dict`` and ``list``.

    >>> thaw(freeze({"a": (1, 2)}))
    {'a': [1, 2]}
    """
    if isinstance(obj, Mapping):
        return {k: thaw(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [thaw(v) for v in obj]
    return obj


def scaling_for_layer(scaling: Any, layer_type: str | None) -> Any:
    """``scaling`` read from a config object, and reduced to ``layer_type``'s rope."""
    if scaling is None and layer_type is not None:
        raise ValueError(
            f"layer_type={layer_type!r} selects a layer's rope from a model config given as "
            "scaling=, but scaling is None."
        )
    if not isinstance(scaling, Mapping):
        if not callable(getattr(scaling, "to_dict", None)):
            return scaling  # refused later with the usual message
        scaling = config_mapping(scaling, "scaling")
    if layer_type is None:
        return scaling
    if "rope_type" in scaling or "type" in scaling:
        raise ValueError(
            f"layer_type={layer_type!r} selects a layer's rope from a model config, but "
            "scaling is a rope-parameters dict (it has a 'rope_type'/'type' key): pass the "
            "whole config, or drop layer_type."
        )
    return rope_config_for_layer(scaling, layer_type)


@dataclasses.dataclass(frozen=True)
class RopeSpec:
    """Rotary embedding configuration: frozen, validated, hashable.

    Parameters
    ----------
    base : float
        ``rope_theta``, a finite number > 1 (a ``rope_theta`` in ``scaling`` wins).
    layout : {"half", "interleaved"}
        Pair layout (see :mod:`pe_core.rope_layout`).
    rotary_dim : int, optional
        Rotated features per head (even, >= 2); all of them by default.
    scaling : Mapping, optional
        A rope-parameters dict (with ``rope_type``) or a whole model config, as
        :func:`pe_core.rope.apply_rope` takes it; a transformers ``PretrainedConfig`` is
        read as its ``to_dict()``. Held as a :class:`FrozenMapping`.
    layer_type : str, optional
        With a model config that has rope parameters per layer type: the layer type
        whose rope this spec applies.
    rotary_features : {"first", "last"}
        Which ``rotary_dim`` features of a head are rotated: the first (GPT-NeoX, Phi)
        or the last (DeepSeek-V4's ``[nope | rope]`` heads); see
        :data:`~pe_core.rope_layout.ROTARY_FEATURES`.

    Raises
    ------
    TypeError
        A value of the wrong type (``base`` not a number, ``scaling`` not a mapping, ...).
    ValueError
        ``base`` <= 1 or not finite, an unknown ``layout``, an odd ``rotary_dim``, an
        unknown ``rope_type`` or key in a rope dict, a ``layer_type`` that the config
        does not define.

    Examples
    --------
    >>> spec = RopeSpec(layout="interleaved", rotary_dim=32)
    >>> spec == RopeSpec(layout="interleaved", rotary_dim=32), spec.needs_seq_len
    (True, False)
    >>> RopeSpec(scaling={"rope_type": "linear", "factr": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: Unknown key 'factr' (did you mean 'factor'?) in the rope parameters of rope_type 'linear' (unknown keys: ['factr']). Expected keys: factor, interleaved, max_position_embeddings, mrope_interleaved, mrope_section, partial_rotary_factor, rope_theta, rope_type, type.
    """

    base: float = 10000.0
    layout: RopeLayout = "half"
    rotary_dim: int | None = None
    scaling: RopeConfig | None = None
    layer_type: str | None = None
    rotary_features: RotaryFeatures = "first"
    #: ``scaling`` reduced to ``layer_type``'s rope (what the kernels read).
    resolved_scaling: Mapping[str, Any] | None = dataclasses.field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("base", finite_real(self.base, "base (rope_theta)", greater_than=1))
        set_("layout", choice(self.layout, "layout", LAYOUTS))
        set_("rotary_features", choice(self.rotary_features, "rotary_features", ROTARY_FEATURES))
        if self.rotary_dim is not None:
            set_("rotary_dim", even_int(self.rotary_dim, "rotary_dim", minimum=2))
        layer_type = optional_str(self.layer_type, "layer_type")
        scaling = self.scaling
        if scaling is not None:
            scaling = config_mapping(scaling, "scaling")
            if "rope_type" in scaling or "type" in scaling:
                # the type and its keys, now (the rest needs head_dim: constants())
                _checked_rope_type(scaling)
            else:  # a model config: its keys and its rope dicts, now
                check_config_keys(scaling, stacklevel=4)
                check_config_rope(scaling)
            scaling = freeze(scaling)
        set_("scaling", scaling)
        resolved = scaling if layer_type is None else freeze(scaling_for_layer(scaling, layer_type))
        set_("resolved_scaling", resolved)

    @property
    def needs_seq_len(self) -> bool:
        """Whether the frequencies depend on the sequence length (``dynamic``, ``longrope``)."""
        return needs_seq_len(self.resolved_scaling)

    def constants(
        self, head_dim: int, seq_len: int | None = None
    ) -> tuple[tuple[float, ...], float]:
        """``(inv_freq, attention_factor)`` for heads of ``head_dim`` features (cached).

        ``inv_freq`` holds one frequency per rotated pair (radians per position), as
        Python floats; ``seq_len`` is read by the types that need it (``None``: their
        init-time frequencies). Raises what :func:`~pe_core.rope_scaling.rope_frequencies`
        rejects, and ``ValueError`` for an odd ``head_dim`` or a ``rotary_dim`` above it.

        >>> RopeSpec(rotary_dim=4).constants(8)
        ((1.0, 0.01), 1.0)
        """
        head_dim = even_int(head_dim, "head_dim", minimum=2)
        if self.rotary_dim is not None and self.rotary_dim > head_dim:
            raise ValueError(
                f"rotary_dim must be even and at most head_dim={head_dim}. "
                f"Received: {self.rotary_dim}"
            )
        if seq_len is not None:  # 0 as None: transformers' meaning (short longrope factors)
            seq_len = positive_int(seq_len, "seq_len", minimum=0)
        return rope_constants(self.resolved_scaling, self.base, head_dim, self.rotary_dim, seq_len)

    def summary(self, head_dim: int) -> dict[str, Any]:
        """The values this spec's rope is computed from for heads of ``head_dim`` features:
        :func:`~pe_core.rope_scaling.rope_summary` of the config it stands for (a
        ``rope_theta`` of ``scaling`` is the one used, not ``base``), and the
        ``attention_factor`` cos and sin are multiplied by. Raises what :meth:`constants`
        raises.

        >>> RopeSpec(scaling={"rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}}).summary(8)
        {'rope_type': 'linear', 'rope_theta': 500000.0, 'head_dim': 8, 'rotary_dim': 8, 'factor': 2.0, 'attention_factor': 1.0}
        """
        inv_freq, attention_factor = self.constants(head_dim)
        dim = head_dim if self.rotary_dim is None else self.rotary_dim
        out = rope_summary(config_for(self.resolved_scaling, self.base, head_dim, dim))
        out["head_dim"], out["rotary_dim"] = int(head_dim), 2 * len(inv_freq)
        out["attention_factor"] = attention_factor
        return out

    def apply_rope_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pe_core.rope.apply_rope` this spec stands for
        (``scaling`` as plain data)."""
        names = ("base", "layout", "rotary_dim", "scaling", "layer_type", "rotary_features")
        return {name: thaw(getattr(self, name)) for name in names}


def rope_constants(
    scaling: Any, base: float, head_dim: int, rotary_dim: int | None, seq_len: int | None
) -> tuple[tuple[float, ...], float]:
    """``(inv_freq, attention_factor)`` as Python floats (cached): the one way every RoPE
    route reads its frequencies (``scaling`` a rope dict, a model config or ``None``;
    :func:`~pe_core.rope_scaling.rope_frequencies` computes them).

    A plain function (not the cache wrapper) so torch.compile can embed its result;
    ``scaling`` is frozen here, on the host (compilers never trace the freezing).
    """
    return _cached_rope_constants(freeze(scaling), base, head_dim, rotary_dim, seq_len)


_PER_HEAD_KEYS = tuple(
    "head_dim qk_rope_head_dim hidden_size num_attention_heads n_embd n_head".split()
)


@functools.lru_cache(maxsize=256)
def _cached_rope_constants(
    scaling: Any, base: float, head_dim: int, rotary_dim: int | None, seq_len: int | None
) -> tuple[tuple[float, ...], float]:
    dim = head_dim if rotary_dim is None else rotary_dim
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(
            "scaling must be a mapping: a rope-parameters dict with 'rope_type', or a model "
            f"config. Received: {type(scaling).__name__}"
        )
    inv_freq, attention_factor = rope_frequencies(
        config_for(scaling, base, head_dim, dim), seq_len=seq_len
    )
    got = 2 * len(inv_freq)
    if rotary_dim is not None and got != rotary_dim:
        raise ValueError(
            f"scaling gives a rotary dimension of {got} (from its head_dim and "
            f"partial_rotary_factor) but rotary_dim={rotary_dim}. Drop one of them or make "
            "them agree."
        )
    if got > head_dim:
        raise ValueError(
            f"scaling gives a rotary dimension of {got}, larger than head_dim={head_dim} "
            "(the last axis of x)."
        )
    return tuple(float(v) for v in inv_freq), float(attention_factor)


def config_for(scaling: Mapping[str, Any] | None, base: float, head_dim: int, dim: int) -> dict:
    """The model config :func:`rope_frequencies` reads for a rope dict, a config or ``None``."""
    if scaling is None:
        return {"head_dim": dim, "rope_theta": base}
    if "rope_type" in scaling or "type" in scaling:
        params = dict(scaling)
        config: dict[str, Any] = {"rope_theta": base, "rope_parameters": params}
        if "max_position_embeddings" in params:
            config["max_position_embeddings"] = params.pop("max_position_embeddings")
        has_partial = params.get("partial_rotary_factor") is not None
        config["head_dim"] = head_dim if has_partial else dim
        return config
    config = dict(scaling)
    if not any(config.get(key) is not None for key in _PER_HEAD_KEYS):
        config["head_dim"] = head_dim
    if config.get("rope_theta") is None and config.get("rotary_emb_base") is None:
        config["rope_theta"] = base
    return config
