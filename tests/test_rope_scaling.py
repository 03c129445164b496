"""Tests for pe_core.rope_scaling against a restatement of transformers' RoPE init functions.

The ``ref_*`` functions below restate, line by line and in NumPy float64, the
``_compute_*_parameters`` functions of transformers 5.24
(``src/transformers/modeling_rope_utils.py``), together with the config
standardisation they rely on (``RotaryEmbeddingConfigMixin.convert_rope_params_to_dict``
and ``standardize_rope_params``) and Llama's ``compute_default_rope_parameters``.
They are written independently of ``pe_core.rope_scaling``; the only thing the
two share is the definition they follow.
"""

from __future__ import annotations

import copy
import importlib
import math
import pkgutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import assert_close, assert_equal
from hypothesis import given, settings
from hypothesis import strategies as st

from pe_core import _scaling, rope_scaling
from pe_core.rope_scaling import ROPE_TYPES, ntk_aware_base, rope_frequencies, xpos_scale

RTOL = 1e-13

# --------------------------------------------------------------------------------------
# Reference: transformers 5.24 modeling_rope_utils.py, restated in NumPy float64
# --------------------------------------------------------------------------------------


def ref_standardize(config_json: dict) -> SimpleNamespace:
    """PreTrainedConfig(**config_json) as far as RoPE is concerned (flat rope dicts only)."""
    cfg = copy.deepcopy(config_json)
    config = SimpleNamespace(**cfg)
    # convert_rope_params_to_dict
    rope_scaling = cfg.get("rope_scaling")
    rope_parameters = rope_scaling or cfg.get("rope_parameters")
    rope_parameters = rope_parameters if rope_parameters is not None else {}
    rope_theta = cfg.get("rope_theta", 10_000.0)
    partial_rotary_factor = cfg.get("partial_rotary_factor")
    rope_parameters.setdefault("rope_theta", rope_theta)
    if partial_rotary_factor is not None:
        rope_parameters.setdefault("partial_rotary_factor", partial_rotary_factor)
    # standardize_rope_params, Case 1 (one global dict)
    rope_parameters.setdefault("rope_type", rope_parameters.get("type", "default"))
    if rope_parameters["rope_type"] in ["llama3", "yarn", "longrope"]:
        if hasattr(config, "original_max_position_embeddings"):
            rope_parameters["original_max_position_embeddings"] = (
                config.original_max_position_embeddings
            )
        else:
            rope_parameters.setdefault(
                "original_max_position_embeddings", config.max_position_embeddings
            )
    config.rope_parameters = rope_parameters
    return config


def _head_dim(config):
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def ref_default(config, seq_len=None):
    # LlamaRotaryEmbedding.compute_default_rope_parameters, plus partial_rotary_factor
    # as the other RoPE init functions apply it.
    base = config.rope_parameters["rope_theta"]
    dim = int(_head_dim(config) * config.rope_parameters.get("partial_rotary_factor", 1.0))
    attention_factor = 1.0
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim))
    return inv_freq, attention_factor


def ref_linear(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    factor = rope_parameters_dict["factor"]
    base = rope_parameters_dict["rope_theta"]
    partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    head_dim = _head_dim(config)
    dim = int(head_dim * partial_rotary_factor)
    attention_factor = 1.0
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim))
    inv_freq /= factor
    return inv_freq, attention_factor


def ref_dynamic(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    base = rope_parameters_dict["rope_theta"]
    partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    head_dim = _head_dim(config)
    dim = int(head_dim * partial_rotary_factor)
    factor = rope_parameters_dict["factor"]
    attention_factor = 1.0
    if seq_len is None:
        seq_len = config.max_position_embeddings
    else:
        seq_len = max(seq_len, config.max_position_embeddings)
    base = base * ((factor * seq_len / config.max_position_embeddings) - (factor - 1)) ** (
        dim / (dim - 2)
    )
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim))
    return inv_freq, attention_factor


def ref_yarn(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    base = rope_parameters_dict["rope_theta"]
    partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    head_dim = _head_dim(config)
    dim = int(head_dim * partial_rotary_factor)

    factor = rope_parameters_dict["factor"]
    attention_factor = rope_parameters_dict.get("attention_factor")
    mscale = rope_parameters_dict.get("mscale")
    mscale_all_dim = rope_parameters_dict.get("mscale_all_dim")
    original_max_position_embeddings = rope_parameters_dict["original_max_position_embeddings"]
    if factor is None:
        factor = config.max_position_embeddings / original_max_position_embeddings

    def get_mscale(scale, mscale=1):
        if scale <= 1:
            return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(
                get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
            )
        else:
            attention_factor = get_mscale(factor)

    beta_fast = rope_parameters_dict.get("beta_fast") or 32
    beta_slow = rope_parameters_dict.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (
            2 * math.log(base)
        )

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):  # transformers' parameter names
        if min == max:
            max += 0.001
        linear_func = (np.arange(dim, dtype=np.float64) - min) / (max - min)
        return np.clip(linear_func, 0, 1)

    pos_freqs = base ** (np.arange(0, dim, 2).astype(np.float64) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)

    truncate = config.rope_parameters.get("truncate", True)
    low, high = find_correction_range(
        beta_fast, beta_slow, dim, base, original_max_position_embeddings, truncate
    )
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2)
    inv_freq = (
        inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
        + inv_freq_extrapolation * inv_freq_extrapolation_factor
    )
    return inv_freq, attention_factor


