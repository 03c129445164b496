"""Speed: pe_core.encode against the textbook table and the machine's bounds.

For each backend and table size this times (median of repeated calls, ms):

* ``pe_core``: ``pe_core.encode(positions, d)`` with ``positions`` an int32 ``arange``
  on the backend (under ``jax.jit`` / ``tf.function`` for JAX / TensorFlow). Eager
  NumPy/torch calls see a run of consecutive positions and take pe_core's table path
  (:mod:`pe_core._kernel.tables`); traced calls cannot, and run the per-element kernel;
* ``pe_core_kernel`` (NumPy, torch): the same call with the ``arange`` randomly
  permuted, which forces the exact per-element kernel (:mod:`pe_core._kernel.angles`);
* ``pe_core_eager`` (JAX, TensorFlow): the ``arange`` call without ``jit``/``tf.function``;
* ``textbook``: :mod:`benchmarks.textbook` (the tutorial ``PositionalEncoding`` table);
* ``positional-encodings`` / ``rotary-embedding-torch`` (torch) when importable;
* ``alloc+write``: allocate an output of the table's size and write every element
  (``np.empty().fill``, ``torch.empty().fill_``, ``jnp.full`` under jit, ``tf.fill``);
* ``sin``: one ``sin`` per element of a precomputed float32 array of the table's size
  (arguments uniform in ``[-pi, pi]``).

NumPy and torch are timed in two regimes: ``fresh`` (every call returns a new array)
and ``reused`` (the output buffer is passed back in with ``out=``; temporaries are
still allocated as the code does). JAX and TensorFlow allocate fresh outputs only.
"""

from __future__ import annotations

import inspect
import math
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks import common, textbook

SIZES: tuple[tuple[int, int], ...] = ((2048, 512), (8192, 1024), (65536, 256))
QUICK_SIZES: tuple[tuple[int, int], ...] = ((1024, 256), (4096, 512))

METHODS = (
    "pe_core",
    "pe_core_kernel",
    "pe_core_eager",
    "textbook",
    "positional-encodings",
    "rotary-embedding-torch",
    "alloc",
    "sin",
)
MEMORY_METHODS = ("pe_core", "pe_core_kernel", "textbook", "alloc", "sin")
PE_CORE_METHODS = ("pe_core", "pe_core_kernel", "pe_core_eager")
METHOD_TITLES = {
    "pe_core": "pe_core (arange)",
    "pe_core_kernel": "pe_core (permuted: kernel)",
    "pe_core_eager": "pe_core (eager)",
    "textbook": "textbook",
    "positional-encodings": "positional-encodings",
    "rotary-embedding-torch": "rotary-embedding-torch",
    "alloc": "alloc+write bound",
    "sin": "sin bound",
}

Case = Callable[[], Any]


def encode_has_out() -> bool:
    import pe_core

    return "out" in inspect.signature(pe_core.encode).parameters


# --------------------------------------------------------------------------- cases
def numpy_cases(n: int, d: int, notes: list[str]) -> dict[tuple[str, str], Case]:
    import pe_core

    positions = np.arange(n, dtype=np.int32)
    permuted = np.random.default_rng(1).permutation(positions)
    x = np.random.default_rng(0).uniform(-np.pi, np.pi, size=(n, d)).astype(np.float32)
    out = np.empty((n, d), dtype=np.float32)
    cases: dict[tuple[str, str], Case] = {
        ("pe_core", "fresh"): lambda: pe_core.encode(positions, d),
        ("pe_core_kernel", "fresh"): lambda: pe_core.encode(permuted, d),
        ("textbook", "fresh"): lambda: textbook.numpy_table(n, d),
        ("textbook", "reused"): lambda: textbook.numpy_table(n, d, out=out),
        ("alloc", "fresh"): lambda: np.empty((n, d), dtype=np.float32).fill(1.0),
        ("alloc", "reused"): lambda: out.fill(1.0),
        ("sin", "fresh"): lambda: np.sin(x),
        ("sin", "reused"): lambda: np.sin(x, out=out),
    }
    if encode_has_out():
        cases[("pe_core", "reused")] = lambda: pe_core.encode(positions, d, out=out)
        cases[("pe_core_kernel", "reused")] = lambda: pe_core.encode(permuted, d, out=out)
    return cases


