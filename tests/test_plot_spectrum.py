"""The spectrum figure shows what differs between the specs it compares.

On a log scale the wavelengths of ``2i/d`` (the paper) and ``i/(d/2 - 1)``
(tensor2tensor) lie on top of each other: the figure's second panel draws their
difference, which the first cannot show.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pe_core
from pe_core import cli, plots

pytest.importorskip("matplotlib")


def test_the_default_figure_draws_the_difference() -> None:
    fig = plots.plot_spectrum(512)
    top, below = fig.axes
    vaswani, t2t = (np.asarray(line.get_ydata()) for line in top.lines[:2])
    assert not np.array_equal(vaswani, t2t)
    np.testing.assert_allclose(vaswani, 2 * math.pi / pe_core.frequencies(512, "vaswani"))
    np.testing.assert_allclose(t2t, 2 * math.pi / pe_core.frequencies(512, "tensor2tensor"))
    # what the first panel cannot show: t2t's wavelengths are longer by 10000^(i/255 - i/256)
    difference = np.asarray(below.lines[0].get_ydata())
    i = np.arange(256)
    np.testing.assert_allclose(difference, 100 * (10000.0 ** (i / 255 - i / 256) - 1), atol=1e-9)
    labels = [line.get_label() for line in below.lines]
    assert labels == ["tensor2tensor (up to 3.7%)", "vaswani"]
    # the lines are told apart by style, not only by colour
    assert top.lines[0].get_linestyle() != top.lines[1].get_linestyle()
    assert top.lines[0].get_marker() != top.lines[1].get_marker()


def test_identical_specs_say_they_do_not_differ() -> None:
    fig = plots.plot_spectrum(64, ["fairseq", "tensor2tensor"])
    below = fig.axes[1]
    assert np.all(np.asarray(below.lines[0].get_ydata()) == 0)
    assert below.lines[0].get_label() == "tensor2tensor (up to 0%)"


def test_one_spec_one_panel() -> None:
    assert len(plots.plot_spectrum(16, ["vaswani"]).axes) == 1


def test_the_command_line_draws_both_panels(tmp_path, capsys) -> None:
    out = tmp_path / "spectrum.png"
    assert cli.main(["plot", "spectrum", "--dim", "64", "--dpi", "50", "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