def ref_longrope(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    base = rope_parameters_dict["rope_theta"]
    partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    head_dim = _head_dim(config)
    dim = int(head_dim * partial_rotary_factor)
    long_factor = rope_parameters_dict["long_factor"]
    short_factor = rope_parameters_dict["short_factor"]
    factor = rope_parameters_dict.get("factor")
    attention_factor = rope_parameters_dict.get("attention_factor")
    original_max_position_embeddings = rope_parameters_dict["original_max_position_embeddings"]
    if factor is None:
        factor = config.max_position_embeddings / original_max_position_embeddings
    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(
                1 + math.log(factor) / math.log(original_max_position_embeddings)
            )
    if seq_len and seq_len > original_max_position_embeddings:
        ext_factors = np.array(long_factor, dtype=np.float64)
    else:
        ext_factors = np.array(short_factor, dtype=np.float64)
    inv_freq_shape = np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim
    inv_freq = 1.0 / (ext_factors * base**inv_freq_shape)
    return inv_freq, attention_factor


def ref_llama3(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    base = rope_parameters_dict["rope_theta"]
    partial_rotary_factor = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    head_dim = _head_dim(config)
    dim = int(head_dim * partial_rotary_factor)
    attention_factor = 1.0
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim))

    factor = rope_parameters_dict["factor"]
    low_freq_factor = rope_parameters_dict["low_freq_factor"]
    high_freq_factor = rope_parameters_dict["high_freq_factor"]
    old_context_len = rope_parameters_dict["original_max_position_embeddings"]

    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor

    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    unsmoothed = (1 - smooth_factor) * inv_freq_llama / factor
    smoothed_inv_freq = unsmoothed + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = np.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq_llama, attention_factor


def ref_proportional(config, seq_len=None):
    rope_parameters_dict = config.rope_parameters
    head_dim = _head_dim(config)
    base = rope_parameters_dict["rope_theta"]
    factor = rope_parameters_dict.get("factor", 1.0)
    rope_proportion = rope_parameters_dict.get("partial_rotary_factor", 1.0)
    attention_factor = 1.0
    rope_angles = int(rope_proportion * head_dim // 2)
    inv_freq_rotated = 1.0 / (
        base ** (np.arange(0, 2 * rope_angles, 2, dtype=np.int64).astype(np.float64) / head_dim)
    )
    nope_angles = head_dim // 2 - rope_angles
    if nope_angles > 0:
        inv_freq = np.concatenate((inv_freq_rotated, np.zeros(nope_angles)))
    else:
        inv_freq = inv_freq_rotated
    inv_freq /= factor
    return inv_freq, attention_factor


REFERENCE = {
    "default": ref_default,
    "proportional": ref_proportional,
    "linear": ref_linear,
    "dynamic": ref_dynamic,
    "yarn": ref_yarn,
    "longrope": ref_longrope,
    "llama3": ref_llama3,
}


def reference(config_json: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    config = ref_standardize(config_json)
    return REFERENCE[config.rope_parameters["rope_type"]](config, seq_len=seq_len)


def assert_matches_reference(config_json: dict, seq_len: int | None = None) -> np.ndarray:
    frozen = copy.deepcopy(config_json)
    got, got_attn = rope_frequencies(config_json, seq_len=seq_len)
    want, want_attn = reference(config_json, seq_len=seq_len)
    assert config_json == frozen, "rope_frequencies must not mutate its config"
    assert_close(got, want, atol=0, rtol=RTOL, backend="numpy", dtype="float64")
    assert isinstance(got_attn, float)
    assert got_attn == pytest.approx(want_attn, rel=1e-15, abs=0)
    return got


# --------------------------------------------------------------------------------------
# Model-shaped configs (values as in the public config.json files)
# --------------------------------------------------------------------------------------

LLAMA_3_1_8B = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
LLAMA_3_2_1B = {
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
DEEPSEEK_V3 = {
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "head_dim": 64,  # DeepseekV3Config sets head_dim = qk_rope_head_dim
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}
DEEPSEEK_V2_LITE = {
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "qk_rope_head_dim": 64,
    "max_position_embeddings": 163840,
    "rope_theta": 10000,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
}
QWEN_YARN_NO_TRUNCATE = {
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
        "truncate": False,
    },
}
QWEN2_5_YARN = {  # the README recipe: max_position_embeddings left at the pre-yarn length
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}
GPT_OSS_YARN = {
    "hidden_size": 2880,
    "num_attention_heads": 64,
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "rope_theta": 150000,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
}

_rng = np.random.default_rng(1234)
PHI3_SHORT = (1.0 + 0.1 * _rng.random(48)).round(6).tolist()
PHI3_LONG = (1.0 + 40.0 * np.sort(_rng.random(48))).round(6).tolist()
PHI3_MINI_128K = {
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG},
}
PHI4_MINI_PARTIAL = {  # partial rotary: rotary_dim = 96, 48 pairs
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "partial_rotary_factor": 0.75,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG},
}
LINEAR_CODELLAMA_LIKE = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 16384,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "linear", "factor": 4.0},
}
DYNAMIC = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
}
V5_ROPE_PARAMETERS = {  # new (transformers v5) format: theta inside rope_parameters
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "max_position_embeddings": 65536,
    "partial_rotary_factor": 0.5,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 50000.0,
        "factor": 16.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
    },
}
PLAIN_LLAMA_2 = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": None,
}

