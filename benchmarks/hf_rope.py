"""transformers' rotary embedding (Llama, default rope_type), restated line by line in
PyTorch: the baseline the per-call and GPU benchmarks time pe_core's RoPE against.

``hf_rotary_forward`` is ``LlamaRotaryEmbedding.forward`` (cos and sin from
``position_ids``), ``hf_apply_rotary_pos_emb`` is ``apply_rotary_pos_emb``
(``q * cos + rotate_half(q) * sin``).
"""

from __future__ import annotations

from typing import Any


def rotate_half(x: Any) -> Any:
    """transformers' ``rotate_half``: ``(x1, x2) -> (-x2, x1)`` over the last axis."""
    import torch

    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_inv_freq(head_dim: int, base: float = 10000.0) -> Any:
    """``LlamaRotaryEmbedding.inv_freq`` for the default rope_type."""
    import torch

    return 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def hf_rotary_forward(
    inv_freq: Any, x: Any, position_ids: Any, attention_scaling: float = 1.0
) -> tuple[Any, Any]:
    """``LlamaRotaryEmbedding.forward(x, position_ids)`` (default rope_type), line by line.

    The module's ``@torch.no_grad()`` and ``@dynamic_rope_update`` decorators: the
    first is the ``no_grad`` block; the second does nothing for the default rope_type.
    """
    import torch

    with torch.no_grad():
        inv_freq_expanded = (
            inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
        )
        position_ids_expanded = position_ids[:, None, :].float()
        device_type = x.device.type if x.device.type != "mps" else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):  # force float32
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos() * attention_scaling
            sin = emb.sin() * attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def hf_apply_rotary_pos_emb(
    q: Any, k: Any | None, cos: Any, sin: Any, unsqueeze_dim: int = 1
) -> tuple[Any, Any]:
    """transformers' ``apply_rotary_pos_emb`` (``k=None``: queries only)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = None if k is None else (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed
