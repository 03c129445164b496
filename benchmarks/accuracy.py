"""Accuracy: max |error| of sinusoidal tables against mpmath at 50 digits.

For each range of positions ``[0, hi)`` (and ``[0, 2**24]``), ``samples`` random
integer positions plus the top of the range are encoded with ``d = 512`` (all 256
frequencies ``10000**(-2i/512)``) and compared with ``sin``/``cos`` of the exact
angle computed by mpmath. float64 NumPy is not a good enough reference there: at
``1e7`` its angle ``pos * w`` is already off by ~1e-9 rad, a million times pe_core's
float64 error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks import common, textbook

D = 512
RANGES: tuple[tuple[str, int, bool], ...] = (
    ("[0, 1e3)", 10**3, False),
    ("[0, 1e4)", 10**4, False),
    ("[0, 1e5)", 10**5, False),
    ("[0, 1e6)", 10**6, False),
    ("[0, 1e7)", 10**7, False),
    ("[0, 2**24]", 2**24, True),
)
SAMPLES = 200
QUICK_SAMPLES = 20
#: Consecutive positions checked at the top of each range (pe_core's table path).
RUN_LENGTH = 1024
QUICK_RUN_LENGTH = 128

#: dtype -> (fraction bits, minimum normal exponent), to measure errors in ulps.
_LOW = {"bfloat16": (7, -126), "float16": (10, -14)}

#: Low-precision errors are also reported for values of at least this magnitude: near
#: zero the output's ulp (down to 6e-8 in float16, far less in bfloat16) is finer than
#: any float32 computation of the angle can resolve.
ULP_FLOOR = 2.0**-7


def sample_positions(hi: int, inclusive: bool, samples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = hi if inclusive else hi - 1
    values = rng.integers(0, top + 1, size=samples, dtype=np.int64)
    return np.unique(np.concatenate([values, [0, top]]))


def reference(positions: np.ndarray, omegas: Sequence[Any], dps: int = 50) -> np.ndarray:
    """Interleaved ``[sin, cos]`` table in float64 from mpmath at ``dps`` digits.

    ``omegas`` are mpmath numbers (or floats, taken exactly).
    """
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = dps
    ws = [ctx.mpf(w) for w in omegas]
    out = np.empty((len(positions), 2 * len(ws)), dtype=np.float64)
    for row, p in enumerate(positions):
        pos = ctx.mpf(int(p))
        for i, w in enumerate(ws):
            c, s = ctx.cos_sin(pos * w)
            out[row, 2 * i] = float(s)
            out[row, 2 * i + 1] = float(c)
    return out


def exact_omegas(d: int, dps: int = 50) -> list[Any]:
    """The mathematical frequencies ``10000**(-2i/d)`` as mpmath numbers."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = dps
    return [ctx.mpf(10000) ** (-ctx.mpf(2 * i) / d) for i in range(d // 2)]


def ulps(values: np.ndarray, ref: np.ndarray, dtype: str) -> np.ndarray:
    """``|values - ref|`` in units of the spacing of ``dtype`` at ``ref``."""
    bits, emin = _LOW[dtype]
    _, exponent = np.frexp(ref)
    e = np.maximum(exponent - 1, emin)
    return np.abs(values - ref) / np.ldexp(1.0, e - bits)


def float32_spacing(x: float) -> float:
    return float(np.spacing(np.float32(x)))


# --------------------------------------------------------------------------- variants
Variant = Callable[[np.ndarray], np.ndarray]


def _to_numpy(x: Any) -> np.ndarray:
    """Any backend's array as float64 NumPy."""
    if isinstance(x, np.ndarray):
        return x.astype(np.float64)
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        return x.double().numpy()
    if mod == "tensorflow":
        import tensorflow as tf

        return tf.cast(x, tf.float64).numpy()
    return np.asarray(x).astype(np.float64)


def variants(backends: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of the accuracy tables: name, group, output dtype and the function."""
    import pe_core

    rows: list[dict[str, Any]] = []

    def add(group: str, name: str, dtype: str, fn: Variant) -> None:
        rows.append({"group": group, "name": name, "dtype": dtype, "fn": fn})

    if "numpy" in backends:
        add("float", "textbook float32 (numpy)", "float32", lambda p: textbook.numpy_table_at(p, D))
    if "torch" in backends:
        torch = common.setup_torch()
        add(
            "float",
            "textbook float32 (torch)",
            "float32",
            lambda p: textbook.torch_table_at(torch.from_numpy(p), D),
        )
    if "numpy" in backends:
        add(
            "float",
            "same formula in float64 (numpy; not the textbook)",
            "float64",
            lambda p: textbook.numpy_table_float64(p, D),
        )

    for backend in backends:
        for dtype in ("float32", "float64", "bfloat16", "float16"):
            if dtype == "float64" and backend not in ("numpy", "torch"):
                continue
            if dtype == "bfloat16" and backend == "numpy":
                continue  # NumPy has no bfloat16
            fn = _pe_core_variant(pe_core, backend, dtype)
            how = {"jax": " under jax.jit", "tensorflow": " under tf.function"}.get(backend, "")
            group = "low" if dtype in _LOW else "float"
            add(group, f"pe_core {dtype} ({backend}{how})", dtype, fn)

    if "torch" in backends:
        torch = common.setup_torch()
        for dtype in ("bfloat16", "float16"):
            tdtype = getattr(torch, dtype)
            add(
                "positions",
                f"textbook, positions as {dtype} (torch)",
                "float32",
                lambda p, t=tdtype: textbook.torch_table_at(torch.from_numpy(p).to(t), D),
            )
    return rows


def _pe_core_variant(pe_core: Any, backend: str, dtype: str) -> Variant:
    if backend == "numpy":
        return lambda p: pe_core.encode(p, D, dtype=dtype)
    if backend == "torch":
        torch = common.setup_torch()
        return lambda p: pe_core.encode(torch.from_numpy(p), D, dtype=dtype)
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        fn = jax.jit(lambda p: pe_core.encode(p, D, dtype=dtype))
        return lambda p: fn(jnp.asarray(p, dtype=jnp.int32))
    import tensorflow as tf

    fn = tf.function(lambda p: pe_core.encode(p, D, dtype=dtype))
    return lambda p: fn(tf.constant(p, dtype=tf.int32))


# --------------------------------------------------------------------------- run
def position_sets(
    index: int, hi: int, inclusive: bool, samples: int, run_length: int
) -> dict[str, np.ndarray]:
    """``random``: sampled positions; ``run``: consecutive positions ending at the top.

    A run of consecutive integers is what pe_core's table path handles (eager calls
    on NumPy/torch/JAX/TensorFlow); random positions take the per-element kernel.
    """
    top = hi if inclusive else hi - 1
    return {
        "random": sample_positions(hi, inclusive, samples, seed=index),
        "run": np.arange(max(0, top - run_length + 1), top + 1, dtype=np.int64),
    }


POSITION_KINDS = ("random", "run")


def run(
    backends: Sequence[str],
    samples: int,
    *,
    run_length: int = RUN_LENGTH,
    argv: Sequence[str] = (),
    paths: tuple[Any, Any] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    load_before = common.loadavg()
    chosen, notes = common.select_backends(backends)
    rows = variants(chosen)
    import pe_core

    omegas_math = exact_omegas(D)
    omegas_f64 = [float(w) for w in pe_core.frequencies(D)]
    need_f64 = any(row["name"].startswith("pe_core float64") for row in rows)
    ranges = []
    for index, (label, hi, inclusive) in enumerate(RANGES):
        sets = position_sets(index, hi, inclusive, samples, run_length)
        top = hi if inclusive else hi - 1
        entry: dict[str, Any] = {
            "label": label,
            "top": top,
            "float32_spacing_at_top": float32_spacing(top),
            "sets": {},
        }
        for kind, positions in sets.items():
            entry["sets"][kind] = {
                "positions": positions,
                "ref": reference(positions, omegas_math),
                "ref_f64": reference(positions, omegas_f64) if need_f64 else None,
            }
        ranges.append(entry)
        log(
            f"  reference for {label}: "
            + ", ".join(f"{len(v)} {k} positions" for k, v in sets.items())
            + f" x {D} features"
        )

    results_rows = []
    for row in rows:
        errors: list[dict[str, Any]] = []
        for rng in ranges:
            for kind in POSITION_KINDS:
                errors.append(_errors(row, rng["label"], kind, rng["sets"][kind]))
        log(
            f"  {row['name']}: " + ", ".join(_cell(e) for e in errors if e["positions"] == "random")
        )
        results_rows.append({k: row[k] for k in ("group", "name", "dtype")} | {"errors": errors})

    results = {
        **common.header(argv, load_before),
        "d": D,
        "samples_per_range": samples,
        "run_length": run_length,
        "reference": "mpmath, 50 significant digits, exact integer positions, w_i = 10000**(-2i/d)",
        "ulp_floor": ULP_FLOOR,
        "ranges": [
            {
                "label": r["label"],
                "top": r["top"],
                "n_positions": {k: len(v["positions"]) for k, v in r["sets"].items()},
                "float32_spacing_at_top": r["float32_spacing_at_top"],
            }
            for r in ranges
        ],
        "rows": results_rows,
        "notes": notes,
    }
    common.publish("accuracy", results, to_markdown(results), paths, log)
    return results


def _errors(row: dict[str, Any], label: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"range": label, "positions": kind}
    try:
        values = _to_numpy(row["fn"](data["positions"]))
    except Exception as exc:
        entry["failed"] = f"{exc.__class__.__name__}: {exc}"
        return entry
    ref = data["ref"]
    entry["max_abs"] = float(np.max(np.abs(values - ref)))
    entry["nonfinite"] = int(np.sum(~np.isfinite(values)))
    if row["dtype"] in _LOW:
        u = ulps(values, ref, row["dtype"])
        entry["max_ulps"] = float(np.max(u))
        entry["max_ulps_above_floor"] = float(np.max(u[np.abs(ref) >= ULP_FLOOR]))
    if row["name"].startswith("pe_core float64") and data["ref_f64"] is not None:
        entry["max_abs_vs_float64_w"] = float(np.max(np.abs(values - data["ref_f64"])))
    return entry


def _cell(entry: dict[str, Any], kind: str = "abs") -> str:
    if "failed" in entry:
        return "failed"
    if entry["nonfinite"]:
        return "nan/inf"
    if kind == "ulp":
        return f"{entry['max_ulps']:.2f} ({entry['max_ulps_above_floor']:.2f})"
    if kind == "f64w":
        return common.fmt_err(entry["max_abs_vs_float64_w"])
    return common.fmt_err(entry["max_abs"])


def to_markdown(results: dict[str, Any]) -> str:
    labels = [r["label"] for r in results["ranges"]]
    spacing = [f"{r['float32_spacing_at_top']:.3g}" for r in results["ranges"]]

    def table(group: str, positions: str, kind: str = "abs", spacing_row: bool = False) -> str:
        body = []
        for row in results["rows"]:
            if row["group"] != group:
                continue
            cells = [_cell(e, kind) for e in row["errors"] if e["positions"] == positions]
            body.append([row["name"], *cells])
        if spacing_row:
            body.append(["*float32 spacing of pos·w at the top (w = 1)*", *spacing])
        return common.md_table(["variant", *labels], body)

    failures = [
        f"{row['name']} {e['range']} ({e['positions']} positions): {e['failed']}"
        for row in results["rows"]
        for e in row["errors"]
        if "failed" in e
    ]
    run_length = results["run_length"]
    floor = int(math.log2(results["ulp_floor"]))
    parts = [
        "### Setup",
        "",
        common.machine_md(results),
        f"- Reference: {results['reference']}; all {results['d'] // 2} frequencies of "
        f"d = {results['d']} (sin and cos).",
        f"- Random positions: {results['samples_per_range']} random integers per range, "
        "plus 0 and the top of the range. Every pe_core call on them runs the exact "
        "per-element kernel (`pe_core/angles.py`).",
        f"- Run: the {run_length} consecutive positions ending at the top of the range "
        "(the whole range for [0, 1e3)). Eager pe_core calls (NumPy, torch) take the "
        "table path (`pe_core/tables.py`) there; calls under `jax.jit`/`tf.function` "
        "cannot see the values and still run the kernel.",
        "",
        "### float32 / float64 output, random positions: max |error|",
        "",
        table("float", "random", spacing_row=True),
        "",
        f"### float32 / float64 output, run of {run_length} consecutive positions: max |error|",
        "",
        table("float", "run", spacing_row=True),
        "",
        "### float64 output against its own frequencies",
        "",
        "The float64 rows above are limited by the float64 rounding of the frequencies "
        "themselves (relative 1e-16, so about 1e-16 · pos rad). Against the exact angle "
        "of the float64 frequencies pe_core actually uses (random positions · run):",
        "",
        _f64w_table(results, labels),
        "",
        "### bfloat16 / float16 output: max error in ulps of the output dtype",
        "",
        "A correctly rounded result is within 0.5 ulp. First number: all values; in "
        f"parentheses: values with |v| ≥ 2^{floor}. Near zero the ulp of float16 (down "
        "to 6e-8) and bfloat16 (far smaller) is finer than the float32 computation can "
        "resolve: an absolute error of ~2e-7 then shows as several ulps.",
        "",
        "Random positions:",
        "",
        table("low", "random", "ulp"),
        "",
        f"Run of {run_length} consecutive positions:",
        "",
        table("low", "run", "ulp"),
        "",
        "### The textbook with low-precision positions: max |error|",
        "",
        "Random positions converted to bfloat16/float16 before the textbook formula (the "
        "table itself is float32). float16 cannot hold positions above 65504: they become "
        "inf and the table NaN.",
        "",
        table("positions", "random"),
    ]
    notes = list(results["notes"]) + failures
    if notes:
        parts += ["", "### Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(parts) + "\n"


def _f64w_table(results: dict[str, Any], labels: list[str]) -> str:
    body = []
    for row in results["rows"]:
        if not row["name"].startswith("pe_core float64"):
            continue
        cells = []
        for label in labels:
            pair = [_cell(e, "f64w") for e in row["errors"] if e["range"] == label]  # random, run
            cells.append(" · ".join(pair))
        body.append([row["name"], *cells])
    return common.md_table(["variant", *labels], body)