NAMED = {
    "llama-3.1-8b": (LLAMA_3_1_8B, [None]),
    "llama-3.2-1b": (LLAMA_3_2_1B, [None]),
    "deepseek-v3": (DEEPSEEK_V3, [None]),
    "deepseek-v2-lite": (DEEPSEEK_V2_LITE, [None]),
    "qwen-yarn-truncate-false": (QWEN_YARN_NO_TRUNCATE, [None]),
    "qwen2.5-yarn": (QWEN2_5_YARN, [None]),
    "gpt-oss-yarn": (GPT_OSS_YARN, [None]),
    "phi3-longrope": (PHI3_MINI_128K, [None, 1, 4095, 4096, 4097, 131072]),
    "phi4-longrope-partial": (PHI4_MINI_PARTIAL, [None, 2000, 9000]),
    "linear": (LINEAR_CODELLAMA_LIKE, [None]),
    "dynamic": (DYNAMIC, [None, 1, 4095, 4096, 4097, 8192, 100_000]),
    "v5-rope-parameters": (V5_ROPE_PARAMETERS, [None]),
    "plain-llama-2": (PLAIN_LLAMA_2, [None]),
}


def _with_head(config: dict) -> dict:
    """The reference reads head_dim as transformers' config class sets it."""
    out = copy.deepcopy(config)
    if "qk_rope_head_dim" in out and "head_dim" not in out:
        out["head_dim"] = out["qk_rope_head_dim"]  # DeepseekV2/V3Config
    return out


@pytest.mark.parametrize(
    ("config", "seq_len"),
    [
        pytest.param(cfg, s, id=f"{name}-seq{s}")
        for name, (cfg, lens) in NAMED.items()
        for s in lens
    ],
)
def test_named_configs_match_transformers_definition(config, seq_len):
    got, got_attn = rope_frequencies(config, seq_len=seq_len)
    want, want_attn = reference(_with_head(config), seq_len=seq_len)
    assert_close(got, want, atol=0, rtol=RTOL)
    assert got_attn == pytest.approx(want_attn, rel=1e-15, abs=0)


def test_known_values():
    # Llama 3.1: pair 0 untouched, the lowest frequency divided by 8.
    inv, attn = rope_frequencies(LLAMA_3_1_8B)
    assert inv.shape == (64,) and attn == 1.0
    assert inv[0] == 1.0
    assert inv[-1] == pytest.approx(500000.0 ** (-126 / 128) / 8, rel=1e-15)
    # DeepSeek-V3: mscale == mscale_all_dim -> attention factor exactly 1.
    assert rope_frequencies(DEEPSEEK_V3)[1] == 1.0
    # YaRN default attention factor 0.1 ln(s) + 1.
    assert rope_frequencies(GPT_OSS_YARN)[1] == pytest.approx(0.1 * math.log(32.0) + 1.0)
    # Phi-3 128k: sqrt(1 + ln(32) / ln(4096)).
    assert rope_frequencies(PHI3_MINI_128K)[1] == pytest.approx(
        math.sqrt(1 + math.log(32) / math.log(4096))
    )


def test_qwen25_yarn_uses_explicit_factor():
    # transformers >= 5 keeps the explicit factor even when max == original (4.5x used the ratio 1).
    inv, attn = rope_frequencies(QWEN2_5_YARN)
    base, _ = rope_frequencies({**QWEN2_5_YARN, "rope_scaling": None})
    assert attn == pytest.approx(0.1 * math.log(4.0) + 1.0)
    assert inv[-1] == pytest.approx(base[-1] / 4.0, rel=1e-12)
    assert inv[0] == base[0]


