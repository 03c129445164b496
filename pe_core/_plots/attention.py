"""The figures of attention: RoPE scores and M-RoPE sections, ALiBi, Swin's index."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pe_core._plots.base import DIVERGING, integer_ticks, new_figure
from pe_core.alibi import alibi_bias, alibi_slopes
from pe_core.relative import relative_matrix
from pe_core.relative_index import relative_position_index
from pe_core.rope_nd import pair_axes
from pe_core.validation import positive_int


def draw_rope_scores(d: int, length: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, d))
    rotations = np.asarray(relative_matrix(np.arange(length), d, dtype="float64"))
    transposed = np.swapaxes(rotations, -1, -2)
    queries, keys = transposed @ q, transposed @ k
    scores = queries @ keys.T
    fig, (left, right) = new_figure(2, width=10.0, height=4.2)
    image = left.imshow(scores, cmap=DIVERGING, interpolation="nearest")
    left.set(xlabel="key position n", ylabel="query position m")
    left.set_title("score of rope(q, m) and rope(k, n)")
    fig.colorbar(image, ax=left)
    offsets = np.arange(-(length - 1), length)
    right.plot(-offsets, [np.mean(np.diagonal(scores, o)) for o in offsets], color="C0")
    right.set(xlabel="m − n", ylabel="score", title="every diagonal holds one value")
    right.grid(alpha=0.3)
    fig.suptitle(f"RoPE: scores depend on the distance alone (d={d})")
    return fig


def draw_rope_sections(sections: Sequence[int], interleaved: Sequence[int], base: float) -> Any:
    from matplotlib.colors import ListedColormap

    cases = [
        (f"contiguous {tuple(sections)}", pair_axes(sections)),
        (f"interleaved {tuple(interleaved)}", pair_axes(interleaved, "interleaved")),
    ]
    n = len(cases[0][1])
    if len(cases[1][1]) != n:
        raise ValueError(
            f"sections and interleaved must hold the same number of pairs. Received: "
            f"{sum(sections)} and {sum(interleaved)}"
        )
    k = max(max(axes) for _, axes in cases) + 1
    names = ["t", "h", "w"] if k == 3 else [f"axis {a}" for a in range(k)]
    colours = [f"C{a}" for a in range(k)]
    fig, (top, bottom) = new_figure(nrows=2, width=10.0, height=5.6, height_ratios=[1, 1.6])
    image = np.array([axes for _, axes in cases])
    top.imshow(image, cmap=ListedColormap(colours), vmin=-0.5, vmax=k - 0.5, aspect="auto")
    top.set_yticks(range(len(cases)), [label for label, _ in cases])
    top.set_xlabel(f"rotary pair j (of {n}); frequency base^(-2j/{2 * n}) falls to the right")
    top.set_title("M-RoPE: the coordinate each rotary pair follows")
    for a, name in enumerate(names):
        top.plot([], [], "s", color=colours[a], label=name)
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    wavelength = 2 * math.pi * base ** (np.arange(n) * 2 / (2 * n))
    rows: list[str] = []
    for label, axes in cases:
        for a, name in enumerate(names):
            row = len(rows)
            rows.append(f"{label.split()[0]}: {name}")
            chosen = wavelength[np.asarray(axes) == a]
            bottom.plot(chosen, np.full(chosen.shape, row), "|", color=colours[a], ms=12)
    bottom.set_xscale("log")
    bottom.set_yticks(range(len(rows)), rows)
    bottom.invert_yaxis()
    bottom.set_xlabel(f"wavelength 2π/ω_j in positions (base {base:g})")
    bottom.set_title("the wavelengths each coordinate sees")
    bottom.grid(alpha=0.3, axis="x")
    return fig


def draw_alibi(n_heads: int, length: int) -> Any:
    slopes = alibi_slopes(positive_int(n_heads, "n_heads"))
    biases = np.asarray(alibi_bias(length, length, n_heads, dtype="float64"))
    bias = np.where(np.isfinite(biases[0]), biases[0], np.nan)  # the mask: blank
    fig, (left, right) = new_figure(2, width=10.0, height=4.2)
    image = left.imshow(bias, cmap="magma", interpolation="nearest")
    left.set(xlabel="key position j", ylabel="query position i")
    left.set_title(f"head 0 (slope {slopes[0]:g}); masked above the diagonal")
    integer_ticks(left)
    fig.colorbar(image, ax=left)
    distance = np.arange(length)
    for h, slope in enumerate(slopes):
        last_row = biases[h, -1, ::-1]  # query length-1 against keys length-1 .. 0
        right.plot(distance, last_row, label=f"head {h}: slope {slope:.4g}")
    right.set(xlabel="distance i − j", ylabel="bias added to the score", title="one slope per head")
    right.legend(fontsize="x-small", ncols=2)
    right.grid(alpha=0.3)
    fig.suptitle(f"ALiBi: a linear penalty on distance ({n_heads} heads)")
    return fig


def draw_swin_index(side: int, prefix_tokens: int) -> Any:
    index = np.asarray(relative_position_index(side, prefix_tokens=prefix_tokens))
    n = index.shape[0]
    fig, ax = new_figure(1, width=6.4, height=5.6)
    image = ax.imshow(index, cmap="viridis", interpolation="nearest")
    for i in range(n):
        for j in range(n):
            color = "k" if index[i, j] > 0.6 * index.max() else "w"  # legible on yellow
            ax.text(j, i, str(index[i, j]), ha="center", va="center", fontsize=7, color=color)
    ax.set(xlabel="key token s = r' W + c'", ylabel="query token t = r W + c")
    integer_ticks(ax)
    fig.colorbar(image, ax=ax, label="row of the learned table")
    cls = " and a class token" if prefix_tokens else ""
    ax.set_title(f"Swin's relative position index: a {side} x {side} window{cls}")
    return fig
