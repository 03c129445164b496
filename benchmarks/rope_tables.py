"""RoPE tables: ``pe_core.rope_cos_sin`` vs the plain float32 ``positions * inv_freq`` tables.

``python -m benchmarks.rope_tables [--quick]``: the cos/sin a rotary module returns
(``layout="half"``: ``cat(f, f)``, head_dim 128), for a decode step (8 sequences, one
position each, at offsets near 4000) and two prefills (1 x 2048, 4 x 4096 positions).
The baseline is what transformers' rotary modules compute: ``f = positions[..., None]
.float() * inv_freq`` (float32), ``cos(cat(f, f))``, ``sin(cat(f, f))``. Both are timed
in the same run, alternating, best median of a few rounds, on torch eager (CPU, one
intra-op thread: see ``benchmarks.timesteps``) and under ``jax.jit``. The ratio is
pe_core's time over the baseline's. The last column is the baseline's largest error
against the exact values (pe_core's is below 1e-6 everywhere). Prints a Markdown
table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.common import (
    fmt_ms,
    header,
    installed,
    loadavg,
    machine_md,
    md_table,
    setup_torch,
    time_call,
)

HEAD_DIM = 128

#: name -> (batch, seq, first position)
SHAPES = {
    "decode step (8 x 1)": (8, 1, 4000),
    "prefill (1 x 2048)": (1, 2048, 0),
    "prefill (4 x 4096)": (4, 4096, 0),
}


def _positions(batch: int, seq: int, start: int) -> np.ndarray:
    return start + np.arange(batch)[:, None] * 7 + np.arange(seq)[None, :]


def _best(ours: Callable[[], Any], theirs: Callable[[], Any], quick: bool) -> tuple[float, float]:
    best_ours = best_theirs = float("inf")
    for _ in range(2 if quick else 5):
        kwargs = {"min_time": 0.02 if quick else 0.2, "max_calls": 200}
        best_theirs = min(best_theirs, time_call(theirs, 3, **kwargs)["median_ms"])
        best_ours = min(best_ours, time_call(ours, 3, **kwargs)["median_ms"])
    return best_ours, best_theirs


def _baseline_error(positions: np.ndarray, inv_freq: np.ndarray) -> float:
    from pe_core import rope_cos_sin

    exact, _ = rope_cos_sin(positions, HEAD_DIM, dtype="float64", layout="half_width")
    naive = np.cos(positions[..., None].astype(np.float32) * inv_freq.astype(np.float32))
    return float(np.abs(naive - exact).max())


def measure(quick: bool) -> list[list[str]]:
    from pe_core import RopeSpec, rope_cos_sin

    inv_freq = np.asarray(RopeSpec().constants(HEAD_DIM)[0])
    rows = []
    torch = setup_torch() if installed("torch") else None
    jax = None
    if installed("jax"):
        import jax

    for name, (batch, seq, start) in SHAPES.items():
        positions = _positions(batch, seq, start)
        error = f"{_baseline_error(positions, inv_freq):.1e}"
        if torch is not None:
            # a decode step's positions advance by one each call (no table is reused)
            step = [0] if seq == 1 else None
            pos_t = torch.as_tensor(positions)
            freq_t = torch.as_tensor(inv_freq, dtype=torch.float32)

            def now(p: Any, step: list[int] | None = step) -> Any:
                if step is None:
                    return p
                step[0] += 1
                return p + step[0]

            def theirs_t(p: Any = pos_t, w: Any = freq_t) -> Any:
                f = now(p)[..., None].float() * w
                emb = torch.cat((f, f), dim=-1)
                return emb.cos(), emb.sin()

            def ours_t(p: Any = pos_t) -> Any:
                return rope_cos_sin(now(p), HEAD_DIM)

            o, t = _best(ours_t, theirs_t, quick)
            rows.append([name, "torch eager", fmt_ms(o), fmt_ms(t), f"{o / t:.2f}", error])
        if jax is not None:
            pos_j = jax.numpy.asarray(positions.astype(np.int32))
            freq_j = jax.numpy.asarray(inv_freq, dtype=jax.numpy.float32)

            def base_j(p: Any, w: Any) -> Any:
                f = p[..., None].astype(jax.numpy.float32) * w
                emb = jax.numpy.concatenate([f, f], -1)
                return jax.numpy.cos(emb), jax.numpy.sin(emb)

            theirs_jit = jax.jit(base_j)
            ours_jit = jax.jit(lambda p: rope_cos_sin(p, HEAD_DIM))

            def theirs_jj(p: Any = pos_j, w: Any = freq_j, fn: Any = theirs_jit) -> Any:
                return jax.block_until_ready(fn(p, w))

            def ours_jj(p: Any = pos_j, fn: Any = ours_jit) -> Any:
                return jax.block_until_ready(fn(p))

            o, t = _best(ours_jj, theirs_jj, quick)
            rows.append([name, "jax.jit", fmt_ms(o), fmt_ms(t), f"{o / t:.2f}", error])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rope_tables", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    args = parser.parse_args(argv)
    load = loadavg()
    rows = measure(args.quick)
    head = header(["rope_tables", *(["--quick"] if args.quick else [])], load)
    print(machine_md(head))
    print()
    print(
        md_table(
            ["tables", "backend", "pe_core ms", "float32 baseline ms", "ratio", "baseline error"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