# --------------------------------------------------------------------------------------
# Hypothesis: random configs per rope_type against the reference
# --------------------------------------------------------------------------------------

head_dims = st.sampled_from([4, 8, 16, 32, 64, 80, 96, 128, 256])
thetas = st.sampled_from([100.0, 10000.0, 50000.0, 500000.0, 1e6, 1e7])
max_positions = st.sampled_from([512, 2048, 4096, 8192, 32768, 131072])
factors = st.floats(1.0, 64.0)
partials = st.sampled_from([None, 1.0, 0.5, 0.25])
seq_lens = st.one_of(st.none(), st.integers(1, 600_000))


@st.composite
def configs(draw, rope_type=None):
    rope_type = rope_type or draw(st.sampled_from(ROPE_TYPES))
    head_dim = draw(head_dims)
    partial = draw(partials)
    if partial is not None and (int(head_dim * partial) % 2 or int(head_dim * partial) < 4):
        partial = None  # odd rotary dims raise; dynamic needs rotary_dim > 2
    rotary = int(head_dim * (partial or 1.0))
    mpe = draw(max_positions)
    cfg: dict = {
        "hidden_size": head_dim * 4,
        "num_attention_heads": 4,
        "max_position_embeddings": mpe,
    }
    if draw(st.booleans()):
        cfg["head_dim"] = head_dim
        cfg["hidden_size"] = head_dim * 3  # head_dim must win over hidden // heads
    if partial is not None:
        cfg["partial_rotary_factor"] = partial
    theta = draw(thetas)
    params: dict = {}
    if rope_type in ("linear", "dynamic", "yarn", "llama3") or (
        rope_type == "proportional" and draw(st.booleans())
    ):
        params["factor"] = draw(factors)
    if rope_type in ("yarn", "llama3", "longrope") and draw(st.booleans()):
        params["original_max_position_embeddings"] = draw(st.sampled_from([256, 1024, 4096, 8192]))
    if rope_type == "yarn":
        for key, strat in (
            ("beta_fast", st.floats(4.0, 64.0)),
            ("beta_slow", st.floats(0.25, 4.0)),
            ("mscale", st.floats(0.1, 2.0)),
            ("mscale_all_dim", st.floats(0.1, 2.0)),
            ("attention_factor", st.floats(0.5, 2.0)),
            ("truncate", st.booleans()),
        ):
            if draw(st.booleans()):
                params[key] = draw(strat)
    if rope_type == "llama3":
        low = draw(st.floats(0.25, 4.0))
        params["low_freq_factor"] = low
        params["high_freq_factor"] = low + draw(st.floats(0.25, 16.0))
    if rope_type == "longrope":
        n = rotary // 2
        params["short_factor"] = draw(st.lists(st.floats(0.5, 4.0), min_size=n, max_size=n))
        params["long_factor"] = draw(st.lists(st.floats(1.0, 64.0), min_size=n, max_size=n))
        if draw(st.booleans()):
            params["factor"] = draw(factors)
        if draw(st.booleans()):
            params["attention_factor"] = draw(st.floats(0.5, 2.0))
        if draw(st.booleans()):
            cfg["original_max_position_embeddings"] = draw(st.sampled_from([1024, 4096]))
    fmt = draw(st.sampled_from(["rope_scaling", "rope_scaling_type", "rope_parameters"]))
    if fmt == "rope_parameters":
        cfg["rope_parameters"] = {"rope_type": rope_type, "rope_theta": theta, **params}
    else:
        key = "type" if fmt == "rope_scaling_type" else "rope_type"
        cfg["rope_theta"] = theta
        cfg["rope_scaling"] = None if rope_type == "default" else {key: rope_type, **params}
    return cfg


@settings(max_examples=300, deadline=None)
@given(configs(), seq_lens)
def test_random_configs_match_transformers_definition(config, seq_len):
    assert_matches_reference(config, seq_len)


