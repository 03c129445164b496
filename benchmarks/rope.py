"""Speed of ``pe_core.apply_rope`` against the Hugging Face formula and a copy.

``python -m benchmarks.rope`` times, for queries and keys ``q, k`` of shape
``(1, 32, 4096, 128)`` (batch, heads, seq, head_dim), one call on both:

* PyTorch (``torch.set_num_threads(2)``), float32 and bfloat16:

  - ``hf``: transformers' formula ``q * cos + rotate_half(q) * sin`` (and the same
    for ``k``) with ``cos``/``sin`` of shape ``(4096, 128)`` precomputed in ``x``'s
    dtype, as ``LlamaRotaryEmbedding`` hands them to ``apply_rotary_pos_emb``;
  - ``pe_core``: ``apply_rope(q, pos)`` and ``apply_rope(k, pos)`` with
    ``pos = torch.arange(4096)``, each call computing its own angles exactly;
  - ``copy``: ``q.clone()`` and ``k.clone()``, the bound for any function that reads
    its input and returns a new tensor of the same size;

* JAX under ``jax.jit`` (XLA's default threads), float32 and bfloat16: ``pe_core``
  (positions traced, so the angles come from the device kernel), ``hf`` (the same
  formula, jitted) and ``copy``: ``-q`` and ``-k`` (a plain copy is forwarded
  without work under ``jit``; negation is the cheapest pass that reads and writes
  every element).

Each backend runs in a fresh process. Calls are interleaved round-robin (one call of
each method per round, in an order that rotates) so that load from other processes
affects all methods alike; the table gives the median per call
in milliseconds and the ratios against the targets. A full run (both backends)
writes ``docs/benchmarks/rope.md`` and updates the table in ``docs/rope.md``;
``--quick`` uses smaller tensors and writes nothing. For reference the PyTorch rows
also time one ``torch.compile``-fused float32 pass of the rotation (``--no-compile``
skips it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import functools
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "benchmarks" / "rope.md"
PAGE = ROOT / "docs" / "rope.md"
MARKERS = ("<!-- BEGIN benchmarks/rope -->", "<!-- END benchmarks/rope -->")

SHAPE = (1, 32, 4096, 128)
QUICK_SHAPE = (1, 8, 1024, 128)
TORCH_THREADS = 2

#: The targets: pe_core/hf at most 0.5 and pe_core/copy at most 2.5 (PyTorch);
#: pe_core/copy at most 1.5 (JAX under jit).
TARGETS = {"torch_vs_hf": 0.5, "torch_vs_copy": 2.5, "jax_vs_copy": 1.5}


def interleaved_medians(
    methods: dict[str, Callable[[], Any]], rounds: int, warmup: int = 1
) -> dict[str, float]:
    """Median wall time (ms) of each method, timed one call per method per round.

    The order rotates from round to round, so that no method always follows the same
    one (a call that frees large buffers makes the next call fault its pages back in).
    """
    for fn in methods.values():
        for _ in range(warmup):
            fn()
    names = list(methods)
    times: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            methods[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def bench_torch(
    shape: tuple[int, ...], rounds: int, compile_reference: bool = True
) -> list[dict[str, Any]]:
    import torch

    from pe_core.rope import apply_rope

    torch.set_num_threads(TORCH_THREADS)
    seq, head_dim = shape[-2], shape[-1]
    gen = torch.Generator().manual_seed(0)
    pos = torch.arange(seq)
    # transformers' LlamaRotaryEmbedding (default rope_type), float32 then cast to x's dtype
    inv_freq = 1.0 / (
        10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    )
    freqs = pos.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)

    def rotate_half(x: Any) -> Any:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    fused = _fused_rotation(torch) if compile_reference else None
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(shape, generator=gen).to(dtype)
        k = torch.randn(shape, generator=gen).to(dtype)
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        cos32, sin32 = freqs.cos(), freqs.sin()
        methods = _torch_methods(q, k, cos, sin, pos, rotate_half, apply_rope, fused, cos32, sin32)
        try:
            medians = interleaved_medians(methods, rounds)
        except Exception as exc:  # e.g. no C++ compiler for the compiled reference
            print(f"torch.compile reference left out: {exc.__class__.__name__}: {exc}")
            methods.pop("fused", None)
            fused = None
            medians = interleaved_medians(methods, rounds)
        rows.append({"backend": "torch", "dtype": str(dtype).split(".")[-1], **medians})
    return rows


def _torch_methods(
    q: Any,
    k: Any,
    cos: Any,
    sin: Any,
    pos: Any,
    rotate_half: Any,
    apply_rope: Any,
    fused: Any,
    cos32: Any,
    sin32: Any,
) -> dict[str, Callable[[], Any]]:
    methods = {
        "hf": lambda: (q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin),
        "pe_core": lambda: (apply_rope(q, pos), apply_rope(k, pos)),
        "pe_core_interleaved": lambda: (
            apply_rope(q, pos, layout="interleaved"),
            apply_rope(k, pos, layout="interleaved"),
        ),
        "copy": lambda: (q.clone(), k.clone()),
    }
    if fused is not None:
        methods["fused"] = lambda: (fused(q, cos32, sin32), fused(k, cos32, sin32))
    return methods


def _fused_rotation(torch: Any) -> Any:
    """One inductor kernel: the half-layout rotation in float32 with cos/sin given.

    A reference for what a single fused pass costs on this machine (it is not pe_core).
    """

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        half = x.shape[-1] // 2
        pairs = x.float().unflatten(-1, (2, half))
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-2)
        return out.flatten(-2).to(x.dtype)

    return torch.compile(rotate, fullgraph=True)


def bench_jax(shape: tuple[int, ...], rounds: int) -> list[dict[str, Any]]:
    import jax
    import jax.numpy as jnp

    from pe_core.rope import apply_rope

    seq, head_dim = shape[-2], shape[-1]
    key_q, key_k = jax.random.split(jax.random.PRNGKey(0))
    pos = jnp.arange(seq, dtype=jnp.int32)
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    freqs = pos.astype(jnp.float32)[:, None] * inv_freq[None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)

    def rotate_half(x: Any) -> Any:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return jnp.concatenate([-x2, x1], axis=-1)

    rope = jax.jit(lambda q, k, p: (apply_rope(q, p), apply_rope(k, p)))
    hf = jax.jit(lambda q, k, c, s: (q * c + rotate_half(q) * s, k * c + rotate_half(k) * s))
    copy = jax.jit(lambda q, k: (-q, -k))

    rows = []
    for dtype in (jnp.float32, jnp.bfloat16):
        q = jax.random.normal(key_q, shape, dtype=jnp.float32).astype(dtype)
        k = jax.random.normal(key_k, shape, dtype=jnp.float32).astype(dtype)
        cos, sin = jnp.cos(emb).astype(dtype), jnp.sin(emb).astype(dtype)
        methods = {
            "hf": functools.partial(_run, hf, q, k, cos, sin),
            "pe_core": functools.partial(_run, rope, q, k, pos),
            "copy": functools.partial(_run, copy, q, k),
        }
        medians = interleaved_medians(methods, rounds)
        rows.append({"backend": "jax", "dtype": jnp.dtype(dtype).name, **medians})
    return rows


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    import jax

    return jax.block_until_ready(fn(*args))


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}×"


def report(rows: Sequence[dict[str, Any]], shape: tuple[int, ...], head: dict[str, Any]) -> str:
    lines = [
        "### Setup",
        "",
        f"- Command: `{head['command']}`",
        f"- Date: {head['date']}",
        f"- Machine: {head['machine']}",
        f"- Libraries: {head['libraries']}",
        f"- 1-minute load average: {head['load_before']} before, {head['load_after']} after",
        f"- q and k of shape {shape} (batch, heads, seq, head_dim), positions 0..{shape[-2] - 1}; "
        f"torch with {TORCH_THREADS} threads, JAX under `jax.jit` with XLA's default threads.",
        f"- Median of {head['rounds']} rounds after one warm-up call; each round times one call "
        "of every method in turn, starting one method later each round (q and k both rotated in each call).",
        "",
        "### Median time per call (ms) and ratios",
        "",
        "| backend | dtype | HF formula | pe_core.apply_rope | copy bound | "
        "pe_core / HF | pe_core / copy | HF / copy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['backend']} | {row['dtype']} | {_ms(row['hf'])} | {_ms(row['pe_core'])} | "
            f"{_ms(row['copy'])} | {_ratio(row['pe_core'], row['hf'])} | "
            f"{_ratio(row['pe_core'], row['copy'])} | {_ratio(row['hf'], row['copy'])} |"
        )
    extra = [row for row in rows if "pe_core_interleaved" in row]
    if extra:
        lines += [
            "",
            'PyTorch, for comparison: `layout="interleaved"` (one complex multiply per '
            "pair), and one fused float32 pass of the rotation with cos/sin given, compiled "
            "by `torch.compile` (inductor): what a single kernel costs here (not pe_core).",
            "",
            "| backend | dtype | pe_core interleaved | / copy | fused kernel | / copy |",
            "|---|---|---|---|---|---|",
        ]
        for row in extra:
            fused = row.get("fused")
            lines.append(
                f"| {row['backend']} | {row['dtype']} | {_ms(row['pe_core_interleaved'])} | "
                f"{_ratio(row['pe_core_interleaved'], row['copy'])} | {_ms(fused)} | "
                f"{_ratio(fused, row['copy'])} |"
            )
    lines += ["", "### Targets", ""]
    for row in rows:
        if row["backend"] == "torch":
            vs_hf, vs_copy = row["pe_core"] / row["hf"], row["pe_core"] / row["copy"]
            ok = vs_hf <= TARGETS["torch_vs_hf"] and vs_copy <= TARGETS["torch_vs_copy"]
            lines.append(
                f"- torch {row['dtype']}: pe_core / HF = {vs_hf:.2f} (target <= 0.5), "
                f"pe_core / copy = {vs_copy:.2f} (target <= 2.5): {'met' if ok else 'NOT met'}"
            )
        else:
            vs_copy = row["pe_core"] / row["copy"]
            ok = vs_copy <= TARGETS["jax_vs_copy"]
            lines.append(
                f"- jax {row['dtype']}: pe_core / copy = {vs_copy:.2f} (target <= 1.5): "
                f"{'met' if ok else 'NOT met'}"
            )
    return "\n".join(lines) + "\n"


def _header(argv: Sequence[str], rounds: int, load_before: str) -> dict[str, Any]:
    import importlib

    libraries = [f"python {platform.python_version()}"]
    for name in ("numpy", "torch", "jax"):
        try:
            libraries.append(f"{name} {importlib.import_module(name).__version__}")
        except ImportError:
            libraries.append(f"{name} not installed")
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(
                line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return {
        "command": " ".join(["python -m benchmarks.rope", *argv]),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs ({cpu}), {platform.platform()}",
        "libraries": ", ".join(libraries),
        "load_before": load_before,
        "load_after": _load(),
        "rounds": rounds,
    }


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return "?"


def _splice(page: Path, markdown: str) -> bool:
    begin, end = MARKERS
    try:
        text = page.read_text(encoding="utf-8")
    except OSError:
        return False
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        return False
    page.write_text(
        text[: start + len(begin)] + "\n\n" + markdown.strip("\n") + "\n\n" + text[stop:],
        encoding="utf-8",
    )
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table, and (full runs) write the docs."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rope", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small tensors, write nothing")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 12)")
    parser.add_argument("--backends", default="torch,jax", help="comma-separated: torch,jax")
    parser.add_argument(
        "--no-compile", action="store_true", help="skip the torch.compile reference kernel"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    shape = QUICK_SHAPE if args.quick else SHAPE
    rounds = args.rounds or (3 if args.quick else 12)
    load_before = _load()
    rows: list[dict[str, Any]] = []
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    for name in names:
        if name not in ("torch", "jax"):
            parser.error(f"unknown backend {name!r}; expected torch or jax")
    # Each backend in a fresh process: PyTorch's OpenMP workers keep spinning for a while
    # after a call and would take CPU from XLA's threads (and vice versa).
    context = multiprocessing.get_context("spawn")
    for name in names:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            if name == "torch":
                job = pool.submit(bench_torch, shape, rounds, not args.no_compile)
            else:
                job = pool.submit(bench_jax, shape, rounds)
            rows += job.result()
    markdown = report(rows, shape, _header(argv, rounds, load_before))
    print(markdown)
    if not args.quick and args.backends == "torch,jax":
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text("# RoPE speed\n\n" + markdown.replace("### ", "## "), encoding="utf-8")
        _splice(PAGE, markdown.replace("### ", "#### "))
        print(f"wrote {REPORT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
