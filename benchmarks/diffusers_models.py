"""Tiny diffusers models (random weights, small configs built in code, nothing
downloaded) and one denoising-step call each: shared by ``benchmarks.diffusers_coverage``
and ``benchmarks.diffusers_patch``.

Each entry of :data:`MODELS` builds ``(model, call)``: ``call(model)`` runs one
denoising step on fixed random inputs and returns the output tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Built = tuple[torch.nn.Module, Callable[[torch.nn.Module], torch.Tensor]]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed))


def _sample(out: Any) -> torch.Tensor:
    return out.sample if hasattr(out, "sample") else out[0]


def unet2d() -> Built:
    from diffusers import UNet2DModel

    model = UNet2DModel(
        sample_size=8,
        in_channels=2,
        out_channels=2,
        block_out_channels=(16, 16),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    )
    x = _randn(2, 2, 8, 8)
    t = torch.tensor([999, 17])
    return model, lambda m: _sample(m(x, t))


def unet2d_fourier() -> Built:
    from diffusers import UNet2DModel

    model = UNet2DModel(
        sample_size=8,
        in_channels=2,
        out_channels=2,
        block_out_channels=(16, 16),
        layers_per_block=1,
        norm_num_groups=4,
        time_embedding_type="fourier",
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
    )
    x = _randn(2, 2, 8, 8)
    t = torch.tensor([378.0, 0.01])  # sigmas
    return model, lambda m: _sample(m(x, t))


def unet2d_condition() -> Built:
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(
        sample_size=8,
        in_channels=2,
        out_channels=2,
        block_out_channels=(16, 16),
        layers_per_block=1,
        norm_num_groups=4,
        cross_attention_dim=8,
        attention_head_dim=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    )
    x = _randn(2, 2, 8, 8)
    ctx = _randn(2, 3, 8, seed=2)
    t = torch.tensor([999, 17])
    return model, lambda m: _sample(m(x, t, ctx))


def dit() -> Built:
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=2,
        out_channels=2,
        num_layers=1,
        sample_size=4,
        patch_size=2,
        num_embeds_ada_norm=10,
        norm_num_groups=2,
    )
    x = _randn(2, 2, 4, 4)
    t = torch.tensor([999, 17])
    labels = torch.tensor([1, 3])
    return model, lambda m: _sample(m(x, timestep=t, class_labels=labels))


def pixart() -> Built:
    from diffusers import PixArtTransformer2DModel

    model = PixArtTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=8,
        in_channels=2,
        out_channels=2,
        num_layers=1,
        sample_size=4,
        patch_size=2,
        cross_attention_dim=16,
        caption_channels=8,
        norm_num_groups=2,
    )
    x = _randn(2, 2, 4, 4)
    ctx = _randn(2, 3, 8, seed=2)
    t = torch.tensor([999, 17])
    cond = {"resolution": None, "aspect_ratio": None}
    return model, lambda m: _sample(
        m(x, encoder_hidden_states=ctx, timestep=t, added_cond_kwargs=cond)
    )


def sd3() -> Built:
    from diffusers import SD3Transformer2DModel

    model = SD3Transformer2DModel(
        sample_size=4,
        patch_size=2,
        in_channels=2,
        out_channels=2,
        num_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=8,
        caption_projection_dim=16,
        pooled_projection_dim=8,
        pos_embed_max_size=8,
    )
    x = _randn(2, 2, 4, 4)
    ctx = _randn(2, 3, 8, seed=2)
    pooled = _randn(2, 8, seed=3)
    t = torch.tensor([999.0, 17.5])
    return model, lambda m: _sample(
        m(x, encoder_hidden_states=ctx, pooled_projections=pooled, timestep=t)
    )


def flux() -> Built:
    from diffusers import FluxTransformer2DModel

    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=8,
        pooled_projection_dim=8,
        guidance_embeds=True,
        axes_dims_rope=(4, 6, 6),
    )
    x = _randn(1, 12, 4)
    ctx = _randn(1, 3, 8, seed=2)
    pooled = _randn(1, 8, seed=3)
    img_ids = torch.stack(
        torch.meshgrid(torch.zeros(1), torch.arange(3.0) + 4000, torch.arange(4.0), indexing="ij"),
        -1,
    ).reshape(-1, 3)
    txt_ids = torch.zeros(3, 3)
    t = torch.tensor([0.73])
    g = torch.tensor([3.5])
    return model, lambda m: _sample(
        m(
            x,
            encoder_hidden_states=ctx,
            pooled_projections=pooled,
            timestep=t,
            img_ids=img_ids,
            txt_ids=txt_ids,
            guidance=g,
        )
    )


def wan() -> Built:
    from diffusers import WanTransformer3DModel

    model = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=2,
        out_channels=2,
        text_dim=8,
        freq_dim=16,
        ffn_dim=16,
        num_layers=1,
        rope_max_seq_len=64,
    )
    x = _randn(1, 2, 2, 4, 4)
    ctx = _randn(1, 3, 8, seed=2)
    t = torch.tensor([917.0])
    return model, lambda m: _sample(m(x, t, ctx))


def hunyuan_video() -> Built:
    from diffusers import HunyuanVideoTransformer3DModel

    model = HunyuanVideoTransformer3DModel(
        in_channels=2,
        out_channels=2,
        num_attention_heads=2,
        attention_head_dim=12,
        num_layers=1,
        num_single_layers=1,
        num_refiner_layers=1,
        patch_size=1,
        patch_size_t=1,
        text_embed_dim=8,
        pooled_projection_dim=8,
        rope_axes_dim=(4, 4, 4),
    )
    x = _randn(1, 2, 2, 4, 4)
    ctx = _randn(1, 3, 8, seed=2)
    mask = torch.ones(1, 3, dtype=torch.bool)
    pooled = _randn(1, 8, seed=3)
    t = torch.tensor([917])
    g = torch.tensor([6000.0])
    return model, lambda m: _sample(m(x, t, ctx, mask, pooled, guidance=g))


def lumina2() -> Built:
    from diffusers import Lumina2Transformer2DModel

    model = Lumina2Transformer2DModel(
        sample_size=4,
        patch_size=2,
        in_channels=2,
        out_channels=2,
        hidden_size=24,
        num_layers=1,
        num_refiner_layers=1,
        num_attention_heads=2,
        num_kv_heads=2,
        multiple_of=8,
        axes_dim_rope=(4, 4, 4),
        axes_lens=(64, 64, 64),
        cap_feat_dim=8,
    )
    x = _randn(1, 2, 4, 4)
    ctx = _randn(1, 3, 8, seed=2)
    mask = torch.ones(1, 3, dtype=torch.bool)
    t = torch.tensor([0.4])
    return model, lambda m: _sample(m(x, t, ctx, mask))


def qwen_image() -> Built:
    from diffusers import QwenImageTransformer2DModel

    model = QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=8,
        out_channels=2,
        num_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=8,
        axes_dims_rope=(4, 6, 6),
    )
    x = _randn(1, 4, 8)
    ctx = _randn(1, 3, 8, seed=2)
    mask = torch.ones(1, 3, dtype=torch.long)
    t = torch.tensor([0.73])
    return model, lambda m: _sample(
        m(
            x,
            encoder_hidden_states=ctx,
            encoder_hidden_states_mask=mask,
            timestep=t,
            img_shapes=[(1, 2, 2)],
        )
    )


def cogview4() -> Built:
    from diffusers import CogView4Transformer2DModel

    model = CogView4Transformer2DModel(
        patch_size=2,
        in_channels=4,
        out_channels=4,
        num_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        text_embed_dim=8,
        time_embed_dim=16,
        condition_dim=8,
        sample_size=8,
        rope_axes_dim=(64, 64),
    )
    x = _randn(1, 4, 8, 8)
    ctx = _randn(1, 3, 8, seed=2)
    t = torch.tensor([917])
    size = torch.tensor([[64.0, 64.0]])
    crop = torch.tensor([[0.0, 0.0]])
    return model, lambda m: _sample(m(x, ctx, t, size, size, crop))


def ltx_video() -> Built:
    from diffusers import LTXVideoTransformer3DModel

    model = LTXVideoTransformer3DModel(
        in_channels=4,
        out_channels=4,
        num_attention_heads=2,
        attention_head_dim=12,
        cross_attention_dim=24,
        num_layers=1,
        caption_channels=8,
    )
    x = _randn(1, 2 * 3 * 4, 4)
    ctx = _randn(1, 3, 8, seed=2)
    mask = torch.ones(1, 3, dtype=torch.long)
    t = torch.tensor([917])
    scale = (8 / 25, 32, 32)
    return model, lambda m: _sample(m(x, ctx, t, mask, 2, 3, 4, rope_interpolation_scale=scale))


#: name -> builder, for the benchmarks and the coverage table.
MODELS: dict[str, Callable[[], Built]] = {
    "UNet2DModel": unet2d,
    "UNet2DModel (fourier)": unet2d_fourier,
    "UNet2DConditionModel": unet2d_condition,
    "DiTTransformer2DModel": dit,
    "PixArtTransformer2DModel": pixart,
    "SD3Transformer2DModel": sd3,
    "FluxTransformer2DModel": flux,
    "WanTransformer3DModel": wan,
    "HunyuanVideoTransformer3DModel": hunyuan_video,
    "Lumina2Transformer2DModel": lumina2,
    "QwenImageTransformer2DModel": qwen_image,
    "CogView4Transformer2DModel": cogview4,
    "LTXVideoTransformer3DModel": ltx_video,
}
