"""``python -m benchmarks``: speed and accuracy of pe_core against the textbook table."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from benchmarks import common


def _sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in text.split(","):
        try:
            n, d = (int(v) for v in item.lower().split("x"))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"sizes are NxD[,NxD...], got {item!r}") from exc
        sizes.append((n, d))
    return sizes


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time pe_core.encode against the textbook table and the machine's "
        "bounds, and measure its accuracy against mpmath.",
    )
    parser.add_argument(
        "--backends",
        type=lambda s: [b.strip() for b in s.split(",") if b.strip()],
        default=None,
        help=f"comma-separated, default all installed of {','.join(common.ALL_BACKENDS)}",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        help="speed tables as NxD[,NxD...]; default 2048x512,8192x1024,65536x256 "
        "(--quick: 1024x256,4096x512)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed calls per case, at least (default 5; --quick 3)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help="accuracy: random positions per range (default 200; --quick 20)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=common.TORCH_THREADS,
        help=f"torch.set_num_threads for this process (default {common.TORCH_THREADS})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and few repeats; writes nothing unless --out is given",
    )
    parser.add_argument(
        "--only", choices=("speed", "accuracy"), default=None, help="run one of the two"
    )
    parser.add_argument(
        "--out",
        metavar="PATH",
        default=None,
        help="directory for {speed,accuracy}.{json,md}; default benchmarks/results/*.json "
        "and docs/benchmarks/*.md",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    common.TORCH_THREADS = args.torch_threads
    start = time.perf_counter()
    if args.only in (None, "speed"):
        from benchmarks import speed

        print("== speed")
        sizes = args.sizes or (speed.QUICK_SIZES if args.quick else speed.SIZES)
        repeats = args.repeats or (3 if args.quick else 5)
        speed.run(
            args.backends,
            sizes,
            repeats,
            argv=argv,
            paths=common.output_paths("speed", args.out, args.quick),
        )
    if args.only in (None, "accuracy"):
        from benchmarks import accuracy

        print("== accuracy")
        samples = args.samples or (accuracy.QUICK_SAMPLES if args.quick else accuracy.SAMPLES)
        accuracy.run(
            args.backends,
            samples,
            run_length=accuracy.QUICK_RUN_LENGTH if args.quick else accuracy.RUN_LENGTH,
            argv=argv,
            paths=common.output_paths("accuracy", args.out, args.quick),
        )
    print(f"\ndone in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
