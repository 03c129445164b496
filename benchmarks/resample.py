"""Resampling a learned position table: ``pe_core.resample_pos_embed`` against
``torch.nn.functional.interpolate`` on eager PyTorch (CPU), timed in the same run.

Two baselines per case: the bare ``F.interpolate`` call on a table already laid out
``(1, C, H, W)`` (the kernel alone), and timm's ``resample_abs_pos_embed`` as model code
runs it (the class row split off, the grid permuted to ``NCHW``, interpolated, permuted
back, concatenated). pe_core takes the ``(1, 1 + H * W, C)`` table as it is.

    python -m benchmarks.resample            # full run
    python -m benchmarks.resample --quick    # the first two cases, a few calls (CI)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import TORCH_THREADS, fmt_ms, fmt_ratio, loadavg, md_table, setup_torch

#: (old grid, new grid, channels, mode, antialias)
CASES = [
    ((14, 14), (32, 32), 768, "bicubic", False),
    ((32, 32), (14, 14), 768, "bicubic", True),
    ((16, 16), (24, 24), 1024, "bilinear", False),
    ((24, 24), (37, 29), 384, "bicubic", False),
]


#: torch thread counts timed (the second is the benchmarks' usual count)
THREADS = (1, TORCH_THREADS)


def timm_style(torch: Any, table: Any, old: Any, new: Any, mode: str, aa: bool) -> Any:
    """timm's ``resample_abs_pos_embed`` (one prefix row), restated."""
    prefix, grid = table[:, :1], table[:, 1:]
    dim = grid.shape[-1]
    grid = grid.reshape(1, old[0], old[1], -1).permute(0, 3, 1, 2)
    grid = torch.nn.functional.interpolate(grid, size=new, mode=mode, antialias=aa)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, dim)
    return torch.cat([prefix, grid], dim=1)


def interleaved(fns: Sequence[Callable[[], Any]], rounds: int) -> list[float]:
    """Median ms of each function, timed in alternation (one call of each per round), so
    that a change in the machine's load weighs on all of them alike."""
    for fn in fns:  # warm-up: weights built and cached, kernels chosen
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, spent in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [1e3 * statistics.median(spent) for spent in times]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls per case (CI)")
    args = parser.parse_args(argv)
    torch = setup_torch()
    import pe_core

    rounds = 3 if args.quick else 41
    load_before = loadavg()
    rows = []
    for old, new, channels, mode, aa in CASES[:2] if args.quick else CASES:
        gen = torch.Generator().manual_seed(0)
        table = torch.randn(1, 1 + old[0] * old[1], channels, generator=gen)
        nchw = table[:, 1:].reshape(1, old[0], old[1], channels).permute(0, 3, 1, 2).contiguous()

        def ours(table: Any = table, new: Any = new, mode: str = mode, aa: bool = aa) -> Any:
            return pe_core.resample_pos_embed(table, new, interpolation=mode, antialias=aa)

        def bare(nchw: Any = nchw, new: Any = new, mode: str = mode, aa: bool = aa) -> Any:
            return torch.nn.functional.interpolate(nchw, size=new, mode=mode, antialias=aa)

        def timm(
            table: Any = table, old: Any = old, new: Any = new, mode: str = mode, aa: bool = aa
        ) -> Any:
            return timm_style(torch, table, old, new, mode, aa)

        label = f"{old[0]}x{old[1]} -> {new[0]}x{new[1]}, C={channels}, {mode}" + (
            ", antialias" if aa else ""
        )
        for threads in THREADS:
            torch.set_num_threads(threads)
            with torch.no_grad():
                t_ours, t_bare, t_timm = interleaved([ours, bare, timm], rounds)
            rows.append(
                [
                    label,
                    threads,
                    fmt_ms(t_ours),
                    fmt_ms(t_bare),
                    fmt_ms(t_timm),
                    fmt_ratio(t_ours / t_bare),
                    fmt_ratio(t_ours / t_timm),
                ]
            )
    headers = [
        "case (torch, CPU, eager)",
        "threads",
        "pe_core ms",
        "F.interpolate ms",
        "timm-style ms",
        "vs F.interpolate",
        "vs timm-style",
    ]
    print(md_table(headers, rows))
    load_after = loadavg()
    print(
        f"\nmedians of {rounds} interleaved rounds; ratios are pe_core / baseline; "
        f"1-minute load average {load_before:.1f} before, {load_after:.1f} after"
        if load_before is not None and load_after is not None
        else f"\nmedians of {rounds} interleaved rounds; ratios are pe_core / baseline"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
