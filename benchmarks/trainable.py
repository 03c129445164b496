"""Trainable frequencies: ``apply_rope(q, pos, frequencies=parameter)`` against the plain
PyTorch formula with the same parameter, forward and forward + backward.

The baseline is the straightforward formula a model would write (transformers'
``x * cos + rotate_half(x) * sin`` with ``angle = pos * f`` per head), timed in the
same run; the table gives pe_core's time over the baseline's. Run from the repository
root::

    python -m benchmarks.trainable            # the default sizes
    python -m benchmarks.trainable --quick    # tiny sizes (CI)

Nothing is written: the ratios depend on the machine and are printed only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import pe_core
from benchmarks import common

#: (batch, heads, seq, head_dim) of the full run and of ``--quick``.
SIZES = {
    "full": [(1, 8, 512, 64), (4, 16, 1024, 128)],
    "quick": [(1, 2, 16, 8)],
}


def _plain(torch: Any, q: Any, pos: Any, freqs: Any) -> Any:
    """The straightforward per-head formula (rotate-half layout)."""
    angles = pos[:, None] * freqs[:, None, :]  # (heads, seq, n)
    cos = torch.cat([angles.cos()] * 2, -1)
    sin = torch.cat([angles.sin()] * 2, -1)
    half = q.shape[-1] // 2
    rotated = torch.cat([-q[..., half:], q[..., :half]], -1)
    return q * cos + rotated * sin


def _size_rows(torch: Any, size: tuple[int, int, int, int], quick: bool) -> list[dict[str, Any]]:
    batch, heads, seq, head_dim = size
    q = torch.randn(batch, heads, seq, head_dim)
    freqs = torch.nn.Parameter(torch.rand(heads, head_dim // 2))
    pos = torch.arange(seq, dtype=torch.float32)

    def ours() -> Any:
        return pe_core.apply_rope(q, pos, frequencies=freqs)

    def plain() -> Any:
        return _plain(torch, q, pos, freqs)

    def backward(fn: Any) -> Any:
        def step() -> None:
            freqs.grad = None
            fn().square().sum().backward()

        return step

    out = []
    for label, mine, base in (
        ("forward", ours, plain),
        ("forward + backward", backward(ours), backward(plain)),
    ):
        repeats = 3 if quick else 10
        t_ours = common.time_call(mine, repeats, min_time=0.0 if quick else 0.2)
        t_base = common.time_call(base, repeats, min_time=0.0 if quick else 0.2)
        out.append(
            {
                "measurement": label,
                "shape": "x".join(str(n) for n in size),
                "pe_core_ms": t_ours["median_ms"],
                "plain_ms": t_base["median_ms"],
                "ratio": t_ours["median_ms"] / t_base["median_ms"],
            }
        )
    return out


def rows(quick: bool) -> list[dict[str, Any]]:
    torch = common.setup_torch()
    out = []
    for size in SIZES["quick" if quick else "full"]:
        out.extend(_size_rows(torch, size, quick))
    return out


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [
        "| measurement | shape | pe_core ms | plain formula ms | pe_core / plain |",
        "|---|---|---|---|---|",
    ]
    for row in table:
        lines.append(
            f"| {row['measurement']} | {row['shape']} | {row['pe_core_ms']:.3f} | "
            f"{row['plain_ms']:.3f} | {row['ratio']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes")
    args = parser.parse_args(argv)
    if not common.installed("torch"):
        print("torch: not installed, nothing to time")
        return 0
    print(markdown(rows(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
