"""The benchmark scripts run end to end at CI size: ``python -m benchmarks.calls --quick``
and ``python -m benchmarks.gpu --tiny`` exit 0 and print a table with every row.

Speed ratios are not asserted: they depend on the machine and its load.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent


def run_module(*args: str) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def table_rows(output: str) -> list[list[str]]:
    """The cells of every markdown table row in ``output`` (header rows included)."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in output.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.slow
def test_calls_quick_prints_every_row():
    pytest.importorskip("torch")
    output = run_module("benchmarks.calls", "--quick")
    rows = {(cells[0], cells[1]) for cells in table_rows(output)}
    expected = {
        ("decode step: apply_rope on q and k", "torch"),
        ("apply_rope, per-example positions", "torch"),
        ("first eager call", "torch"),
        ("peak memory, permuted positions", "numpy"),
        ("peak memory, per-example offsets", "numpy"),
    }
    for backend in ("numpy", "torch"):
        for measurement in (
            "encode, few positions",
            "encode, permuted positions",
            "encode, per-example offsets",
            "encode, consecutive run",
        ):
            expected.add((measurement, backend))
    for backend in ("jax", "tensorflow"):
        if installed(backend):
            expected.add(("encode, consecutive run", backend))
            expected.add(("eager growth, kernel path", backend))
            expected.add(("eager growth, table path", backend))
    assert expected <= rows, sorted(expected - rows)
    assert "failed:" not in output
    assert "wrote" not in output  # --quick writes nothing


def test_gpu_tiny_prints_every_row():
    torch = pytest.importorskip("torch")
    output = run_module("benchmarks.gpu", "--tiny")
    rows = table_rows(output)
    assert rows[0] == ["method", "size", "pe_core ms", "baseline ms", "ratio"]
    methods = [cells[0] for cells in rows[1:]]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for method in (
        "encode vs textbook",
        "encode, consecutive vs textbook",
        "encode, permuted vs textbook",
        "apply_rope decode step vs HF",
        "apply_rope per-example vs HF",
    ):
        assert f"torch {device}: {method}" in methods, method
        if installed("jax"):
            assert any(m.endswith(f"eager: {method} (jit)") for m in methods), method
            assert any(m.endswith(f"jit: {method} (jit)") for m in methods), method
    assert methods.count(f"torch {device}: encode vs textbook") == 3  # 1, 16, 128 positions
    assert methods.count(f"torch {device}: apply_rope per-example vs HF") == 2  # f32, bf16
    assert "failed:" not in output
    if device == "cpu":
        assert "sync check skipped" in output


def test_resample_quick_prints_every_row():
    pytest.importorskip("torch")
    output = run_module("benchmarks.resample", "--quick")
    rows = table_rows(output)
    assert rows[0][:2] == ["case (torch, CPU, eager)", "threads"]
    cases = {(cells[0], cells[1]) for cells in rows[1:]}
    for case in ("14x14 -> 32x32, C=768, bicubic", "32x32 -> 14x14, C=768, bicubic, antialias"):
        assert {(case, "1"), (case, "2")} <= cases, sorted(cases)
    assert all(cells[5].endswith("×") and cells[6].endswith("×") for cells in rows[1:])


def test_relative_index_quick_prints_every_row():
    output = run_module("benchmarks.relative_index", "--quick")
    rows = {(cells[0], cells[1]) for cells in table_rows(output)}
    expected = {("DeBERTa buckets, exact (128 x 128)", "numpy")}
    if installed("torch") and installed("transformers"):
        expected |= {
            ("DeBERTa buckets, exact (128 x 128)", "torch"),
            ("DeBERTa buckets, float32 (128 x 128)", "torch"),
            ("BEiT index, 14 x 14 window and class token", "torch"),
            ("Swin bias, 7 x 7 window, 4 heads", "torch"),
        }
    assert expected <= rows, sorted(expected - rows)


