"""Per-call cost of pe_core in the shapes models call it with, against a baseline.

``python -m benchmarks.calls`` times pe_core and a baseline in the same run and reports
their ratio (below 1 pe_core is faster), with a target for each row:

* decode step (PyTorch): ``apply_rope(q, pos); apply_rope(k, pos)`` for one new token
  per example (the positions advance by one every step, as in generation), q ``(8, 32, 1, 128)`` and k ``(8, 8, 1, 128)`` float32, a different
  position per example (``pos`` of shape ``(8, 1, 1)``). Baseline: the Hugging Face
  formula as transformers' Llama runs it every step: ``LlamaRotaryEmbedding.forward``
  from ``position_ids`` of shape ``(8, 1)``, then ``apply_rotary_pos_emb`` (restated
  line by line in :func:`hf_rotary_forward` and :func:`hf_apply_rotary_pos_emb`);
* few positions (NumPy, PyTorch): ``encode(pos, 512)`` for 1, 16 and 128 positions
  from 1000 (int64). Baseline: the textbook table at those positions
  (:mod:`benchmarks.textbook`);
* arbitrary positions, fresh output (NumPy, PyTorch): a seeded permutation of 8192
  positions with d = 1024, and per-example offsets, positions of shape ``(8, 4096)``
  ``= offsets[:, None] + arange(4096)`` with d = 128 (flattened for the textbook,
  which takes 1-D positions). Baseline: the textbook table. For NumPy also the peak
  memory of one call (``tracemalloc``) as a multiple of the output's size, for pe_core
  and for the textbook;
* apply_rope with per-example positions (PyTorch): q ``(8, 32, 4096, 128)`` float32,
  positions ``(8, 1, 4096)`` from per-example offsets. Baseline: the HF rotary forward
  from ``position_ids`` ``(8, 4096)`` and ``apply_rotary_pos_emb`` on q only;
* consecutive run: ``encode(range(8192), 1024, backend=...)`` on every installed
  backend. Baseline: the textbook table (under ``jax.jit`` / ``tf.function`` for JAX /
  TensorFlow, as :mod:`benchmarks.speed` times it);
* eager growth (JAX, TensorFlow): eager ``encode`` calls with 200 distinct lengths,
  on the per-element kernel (``encode(jnp.arange(n) * 3, 64)``: positions not one
  run) and on the table path (``encode(range(n), 64, backend=...)``); resident memory
  growth from after the first call to after the last, and the TensorFlow warnings
  and log records that mention retracing. Baseline: the same calls on NumPy in the
  same process (time per new length);
* first eager torch call: in a fresh process, ``import pe_core, torch`` then
  ``pe_core.encode(torch.arange(5), 8)``: whether that loaded torch's compiler
  (``torch._dynamo`` / ``torch._inductor``) and how long the call took. Baseline: the
  textbook's first call in another fresh process.

Timing: the two methods of a row are called in turn, round-robin, in an order that
alternates every round (as :mod:`benchmarks.rope` rotates it), so that load from other
processes affects both alike; the table gives the median per call. Rounds continue
until a time budget per row is spent, so fast calls get many. Every backend runs in a
fresh process (PyTorch's OpenMP workers keep spinning after a call and would take CPU
from XLA's threads); torch runs with ``torch.set_num_threads(2)``.

A full run writes ``benchmarks/results/calls.json`` and ``docs/benchmarks/calls.md``;
``--quick`` uses tiny sizes and writes nothing (unless ``--out`` is given).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks import common, textbook
from benchmarks.hf_rope import hf_apply_rotary_pos_emb, hf_inv_freq, hf_rotary_forward

#: Targets per measurement: time ratios pe_core / baseline at most the value; peak
#: memory at most the value times the output; growth below the value in MB (10**6
#: bytes); retracing warnings and compiler modules at most the value.
TARGETS: dict[str, float] = {
    "decode_step": 1.0,
    "decode_joint": 1.0,
    "encode_few": 1.0,
    "encode_arbitrary": 1.0,
    "numpy_peak_memory": 1.5,
    "rope_per_example": 0.5,
    "encode_run": 0.5,
    "eager_growth_mb": 100.0,
    "retracing_warnings": 0,
    "compiler_modules": 0,
}

#: Sizes of the full run and of ``--quick``.
FULL: dict[str, Any] = {
    "budget_s": 1.5,  # timed seconds per row (both methods together)
    "min_rounds": 5,
    "max_rounds": 3000,
    "decode": (8, 32, 8, 128),  # batch, query heads, key/value heads, head_dim
    "few": (1, 16, 128),
    "few_d": 512,
    "permuted": (8192, 1024),
    "offsets": (8, 4096, 128),  # batch, seq, d
    "rope": (8, 32, 4096, 128),
    "run": (8192, 1024),
    # lengths range(500, 700), d: from 512 rows on (d = 64) a table is large enough
    # for a backend that builds tables (BUILDS_MIN_PAIRS) to build it itself
    "growth": (500, 700, 64),
    "child_timeout_s": 900,
}
QUICK: dict[str, Any] = {
    "budget_s": 0.05,
    "min_rounds": 3,
    "max_rounds": 50,
    "decode": (8, 32, 8, 128),
    "few": (1, 16),
    "few_d": 64,
    "permuted": (512, 64),
    "offsets": (2, 256, 32),
    "rope": (2, 4, 256, 64),
    "run": (512, 64),
    "growth": (510, 516, 64),
    "child_timeout_s": 300,
}

#: One position per example of the decode step (tiled for other batch sizes).
DECODE_POSITIONS = (4095, 17, 1000, 2048, 5, 300, 3071, 777)

MEASUREMENTS = {
    "decode_step": "decode step: apply_rope on q and k",
    "decode_joint": "decode step: apply_rope((q, k)) in one call",
    "encode_few": "encode, few positions",
    "encode_permuted": "encode, permuted positions",
    "encode_offsets": "encode, per-example offsets",
    "memory_permuted": "peak memory, permuted positions",
    "memory_offsets": "peak memory, per-example offsets",
    "rope_per_example": "apply_rope, per-example positions",
    "encode_run": "encode, consecutive run",
    "growth_kernel": "eager growth, kernel path",
    "growth_table": "eager growth, table path",
    "first_call": "first eager call",
}
BACKEND_ORDER = ("numpy", "torch", "jax", "tensorflow")
RESULT_PREFIX = "CALLS-RESULT "

Row = dict[str, Any]


# --------------------------------------------------------------------------- baselines


# --------------------------------------------------------------------------- timing
def timed_pair(
    pe_core_fn: Callable[[], Any], baseline_fn: Callable[[], Any], cfg: dict[str, Any]
) -> tuple[float, float, int]:
    """Medians (ms) of ``pe_core_fn`` and ``baseline_fn``, interleaved; and the rounds.

    One untimed warm-up call each (first-call costs, jit compilation), then rounds of
    one call of each, the order alternating (as :func:`benchmarks.rope.interleaved_medians`
    rotates it), until ``cfg["budget_s"]`` seconds and ``cfg["min_rounds"]`` rounds
    have passed (at most ``cfg["max_rounds"]``): fast calls get many rounds, so that a
    burst of load from other processes moves the medians little.
    """
    methods = {"pe_core": pe_core_fn, "baseline": baseline_fn}
    for fn in methods.values():
        fn()
    names = list(methods)
    times: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    rounds = 0
    while rounds < cfg["max_rounds"] and (
        rounds < cfg["min_rounds"] or time.perf_counter() - start < cfg["budget_s"]
    ):
        for name in names[rounds % 2 :] + names[: rounds % 2]:
            t0 = time.perf_counter()
            methods[name]()
            times[name].append((time.perf_counter() - t0) * 1e3)
        rounds += 1
    return statistics.median(times["pe_core"]), statistics.median(times["baseline"]), rounds


def time_row(
    key: str,
    backend: str,
    size: str,
    target: str,
    pe_core_fn: Callable[[], Any],
    baseline_fn: Callable[[], Any],
    cfg: dict[str, Any],
    baseline: str = "textbook",
) -> Row:
    row = _row(key, backend, size, target, baseline)
    try:
        pe_ms, base_ms, rounds = timed_pair(pe_core_fn, baseline_fn, cfg)
    except Exception as exc:  # one broken case must not hide the others
        return _failed(row, exc)
    ratio = pe_ms / base_ms
    row.update(
        pe_core=common.fmt_ms(pe_ms) + " ms",
        baseline_value=common.fmt_ms(base_ms) + " ms",
        ratio=ratio,
        met=ratio <= TARGETS[target],
        pe_core_ms=pe_ms,
        baseline_ms=base_ms,
        rounds=rounds,
    )
    print(
        f"  {backend:10s} {MEASUREMENTS[key]:38s} {size:26s} pe_core {pe_ms:9.3f} ms  "
        f"{baseline} {base_ms:9.3f} ms  ratio {ratio:5.2f}  ({rounds} rounds)",
        flush=True,
    )
    return row


def _row(key: str, backend: str, size: str, target: str, baseline: str) -> Row:
    return {
        "key": key,
        "measurement": MEASUREMENTS[key],
        "backend": backend,
        "size": size,
        "target_key": target,
        "baseline": baseline,
        "pe_core": "–",
        "baseline_value": "–",
        "ratio": None,
        "met": None,
        "error": None,
    }


def _failed(row: Row, exc: BaseException | str) -> Row:
    text = exc if isinstance(exc, str) else f"{exc.__class__.__name__}: {exc}"
    row["error"] = text.replace("\n", " ")[:300]
    print(f"  {row['backend']:10s} {row['measurement']}: FAILED {row['error']}", flush=True)
    return row


def _max_diff(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, np.float64))))


# --------------------------------------------------------------------------- numpy
def numpy_rows(cfg: dict[str, Any]) -> list[Row]:
    import pe_core

    rows = []
    d = cfg["few_d"]
    for n in cfg["few"]:
        pos = np.arange(n, dtype=np.int64) + 1000
        rows.append(
            time_row(
                "encode_few",
                "numpy",
                f"{n} × {d}",
                "encode_few",
                lambda pos=pos: pe_core.encode(pos, d),
                lambda pos=pos: textbook.numpy_table_at(pos, d),
                cfg,
            )
        )
    permuted, d_perm = _permuted_np(cfg)
    offsets, d_off = _offsets_np(cfg)
    flat = offsets.reshape(-1)
    rows.append(
        time_row(
            "encode_permuted",
            "numpy",
            f"{permuted.size} × {d_perm}",
            "encode_arbitrary",
            lambda: pe_core.encode(permuted, d_perm),
            lambda: textbook.numpy_table_at(permuted, d_perm),
            cfg,
        )
    )
    rows.append(
        time_row(
            "encode_offsets",
            "numpy",
            f"{offsets.shape} × {d_off}",
            "encode_arbitrary",
            lambda: pe_core.encode(offsets, d_off),
            lambda: textbook.numpy_table_at(flat, d_off),
            cfg,
        )
    )
    rows.append(
        memory_row(
            "memory_permuted",
            f"{permuted.size} × {d_perm}",
            permuted.size * d_perm * 4,
            lambda: pe_core.encode(permuted, d_perm),
            lambda: textbook.numpy_table_at(permuted, d_perm),
        )
    )
    rows.append(
        memory_row(
            "memory_offsets",
            f"{offsets.shape} × {d_off}",
            offsets.size * d_off * 4,
            lambda: pe_core.encode(offsets, d_off),
            lambda: textbook.numpy_table_at(flat, d_off),
        )
    )
    n, d = cfg["run"]
    rows.append(
        time_row(
            "encode_run",
            "numpy",
            f"{n} × {d}",
            "encode_run",
            lambda: pe_core.encode(range(n), d, backend="numpy"),
            lambda: textbook.numpy_table(n, d),
            cfg,
        )
    )
    return rows


def _permuted_np(cfg: dict[str, Any]) -> tuple[np.ndarray, int]:
    n, d = cfg["permuted"]
    return np.random.default_rng(0).permutation(n).astype(np.int64), d


def _offsets_np(cfg: dict[str, Any]) -> tuple[np.ndarray, int]:
    batch, seq, d = cfg["offsets"]
    offsets = np.random.default_rng(1).integers(0, 10000, size=batch)
    return offsets[:, None] + np.arange(seq, dtype=np.int64), d


def peak_over(nbytes: int, fn: Callable[[], Any]) -> float:
    """Peak memory traced by ``tracemalloc`` during one call of ``fn``, over ``nbytes``."""
    fn()  # warm caches (constants) outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / nbytes


def memory_row(
    key: str, size: str, nbytes: int, pe_core_fn: Callable[[], Any], baseline_fn: Callable[[], Any]
) -> Row:
    row = _row(key, "numpy", size, "numpy_peak_memory", "textbook")
    try:
        pe, base = peak_over(nbytes, pe_core_fn), peak_over(nbytes, baseline_fn)
    except Exception as exc:
        return _failed(row, exc)
    row.update(
        pe_core=f"{pe:.2f}× output",
        baseline_value=f"{base:.2f}× output",
        ratio=pe / base,
        met=pe <= TARGETS["numpy_peak_memory"],
        pe_core_peak_over_output=pe,
        baseline_peak_over_output=base,
        output_mib=nbytes / 2**20,
    )
    print(
        f"  numpy      {MEASUREMENTS[key]:38s} {size:26s} pe_core {pe:.2f}× output  "
        f"textbook {base:.2f}× output",
        flush=True,
    )
    return row


# --------------------------------------------------------------------------- torch
def torch_rows(cfg: dict[str, Any]) -> list[Row]:
    import pe_core
    from pe_core.rope import apply_rope

    torch = common.setup_torch()
    probe = [contention_probe(torch)]
    rows = [decode_row(torch, apply_rope, cfg), decode_row(torch, apply_rope, cfg, joint=True)]
    d = cfg["few_d"]
    for n in cfg["few"]:
        pos = torch.arange(n) + 1000
        rows.append(
            time_row(
                "encode_few",
                "torch",
                f"{n} × {d}",
                "encode_few",
                lambda pos=pos: pe_core.encode(pos, d),
                lambda pos=pos: textbook.torch_table_at(pos, d),
                cfg,
            )
        )
    permuted_np, d_perm = _permuted_np(cfg)
    offsets_np, d_off = _offsets_np(cfg)
    permuted, offsets = torch.from_numpy(permuted_np), torch.from_numpy(offsets_np)
    flat = offsets.reshape(-1)
    rows.append(
        time_row(
            "encode_permuted",
            "torch",
            f"{permuted.numel()} × {d_perm}",
            "encode_arbitrary",
            lambda: pe_core.encode(permuted, d_perm),
            lambda: textbook.torch_table_at(permuted, d_perm),
            cfg,
        )
    )
    rows.append(
        time_row(
            "encode_offsets",
            "torch",
            f"{tuple(offsets.shape)} × {d_off}",
            "encode_arbitrary",
            lambda: pe_core.encode(offsets, d_off),
            lambda: textbook.torch_table_at(flat, d_off),
            cfg,
        )
    )
    rows.append(rope_per_example_row(torch, apply_rope, cfg))
    n, d = cfg["run"]
    rows.append(
        time_row(
            "encode_run",
            "torch",
            f"{n} × {d}",
            "encode_run",
            lambda: pe_core.encode(range(n), d, backend="torch"),
            lambda: textbook.torch_table(n, d),
            cfg,
        )
    )
    probe.append(contention_probe(torch))
    for row in rows:
        row["contention_probe_ms"] = probe
    return rows


def contention_probe(torch: Any) -> float:
    """Median ms of ``torch.sin`` on 65536 floats: one parallel region of all threads.

    Microseconds on an idle machine; milliseconds when another process holds a core
    and the region waits for a descheduled thread.
    """
    x = torch.rand(65536)
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        torch.sin(x)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def decode_row(
    torch: Any, apply_rope: Callable[..., Any], cfg: dict[str, Any], joint: bool = False
) -> Row:
    batch, heads, kv_heads, head_dim = cfg["decode"]
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(batch, heads, 1, head_dim, generator=gen)
    k = torch.randn(batch, kv_heads, 1, head_dim, generator=gen)
    positions = torch.tensor([DECODE_POSITIONS[i % len(DECODE_POSITIONS)] for i in range(batch)])
    inv_freq = hf_inv_freq(head_dim)
    # Every step is the next token: the positions advance by one, as in generation (a
    # cache keyed by the positions' values never sees the same step twice).
    pe_core_steps, hf_steps = itertools.count(), itertools.count()

    def pe_core_step(step: int | None = None) -> Any:
        step = next(pe_core_steps) if step is None else step
        pos = (positions + step)[:, None, None]  # (batch, 1, 1): broadcast over heads
        if joint:  # one call: the positions classified and cos/sin built once
            return apply_rope((q, k), pos)
        return apply_rope(q, pos), apply_rope(k, pos)

    def hf_step(step: int | None = None) -> Any:
        step = next(hf_steps) if step is None else step
        position_ids = (positions + step)[:, None]  # (batch, 1), as transformers passes them
        cos, sin = hf_rotary_forward(inv_freq, q, position_ids)
        return hf_apply_rotary_pos_emb(q, k, cos, sin)

    size = f"q {tuple(q.shape)}, k {tuple(k.shape)}"
    key = "decode_joint" if joint else "decode_step"
    row = time_row(key, "torch", size, key, pe_core_step, hf_step, cfg, "HF")
    if row["error"] is None:
        (pq, pk), (hq, hk) = pe_core_step(0), hf_step(0)
        row["max_abs_diff"] = max(_max_diff(pq, hq), _max_diff(pk, hk))
    return row


def rope_per_example_row(torch: Any, apply_rope: Callable[..., Any], cfg: dict[str, Any]) -> Row:
    batch, heads, seq, head_dim = cfg["rope"]
    q = torch.randn(batch, heads, seq, head_dim, generator=torch.Generator().manual_seed(0))
    offsets = torch.from_numpy(np.random.default_rng(2).integers(0, 10000, size=batch))
    position_ids = offsets[:, None] + torch.arange(seq)  # (batch, seq)
    pos = position_ids[:, None, :]  # (batch, 1, seq): broadcast over heads
    inv_freq = hf_inv_freq(head_dim)

    def hf() -> Any:
        cos, sin = hf_rotary_forward(inv_freq, q, position_ids)
        return hf_apply_rotary_pos_emb(q, None, cos, sin)[0]

    def pe() -> Any:
        return apply_rope(q, pos)

    size = f"q {tuple(q.shape)} float32"
    row = time_row("rope_per_example", "torch", size, "rope_per_example", pe, hf, cfg, "HF")
    if row["error"] is None:
        row["max_abs_diff"] = _max_diff(pe(), hf())
    return row


# --------------------------------------------------------------------------- jax, tf
def jax_rows(cfg: dict[str, Any]) -> list[Row]:
    import pe_core

    n, d = cfg["run"]
    return [
        time_row(
            "encode_run",
            "jax",
            f"{n} × {d}",
            "encode_run",
            lambda: pe_core.encode(range(n), d, backend="jax").block_until_ready(),
            lambda: textbook.jax_table(n, d).block_until_ready(),
            cfg,
        )
    ]


def tensorflow_rows(cfg: dict[str, Any]) -> list[Row]:
    import pe_core

    n, d = cfg["run"]
    # Eager TensorFlow ops on the CPU return once computed (as benchmarks.speed times them).
    return [
        time_row(
            "encode_run",
            "tensorflow",
            f"{n} × {d}",
            "encode_run",
            lambda: pe_core.encode(range(n), d, backend="tensorflow"),
            lambda: textbook.tf_table(n, d),
            cfg,
        )
    ]


TIMING_CHILDREN = {
    "numpy": numpy_rows,
    "torch": torch_rows,
    "jax": jax_rows,
    "tensorflow": tensorflow_rows,
}


# --------------------------------------------------------------------------- growth
class _Records(logging.Handler):
    """Counts log records (each once, whichever logger it reaches) by content."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: set[int] = set()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if id(record) in self.seen:
            return
        self.seen.add(id(record))
        try:
            self.messages.append(record.getMessage())
        except Exception:
            self.messages.append(str(record.msg))

    def count(self, word: str) -> int:
        return sum(word in m.lower() for m in self.messages)