@pytest.mark.parametrize("rope_type", ROPE_TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_inv_freq_positive_finite(rope_type, data):
    config = data.draw(configs(rope_type))
    inv, attn = rope_frequencies(config, seq_len=data.draw(seq_lens))
    assert np.all(np.isfinite(inv))
    if rope_type == "proportional":  # the pairs it does not rotate get frequency 0
        rotated = inv[inv > 0]
        assert rotated.size
        assert_equal(inv[rotated.size :], np.zeros(inv.size - rotated.size))
    else:
        assert np.all(inv > 0)
    assert math.isfinite(attn) and attn > 0


@pytest.mark.parametrize("rope_type", ["default", "linear", "dynamic", "yarn", "llama3"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_strictly_decreasing(rope_type, data):
    # yarn: inv_freq = extrapolation_j * (w_j + (1 - w_j) / s) with the extrapolation weight
    # w_j non-increasing; llama3: inv_freq_j * (1/s + smooth_j (1 - 1/s)) with smooth_j
    # non-increasing and continuous at both band edges. With factor s >= 1 the multiplier is
    # non-increasing, so the product stays strictly decreasing.
    config = data.draw(configs(rope_type))
    inv, _ = rope_frequencies(config, seq_len=data.draw(seq_lens))
    assert np.all(np.diff(inv) < 0)


def test_longrope_is_not_monotone_in_general():
    factors = [1.0, 50.0, 1.0, 1.0]  # pair 1 scaled down a lot, pair 2 not
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "short_factor": factors, "long_factor": factors},
    }
    inv, _ = rope_frequencies(cfg)
    assert not np.all(np.diff(inv) < 0)
    assert_close(inv, rope_frequencies({"head_dim": 8})[0] / factors, atol=0, rtol=1e-15)


# --------------------------------------------------------------------------------------
# Semantics worth pinning down
# --------------------------------------------------------------------------------------


def test_default_when_rope_scaling_missing_or_none():
    cfg = {"head_dim": 64, "rope_theta": 10000.0}
    inv, attn = rope_frequencies(cfg)
    assert_equal(inv, rope_frequencies({**cfg, "rope_scaling": None})[0])
    assert_close(inv, 10000.0 ** (-np.arange(0, 64, 2) / 64), atol=0, rtol=1e-15)
    assert attn == 1.0
    # rope_theta defaults to 10000 (transformers' default_theta)
    assert_equal(rope_frequencies({"head_dim": 64})[0], inv)


def test_rope_parameters_theta_and_partial_win_over_top_level():
    cfg = {
        "head_dim": 64,
        "rope_theta": 1.0e6,
        "partial_rotary_factor": 0.25,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 500.0,
            "partial_rotary_factor": 0.5,
        },
    }
    inv, _ = rope_frequencies(cfg)
    assert_close(inv, 500.0 ** (-np.arange(0, 32, 2) / 32), atol=0, rtol=1e-15)


def test_rope_scaling_wins_over_rope_parameters():
    cfg = {
        "head_dim": 16,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "rope_parameters": {"rope_type": "linear", "factor": 4.0},
    }
    want = rope_frequencies({"head_dim": 16})[0] / 2
    assert_close(rope_frequencies(cfg)[0], want, atol=0, rtol=1e-7)


def test_dynamic_is_a_pure_function_of_seq_len():
    base, _ = rope_frequencies({**DYNAMIC, "rope_scaling": None})
    for seq_len in (None, 1, 100, 4096):
        assert_equal(rope_frequencies(DYNAMIC, seq_len=seq_len)[0], base)
    long_a = rope_frequencies(DYNAMIC, seq_len=16384)[0]
    rope_frequencies(DYNAMIC, seq_len=100_000)
    assert_equal(rope_frequencies(DYNAMIC, seq_len=16384)[0], long_a)
    assert np.all(long_a[1:] < base[1:]) and long_a[0] == base[0]


def test_dynamic_equals_ntk_aware_base():
    # dynamic at seq_len L is plain RoPE with ntk_aware_base(theta, s * L / max - (s - 1), dim)
    seq_len, s, mpe, dim = 20000, 2.0, 4096, 128
    inv, _ = rope_frequencies(DYNAMIC, seq_len=seq_len)
    base = ntk_aware_base(10000.0, s * seq_len / mpe - (s - 1), dim)
    want = rope_frequencies({"head_dim": dim, "rope_theta": base})[0]
    assert_close(inv, want, atol=0, rtol=1e-7)


def test_dynamic_refuses_original_max_position_embeddings():
    # transformers 5 ignores it for dynamic (with a warning); pe_core never ignores a key.
    cfg = copy.deepcopy(DYNAMIC)
    cfg["rope_scaling"]["original_max_position_embeddings"] = 1024
    with pytest.raises(
        ValueError, match=r"Unknown key 'original_max_position_embeddings'.*'dynamic'"
    ):
        rope_frequencies(cfg, seq_len=5000)


def test_yarn_truncate_changes_ramp():
    truncated = copy.deepcopy(GPT_OSS_YARN)
    truncated["rope_scaling"]["truncate"] = True
    a, _ = rope_frequencies(GPT_OSS_YARN)
    b, _ = rope_frequencies(truncated)
    assert not np.allclose(a, b)
    # the correction dims here are 8.09 and 17.39: only the ramp region differs
    assert_equal(a[:8], b[:8])
    assert_equal(a[18:], b[18:])
    # a missing truncate means True
    del truncated["rope_scaling"]["truncate"]
    assert_equal(rope_frequencies(truncated)[0], b)


