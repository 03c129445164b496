"""``patch_rotary_embeddings`` on rotary modules without position ids: the speech
encoders' and CLVP's ``*RotaryPositionalEmbedding`` (a table per sequence length), and
timm's modules inside a transformers model (handed to ``pe_core.integrations.timm``).

Each table is compared with a float64 restatement of its class's own formula at 1e5
positions; whole tiny models patched against unpatched, and unpatched bitwise.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pe_core.integrations.transformers import (  # noqa: E402
    patch_rotary_embeddings,
    patched_rotary_embeddings,
    unpatch_rotary_embeddings,
)

FAR = 100_000

#: Largest cos/sin error of a patched table at 1e5 positions (unpatched: 1e-3 to 3e-3).
EXACT = 4e-7


def _float64_table(n: int, dim: int, base: float) -> np.ndarray:
    """The classes' ``cat(f, f)``, ``f = positions * base ** (-2k / dim)``, in float64."""
    w = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    f = np.arange(n, dtype=np.float64)[:, None] * w
    return np.concatenate((f, f), -1)


def _conformer() -> Any:
    config = transformers.Wav2Vec2ConformerConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2,
        conv_depthwise_kernel_size=3,
        position_embeddings_type="rotary",
        rotary_embedding_base=10000,
    )
    return transformers.Wav2Vec2ConformerModel(config).eval(), torch.randn(1, 2000)


def _bert() -> Any:
    config = transformers.Wav2Vec2BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        feature_projection_input_dim=16,
        conv_depthwise_kernel_size=3,
        position_embeddings_type="rotary",
        rotary_embedding_base=500,
    )
    return transformers.Wav2Vec2BertModel(config).eval(), torch.randn(1, 12, 16)


def _clvp() -> Any:
    config = transformers.ClvpEncoderConfig(
        vocab_size=32,
        hidden_size=128,
        intermediate_size=32,
        projection_dim=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.ClvpEncoder(config).eval(), torch.randint(3, 32, (1, 10))


#: id -> (tiny model and its input, rotary attribute path, dim, base, kind)
CASES = {
    "wav2vec2-conformer": (_conformer, "encoder.embed_positions", 16, 10000.0, "stacked"),
    "wav2vec2-bert": (_bert, "encoder.embed_positions", 16, 500.0, "stacked"),
    "clvp": (_clvp, "rotary_pos_emb", 32, 10000.0, "angles"),
}


def _cos_sin(out: torch.Tensor, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "stacked":
        return out[0, :, 0, 0].double().numpy(), out[1, :, 0, 0].double().numpy()
    return out[0].double().cos().numpy(), out[0].double().sin().numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_table_exact_at_1e5_and_unpatched_bitwise(case: str) -> None:
    build, path, dim, base, kind = CASES[case]
    torch.manual_seed(0)
    model, inputs = build()
    module = model.get_submodule(path)
    with torch.no_grad():
        plain = model(inputs)[0]
        table = module(torch.zeros(1, FAR, 1))  # the module's own, cached
    want = _float64_table(FAR, dim, base)
    expected = (np.cos(want), np.sin(want))
    errors = [np.abs(g - w).max() for g, w in zip(_cos_sin(table, kind), expected, strict=True)]
    assert min(errors) > 1e-4  # float32 angles: far off at 1e5

    patch_rotary_embeddings(model)
    assert "forward" in vars(module)
    with torch.no_grad():
        patched = model(inputs)[0]
        got = module(torch.zeros(1, FAR, 1, dtype=torch.float64))
    assert got.shape == table.shape
    # stacked: the dtype of hidden_states; angles: inv_freq's (float32)
    assert got.dtype == (torch.float64 if kind == "stacked" else torch.float32)
    assert module(torch.zeros(1, FAR, 1)) is got  # cached per sequence length, as the module
    for g, w in zip(_cos_sin(got, kind), expected, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=EXACT)
    torch.testing.assert_close(patched, plain, rtol=0, atol=1e-5)
    assert module.state_dict().keys() == copy.deepcopy(module).state_dict().keys()

    unpatch_rotary_embeddings(model)
    assert "forward" not in vars(module)
    assert module(torch.zeros(1, FAR, 1)) is table  # the module's own cache, given back
    with torch.no_grad():
        assert torch.equal(model(inputs)[0], plain)


def test_sequence_table_with_another_base_is_refused_by_name() -> None:
    model, _ = _conformer()
    module = model.encoder.embed_positions
    module.inv_freq = module.inv_freq * 1.001  # no integer base gives it
    with pytest.raises(
        ValueError,
        match=r"RotaryPositionalEmbedding at 'encoder.embed_positions'"
        r".*not 1 / base",
    ):
        patch_rotary_embeddings(model)
    assert "forward" not in vars(module)


@pytest.fixture
def timm_in_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' ``TimmWrapper`` with timm imported by ``tests._timm_import`` (its
    own check asks for torchvision, which may be missing: the module is not used)."""
    from tests._timm_import import timm_or_skip

    timm = timm_or_skip()
    from transformers.models.timm_wrapper import modeling_timm_wrapper

    monkeypatch.setattr(modeling_timm_wrapper, "timm", timm, raising=False)
    monkeypatch.setattr(modeling_timm_wrapper, "requires_backends", lambda *args: None)


def _pe_video() -> Any:
    config = transformers.PeVideoEncoderConfig(
        hidden_size=32,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        head_dim=16,
        vision_config={
            "architecture": "vit_pe_core_tiny_patch16_384",
            "num_classes": 32,
            "model_args": {"embed_dim": 32, "depth": 1, "num_heads": 2, "img_size": 64},
        },
    )
    try:
        return transformers.PeVideoEncoder(config).eval()
    except Exception as error:  # this transformers or timm cannot build it
        pytest.skip(f"PeVideoEncoder does not build here: {type(error).__name__}: {error}")


def test_timm_module_in_a_transformers_model_is_patched_by_the_timm_integration(
    timm_in_transformers: None,
) -> None:
    model = _pe_video()
    rope = next(m for m in model.modules() if type(m).__name__ == "RotaryEmbeddingCat")
    pixels = torch.randn(1, 2, 3, 64, 64)
    with torch.no_grad():
        plain = model(pixel_values_videos=pixels).last_hidden_state
        table = rope.get_embed()
    with patched_rotary_embeddings(model):
        assert "_pe_core_exact_rotary" in vars(rope)  # the timm integration's patch
        with torch.no_grad():
            patched = model(pixel_values_videos=pixels).last_hidden_state
        torch.testing.assert_close(patched, plain, rtol=0, atol=1e-5)
    assert "_pe_core_exact_rotary" not in vars(rope)
    patch_rotary_embeddings(model)
    unpatch_rotary_embeddings(model)
    assert "_pe_core_exact_rotary" not in vars(rope)
    with torch.no_grad():
        assert torch.equal(rope.get_embed(), table)
        assert torch.equal(model(pixel_values_videos=pixels).last_hidden_state, plain)


def test_timm_module_the_timm_integration_does_not_cover_is_refused_by_name() -> None:
    from tests._timm_import import timm_or_skip

    timm_or_skip()
    from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, RotaryEmbeddingMixed

    model = torch.nn.Sequential(
        RotaryEmbeddingCat(32, in_pixels=False, feat_shape=[4, 4]),
        RotaryEmbeddingMixed(32, depth=1, num_heads=2),
    )
    with pytest.raises(
        ValueError, match=r"RotaryEmbeddingMixed at '1': a module of timm .* learned"
    ):
        patch_rotary_embeddings(model)
    assert "_pe_core_exact_rotary" not in vars(model[0])  # nothing patched