def torch_cases(n: int, d: int, notes: list[str]) -> dict[tuple[str, str], Case]:
    import pe_core

    torch = common.setup_torch()
    positions = torch.arange(n, dtype=torch.int32)
    permuted = positions[torch.randperm(n, generator=torch.Generator().manual_seed(1))]
    x = torch.empty(n, d).uniform_(-math.pi, math.pi, generator=torch.Generator().manual_seed(0))
    out = torch.empty(n, d)
    cases: dict[tuple[str, str], Case] = {
        ("pe_core", "fresh"): lambda: pe_core.encode(positions, d),
        ("pe_core_kernel", "fresh"): lambda: pe_core.encode(permuted, d),
        ("textbook", "fresh"): lambda: textbook.torch_table(n, d),
        ("textbook", "reused"): lambda: textbook.torch_table(n, d, out=out),
        ("alloc", "fresh"): lambda: torch.empty(n, d).fill_(1.0),
        ("alloc", "reused"): lambda: out.fill_(1.0),
        ("sin", "fresh"): lambda: torch.sin(x),
        ("sin", "reused"): lambda: torch.sin(x, out=out),
    }
    if encode_has_out():
        cases[("pe_core", "reused")] = lambda: pe_core.encode(positions, d, out=out)
        cases[("pe_core_kernel", "reused")] = lambda: pe_core.encode(permuted, d, out=out)
    case = _positional_encodings_case(torch, n, d, notes)
    if case is not None:
        cases[("positional-encodings", "fresh")] = case
    case = _rotary_case(torch, n, d, notes)
    if case is not None:
        cases[("rotary-embedding-torch", "fresh")] = case
    return cases


def _positional_encodings_case(torch: Any, n: int, d: int, notes: list[str]) -> Case | None:
    if not common.installed("positional_encodings"):
        _note(
            notes, "positional-encodings: not installed, skipped (pip install positional-encodings)"
        )
        return None
    try:
        from positional_encodings.torch_encodings import PositionalEncoding1D

        module = PositionalEncoding1D(d)
        x = torch.zeros(1, n, d)

        def call() -> Any:
            # The module caches its last table; clear it so every call computes one.
            module.cached_penc = None
            return module(x)

        if tuple(call().shape) != (1, n, d):
            raise ValueError("unexpected output shape")
    except Exception as exc:
        _note(notes, f"positional-encodings: failed ({exc.__class__.__name__}: {exc}), skipped")
        return None
    _note(
        notes,
        "positional-encodings: timed `PositionalEncoding1D(d)(torch.zeros(1, n, d))` with "
        "`cached_penc` reset before each call (its (1, n, d) result includes the "
        "batch `repeat`)",
    )
    return call


def _rotary_case(torch: Any, n: int, d: int, notes: list[str]) -> Case | None:
    if not common.installed("rotary_embedding_torch"):
        _note(
            notes,
            "rotary-embedding-torch: not installed, skipped (pip install rotary-embedding-torch)",
        )
        return None
    try:
        from rotary_embedding_torch import RotaryEmbedding

        module = RotaryEmbedding(dim=d)
        t = torch.arange(n, dtype=torch.float32)

        def call() -> Any:
            freqs = module(t)  # (n, d): t * inv_freq, every frequency repeated twice
            out = torch.empty(n, d)
            torch.sin(freqs[:, 0::2], out=out[:, 0::2])
            torch.cos(freqs[:, 1::2], out=out[:, 1::2])
            return out

        if tuple(module(t).shape) != (n, d):
            raise ValueError(f"forward returned shape {tuple(module(t).shape)}, expected {(n, d)}")
    except Exception as exc:
        _note(notes, f"rotary-embedding-torch: failed ({exc.__class__.__name__}: {exc}), skipped")
        return None
    _note(
        notes,
        "rotary-embedding-torch: timed `freqs = RotaryEmbedding(dim=d)(torch.arange(n, "
        "dtype=float32))` (the (n, d) angles, each frequency repeated twice) followed by "
        "sin of the even and cos of the odd columns into a new (n, d) table",
    )
    return call


