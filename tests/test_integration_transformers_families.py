"""``patch_rotary_embeddings`` on the rotary modules of many transformers families.

Each rotary module is built from a small config of its family (nothing downloaded),
patched, and called at positions around 1e5; the reference is the same module built
and called with transformers' own code run in float64 (every float32 request made a
float64 one: :class:`pe_core.integrations._hf_float64.Float64Mode`), i.e. the module's
own formula without float32 rounding. ``benchmarks/hf_coverage.py`` does the same for
every family of the installed transformers, whole models included.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pe_core.integrations._hf_float64 import Float64Mode  # noqa: E402
from pe_core.integrations.transformers import (  # noqa: E402
    patch_rotary_embeddings,
    unpatch_rotary_embeddings,
)

FAR = 100_000

#: Largest cos/sin error of a patched module at 1e5 (the unpatched ones: 2e-3 to 7e-3).
EXACT = 4e-7


def _config(model_type: str, sub: str | None, **settings: Any) -> Any:
    config = transformers.AutoConfig.for_model(model_type)
    if sub is not None:
        config = getattr(config, sub)
    for key, value in settings.items():
        setattr(config, key, value)
    return config


def _module(model_type: str, cls: str, config: Any, **kwargs: Any) -> Any:
    folder = transformers.models.auto.configuration_auto.model_type_to_module_name(model_type)
    module = importlib.import_module(f"transformers.models.{folder}.modeling_{folder}")
    return getattr(module, cls)(config, **kwargs)


#: id -> (model type, rotary class, sub-config or None, config settings, class kwargs)
CASES: dict[str, tuple[str, str, str | None, dict[str, Any], dict[str, Any]]] = {
    # a module's recomposition that takes a layer type (crashed before)
    "cohere_compass": (
        "cohere_compass",
        "CohereCompassRotaryEmbedding",
        "text_config",
        {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
        {},
    ),
    # head_dim through transformers' attribute_map (kv_channels): refused before
    "jetmoe": ("jetmoe", "JetMoeRotaryEmbedding", None, {}, {}),
    "zamba2": ("zamba2", "Zamba2RotaryEmbedding", None, {"use_mem_rope": True}, {}),
    # an attention-side key of the rope dict that the rotary ignores: refused before
    "ministral3": ("ministral3", "Ministral3RotaryEmbedding", None, {}, {}),
    # the module's own rope type ("default" for the unscaled one) over the config's
    "molmo2-unscaled-longrope": (
        "molmo2",
        "Molmo2RotaryEmbedding",
        "text_config",
        {
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 1e4,
                "short_factor": [1.0 + 0.01 * i for i in range(64)],
                "long_factor": [1.5 + 0.05 * i for i in range(64)],
                "original_max_position_embeddings": 4096,
            }
        },
        {"scaled": False},
    ),
    # layouts: each frequency twice in a row, one column per pair, complex
    "cohere-interleaved": ("cohere", "CohereRotaryEmbedding", None, {}, {}),
    "gpt_oss-pairs": ("gpt_oss", "GptOssRotaryEmbedding", None, {}, {}),
    "deepseek_v2-complex": ("deepseek_v2", "DeepseekV2RotaryEmbedding", None, {}, {}),
    # M-RoPE over half the head, each frequency twice in a row (refused before: the
    # default config's sections do not fit its head; a checkpoint's config does)
    "glm4v-text": (
        "glm4v",
        "Glm4vTextRotaryEmbedding",
        "text_config",
        {
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "partial_rotary_factor": 0.5,
            }
        },
        {},
    ),
    # four M-RoPE axes (HunYuan-VL): before, probed with rows all alike, taken for cat(f, f)
    "hunyuan_vl-4-axes": (
        "hunyuan_vl",
        "HunYuanVLRotaryEmbedding",
        "text_config",
        {
            "head_dim": 128,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "mrope_section": [16, 16, 16, 16],
            },
        },
        {},
    ),
    # an empty rope_type dict and no rope_parameters (ESM): its default rope
    "esm": ("esm", "EsmRotaryEmbedding", None, {"vocab_size": 33}, {}),
    # vision towers: (2, n) position ids, recomposed by the module
    "qwen2_vl-vision": ("qwen2_vl", "Qwen2VLVisionRotaryEmbedding", "vision_config", {}, {}),
}


def _call(module: Any, dtype: Any) -> Any:
    x = torch.zeros(1, dtype=dtype)
    pos = torch.arange(FAR, FAR + 8)[None]
    if callable(getattr(module, "recomposition_frequencies", None)):
        vision = "Vision" in type(module).__name__
        rows = max(3, len(getattr(module, "mrope_section", None) or ()))
        pos = torch.cat([pos + 3 * i for i in range(2 if vision else rows)])
        pos = pos if vision else pos[:, None]
    args = (x, pos)
    if isinstance(module.rope_type, dict) and module.rope_type:
        args = (x, pos, sorted(module.rope_type)[0])
    with torch.no_grad():
        out = module(*args)
    return (out.real, out.imag) if isinstance(out, torch.Tensor) else out


def _float64(build: Any) -> Any:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode():
            module = build()
            return _call(module, torch.float64)
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("case", sorted(CASES))
def test_family_module_is_patched_exactly(case: str) -> None:
    model_type, cls, sub, settings, kwargs = CASES[case]

    def build() -> Any:
        return _module(model_type, cls, _config(model_type, sub, **settings), **kwargs)

    module = build()
    before = _call(module, torch.float32)
    want = _float64(build)
    patch_rotary_embeddings(module)
    got = _call(module, torch.float32)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    unpatched = max(float((b.double() - w).abs().max()) for b, w in zip(before, want, strict=True))
    assert err <= EXACT, (case, err)
    assert unpatched > 10 * err  # the check sees the float32 error it removes
    for g, b in zip(got, before, strict=True):
        assert g.shape == b.shape and g.dtype == b.dtype
    unpatch_rotary_embeddings(module)
    again = _call(module, torch.float32)
    for a, b in zip(again, before, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("model_type", ["gptj", "codegen"])
def test_sin_cos_table_modules_are_patched_exactly(model_type: str) -> None:
    """GPT-J and CodeGen's modules read a float32 ``(sin, cos)`` table (no config, no
    ``inv_freq``): patched, they give the float64 table's values at its last rows (their
    dtype, their shape), and a whole model's logits stay those of the table."""
    settings = dict(vocab_size=64, n_embd=64, n_layer=1, n_head=4, rotary_dim=8)
    config = transformers.AutoConfig.for_model(model_type, n_positions=4096, **settings)
    cls = "GPTJRotaryEmbedding" if model_type == "gptj" else "CodeGenRotaryEmbedding"
    module = _module(model_type, cls, config)
    x, pos = torch.zeros(1), torch.arange(4088, 4096)[None]
    before = module(x, pos)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode():
            want = _module(model_type, cls, config)(x.double(), pos)
    finally:
        torch.set_default_dtype(previous)
    patch_rotary_embeddings(module)
    got = module(x, pos)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    unpatched = max(float((b.double() - w).abs().max()) for b, w in zip(before, want, strict=True))
    assert err <= EXACT and unpatched > 10 * err, (err, unpatched)
    for g, b in zip(got, before, strict=True):
        assert g.shape == b.shape and g.dtype == b.dtype
    auto = {"gptj": "GPTJForCausalLM", "codegen": "CodeGenForCausalLM"}[model_type]
    torch.manual_seed(0)
    model = getattr(transformers, auto)(config).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        plain = model(ids).logits
        patch_rotary_embeddings(model)
        torch.testing.assert_close(model(ids).logits, plain, rtol=0.0, atol=1e-5)


