"""Tests for the ``pe-core`` command line, run in-process through :func:`pe_core.cli.main`."""

from __future__ import annotations

import re
import sys
from importlib.metadata import entry_points

import numpy as np
import pytest

import pe_core
from pe_core import cli
from pe_core_backends import installed_backends


def table_row(out: str, backend: str) -> dict[str, str]:
    """The cells of ``backend``'s row in the ``pe-core check`` table, by column name."""
    lines = out.splitlines()
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
    assert out[0].startswith("# pe_core.encode(positions=0:8, d=16, spec='vaswani'")
    assert out[0].endswith("-> shape (8, 16)")
    rows = [line.split(None, 1) for line in out[2:]]
    assert [label for label, _ in rows] == [str(p) for p in range(8)]
    expected = pe_core.encode(np.arange(8), 16)
    for p, (_, values) in enumerate(rows):
        printed = np.array(values.strip("[]").split(), dtype=float)
        np.testing.assert_allclose(printed, expected[p], atol=5e-5)


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
    np.testing.assert_array_equal(np.load(out), pe_core.encode(np.array(positions), 6))


def test_encode_out_saves_what_encode_returns(tmp_path, capsys):
    out = tmp_path / "table.npy"
    argv = ["encode", "--positions", "0:1000:7", "--dim", "33", "--spec", "flax"]
    assert cli.main([*argv, "--dtype", "float64", "--out", str(out)]) == 0
    saved = np.load(out)
    assert saved.dtype == np.float64 and saved.shape == (143, 33)
    np.testing.assert_array_equal(
        saved, pe_core.encode(np.arange(0, 1000, 7), 33, spec="flax", dtype="float64")
    )
    assert f"-> {out}" in capsys.readouterr().out


def test_encode_on_another_backend(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "t.npy"
    argv = ["encode", "--positions", "0:4", "--dim", "8", "--backend", "pytorch"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), pe_core.encode(np.arange(4), 8), atol=1e-7)


def test_encode_bfloat16_is_saved_as_float32(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "b.npy"
    argv = ["encode", "--positions", "0:4", "--dim", "8", "--backend", "jax", "--dtype", "bfloat16"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    saved = np.load(out)
    assert saved.dtype == np.float32
    np.testing.assert_allclose(saved, pe_core.encode(np.arange(4), 8), atol=1e-2)


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


def test_dtype_the_backend_lacks_is_a_usage_error(capsys):
    argv = ["encode", "--positions", "0:4", "--dim", "4", "--dtype", "bfloat16"]
    assert cli.main(argv) == 2
    assert "backend 'numpy' has no dtype 'bfloat16'" in capsys.readouterr().err


def test_help_exits_0(capsys):
    assert cli.main(["--help"]) == 0
    assert "encode" in capsys.readouterr().out


def test_console_script_is_registered():
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "pe-core"]
    assert script.value == "pe_core.cli:main"


# -- check --------------------------------------------------------------------


def test_check_numpy(capsys):
    assert cli.main(["check", "--backends", "numpy"]) == 0
    out = capsys.readouterr().out
    cells = table_row(out, "numpy")
    assert list(cells) == list(cli.COLUMNS)
    assert cells.pop("compiled") == "n/a"
    assert all(cell.startswith("PASS") for cell in cells.values()), cells
    assert "5 case(s)" in out and out.rstrip().endswith("all checks passed")


def test_check_odd_dim_skips_presets_without_zero_pad(capsys):
    argv = ["check", "--backends", "np", "--dim", "9,2", "--spec", "vaswani,flax"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "skipped: vaswani d=9" in out
    assert "3 case(s)" in out


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
    real_encode = cli.encode

    def scaled_encode(pos, d, **kwargs):  # 1.5 x the encoding: not bounded, not exact
        return 1.5 * real_encode(pos, d, **kwargs)

    monkeypatch.setattr(cli, "encode", scaled_encode)
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

    monkeypatch.setattr(cli, "shift", crashing_shift)
    assert cli.main(["check", "--backends", "numpy", "--spec", "whisper", "--dim", "4"]) == 1
    out = capsys.readouterr().out
    assert table_row(out, "numpy")["shift"] == "ERROR"
    assert "RuntimeError: shift is broken" in out


def test_check_without_mpmath_skips_the_exact_columns(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpmath", None)
    assert cli.main(["check", "--backends", "numpy", "--spec", "vaswani", "--dim", "8"]) == 0
    assert table_row(capsys.readouterr().out, "numpy")["large"] == "SKIP"


def test_exact_reference_matches_float64_on_small_positions():
    spec = pe_core.PRESETS["fairseq"]
    grids = (np.arange(-50, 50), np.linspace(-3, 3, 13))
    exact = cli._exact_encoding(grids, 17, spec)
    for grid, table in zip(grids, exact, strict=True):
        np.testing.assert_allclose(table, cli._reference_encoding(grid, 17, spec), atol=1e-13)
