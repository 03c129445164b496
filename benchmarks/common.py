"""Shared helpers: backend discovery, timing, machine description, output files."""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
DOCS_DIR = ROOT / "docs" / "benchmarks"

ALL_BACKENDS = ("numpy", "torch", "jax", "tensorflow")

#: Threads given to torch in the benchmark process (the machine has 2 cores).
TORCH_THREADS = 2


def installed(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def select_backends(requested: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """Backends to run (installed ones among ``requested``), and notes on the others."""
    names = list(requested) if requested else list(ALL_BACKENDS)
    chosen, notes = [], []
    for name in names:
        if name not in ALL_BACKENDS:
            raise SystemExit(
                f"unknown backend {name!r}; expected some of {', '.join(ALL_BACKENDS)}"
            )
        if installed(name):
            chosen.append(name)
        else:
            notes.append(f"{name}: not installed, skipped")
    return chosen, notes


def setup_torch() -> Any:
    """Import torch with the benchmark's thread count (this process only)."""
    import torch

    torch.set_num_threads(TORCH_THREADS)
    return torch


def time_call(
    fn: Callable[[], Any],
    repeats: int,
    *,
    warmup: int = 1,
    min_time: float = 0.2,
    max_calls: int = 50,
) -> dict[str, Any]:
    """Median wall time (ms) of ``fn()``.

    ``warmup`` untimed calls first (compilation for jit/tf.function), then at least
    ``repeats`` timed calls, continuing (up to ``max_calls``) until ``min_time``
    seconds have been spent, so that fast calls get a steadier median.
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < repeats or (spent < min_time and len(times) < max_calls):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        spent += elapsed
    ms = [t * 1e3 for t in times]
    return {
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "calls": len(ms),
    }


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for module in (
        "pe_core",
        "numpy",
        "torch",
        "jax",
        "jaxlib",
        "tensorflow",
        "mpmath",
        "ml_dtypes",
        "positional_encodings",
        "rotary_embedding_torch",
    ):
        if not installed(module):
            out[module] = "not installed"
            continue
        try:
            mod = importlib.import_module(module)
            out[module] = str(getattr(mod, "__version__", "unknown"))
        except Exception as exc:  # a broken install is worth recording, not fatal
            out[module] = f"import failed: {exc.__class__.__name__}"
    return out


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "versions": versions(),
    }
    if hasattr(os, "sched_getaffinity"):
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            total_kb = int(fh.readline().split()[1])
        info["memory_gib"] = round(total_kb / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def loadavg() -> float | None:
    """1-minute load average (other work on the machine skews timings)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def header(argv: Sequence[str], load_before: float | None = None) -> dict[str, Any]:
    return {
        "command": " ".join(["python -m benchmarks", *argv]),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "loadavg_1min": {"before": load_before, "after": loadavg()},
    }


def machine_md(head: dict[str, Any]) -> str:
    m = head["machine"]
    v = m["versions"]
    libs = ", ".join(f"{k} {val}" for k, val in v.items() if val != "not installed")
    missing = ", ".join(k for k, val in v.items() if val == "not installed")
    lines = [
        f"- Command: `{head['command']}`",
        f"- Date: {head['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), "
        f"{m.get('memory_gib', '?')} GiB RAM, {m['platform']}",
        f"- Libraries: {libs}",
    ]
    if missing:
        lines.append(f"- Not installed: {missing}")
    load = head.get("loadavg_1min") or {}
    if load.get("before") is not None:
        lines.append(
            f"- 1-minute load average: {load['before']:.2f} before, {load['after']:.2f} after "
            f"(on {m['cpu_count']} CPUs)"
        )
    return "\n".join(lines)


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_err(value: float | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if value == 0:
        return "0"
    return f"{value:.1e}"


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else str(obj)
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_text(path: Path, text: str) -> None:
    """Write ``text`` atomically (a ``.tmp`` file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(_json_safe(obj), indent=2, allow_nan=False) + "\n")


def output_paths(name: str, out: str | None, quick: bool) -> tuple[Path, Path] | None:
    """(json path, markdown path) for benchmark ``name``, or None: print only.

    ``--out DIR`` puts both files in DIR. Without it a full run writes
    ``benchmarks/results/NAME.json`` and ``docs/benchmarks/NAME.md``; a ``--quick``
    run writes nothing (so it never overwrites the published numbers).
    """
    if out is not None:
        base = Path(out)
        return base / f"{name}.json", base / f"{name}.md"
    if quick:
        return None
    return RESULTS_DIR / f"{name}.json", DOCS_DIR / f"{name}.md"


def splice(page: Path, name: str, markdown: str) -> bool:
    """Put ``markdown`` verbatim between ``<!-- BEGIN benchmarks/NAME -->`` and
    ``<!-- END benchmarks/NAME -->`` in ``page``.

    Keeps ``docs/performance.md`` / ``docs/precision.md`` in step with the generated
    ``docs/benchmarks/NAME.md``. Returns False (and changes nothing) when the page or
    its markers are missing.
    """
    begin, end = f"<!-- BEGIN benchmarks/{name} -->", f"<!-- END benchmarks/{name} -->"
    try:
        text = page.read_text(encoding="utf-8")
    except OSError:
        return False
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        return False
    body = markdown.strip("\n")  # verbatim: the page puts it under a level-2 heading
    write_text(page, text[: start + len(begin)] + "\n\n" + body + "\n\n" + text[stop:])
    return True


#: Hand-written pages that include a generated benchmark report between markers.
PAGES = {"speed": ROOT / "docs" / "performance.md", "accuracy": ROOT / "docs" / "precision.md"}


def publish(
    name: str,
    results: dict[str, Any],
    markdown: str,
    paths: tuple[Path, Path] | None,
    log: Any,
) -> None:
    """Print the markdown; write JSON + markdown; refresh the docs page's measured block."""
    log("")
    log(markdown)
    if paths is None:
        return
    json_path, md_path = paths
    write_json(json_path, results)
    write_text(md_path, markdown)
    log(f"\nwrote {json_path} and {md_path}")
    if md_path == DOCS_DIR / f"{name}.md" and splice(PAGES[name], name, markdown):
        log(f"updated {PAGES[name]}")
