"""How :mod:`pe_core.rope_scaling` reads a model config: its rope dict(s), head size,
rotated pairs and ``rope_theta``, and the misspelt keys it reports.

Private: the faces of :mod:`pe_core.rope_scaling` validate and delegate here.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from pe_core._scaling._common import _real, _require, _top
from pe_core._scaling._types import SCALING_TYPES, MissingRopeKeyError
from pe_core.validation import even_int, positive_int

#: Keys every rope dict may hold. ``max_position_embeddings`` may sit in the rope dict
#: (as :func:`pe_core.rope.apply_rope` takes it) or in the config. The M-RoPE keys (Qwen2-VL ``mrope_section``, Qwen3-VL
#: ``mrope_interleaved``, Qwen3-Omni ``interleaved``) do not change the frequencies; they
#: are read by :func:`pe_core.rope_nd.rope_sections`.
_COMMON_KEYS = tuple(
    "rope_type type rope_theta partial_rotary_factor max_position_embeddings mrope_section "
    "mrope_interleaved interleaved".split()
)


#: Other names of a ``rope_type``: transformers' Qwen2-VL config reads ``"mrope"`` as
#: ``"default"`` (the frequencies are plain RoPE's).
_TYPE_ALIASES = {"mrope": "default"}


#: ``rope_theta`` used when neither the rope dict nor the config sets one
#: (transformers' ``RotaryEmbeddingConfigMixin.default_theta``).
DEFAULT_THETA = 10000.0


def _per_layer_type(config: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(per-layer-type rope dicts or None, flat rope dict)`` of ``config``.

    Per layer type: ``rope_parameters`` nested as ``{layer_type: rope dict or None}``
    (transformers v5, Gemma 3), or the legacy Gemma 3 keys ``rope_local_base_freq``
    (sliding layers: plain RoPE with that base) + ``rope_theta``/``rope_scaling``
    (full-attention layers).
    """
    # transformers v5 `convert_rope_params_to_dict`: a truthy legacy `rope_scaling` wins.
    raw = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(raw, Mapping):
        raise TypeError(
            f"rope_parameters/rope_scaling must be a mapping or None, got {type(raw).__name__}."
        )
    local = config.get("rope_local_base_freq")
    if raw and all(isinstance(v, Mapping) or v is None for v in raw.values()):  # nested
        nested = {k: None if v is None else dict(v) for k, v in raw.items()}
        sliding = nested.get("sliding_attention")
        if local is not None and sliding is not None:  # Gemma3TextConfig: setdefault
            sliding.setdefault("rope_theta", local)
        return nested, {}
    if local is not None:  # legacy Gemma 3 config.json
        full = dict(raw) or {"rope_type": "default"}
        return {
            "full_attention": full,
            "sliding_attention": {"rope_type": "default", "rope_theta": local},
        }, {}
    return None, dict(raw)


def _select(config: Mapping[str, Any], layer_type: str | None) -> tuple[dict[str, Any], bool]:
    """The rope dict that applies (to ``layer_type``) and whether it came from a nesting."""
    nested, flat = _per_layer_type(config)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a string or None, got {type(layer_type).__name__}.")
    if nested is None:
        if layer_type is None:
            return flat, False
        declared = config.get("layer_types")
        if isinstance(declared, (list, tuple)) and layer_type in declared:
            return flat, False  # one rope for every layer
        raise ValueError(
            f"Unknown layer_type {layer_type!r}. The rope parameters are not nested per layer "
            "type and the config's 'layer_types' do not list it: omit layer_type (one rope "
            "for every layer)."
        )
    known = ", ".join(sorted(nested))
    if layer_type is None:
        raise ValueError(
            f"The config has rope parameters per layer type ({known}); pass layer_type= "
            "one of them to choose a layer's rope."
        )
    if layer_type not in nested:
        raise ValueError(f"Unknown layer_type {layer_type!r}. Expected one of: {known}.")
    if nested[layer_type] is None:
        raise ValueError(
            f"layer_type {layer_type!r} has rope parameters None (a layer without RoPE)."
        )
    return nested[layer_type], True