def test_two_row_mrope_is_recomposed_not_taken_for_cat() -> None:
    """NeoMME's text module expands position ids to its 2 rows (row, column) and fails on 3:
    with rows all alike it computes ``cat(f, f)``, so only distinct rows tell its layout.
    Patched, it is exact at distinct far rows, per layer type."""
    config = _config("neomme", None)

    def build() -> Any:
        return _module("neomme", "NeoMMERotaryEmbedding", config)

    module = build()
    pos = torch.arange(FAR, FAR + 8)[None]
    pos = torch.cat([pos, 3 * pos + 1])[:, None]  # (2, 1, n)
    for layer_type in sorted(module.rope_type):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with Float64Mode(), torch.no_grad():
                want = build()(torch.zeros(1, dtype=torch.float64), pos, layer_type)
        finally:
            torch.set_default_dtype(previous)
        patch_rotary_embeddings(module)
        got = module(torch.zeros(1), pos, layer_type)
        err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
        assert err <= EXACT, (layer_type, err)
        unpatch_rotary_embeddings(module)


def _mistral_large4_rope(alpha: Any) -> Any:
    config = _config("mistral_large4", "text_config")  # yarn, factor 2048
    module = _module("mistral_large4", "MistralLarge4TextRotaryEmbedding", config)
    with torch.no_grad():
        module.alpha.copy_(alpha)
    return module


