"""Compiled routes: pe_core against the textbook code compiled the same way.

Each row times one compiled function whose positions are traced (the compiler cannot
see their values, so pe_core runs its exact per-element kernel) and the textbook code
under the same compiler, in the same run, in alternation:

* ``torch.compile``: ``fullgraph=True`` with static shapes (``dynamic=False``), and
  with ``dynamic=True`` (symbolic sizes: one graph for every length);
* ``jax.jit`` and ``tf.function``.

Two functions: ``encode(positions, d)`` against the tutorial table of
:mod:`benchmarks.textbook` (``*_table_at``), and ``apply_rope(q, positions)`` against
the Hugging Face formula with its angles made from the same positions inside the
function (``inv_freq``, ``cos``/``sin`` of ``pos * inv_freq``, ``q * cos +
rotate_half(q) * sin``). Positions are the framework's default ``arange`` (int64 for
torch, int32 for JAX and TensorFlow). The warm-up call (compilation) is not timed.

``--quick`` uses small sizes and prints only; ``--routes`` picks routes.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import common, textbook

ROUTES = ("torch.compile", "torch.compile dynamic", "jax.jit", "tf.function")
FULL = {"encode": (8192, 1024), "rope": (1, 8, 2048, 128), "rounds": 7}
QUICK = {"encode": (256, 64), "rope": (1, 2, 64, 32), "rounds": 3}


def _hf_inv_freq(head_dim: int) -> list[float]:
    return [1.0 / 10000.0 ** (i / head_dim) for i in range(0, head_dim, 2)]


# --------------------------------------------------------------------------- cases
def torch_cases(route: str, cfg: dict[str, Any]) -> dict[str, tuple[Callable, Callable]]:
    import torch

    import pe_core

    common.setup_torch()
    n, d = cfg["encode"]
    shape = cfg["rope"]
    dynamic = route.endswith("dynamic")

    def compiled(fn: Callable) -> Callable:
        return torch.compile(fn, fullgraph=True, dynamic=dynamic)

    inv_freq = torch.tensor(_hf_inv_freq(shape[-1]))

    def hf_rope(q: Any, pos: Any) -> Any:
        freqs = pos.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        half = q.shape[-1] // 2
        rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        return q * emb.cos() + rotated * emb.sin()

    positions = torch.arange(n)
    q = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    rope_pos = torch.arange(shape[-2])
    pe_encode = compiled(lambda p: pe_core.encode(p, d))
    tb_encode = compiled(lambda p: textbook.torch_table_at(p, d))
    pe_rope = compiled(lambda x, p: pe_core.apply_rope(x, p))
    tb_rope = compiled(hf_rope)
    return {
        "encode": (lambda: pe_encode(positions), lambda: tb_encode(positions)),
        "apply_rope": (lambda: pe_rope(q, rope_pos), lambda: tb_rope(q, rope_pos)),
    }


def jax_cases(route: str, cfg: dict[str, Any]) -> dict[str, tuple[Callable, Callable]]:
    import jax
    import jax.numpy as jnp

    import pe_core

    n, d = cfg["encode"]
    shape = cfg["rope"]
    inv_freq = jnp.asarray(_hf_inv_freq(shape[-1]), dtype=jnp.float32)

    def hf_rope(q: Any, pos: Any) -> Any:
        freqs = pos.astype(jnp.float32)[:, None] * inv_freq[None, :]
        emb = jnp.concatenate([freqs, freqs], axis=-1)
        half = q.shape[-1] // 2
        rotated = jnp.concatenate([-q[..., half:], q[..., :half]], axis=-1)
        return q * jnp.cos(emb) + rotated * jnp.sin(emb)

    positions = jnp.arange(n, dtype=jnp.int32)
    q = jax.random.normal(jax.random.PRNGKey(0), shape, dtype=jnp.float32)
    rope_pos = jnp.arange(shape[-2], dtype=jnp.int32)
    pe_encode = jax.jit(lambda p: pe_core.encode(p, d))
    pe_rope = jax.jit(lambda x, p: pe_core.apply_rope(x, p))
    tb_rope = jax.jit(hf_rope)
    return {
        "encode": (
            lambda: pe_encode(positions).block_until_ready(),
            lambda: textbook.jax_table_at(positions, d).block_until_ready(),
        ),
        "apply_rope": (
            lambda: pe_rope(q, rope_pos).block_until_ready(),
            lambda: tb_rope(q, rope_pos).block_until_ready(),
        ),
    }


def tensorflow_cases(route: str, cfg: dict[str, Any]) -> dict[str, tuple[Callable, Callable]]:
    import tensorflow as tf

    import pe_core

    n, d = cfg["encode"]
    shape = cfg["rope"]
    inv_freq = tf.constant(_hf_inv_freq(shape[-1]), dtype=tf.float32)

    def hf_rope(q: Any, pos: Any) -> Any:
        freqs = tf.cast(pos, tf.float32)[:, None] * inv_freq[None, :]
        emb = tf.concat([freqs, freqs], axis=-1)
        half = q.shape[-1] // 2
        rotated = tf.concat([-q[..., half:], q[..., :half]], axis=-1)
        return q * tf.cos(emb) + rotated * tf.sin(emb)

    positions = tf.range(n, dtype=tf.int32)
    q = tf.random.stateless_normal(shape, seed=(0, 0))
    rope_pos = tf.range(shape[-2], dtype=tf.int32)
    pe_encode = tf.function(lambda p: pe_core.encode(p, d))
    pe_rope = tf.function(lambda x, p: pe_core.apply_rope(x, p))
    tb_rope = tf.function(hf_rope)
    return {
        "encode": (lambda: pe_encode(positions), lambda: textbook.tf_table_at(positions, d)),
        "apply_rope": (lambda: pe_rope(q, rope_pos), lambda: tb_rope(q, rope_pos)),
    }


CASES = {
    "torch.compile": ("torch", torch_cases),
    "torch.compile dynamic": ("torch", torch_cases),
    "jax.jit": ("jax", jax_cases),
    "tf.function": ("tensorflow", tensorflow_cases),
}


# --------------------------------------------------------------------------- timing
def alternating_medians(pe: Callable, base: Callable, rounds: int) -> tuple[float, float]:
    """Median ms of ``pe`` and ``base``, timed in alternation after one warm-up each."""
    pe(), base()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, out in ((pe, times[0]), (base, times[1])):
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1e3)
    return sorted(times[0])[rounds // 2], sorted(times[1])[rounds // 2]


def run(routes: Sequence[str], cfg: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    for route in routes:
        module, make = CASES[route]
        if not common.installed(module):
            notes.append(f"{route}: {module} not installed, skipped")
            continue
        for name, (pe, base) in make(route, cfg).items():
            start = time.perf_counter()
            pe_ms, base_ms = alternating_medians(pe, base, cfg["rounds"])
            size = "×".join(map(str, cfg["encode" if name == "encode" else "rope"]))
            ratio = common.fmt_ratio(pe_ms / base_ms)
            rows.append([route, name, size, common.fmt_ms(pe_ms), common.fmt_ms(base_ms), ratio])
            print(f"  {route:22s} {name:10s} done in {time.perf_counter() - start:.0f} s")
    return rows, notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument(
        "--routes", default=",".join(ROUTES), help=f"comma-separated, of: {', '.join(ROUTES)}"
    )
    args = parser.parse_args(argv)
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    unknown = [r for r in routes if r not in CASES]
    if unknown:
        parser.error(f"unknown routes {unknown}; expected some of {', '.join(ROUTES)}")
    cfg = QUICK if args.quick else FULL
    load = common.loadavg()
    rows, notes = run(routes, cfg)
    print()
    print(f"1-minute load average: {load} before, {common.loadavg()} after ({os.cpu_count()} CPUs)")
    print(
        common.md_table(
            ["route", "call", "size", "pe_core ms", "textbook ms", "pe_core / textbook"], rows
        )
    )
    for note in notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