def resident_mb() -> float:
    """Resident memory of this process in MB (10**6 bytes)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError, AttributeError):
        import resource  # peak, not current: an upper bound on growth

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def growth(backend: str, path: str, start: int, stop: int, d: int) -> dict[str, Any]:
    """Eager ``encode`` for lengths ``start..stop-1``: memory growth, retracing, compiles."""
    records = _Records()
    for name in ("", "tensorflow", "jax"):
        logging.getLogger(name).addHandler(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pe_core

        if backend == "jax":
            import jax

            jax.config.update("jax_log_compiles", True)  # one WARNING record per compile

            def kernel(n: int) -> Any:
                # positions placed with device_put: jnp.arange(n) * 3 would itself
                # compile two executables per length and grow the process
                positions = jax.device_put(np.arange(n) * 3)
                return pe_core.encode(positions, d).block_until_ready()

            def table(n: int) -> Any:
                return pe_core.encode(range(n), d, backend="jax").block_until_ready()
        else:
            import tensorflow as tf

            def kernel(n: int) -> Any:
                return pe_core.encode(tf.range(n) * 3, d)

            def table(n: int) -> Any:
                return pe_core.encode(range(n), d, backend="tensorflow")

        call = kernel if path == "kernel" else table
        lengths = list(range(start, stop))
        call(lengths[0])
        gc.collect()
        before = resident_mb()
        records.messages.clear()
        caught.clear()
        t0 = time.perf_counter()
        for n in lengths[1:]:
            call(n)
        seconds = time.perf_counter() - t0
        gc.collect()
        after = resident_mb()
        # the same eager calls on NumPy, in this process: the baseline of the row
        numpy_call = {
            "kernel": lambda n: pe_core.encode(np.arange(n) * 3, d),
            "table": lambda n: pe_core.encode(range(n), d),
        }[path]
        numpy_call(lengths[0])
        t0 = time.perf_counter()
        for n in lengths[1:]:
            numpy_call(n)
        numpy_seconds = time.perf_counter() - t0
    warned = [str(w.message) for w in caught]
    return {
        "backend": backend,
        "path": path,
        "lengths": [start, stop - 1],
        "d": d,
        "growth_mb": after - before,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "seconds": seconds,
        "numpy_seconds": numpy_seconds,
        "retracing": records.count("retrac") + sum("retrac" in w.lower() for w in warned),
        "compiles": records.count("compiling") if backend == "jax" else None,
        "warnings": len(warned),
        "pe_core_file": pe_core.__file__,
    }


def growth_row(result: dict[str, Any]) -> Row:
    backend, path = result["backend"], result["path"]
    lo, hi = result["lengths"]
    size = f"n = {lo}..{hi}, d = {result['d']}"
    row = _row(f"growth_{path}", backend, size, "", "the same calls on NumPy")
    grew, retracing = result["growth_mb"], result["retracing"]
    calls = max(hi - lo, 1)
    per_call, numpy_per_call = result["seconds"] / calls, result["numpy_seconds"] / calls
    text = f"{grew:.0f} MB, {retracing} retracing"
    if result.get("compiles") is not None:
        text += f", {result['compiles']} XLA compiles"
    row.update(
        target_key="eager_growth_mb",
        pe_core=text + f" ({result['seconds']:.1f} s, {per_call * 1e3:.2f} ms a length)",
        baseline_value=f"{numpy_per_call * 1e3:.2f} ms a length",
        ratio=per_call / numpy_per_call if numpy_per_call > 0 else None,
        met=grew < TARGETS["eager_growth_mb"] and retracing <= TARGETS["retracing_warnings"],
        **{k: v for k, v in result.items() if k not in ("backend", "path", "pe_core_file")},
    )
    return row


# --------------------------------------------------------------------------- first call
def compiler_modules() -> list[str]:
    return sorted(
        name for name in sys.modules if name.startswith(("torch._dynamo", "torch._inductor"))
    )


def first_call(which: str) -> dict[str, Any]:
    """Time the first eager torch call in this (fresh) process, and list compiler modules."""
    start = time.perf_counter()
    pe_core = importlib.import_module("pe_core")  # in this order: import pe_core, torch
    torch = importlib.import_module("torch")
    import_s = time.perf_counter() - start
    at_import = compiler_modules()
    if which == "pe_core":
        fn: Callable[[], Any] = lambda: pe_core.encode(torch.arange(5), 8)  # noqa: E731
    else:
        fn = lambda: textbook.torch_table_at(torch.arange(5), 8)  # noqa: E731
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    fn()
    second = (time.perf_counter() - t0) * 1e3
    return {
        "which": which,
        "import_s": import_s,
        "first_ms": first,
        "second_ms": second,
        "compiler_modules_at_import": len(at_import),
        "compiler_modules": compiler_modules(),
        "pe_core_file": pe_core.__file__,
    }


def first_call_row(pe: dict[str, Any] | None, base: dict[str, Any] | None) -> Row:
    row = _row("first_call", "torch", "encode(torch.arange(5), 8)", "compiler_modules", "textbook")
    if pe is not None:
        loaded = len(pe["compiler_modules"])
        row.update(
            pe_core=f"{pe['first_ms']:.1f} ms, {loaded} compiler modules",
            met=loaded <= TARGETS["compiler_modules"],
            pe_core_first_ms=pe["first_ms"],
            pe_core_second_ms=pe["second_ms"],
            compiler_modules=pe["compiler_modules"],
            compiler_modules_at_import=pe["compiler_modules_at_import"],
        )
    if base is not None:
        row.update(
            baseline_value=f"{base['first_ms']:.1f} ms, "
            f"{len(base['compiler_modules'])} compiler modules",
            baseline_first_ms=base["first_ms"],
        )
    if pe is not None and base is not None:
        row["ratio"] = pe["first_ms"] / base["first_ms"]
    return row


# --------------------------------------------------------------------------- processes
def run_child(args: Sequence[str], quick: bool, timeout: float) -> tuple[Any, str | None]:
    """Run ``python -m benchmarks.calls --child ARGS`` here; (its result, an error)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(common.ROOT), env.get("PYTHONPATH", "")) if p
    )
    command = [sys.executable, "-m", "benchmarks.calls", "--child", *args]
    command += ["--torch-threads", str(common.TORCH_THREADS)]
    if quick:
        command.append("--quick")
    try:
        proc = subprocess.run(
            command,
            cwd=common.ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
        elif line.strip():
            print(line, flush=True)
    if proc.returncode != 0 or result is None:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return None, f"exit code {proc.returncode}: {tail[0][:300]}"
    return result, None


def child_main(args: Sequence[str], quick: bool) -> int:
    cfg = QUICK if quick else FULL
    kind = args[0]
    if kind in TIMING_CHILDREN:
        import pe_core

        out: Any = {"pe_core_file": pe_core.__file__, "rows": TIMING_CHILDREN[kind](cfg)}
    elif kind == "growth":
        start, stop, d = cfg["growth"]
        out = growth(args[1], args[2], start, stop, d)
    elif kind == "first_call":
        out = first_call(args[1])
    else:
        raise SystemExit(f"unknown child {kind!r}")
    print(RESULT_PREFIX + json.dumps(common._json_safe(out), allow_nan=False), flush=True)
    return 0


def collect(cfg: dict[str, Any], quick: bool, notes: list[str]) -> list[Row]:
    timeout = cfg["child_timeout_s"]
    rows: list[Row] = []
    sources: set[str] = set()
    backends, skipped = common.select_backends(None)
    notes += skipped
    for backend in backends:
        print(f"== {backend}", flush=True)
        result, error = run_child([backend], quick, timeout)
        if error is not None:
            notes.append(f"{backend}: the timing process failed ({error})")
            rows.append(_failed(_row("encode_run", backend, "–", "encode_run", "–"), error))
            continue
        sources.add(result["pe_core_file"])
        rows += result["rows"]
    for backend in ("jax", "tensorflow"):
        if backend not in backends:
            continue
        for path in ("kernel", "table"):
            print(f"== eager growth: {backend}, {path} path", flush=True)
            result, error = run_child(["growth", backend, path], quick, timeout)
            if error is not None:
                row = _row(f"growth_{path}", backend, "–", "eager_growth_mb", "–")
                rows.append(_failed(row, error))
                continue
            sources.add(result["pe_core_file"])
            rows.append(growth_row(result))
    if "torch" in backends:
        print("== first eager torch call", flush=True)
        pe, error = run_child(["first_call", "pe_core"], quick, timeout)
        base, base_error = run_child(["first_call", "textbook"], quick, timeout)
        row = first_call_row(pe, base)
        if pe is not None:
            sources.add(pe["pe_core_file"])
        if error is not None or base_error is not None:
            _failed(row, error or base_error or "")
        rows.append(row)
    for source in sorted(sources):  # console only: which pe_core was measured
        print(f"pe_core imported from {source}")
    order = list(MEASUREMENTS)
    rows.sort(key=lambda r: (order.index(r["key"]), BACKEND_ORDER.index(r["backend"])))
    return rows


# --------------------------------------------------------------------------- report
def target_text(row: Row) -> str:
    key = row["target_key"]
    value = TARGETS.get(key)
    if key == "numpy_peak_memory":
        return f"pe_core ≤ {value:g}× output"
    if key == "eager_growth_mb":
        return f"< {value:g} MB, {TARGETS['retracing_warnings']:g} retracing"
    if key == "compiler_modules":
        return "no compiler module"
    return f"≤ {value:g}"


def table_md(rows: Sequence[Row]) -> str:
    body = []
    for row in rows:
        met = "–" if row["met"] is None else ("yes" if row["met"] else "**no**")
        pe_core = row["pe_core"] if row["error"] is None else f"failed: {row['error']}"
        body.append(
            [
                row["measurement"],
                row["backend"],
                row["size"],
                row["baseline"],
                pe_core,
                row["baseline_value"],
                common.fmt_ratio(row["ratio"]),
                target_text(row),
                met,
            ]
        )
    return common.md_table(
        [
            "measurement",
            "backend",
            "size",
            "baseline",
            "pe_core",
            "baseline time",
            "pe_core / baseline",
            "target",
            "met",
        ],
        body,
    )


def report(results: dict[str, Any]) -> str:
    rows = results["rows"]
    cfg = results["config"]
    met = sum(1 for r in rows if r["met"])
    judged = sum(1 for r in rows if r["met"] is not None)
    parts = [
        "# Per-call benchmarks",
        "",
        "pe_core in the calls models make (one decode step, a few positions, positions "
        "that are not one run, per-example offsets, a run on every backend) and what "
        "eager frameworks keep after many calls, each timed against a baseline in the "
        "same run. Below 1× pe_core is faster. Generated by `python -m benchmarks.calls`.",
        "",
        "## Setup",
        "",
        common.machine_md(results),
        f"- Threads: torch {common.TORCH_THREADS} (`torch.set_num_threads`); NumPy 1; "
        "JAX and TensorFlow their defaults. Each backend runs in a fresh process.",
        "- Timing: pe_core and its baseline are called in turn, round-robin, the order "
        "alternating every round, after one untimed warm-up call each; median per call. "
        f"Rounds fill {cfg['budget_s']:g} s per row ({cfg['min_rounds']} to "
        f"{cfg['max_rounds']} rounds). Load from other processes (see the load average) "
        "hits both methods alike, but makes PyTorch calls of well under a millisecond "
        "noisy.",
        "",
        "## Results",
        "",
        f"{met} of {judged} targets met.",
        "",
        table_md(rows),
        "",
        "## What each row runs",
        "",
        "- decode step: `apply_rope(q, pos); apply_rope(k, pos)` with `pos` of shape "
        "(batch, 1, 1), a different position per example "
        f"({', '.join(str(p) for p in DECODE_POSITIONS)}), advancing by one every step "
        "for both methods. Baseline (HF): transformers' "
        "`LlamaRotaryEmbedding.forward(x, position_ids)` (position_ids (batch, 1): "
        "`inv_freq[None, :, None].expand(...) @ position_ids[:, None, :].float()`, "
        "transpose, `cat((freqs, freqs), -1)`, `cos()`, `sin()`, cast to x's dtype) then "
        "`apply_rotary_pos_emb` (`q * cos + rotate_half(q) * sin`, the same for k, "
        "cos/sin unsqueezed at dim 1), as Llama runs them every step. The second decode "
        "row makes one call, `apply_rope((q, k), pos)`, which classifies the positions "
        "and builds cos/sin once for both.",
        "- encode, few positions: `encode(arange(n) + 1000, d)` (int64); baseline: the "
        "textbook table at the same positions (`benchmarks/textbook.py`).",
        "- encode, permuted positions: a seeded permutation of `arange(n)`; per-example "
        "offsets: positions `offsets[:, None] + arange(seq)` of shape (batch, seq), "
        "offsets random in [0, 10000); the textbook takes them flattened. Every call "
        "returns a new array.",
        "- peak memory: `tracemalloc` peak during one NumPy call, over the output's bytes "
        "(1.0× = just the output); the baseline column is the textbook's.",
        "- apply_rope, per-example positions: `apply_rope(q, pos)` with `pos` (batch, 1, "
        "seq) from per-example offsets; baseline: the HF rotary forward from "
        "position_ids (batch, seq) and `apply_rotary_pos_emb` on q only.",
        "- encode, consecutive run: `encode(range(n), d, backend=...)`, eager; baseline: "
        "the textbook table, under `jax.jit` / `tf.function` for JAX / TensorFlow.",
        "- eager growth: in a fresh process per backend and path, eager `encode` for "
        "every length in the range: kernel path `encode(arange(n) * 3, d)` (positions "
        "not one run), table path `encode(range(n), d, backend=...)`. Resident memory "
        "(MB = 10^6 bytes) from after the first call to after the last; log records and "
        "warnings that mention retracing; for JAX the XLA compilations logged "
        "(`jax_log_compiles`, including those of the caller's `arange(n) * 3`). "
        "Baseline: the same calls on NumPy in the same process, per new length.",
        "- first eager call: in a fresh process, `import pe_core, torch` then "
        "`pe_core.encode(torch.arange(5), 8)`; the modules named `torch._dynamo*` or "
        "`torch._inductor*` in `sys.modules` after it, and the call's wall time. "
        "Baseline: the textbook's first call in another fresh process.",
    ]
    if results["notes"]:
        parts += ["", "## Notes", ""] + [f"- {note}" for note in results["notes"]]
    return "\n".join(parts) + "\n"


def result_notes(rows: Sequence[Row], notes: list[str]) -> None:
    for row in rows:
        if row.get("max_abs_diff") is not None:
            notes.append(
                f"{row['measurement']} ({row['backend']}): max |pe_core - HF| = "
                f"{row['max_abs_diff']:.1e} (the HF formula's float32 angles lose accuracy "
                "at large positions)"
            )
        if row["key"] == "first_call" and row.get("compiler_modules_at_import"):
            notes.append(
                f"first eager call: {row['compiler_modules_at_import']} compiler modules were "
                "already loaded by `import pe_core, torch`, before the call"
            )
    probe = next((r["contention_probe_ms"] for r in rows if r.get("contention_probe_ms")), None)
    if probe:
        text = (
            f"torch contention probe (`torch.sin` of 65536 floats, {common.TORCH_THREADS} "
            f"threads): median {probe[0]:.3f} ms at the start and {probe[-1]:.3f} ms at the "
            "end of the torch process"
        )
        if max(probe) > 1.0:
            text += (
                ": milliseconds mean an op that starts a parallel region waited for a "
                "descheduled thread (another process held a core), so the torch rows "
                "measure that wait as much as the code; rerun on an idle machine or with "
                "--torch-threads 1"
            )
        notes.append(text)
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        notes.append(f"{len(failed)} measurement(s) failed; see the pe_core column")


# --------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.calls",
        description="Per-call cost of pe_core in model shapes, against baselines.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes; write nothing")
    parser.add_argument(
        "--out",
        metavar="PATH",
        default=None,
        help="directory for calls.{json,md}; default benchmarks/results/calls.json and "
        "docs/benchmarks/calls.md (full runs only)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=common.TORCH_THREADS,
        help=f"torch.set_num_threads in the torch processes (default {common.TORCH_THREADS})",
    )
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    common.TORCH_THREADS = args.torch_threads
    if args.child:
        return child_main(args.child, args.quick)
    cfg = QUICK if args.quick else FULL
    start = time.perf_counter()
    load_before = common.loadavg()
    notes: list[str] = []
    rows = collect(cfg, args.quick, notes)
    result_notes(rows, notes)
    head = common.header(argv, load_before)
    head["command"] = " ".join(["python -m benchmarks.calls", *argv])
    results = {
        **head,
        "targets": TARGETS,
        "config": {k: v for k, v in cfg.items() if k != "child_timeout_s"},
        "rows": rows,
        "notes": notes,
    }
    markdown = report(results)
    print()
    print(markdown)
    paths = common.output_paths("calls", args.out, args.quick)
    if paths is not None:
        common.write_json(paths[0], results)
        common.write_text(paths[1], markdown)
        print(f"wrote {paths[0].name} and {paths[1].name}")
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 1 if any(r["error"] is not None for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
