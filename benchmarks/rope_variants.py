"""Per-call cost of the rotary variants (PyTorch, CPU) against the models' own formulas.

``python -m benchmarks.rope_variants`` times pe_core and a baseline in the same run and
prints their ratio (below 1 pe_core is faster):

* last features: ``apply_rope(q, pos, rotary_dim=64, layout="interleaved",
  rotary_features="last")`` on q ``(B, 16, S, 192)`` float32. Baseline: transformers'
  ``DeepseekV4RotaryEmbedding.forward`` (cos/sin from ``position_ids``) and
  ``apply_rotary_pos_emb``, restated line by line below;
* V-JEPA 2: ``vjepa2_rope(q, pos)`` on q ``(B, 16, S, 64)``. Baseline: transformers'
  ``rotate_queries_or_keys`` on the three blocks and the concatenation of
  ``apply_rotary_embeddings``, restated;
* blocks (Allegro): ``apply_rope(q, pos, sections=(16, 16, 16), section_layout="blocks",
  frequencies="per_axis")`` on q ``(B, 16, S, 96)``. Baseline: diffusers'
  ``apply_rotary_emb_allegro`` with cos/sin tables gathered by position, restated.

Positions are ``arange(S)`` (per axis: the grid coordinates), host arrays (pe_core's
exact host tables, cached after the first call, as a model's repeated calls meet
them). The two methods of a row alternate, round after round, so that load from other
processes affects both alike; the table gives the median per call. ``--quick`` uses
tiny sizes. Nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import fmt_ms, fmt_ratio, md_table, setup_torch, time_call


def _deepseek_v4(torch: Any, x: Any, position_ids: Any, rope_dim: int) -> Any:
    """``DeepseekV4RotaryEmbedding.forward`` + ``apply_rotary_pos_emb``, line by line."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rope_dim, 2, dtype=torch.float) / rope_dim))
    freqs = position_ids[..., None].float() * inv_freq
    cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    cos = cos.repeat_interleave(2, dim=-1).unsqueeze(1)
    sin = sin.repeat_interleave(2, dim=-1).unsqueeze(1)
    nope, rope = x[..., :-rope_dim], x[..., -rope_dim:]
    x1, x2 = rope[..., 0::2], rope[..., 1::2]
    turned = torch.stack((-x2, x1), dim=-1).flatten(-2)
    rotated = ((rope.float() * cos) + (turned.float() * sin)).to(x.dtype)
    return torch.cat([nope, rotated], dim=-1)


def _vjepa2(torch: Any, x: Any, pos: tuple[Any, Any, Any]) -> Any:
    """``VJEPA2RopeAttention.apply_rotary_embeddings`` with ``rotate_queries_or_keys``."""
    d = 2 * ((x.shape[-1] // 3) // 2)
    parts = []
    for a in range(3):
        block = x[..., a * d : (a + 1) * d]
        omega = torch.arange(d // 2, dtype=x.dtype)
        omega /= d / 2.0
        omega = 1.0 / 10000**omega
        freq = pos[a].unsqueeze(-1) * omega
        emb_sin, emb_cos = freq.sin().repeat(1, 1, 1, 2), freq.cos().repeat(1, 1, 1, 2)
        y1, y2 = block.unflatten(-1, (-1, 2)).unbind(dim=-1)
        turned = torch.stack((-y2, y1), dim=-1).flatten(-2)
        parts.append(block * emb_cos + turned * emb_sin)
    return torch.cat(parts, dim=-1)


def _allegro(torch: Any, x: Any, pos: tuple[Any, Any, Any], sizes: Sequence[int]) -> Any:
    """``get_3d_rotary_pos_embed_allegro`` tables + ``apply_rotary_emb_allegro``."""
    parts = []
    for a, block in enumerate(x.chunk(3, dim=-1)):
        dim = block.shape[-1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
        freqs = torch.outer(torch.arange(sizes[a]).float(), inv)
        cos = torch.cat([freqs.cos(), freqs.cos()], dim=-1)
        sin = torch.cat([freqs.sin(), freqs.sin()], dim=-1)
        cos = torch.nn.functional.embedding(pos[a], cos)[:, None]
        sin = torch.nn.functional.embedding(pos[a], sin)[:, None]
        x1, x2 = block[..., : dim // 2], block[..., dim // 2 :]
        turned = torch.cat((-x2, x1), dim=-1)
        parts.append((block.float() * cos + turned.float() * sin).to(block.dtype))
    return torch.cat(parts, dim=-1)


def rows(quick: bool) -> list[list[str]]:
    torch = setup_torch()
    import pe_core
    from pe_core.rope_variants import vjepa2_rope

    batch, seq = (1, 16) if quick else (2, 1024)
    grid = (2, 2, 4) if quick else (4, 16, 16)
    repeats = 3 if quick else 20
    g = torch.Generator().manual_seed(0)
    out: list[list[str]] = []

    def row(name: str, ours: Callable[[], Any], baseline: Callable[[], Any]) -> None:
        ours(), baseline()  # warm: host tables, allocator
        a, b = [], []
        for i in range(repeats):  # alternate the order every round
            first, second = (ours, baseline) if i % 2 == 0 else (baseline, ours)
            t1 = time_call(first, 1, warmup=0, min_time=0.0, max_calls=1)["median_ms"]
            t2 = time_call(second, 1, warmup=0, min_time=0.0, max_calls=1)["median_ms"]
            a.append(t1 if first is ours else t2)
            b.append(t2 if first is ours else t1)
        ours_ms, base_ms = sorted(a)[len(a) // 2], sorted(b)[len(b) // 2]
        out.append([name, fmt_ms(ours_ms), fmt_ms(base_ms), fmt_ratio(ours_ms / base_ms)])

    with torch.no_grad():
        q = torch.randn(batch, 16, seq, 192, generator=g)
        pos_np = torch.arange(seq).numpy()
        ids = torch.arange(seq)[None].expand(batch, seq)
        row(
            "last features vs DeepSeek-V4",
            lambda: pe_core.apply_rope(
                q, pos_np, rotary_dim=64, layout="interleaved", rotary_features="last"
            ),
            lambda: _deepseek_v4(torch, q, ids, 64),
        )
        n = grid[0] * grid[1] * grid[2]
        coords = torch.stack(
            torch.meshgrid(*(torch.arange(s) for s in grid), indexing="ij"), dim=-1
        ).reshape(n, 3)
        coords_np = coords.numpy()
        per_axis = tuple(coords[:, a] for a in range(3))
        q = torch.randn(batch, 16, n, 64, generator=g)
        row(
            "V-JEPA 2 vs rotate_queries_or_keys",
            lambda: vjepa2_rope(q, coords_np),
            lambda: _vjepa2(torch, q, per_axis),
        )
        q = torch.randn(batch, 16, n, 96, generator=g)
        batched = tuple(p[None].expand(batch, n) for p in per_axis)
        row(
            "blocks vs Allegro",
            lambda: pe_core.apply_rope(
                q,
                coords_np,
                sections=(16, 16, 16),
                section_layout="blocks",
                frequencies="per_axis",
            ),
            lambda: _allegro(torch, q, batched, grid),
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes")
    args = parser.parse_args(argv)
    table = rows(args.quick)
    print(md_table(["measurement", "pe_core ms", "baseline ms", "ratio"], table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
