"""``pe_core.integrations.transformers``: transformers models made exact, family by family.

Every model is a tiny random-weight one built from its config (nothing downloaded).
The float64 reference is the model in float64 (``model.double()``) with rotary
embeddings computed in float64 too: transformers keeps ``inv_freq`` and the cos/sin in
float32 even after ``.double()``, so :func:`_float64_rotary` below replaces them with
``cat(f, f).cos() * attention_factor``, ``f = position_ids * w`` in float64 (the
formula of transformers' ``LlamaRotaryEmbedding.forward``), ``w`` the float64
frequencies of :func:`pe_core.rope_scaling.rope_frequencies` (checked against
transformers' own float32 ``inv_freq`` when a module is patched, and in the RoPE
scaling parity tests).
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from conftest import HANG_TIMEOUT

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pe_core.host_reads import forbid_host_reads  # noqa: E402
from pe_core.integrations.transformers import (  # noqa: E402
    patch_rotary_embeddings,
    patched_rotary_embeddings,
    unpatch_rotary_embeddings,
)
from pe_core.rope_scaling import rope_frequencies  # noqa: E402

#: Token ids shared by every check (vocab 64; 0 is padding).
IDS = [[5, 17, 3, 42, 9, 28, 11, 60]]

#: Positions of the accuracy check: around 1e5.
FAR = 100_000

_TINY = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=2,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    # sharper attention than the default 0.02 init, so that angle errors show in logits
    initializer_range=0.5,
)

_SHORT = [1.0 + 0.1 * i for i in range(8)]
_LONG = [1.5 + 0.3 * i for i in range(8)]

#: family -> (config class, model class, config keywords)
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama-default": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama-linear": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}},
    ),
    "llama-llama3": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "max_position_embeddings": 512,
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
                "rope_theta": 500000.0,
            },
        },
    ),
    "llama-yarn": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "max_position_embeddings": 256,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "rope_theta": 10000.0,
            },
        },
    ),
    "llama-dynamic": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            "max_position_embeddings": 64,
            "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
        },
    ),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "phi3-longrope": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {
            "max_position_embeddings": 256,
            "original_max_position_embeddings": 64,
            "rope_parameters": {
                "rope_type": "longrope",
                "short_factor": _SHORT,
                "long_factor": _LONG,
                "rope_theta": 10000.0,
            },
        },
    ),
    "gpt-neox-partial": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"rotary_pct": 0.5}),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            "num_hidden_layers": 2,
            "head_dim": 16,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
}


def build(family: str) -> Any:
    config_name, model_name, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**{**_TINY, **extra})
    return getattr(transformers, model_name)(config).eval()


def rotary_modules(model: Any) -> list[Any]:
    return [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]


def _float64_rotary(module: Any) -> Callable[..., Any]:
    """A float64 forward for a transformers rotary module (see the module docstring)."""
    config = module.config
    mrope = hasattr(module, "mrope_section")  # Qwen2-VL: its own recomposition_frequencies

    def forward(x: Any, position_ids: Any, layer_type: str | None = None) -> Any:
        seq_len = int(position_ids.max()) + 1  # dynamic / longrope: this call's length
        inv_freq, factor = rope_frequencies(config, seq_len=seq_len, layer_type=layer_type)
        w = torch.tensor(inv_freq, dtype=torch.float64)
        if mrope:
            freqs = position_ids.expand(3, -1, -1)[..., None].double() * w
            cos, sin = freqs.cos() * factor, freqs.sin() * factor
            return module.recomposition_frequencies(cos), module.recomposition_frequencies(sin)
        freqs = position_ids[..., None].double() * w
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * factor, emb.sin() * factor

    return forward


def float64_reference(model: Any) -> Any:
    ref = copy.deepcopy(model).double()
    for module in rotary_modules(ref):
        module.forward = _float64_rotary(module)
    return ref


def logits(model: Any, **kwargs: Any) -> np.ndarray:
    with torch.no_grad():
        out = model(torch.tensor(IDS), **kwargs).logits
    return out.double().numpy()


def far_positions() -> Any:
    return torch.arange(FAR, FAR + len(IDS[0]))[None]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_short_parity_and_far_accuracy(family: str) -> None:
    model = build(family)
    reference = float64_reference(model)
    before, before_far = logits(model), logits(model, position_ids=far_positions())
    exact_far = logits(reference, position_ids=far_positions())

    assert patch_rotary_embeddings(model) is model
    after, after_far = logits(model), logits(model, position_ids=far_positions())
    scale = np.abs(before).max()
    # short inputs: the unpatched model's logits within float32 rounding
    np.testing.assert_allclose(after, before, rtol=0, atol=2e-6 * scale)
    # around 1e5: closer to the float64 model than the unpatched float32 model is
    err_patched = np.abs(after_far - exact_far).max()
    err_unpatched = np.abs(before_far - exact_far).max()
    assert err_patched < err_unpatched / 10, (family, err_patched, err_unpatched)
    assert err_patched < 1e-5 * scale, (family, err_patched)


@pytest.mark.parametrize("family", ["llama-yarn", "gemma3"])
def test_generate_gives_the_same_tokens(family: str) -> None:
    model = build(family)
    prompt = torch.tensor(IDS)
    kwargs = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        before = model.generate(prompt, **kwargs)
        with patched_rotary_embeddings(model):
            after = model.generate(prompt, **kwargs)
    assert after.shape == (1, len(IDS[0]) + 4)
    assert torch.equal(after, before)


def test_longrope_switches_to_long_factors_as_transformers_does() -> None:
    """Past ``original_max_position_embeddings`` (64) the long factors; the choice is
    made on the device, per call, as in transformers."""
    model = build("phi3-longrope")
    module = rotary_modules(model)[0]
    original = copy.deepcopy(module)
    patch_rotary_embeddings(model)
    x = torch.zeros(1)
    for stop in (10, 70, 30, 200):
        pos = torch.arange(stop - 8, stop)[None]
        want, got = original(x, pos), module(x, pos)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=5e-5)


def test_dynamic_follows_the_modules_growth_and_reset() -> None:
    """``dynamic`` grows with the longest sequence seen (max_position_embeddings 64)
    and returns to the original base for short ones: call by call as transformers."""
    model = build("llama-dynamic")
    module = rotary_modules(model)[0]
    original = copy.deepcopy(module)
    patch_rotary_embeddings(model)
    x = torch.zeros(1)
    for stop in (100, 80, 150, 10, 90):
        pos = torch.arange(stop)[None]
        want, got = original(x, pos), module(x, pos)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=5e-5)
    # the original module's own state is untouched by the patched calls
    assert rotary_modules(build("llama-dynamic"))[0].max_seq_len_cached == 64


@pytest.mark.parametrize("family", ["llama-yarn", "phi3-longrope", "gemma3"])
def test_patched_module_reads_nothing_back(family: str) -> None:
    model = patch_rotary_embeddings(build(family))
    module = rotary_modules(model)[0]
    extra = ("full_attention",) if family == "gemma3" else ()
    x = torch.zeros(1, dtype=torch.bfloat16)
    with forbid_host_reads("torch"):
        cos, sin = module(x, far_positions(), *extra)
    assert cos.dtype == sin.dtype == torch.bfloat16
    assert cos.shape == sin.shape == (1, len(IDS[0]), 16)


def test_float64_model_gets_float64_exact_cos_sin() -> None:
    model = patch_rotary_embeddings(build("llama-default")).double()
    module = rotary_modules(model)[0]
    pos = far_positions()
    cos, sin = module(torch.zeros(1, dtype=torch.float64), pos)
    want_cos, want_sin = _float64_rotary(module)(None, pos)
    assert cos.dtype == torch.float64
    # the reference's float64 product p * w is off by up to about 1e5 * 2**-53
    np.testing.assert_allclose(cos.numpy(), want_cos.numpy(), rtol=0, atol=3e-11)
    np.testing.assert_allclose(sin.numpy(), want_sin.numpy(), rtol=0, atol=3e-11)


#: int64 positions across the whole range (both signs, the int32 and int64 limits).
WIDE_POSITIONS = [0, 1, -1, 12_345, FAR, 2**31 - 1, 2**31, -(2**31) - 5, 2**40 + 3]
WIDE_POSITIONS += [10**15, 2**62 + 17, -(2**63), 2**63 - 1, -7 * 10**17]


def _mpmath_cos_sin(positions: list[int], omegas: tuple[float, ...]) -> np.ndarray:
    """cos and sin of ``p * w`` at 60 digits, ``p`` and ``w`` the exact numbers they
    are: shape ``(2, len(positions), len(omegas))``."""
    out = np.empty((2, len(positions), len(omegas)))
    with mpmath.workdps(60):
        for i, p in enumerate(positions):
            for j, w in enumerate(omegas):
                angle = mpmath.mpf(p) * mpmath.mpf(w)
                out[0, i, j], out[1, i, j] = float(mpmath.cos(angle)), float(mpmath.sin(angle))
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_integer_positions_are_exact_over_the_whole_int64_range(dtype: str) -> None:
    """int64 and int32 position ids (a decode step's few and a prefill's many, which
    compute each pair once) against mpmath; float position ids take the general kernel."""
    module = rotary_modules(patch_rotary_embeddings(build("llama-default")))[0]
    omegas, _ = rope_frequencies(module.config)
    want = _mpmath_cos_sin(WIDE_POSITIONS, tuple(omegas))
    x = torch.zeros(1, dtype=getattr(torch, dtype))
    atol = 5e-7 if dtype == "float32" else 2e-15
    small = [p for p in WIDE_POSITIONS if abs(p) < 2**31]
    keep = [WIDE_POSITIONS.index(p) for p in small]
    cases = [
        (torch.tensor(WIDE_POSITIONS)[None], slice(None)),  # few positions: full width
        (torch.tensor(WIDE_POSITIONS * 20)[None], slice(None)),  # many: pairs once
        (torch.tensor(small, dtype=torch.int32)[None], keep),
        (torch.tensor(small, dtype=torch.float64)[None], keep),  # the general kernel
    ]
    n = len(omegas)
    for pos, rows in cases:
        cos, sin = module(x, pos)
        assert cos.dtype == sin.dtype == x.dtype and cos.shape == (1, pos.shape[1], 2 * n)
        count = len(want[0, rows])
        for got, expected in zip((cos, sin), want[:, rows], strict=True):
            got = got[0, :count].double().numpy()
            np.testing.assert_allclose(got[:, :n], expected, rtol=0, atol=atol)
            np.testing.assert_array_equal(got[:, n:], got[:, :n])


def test_torch_compile_fullgraph() -> None:
    """The patched model compiles with fullgraph=True (backend "eager": the graph
    capture is what the patch could break) and gives the eager logits."""
    model = patch_rotary_embeddings(build("llama-default"))
    pos = far_positions()
    eager = logits(model, position_ids=pos)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            compiled = torch.compile(model, backend="eager", fullgraph=True)
            out = compiled(torch.tensor(IDS), position_ids=pos).logits.double().numpy()
    finally:
        torch._dynamo.reset()
    np.testing.assert_allclose(out, eager, rtol=0, atol=1e-6)


def test_save_and_load_round_trip_has_no_pe_core_state(tmp_path: Path) -> None:
    model = build("gemma3")
    keys = set(model.state_dict())
    before = logits(model)
    patch_rotary_embeddings(model)
    assert set(model.state_dict()) == keys  # no new keys or buffers
    patched_far = logits(model, position_ids=far_positions())
    model.save_pretrained(tmp_path)
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "model.safetensors"))
    assert not [k for k in saved if "inv_freq" in k or "pe_core" in k]
    loaded = type(model).from_pretrained(tmp_path).eval()
    assert not rotary_modules(loaded)[0].__dict__.get("forward")  # loads unpatched
    np.testing.assert_array_equal(logits(loaded), before)
    patch_rotary_embeddings(loaded)
    np.testing.assert_array_equal(logits(loaded, position_ids=far_positions()), patched_far)


def test_unpatch_and_context_manager_restore_the_original() -> None:
    model = build("llama-yarn")
    before = logits(model, position_ids=far_positions())
    patch_rotary_embeddings(patch_rotary_embeddings(model))  # twice: patched once
    assert not np.array_equal(logits(model, position_ids=far_positions()), before)
    assert unpatch_rotary_embeddings(model) is model
    np.testing.assert_array_equal(logits(model, position_ids=far_positions()), before)
    assert "forward" not in vars(rotary_modules(model)[0])
    with patched_rotary_embeddings(model) as same:
        assert same is model
        assert not np.array_equal(logits(model, position_ids=far_positions()), before)
    np.testing.assert_array_equal(logits(model, position_ids=far_positions()), before)
    # a model patched before the block stays patched after it
    patch_rotary_embeddings(model)
    inside = logits(model, position_ids=far_positions())
    with patched_rotary_embeddings(model):
        pass
    np.testing.assert_array_equal(logits(model, position_ids=far_positions()), inside)


def test_gemma3_layer_type_is_required_and_checked() -> None:
    model = patch_rotary_embeddings(build("gemma3"))
    module = rotary_modules(model)[0]
    with pytest.raises(ValueError, match=r"Gemma3RotaryEmbedding.*'full_attention'.*None"):
        module(torch.zeros(1), far_positions())


def test_model_without_rotary_embedding_is_refused() -> None:
    config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    with pytest.raises(ValueError, match="GPT2LMHeadModel has no rotary embedding"):
        patch_rotary_embeddings(model)
    with pytest.raises(TypeError, match=r"torch\.nn\.Module.*Received: dict"):
        patch_rotary_embeddings({})  # type: ignore[type-var]


def test_rotary_embedding_of_another_kind_is_refused_and_nothing_is_patched() -> None:
    """A rotary module whose forward computes none of the layouts pe_core knows (here:
    sin and cos swapped) is named in the error, and no module of the model is patched."""
    model = build("llama-default")
    standard = rotary_modules(model)[0]

    class SwappedRotaryEmbedding(type(standard)):  # type: ignore[misc]
        def forward(self, x: Any, position_ids: Any) -> Any:
            freqs = position_ids[..., None].float() * self.inv_freq
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.sin(), emb.cos()

    model.extra = SwappedRotaryEmbedding(model.config)
    with pytest.raises(ValueError, match=r"SwappedRotaryEmbedding at 'extra'.*does not"):
        patch_rotary_embeddings(model)
    assert "forward" not in vars(standard)


def test_frequencies_that_disagree_with_the_config_are_refused() -> None:
    model = build("llama-default")
    module = rotary_modules(model)[0]
    module.original_inv_freq.mul_(1.01)  # e.g. a module edited after construction
    with pytest.raises(ValueError, match=r"LlamaRotaryEmbedding.*differ from pe_core"):
        patch_rotary_embeddings(model)


def test_import_pe_core_does_not_import_the_integration() -> None:
    """``import pe_core`` leaves the integration (and its frameworks) alone, and the
    ``pe_core.integrations`` package itself imports no framework."""
    code = (
        "import sys, pe_core, pe_core.integrations\n"
        "assert 'pe_core.integrations.transformers' not in sys.modules\n"
        "assert not {'torch', 'transformers'} & set(sys.modules), sorted(sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=HANG_TIMEOUT)


def test_a_patched_model_copies_and_pickles_with_its_patch() -> None:
    model = patch_rotary_embeddings(build("llama-dynamic"))
    far = logits(model, position_ids=far_positions())
    copied = copy.deepcopy(model)
    pickled = pickle.loads(pickle.dumps(model))
    for other in (copied, pickled):
        np.testing.assert_array_equal(logits(other, position_ids=far_positions()), far)
    # the copy's dynamic state is its own: a short call resets the copy only
    logits(copied)
    assert rotary_modules(copied)[0].forward.ropes[None].cached == 64
    assert rotary_modules(model)[0].forward.ropes[None].cached == FAR + len(IDS[0])
    assert "forward" not in vars(rotary_modules(unpatch_rotary_embeddings(pickled))[0])


def test_mrope_qwen2_vl_short_parity_and_far_accuracy() -> None:
    """Qwen2-VL's M-RoPE: the module's own recomposition_frequencies on exact cos/sin of
    the three rows of position ids (t, h, w), distinct here."""
    config = transformers.Qwen2VLTextConfig(
        **{k: v for k, v in _TINY.items() if k not in ("bos_token_id", "eos_token_id")},
        rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1e4},
    )
    torch.manual_seed(0)
    model = transformers.Qwen2VLTextModel(config).eval()
    reference = float64_reference(model)
    steps = torch.arange(len(IDS[0]))
    near = torch.stack((steps, steps // 2, steps % 3))[:, None]  # (3, batch, seq)

    def hidden(m: Any, pos: Any) -> np.ndarray:
        with torch.no_grad():
            out = m(torch.tensor(IDS), position_ids=pos).last_hidden_state
        return out.double().numpy()

    before, before_far = hidden(model, near), hidden(model, near + FAR)
    exact_far = hidden(reference, near + FAR)
    patch_rotary_embeddings(model)
    assert "forward" in vars(rotary_modules(model)[0])
    after, after_far = hidden(model, near), hidden(model, near + FAR)
    scale = np.abs(before).max()
    np.testing.assert_allclose(after, before, rtol=0, atol=2e-6 * scale)
    err_patched = np.abs(after_far - exact_far).max()
    err_unpatched = np.abs(before_far - exact_far).max()
    assert err_patched < err_unpatched / 10, (err_patched, err_unpatched)