def _checked_rope_type(params: Mapping[str, Any]) -> str:
    rope_type, legacy = _alias(params.get("rope_type")), _alias(params.get("type"))
    if rope_type is not None and legacy is not None and rope_type != legacy:
        raise ValueError(
            f"Conflicting keys in the rope parameters: rope_type={rope_type!r} and "
            f"type={legacy!r} (its legacy name) disagree."
        )
    rope_type = rope_type or legacy or "default"
    if rope_type not in SCALING_TYPES:
        known = ", ".join(sorted(SCALING_TYPES))
        raise ValueError(
            f"Unknown rope_type {rope_type!r}{_did_you_mean(rope_type, SCALING_TYPES)}. "
            f"Expected one of: {known}."
        )
    allowed = _allowed_keys(rope_type)
    unknown = sorted(k for k, v in params.items() if k not in allowed and v is not None)
    if unknown:
        raise ValueError(
            f"Unknown key {unknown[0]!r}{_did_you_mean(unknown[0], allowed)} in the rope "
            f"parameters of rope_type {rope_type!r} (unknown keys: {unknown}). Expected "
            f"keys: {', '.join(sorted(allowed))}."
        )
    for key in SCALING_TYPES[rope_type].required:  # the first required key it lacks
        if key not in params:
            _require(params, key, rope_type)
    return str(rope_type)


def _did_you_mean(word: object, choices: Any) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (difflib), else ``""``."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _layer_head_dim(config: Mapping[str, Any], layer_type: str | None) -> int | None:
    """A head dim that only ``layer_type``'s layers have (Gemma 4), or ``None``.

    ``per_layer_config`` (``{layer index: overrides}``, as transformers saves it) with a
    ``head_dim`` for the layers of that type, else ``global_head_dim`` (Gemma 4's
    ``config.json``) for ``"full_attention"`` layers.
    """
    if layer_type is None:
        return None
    per_layer = config.get("per_layer_config")
    if isinstance(per_layer, Mapping) and per_layer:
        types = config.get("layer_types")
        if not isinstance(types, (list, tuple)):
            raise ValueError(
                "per_layer_config needs the config's 'layer_types' to know which layers "
                f"are {layer_type!r}; got layer_types={types!r}."
            )
        dims = set()
        for index, overrides in per_layer.items():
            i = int(index)
            if 0 <= i < len(types) and types[i] == layer_type and isinstance(overrides, Mapping):
                if overrides.get("head_dim") is not None:
                    dims.add(positive_int(overrides["head_dim"], "per_layer_config head_dim"))
        if len(dims) > 1:
            raise ValueError(
                f"per_layer_config gives the {layer_type!r} layers different head dims "
                f"{sorted(dims)}; one rope per layer type needs one head dim."
            )
        return dims.pop() if dims else None
    if layer_type == "full_attention" and config.get("global_head_dim") is not None:
        return positive_int(config["global_head_dim"], "global_head_dim")
    return None


def _head_dim(config: Mapping[str, Any], layer_type: str | None = None) -> int:
    layer_dim = _layer_head_dim(config, layer_type)
    if layer_dim is not None:
        return layer_dim
    for key in ("head_dim", "qk_rope_head_dim"):
        if config.get(key) is not None:
            return positive_int(config[key], key)
    hidden, heads = _top(config, "hidden_size"), _top(config, "num_attention_heads")
    if hidden is None or heads is None:
        raise MissingRopeKeyError(
            "config must give 'head_dim' (or 'qk_rope_head_dim'), or both 'hidden_size' and "
            "'num_attention_heads' (GPT-J style: 'n_embd' and 'n_head'); got keys "
            f"{sorted(config)}."
        )
    return positive_int(hidden, "hidden_size") // positive_int(heads, "num_attention_heads")


