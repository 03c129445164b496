"""GPU speed of pe_core: encode and apply_rope on a CUDA device, against baselines.

``python -m benchmarks.gpu`` times, on the GPU, with positions and inputs already on
the device:

* ``encode``: 1, 16 and 128 positions from 1000 with d = 512, 8192 consecutive
  positions with d = 1024, and a seeded permutation of 8192 positions with d = 1024.
  Baseline: the textbook ``PositionalEncoding`` table at the same positions, its
  tensors created on the positions' device (restated below: this script needs no
  other file of the repository);
* ``apply_rope``: one decode step, ``apply_rope(q, pos); apply_rope(k, pos)`` with q
  ``(8, 32, 1, 128)``, k ``(8, 8, 1, 128)`` and a different position per example
  (``pos`` of shape ``(8, 1, 1)``); and q ``(8, 32, 4096, 128)`` in float32 and
  bfloat16 with per-example positions ``(8, 1, 4096)``. Baseline: the Hugging Face
  formula, ``LlamaRotaryEmbedding.forward`` from ``position_ids`` then
  ``apply_rotary_pos_emb`` (q and k for the decode step, q only otherwise).

PyTorch (CUDA): every timed call is bracketed by ``torch.cuda.synchronize()``; after one
untimed warm-up call, the timed pe_core calls run under
``torch.cuda.set_sync_debug_mode("error")`` (the previous mode is restored after each
call), so a host synchronisation inside pe_core raises. A pe_core call that
synchronises is reported and then timed without the debug mode. The first call of
each pe_core case runs under the ``"warn"`` mode and its warnings are counted.

JAX, when it has a GPU device: pe_core eager and under ``jax.jit``, against the same
baselines under ``jax.jit``; every call ends with ``block_until_ready``.

pe_core and its baseline are called in turn, round-robin, the order rotating every
round; the table gives the median per call. ``--tiny`` (chosen automatically without
a CUDA device) runs tiny sizes on whatever device there is, JAX on the CPU included,
and skips the sync debug mode, which is CUDA-only. ``--write`` (CUDA runs only)
writes ``docs/benchmarks/gpu.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import importlib
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.hf_rope import hf_apply_rotary_pos_emb, hf_rotary_forward

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# JAX runs after torch in this process: let it allocate GPU memory as needed rather than
# reserve most of it up front (torch's caching allocator still holds some).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "benchmarks" / "gpu.md"

FULL: dict[str, Any] = {
    "few": (1, 16, 128),
    "few_d": 512,
    "run": (8192, 1024),
    "permuted": (8192, 1024),
    "decode": (8, 32, 8, 128),  # batch, query heads, key/value heads, head_dim
    "rope": (8, 32, 4096, 128),  # batch, heads, seq, head_dim
    "budget_s": 0.5,  # timed seconds per row (both methods together)
    "min_rounds": 10,
    "max_rounds": 400,
}
TINY: dict[str, Any] = {
    "few": (1, 16, 128),
    "few_d": 64,
    "run": (256, 64),
    "permuted": (256, 64),
    "decode": (2, 4, 2, 32),
    "rope": (2, 4, 128, 32),
    "budget_s": 0.02,
    "min_rounds": 3,
    "max_rounds": 20,
}
#: One position per example of the decode step (tiled for other batch sizes).
DECODE_POSITIONS = (4095, 17, 1000, 2048, 5, 300, 3071, 777)
TORCH_THREADS = 2  # CPU runs only


def _scale(d: int) -> float:
    return -(math.log(10000.0) / d)


# --------------------------------------------------------------------------- timing
def interleaved(
    methods: dict[str, Callable[[], Any]],
    cfg: dict[str, Any],
    wrap: Callable[[str, Callable[[], Any]], float] | None = None,
) -> dict[str, float]:
    """Median ms per call of each method: one call of each per round, order rotating.

    ``wrap(name, fn)`` runs one call and returns its seconds (default: wall time).
    The methods have been warmed up by the caller. Rounds fill ``cfg["budget_s"]``.
    """

    def wall(name: str, fn: Callable[[], Any]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    call = wrap or wall
    per_round = max(sum(call(name, fn) for name, fn in methods.items()), 1e-6)
    rounds = int(min(cfg["max_rounds"], max(cfg["min_rounds"], cfg["budget_s"] / per_round)))
    names = list(methods)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(call(name, methods[name]) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


# --------------------------------------------------------------------------- torch
def torch_textbook_at(position: Any, d: int) -> Any:
    """The textbook table at 1-D ``position``, its tensors on ``position``'s device."""
    import torch

    position = position.unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, device=position.device) * _scale(d))
    pe = torch.zeros(position.shape[0], d, device=position.device)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class TorchRunner:
    """Times torch calls on one device; on CUDA, guards pe_core calls with the sync mode."""

    def __init__(self, torch: Any, device: Any, cfg: dict[str, Any]) -> None:
        self.torch, self.device, self.cfg = torch, device, cfg
        self.cuda = device.type == "cuda"
        self.prev = torch.cuda.get_sync_debug_mode() if self.cuda else 0

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def _set(self, mode: Any) -> None:
        self.torch.cuda.set_sync_debug_mode(mode)

    def first_call_warnings(self, fn: Callable[[], Any]) -> int | None:
        """Run ``fn`` once under the ``"warn"`` sync mode; how many sync warnings."""
        if not self.cuda:
            fn()
            return None
        self.sync()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self._set("warn")
            try:
                fn()
            finally:
                self._set(self.prev)
        self.sync()
        return sum("synchroniz" in str(w.message).lower() for w in caught)

    def sync_check(self, fn: Callable[[], Any]) -> str | None:
        """None when ``fn`` ran under ``set_sync_debug_mode("error")``; else the error."""
        self.sync()
        self._set("error")
        try:
            fn()
        except RuntimeError as exc:
            if "synchroniz" not in str(exc).lower():
                raise
            return str(exc).splitlines()[0][:200]
        finally:
            self._set(self.prev)
        self.sync()
        return None

    def time(
        self, pe_core_fn: Callable[[], Any], baseline_fn: Callable[[], Any], guarded: bool
    ) -> dict[str, float]:
        torch = self.torch

        def call(name: str, fn: Callable[[], Any]) -> float:
            self.sync()
            if self.cuda and guarded and name == "pe_core":
                torch.cuda.set_sync_debug_mode("error")
            start = time.perf_counter()
            try:
                fn()
            finally:
                if self.cuda:  # the same call for both methods: the same overhead
                    torch.cuda.set_sync_debug_mode(self.prev)
            self.sync()
            return time.perf_counter() - start

        return interleaved({"pe_core": pe_core_fn, "baseline": baseline_fn}, self.cfg, call)


