"""Fourier features against the straightforward PyTorch expression, eager.

The baseline is the expression SAM and diffusers use::

    proj = 2 * math.pi * (x @ B)
    torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)

measured in the same run on the same tensors, against
``pe_core.fourier_features(x, B)`` with ``B`` a fixed NumPy matrix (split on the host)
and with ``B`` a trainable ``torch.nn.Parameter`` (split on the device), forward only.
Each row also gives both errors against the float64 formula.

``python -m benchmarks.fourier`` prints a table; ``--quick`` uses tiny sizes. Ratios
above 1 mean pe_core is slower: the exact reduction costs about a dozen elementwise
operations where the baseline has one matrix product.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from benchmarks.common import fmt_err, fmt_ms, fmt_ratio, md_table, setup_torch, time_call

#: (points, k, m, frequency scale) per row; --quick takes the first two.
SIZES = [(1024, 2, 64, 10.0), (4096, 3, 128, 100.0), (64 * 64, 2, 128, 1.0), (16384, 3, 256, 30.0)]


def _exact(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The features in float64 with the turns reduced first (exact to ~1e-13 here)."""
    turns = x.astype(np.float64) @ b.astype(np.float64)
    theta = 2 * np.pi * (turns - np.round(turns))
    return np.concatenate([np.sin(theta), np.cos(theta)], -1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats")
    args = parser.parse_args(argv)
    torch = setup_torch()
    import pe_core

    sizes = SIZES[:2] if args.quick else SIZES
    repeats = 3 if args.quick else 15
    rows = []
    for n, k, m, scale in sizes:
        rng = np.random.default_rng(0)
        x_np = rng.uniform(-1, 1, size=(n, k)).astype(np.float32)
        b_np = rng.normal(size=(k, m)) * scale
        x = torch.from_numpy(x_np)
        b32 = torch.from_numpy(b_np.astype(np.float32))
        param = torch.nn.Parameter(b32.clone())

        def baseline(b=b32, x=x):
            proj = 2 * math.pi * (x @ b)
            return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)

        def fixed(b=b_np, x=x):
            return pe_core.fourier_features(x, b)

        def trained(p=param, x=x):
            with torch.no_grad():
                return pe_core.fourier_features(x, p)

        exact64 = _exact(x_np, b_np)  # the formula of the host matrix
        exact32 = _exact(x_np, b_np.astype(np.float32))  # of the float32 tensor
        base = time_call(baseline, repeats)["median_ms"]
        base_err = float(np.abs(baseline().double().numpy() - exact32).max())
        for label, fn, exact in (
            ("fixed B (NumPy)", fixed, exact64),
            ("trainable B (Parameter)", trained, exact32),
        ):
            ours = time_call(fn, repeats)["median_ms"]
            err = float(np.abs(fn().double().numpy() - exact).max())
            rows.append(
                [
                    f"fourier_features, {label}",
                    f"{n} x {k} -> {2 * m}, σ={scale:g}",
                    fmt_ms(ours),
                    fmt_ms(base),
                    fmt_ratio(ours / base),
                    fmt_err(err),
                    fmt_err(base_err),
                ]
            )
    headers = [
        "measurement",
        "size",
        "pe_core ms",
        "baseline ms",
        "ratio",
        "error",
        "baseline error",
    ]
    print("torch eager, CPU, float32, forward; baseline: cat(sin(2π x@B), cos(2π x@B))")
    print(md_table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
