"""RoPE inverse frequencies and the context-extension rules built on them.

Pure NumPy, float64 throughout. The main entry point, :func:`rope_frequencies`,
reads a Hugging Face style ``config.json`` mapping (or a transformers
``PretrainedConfig``, or anything else with ``to_dict()``) and returns
``(inv_freq, attention_factor)`` exactly as the ``_compute_*`` functions of
transformers' ``src/transformers/modeling_rope_utils.py`` define them (the v5
``rope_parameters`` line; see ``docs/rope_scaling.md`` for the formulas, the keys
each ``rope_type`` needs, the legacy keys of GPT-NeoX, GPT-J and Gemma 3 configs,
and the differences between transformers versions).

Two small helpers complete the family: :func:`ntk_aware_base` (static
"NTK-aware" base rescaling) and :func:`xpos_scale` (the xPos per-pair
length-extrapolation scale).

>>> from pe_core.rope_scaling import rope_frequencies
>>> inv_freq, attn = rope_frequencies({"head_dim": 8, "rope_theta": 10000.0})
>>> inv_freq.tolist(), attn
([1.0, 0.1, 0.01, 0.001], 1.0)
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from pe_core import _scaling
from pe_core._modules import module_entries
from pe_core._scaling import _config as c
from pe_core._scaling import _types
from pe_core._scaling._common import _max_positions, _original_max_positions, _real
from pe_core._scaling._config import _TYPE_ALIASES, DEFAULT_THETA  # noqa: F401 (re-exported)
from pe_core._scaling._types import MissingRopeKeyError, RopeScalingType, ScalingInputs
from pe_core.typing import RopeConfig
from pe_core.validation import check_request_size, even_int, positive_int

__all__ = [
    "READ_CONFIG_KEYS",
    "ROPE_TYPES",
    "SCALING_TYPES",
    "MissingRopeKeyError",
    "RopeConfigWarning",
    "RopeScalingType",
    "ScalingInputs",
    "allowed_keys",
    "check_config_keys",
    "check_config_rope",
    "config_mapping",
    "needs_seq_len",
    "ntk_aware_base",
    "rope_config_for_layer",
    "rope_frequencies",
    "rope_summary",
    "scaling_rope_type",
    "xpos_scale",
]


# --------------------------------------------------------------------------- config reading


def config_mapping(config: Any, what: str = "config") -> Mapping[str, Any]:
    """``config`` as a mapping: a mapping as is, else ``config.to_dict()``.

    Accepts a parsed ``config.json``, a transformers ``PretrainedConfig`` or anything
    else with a ``to_dict()`` method returning a mapping.

    >>> class Config:
    ...     def to_dict(self):
    ...         return {"head_dim": 4}
    >>> config_mapping(Config())
    {'head_dim': 4}
    >>> config_mapping([("head_dim", 4)])
    Traceback (most recent call last):
    ...
    TypeError: config must be a mapping (a parsed config.json) or an object with to_dict() (a transformers PretrainedConfig), got list.
    """
    if isinstance(config, Mapping):
        return config
    to_dict = getattr(config, "to_dict", None)
    if callable(to_dict) and not isinstance(config, type):
        out = to_dict()
        if isinstance(out, Mapping):
            return out
        raise TypeError(
            f"{what}.to_dict() must return a mapping, got {type(out).__name__} "
            f"(from {type(config).__name__})."
        )
    raise TypeError(
        f"{what} must be a mapping (a parsed config.json) or an object with to_dict() "
        f"(a transformers PretrainedConfig), got {type(config).__name__}."
    )


def check_config_rope(config: Any) -> None:
    """Check the rope dict(s) of a model config without a head size: each one's
    ``rope_type`` and keys (every layer type's, for per-layer-type configs), raising what
    :func:`rope_frequencies` would raise for them.

    >>> check_config_rope({"rope_scaling": {"rope_type": "linaer", "factor": 2.0}})
    Traceback (most recent call last):
    ...
    ValueError: Unknown rope_type 'linaer' (did you mean 'linear'?). Expected one of: default, dynamic, linear, llama3, longrope, proportional, yarn.
    """
    nested, flat = c._per_layer_type(config_mapping(config))
    for params in [flat] if nested is None else list(nested.values()):
        if params:
            c._checked_rope_type(params)


def rope_config_for_layer(config: Any, layer_type: str) -> dict[str, Any]:
    """A copy of ``config`` with one flat rope dict: the one of ``layer_type``.

    For configs with rope parameters per layer type (transformers v5 nesting, legacy
    Gemma 3 keys): ``rope_frequencies(rope_config_for_layer(config, t)) ==
    rope_frequencies(config, layer_type=t)``. The result has ``rope_parameters`` set
    to that layer type's dict and no ``rope_scaling`` or ``rope_local_base_freq``.

    >>> gemma3 = {"head_dim": 256, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
    ...           "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    >>> rope_config_for_layer(gemma3, "sliding_attention")["rope_parameters"]
    {'rope_type': 'default', 'rope_theta': 10000.0}
    >>> rope_config_for_layer(gemma3, "full_attention")["rope_parameters"]
    {'rope_type': 'linear', 'factor': 8.0}
    """
    config = config_mapping(config)
    if not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a string, got {type(layer_type).__name__}.")
    params, nested = c._select(config, layer_type)
    dropped = {"rope_scaling", "rope_parameters", "rope_local_base_freq"}
    if nested:  # transformers skips a top-level original length for nested rope dicts
        dropped.add("original_max_position_embeddings")
    head_dim = c._layer_head_dim(config, layer_type)
    if head_dim is not None:
        dropped |= {"per_layer_config", "global_head_dim"}
    out = {k: v for k, v in config.items() if k not in dropped}
    if head_dim is not None:
        out["head_dim"] = head_dim
    out["rope_parameters"] = dict(params)
    return out


# --------------------------------------------------------------------------- misspelt keys

#: The top-level keys of a model config that pe_core reads (:func:`rope_frequencies`,
#: :func:`rope_config_for_layer`, :mod:`pe_core.rope_nd`). A key of a config one edit
#: away from one of them (two for keys of 8 characters or more) that is not itself one
#: of them looks like a misspelling: :func:`check_config_keys` warns about it.
READ_CONFIG_KEYS: tuple[str, ...] = tuple(
    "rope_parameters rope_scaling rope_theta partial_rotary_factor max_position_embeddings "
    "original_max_position_embeddings head_dim qk_rope_head_dim hidden_size num_attention_heads "
    "rotary_dim rotary_pct rotary_emb_base n_embd n_head n_positions rope_local_base_freq "
    "layer_types per_layer_config global_head_dim".split()
)


class RopeConfigWarning(UserWarning):
    """A model config holds a key that looks like a misspelling of a key pe_core reads
    (``rope_thetta`` for ``rope_theta``): the key is ignored, the value pe_core reads
    instead is its default or the correctly spelt key's."""


def check_config_keys(config: Any, *, stacklevel: int = 2) -> None:
    """Report the keys of a model config that look like misspellings of keys pe_core reads.

    A key one edit away from a key of :data:`READ_CONFIG_KEYS` (two edits for keys of 8
    characters or more: a letter added, dropped, changed or two swapped) is reported
    with the key it resembles; the many other keys of a real config are not (a few real
    keys that close to a read one, such as ``qk_nope_head_dim``, are known and left
    alone). :func:`rope_frequencies` and :class:`~pe_core.RopeSpec` call it.

    Warns
    -----
    RopeConfigWarning
        For each such key: pe_core ignores it and reads the correctly spelt key (or its
        default) instead.

    Raises
    ------
    ValueError
        A key close to ``rope_type`` in a mapping without ``rope_type`` or ``type``: a rope
        dict whose type key is misspelt (its other keys would be ignored).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     check_config_keys({"head_dim": 64, "rope_thetta": 5e5, "vocab_size": 32000})
    >>> print(caught[0].message)
    Unknown config key 'rope_thetta' (did you mean 'rope_theta'?): pe_core does not read it, so rope_theta takes its default or another key's value. Rename the key, or ignore RopeConfigWarning if the key is meant.
    >>> check_config_keys({"rope_typ": "linear", "factor": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: Unknown key 'rope_typ' (did you mean 'rope_type'?): a rope-parameters dict names its type as 'rope_type' (or 'type'), one of: default, dynamic, linear, llama3, longrope, proportional, yarn.
    """
    config = config_mapping(config)
    typed = "rope_type" in config or "type" in config
    for key in config:
        if not isinstance(key, str):
            continue
        if not typed and c._misspelling_of(key, ("rope_type",)) is not None:
            raise ValueError(
                f"Unknown key {key!r} (did you mean 'rope_type'?): a rope-parameters dict "
                "names its type as 'rope_type' (or 'type'), one of: "
                f"{', '.join(sorted(SCALING_TYPES))}."
            )
        match = c._misspelling_of(key, READ_CONFIG_KEYS)
        if match is not None:
            warnings.warn(
                f"Unknown config key {key!r} (did you mean {match!r}?): pe_core does not read "
                f"it, so {match} takes its default or another key's value. Rename the key, "
                "or ignore RopeConfigWarning if the key is meant.",
                RopeConfigWarning,
                stacklevel=stacklevel + 1,
            )


# --------------------------------------------------------------------------- the types

#: Every ``rope_type`` :func:`rope_frequencies` understands: its function and keys, sorted
#: by name. Each is a module of ``pe_core/_scaling/`` (its name is the type's) defining
#: ``SCALING_TYPE``, a :class:`RopeScalingType`; adding a type is adding one such module
#: (docs/architecture.md). :func:`pe_core.rope.apply_rope`, :mod:`pe_core.rope_nd` and
#: the layers read this table.
SCALING_TYPES: dict[str, RopeScalingType] = _types.SCALING_TYPES


def _discover() -> None:
    """(Re)fill :data:`SCALING_TYPES` from the modules on ``pe_core._scaling.__path__``.

    Every module whose name does not start with ``_`` must define ``SCALING_TYPE``, a
    :class:`RopeScalingType`; it is filed under the module's name. The dict is filled in
    place, sorted by name. A private hook: a test extends the package's ``__path__``
    with a folder of its own, calls this, and calls it again once the folder is gone.
    """
    found = module_entries(_scaling, "SCALING_TYPE", RopeScalingType, "scaling type module")
    SCALING_TYPES.clear()
    SCALING_TYPES.update(sorted(found.items()))


_discover()

#: The built-in ``rope_type`` values, sorted (:data:`SCALING_TYPES` holds the live set).
ROPE_TYPES: tuple[str, ...] = tuple(sorted(SCALING_TYPES))


def allowed_keys(rope_type: str) -> frozenset[str]:
    """The keys a rope dict of ``rope_type`` may hold: the common keys and the type's own.

    >>> sorted(allowed_keys("linear") - allowed_keys("default"))
    ['factor']
    """
    return c._allowed_keys(rope_type)


def scaling_rope_type(scaling: Any) -> str | None:
    """The ``rope_type`` of a rope dict or of a model config's flat rope dict, or ``None``.

    >>> scaling_rope_type({"rope_type": "dynamic", "factor": 2.0})
    'dynamic'
    >>> scaling_rope_type({"head_dim": 8, "rope_scaling": {"type": "linear", "factor": 2.0}})
    'linear'
    """
    if not isinstance(scaling, Mapping):
        return None
    if "rope_type" in scaling or "type" in scaling:
        rope_type = scaling.get("rope_type") or scaling.get("type")
    else:
        raw = scaling.get("rope_scaling") or scaling.get("rope_parameters") or {}
        rope_type = (raw.get("rope_type") or raw.get("type")) if isinstance(raw, Mapping) else None
    return c._alias(rope_type)


def needs_seq_len(scaling: Any) -> bool:
    """Whether ``scaling``'s frequencies depend on the sequence length (``seq_len``).

    Read from :data:`SCALING_TYPES` (``dynamic`` and ``longrope`` among the built-ins).

    >>> needs_seq_len({"rope_type": "dynamic", "factor": 2.0}), needs_seq_len(None)
    (True, False)
    """
    entry = SCALING_TYPES.get(scaling_rope_type(scaling))  # type: ignore[arg-type]
    return entry is not None and entry.needs_seq_len


# --------------------------------------------------------------------------- public API


def rope_frequencies(
    config: RopeConfig, *, seq_len: int | None = None, layer_type: str | None = None
) -> tuple[np.ndarray, float]:
    """RoPE inverse frequencies and attention factor for a Hugging Face style config.

    Parameters
    ----------
    config : Mapping or PretrainedConfig
        A ``config.json``-shaped mapping, or an object with ``to_dict()`` (a
        transformers ``PretrainedConfig``). Read keys: ``head_dim`` (else
        ``qk_rope_head_dim``, else ``hidden_size // num_attention_heads``),
        ``partial_rotary_factor``, ``max_position_embeddings``,
        ``original_max_position_embeddings`` and either ``rope_parameters`` (v5:
        ``rope_type``, ``rope_theta`` and the scaling keys) or the legacy
        ``rope_theta`` + ``rope_scaling`` (``type`` accepted for ``rope_type``;
        ``None`` means plain RoPE). A non-empty ``rope_scaling`` wins over
        ``rope_parameters``; inside the rope dict, ``rope_theta`` and
        ``partial_rotary_factor`` win over the top-level ones; ``rope_theta``
        defaults to 10000. Legacy keys: GPT-NeoX's ``rotary_pct`` and
        ``rotary_emb_base``, GPT-J's ``n_embd``, ``n_head``, ``n_positions`` and
        ``rotary_dim`` (the number of rotated features), Gemma 3's
        ``rope_local_base_freq``. See ``docs/rope_scaling.md`` for the keys per type.
    seq_len : int, optional
        Current sequence length, an integer >= 0. Used by ``dynamic`` (``None``, 0
        or anything shorter than ``max_position_embeddings`` gives the unscaled
        init-time frequencies) and ``longrope`` (long factors iff ``seq_len`` exceeds
        ``original_max_position_embeddings``; ``None`` and 0 give the short factors,
        as transformers' own rope tests ask for them); ignored by the other types.
        This is a pure function: no cache, no state.
    layer_type : str, optional
        The layer type whose rope to use when the config has one per layer type:
        ``rope_parameters`` nested as ``{"full_attention": {...},
        "sliding_attention": {...}}`` (transformers v5, Gemma 3), or a legacy Gemma 3
        config (``rope_local_base_freq``: ``"sliding_attention"`` layers use plain
        RoPE with that base, ``"full_attention"`` layers ``rope_theta`` and
        ``rope_scaling``). Required for such configs; for a config with one rope it
        may name any entry of its ``layer_types``.

    Returns
    -------
    inv_freq : numpy.ndarray
        float64, shape ``(rotary_dim // 2,)`` with
        ``rotary_dim = int(head_dim * partial_rotary_factor)`` (or GPT-J's
        ``rotary_dim``); frequency of the pair ``j`` in radians per position.
        ``proportional`` returns ``head_dim // 2`` entries, zero for the pairs it
        does not rotate.
    attention_factor : float
        Factor transformers multiplies cos/sin by (1.0 except for ``yarn`` and
        ``longrope``).

    Raises
    ------
    MissingRopeKeyError
        A key the config needs is missing (the message names it); both a
        ``KeyError`` and a ``ValueError``.
    ValueError
        Unknown ``rope_type``; a key the rope dict of that type does not use;
        conflicting keys (``rotary_pct`` vs ``partial_rotary_factor``,
        ``rotary_emb_base`` vs ``rope_theta``, ``rotary_dim`` vs the partial factor,
        ``type`` vs ``rope_type``, ...); odd rotary dimension; non-positive,
        subnormal or non-finite numbers; a malformed ``short_factor``/``long_factor``
        (the message names it); per-layer-type rope parameters without a matching
        ``layer_type``.
    TypeError
        ``config`` is neither a mapping nor has ``to_dict()``; its rope dict is not
        a mapping.

    Examples
    --------
    >>> cfg = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    ...        "rope_theta": 500000.0,
    ...        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    ...                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    >>> inv_freq, attn = rope_frequencies(cfg)
    >>> inv_freq.shape, inv_freq.dtype, attn
    ((64,), dtype('float64'), 1.0)
    >>> float(inv_freq[0]), bool(np.isclose(inv_freq[-1], 500000.0 ** (-126 / 128) / 8, rtol=1e-15))
    (1.0, True)

    Pythia (GPT-NeoX) rotates a quarter of each 64-feature head:

    >>> pythia = {"hidden_size": 512, "num_attention_heads": 8, "rotary_pct": 0.25,
    ...           "rotary_emb_base": 10000}
    >>> inv_freq, attn = rope_frequencies(pythia)
    >>> inv_freq.shape, float(inv_freq[2])  # rotary_dim 16: 10000 ** (-4 / 16)
    ((8,), 0.1)
    """
    config = config_mapping(config)
    check_config_keys(config, stacklevel=3)
    if seq_len is not None:
        seq_len = positive_int(seq_len, "seq_len", minimum=0)
    params, nested = c._select(config, layer_type)
    rope_type = c._checked_rope_type(params)

    theta = c._theta(config, params)
    head_dim = c._head_dim(config, layer_type)
    pairs = c._rotary_pairs(config, params, head_dim, rope_type)
    n = max(pairs, head_dim // 2)  # inv_freq and the type's float64 temporaries
    check_request_size(n, "float64", what="rope_frequencies", extra_bytes=64 * n)

    overflow = (
        f"The rope parameters of rope_type {rope_type!r} give frequencies that are not "
        f"finite and > 0 (overflow or underflow): {params!r}, rope_theta={theta!r}."
    )
    try:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            inputs = ScalingInputs(config, params, theta, head_dim, pairs, seq_len, nested)
            inv_freq, attention_factor = SCALING_TYPES[rope_type].compute(inputs)
    except OverflowError:
        raise ValueError(overflow) from None

    rotated = inv_freq[:pairs]
    if not (np.all(np.isfinite(inv_freq)) and np.all(rotated > 0)):
        raise ValueError(overflow)
    return inv_freq, float(attention_factor)


def rope_summary(config: Any, *, layer_type: str | None = None) -> dict[str, Any]:
    """The values the rope of ``config`` is computed from, as :func:`rope_frequencies`
    reads them: what a layer's ``repr`` shows.

    ``rope_type``, ``rope_theta``, ``head_dim`` and ``rotary_dim`` (the rotated
    features), then the type's own keys that the rope dict sets, in the type's order, and
    the context lengths the type reads (``original_max_position_embeddings`` with
    transformers' priorities, ``max_position_embeddings``) where the config gives them.
    Raises what :func:`rope_frequencies` raises for the config's keys.

    >>> rope_summary({"head_dim": 64, "rope_theta": 5e5, "max_position_embeddings": 131072,
    ...               "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    ...                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...                                "original_max_position_embeddings": 8192}})
    {'rope_type': 'llama3', 'rope_theta': 500000.0, 'head_dim': 64, 'rotary_dim': 64, 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}
    """
    config = config_mapping(config)
    params, nested = c._select(config, layer_type)
    rope_type = c._checked_rope_type(params)
    head_dim = c._head_dim(config, layer_type)
    pairs = c._rotary_pairs(config, params, head_dim, rope_type)
    out: dict[str, Any] = {
        "rope_type": rope_type,
        "rope_theta": c._theta(config, params),
        "head_dim": head_dim,
        "rotary_dim": 2 * pairs,
    }
    entry = SCALING_TYPES[rope_type]
    keys = (*entry.required, *entry.optional)
    original = "original_max_position_embeddings"
    out.update((k, params[k]) for k in keys if k != original and params.get(k) is not None)
    # a missing context length is left out: the type does without it (or raises for it
    # when computing)
    with contextlib.suppress(MissingRopeKeyError):
        if original in keys:
            out[original] = _original_max_positions(config, params, rope_type, nested)
        if entry.needs_seq_len:
            out["max_position_embeddings"] = _max_positions(config, rope_type, params)
    return out


def ntk_aware_base(theta: float, factor: float, rotary_dim: int) -> float:
    """Static NTK-aware RoPE base: ``theta * factor ** (rotary_dim / (rotary_dim - 2))``.

    Feeding the result to plain RoPE stretches the lowest frequency by exactly
    ``factor`` while leaving the highest one (pair 0) unchanged.

    Parameters
    ----------
    theta : float
        Original base (``rope_theta``), > 0.
    factor : float
        Context extension factor, > 0.
    rotary_dim : int
        Even number of rotated features, > 2.

    Returns
    -------
    float
        The rescaled base.

    Examples
    --------
    >>> ntk_aware_base(10000.0, 4.0, 4)
    160000.0
    """
    theta = _real(theta, "theta", minimum=0)
    factor = _real(factor, "factor", minimum=0)
    dim = even_int(rotary_dim, "rotary_dim")
    if dim <= 2:
        raise ValueError(f"rotary_dim must be > 2 for NTK-aware scaling, got {dim}.")
    return theta * factor ** (dim / (dim - 2))


def xpos_scale(
    positions: Any, rotary_dim: int, *, scale_base: float = 512.0, gamma: float = 0.4
) -> np.ndarray:
    """xPos per-pair scale ``zeta_j ** (positions / scale_base)``.

    ``zeta_j = (2j + gamma * r) / ((1 + gamma) * r)`` for ``j = 0 .. r/2 - 1``
    (``r = rotary_dim``), as in the xPos paper (Sun et al. 2022), torchscale's
    ``XPOS`` and lucidrains' rotary-embedding-torch. Queries are multiplied by
    the scale and keys by its inverse, so ``q_m . k_n`` carries
    ``zeta_j ** ((m - n) / scale_base)``.

    ``positions`` are used as given, with no centring. The reference
    implementations centre them first: rotary-embedding-torch uses
    ``t - len(t) // 2``; torchscale uses ``arange(-(L // 2 + L % 2), L // 2)``,
    which is ``i - ceil(L / 2)``. The two differ by one when ``L`` is odd. To
    reproduce one of them, pass its centred positions. The centring shift
    cancels in ``m - n``.

    Parameters
    ----------
    positions : array_like
        Token positions (any shape, int or float).
    rotary_dim : int
        Even number of rotated features ``r``.
    scale_base : float, default 512.0
        Divisor of the positions, > 0.
    gamma : float, default 0.4
        xPos offset, > 0.

    Returns
    -------
    numpy.ndarray
        float64, shape ``positions.shape + (rotary_dim // 2,)``. Repeat each
        entry twice to get a per-feature scale for the interleaved layout, or
        tile it twice for the half layout.

    Examples
    --------
    >>> s = xpos_scale([0, 512], 4)
    >>> s.shape, s[0].tolist()
    ((2, 2), [1.0, 1.0])
    >>> [round(v, 6) for v in s[1].tolist()]
    [0.285714, 0.642857]
    """
    dim = even_int(rotary_dim, "rotary_dim")
    scale_base = _real(scale_base, "scale_base", minimum=0)
    gamma = _real(gamma, "gamma", minimum=0)
    n = math.prod(np.shape(positions)) * (dim // 2)  # the output and a float64 temporary
    check_request_size(n, "float64", what="xpos_scale", extra_bytes=8 * n)
    pos = c._xpos_positions(positions)
    zeta = (np.arange(0, dim, 2, dtype=np.float64) + gamma * dim) / ((1 + gamma) * dim)
    return zeta ** (pos[..., None] / scale_base)