def torch_cases(torch: Any, device: Any, cfg: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """(method, size, pe_core call, baseline call) for every torch row."""
    import pe_core
    from pe_core.rope import apply_rope

    cases: list[tuple[str, str, Any, Any]] = []
    d = cfg["few_d"]
    for n in cfg["few"]:
        pos = torch.arange(n, device=device) + 1000
        cases.append(
            (
                "encode vs textbook",
                f"{n} × {d}",
                functools.partial(pe_core.encode, pos, d),
                functools.partial(torch_textbook_at, pos, d),
            )
        )
    n, d = cfg["run"]
    run = torch.arange(n, device=device)
    cases.append(
        (
            "encode, consecutive vs textbook",
            f"{n} × {d}",
            functools.partial(pe_core.encode, run, d),
            functools.partial(torch_textbook_at, run, d),
        )
    )
    n, d = cfg["permuted"]
    perm = torch.from_numpy(np.random.default_rng(0).permutation(n)).to(device)
    cases.append(
        (
            "encode, permuted vs textbook",
            f"{n} × {d}",
            functools.partial(pe_core.encode, perm, d),
            functools.partial(torch_textbook_at, perm, d),
        )
    )
    gen = torch.Generator().manual_seed(0)
    batch, heads, kv_heads, head_dim = cfg["decode"]
    q = torch.randn(batch, heads, 1, head_dim, generator=gen).to(device)
    k = torch.randn(batch, kv_heads, 1, head_dim, generator=gen).to(device)
    positions = torch.tensor(
        [DECODE_POSITIONS[i % len(DECODE_POSITIONS)] for i in range(batch)], device=device
    )
    pos, position_ids = positions[:, None, None], positions[:, None]
    inv_freq = (
        1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    ).to(device)

    def decode_pe(q: Any = q, k: Any = k, pos: Any = pos) -> Any:
        return apply_rope(q, pos), apply_rope(k, pos)

    def decode_hf(q: Any = q, k: Any = k, ids: Any = position_ids, inv: Any = inv_freq) -> Any:
        return hf_apply_rotary_pos_emb(q, k, *hf_rotary_forward(inv, q, ids))

    size = f"q {tuple(q.shape)}, k {tuple(k.shape)} float32"
    cases.append(("apply_rope decode step vs HF", size, decode_pe, decode_hf))
    batch, heads, seq, head_dim = cfg["rope"]
    offsets = torch.from_numpy(np.random.default_rng(2).integers(0, 10000, size=batch))
    position_ids = (offsets[:, None] + torch.arange(seq)).to(device)
    pos = position_ids[:, None, :]
    inv_freq = (
        1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    ).to(device)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(batch, heads, seq, head_dim, generator=gen).to(device, dtype)

        def rope_pe(x: Any = x, pos: Any = pos) -> Any:
            return apply_rope(x, pos)

        def rope_hf(x: Any = x, ids: Any = position_ids, inv: Any = inv_freq) -> Any:
            return hf_apply_rotary_pos_emb(x, None, *hf_rotary_forward(inv, x, ids))[0]

        size = f"q {tuple(x.shape)} {str(dtype).split('.')[-1]}"
        cases.append(("apply_rope per-example vs HF", size, rope_pe, rope_hf))
    return cases


def bench_torch(cfg: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    torch = importlib.import_module("torch")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(TORCH_THREADS)
        notes.append(
            "torch sync check skipped: torch.cuda.set_sync_debug_mode is CUDA-only and "
            "this run is on the CPU"
        )
    runner = TorchRunner(torch, device, cfg)
    label = f"torch {device.type}"
    rows = []
    for method, size, pe_fn, base_fn in torch_cases(torch, device, cfg):
        row: dict[str, Any] = {"method": f"{label}: {method}", "size": size}
        try:
            row["first_call_sync_warnings"] = runner.first_call_warnings(pe_fn)
            base_fn()
            syncs = runner.sync_check(pe_fn) if runner.cuda else None
            row["syncs"] = syncs
            medians = runner.time(pe_fn, base_fn, guarded=runner.cuda and syncs is None)
            row.update(pe_core_ms=medians["pe_core"], baseline_ms=medians["baseline"])
        except Exception as exc:  # one broken case must not hide the others
            row["error"] = f"{exc.__class__.__name__}: {exc}".replace("\n", " ")[:300]
        _log(row)
        rows.append(row)
    if runner.cuda:
        torch.cuda.empty_cache()
        synced = [r for r in rows if r.get("syncs")]
        if synced:
            for r in synced:
                notes.append(f"SYNCHRONISES: {r['method']} {r['size']}: {r['syncs']}")
        else:
            notes.append(
                'torch sync check: every timed pe_core call ran under set_sync_debug_mode("error") '
                "without raising: no host synchronisation"
            )
        warned = [r for r in rows if r.get("first_call_sync_warnings")]
        for r in warned:
            notes.append(
                f"first call (not timed) of {r['method']} {r['size']}: "
                f"{r['first_call_sync_warnings']} synchronising operation(s) warned"
            )
    return rows


# --------------------------------------------------------------------------- jax
@functools.cache
def _jax_baselines() -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    def textbook_at(position: Any, d: int) -> Any:
        position = position[:, None]
        div_term = jnp.exp(jnp.arange(0, d, 2) * _scale(d))
        pe = jnp.zeros((position.shape[0], d), dtype=jnp.float32)
        pe = pe.at[:, 0::2].set(jnp.sin(position * div_term))
        return pe.at[:, 1::2].set(jnp.cos(position * div_term))

    def rotate_half(x: Any) -> Any:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return jnp.concatenate([-x2, x1], axis=-1)

    def hf(q: Any, k: Any, position_ids: Any, inv_freq: Any) -> Any:
        inv_freq_expanded = jnp.broadcast_to(
            inv_freq[None, :, None], (position_ids.shape[0], inv_freq.shape[0], 1)
        )
        position_ids_expanded = position_ids[:, None, :].astype(jnp.float32)
        freqs = jnp.swapaxes(inv_freq_expanded @ position_ids_expanded, 1, 2)
        emb = jnp.concatenate([freqs, freqs], axis=-1)
        cos = jnp.cos(emb).astype(q.dtype)[:, None]
        sin = jnp.sin(emb).astype(q.dtype)[:, None]
        q_embed = q * cos + rotate_half(q) * sin
        if k is None:
            return q_embed
        return q_embed, k * cos + rotate_half(k) * sin

    return {
        "textbook_at": jax.jit(textbook_at, static_argnums=(1,)),
        "hf": jax.jit(hf),
    }


def jax_cases(cfg: dict[str, Any]) -> list[tuple[str, str, Any, Any, Any]]:
    """(method, size, eager pe_core call, jitted pe_core call, baseline call)."""
    import jax
    import jax.numpy as jnp

    import pe_core
    from pe_core.rope import apply_rope

    base = _jax_baselines()
    block = jax.block_until_ready
    cases = []

    def encode_case(method: str, pos: Any, d: int) -> None:
        jitted = jax.jit(lambda p: pe_core.encode(p, d))
        cases.append(
            (
                method,
                f"{pos.shape[0]} × {d}",
                lambda: block(pe_core.encode(pos, d)),
                lambda: block(jitted(pos)),
                lambda: block(base["textbook_at"](pos, d)),
            )
        )

    d = cfg["few_d"]
    for n in cfg["few"]:
        encode_case("encode vs textbook", jnp.arange(n) + 1000, d)
    n, d = cfg["run"]
    encode_case("encode, consecutive vs textbook", jnp.arange(n), d)
    n, d = cfg["permuted"]
    encode_case(
        "encode, permuted vs textbook", jnp.asarray(np.random.default_rng(0).permutation(n)), d
    )

    batch, heads, kv_heads, head_dim = cfg["decode"]
    key_q, key_k = jax.random.split(jax.random.PRNGKey(0))
    q = jax.random.normal(key_q, (batch, heads, 1, head_dim), jnp.float32)
    k = jax.random.normal(key_k, (batch, kv_heads, 1, head_dim), jnp.float32)
    positions = jnp.asarray([DECODE_POSITIONS[i % len(DECODE_POSITIONS)] for i in range(batch)])
    pos, position_ids = positions[:, None, None], positions[:, None]
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    step = jax.jit(lambda q, k, p: (apply_rope(q, p), apply_rope(k, p)))
    cases.append(
        (
            "apply_rope decode step vs HF",
            f"q {q.shape}, k {k.shape} float32",
            lambda: block((apply_rope(q, pos), apply_rope(k, pos))),
            lambda: block(step(q, k, pos)),
            lambda: block(base["hf"](q, k, position_ids, inv_freq)),
        )
    )

    batch, heads, seq, head_dim = cfg["rope"]
    offsets = jnp.asarray(np.random.default_rng(2).integers(0, 10000, size=batch))
    ids = offsets[:, None] + jnp.arange(seq)
    pos_seq = ids[:, None, :]
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    rope = jax.jit(apply_rope)
    hf_q = jax.jit(lambda x, i, f: base["hf"](x, None, i, f))
    for dtype in (jnp.float32, jnp.bfloat16):
        x = jax.random.normal(key_q, (batch, heads, seq, head_dim), jnp.float32).astype(dtype)
        cases.append(
            (
                "apply_rope per-example vs HF",
                f"q {x.shape} {jnp.dtype(dtype).name}",
                functools.partial(_block_call, apply_rope, x, pos_seq),
                functools.partial(_block_call, rope, x, pos_seq),
                functools.partial(_block_call, hf_q, x, ids, inv_freq),
            )
        )
    return cases


def _block_call(fn: Callable[..., Any], *args: Any) -> Any:
    import jax

    return jax.block_until_ready(fn(*args))


def bench_jax(cfg: dict[str, Any], tiny: bool, notes: list[str]) -> list[dict[str, Any]]:
    try:
        jax = importlib.import_module("jax")
    except ImportError:
        notes.append("jax: not installed, skipped")
        return []
    platforms = {device.platform for device in jax.devices()}
    if "gpu" not in platforms and not tiny:
        notes.append(f"jax: no GPU device (platforms: {', '.join(sorted(platforms))}), skipped")
        return []
    label = f"jax {jax.devices()[0].platform}"
    rows = []
    for method, size, eager, jitted, base_fn in jax_cases(cfg):
        for mode, pe_fn in (("eager", eager), ("jit", jitted)):
            row: dict[str, Any] = {"method": f"{label} {mode}: {method} (jit)", "size": size}
            try:
                pe_fn()  # warm-up: compilation
                base_fn()
                medians = interleaved({"pe_core": pe_fn, "baseline": base_fn}, cfg)
                row.update(pe_core_ms=medians["pe_core"], baseline_ms=medians["baseline"])
            except Exception as exc:
                row["error"] = f"{exc.__class__.__name__}: {exc}".replace("\n", " ")[:300]
            _log(row)
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- report
def _log(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"  {row['method']:52s} {row['size']:34s} FAILED {row['error']}", flush=True)
        return
    print(
        f"  {row['method']:52s} {row['size']:34s} pe_core {row['pe_core_ms']:9.3f} ms  "
        f"baseline {row['baseline_ms']:9.3f} ms  ratio {row['pe_core_ms'] / row['baseline_ms']:.2f}",
        flush=True,
    )


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| method | size | pe_core ms | baseline ms | ratio |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['method']} | {row['size']} | failed: {row['error']} | – | – |")
            continue
        pe, base = row["pe_core_ms"], row["baseline_ms"]
        lines.append(
            f"| {row['method']} | {row['size']} | {_ms(pe)} | {_ms(base)} | {pe / base:.2f}× |"
        )
    return "\n".join(lines)


def setup_lines(argv: Sequence[str], tiny: bool) -> list[str]:
    libraries = [f"python {platform.python_version()}"]
    device = "no CUDA device"
    for name in ("pe_core", "numpy", "torch", "jax", "jaxlib"):
        try:
            module = importlib.import_module(name)
            libraries.append(f"{name} {getattr(module, '__version__', 'unknown')}")
        except ImportError:
            continue
        if name == "torch" and module.cuda.is_available():
            props = module.cuda.get_device_properties(0)
            device = (
                f"{module.cuda.get_device_name(0)}, {props.total_memory / 2**30:.0f} GiB, "
                f"CUDA {module.version.cuda}"
            )
    return [
        f"- Command: `{' '.join(['python -m benchmarks.gpu', *argv])}`",
        f"- Date: {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Device: {device}; host {os.cpu_count()} CPUs, {platform.platform()}",
        f"- Libraries: {', '.join(libraries)}",
        f"- Sizes: {'tiny (a check that the script runs, not a measurement)' if tiny else 'full'}",
    ]


def report(rows: Sequence[dict[str, Any]], notes: Sequence[str], setup: list[str]) -> str:
    parts = [
        "## Setup",
        "",
        *setup,
        "- Timing: pe_core and its baseline called in turn, round-robin (order alternating), "
        "after warm-up calls; median per call. torch: `torch.cuda.synchronize()` before and "
        "after every timed call. JAX: `block_until_ready` on every result; baselines "
        "under `jax.jit`.",
        "- Baselines: encode, the textbook table with its tensors on the positions' "
        "device; apply_rope, transformers' `LlamaRotaryEmbedding.forward` from "
        "`position_ids` and `apply_rotary_pos_emb` (q and k for the decode step, q only "
        "for the per-example rows).",
        "",
        "## Median time per call",
        "",
        table(rows),
    ]
    if notes:
        parts += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu",
        description="Time pe_core.encode and apply_rope on a CUDA GPU against baselines.",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="tiny sizes on any device (the default without a CUDA device)",
    )
    parser.add_argument(
        "--write", action="store_true", help="write docs/benchmarks/gpu.md (CUDA runs only)"
    )
    parser.add_argument(
        "--backends", default="torch,jax", help="comma-separated: torch,jax (default both)"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    notes: list[str] = []
    try:
        torch = importlib.import_module("torch")
        cuda = bool(torch.cuda.is_available())
    except ImportError:
        torch, cuda = None, False
    tiny = args.tiny or not cuda
    if tiny and not args.tiny:
        print("no CUDA device: running --tiny")
    cfg = TINY if tiny else FULL
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    rows: list[dict[str, Any]] = []
    if "torch" in backends:
        if torch is None:
            notes.append("torch: not installed, skipped")
        else:
            rows += bench_torch(cfg, notes)
    if "jax" in backends:
        rows += bench_jax(cfg, tiny, notes)
    markdown = report(rows, notes, setup_lines(argv, tiny))
    print()
    print(markdown)
    if args.write:
        if cuda and not tiny:
            REPORT.parent.mkdir(parents=True, exist_ok=True)
            REPORT.write_text("# GPU speed\n\n" + markdown, encoding="utf-8")
            print(f"wrote {REPORT.relative_to(ROOT)}")
        else:
            print("--write ignored: only a full CUDA run replaces the GPU page")
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
