"""What every figure shares: a Figure without pyplot, integer ticks, a spec's label."""

from __future__ import annotations

from typing import Any

from pe_core.spec import Spec

#: What to install for plotting.
PLOT_EXTRA = "pip install 'pe-core[plot]'"

DIVERGING = "RdBu_r"


def new_figure(
    ncols: int = 1, *, nrows: int = 1, width: float = 6.4, height: float = 4.4, **kwargs: Any
) -> Any:
    """A new Figure and its axes (without pyplot); ``kwargs`` go to ``Figure.subplots``."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"pe_core.plots needs matplotlib: {PLOT_EXTRA}") from exc
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(nrows, ncols, **kwargs)


def integer_ticks(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def spec_label(spec: Spec) -> str:
    return spec.name or "custom spec"
