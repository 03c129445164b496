"""Timestep embeddings: ``pe_core.timestep_embedding`` vs diffusers' ``get_timestep_embedding``.

``python -m benchmarks.timesteps [--quick]``: torch eager on the CPU, batches of 1, 64
and 4096 timesteps, ``embedding_dim`` 320 (SD UNets) and 1280, two kinds of timesteps:
integer steps in ``[0, 1000)`` with SD's settings (``flip_sin_to_cos=True``,
``downscale_freq_shift=0``) and float32 timesteps in ``[0, 1]`` at ``scale=1000``
(QwenImage, AuraFlow). Both sides are timed in the same run, alternating, best median
of a few rounds; the ratio is pe_core's time over diffusers'. torch runs one intra-op
thread by default (``--threads``): on a loaded machine torch's thread pool makes each
of diffusers' small operations wait on the others (tens of ms per call), which would
flatter pe_core. Prints a Markdown table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.common import fmt_ms, header, loadavg, machine_md, md_table, setup_torch, time_call

BATCHES = (1, 64, 4096)
DIMS = (320, 1280)
KINDS = {
    "int steps (SD)": {"flip_sin_to_cos": True, "downscale_freq_shift": 0, "scale": 1},
    "float, scale=1000": {"flip_sin_to_cos": True, "downscale_freq_shift": 0, "scale": 1000},
}


def _timesteps(torch: Any, kind: str, n: int) -> Any:
    generator = torch.Generator().manual_seed(n)
    if kind.startswith("int"):
        return torch.randint(0, 1000, (n,), generator=generator)
    return torch.rand(n, generator=generator)


def measure(quick: bool, threads: int) -> list[list[str]]:
    torch = setup_torch()
    torch.set_num_threads(threads)
    from diffusers.models.embeddings import get_timestep_embedding

    from pe_core import timestep_embedding

    rounds = 2 if quick else 5
    rows = []
    for kind, kw in KINDS.items():
        for n in BATCHES:
            for dim in DIMS:
                t = _timesteps(torch, kind, n)

                def ours(t: Any = t, dim: int = dim, kw: dict = kw) -> Any:
                    return timestep_embedding(t, dim, **kw)

                def theirs(t: Any = t, dim: int = dim, kw: dict = kw) -> Any:
                    return get_timestep_embedding(
                        t, dim, kw["flip_sin_to_cos"], kw["downscale_freq_shift"], kw["scale"]
                    )

                big = n * dim >= 1_000_000
                repeats = 2 if quick or big else 20
                best_ours = best_theirs = float("inf")
                for _ in range(rounds):
                    kwargs = {"min_time": 0.02 if quick else 0.2, "max_calls": 200}
                    best_theirs = min(
                        best_theirs, time_call(theirs, repeats, **kwargs)["median_ms"]
                    )
                    best_ours = min(best_ours, time_call(ours, repeats, **kwargs)["median_ms"])
                rows.append(
                    [
                        kind,
                        str(n),
                        str(dim),
                        fmt_ms(best_ours),
                        fmt_ms(best_theirs),
                        f"{best_ours / best_theirs:.2f}",
                    ]
                )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.timesteps", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    load = loadavg()
    rows = measure(args.quick, args.threads)
    head = header(["timesteps", *(["--quick"] if args.quick else [])], load)
    print(machine_md(head))
    print(f"- torch threads: {args.threads}")
    print()
    print(
        md_table(
            ["timesteps", "batch", "dim", "pe_core ms", "diffusers ms", "ratio"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