@pytest.mark.slow
def test_position_ids_quick_prints_every_row():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    output = run_module("benchmarks.position_ids", "--quick")
    rows = {(cells[0], cells[1]) for cells in table_rows(output)}
    calls = ("from_attention_mask (padding 1)", "from_attention_mask (padding 0)", "from_input_ids")
    expected = {(call, size) for call in calls for size in ("1 x 16", "8 x 512")}
    assert expected <= rows, output


def test_trainable_quick_prints_every_row():
    pytest.importorskip("torch")
    output = run_module("benchmarks.trainable", "--quick")
    rows = {(cells[0], cells[1]) for cells in table_rows(output)}
    assert {("forward", "1x2x16x8"), ("forward + backward", "1x2x16x8")} <= rows


def test_rope_variants_quick_prints_every_row():
    pytest.importorskip("torch")
    output = run_module("benchmarks.rope_variants", "--quick")
    rows = table_rows(output)
    assert rows[0] == ["measurement", "pe_core ms", "baseline ms", "ratio"]
    assert [cells[0] for cells in rows[1:]] == [
        "last features vs DeepSeek-V4",
        "V-JEPA 2 vs rotate_queries_or_keys",
        "blocks vs Allegro",
    ]
    assert all(cells[3].endswith("×") for cells in rows[1:])


def test_fourier_quick_prints_every_row():
    pytest.importorskip("torch")
    output = run_module("benchmarks.fourier", "--quick")
    rows = table_rows(output)
    assert rows[0] == [
        "measurement",
        "size",
        "pe_core ms",
        "baseline ms",
        "ratio",
        "error",
        "baseline error",
    ]
    measurements = [cells[0] for cells in rows[1:]]
    for label in ("fixed B (NumPy)", "trainable B (Parameter)"):
        assert measurements.count(f"fourier_features, {label}") == 2, label
    assert all(cells[4].endswith("×") for cells in rows[1:])


@pytest.mark.slow
def test_timesteps_quick_prints_every_row():
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    output = run_module("benchmarks.timesteps", "--quick")
    rows = table_rows(output)
    assert rows[0] == ["timesteps", "batch", "dim", "pe_core ms", "diffusers ms", "ratio"]
    cells = {(r[0], r[1], r[2]) for r in rows[1:]}
    for kind in ("int steps (SD)", "float, scale=1000"):
        for batch in ("1", "64", "4096"):
            for dim in ("320", "1280"):
                assert (kind, batch, dim) in cells


@pytest.mark.slow
def test_compiled_quick_prints_every_row():
    """One route (jax.jit: compiling it takes seconds; inductor's take a minute)."""
    pytest.importorskip("jax")
    output = run_module("benchmarks.compiled", "--quick", "--routes", "jax.jit")
    rows = table_rows(output)
    assert rows[0] == ["route", "call", "size", "pe_core ms", "textbook ms", "pe_core / textbook"]
    assert [(cells[0], cells[1]) for cells in rows[1:]] == [
        ("jax.jit", "encode"),
        ("jax.jit", "apply_rope"),
    ]
    assert all(cells[5].endswith("×") for cells in rows[1:])


def test_hf_patch_quick_prints_every_row(monkeypatch, capsys):
    """In this process (torch and transformers are imported once for the suite)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import hf_patch

    threads = torch.get_num_threads()
    assert hf_patch.main(["--quick"]) == 0
    assert torch.get_num_threads() == threads  # the suite's setting is given back
    rows = table_rows(capsys.readouterr().out)
    assert rows[0] == ["rope type", "call", "unpatched ms", "patched ms", "ratio"]
    cells = [(r[0], r[1]) for r in rows[1:]]
    rope_types = ("default", "llama3")
    calls = ("decode, batch 1", "decode, batch 8", "prefill 512", "prefill 4096")
    assert cells == [(rope, call) for rope in rope_types for call in calls]
    assert all(float(r[4]) > 0 for r in rows[1:])