def jax_cases(n: int, d: int, notes: list[str]) -> dict[tuple[str, str], Case]:
    import jax
    import jax.numpy as jnp

    import pe_core

    positions = jnp.arange(n, dtype=jnp.int32)
    x = jax.random.uniform(jax.random.key(0), (n, d), jnp.float32, -math.pi, math.pi)
    encode = jax.jit(lambda p: pe_core.encode(p, d))
    alloc = jax.jit(lambda: jnp.full((n, d), 1.0, dtype=jnp.float32))
    sin = jax.jit(jnp.sin)
    return {
        ("pe_core", "fresh"): lambda: encode(positions).block_until_ready(),
        ("pe_core_eager", "fresh"): lambda: pe_core.encode(positions, d).block_until_ready(),
        ("textbook", "fresh"): lambda: textbook.jax_table(n, d).block_until_ready(),
        ("alloc", "fresh"): lambda: alloc().block_until_ready(),
        ("sin", "fresh"): lambda: sin(x).block_until_ready(),
    }


def tensorflow_cases(n: int, d: int, notes: list[str]) -> dict[tuple[str, str], Case]:
    import tensorflow as tf

    import pe_core

    positions = tf.range(n, dtype=tf.int32)
    x = tf.random.stateless_uniform((n, d), seed=(0, 0), minval=-math.pi, maxval=math.pi)
    encode = tf.function(
        lambda p: pe_core.encode(p, d), input_signature=[tf.TensorSpec([n], tf.int32)]
    )
    # The fill value is an argument so that grappler cannot fold the output to a constant.
    alloc = tf.function(lambda v: tf.fill([n, d], v))
    one = tf.constant(1.0)
    sin = tf.function(tf.sin)
    return {
        ("pe_core", "fresh"): lambda: encode(positions),
        ("pe_core_eager", "fresh"): lambda: pe_core.encode(positions, d),
        ("textbook", "fresh"): lambda: textbook.tf_table(n, d),
        ("alloc", "fresh"): lambda: alloc(one),
        ("sin", "fresh"): lambda: sin(x),
    }


CASES = {
    "numpy": numpy_cases,
    "torch": torch_cases,
    "jax": jax_cases,
    "tensorflow": tensorflow_cases,
}


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


# --------------------------------------------------------------------------- memory
def numpy_peak_memory(n: int, d: int) -> dict[str, float]:
    """Peak traced allocation of one call, as a multiple of the output's bytes."""
    import pe_core

    positions = np.arange(n, dtype=np.int32)
    permuted = np.random.default_rng(1).permutation(positions)
    x = np.ones((n, d), dtype=np.float32)
    calls = {
        "pe_core": lambda: pe_core.encode(positions, d),
        "pe_core_kernel": lambda: pe_core.encode(permuted, d),
        "textbook": lambda: textbook.numpy_table(n, d),
        "alloc": lambda: np.empty((n, d), dtype=np.float32).fill(1.0),
        "sin": lambda: np.sin(x),
    }
    nbytes = n * d * 4
    result = {}
    for name, fn in calls.items():
        fn()  # warm caches (pe_core's constants) outside the measurement
        tracemalloc.start()
        tracemalloc.reset_peak()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        result[name] = peak / nbytes
    return result


