"""diffusers' positional modules and denoising steps, unpatched vs patched by
``pe_core.integrations.diffusers.patch_positional_embeddings``.

``python -m benchmarks.diffusers_patch [--quick] [--threads N]``: torch eager on the CPU,
float32. Two kinds of rows:

* a positional module at a real model's size, called as its model calls it:
  ``Timesteps(256, True, 0, scale=1000)`` (QwenImage, AuraFlow) on a batch of 2,
  ``FluxPosEmbed(10000, [16, 56, 56])`` on the ids of a 1024 x 1024 image and 512 text
  tokens (4608 ids), ``HunyuanVideoRotaryPosEmbed`` on a 9 x 30 x 52 latent grid,
  ``GaussianFourierProjection(128, scale=16)`` (score-SDE UNets) on a batch of 8;
* one denoising step of each tiny model of :mod:`benchmarks.diffusers_models`.

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


def module_cases(torch: Any) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    from diffusers.models.embeddings import GaussianFourierProjection, Timesteps
    from diffusers.models.transformers.transformer_flux import FluxPosEmbed
    from diffusers.models.transformers.transformer_hunyuan_video import (
        HunyuanVideoRotaryPosEmbed,
    )

    t = torch.tensor([0.731, 0.25])
    rows = torch.arange(64.0)
    grid = torch.stack(torch.meshgrid(torch.zeros(1), rows, rows, indexing="ij"), -1)
    ids = torch.cat((torch.zeros(512, 3), grid.reshape(-1, 3)))
    latents = torch.zeros(1, 1, 9, 30, 52)
    sigmas = torch.linspace(0.01, 378.0, 8)
    torch.manual_seed(0)
    return {
        "Timesteps(256, scale=1000), batch 2": (
            Timesteps(256, True, 0, scale=1000),
            lambda m: m(t),
        ),
        "FluxPosEmbed, 4608 ids": (FluxPosEmbed(10000, [16, 56, 56]), lambda m: m(ids)),
        "HunyuanVideoRotaryPosEmbed, 9x30x52": (
            HunyuanVideoRotaryPosEmbed(1, 1, [16, 56, 56], 256.0),
            lambda m: m(latents),
        ),
        "GaussianFourierProjection(128), batch 8": (
            GaussianFourierProjection(128, scale=16),
            lambda m: m(sigmas),
        ),
    }


def model_cases(torch: Any, quick: bool) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    from benchmarks.diffusers_models import MODELS

    names = list(MODELS)[:3] if quick else list(MODELS)
    out = {}
    for name in names:
        model, call = MODELS[name]()
        out[f"{name} (tiny), one step"] = (model.eval(), call)
    return out


def measure(quick: bool, threads: int) -> list[list[str]]:
    torch = setup_torch()
    torch.set_num_threads(threads)
    from pe_core.integrations.diffusers import (
        patch_positional_embeddings,
        unpatch_positional_embeddings,
    )

    repeats, rounds = (3, 2) if quick else (10, 3)
    kwargs = {"min_time": 0.05 if quick else 0.3, "max_calls": 20 if quick else 200}
    rows = []
    cases = {**module_cases(torch), **model_cases(torch, quick)}
    with torch.no_grad():
        for name, (module, call) in cases.items():
            best_theirs = best_ours = float("inf")
            for _ in range(rounds):
                unpatch_positional_embeddings(module)
                theirs = time_call(lambda m=module, c=call: c(m), repeats, **kwargs)
                best_theirs = min(best_theirs, theirs["median_ms"])
                patch_positional_embeddings(module, strict=False)
                ours = time_call(lambda m=module, c=call: c(m), repeats, **kwargs)
                best_ours = min(best_ours, ours["median_ms"])
            unpatch_positional_embeddings(module)
            rows.append(
                [name, fmt_ms(best_theirs), fmt_ms(best_ours), f"{best_ours / best_theirs:.2f}"]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and models")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    import diffusers
    import torch

    print(
        f"{_dt.date.today()}, {cpu_model()}, {platform.python_version()}, torch "
        f"{torch.__version__}, diffusers {diffusers.__version__}, threads {args.threads}, "
        f"load {loadavg()}\n"
    )
    rows = measure(args.quick, args.threads)
    print(md_table(["call", "unpatched ms", "patched ms", "ratio"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