def test_yarn_factor_none_uses_context_ratio():
    cfg = copy.deepcopy(DEEPSEEK_V3)
    cfg["rope_scaling"]["factor"] = None
    assert_equal(rope_frequencies(cfg)[0], rope_frequencies(DEEPSEEK_V3)[0])


def test_yarn_attention_factor_rules():
    cfg = copy.deepcopy(DEEPSEEK_V2_LITE)
    assert rope_frequencies(cfg)[1] == 1.0  # equal mscales cancel
    cfg["rope_scaling"]["mscale_all_dim"] = 1.0
    want = (0.1 * 0.707 * math.log(40) + 1) / (0.1 * math.log(40) + 1)
    assert rope_frequencies(cfg)[1] == pytest.approx(want, rel=1e-15)
    # transformers needs *both* mscale keys; mscale alone falls back to 0.1 ln(s) + 1
    del cfg["rope_scaling"]["mscale_all_dim"]
    assert rope_frequencies(cfg)[1] == pytest.approx(0.1 * math.log(40) + 1, rel=1e-15)
    cfg["rope_scaling"]["attention_factor"] = 0.5
    assert rope_frequencies(cfg)[1] == 0.5


def test_longrope_switches_factors_strictly_above_original():
    base, _ = rope_frequencies({**PHI3_MINI_128K, "rope_scaling": None})
    for seq_len in (None, 1, 4096):
        inv, _ = rope_frequencies(PHI3_MINI_128K, seq_len=seq_len)
        assert_close(inv, base / PHI3_SHORT, atol=0, rtol=1e-15)
    for seq_len in (4097, 131072, 10**6):
        inv, _ = rope_frequencies(PHI3_MINI_128K, seq_len=seq_len)
        assert_close(inv, base / PHI3_LONG, atol=0, rtol=1e-15)


def test_top_level_original_max_position_embeddings_wins():
    cfg = copy.deepcopy(PHI3_MINI_128K)
    cfg["rope_scaling"]["original_max_position_embeddings"] = 65536
    short, _ = rope_frequencies(cfg, seq_len=5000)
    assert_equal(short, rope_frequencies(PHI3_MINI_128K, seq_len=5000)[0])


def test_nested_rope_parameters_need_layer_type():
    cfg = {
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 999,  # ignored for nested dicts, as in transformers
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    }
    full, _ = rope_frequencies(cfg, layer_type="full_attention")
    assert_close(full, 1e6 ** (-np.arange(0, 64, 2) / 64) / 8, atol=0, rtol=1e-15)
    local, _ = rope_frequencies(cfg, layer_type="sliding_attention")
    assert_close(local, 1e4 ** (-np.arange(0, 64, 2) / 64), atol=0, rtol=1e-15)
    with pytest.raises(ValueError, match="layer_type"):
        rope_frequencies(cfg)
    with pytest.raises(ValueError, match="Unknown layer_type 'chunked'"):
        rope_frequencies(cfg, layer_type="chunked")
    cfg["rope_parameters"]["sliding_attention"] = None
    with pytest.raises(ValueError, match="'sliding_attention' has rope parameters None"):
        rope_frequencies(cfg, layer_type="sliding_attention")
    with pytest.raises(ValueError, match=r"Unknown layer_type 'full_attention'.*not nested"):
        rope_frequencies({"head_dim": 8}, layer_type="full_attention")


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def test_error_odd_head_dim():
    with pytest.raises(ValueError, match=r"even.*head_dim=63 is odd"):
        rope_frequencies({"head_dim": 63})
    with pytest.raises(ValueError, match="head_dim=7 is odd"):
        rope_frequencies({"hidden_size": 28, "num_attention_heads": 4})


def test_error_rotary_dim_zero():
    with pytest.raises(ValueError, match=r"int\(head_dim=0 \* partial_rotary_factor=1.0\) = 0"):
        rope_frequencies({"hidden_size": 3, "num_attention_heads": 4})


def test_error_odd_rotary_dim():
    with pytest.raises(ValueError, match=r"int\(head_dim=20 \* partial_rotary_factor=0.25\) = 5"):
        rope_frequencies({"head_dim": 20, "partial_rotary_factor": 0.25})


def test_error_unknown_rope_type():
    msg = (
        "Unknown rope_type 'foo'. Expected one of: default, dynamic, linear, llama3, longrope, "
        "proportional, yarn."
    )
    with pytest.raises(ValueError, match=msg):
        rope_frequencies({"head_dim": 8, "rope_scaling": {"rope_type": "foo", "factor": 2.0}})
    with pytest.raises(ValueError, match="Unknown rope_type 'ntk'"):
        rope_frequencies({"head_dim": 8, "rope_scaling": {"type": "ntk", "factor": 2.0}})


