"""pe_core reads published model configs as transformers does.

Each family's ``config.json`` values (sizes, heads and every rope key) are written out
below as dicts. transformers builds its config object from the dict and its model's own
rotary embedding module from that object; pe_core's ``rope_frequencies`` must give the
same inverse frequencies and attention factor, both from the dict and from the config
object (and ``apply_rope`` the same rotation). transformers computes in float32, so the
frequencies agree to float32 rounding (``RTOL``); attention factors are Python floats.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from conftest import assert_close, assert_equal

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from pe_core.rope import apply_rope  # noqa: E402
from pe_core.rope_scaling import (  # noqa: E402
    READ_CONFIG_KEYS,
    MissingRopeKeyError,
    RopeConfigWarning,
    check_config_keys,
    rope_config_for_layer,
    rope_frequencies,
)

RTOL = 3e-6  # float32 rounding of transformers' base ** (2j / d) and of its ramps

# --------------------------------------------------------------------------- the configs

LLAMA_2_7B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "vocab_size": 32000,
}
LLAMA_3_1_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "vocab_size": 128256,
}
LLAMA_4_SCOUT_TEXT = {  # high_freq_factor == low_freq_factor: a step, no smooth band
    "hidden_size": 5120,
    "head_dim": 128,
    "max_position_embeddings": 10485760,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "rope_scaling": {
        "factor": 16.0,
        "high_freq_factor": 1.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
}
MISTRAL_7B_V0_1 = {
    "architectures": ["MistralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "vocab_size": 32000,
}
QWEN2_7B_INSTRUCT = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "use_sliding_window": False,
    "vocab_size": 152064,
}
QWEN2_5_7B_YARN = {  # Qwen2.5-7B-Instruct with its README's long-context recipe
    **QWEN2_7B_INSTRUCT,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
}
PHI_3_5_MINI = {
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {
        "long_factor": [
            1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
            1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
            3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
            7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
            24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
            32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
            50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
            58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
            62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
            63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
            64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
            64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062,
        ],
        "short_factor": [
            1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705,
            1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
            1.0499999523162842, 1.0699999332427979, 1.0999999046325684, 1.1099998950958252,
            1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
            1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
            1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903,
            1.9899996519088745, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
            2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0299997329711914,
            2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
            2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
            2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713,
            2.5899994373321533, 2.729999542236328, 2.749999523162842, 2.8399994373321533,
        ],
        "type": "longrope",
    },
    "rope_theta": 10000.0,
    "sliding_window": 262144,
    "vocab_size": 32064,
}  # fmt: skip
PYTHIA_410M = {
    "architectures": ["GPTNeoXForCausalLM"],
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
    "vocab_size": 50304,
}
GPT_NEOX_20B = {
    "architectures": ["GPTNeoXForCausalLM"],
    "hidden_size": 6144,
    "intermediate_size": 24576,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 64,
    "num_hidden_layers": 44,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "vocab_size": 50432,
}
GPT_J_6B = {
    "architectures": ["GPTJForCausalLM"],
    "model_type": "gptj",
    "n_embd": 4096,
    "n_head": 16,
    "n_layer": 28,
    "n_positions": 2048,
    "rotary_dim": 64,
    "vocab_size": 50400,
}
GEMMA_3_4B_TEXT = {  # the text_config of google/gemma-3-4b-it
    "head_dim": 256,
    "hidden_size": 2560,
    "intermediate_size": 10240,
    "max_position_embeddings": 131072,
    "model_type": "gemma3_text",
    "num_attention_heads": 8,
    "num_hidden_layers": 34,
    "num_key_value_heads": 4,
    "query_pre_attn_scalar": 256,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "rope_theta": 1000000.0,
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
}
GEMMA_3_1B = {
    "head_dim": 256,
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "max_position_embeddings": 32768,
    "model_type": "gemma3_text",
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "query_pre_attn_scalar": 256,
    "rope_local_base_freq": 10000,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "v_head_dim": 128,
}

# --------------------------------------------------------------------------- transformers


def _llama_family(config_cls: str, module: str, embedding: str):
    def build(d: dict):
        cfg = getattr(transformers, config_cls)(**copy.deepcopy(d))
        mod = __import__(f"transformers.models.{module}.modeling_{module}", fromlist=[embedding])
        emb = getattr(mod, embedding)(cfg)
        return cfg, {None: (emb.inv_freq, emb.attention_scaling)}

    return build


def _gptj(d: dict):
    from transformers.models.gptj.modeling_gptj import GPTJRotaryEmbedding

    cfg = transformers.GPTJConfig(**copy.deepcopy(d))
    table = GPTJRotaryEmbedding(cfg).embed_positions  # [sin | cos] of positions 0, 1, ...
    half = table.shape[-1] // 2
    inv_freq = torch.atan2(table[1, :half].double(), table[1, half:].double())  # angle at 1
    return cfg, {None: (inv_freq, 1.0)}


def _gemma3(d: dict):
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    cfg = transformers.Gemma3TextConfig(**copy.deepcopy(d))
    emb = Gemma3RotaryEmbedding(cfg)
    return cfg, {
        t: (getattr(emb, f"{t}_inv_freq"), getattr(emb, f"{t}_attention_scaling"))
        for t in ("full_attention", "sliding_attention")
    }


FAMILIES = {
    "llama-2-7b": (LLAMA_2_7B, _llama_family("LlamaConfig", "llama", "LlamaRotaryEmbedding")),
    "llama-3.1-8b": (LLAMA_3_1_8B, _llama_family("LlamaConfig", "llama", "LlamaRotaryEmbedding")),
    "llama-4-scout": (
        LLAMA_4_SCOUT_TEXT,
        _llama_family("LlamaConfig", "llama", "LlamaRotaryEmbedding"),
    ),
    "mistral-7b": (
        MISTRAL_7B_V0_1,
        _llama_family("MistralConfig", "mistral", "MistralRotaryEmbedding"),
    ),
    "qwen2-7b": (QWEN2_7B_INSTRUCT, _llama_family("Qwen2Config", "qwen2", "Qwen2RotaryEmbedding")),
    "qwen2.5-7b-yarn": (
        QWEN2_5_7B_YARN,
        _llama_family("Qwen2Config", "qwen2", "Qwen2RotaryEmbedding"),
    ),
    "phi-3.5-mini": (PHI_3_5_MINI, _llama_family("Phi3Config", "phi3", "Phi3RotaryEmbedding")),
    "pythia-410m": (
        PYTHIA_410M,
        _llama_family("GPTNeoXConfig", "gpt_neox", "GPTNeoXRotaryEmbedding"),
    ),
    "gpt-neox-20b": (
        GPT_NEOX_20B,
        _llama_family("GPTNeoXConfig", "gpt_neox", "GPTNeoXRotaryEmbedding"),
    ),
    "gpt-j-6b": (GPT_J_6B, _gptj),
    "gemma-3-4b": (GEMMA_3_4B_TEXT, _gemma3),
    "gemma-3-1b": (GEMMA_3_1B, _gemma3),
    "deepseek-v3": (
        DEEPSEEK_V3,
        _llama_family("DeepseekV3Config", "deepseek_v3", "DeepseekV3RotaryEmbedding"),
    ),
}


def _compare(got: tuple[np.ndarray, float], want: tuple[torch.Tensor, float]) -> None:
    inv, attn = got
    want_inv = want[0].double().numpy()
    assert_close(inv, want_inv, atol=0, rtol=RTOL, backend="numpy", dtype="float64")
    assert attn == pytest.approx(float(want[1]), rel=1e-12, abs=0)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_matches_transformers_rotary_embedding(name: str) -> None:
    d, build = FAMILIES[name]
    frozen = copy.deepcopy(d)
    cfg, per_layer = build(d)
    for layer_type, want in per_layer.items():
        _compare(rope_frequencies(d, layer_type=layer_type), want)  # the config.json dict
        _compare(rope_frequencies(cfg, layer_type=layer_type), want)  # the config object
    assert d == frozen, "nothing may mutate the config"


@pytest.mark.parametrize("seq_len", [0, 4096, 4097, 131072])
def test_phi3_long_factors_match_transformers(seq_len: int) -> None:
    cfg = transformers.Phi3Config(**copy.deepcopy(PHI_3_5_MINI))
    want = ROPE_INIT_FUNCTIONS["longrope"](cfg, seq_len=seq_len)
    _compare(rope_frequencies(PHI_3_5_MINI, seq_len=seq_len), want)
    _compare(rope_frequencies(cfg, seq_len=seq_len), want)


def test_proportional_matches_transformers_gemma4() -> None:
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    cfg = Gemma4TextConfig()  # full attention: proportional, a quarter of a 512 head
    emb = Gemma4TextRotaryEmbedding(cfg)
    for layer_type in ("full_attention", "sliding_attention"):
        want = (getattr(emb, f"{layer_type}_inv_freq"), 1.0)
        _compare(rope_frequencies(cfg, layer_type=layer_type), want)
    inv, _ = rope_frequencies(cfg, layer_type="full_attention")
    assert inv.shape == (256,) and np.count_nonzero(inv) == 64


def test_legacy_neox_keys_are_read() -> None:
    # A non-default base and fraction, to see that each key is read (not a published model).
    d = {**PYTHIA_410M, "rotary_emb_base": 25000, "rotary_pct": 0.5}
    cfg = transformers.GPTNeoXConfig(**copy.deepcopy(d))
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    emb = GPTNeoXRotaryEmbedding(cfg)
    _compare(rope_frequencies(d), (emb.inv_freq, 1.0))
    inv, _ = rope_frequencies(d)
    assert inv.shape == (16,) and inv[1] == pytest.approx(25000 ** (-2 / 32), rel=1e-15)


# --------------------------------------------------------------------------- apply_rope


def _hf_rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rot: int):
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x1, x2 = x_rot[..., : rot // 2], x_rot[..., rot // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)


@pytest.mark.parametrize(
    ("name", "layer_type"),
    [
        ("llama-3.1-8b", None),
        ("pythia-410m", None),
        ("phi-3.5-mini", None),
        ("deepseek-v3", None),
        ("gemma-3-4b", "full_attention"),
        ("gemma-3-4b", "sliding_attention"),
    ],
)
def test_apply_rope_with_a_config_matches_transformers(name: str, layer_type: str | None) -> None:
    d, build = FAMILIES[name]
    cfg, per_layer = build(d)
    inv_freq, attention = per_layer[layer_type]
    head_dim = rope_config_for_layer(d, layer_type).get("head_dim") if layer_type else None
    head_dim = head_dim or d.get("qk_rope_head_dim") or d["hidden_size"] // d["num_attention_heads"]
    positions = torch.arange(300, 310)
    x = torch.randn(
        2, 10, head_dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    angles = positions[:, None].double() * inv_freq.double()
    emb = torch.cat((angles, angles), dim=-1)
    want = _hf_rotate_half(x, emb.cos() * attention, emb.sin() * attention, emb.shape[-1])
    for scaling in (d, cfg):
        got = apply_rope(x, positions, scaling=scaling, layer_type=layer_type)
        # transformers' float32 frequencies: angle error ~ 310 * 3e-6 * |w|
        assert_close(got, want, atol=3e-3, backend="torch")  # same dtype and device


def test_whole_head_rotation_of_pythia_would_be_far_off() -> None:
    # What ignoring rotary_pct costs: scores q.k at distance 7 with the whole 64-feature head
    # rotated instead of its first 16 features.
    gen = np.random.default_rng(0)
    q, k = gen.standard_normal((2, 64))
    right = apply_rope(q, 107, scaling=PYTHIA_410M) @ apply_rope(k, 100, scaling=PYTHIA_410M)
    wrong = apply_rope(q, 107) @ apply_rope(k, 100)
    assert abs(wrong - right) > 0.1 * abs(right)


# --------------------------------------------------------------------------- layer types


def test_gemma3_needs_and_honours_layer_type() -> None:
    with pytest.raises(ValueError, match=r"per layer type.*layer_type="):
        rope_frequencies(GEMMA_3_4B_TEXT)
    with pytest.raises(ValueError, match="per layer type"):
        apply_rope(np.ones((2, 256)), [0, 1], scaling=GEMMA_3_4B_TEXT)
    with pytest.raises(ValueError, match="Unknown layer_type 'chunked_attention'"):
        rope_frequencies(GEMMA_3_4B_TEXT, layer_type="chunked_attention")
    full, _ = rope_frequencies(GEMMA_3_4B_TEXT, layer_type="full_attention")
    local, _ = rope_frequencies(GEMMA_3_4B_TEXT, layer_type="sliding_attention")
    assert_close(full, 1e6 ** (-np.arange(0, 256, 2) / 256) / 8, atol=0, rtol=1e-14)
    assert_close(local, 1e4 ** (-np.arange(0, 256, 2) / 256), atol=0, rtol=1e-14)
    for t in ("full_attention", "sliding_attention"):
        same = rope_frequencies(rope_config_for_layer(GEMMA_3_4B_TEXT, t))[0]
        assert_equal(same, rope_frequencies(GEMMA_3_4B_TEXT, layer_type=t)[0])


def test_flat_config_accepts_its_declared_layer_types() -> None:
    cfg = transformers.Qwen2Config(**copy.deepcopy(QWEN2_7B_INSTRUCT))
    assert "full_attention" in cfg.to_dict()["layer_types"]
    assert_equal(rope_frequencies(cfg, layer_type="full_attention")[0], rope_frequencies(cfg)[0])
    with pytest.raises(ValueError, match="Unknown layer_type 'sliding_attention'"):
        rope_frequencies(cfg, layer_type="sliding_attention")
    with pytest.raises(ValueError, match="scaling is None"):
        apply_rope(np.ones((2, 8)), [0, 1], layer_type="full_attention")
    with pytest.raises(ValueError, match="rope-parameters dict"):
        apply_rope(np.ones((2, 8)), [0, 1], scaling={"rope_type": "default"}, layer_type="x")


def test_torch_layer_takes_a_config_object_and_layer_type() -> None:
    from pe_core.layers.torch import RotaryEmbedding

    cfg = transformers.Gemma3TextConfig(**copy.deepcopy(GEMMA_3_4B_TEXT))
    layer = RotaryEmbedding(256, scaling=cfg, layer_type="sliding_attention")
    assert layer.layer_type == "sliding_attention"
    q = torch.randn(1, 2, 5, 256, generator=torch.Generator().manual_seed(1))
    got, _ = layer(q, q)
    want = apply_rope(q, range(5), scaling=GEMMA_3_4B_TEXT, layer_type="sliding_attention")
    assert_equal(got, want, backend="torch")  # want is torch too: same dtype and device
    with pytest.raises(ValueError, match="pass layer_type="):
        RotaryEmbedding(256, scaling=cfg)


@pytest.mark.slow  # imports JAX, Flax, Keras and TensorFlow
def test_flax_and_keras_layers_take_layer_type() -> None:
    pytest.importorskip("flax")
    keras_layers = pytest.importorskip("pe_core.layers.keras")
    from pe_core.layers.flax import LinenRotaryEmbedding, RotaryEmbedding

    q = np.random.default_rng(2).standard_normal((1, 5, 256)).astype(np.float32)
    want = apply_rope(q, range(5), scaling=GEMMA_3_4B_TEXT, layer_type="full_attention")
    nnx_layer = RotaryEmbedding(256, scaling=GEMMA_3_4B_TEXT, layer_type="full_attention")
    assert_close(nnx_layer(q, q)[0], want, atol=1e-6, rtol=1e-7, backend="jax")
    linen = LinenRotaryEmbedding(256, scaling=GEMMA_3_4B_TEXT, layer_type="full_attention")
    assert_close(linen.apply({}, q, q)[0], want, atol=1e-6, rtol=1e-7, backend="jax")
    layer = keras_layers.RotaryEmbedding(256, scaling=GEMMA_3_4B_TEXT, layer_type="full_attention")
    assert_close(layer(q, q)[0], want, atol=1e-6, rtol=1e-7)
    config = layer.get_config()
    assert config["layer_type"] == "full_attention"
    assert type(layer).from_config(config).get_config() == config


# --------------------------------------------------------------------------- bad configs


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"partial_rotary_factor": 0.5}, "rotary_pct"),
        ({"rope_theta": 500000.0}, "rotary_emb_base"),
        ({"n_embd": 2048}, "n_embd"),
        ({"n_positions": 1024}, "n_positions"),
    ],
)
def test_conflicting_legacy_keys_are_errors(change: dict, match: str) -> None:
    with pytest.raises(ValueError, match=f"Conflicting keys.*{match}"):
        rope_frequencies(
            {**PYTHIA_410M, **change, "rope_scaling": {"type": "dynamic", "factor": 2}}
        )


def test_conflicting_rotary_dim_and_type_keys() -> None:
    with pytest.raises(ValueError, match=r"Conflicting keys: rotary_dim=64 and partial_rotary"):
        rope_frequencies({**GPT_J_6B, "partial_rotary_factor": 0.5})
    assert rope_frequencies({**GPT_J_6B, "partial_rotary_factor": 0.25})[0].shape == (32,)
    bad = {"head_dim": 8, "rope_scaling": {"type": "linear", "rope_type": "yarn", "factor": 2}}
    with pytest.raises(ValueError, match="rope_type='yarn' and type='linear'"):
        rope_frequencies(bad)


def test_unknown_rope_keys_are_errors_naming_them() -> None:
    d = copy.deepcopy(LLAMA_3_1_8B)
    d["rope_scaling"]["beta_fast"] = 32
    with pytest.raises(ValueError, match=r"Unknown key 'beta_fast'.*'llama3'"):
        rope_frequencies(d)
    phimoe = copy.deepcopy(PHI_3_5_MINI)
    phimoe["rope_scaling"]["mscale"] = 1.243  # yarn's key (PhiMoE's are short_/long_mscale)
    with pytest.raises(ValueError, match="Unknown key 'mscale'"):
        rope_frequencies(phimoe)
    # top-level keys of a real config.json are many and not the rope dict's business
    assert rope_frequencies({**MISTRAL_7B_V0_1, "anything_else": 1})[0].shape == (64,)


def test_missing_keys_are_key_and_value_errors() -> None:
    d = copy.deepcopy(LLAMA_3_1_8B)
    del d["rope_scaling"]["low_freq_factor"]
    for caught in (KeyError, ValueError, MissingRopeKeyError):
        with pytest.raises(caught, match="requires the key 'low_freq_factor'"):
            rope_frequencies(d)
    with pytest.raises(KeyError, match="max_position_embeddings"):
        rope_frequencies({"head_dim": 8, "rope_scaling": {"type": "dynamic", "factor": 2.0}})
    with pytest.raises(KeyError, match="'head_dim'"):
        rope_frequencies({"hidden_size": 64})


@pytest.mark.parametrize("value", [-1, 0, 0.0, float("inf")])
@pytest.mark.parametrize("rope_type", ["yarn", "longrope"])
def test_attention_factor_must_be_positive(rope_type: str, value: float) -> None:
    params = {"yarn": {"factor": 4.0}, "longrope": {"short_factor": [1.0] * 4}}[rope_type]
    params = {**params, "long_factor": [1.0] * 4} if rope_type == "longrope" else params
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 8192,
        "rope_scaling": {"rope_type": rope_type, "attention_factor": value, **params},
    }
    with pytest.raises(ValueError, match="attention_factor"):
        rope_frequencies(cfg)


@pytest.mark.parametrize("rope_type", ["linear", "dynamic", "yarn", "llama3", "proportional"])
@pytest.mark.parametrize("factor", [1e-320, 0.0, -2.0, float("nan"), True])
def test_factor_must_be_a_positive_normal_number(rope_type: str, factor: float) -> None:
    extra = {"low_freq_factor": 1.0, "high_freq_factor": 4.0} if rope_type == "llama3" else {}
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": rope_type, "factor": factor, **extra},
    }
    with pytest.raises(ValueError, match=f"factor for rope_type '{rope_type}'"):
        rope_frequencies(cfg)


def test_overflowing_frequencies_are_errors() -> None:
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "dynamic", "factor": 1e300},
    }
    with pytest.raises(ValueError, match="not finite and > 0"):
        rope_frequencies(cfg, seq_len=10**6)


@pytest.mark.parametrize(
    "short_factor",
    ["1.0", 2.0, [1.0, 1.0, 1.0], [1.0, "a", 1.0, 1.0], [1.0, [2.0], 1.0, 1.0], [1.0, -1.0, 1, 1]],
)
def test_factor_list_errors_name_the_key(short_factor: object) -> None:
    cfg = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": short_factor,
            "long_factor": [1.0] * 4,
        },
    }
    with pytest.raises(ValueError, match="short_factor for rope_type 'longrope'"):
        rope_frequencies(cfg)


def test_config_objects_and_wrong_types() -> None:
    cfg = transformers.LlamaConfig(**copy.deepcopy(LLAMA_3_1_8B))
    x = np.ones((3, 128), dtype=np.float32)
    want = apply_rope(x, [0, 1, 2], scaling=LLAMA_3_1_8B)
    assert_equal(apply_rope(x, [0, 1, 2], scaling=cfg), want, dtype="float32")
    with pytest.raises(TypeError, match="or an object with to_dict"):
        rope_frequencies(object())
    with pytest.raises(TypeError, match="layer_type must be a string"):
        rope_frequencies(GEMMA_3_1B, layer_type=1)
    assert math.isclose(rope_frequencies(cfg)[0][-1], 500000.0 ** (-126 / 128) / 8, rel_tol=1e-15)


def test_seq_len_zero_is_the_init_time_rope_for_dynamic_as_in_transformers() -> None:
    # transformers' own rope tests pass seq_len=0 for the short longrope factors (above);
    # for dynamic, max(0, max_position_embeddings): the init-time frequencies
    d = {"head_dim": 16, "max_position_embeddings": 32}
    d["rope_scaling"] = {"rope_type": "dynamic", "factor": 4.0}
    cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, **copy.deepcopy(d))
    want = ROPE_INIT_FUNCTIONS["dynamic"](cfg, seq_len=0)
    _compare(rope_frequencies(d, seq_len=0), want)
    assert np.array_equal(rope_frequencies(d, seq_len=0)[0], rope_frequencies(d)[0])
    short = rope_frequencies(PHI_3_5_MINI, seq_len=0)[0]
    assert np.array_equal(short, rope_frequencies(PHI_3_5_MINI)[0])
    with pytest.raises(ValueError, match=r"seq_len must be an integer >= 0\. Received: -1"):
        rope_frequencies(d, seq_len=-1)


def test_real_configs_hold_no_key_that_looks_misspelt() -> None:
    configs = [v for k, v in globals().items() if k.isupper() and isinstance(v, dict)]
    configs += [transformers.LlamaConfig(), transformers.Phi3Config(), transformers.GPTJConfig()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RopeConfigWarning)
        for config in configs:
            check_config_keys(config)
        # keys of transformers' configs one or two edits from a read key, not misspellings
        near = ("qk_nope_head_dim", "v_head_dim", "n_heads", "d_head", "hidden_sizes", "layer_type")
        check_config_keys({**dict.fromkeys(near, 1), **dict.fromkeys(READ_CONFIG_KEYS, 1)})
    with pytest.warns(RopeConfigWarning, match=r"'rope_thetta' \(did you mean 'rope_theta'\?\)"):
        rope_frequencies({**LLAMA_3_1_8B, "rope_thetta": 1e6})
