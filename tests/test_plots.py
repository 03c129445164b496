"""pe_core.plots and ``pe-core plot``: every figure is drawn and saved as a PNG."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import HANG_TIMEOUT, assert_close

pytest.importorskip("matplotlib")

from pe_core import cli, plots

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 2000, f"{path}: {len(data)} bytes"


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("heatmap", ["--dim", "32", "--len", "40"]),
        ("similarity", ["--dim", "16", "--len", "30", "--spec", "fairseq"]),
        ("similarity", ["--len", "20", "--metric", "euclidean"]),
        ("distance", ["--dim", "8,32", "--len", "50", "--base", "100,1e4"]),
        ("spectrum", ["--dim", "64"]),
        ("spectrum", ["--spec", "whisper"]),
    ],
)
def test_cli_plot_writes_a_png(tmp_path, capsys, kind, options):
    out = tmp_path / f"{kind}.png"
    assert cli.main(["plot", kind, *options, "--dpi", "60", "--out", str(out)]) == 0
    assert_png(out)
    assert capsys.readouterr().out.startswith(f"saved {kind} (")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plot", "heatmap", "--dim", "8,16"], "heatmap takes one --dim. Received: 8,16"),
        (["plot", "spectrum", "--len", "5"], "--len does not apply to the spectrum plot"),
        (["plot", "heatmap", "--base", "100"], "--base applies to the distance plot only"),
        (["plot", "heatmap", "--dim", "7"], "d must be even"),
        (["plot", "waves"], "invalid choice: 'waves'"),
        (["plot", "distance", "--base", "-1"], "a base must be a number > 0"),
    ],
)
def test_cli_plot_errors(tmp_path, capsys, argv, message):
    assert cli.main([*argv, "--out", str(tmp_path / "x.png")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "draw",
    [
        lambda: plots.plot_heatmap(8, 64, code="binary"),
        lambda: plots.plot_long_distance(8, 5000, min_separation=100),
        lambda: plots.plot_normalized((3, 4, 10)),
        lambda: plots.plot_rope_scores(16, 12),
        lambda: plots.plot_alibi(6, 10),
        lambda: plots.plot_timestep_embedding(16, 20),
    ],
    ids=["binary-heatmap", "long-distance", "normalized", "rope", "alibi", "timesteps"],
)
def test_other_figures(tmp_path, draw):
    fig = draw()
    fig.savefig(tmp_path / "figure.png", dpi=50)
    assert_png(tmp_path / "figure.png")


def test_figures_show_the_library_numbers():
    fig = plots.plot_heatmap(16, 10)
    import pe_core

    shown = fig.axes[0].images[0].get_array()
    assert_close(shown, pe_core.encode(range(10), 16), atol=1e-6, rtol=1e-7)
    fig = plots.plot_similarity_by_distance((16,), (10000.0,), max_distance=20)
    from pe_core.analysis import similarity_by_distance

    drawn = fig.axes[0].lines[0].get_ydata()
    assert_close(drawn, similarity_by_distance(16, max_distance=20), atol=0, rtol=1e-7)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: plots.plot_heatmap(8, 10, code="gray"), ValueError, "Unknown code 'gray'"),
        (lambda: plots.plot_heatmap(8, 10, "fairseq", code="binary"), ValueError, "sinusoidal"),
        (lambda: plots.plot_heatmap(8, 0), ValueError, "length must be an integer >= 1"),
        (lambda: plots.plot_similarity(8, 10, metric="l1"), ValueError, "Unknown metric 'l1'"),
        (lambda: plots.plot_similarity_by_distance((), (1.0,)), ValueError, "must not be empty"),
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_missing_matplotlib_names_the_extra(tmp_path):
    """Without matplotlib, importing pe_core.plots works and drawing says what to install."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["matplotlib"] = None  # as if it were not installed
        import pe_core.plots
        try:
            pe_core.plots.plot_heatmap(8, 10)
        except ImportError as exc:
            print("plots:", exc)
        from pe_core import cli
        status = cli.main(["plot", "heatmap", "--out", {str(tmp_path / "x.png")!r}])
        print("status:", status)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
        check=True,
    )
    assert "plots: pe_core.plots needs matplotlib: pip install 'pe-core[plot]'" in result.stdout
    assert "status: 2" in result.stdout
    assert "pip install 'pe-core[plot]'" in result.stderr
    assert not (tmp_path / "x.png").exists()