MISSING = [
    ("linear", "factor", {"factor": 2.0}),
    ("dynamic", "factor", {"factor": 2.0}),
    ("yarn", "factor", {"factor": 2.0}),
    ("longrope", "short_factor", {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4}),
    ("longrope", "long_factor", {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4}),
    ("llama3", "factor", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    ("llama3", "low_freq_factor", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    (
        "llama3",
        "high_freq_factor",
        {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    ),
]


@pytest.mark.parametrize(("rope_type", "key", "params"), MISSING)
def test_error_missing_key_names_key_and_type(rope_type, key, params):
    params = {k: v for k, v in params.items() if k != key}
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 2048,
        "rope_scaling": {"type": rope_type, **params},
    }
    with pytest.raises(ValueError, match=f"rope_type '{rope_type}' requires the key '{key}'"):
        rope_frequencies(cfg)


def test_error_dynamic_rotary_dim_two():
    cfg = {
        "head_dim": 2,
        "max_position_embeddings": 16,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
    }
    with pytest.raises(ValueError, match="'dynamic' needs rotary_dim > 2"):
        rope_frequencies(cfg)


def test_error_missing_max_position_embeddings():
    cfg = {"head_dim": 8, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    with pytest.raises(ValueError, match="'dynamic' requires the key 'max_position_embeddings'"):
        rope_frequencies(cfg)


def test_error_missing_head_size():
    with pytest.raises(ValueError, match=r"'head_dim'.*'hidden_size' and 'num_attention_heads'"):
        rope_frequencies({"hidden_size": 64})


def test_error_longrope_factor_length():
    cfg = {
        "head_dim": 8,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 4},
    }
    with pytest.raises(ValueError, match=r"short_factor.*rotary_dim // 2 = 4.*\(3,\)"):
        rope_frequencies(cfg)


def test_error_llama3_band_order():
    cfg = copy.deepcopy(LLAMA_3_1_8B)
    cfg["rope_scaling"]["high_freq_factor"] = 0.5  # equal is Llama 4's step; below is an error
    with pytest.raises(ValueError, match=r"high_freq_factor.*must be >= low_freq_factor"):
        rope_frequencies(cfg)


@pytest.mark.parametrize(
    ("bad", "error"), [(-1, ValueError), (-5, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_error_bad_seq_len(bad, error):
    with pytest.raises(error, match=r"seq_len must be an integer >= 0\. Received: "):
        rope_frequencies(DYNAMIC, seq_len=bad)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"head_dim": 8, "rope_theta": 0.5}, "rope_theta must be > 1"),
        ({"head_dim": 8, "rope_theta": float("nan")}, "rope_theta must be a finite real number"),
        (
            {"head_dim": 8, "partial_rotary_factor": 1.5},
            r"partial_rotary_factor must be in \(0, 1\]",
        ),
        (
            {"head_dim": 8, "rope_scaling": {"type": "linear", "factor": 0.0}},
            "factor for rope_type 'linear' must be > 0",
        ),
    ],
)
def test_error_bad_numbers(config, match):
    with pytest.raises(ValueError, match=match):
        rope_frequencies(config)


def test_error_config_not_a_mapping():
    with pytest.raises(TypeError, match="config must be a mapping"):
        rope_frequencies([("head_dim", 8)])


# --------------------------------------------------------------------------------------
# ntk_aware_base
# --------------------------------------------------------------------------------------


@given(
    theta=st.floats(2.0, 1e7),
    factor=st.floats(1.0, 128.0),
    dim=st.integers(2, 128).map(lambda n: 2 * n),
)
def test_ntk_aware_base_stretches_lowest_frequency_by_factor(theta, factor, dim):
    base = ntk_aware_base(theta, factor, dim)
    assert base == theta * factor ** (dim / (dim - 2))
    old = theta ** (-np.arange(0, dim, 2) / dim)
    new = base ** (-np.arange(0, dim, 2) / dim)
    assert new[0] == old[0] == 1.0
    assert new[-1] == pytest.approx(old[-1] / factor, rel=1e-12)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((10000.0, 2.0, 2), "rotary_dim must be > 2"),
        ((10000.0, 2.0, 7), "rotary_dim must be even"),
        ((10000.0, 0.0, 8), "factor must be > 0"),
        ((-1.0, 2.0, 8), "theta must be > 0"),
    ],
)
def test_ntk_aware_base_errors(args, match):
    with pytest.raises(ValueError, match=match):
        ntk_aware_base(*args)


# --------------------------------------------------------------------------------------
# xpos_scale
# --------------------------------------------------------------------------------------