def _float64_cos_sin(alpha: Any, pos: Any) -> Any:
    """The module built and called in float64 (transformers' formula, no float32 rounding)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.no_grad():
            return _mistral_large4_rope(alpha.double())(torch.zeros(1), pos)
    finally:
        torch.set_default_dtype(previous)


def test_learned_alpha_is_patched_exactly_and_followed() -> None:
    """Mistral Large 4's text module scales its frequencies by a learned ``alpha``
    (``inv_freq * exp(alpha)``): patched, its cos/sin at 1e5 are the float64 ones for
    alpha's current value; an alpha changed in place (loaded, trained) is read again;
    while alpha's gradient is wanted the module's own forward runs (its gradient flows)."""
    torch.manual_seed(0)
    alpha = 0.1 * torch.randn(32)
    module = _mistral_large4_rope(alpha)
    pos = torch.arange(FAR, FAR + 8)[None]
    x = torch.zeros(1)
    want = _float64_cos_sin(alpha, pos)
    patch_rotary_embeddings(module)
    with torch.no_grad():
        got = module(x, pos)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    assert err <= EXACT, err
    with torch.no_grad():  # as load_state_dict copies a checkpoint's alpha
        module.alpha.copy_(-alpha)
        got = module(x, pos)
    want = _float64_cos_sin(-alpha, pos)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    assert err <= EXACT, err
    cos, _ = module(x, pos)  # grad enabled, alpha trainable: the module's own forward
    cos.sum().backward()
    assert module.alpha.grad is not None and bool(module.alpha.grad.abs().sum() > 0)


def test_other_learned_parameters_are_refused_by_name() -> None:
    """A rotary module with learned parameters other than one ``alpha`` per pair is
    refused: its forward may read them, its frequencies are not its config's."""
    module = _mistral_large4_rope(torch.zeros(32))
    module.beta = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match=r"MistralLarge4TextRotaryEmbedding at '<model>'.*beta"):
        patch_rotary_embeddings(module)
    assert "forward" not in vars(module)


def test_llama4_scaling_beta_and_refusals_name_the_module() -> None:
    """A rope dict key pe_core does not know (besides the ignored attention-side ones)
    refuses the module by name, never a bare config error."""
    config = _config("ministral3", None)
    module = _module("ministral3", "Ministral3RotaryEmbedding", config)
    module.config.rope_parameters = {**module.config.rope_parameters, "mystery_key": 1.0}
    module.original_inv_freq.mul_(1.01)
    with pytest.raises(ValueError, match=r"Ministral3RotaryEmbedding at '<model>'"):
        patch_rotary_embeddings(module)
    assert "forward" not in vars(module)