def _rotary_pairs(
    config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int, rope_type: str
) -> int:
    """Number of rotated pairs: ``rotary_dim // 2``.

    ``rotary_dim`` is GPT-J's top-level ``rotary_dim`` if set, else
    ``int(head_dim * partial_rotary_factor)`` (``proportional``:
    ``2 * int(partial_rotary_factor * head_dim // 2)``); both given must agree.
    """
    partial = params.get("partial_rotary_factor")
    if partial is None:
        partial = _top(config, "partial_rotary_factor")
    if partial is not None:
        partial = _real(partial, "partial_rotary_factor", minimum=0)
        if partial > 1:
            raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial!r}.")
    gptj = config.get("rotary_dim")
    if gptj is not None:
        dim = even_int(gptj, "rotary_dim")
        if dim > head_dim:
            raise ValueError(f"rotary_dim={dim} must be at most head_dim={head_dim}.")
        if partial is not None and int(head_dim * partial) != dim:
            raise ValueError(
                f"Conflicting keys: rotary_dim={dim} and partial_rotary_factor={partial!r} "
                f"(int(head_dim={head_dim} * {partial!r}) = {int(head_dim * partial)}) "
                "disagree. Remove one of them or make them agree."
            )
        return dim // 2
    p = 1.0 if partial is None else partial
    if rope_type == "proportional":
        return int(p * head_dim // 2)
    rotary_dim = int(head_dim * p)
    if rotary_dim % 2 or rotary_dim < 2:
        if p == 1.0 and head_dim % 2:
            detail = f"head_dim={head_dim} is odd"
        else:
            detail = f"int(head_dim={head_dim} * partial_rotary_factor={p}) = {rotary_dim}"
        raise ValueError(f"The rotary dimension must be even and >= 2, but {detail}.")
    return rotary_dim // 2


#: Keys of real configs that close to a read key without being misspellings of it
#: (every config class of transformers was checked): never reported.
_NEIGHBOUR_KEYS = frozenset(
    {"d_head", "hidden_sizes", "layer_type", "n_heads", "qk_nope_head_dim", "v_head_dim"}
)


def _edits(a: str, b: str, limit: int) -> int:
    """The optimal-string-alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions and swaps of neighbours), or ``limit + 1`` once it exceeds ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, row = row, current
    return row[-1]


def _limit(key: str) -> int:
    """The edits a misspelling of ``key`` may hold: 2 for keys of 8 characters or more."""
    return 2 if len(key) >= 8 else 1


@functools.lru_cache(maxsize=1024)
def _misspelling_of(key: str, candidates: tuple[str, ...]) -> str | None:
    """The key of ``candidates`` that ``key`` looks like a misspelling of, or ``None``."""
    if key in candidates or key in _NEIGHBOUR_KEYS:
        return None
    near = [c for c in candidates if _edits(key, c, _limit(c)) <= _limit(c)]
    if not near:
        return None
    return (difflib.get_close_matches(key, near, n=1, cutoff=0.0) or near)[0]


def _theta(config: Mapping[str, Any], params: Mapping[str, Any]) -> float:
    """``rope_theta``: the rope dict's, else the config's, else :data:`DEFAULT_THETA`."""
    theta = params.get("rope_theta")
    if theta is None:
        theta = _top(config, "rope_theta")
    return _real(DEFAULT_THETA if theta is None else theta, "rope_theta", minimum=1)


def _xpos_positions(positions: Any) -> np.ndarray:
    """xPos positions as float64, refusing booleans, non-numbers, NaN and inf."""
    try:
        raw = np.asarray(positions)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"positions must be numbers of one shape, got {positions!r}.") from exc
    if raw.dtype.kind not in "iuf":
        raise TypeError(
            f"positions must be integers or floats (not booleans or objects), got dtype "
            f"{raw.dtype} from {positions!r}."
        )
    pos = raw.astype(np.float64)
    bad = ~np.isfinite(pos)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"positions must be finite, got {pos[index]!r} at index {index} (or a value "
            "beyond float64)."
        )
    return pos


def _allowed_keys(rope_type: str) -> frozenset[str]:
    """The keys a rope dict of ``rope_type`` may hold: the common keys and the type's own."""
    entry = SCALING_TYPES[rope_type]
    return frozenset({*_COMMON_KEYS, *entry.required, *entry.optional})


def _alias(rope_type: Any) -> Any:
    """A ``rope_type`` under its canonical name (:data:`_TYPE_ALIASES`)."""
    return _TYPE_ALIASES.get(rope_type, rope_type) if isinstance(rope_type, str) else rope_type
