"""The figures of encodings: tables, similarities, wavelengths, normalized positions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pe_core import analysis
from pe_core._plots.base import DIVERGING, integer_ticks, new_figure, spec_label
from pe_core.codes import binary_encode, normalized_positions
from pe_core.encoding import encode
from pe_core.frequency import frequencies
from pe_core.nd import grid
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import Metric, PresetLike
from pe_core.validation import positive_int

_METRIC_NAMES = {
    "cosine": "Cosine similarity",
    "dot": "Dot product",
    "euclidean": "Euclidean distance",
}


def draw_heatmap(d: int, length: int, spec: Spec | PresetLike | None, code: str) -> Any:
    if code == "sinusoidal":
        resolved = resolve_spec(spec)
        table = np.asarray(encode(np.arange(length), d, spec=resolved, dtype="float64"))
        title = f"Sinusoidal encoding ({spec_label(resolved)}, d={d})"
        limits, cmap, label = (-1.0, 1.0), DIVERGING, "value"
    elif code == "binary":
        if spec is not None:
            raise ValueError(f"spec applies to the sinusoidal code only. Received: {spec!r}")
        table = np.asarray(binary_encode(np.arange(length), positive_int(d, "d")), np.float64)
        title = f"Binary code ({d} bits)"
        limits, cmap, label = (0.0, 1.0), "Greys", "bit"
    else:
        raise ValueError(f"Unknown code {code!r}. Expected one of: binary, sinusoidal.")
    fig, ax = new_figure()
    kw = {"aspect": "auto", "interpolation": "nearest", "cmap": cmap, "origin": "upper"}
    image = ax.imshow(table, vmin=limits[0], vmax=limits[1], **kw)
    ax.set(xlabel="feature", ylabel="position", title=title)
    fig.colorbar(image, ax=ax, label=label)
    return fig


def draw_similarity(d: int, length: int, spec: Spec | PresetLike | None, metric: Metric) -> Any:
    resolved = resolve_spec(spec)
    matrix = np.asarray(analysis.similarity(np.arange(length), d, resolved, metric=metric))
    fig, ax = new_figure(width=5.6, height=4.6)
    image = ax.imshow(matrix, interpolation="nearest", origin="upper", cmap="viridis")
    title = f"{_METRIC_NAMES[metric]} between positions ({spec_label(resolved)}, d={d})"
    ax.set(title=title, xlabel="position q", ylabel="position p")
    fig.colorbar(image, ax=ax, label=metric)
    return fig


def draw_grid_similarity(
    shape: tuple[int, int], d: int, spec: Spec | PresetLike | None, patches: Sequence[Any]
) -> Any:
    resolved = resolve_spec(spec)
    if resolved.axes != 2:
        raise ValueError(f"spec must have axes == 2 (a 2-D grid). Received: axes={resolved.axes}")
    h, w = (positive_int(n, "shape") for n in shape)
    for row, col in patches:
        if not (0 <= row < h and 0 <= col < w):
            raise ValueError(f"patches must lie in the {h} x {w} grid. Received: {(row, col)}")
    table = np.asarray(encode(grid((h, w)), d, spec=resolved, dtype="float64")).reshape(-1, d)
    cosines = np.asarray(analysis.similarity_matrix(table))
    fig, axes = new_figure(len(patches), width=3.4 * len(patches) + 1.0, height=3.6)
    axes = np.atleast_1d(axes)
    rows = [cosines[row * w + col].reshape(h, w) for row, col in patches]
    low = min(float(values.min()) for values in rows)  # one colour scale, low .. 1
    image = None
    for ax, (row, col), values in zip(axes, patches, rows, strict=True):
        image = ax.imshow(values, cmap="viridis", vmin=low, vmax=1.0, interpolation="nearest")
        ax.scatter([col], [row], marker="s", s=60, facecolors="none", edgecolors="red")
        ax.set(title=f"patch (row {row}, column {col})", xlabel="column", ylabel="row")
        integer_ticks(ax)
    fig.colorbar(image, ax=list(axes), label="cosine similarity", shrink=0.85)
    fig.suptitle(f"Similarity of patch positions ({spec_label(resolved)}, d={d}, {h} x {w} grid)")
    return fig


def draw_similarity_by_distance(
    dims: tuple[int, ...],
    bases: tuple[float, ...],
    max_distance: int,
    spec: Spec | PresetLike | None,
    metric: Metric,
) -> Any:
    resolved = resolve_spec(spec)
    fig, ax = new_figure(width=7.0)
    styles = ["-", "--", ":", "-."]
    k = np.arange(max_distance + 1)
    for i, d in enumerate(dims):
        for j, base in enumerate(bases):
            values = analysis.similarity_by_distance(
                d, resolved.replace(base=float(base)), max_distance=max_distance, metric=metric
            )
            style = {"color": f"C{i}", "linestyle": styles[j % len(styles)]}
            ax.plot(k, np.asarray(values), label=f"d={d}, base={base:g}", **style)
    exponent = "2i/d" if resolved.denominator == "d" else "i/(d/2 − 1)"
    ax.set(xlabel="distance k", ylabel=f"{metric} of PE(p), PE(p+k)")
    ax.set_title(f"Similarity against distance (frequencies base^(−{exponent}))")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.legend(fontsize="small", ncols=2 if len(dims) * len(bases) > 4 else 1)
    ax.grid(alpha=0.3)
    return fig


def _wavelengths(d: int, spec: Spec) -> np.ndarray:
    w = frequencies(d, spec)
    with np.errstate(divide="ignore"):
        return np.where(w > 0, 2 * math.pi / np.where(w > 0, w, 1.0), np.inf)


def draw_spectrum(d: int, chosen: list[Spec]) -> Any:
    """The wavelengths of each spec (top) and, below, how far each differs from the
    first spec's, in percent: on a log scale schedules like ``2i/d`` and
    ``i/(d/2 - 1)`` lie on top of each other, so the difference gets its own panel."""
    compare = len(chosen) > 1
    panels: dict[str, Any] = {"nrows": 2, "height": 6.2, "sharex": True, "height_ratios": (3, 2)}
    fig, axes = new_figure(width=7.0, squeeze=False, **(panels if compare else {}))
    ax, axes = axes[0, 0], axes[:, 0]
    markers = ["o", "s", "^", "v", "D"]
    styles = ["-", "--", "-.", ":"]
    waves = [_wavelengths(d, spec) for spec in chosen]  # d // 2 pairs for every spec
    for index, (spec, wavelength) in enumerate(zip(chosen, waves, strict=True)):
        every = max(1, wavelength.size // 16)  # the specs' markers side by side, not stacked
        line = {"linewidth": 1.2, "linestyle": styles[index % len(styles)], "color": f"C{index}"}
        marks = {"marker": markers[index % len(markers)], "markersize": 4}
        marks["markevery"] = (index * every // len(chosen), every)
        label = f"{spec_label(spec)} (slowest {wavelength[-1]:,.0f})"
        ax.plot(np.arange(wavelength.size), wavelength, label=label, **marks, **line)
        if index:  # below: the difference from the first spec's
            with np.errstate(invalid="ignore"):
                percent = 100.0 * (wavelength / waves[0] - 1.0)
            label = f"{spec_label(spec)} (up to {np.nanmax(np.abs(percent)):.2g}%)"
            axes[1].plot(np.arange(wavelength.size), percent, label=label, **line)
    ax.set_yscale("log")
    ax.set(ylabel="wavelength 2π/ω_i (positions)", title=f"Wavelength of each sin/cos pair, d={d}")
    ax.axhline(2 * math.pi, color="0.6", linewidth=0.8, linestyle=":")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    if compare:
        below = axes[1]
        below.axhline(0.0, color="C0", linewidth=1.0, label=spec_label(chosen[0]))
        below.set(ylabel=f"difference from {spec_label(chosen[0])} (%)")
        below.legend(fontsize="small")
        below.grid(alpha=0.3)
    axes[-1].set(xlabel="pair i (features 2i and 2i+1 in the interleaved layout)")
    return fig


def draw_long_distance(
    d: int, max_len: int, spec: Spec | PresetLike | None, min_separation: int
) -> Any:
    resolved = resolve_spec(spec)
    report = analysis.resolution_report(d, resolved, max_len=max_len, min_separation=min_separation)
    cosine = np.asarray(analysis.similarity_by_distance(d, resolved, max_distance=max_len - 1))
    fig, ax = new_figure(width=7.5)
    ax.plot(np.arange(max_len), cosine, linewidth=0.4, color="C0")
    ax.axvspan(0, min_separation, color="0.9", label=f"k < {min_separation:,}")
    if report.max_far_cosine_pair is not None:
        k = report.max_far_cosine_pair[1]
        label = f"k = {k:,}: cosine {report.max_far_cosine:.4f}"
        ax.plot([k], [report.max_far_cosine], marker="o", color="C3", linestyle="none", label=label)
    ax.set(xlabel="distance k", ylabel="cosine of PE(p), PE(p+k)", ylim=(-1.05, 1.05))
    ax.set_title(f"Long-distance similarity ({spec_label(resolved)}, d={d})")
    ax.legend(fontsize="small", loc="lower right")
    return fig


def draw_normalized(lengths: tuple[int, ...]) -> Any:
    fig, ax = new_figure(width=7.0, height=0.7 * len(lengths) + 1.4)
    for row, n in enumerate(lengths):
        values = np.asarray(normalized_positions(n), dtype=np.float64).reshape(-1)
        ax.scatter(values, np.full(values.shape, row), s=18 if n <= 20 else 8)
        ax.text(1.03, row, f"n={n}: gap {values[1] - values[0]:.3g}", va="center")
    ax.set_yticks(range(len(lengths)), [f"length {n}" for n in lengths])
    ax.set(xlim=(-0.03, 1.35), ylim=(-0.6, len(lengths) - 0.4))
    ax.set(xlabel="normalized position pos / (n − 1)")
    ax.set_title("Normalized positions: the same neighbours, different distances")
    return fig
