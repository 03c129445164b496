"""``pe-core plot``: draw one of :mod:`pe_core.plots`' figures and save it to ``--out``.

matplotlib is imported when a figure is drawn (by :mod:`pe_core.plots`), never by
importing this module; without it the command is a one-line error naming the extra.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pe_core._cli.output import WriteError, check_out_path
from pe_core.plots import plot_heatmap, plot_similarity, plot_similarity_by_distance, plot_spectrum
from pe_core.presets import DEFAULT_PRESET


def draw_heatmap(args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    d, length = dims[0], args.length or 100
    return plot_heatmap(d, length, args.spec), f"d={d}, len={length}"


def draw_similarity(args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    d, length = dims[0], args.length or 100
    fig = plot_similarity(d, length, args.spec, metric=args.metric)
    return fig, f"d={d}, len={length}, metric={args.metric}"


def draw_distance(args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    bases = args.base or (100.0, 10000.0)
    length = args.length or 200
    fig = plot_similarity_by_distance(
        dims, bases, max_distance=length, spec=args.spec, metric=args.metric
    )
    what = (
        f"d={','.join(map(str, dims))}, base={','.join(f'{b:g}' for b in bases)}, "
        f"max distance={length}, metric={args.metric}"
    )
    return fig, what


def draw_spectrum(args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    d = dims[0]
    return plot_spectrum(d, None if args.spec is None else [args.spec]), f"d={d}"


@dataclass(frozen=True)
class PlotKind:
    """One figure of ``pe-core plot``: how to draw it and which options it takes."""

    #: ``draw(args, dims) -> (figure, what was drawn)``.
    draw: Callable[[argparse.Namespace, tuple[int, ...]], tuple[Any, str]]
    dims: tuple[int, ...]  # --dim when not given
    spec: str  # what the figure shows without --spec
    several_dims: bool = False  # --dim may list several
    bases: bool = False  # takes --base
    positions: bool = True  # takes --len


#: The figures ``pe-core plot`` draws, by name.
PLOTS: dict[str, PlotKind] = {
    "heatmap": PlotKind(draw_heatmap, (128,), DEFAULT_PRESET),
    "similarity": PlotKind(draw_similarity, (128,), DEFAULT_PRESET),
    "distance": PlotKind(
        draw_distance, (16, 64, 256), DEFAULT_PRESET, several_dims=True, bases=True
    ),
    "spectrum": PlotKind(draw_spectrum, (512,), "vaswani, tensor2tensor", positions=False),
}

#: The figures ``pe-core plot`` draws.
PLOT_KINDS: tuple[str, ...] = tuple(PLOTS)


def run_plot(args: argparse.Namespace) -> int:
    """Run ``pe-core plot`` with the parsed ``args``; return the exit status (0)."""
    kind: str = args.kind
    plot = PLOTS[kind]
    check_out_path(args.out)
    if args.base is not None and not plot.bases:  # refuse the options kind does not take
        raise ValueError(f"--base applies to the distance plot only. Received: {kind}")
    if args.length is not None and not plot.positions:
        raise ValueError(f"--len does not apply to the {kind} plot (it has no positions).")
    if not plot.several_dims and args.dim is not None and len(args.dim) != 1:
        raise ValueError(f"{kind} takes one --dim. Received: {','.join(map(str, args.dim))}")
    fig, what = plot.draw(args, args.dim or plot.dims)
    spec_name = args.spec.name if args.spec is not None else plot.spec
    try:
        fig.savefig(args.out, dpi=args.dpi)
    except OSError as exc:
        raise WriteError(f"could not write {args.out!r}: {exc.strerror or exc}") from None
    print(f"saved {kind} ({what}, spec={spec_name}) -> {args.out}")
    return 0