def lucidrains_xpos_scale(seq_len, dim, scale_base=512):
    """rotary-embedding-torch RotaryEmbedding.get_scale, per pair (before the repeat)."""
    t = np.arange(seq_len, dtype=np.float64)
    scale = (np.arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)
    power = (t - len(t) // 2) / scale_base
    return scale ** power[:, None]


def torchscale_xpos_scale(length, head_dim, scale_base=512, offset=0):
    """torchscale XPOS.forward scale (before duplicate_interleave)."""
    scale_vec = (np.arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim)
    min_pos = -(length + offset) // 2
    max_pos = length + offset + min_pos
    scale = scale_vec ** (np.arange(min_pos, max_pos, 1) / scale_base)[:, None]
    return scale[-length:]


@pytest.mark.parametrize("seq_len", [1, 2, 7, 64, 1001])
@pytest.mark.parametrize("dim", [2, 8, 64])
def test_xpos_matches_reference_implementations(seq_len, dim):
    lucid_pos = np.arange(seq_len) - seq_len // 2
    assert_close(
        xpos_scale(lucid_pos, dim), lucidrains_xpos_scale(seq_len, dim), atol=0, rtol=1e-15
    )
    ts_pos = np.arange(seq_len) - (seq_len // 2 + seq_len % 2)  # i - ceil(L / 2)
    assert_close(xpos_scale(ts_pos, dim), torchscale_xpos_scale(seq_len, dim), atol=0, rtol=1e-15)


@given(
    m=st.integers(-4096, 4096),
    n=st.integers(-4096, 4096),
    shift=st.integers(-4096, 4096),
    dim=st.integers(1, 64).map(lambda k: 2 * k),
)
def test_xpos_query_key_product_depends_on_distance_only(m, n, shift, dim):
    a = xpos_scale(m, dim) / xpos_scale(n, dim)
    b = xpos_scale(m + shift, dim) / xpos_scale(n + shift, dim)
    assert_close(a, b, atol=0, rtol=1e-9)
    assert_close(a, xpos_scale(m - n, dim), atol=0, rtol=1e-9)


def test_xpos_shape_and_formula():
    pos = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = xpos_scale(pos, 16, scale_base=100.0, gamma=0.5)
    assert out.shape == (3, 4, 8)
    zeta = (np.arange(0, 16, 2) + 0.5 * 16) / (1.5 * 16)
    assert_close(out, zeta ** (pos[..., None] / 100.0), atol=0, rtol=1e-15, dtype="float64")
    assert np.all(np.diff(zeta) > 0) and zeta[-1] < 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rotary_dim": 5}, "rotary_dim must be even"),
        ({"rotary_dim": 0}, "rotary_dim must be an integer >= 1"),
        ({"rotary_dim": 8, "scale_base": 0.0}, "scale_base must be > 0"),
        ({"rotary_dim": 8, "gamma": 0.0}, "gamma must be > 0"),
    ],
)
def test_xpos_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        xpos_scale([0, 1], **kwargs)


# --------------------------------------------------------------------------------------
# The table: one module per rope_type
# --------------------------------------------------------------------------------------


def test_every_rope_type_is_a_module_of_pe_core_scaling():
    modules = {
        info.name: importlib.import_module(f"pe_core._scaling.{info.name}").SCALING_TYPE
        for info in pkgutil.iter_modules(_scaling.__path__)
        if not info.name.startswith("_")
    }
    assert ROPE_TYPES == tuple(sorted(modules)) == tuple(rope_scaling.SCALING_TYPES)
    from typing import get_args

    from pe_core.typing import RopeType

    assert set(get_args(RopeType)) <= set(ROPE_TYPES)  # every built-in type is still there
    for name, entry in modules.items():
        assert rope_scaling.SCALING_TYPES[name] is entry


def test_the_classes_live_in_rope_scaling():
    """Defined in pe_core._scaling._types, documented (and pickled) as pe_core.rope_scaling's."""
    for cls in (rope_scaling.RopeScalingType, rope_scaling.ScalingInputs):
        assert cls.__module__ == "pe_core.rope_scaling"
    error = rope_scaling.MissingRopeKeyError
    assert error.__module__ == "pe_core.rope_scaling" and issubclass(error, (KeyError, ValueError))


def test_a_module_without_a_scaling_type_is_refused(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text("SCALING_TYPE = 'linear'\n")
    monkeypatch.setattr(_scaling, "__path__", [*_scaling.__path__, str(tmp_path)])
    before = dict(rope_scaling.SCALING_TYPES)
    try:
        with pytest.raises(TypeError, match=r"pe_core._scaling.broken must define SCALING_TYPE"):
            rope_scaling._discover()
        assert rope_scaling.SCALING_TYPES == before  # nothing changed
    finally:
        sys.modules.pop("pe_core._scaling.broken", None)
        if hasattr(_scaling, "broken"):
            delattr(_scaling, "broken")
