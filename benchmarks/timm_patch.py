"""timm's rotary modules and small rotary ViTs, unpatched vs patched by
``pe_core.integrations.timm.patch_rotary_embeddings``.

``python -m benchmarks.timm_patch [--quick] [--threads N]``: torch eager on the CPU,
float32, random weights (nothing downloaded). Two kinds of rows:

* a rotary module's table for a shape not cached, as ``dynamic_img_size`` or NaFlexViT
  ask for it: ``RotaryEmbeddingCat(64)`` of EVA-02 (language bands, ``ref_feat_shape``)
  on a 32 x 32 grid, ``RotaryEmbeddingDinoV3(64)`` on a 32 x 32 grid;
* one forward of a small rotary ViT on a batch of 1 at 224 x 224 (``eva02_tiny``, full
  depth; ``vit_small_patch16_rope_224`` and ``vit_small_patch16_dinov3`` at depth 4),
  where the cached table is read and the patch changes nothing of the cost, and the same
  with ``dynamic_img_size=True``, where the table is rebuilt every forward.

The same module (or model) is timed unpatched and patched in the same run, alternating
(patch, unpatch) over a few rounds; each figure is the best median; the ratio is patched
over unpatched. Prints a Markdown table; writes nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import platform
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import cpu_model, fmt_ms, loadavg, md_table, setup_torch, time_call
from benchmarks.timm_coverage import import_timm


def cases(torch: Any, timm: Any, quick: bool) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, RotaryEmbeddingDinoV3

    out: dict[str, tuple[Any, Callable[[Any], Any]]] = {
        "RotaryEmbeddingCat (EVA-02), 32x32 table": (
            RotaryEmbeddingCat(64, in_pixels=False, ref_feat_shape=[16, 16]),
            lambda m: m.get_embed([32, 32]),
        ),
        "RotaryEmbeddingDinoV3, 32x32 table": (
            RotaryEmbeddingDinoV3(64),
            lambda m: m.get_embed([32, 32]),
        ),
    }
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    models = [
        ("eva02_tiny_patch14_224", {}),
        ("vit_small_patch16_rope_224", {"depth": 4}),
        ("vit_small_patch16_dinov3", {"depth": 4}),
    ]
    for name, kwargs in models[:1] if quick else models:
        for dynamic in (False, True):
            model = timm.create_model(
                name, pretrained=False, img_size=224, dynamic_img_size=dynamic, **kwargs
            ).eval()
            depth = f"depth {kwargs['depth']}" if kwargs else "full depth"
            label = f"{name} ({depth}), 224 px{', dynamic_img_size' if dynamic else ''}"
            out[label] = (model, lambda m: m(x))
    return out


def measure(quick: bool, threads: int) -> list[list[str]]:
    torch = setup_torch()
    torch.set_num_threads(threads)
    timm = import_timm()
    from pe_core.integrations.timm import patch_rotary_embeddings, unpatch_rotary_embeddings

    repeats, rounds = (3, 2) if quick else (10, 3)
    kwargs = {"min_time": 0.05 if quick else 0.3, "max_calls": 20 if quick else 200}
    rows = []
    with torch.no_grad():
        for name, (module, call) in cases(torch, timm, quick).items():
            best_theirs = best_ours = float("inf")
            for _ in range(rounds):
                unpatch_rotary_embeddings(module)
                theirs = time_call(lambda m=module, c=call: c(m), repeats, **kwargs)
                best_theirs = min(best_theirs, theirs["median_ms"])
                patch_rotary_embeddings(module)
                ours = time_call(lambda m=module, c=call: c(m), repeats, **kwargs)
                best_ours = min(best_ours, ours["median_ms"])
            unpatch_rotary_embeddings(module)
            rows.append(
                [name, fmt_ms(best_theirs), fmt_ms(best_ours), f"{best_ours / best_theirs:.2f}"]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and models")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    import torch

    timm = import_timm()
    print(
        f"{_dt.date.today()}, {cpu_model()}, {platform.python_version()}, torch "
        f"{torch.__version__}, timm {timm.__version__}, threads {args.threads}, "
        f"load {loadavg()}\n"
    )
    rows = measure(args.quick, args.threads)
    print(md_table(["call", "unpatched ms", "patched ms", "ratio"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
