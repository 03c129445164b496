"""RoPE inverse frequencies and the context-extension rules built on them.

Pure NumPy, float64 throughout. The main entry point, :func:`rope_frequencies`,
reads a Hugging Face style ``config.json`` mapping and returns
``(inv_freq, attention_factor)`` exactly as the ``_compute_*`` functions of
transformers' ``src/transformers/modeling_rope_utils.py`` define them (the v5
``rope_parameters`` line; see ``docs/rope_scaling.md`` for the formulas, the keys
each ``rope_type`` needs and the differences between transformers versions).

Two small helpers complete the family: :func:`ntk_aware_base` (static
"NTK-aware" base rescaling) and :func:`xpos_scale` (the xPos per-pair
length-extrapolation scale).

>>> from pe_core.rope_scaling import rope_frequencies
>>> inv_freq, attn = rope_frequencies({"head_dim": 8, "rope_theta": 10000.0})
>>> inv_freq.tolist(), attn
([1.0, 0.1, 0.01, 0.001], 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ROPE_TYPES", "ntk_aware_base", "rope_frequencies", "xpos_scale"]

#: The ``rope_type`` values :func:`rope_frequencies` understands, sorted.
ROPE_TYPES: tuple[str, ...] = ("default", "dynamic", "linear", "llama3", "longrope", "yarn")

#: ``rope_theta`` used when neither the rope dict nor the config sets one
#: (transformers' ``RotaryEmbeddingConfigMixin.default_theta``).
DEFAULT_THETA = 10000.0

_KNOWN = ", ".join(ROPE_TYPES)


# --------------------------------------------------------------------------- validation


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _real(
    value: Any,
    name: str,
    *,
    rope_type: str | None = None,
    minimum: float | None = None,
) -> float:
    """Return ``value`` as a finite float, or raise naming ``name`` (and the rope_type)."""
    where = f" for rope_type '{rope_type}'" if rope_type else ""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise ValueError(f"{name}{where} must be a finite real number, got {value!r}.")
    out = float(value)
    if minimum is not None and out <= minimum:
        raise ValueError(f"{name}{where} must be > {minimum:g}, got {value!r}.")
    return out


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _even_rotary_dim(value: Any, name: str = "rotary_dim") -> int:
    dim = _positive_int(value, name)
    if dim % 2:
        raise ValueError(f"{name} must be even (RoPE rotates pairs of features), got {dim}.")
    return dim


def _require(params: Mapping[str, Any], key: str, rope_type: str) -> Any:
    """Fetch a key a rope_type cannot do without; missing or None raises ValueError."""
    if params.get(key) is None:
        raise ValueError(
            f"rope_type '{rope_type}' requires the key '{key}' in rope_parameters/rope_scaling, "
            f"but it is missing. Present keys: {sorted(params)}."
        )
    return params[key]


# --------------------------------------------------------------------------- config reading


def _rope_dict(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any]:
    """The flat rope-parameter dict of ``config`` (new or legacy format, optionally per layer)."""
    # transformers v5 `convert_rope_params_to_dict`: a truthy legacy `rope_scaling` wins.
    raw = config.get("rope_scaling") or config.get("rope_parameters") or {}
    if not isinstance(raw, Mapping):
        raise TypeError(
            f"rope_parameters/rope_scaling must be a mapping or None, got {type(raw).__name__}."
        )
    nested = bool(raw) and all(isinstance(v, Mapping) or v is None for v in raw.values())
    if layer_type is not None:
        if not nested or layer_type not in raw:
            known = ", ".join(sorted(raw)) if nested else "(rope parameters are not nested)"
            raise ValueError(f"Unknown layer_type {layer_type!r}. Expected one of: {known}.")
        if raw[layer_type] is None:
            raise ValueError(
                f"layer_type {layer_type!r} has rope parameters None (a layer without RoPE)."
            )
        raw = raw[layer_type]
    elif nested:
        raise ValueError(
            "rope parameters are nested per layer type; pass layer_type= one of: "
            f"{', '.join(sorted(raw))}."
        )
    return dict(raw)


def _head_dim(config: Mapping[str, Any]) -> int:
    for key in ("head_dim", "qk_rope_head_dim"):
        if config.get(key) is not None:
            return _positive_int(config[key], key)
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if hidden is None or heads is None:
        raise ValueError(
            "config must give 'head_dim' (or 'qk_rope_head_dim'), or both 'hidden_size' and "
            f"'num_attention_heads'; got keys {sorted(config)}."
        )
    return _positive_int(hidden, "hidden_size") // _positive_int(heads, "num_attention_heads")


def _max_positions(config: Mapping[str, Any], rope_type: str) -> int:
    value = config.get("max_position_embeddings")
    if value is None:
        raise ValueError(
            f"rope_type '{rope_type}' requires the key 'max_position_embeddings' in the config, "
            "but it is missing."
        )
    return _positive_int(value, "max_position_embeddings")


def _original_max_positions(
    config: Mapping[str, Any], params: Mapping[str, Any], rope_type: str, nested: bool
) -> int:
    """Pre-training context length, with transformers v5 ``standardize_rope_params`` priority.

    1. a top-level ``original_max_position_embeddings`` (Phi-3 style) wins, except
       for per-layer (nested) rope parameters, where transformers ignores it;
    2. then the one inside the rope dict;
    3. else ``max_position_embeddings``.
    """
    for source in (params,) if nested else (config, params):
        if source.get("original_max_position_embeddings") is not None:
            return _positive_int(
                source["original_max_position_embeddings"], "original_max_position_embeddings"
            )
    return _max_positions(config, rope_type)


def _base_inv_freq(theta: float, dim: int) -> np.ndarray:
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim
    return 1.0 / (theta**exponents)


# --------------------------------------------------------------------------- rope types


def _linear(params: Mapping[str, Any], theta: float, dim: int) -> tuple[np.ndarray, float]:
    factor = _real(_require(params, "factor", "linear"), "factor", rope_type="linear", minimum=0)
    return _base_inv_freq(theta, dim) / factor, 1.0


def _dynamic(
    config: Mapping[str, Any],
    params: Mapping[str, Any],
    theta: float,
    dim: int,
    seq_len: int | None,
) -> tuple[np.ndarray, float]:
    factor = _real(_require(params, "factor", "dynamic"), "factor", rope_type="dynamic", minimum=0)
    if dim <= 2:
        raise ValueError(
            f"rope_type 'dynamic' needs rotary_dim > 2 (exponent dim/(dim-2)), got {dim}."
        )
    max_pos = _max_positions(config, "dynamic")
    length = max_pos if seq_len is None else max(seq_len, max_pos)
    base = theta * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(base, dim), 1.0


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn(
    config: Mapping[str, Any], params: Mapping[str, Any], theta: float, dim: int, nested: bool
) -> tuple[np.ndarray, float]:
    if "factor" not in params:
        raise ValueError(
            "rope_type 'yarn' requires the key 'factor' in rope_parameters/rope_scaling, "
            f"but it is missing. Present keys: {sorted(params)}."
        )
    original = _original_max_positions(config, params, "yarn", nested)
    factor = params["factor"]
    if factor is None:  # v5: fall back to the implicit ratio post-/pre-yarn context length
        factor = _max_positions(config, "yarn") / original
    factor = _real(factor, "factor", rope_type="yarn", minimum=0)

    attention_factor = params.get("attention_factor")
    mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, float(mscale)) / _yarn_mscale(
                factor, float(mscale_all_dim)
            )
        else:
            attention_factor = _yarn_mscale(factor)
    attention_factor = _real(attention_factor, "attention_factor", rope_type="yarn")

    beta_fast = _real(params.get("beta_fast") or 32, "beta_fast", rope_type="yarn", minimum=0)
    beta_slow = _real(params.get("beta_slow") or 1, "beta_slow", rope_type="yarn", minimum=0)
    truncate = params.get("truncate", True)

    def correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers: prevent a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolation_weight = 1.0 - ramp

    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_extrapolation = 1.0 / pos_freqs
    inv_interpolation = 1.0 / (factor * pos_freqs)
    inv_freq = (
        inv_interpolation * (1.0 - extrapolation_weight) + inv_extrapolation * extrapolation_weight
    )
    return inv_freq, attention_factor


def _factor_list(params: Mapping[str, Any], key: str, dim: int) -> np.ndarray:
    values = np.asarray(_require(params, key, "longrope"), dtype=np.float64)
    if values.shape != (dim // 2,):
        raise ValueError(
            f"{key} for rope_type 'longrope' must be a list of rotary_dim // 2 = {dim // 2} "
            f"numbers, got shape {values.shape}."
        )
    if not np.all(np.isfinite(values)) or not np.all(values > 0):
        raise ValueError(f"{key} for rope_type 'longrope' must hold finite numbers > 0.")
    return values


def _longrope(
    config: Mapping[str, Any],
    params: Mapping[str, Any],
    theta: float,
    dim: int,
    seq_len: int | None,
    nested: bool,
) -> tuple[np.ndarray, float]:
    short_factor = _factor_list(params, "short_factor", dim)
    long_factor = _factor_list(params, "long_factor", dim)
    original = _original_max_positions(config, params, "longrope", nested)
    factor = params.get("factor")
    if factor is None:  # Phi-3 style: the ratio of the two context lengths
        factor = _max_positions(config, "longrope") / original
    factor = _real(factor, "factor", rope_type="longrope", minimum=0)

    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original))
    attention_factor = _real(attention_factor, "attention_factor", rope_type="longrope")

    ext_factors = long_factor if seq_len and seq_len > original else short_factor
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim
    return 1.0 / (ext_factors * theta**exponents), attention_factor


def _llama3(
    config: Mapping[str, Any], params: Mapping[str, Any], theta: float, dim: int, nested: bool
) -> tuple[np.ndarray, float]:
    factor = _real(_require(params, "factor", "llama3"), "factor", rope_type="llama3", minimum=0)
    low_freq_factor = _real(
        _require(params, "low_freq_factor", "llama3"),
        "low_freq_factor",
        rope_type="llama3",
        minimum=0,
    )
    high_freq_factor = _real(
        _require(params, "high_freq_factor", "llama3"), "high_freq_factor", rope_type="llama3"
    )
    if high_freq_factor <= low_freq_factor:
        raise ValueError(
            "high_freq_factor for rope_type 'llama3' must be > low_freq_factor, got "
            f"high_freq_factor={high_freq_factor!r}, low_freq_factor={low_freq_factor!r}."
        )
    old_context_len = _original_max_positions(config, params, "llama3", nested)

    inv_freq = _base_inv_freq(theta, dim)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama), 1.0


# --------------------------------------------------------------------------- public API


def rope_frequencies(
    config: Mapping[str, Any], *, seq_len: int | None = None, layer_type: str | None = None
) -> tuple[np.ndarray, float]:
    """RoPE inverse frequencies and attention factor for a Hugging Face style config.

    Parameters
    ----------
    config : Mapping
        A ``config.json``-shaped mapping. Read keys: ``head_dim`` (else
        ``qk_rope_head_dim``, else ``hidden_size // num_attention_heads``),
        ``partial_rotary_factor``, ``max_position_embeddings``,
        ``original_max_position_embeddings`` and either ``rope_parameters`` (v5:
        ``rope_type``, ``rope_theta`` and the scaling keys) or the legacy
        ``rope_theta`` + ``rope_scaling`` (``type`` accepted for ``rope_type``;
        ``None`` means plain RoPE). A non-empty ``rope_scaling`` wins over
        ``rope_parameters``; inside the rope dict, ``rope_theta`` and
        ``partial_rotary_factor`` win over the top-level ones; ``rope_theta``
        defaults to 10000. See ``docs/rope_scaling.md`` for the keys per type.
    seq_len : int, optional
        Current sequence length. Used by ``dynamic`` (``None`` or anything
        shorter than ``max_position_embeddings`` gives the unscaled init-time
        frequencies) and ``longrope`` (long factors iff ``seq_len`` exceeds
        ``original_max_position_embeddings``); ignored by the other types.
        This is a pure function: no cache, no state.
    layer_type : str, optional
        Selects one entry when ``rope_parameters`` is nested per layer type
        (e.g. ``{"full_attention": {...}, "sliding_attention": {...}}``).

    Returns
    -------
    inv_freq : numpy.ndarray
        float64, shape ``(rotary_dim // 2,)`` with
        ``rotary_dim = int(head_dim * partial_rotary_factor)``; frequency of the
        pair ``j`` in radians per position.
    attention_factor : float
        Factor transformers multiplies cos/sin by (1.0 except for ``yarn`` and
        ``longrope``).

    Raises
    ------
    ValueError
        Unknown ``rope_type``; a key the type requires is missing (the message
        names key and type); odd rotary dimension; non-positive or non-finite
        numbers; wrong length of ``short_factor``/``long_factor``; nested rope
        parameters without a matching ``layer_type``.
    TypeError
        ``config`` (or its rope dict) is not a mapping.

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
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping (a parsed config.json), got {type(config).__name__}."
        )
    if seq_len is not None:
        seq_len = _positive_int(seq_len, "seq_len")
    params = _rope_dict(config, layer_type)
    nested = layer_type is not None
    rope_type = params.get("rope_type") or params.get("type") or "default"
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"Unknown rope_type {rope_type!r}. Expected one of: {_KNOWN}.")

    theta = params.get("rope_theta")
    if theta is None:
        theta = config.get("rope_theta")
    theta = _real(DEFAULT_THETA if theta is None else theta, "rope_theta", minimum=1)
    partial = params.get("partial_rotary_factor")
    if partial is None:
        partial = config.get("partial_rotary_factor")
    partial = _real(1.0 if partial is None else partial, "partial_rotary_factor", minimum=0)
    if partial > 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial!r}.")

    head_dim = _head_dim(config)
    rotary_dim = int(head_dim * partial)
    if rotary_dim % 2 or rotary_dim < 2:
        if partial == 1.0 and head_dim % 2:
            detail = f"head_dim={head_dim} is odd"
        else:
            detail = f"int(head_dim={head_dim} * partial_rotary_factor={partial}) = {rotary_dim}"
        raise ValueError(f"The rotary dimension must be even and >= 2, but {detail}.")

    if rope_type == "default":
        return _base_inv_freq(theta, rotary_dim), 1.0
    if rope_type == "linear":
        return _linear(params, theta, rotary_dim)
    if rope_type == "dynamic":
        return _dynamic(config, params, theta, rotary_dim, seq_len)
    if rope_type == "yarn":
        return _yarn(config, params, theta, rotary_dim, nested)
    if rope_type == "longrope":
        return _longrope(config, params, theta, rotary_dim, seq_len, nested)
    return _llama3(config, params, theta, rotary_dim, nested)


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
    dim = _even_rotary_dim(rotary_dim)
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
    dim = _even_rotary_dim(rotary_dim)
    scale_base = _real(scale_base, "scale_base", minimum=0)
    gamma = _real(gamma, "gamma", minimum=0)
    pos = np.asarray(positions, dtype=np.float64)
    zeta = (np.arange(0, dim, 2, dtype=np.float64) + gamma * dim) / ((1 + gamma) * dim)
    return zeta ** (pos[..., None] / scale_base)