def test_whole_qwen2_vl_in_one_call() -> None:
    """A vision-language model, vision tower included, patched in one call; its outputs
    at ordinary inputs are the unpatched model's within float32 rounding."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": 160,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "mrope_section": [2, 3, 3],
            },
        },
        vision_config={
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 2,
            "spatial_merge_size": 1,
            "temporal_patch_size": 1,
        },
        image_token_id=150,
        video_token_id=151,
        vision_start_token_id=152,
    )
    model = Qwen2VLForConditionalGeneration(config).eval()
    pixels = torch.randn(16, 3 * 2 * 2)
    grid = torch.tensor([[1, 4, 4]])
    ids = torch.tensor([[5, 152] + [150] * 16 + [7, 9]])
    kinds = (ids == 150).int()  # mm_token_type_ids: 1 for image tokens
    inputs = dict(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, mm_token_type_ids=kinds)
    with torch.no_grad():
        before = model(**inputs).logits
        patch_rotary_embeddings(model)
        after = model(**inputs).logits
    patched = [m for m in model.modules() if "forward" in vars(m)]
    names = sorted(type(m).__name__ for m in patched)
    assert names == ["Qwen2VLRotaryEmbedding", "Qwen2VLVisionRotaryEmbedding"]
    torch.testing.assert_close(after, before, rtol=0.0, atol=1e-4)


def test_compiled_fullgraph_after_the_new_layouts() -> None:
    """An interleaved (Cohere) module patched runs under torch.compile(fullgraph=True)."""
    module = _module("cohere", "CohereRotaryEmbedding", _config("cohere", None))
    patch_rotary_embeddings(module)
    x = torch.zeros(1)
    pos = torch.arange(FAR, FAR + 4)[None]
    eager = module(x, pos)
    compiled = torch.compile(module, fullgraph=True, backend="eager")(x, pos)
    for a, b in zip(compiled, eager, strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)


def test_coverage_script_enumerates_the_families() -> None:
    """benchmarks/hf_coverage.py finds every model type with a rotary class (one per
    modeling folder), Llama, Qwen2-VL and DINOv3-ViT (a `RopePositionEmbedding`) among them."""
    hf_coverage = pytest.importorskip("benchmarks.hf_coverage")
    found = dict(hf_coverage.families())
    assert len(found) >= 150
    assert {"llama", "qwen2_vl", "cohere", "dinov3_vit", "sapiens2"} <= set(found)


def test_llama4_vision_table_is_rebuilt_in_float64() -> None:
    """Llama 4's vision rope returns its ``freqs_ci`` table (``forward(hidden_states)``):
    patched, the table is its config's, built by the class's own function in float64 and
    rounded once, for a large grid (96 x 96 patches); unpatched, the very buffer is back."""
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
    from transformers.models.llama4.modeling_llama4 import Llama4VisionRotaryEmbedding

    config = Llama4VisionConfig(
        hidden_size=64, num_attention_heads=2, image_size=14 * 96, patch_size=14
    )
    module = Llama4VisionRotaryEmbedding(config)
    original = module.freqs_ci
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode():
            want = torch.view_as_real(Llama4VisionRotaryEmbedding(config)(torch.zeros(1)))
    finally:
        torch.set_default_dtype(previous)
    assert want.dtype == torch.float64
    before = module(torch.zeros(1))
    patch_rotary_embeddings(module)
    got = module(torch.zeros(1))
    assert got.dtype == before.dtype and got.shape == before.shape
    err = float((torch.view_as_real(got).double() - want).abs().max())
    unpatched = float((torch.view_as_real(before).double() - want).abs().max())
    assert err <= 6e-8 and unpatched > 10 * err, (err, unpatched)
    assert "freqs_ci" not in module.state_dict()
    unpatch_rotary_embeddings(module)
    assert module.freqs_ci is original


def test_llama4_vision_model_in_one_call() -> None:
    """A whole Llama 4 vision tower patched in one call: its outputs stay the unpatched
    ones within float32 rounding."""
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
    from transformers.models.llama4.modeling_llama4 import Llama4VisionModel

    torch.manual_seed(0)
    config = Llama4VisionConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=128,
        image_size=56,
        patch_size=14,
        vision_output_dim=32,
        projector_input_dim=32,
        projector_output_dim=32,
    )
    model = Llama4VisionModel(config).eval()
    pixels = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        plain = model(pixels).last_hidden_state
        patch_rotary_embeddings(model)
        torch.testing.assert_close(model(pixels).last_hidden_state, plain, rtol=0, atol=1e-5)


def _eomt_rope() -> Any:
    config = _config("eomt_dinov3", None, hidden_size=64, num_attention_heads=2, patch_size=16)
    return _module("eomt_dinov3", "EomtDinov3RotaryEmbedding", config)


def test_dinov3_grid_rope_is_patched_exactly() -> None:
    """EoMT-DINOv3's rope (``forward(pixel_values)``, DINOv3's 2-D grid of patch centres):
    patched, a 300 x 200 grid gives the float64 cos/sin rounded once, in the pixels'
    dtype; training mode runs the module's own forward (its random augmentation)."""
    module = _eomt_rope().eval()
    pixels = torch.zeros(1, 3, 16 * 300, 16 * 200)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.no_grad():
            want = _eomt_rope().eval()(pixels.double())
    finally:
        torch.set_default_dtype(previous)
    before = module(pixels)
    patch_rotary_embeddings(module)
    got = module(pixels)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    assert err <= 6e-8, err  # one float32 rounding of the float64 values
    for g, b in zip(got, before, strict=True):
        assert g.shape == b.shape and g.dtype == b.dtype
    small = pixels[..., :64, :96]
    half = module(small.half())
    assert half[0].dtype == torch.float16
    torch.testing.assert_close(half[0].float(), module(small)[0], rtol=0.0, atol=1e-3)
    module.train()  # the module's own forward: its random rescale of the centres
    torch.manual_seed(0)
    trained = module(small)
    torch.manual_seed(0)
    own = _eomt_rope().train()(small)
    for t, o in zip(trained, own, strict=True):
        assert torch.equal(t, o)