# --------------------------------------------------------------------------- run
def run(
    backends: Sequence[str],
    sizes: Sequence[tuple[int, int]],
    repeats: int,
    *,
    argv: Sequence[str] = (),
    paths: tuple[Any, Any] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    load_before = common.loadavg()
    chosen, notes = common.select_backends(backends)
    has_out = encode_has_out()
    if not has_out:
        notes.append(
            "pe_core.encode has no `out=` argument yet: pe_core is reported in the fresh "
            "regime only"
        )
    records: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    for backend in chosen:
        for n, d in sizes:
            cases = CASES[backend](n, d, notes)
            for (method, regime), fn in cases.items():
                stats = common.time_call(fn, repeats)
                records.append(
                    {
                        "backend": backend,
                        "n": n,
                        "d": d,
                        "method": method,
                        "regime": regime,
                        **stats,
                    }
                )
                log(
                    f"  {backend:10s} {n}x{d:<5d} {method:22s} {regime:6s} "
                    f"{stats['median_ms']:9.2f} ms  ({stats['calls']} calls)"
                )
            del cases
            if backend == "numpy":
                peaks = numpy_peak_memory(n, d)
                memory.append(
                    {"n": n, "d": d, "output_mb": n * d * 4 / 2**20, "peak_over_output": peaks}
                )
    _contention_note(records, notes)
    results = {
        **common.header(argv, load_before),
        "threads": {
            "numpy": "1 (NumPy ufuncs are single-threaded)",
            "torch": f"{common.TORCH_THREADS} (torch.set_num_threads)",
            "jax": "XLA CPU default (all cores)",
            "tensorflow": "TensorFlow default (all cores)",
        },
        "pe_core_has_out": has_out,
        "repeats": repeats,
        "records": records,
        "ratios": ratios(records),
        "numpy_peak_memory": memory,
        "notes": notes,
    }
    common.publish("speed", results, to_markdown(results), paths, log)
    return results


def _contention_note(records: list[dict[str, Any]], notes: list[str]) -> None:
    """Flag torch timings ruled by thread wake-ups (another process holding a core)."""
    med = _lookup(records)
    slow = [
        f"{n}×{d}"
        for (backend, n, d, method, regime), ms in med.items()
        if backend == "torch"
        and method == "alloc"
        and regime == "fresh"
        and ms > 5 * med.get(("numpy", n, d, "alloc", "fresh"), math.inf)
    ]
    if slow:
        notes.append(
            f"torch's alloc+write bound is over 5× NumPy's at {', '.join(slow)}: its "
            f"{common.TORCH_THREADS} threads were waiting on each other (another process "
            "was using a core), so torch timings there measure the machine's load more "
            "than the code; rerun on an idle machine or with --torch-threads 1"
        )


def _lookup(records: list[dict[str, Any]]) -> dict[tuple[str, int, int, str, str], float]:
    return {
        (r["backend"], r["n"], r["d"], r["method"], r["regime"]): r["median_ms"] for r in records
    }


def ratios(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    med = _lookup(records)
    out = []
    seen = []
    for r in records:
        key = (r["backend"], r["n"], r["d"])
        if key not in seen:
            seen.append(key)
    for backend, n, d in seen:
        for method in PE_CORE_METHODS:
            for regime in ("fresh", "reused"):
                pe = med.get((backend, n, d, method, regime))
                if pe is None:
                    continue
                row = {"backend": backend, "n": n, "d": d, "method": method, "regime": regime}
                for other in ("textbook", "alloc", "sin"):
                    ref = med.get((backend, n, d, other, regime))
                    row[f"pe_core/{other}"] = None if ref is None else pe / ref
                out.append(row)
    return out


def to_markdown(results: dict[str, Any]) -> str:
    records = results["records"]
    med = _lookup(records)
    present = [m for m in METHODS if any(r["method"] == m for r in records)]
    combos: list[tuple[str, int, int]] = []
    for r in records:
        key = (r["backend"], r["n"], r["d"])
        if key not in combos:
            combos.append(key)
    rows = []
    for backend, n, d in combos:
        for regime in ("fresh", "reused"):
            values = [med.get((backend, n, d, m, regime)) for m in present]
            if all(v is None for v in values):
                continue
            cells = [common.fmt_ms(v) for v in values]
            if regime == "reused" and not results["pe_core_has_out"] and "pe_core" in present:
                cells[present.index("pe_core")] = "n/a (no `out=`)"
            rows.append([backend, f"{n}×{d}", regime, *cells])
    medians = common.md_table(
        ["backend", "table", "output", *[METHOD_TITLES[m] for m in present]], rows
    )
    ratio_rows = [
        [
            r["backend"],
            f"{r['n']}×{r['d']}",
            METHOD_TITLES[r["method"]],
            r["regime"],
            common.fmt_ratio(r["pe_core/textbook"]),
            common.fmt_ratio(r["pe_core/alloc"]),
            common.fmt_ratio(r["pe_core/sin"]),
        ]
        for r in results["ratios"]
    ]
    ratio_table = common.md_table(
        [
            "backend",
            "table",
            "pe_core call",
            "regime (both sides)",
            "pe_core / textbook",
            "pe_core / alloc+write",
            "pe_core / sin",
        ],
        ratio_rows,
    )
    mem_rows = [
        [
            f"{m['n']}×{m['d']}",
            f"{m['output_mb']:.0f}",
            *[f"{m['peak_over_output'][k]:.1f}×" for k in MEMORY_METHODS],
        ]
        for m in results["numpy_peak_memory"]
    ]
    mem_table = common.md_table(
        ["table", "output MiB", *[METHOD_TITLES[k] for k in MEMORY_METHODS]], mem_rows
    )
    threads = "; ".join(f"{k}: {v}" for k, v in results["threads"].items())
    parts = [
        "### Setup",
        "",
        common.machine_md(results),
        f"- Threads: {threads}",
        f"- Timing: median of at least {results['repeats']} calls after one warm-up call "
        "(which includes jit/tf.function compilation); calls faster than 0.2 s/"
        f"{results['repeats']} are repeated up to 50 times.",
        "",
        "### Median time per call (ms)",
        "",
        "`fresh`: every call allocates its output; `reused`: the output buffer is passed "
        "in with `out=` (temporaries are still allocated). float32 tables.",
        "",
        "- pe_core (arange): `pe_core.encode(arange(n, dtype=int32), d)`, under "
        "`jax.jit` / `tf.function` for JAX / TensorFlow. Eager NumPy/torch calls see "
        "consecutive positions and take pe_core's table path (`pe_core/tables.py`); "
        "traced calls cannot, and run the exact per-element kernel (`pe_core/angles.py`).",
        "- pe_core (permuted: kernel): the same positions randomly permuted, which forces "
        "the per-element kernel in eager NumPy/torch.",
        "- pe_core (eager): JAX/TensorFlow without `jit`/`tf.function` (table path).",
        "- textbook: `benchmarks/textbook.py` (the tutorial table, float32, compiled the "
        "same way as pe_core).",
        "- alloc+write bound: allocate the output and write every element; sin bound: one "
        "float32 `sin` per element of a precomputed array (arguments in [-π, π]).",
        "",
        medians,
        "",
        "### Ratios",
        "",
        "Each ratio compares pe_core with the other column in the same regime: `fresh` "
        "against `fresh`. Below 1× pe_core is faster.",
        "",
        ratio_table,
    ]
    if mem_rows:
        parts += [
            "",
            "### NumPy peak memory",
            "",
            "Peak memory traced by `tracemalloc` during one call, as a multiple of the "
            "output table's size (1.0× = just the output).",
            "",
            mem_table,
        ]
    if results["notes"]:
        parts += ["", "### Notes", ""] + [f"- {note}" for note in results["notes"]]
    return "\n".join(parts) + "\n"
