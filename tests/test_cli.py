"""Tests for the ``pe-core`` command line, run in-process through :func:`pe_core.cli.main`."""

from __future__ import annotations

import json
import os
import pkgutil
import re
import subprocess
import sys
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal

import pe_core
import pe_core._cli
from pe_core import cli
from pe_core._cli import check as check_command
from pe_core._cli import check_cases, check_run
from pe_core._cli import encode as encode_command
from pe_core_backends import installed_backends


def table_row(out: str, backend: str, table: str = "pe_core.encode") -> dict[str, str]:
    """The cells of ``backend``'s row in a ``pe-core check`` table, by column name."""
    lines = out.splitlines()
    lines = lines[lines.index(table) + 1 :]
    header = next(line for line in lines if line.startswith("backend "))
    columns = header.split()[1:]
    row = next(line for line in lines if line.split()[:1] == [backend])
    cells = re.split(r"\s{2,}", row.strip())[1:]
    assert len(cells) == len(columns), row
    return dict(zip(columns, cells, strict=True))


# -- encode -------------------------------------------------------------------


def test_encode_prints_the_table(capsys):
    assert cli.main(["encode", "--positions", "0:8", "--dim", "16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# pe_core.encode(pos=range(0, 8), d=16, spec='vaswani'")
    assert out[0].endswith("-> shape (8, 16)")
    rows = [line.split(None, 1) for line in out[2:]]
    assert [label for label, _ in rows] == [str(p) for p in range(8)]
    expected = pe_core.encode(np.arange(8), 16)
    for p, (_, values) in enumerate(rows):
        printed = np.array(values.strip("[]").split(), dtype=float)
        assert_close(printed, expected[p], atol=5e-5, rtol=1e-7)


@pytest.mark.parametrize(
    ("argument", "positions"),
    [
        ("0:8:3", [0, 3, 6]),
        ("1,5,9", [1, 5, 9]),
        ("7", [7]),
        ("0:1:0.25", [0.0, 0.25, 0.5, 0.75]),
        ("=-2:1", [-2, -1, 0]),
        ("2.5,1e6", [2.5, 1e6]),
    ],
)
def test_encode_position_syntax(tmp_path, argument, positions):
    out = tmp_path / "pe.npy"
    flag = "--positions" + argument if argument.startswith("=") else None
    argv = ["encode", flag] if flag else ["encode", "--positions", argument]
    assert cli.main([*argv, "--dim", "6", "--out", str(out)]) == 0
    assert_equal(np.load(out), pe_core.encode(np.array(positions), 6))


def test_encode_out_saves_what_encode_returns(tmp_path, capsys):
    out = tmp_path / "table.npy"
    argv = ["encode", "--positions", "0:1000:7", "--dim", "33", "--spec", "flax"]
    assert cli.main([*argv, "--dtype", "float64", "--out", str(out)]) == 0
    saved = np.load(out)
    assert saved.shape == (143, 33)
    expected = pe_core.encode(np.arange(0, 1000, 7), 33, spec="flax", dtype="float64")
    assert_equal(saved, expected, dtype="float64")
    assert f"-> {out}" in capsys.readouterr().out


def test_encode_on_another_backend(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "t.npy"
    argv = ["encode", "--positions", "0:4", "--dim", "8", "--backend", "pytorch"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    assert_close(np.load(out), pe_core.encode(np.arange(4), 8), atol=1e-7, rtol=1e-7)


def test_encode_bfloat16_is_saved_as_float32(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "b.npy"
    argv = ["encode", "--positions", "0:4", "--dim", "8", "--backend", "jax", "--dtype", "bfloat16"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    saved = np.load(out)
    assert_close(saved, pe_core.encode(np.arange(4), 8), atol=1e-2, rtol=1e-7, dtype="float32")


def test_encode_summarises_wide_and_long_tables(capsys):
    assert cli.main(["encode", "--positions", "0:200", "--dim", "64"]) == 0
    out = capsys.readouterr().out
    assert " ... " in out  # the features in between
    assert "..." in [line.strip() for line in out.splitlines()]  # the positions in between
    assert "first and last 4 of 64 features" in out
    assert "first and last 10 of 200 positions" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["encode", "--positions", "0:4", "--dim", "5"], "d must be even"),
        (["encode", "--positions", "0:4", "--dim", "0"], "expected a positive integer"),
        (["encode", "--positions", "0:4", "--dim", "4", "--spec", "bert"], "Unknown preset 'bert'"),
        (
            ["encode", "--positions", "0:4", "--dim", "4", "--backend", "tf2"],
            "Unknown backend 'tf2'",
        ),
        (["encode", "--positions", "0:4", "--dim", "4", "--dtype", "int8"], "invalid choice"),
        (["encode", "--positions", "4:0", "--dim", "4"], "holds no positions"),
        (["encode", "--positions", "0:4:0", "--dim", "4"], "must not be 0"),
        (["encode", "--positions", "0:1:2:3", "--dim", "4"], "'a:b' or 'a:b:step'"),
        (["encode", "--positions", "1,,2", "--dim", "4"], "separated by commas"),
        (["encode", "--positions", "1,nan", "--dim", "4"], "must be finite"),
        (["encode", "--positions", "one", "--dim", "4"], "'one' is not a number"),
        (["encode", "--dim", "4"], "--positions"),
        (["check", "--backends", "numpy,foo"], "Unknown backend 'foo'"),
        (["check", "--dim", "x"], "expected a positive integer"),
        (["check", "--spec", "vaswani", "--dim", "7"], "nothing to check"),
        ([], "COMMAND"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "error:" in err


def test_dtype_the_backend_lacks_is_a_usage_error(capsys, monkeypatch):
    """NumPy has bfloat16 only through ml_dtypes: without it, a one-line usage error."""
    from pe_core_backends import get_namespace

    numpy_namespace = type(get_namespace("numpy"))
    monkeypatch.setattr(numpy_namespace, "float_dtypes", ("float64", "float32", "float16"))
    argv = ["encode", "--positions", "0:4", "--dim", "4", "--dtype", "bfloat16"]
    assert cli.main(argv) == 2
    assert "backend 'numpy' has no dtype 'bfloat16'" in capsys.readouterr().err


def test_header_is_the_call_that_gives_the_table(capsys):
    """The printed call runs, with encode's keywords, and gives the same table."""
    argv = ["encode", "--positions", "0:1:0.25", "--dim", "4", "--spec", "fairseq"]
    assert cli.main([*argv, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    call = document["call"]
    assert call.startswith("pe_core.encode(pos=np.arange(0, 1, 0.25), d=4, spec='fairseq'")
    again = eval(call, {"pe_core": pe_core, "np": np})  # the header is runnable code
    assert_equal(np.asarray(document["values"], dtype=np.float32), again)


@pytest.mark.parametrize(
    ("suffix", "fmt"), [(".npy", "npy"), (".csv", "csv"), (".json", "json"), (".CSV", "csv")]
)
def test_out_format_follows_the_extension(tmp_path, capsys, suffix, fmt):
    out = tmp_path / f"t{suffix}"
    argv = ["encode", "--positions", "0,7,100000", "--dim", "6", "--dtype", "float64"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no name added
    assert capsys.readouterr().out.rstrip().endswith(f"-> {out} ({fmt})")
    expected = pe_core.encode(np.array([0, 7, 100000]), 6, dtype="float64")
    assert_equal(read_table(out, fmt), expected)


def read_table(path, fmt: str) -> np.ndarray:
    if fmt == "npy":
        return np.load(path)
    if fmt == "csv":
        lines = path.read_text().splitlines()
        assert lines[0].split(",")[0] == "pos"
        return np.array([line.split(",")[1:] for line in lines[1:]], dtype=np.float64)
    return np.array(json.loads(path.read_text())["values"], dtype=np.float64)


@pytest.mark.parametrize("fmt", ["csv", "json", "npy"])
def test_format_overrides_the_extension(tmp_path, fmt):
    out = tmp_path / "table.data"
    argv = ["encode", "--positions", "3:9:2", "--dim", "8", "--spec", "tensor2tensor"]
    assert cli.main([*argv, "--out", str(out), "--format", fmt]) == 0
    saved = read_table(out, fmt)
    expected = pe_core.encode(np.arange(3, 9, 2), 8, spec="tensor2tensor")  # float32
    assert_equal(saved.astype(np.float32), expected)  # every bit back


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_format_prints_csv_and_json(capsys, fmt):
    assert cli.main(["encode", "--positions=-3,0.5", "--dim", "4", "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "csv":
        lines = out.splitlines()
        assert lines[0] == "pos,f0,f1,f2,f3"
        assert [line.split(",")[0] for line in lines[1:]] == ["-3.0", "0.5"]
        values = np.array([line.split(",")[1:] for line in lines[1:]], dtype=np.float32)
    else:
        document = json.loads(out)
        assert document["pos"] == [-3.0, 0.5] and document["shape"] == [2, 4]
        assert document["dtype"] == "float32"
        values = np.array(document["values"], dtype=np.float32)
    assert_equal(values, pe_core.encode(np.array([-3.0, 0.5]), 4))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "{tmp}/t.txt"], "cannot tell the format of --out"),
        (["--out", "{tmp}/table"], "from its extension '(none)'"),
        (["--out", "{tmp}/missing/t.csv"], "the folder '{tmp}/missing' does not exist"),
        (["--out", "{tmp}"], "is a folder"),
        (["--format", "npy"], "give --out FILE.npy"),
        (["--out", "{tmp}/t.csv", "--format", "table"], "to save every value use csv"),
        (["--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_bad_output_arguments_exit_2_and_write_nothing(tmp_path, capsys, extra, message):
    extra = [arg.format(tmp=tmp_path) for arg in extra]
    assert cli.main(["encode", "--positions", "0:3", "--dim", "4", *extra]) == 2
    captured = capsys.readouterr()
    assert message.format(tmp=tmp_path) in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_unwritable_out_exits_1(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_text", refuse)
    argv = ["encode", "--positions", "0:3", "--dim", "4", "--out", str(tmp_path / "t.csv")]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"pe-core encode: error: could not write '{tmp_path / 't.csv'}': Permission denied"
    )


def test_plot_into_a_missing_folder_exits_2(tmp_path, capsys):
    out = tmp_path / "nope" / "fig.png"
    assert cli.main(["plot", "heatmap", "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_library_errors_are_one_line_with_status_2(monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise ValueError("positions out of range\n  found 1e+300 at index 0")

    monkeypatch.setattr(encode_command, "encode", refuse)
    assert cli.main(["encode", "--positions", "1e300", "--dim", "4"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "pe-core encode: error: positions out of range found 1e+300 at index 0\n"
    )


def exact_encoding(position: float, d: int) -> np.ndarray:
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(2000):  # enough for |p| up to about 1e300
        p = mpmath.mpf(position)
        angles = [p * mpmath.mpf(float(w)) for w in pe_core.frequencies(d)]
        return np.array([f(a) for a in angles for f in (mpmath.sin, mpmath.cos)], dtype=np.float64)


@pytest.mark.parametrize(
    "argument", ["1e300", "1e23", "-1e23", "99999999999999999999", "36028797018963968"]
)
def test_huge_positions_are_exact_or_refused(capsys, argument):
    """Never a wrong number with status 0: exact (against mpmath) or a one-line error."""
    status = cli.main(["encode", f"--positions={argument}", "--dim", "4", "--format", "json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if status == 2:
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
        assert captured.err.startswith("pe-core encode: error: ")
        return
    assert status == 0, captured.err
    got = np.array(json.loads(captured.out)["values"][0], dtype=np.float64)
    assert_close(got, exact_encoding(float(int(float(argument))), 4), atol=1e-6, rtol=1e-7)


@pytest.mark.parametrize(
    ("argument", "positions"),
    [
        ("=9223372036854775813", [2**63 + 5]),
        ("=9223372036854775806:9223372036854775810", [2**63 - 2, 2**63 - 1, 2**63, 2**63 + 1]),
        ("=-9223372036854775807:-9223372036854775809:-1", [-(2**63) + 1, -(2**63)]),
        ("=-1,9223372036854775808", [-1, 2**63]),
    ],
)
def test_integers_at_the_int64_edge_stay_exact(capsys, argument, positions):
    """Integers the library takes are neither rounded to float64 nor wrapped past the end
    of int64."""
    assert cli.main(["encode", f"--positions{argument}", "--dim", "4", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["pos"] == positions
    for p, values in zip(positions, document["values"], strict=True):
        assert_close(np.array(values), exact_encoding(p, 4), atol=1e-6, rtol=1e-7)


@pytest.mark.parametrize(
    "argument", ["=100000000000000000000000", "=18446744073709551615:18446744073709551617"]
)
def test_integers_beyond_the_library_are_refused_not_rounded(capsys, argument):
    assert cli.main(["encode", f"--positions{argument}", "--dim", "4"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "positions must be integers in [-2**63, 2**64)" in captured.err
    assert "to encode the nearest float64 position" in captured.err


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("=-1e308:1e308", "is too large"),
        ("=0:" + "9" * 400, "is too large"),
        ("=1e999", "must be finite"),
    ],
)
def test_ranges_beyond_floats_are_refused(capsys, argument, message):
    assert cli.main(["encode", f"--positions{argument}", "--dim", "4"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"pe-core {pe_core.__version__}"


def test_python_dash_m_pe_core_runs_the_cli(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    argv = [sys.executable, "-m", "pe_core", "encode", "--positions", "0:3", "--dim", "4"]
    result = subprocess.run(
        [*argv, "--out", str(tmp_path / "t.npy")],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert_equal(np.load(tmp_path / "t.npy"), pe_core.encode(range(3), 4))
    bad = subprocess.run(
        [*argv[:3], "encode", "--positions", "x", "--dim", "4"],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert bad.returncode == 2 and "'x' is not a number" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_help_exits_0(capsys):
    assert cli.main(["--help"]) == 0
    assert "encode" in capsys.readouterr().out


def test_console_script_is_registered():
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "pe-core"]
    assert script.value == "pe_core.cli:main"


# -- check --------------------------------------------------------------------


def test_check_numpy(capsys):
    assert cli.main(["check", "--backends", "numpy"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    cells = table_row(out, "numpy")
    assert list(cells) == list(check_cases.COLUMNS)
    assert cells.pop("compiled") == "n/a"
    assert all(cell.startswith("PASS") for cell in cells.values()), cells
    one_axis = sum(1 for spec in pe_core.PRESETS.values() if spec.axes == 1)  # one d each
    assert f"{one_axis} case(s)" in out and out.rstrip().endswith("all checks passed")
    rope = table_row(out, "numpy", "pe_core.apply_rope")
    assert list(rope) == list(check_cases.ROPE_COLUMNS)
    assert rope.pop("compiled") == "n/a"
    assert all(cell.startswith("PASS") for cell in rope.values()), rope
    assert "across backends: n/a (one backend checked)" in out
    # progress: a line per case, each property named as it is done, and the time
    progress = [line for line in captured.err.splitlines() if line.startswith("checking numpy")]
    assert progress[0].startswith("checking numpy: importing (")
    columns = " ".join(c for c in check_cases.COLUMNS if c != "compiled")
    rope_columns = " ".join(c for c in check_cases.ROPE_COLUMNS if c != "compiled")
    encode_lines = [line for line in progress if " spec=" in line]
    rope_lines = [line for line in progress if " rope " in line]
    assert len(progress) == 1 + len(encode_lines) + len(rope_lines)
    assert len(encode_lines) == one_axis and len(rope_lines) == 2
    for line in encode_lines:
        assert re.fullmatch(rf"checking numpy spec=\w+ d=64: {columns} \(\d+\.\d s\)", line), line
    for line, layout in zip(rope_lines, ("half", "interleaved"), strict=True):
        pattern = rf"checking numpy rope layout={layout} head_dim=64: {rope_columns} \(\d+\.\d s\)"
        assert re.fullmatch(pattern, line), line


def test_check_progress_names_the_compiler(capsys):
    pytest.importorskip("jax")
    assert cli.main(["check", "--backends", "jax", "--spec", "whisper", "--dim", "4"]) == 0
    err = capsys.readouterr().err
    assert re.search(
        r"^checking jax spec=whisper d=4: compiled with jax\.jit \(\d+\.\d s\)$", err, re.M
    ), err


def test_check_quiets_frameworks_for_its_run_only(monkeypatch, capsys):
    import logging

    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    seen = {}

    def spy(*args, **kwargs):
        seen["env"] = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        seen["level"] = logging.getLogger("tensorflow").getEffectiveLevel()
        return real(*args, **kwargs)

    real = check_command.import_backend
    monkeypatch.setattr(check_command, "import_backend", spy)
    level = logging.getLogger("tensorflow").level
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 0
    assert seen == {"env": "2", "level": logging.ERROR}
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ  # restored
    assert logging.getLogger("tensorflow").level == level
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's choice is kept
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 0
    assert seen["env"] == "0" and os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_check_odd_dim_skips_presets_without_zero_pad(capsys):
    argv = ["check", "--backends", "np", "--dim", "9,2", "--spec", "vaswani,flax"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "skipped: vaswani d=9" in out
    assert "rope head_dim=9 (RoPE rotates pairs: head_dim must be even)" in out
    assert "3 case(s)" in out
    assert "apply_rope: 2 case(s) (layouts half, interleaved; head_dim in 2)" in out


@pytest.mark.slow
def test_check_every_installed_backend(capsys):
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    for backend in installed_backends():
        cells = table_row(out, backend)
        assert not any(c.startswith(("FAIL", "ERROR")) for c in cells.values()), (backend, cells)
        if backend != "numpy":
            assert cells["compiled"].startswith("PASS"), cells


def test_check_reports_failures(monkeypatch, capsys):
    real_encode = check_cases.encode

    def scaled_encode(pos, d, **kwargs):  # 1.5 x the encoding: not bounded, not exact
        return 1.5 * real_encode(pos, d, **kwargs)

    monkeypatch.setattr(check_cases, "encode", scaled_encode)
    assert cli.main(["check", "--backends", "numpy", "--spec", "vaswani", "--dim", "8"]) == 1
    out = capsys.readouterr().out
    cells = table_row(out, "numpy")
    for column in ("agreement", "large", "bounded", "rel-dot"):
        assert cells[column].startswith("FAIL"), cells
    for column in ("linear", "shift", "unique"):  # scaling keeps these properties
        assert cells[column].startswith("PASS"), cells
    assert "numpy agreement: spec=vaswani d=8: error" in out
    assert "check(s) failed" in out


def test_check_reports_exceptions_as_errors(monkeypatch, capsys):
    def crashing_shift(*args, **kwargs):
        raise RuntimeError("shift is broken")

    monkeypatch.setattr(check_cases, "shift", crashing_shift)
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 1
    out = capsys.readouterr().out
    assert table_row(out, "numpy")["shift"] == "ERROR"
    assert "RuntimeError: shift is broken" in out


def test_check_without_mpmath_skips_the_exact_columns(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpmath", None)
    assert cli.main(["check", "--backends", "numpy", "--spec", "vaswani", "--dim", "8"]) == 0
    assert table_row(capsys.readouterr().out, "numpy")["large"] == "SKIP"


def test_check_reports_broken_rope(monkeypatch, capsys):
    """1.01 x the rotation: not the reference, not a rotation, but still relative."""
    real_rope = check_cases.apply_rope
    monkeypatch.setattr(check_cases, "apply_rope", lambda x, p, **kw: 1.01 * real_rope(x, p, **kw))
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "8"]) == 1
    out = capsys.readouterr().out
    cells = table_row(out, "numpy", "pe_core.apply_rope")
    assert cells["agreement"].startswith("FAIL") and cells["norm"].startswith("FAIL"), cells
    assert cells["relative"].startswith("PASS"), cells
    assert all(c.startswith("PASS") or c == "n/a" for c in table_row(out, "numpy").values())
    assert "numpy rope norm: rope layout=half head_dim=8: error 0.01 > tolerance 1e-06" in out


def test_check_reports_rope_that_is_not_relative(monkeypatch, capsys):
    def absolute(x, p, **kwargs):  # adds an absolute position signal: scores see m and n
        return x + 0.1 * pe_core.encode(np.asarray(p) % 1000, x.shape[-1], backend="numpy")

    monkeypatch.setattr(check_cases, "apply_rope", absolute)
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "8"]) == 1
    cells = table_row(capsys.readouterr().out, "numpy", "pe_core.apply_rope")
    assert cells["relative"].startswith("FAIL"), cells


def test_check_rope_output_of_the_wrong_dtype_is_an_error(monkeypatch, capsys):
    real_rope = check_cases.apply_rope
    monkeypatch.setattr(
        check_cases, "apply_rope", lambda x, p, **kw: real_rope(x, p, **kw).astype(np.float64)
    )
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 1
    out = capsys.readouterr().out
    assert table_row(out, "numpy", "pe_core.apply_rope")["agreement"] == "ERROR"
    assert "TypeError: apply_rope returned numpy float64, not float32" in out


def test_check_across_backends_catches_a_backend_that_differs(monkeypatch, capsys):
    """A backend 7e-7 away from NumPy: beyond the 5e-7 allowed across backends."""
    other = next((b for b in ("torch", "jax") if b in installed_backends()), None)
    if other is None:
        pytest.skip("needs a second backend")
    real_encode = check_cases.encode

    def nudged(pos, d, **kwargs):
        out = real_encode(pos, d, **kwargs)
        return out + 7e-7 if kwargs.get("backend") == other else out

    monkeypatch.setattr(check_cases, "encode", nudged)
    argv = ["check", "--backends", f"numpy,{other}", "--spec", "whisper", "--dim", "8"]
    assert cli.main([*argv, "--no-compiled"]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("across backends"))
    assert f"{other} vs numpy" in line and "encode FAIL" in line and "apply_rope PASS" in line
    assert "across backends encode: spec=whisper d=8: error" in out
    assert table_row(out, other)["compiled"] == "SKIP"


def test_check_thorough_on_numpy(capsys):
    """--thorough: positions to 1e300 against mpmath, more RoPE configurations."""
    pytest.importorskip("mpmath")
    argv = ["check", "--backends", "numpy", "--spec", "vaswani,fairseq", "--dim", "8"]
    assert cli.main([*argv, "--thorough"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pe-core check: 2 case(s)")
    assert "apply_rope: 6 case(s)" in out and "thorough:" in out
    assert all(c.startswith("PASS") or c == "n/a" for c in table_row(out, "numpy").values())


def test_check_runs_pe_core_testing_checks(monkeypatch, capsys):
    """The CLI has no reference of its own: every column calls pe_core.testing's checks,
    each through pe_core.testing.run_check."""
    called = set()
    for name in dir(check_cases):
        real = getattr(check_cases, name)
        if name.startswith("check_") and real.__module__.startswith("pe_core.testing"):

            def spy(*args, _name=name, _real=real, **kwargs):
                called.add(_name)
                return _real(*args, **kwargs)

            monkeypatch.setattr(check_cases, name, spy)
    outcomes = []
    real_run_check = check_run.run_check

    def run_check(body):
        outcomes.append(real_run_check(body))
        return outcomes[-1]

    monkeypatch.setattr(check_run, "run_check", run_check)
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 0
    assert called == {
        "check_agreement",
        "check_bounded",
        "check_uniqueness",
        "check_linear_relation",
        "check_shift",
        "check_relative_dot",
        "check_rope_agreement",
        "check_rope_relative_scores",
        "check_rope_norm",
    }
    encode_columns = 7 if check_cases.has_mpmath() else 6  # "large" needs mpmath
    assert len(outcomes) == encode_columns + 2 * 3  # apply_rope: 3 columns, 2 layouts
    assert {outcome.status for outcome in outcomes} == {"PASS"}
    modules = [cli] + [
        import_module(f"pe_core._cli.{m.name}") for m in pkgutil.iter_modules(pe_core._cli.__path__)
    ]
    for module in modules:
        names = set(dir(module))
        assert not names & {"_exact_encoding", "_reference_encoding", "reference_encoding"}


def test_each_compiled_case_gets_a_code_object_of_its_own():
    """torch.compile caches per code object and gives up after a few recompilations
    (with fullgraph=True, an error): every case must compile its own function."""

    def target(positions):
        return positions

    first, second = check_run.own_code(target), check_run.own_code(target)
    assert first.__code__ is not second.__code__
    assert first(3) == second(3) == 3