def test_dinov3_grid_rope_with_other_frequencies_is_refused() -> None:
    module = _eomt_rope()
    module.inv_freq.mul_(1.01)
    with pytest.raises(ValueError, match=r"EomtDinov3RotaryEmbedding at '<model>'.*inv_freq"):
        patch_rotary_embeddings(module)
    assert "forward" not in vars(module)


def _loftr_rope() -> Any:
    config = _config("efficientloftr", None, hidden_size=64)
    return _module("efficientloftr", "EfficientLoFTRRotaryEmbedding", config)


def test_efficientloftr_grid_rope_is_patched_exactly() -> None:
    """EfficientLoFTR's rope (``forward(x)`` of a feature map: (row, column) * inv_freq of
    the aggregated grid, 1-based): patched, a 100 x 400 grid gives the float64 cos/sin
    rounded once (unpatched: float32 products of positions up to 400), in x's dtype."""
    module = _loftr_rope()
    x = torch.zeros(1, 1, 4 * 100, 4 * 400)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.no_grad():
            want = _loftr_rope()(x.double())
    finally:
        torch.set_default_dtype(previous)
    before = module(x)
    patch_rotary_embeddings(module)
    got = module(x)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    unpatched = max(float((b.double() - w).abs().max()) for b, w in zip(before, want, strict=True))
    assert err <= 6e-8 and unpatched > 10 * err, (err, unpatched)
    for g, b in zip(got, before, strict=True):
        assert g.shape == b.shape and g.dtype == b.dtype
    unpatch_rotary_embeddings(module)
    assert "forward" not in vars(module)


def _dinov3_config(model_type: str) -> Any:
    return _config(
        model_type,
        None,
        hidden_size=64,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=64,
        patch_size=16,
        image_size=64,
    )


@pytest.mark.parametrize(
    ("model_type", "cls"),
    [
        ("dinov3_vit", "DINOv3ViTRopePositionEmbedding"),
        ("sapiens2", "Sapiens2RopePositionEmbedding"),
    ],
)
def test_dinov3_rope_position_embedding_is_found_and_exact(model_type: str, cls: str) -> None:
    """DINOv3-ViT's rope (and Sapiens2's copy), whose class name has no
    ``RotaryEmbedding``: found, and patched as EoMT-DINOv3's grid, a 300 x 200 grid
    gives the float64 cos/sin rounded once (unpatched: 5e-8, the angles being at most
    2 pi)."""
    config = _dinov3_config(model_type)
    module = _module(model_type, cls, config).eval()
    pixels = torch.zeros(1, 3, 16 * 300, 16 * 200)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float64Mode(), torch.no_grad():
            want = _module(model_type, cls, config).eval()(pixels.double())
    finally:
        torch.set_default_dtype(previous)
    before = module(pixels)
    patch_rotary_embeddings(module)
    got = module(pixels)
    err = max(float((g.double() - w).abs().max()) for g, w in zip(got, want, strict=True))
    unpatched = max(float((b.double() - w).abs().max()) for b, w in zip(before, want, strict=True))
    assert err <= 6e-8 and err <= unpatched, (err, unpatched)  # angles at most 2 pi
    for g, b in zip(got, before, strict=True):
        assert g.shape == b.shape and g.dtype == b.dtype


def test_dinov3_vit_model_in_one_call() -> None:
    """A whole DINOv3-ViT model patched in one call (its rope was not found before): its
    outputs stay the unpatched ones within float32 rounding; unpatched, the original
    forward is back."""
    from transformers.models.dinov3_vit.modeling_dinov3_vit import DINOv3ViTModel

    torch.manual_seed(0)
    model = DINOv3ViTModel(_dinov3_config("dinov3_vit")).eval()
    pixels = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        plain = model(pixels).last_hidden_state
        patch_rotary_embeddings(model)
        assert "forward" in vars(model.rope_embeddings)
        torch.testing.assert_close(model(pixels).last_hidden_state, plain, rtol=0, atol=1e-5)
    unpatch_rotary_embeddings(model)
    assert "forward" not in vars(model.rope_embeddings)


class ForeignRotaryEmbedding(torch.nn.Module):
    """A rotary module of another library than transformers and timm inside a
    transformers model (timm's are handed to ``pe_core.integrations.timm``)."""

    def forward(self, x: Any) -> Any:
        return x


def test_a_rotary_module_of_another_library_is_refused_by_name() -> None:
    model = torch.nn.Sequential(ForeignRotaryEmbedding())
    with pytest.raises(ValueError, match=r"ForeignRotaryEmbedding at '0'.*not of transformers"):
        patch_rotary_embeddings(model)
