"""Pictures of positional encodings, drawn from the library's own numbers.

Every function returns a :class:`matplotlib.figure.Figure` (made without ``pyplot``,
so no display or global state is involved); save it with ``fig.savefig(path)``.
matplotlib is imported when a function is called, never by ``import pe_core.plots``;
without it the call raises :class:`ImportError` naming the extra to install
(``pip install 'pe-core[plot]'``).

* :func:`plot_heatmap`: the encoding as a positions x features image (or the
  binary code);
* :func:`plot_similarity`: the position x position similarity matrix;
* :func:`plot_grid_similarity`: the similarity of one patch to every patch of a 2-D grid;
* :func:`plot_similarity_by_distance`: similarity against distance for several ``d``
  and bases;
* :func:`plot_spectrum`: the wavelength of every sin/cos pair;
* :func:`plot_long_distance`: the cosine similarity over a long range, with the
  near-collision :func:`~pe_core.analysis.resolution_report` finds;
* :func:`plot_normalized`: positions normalized to [0, 1] for several lengths;
* :func:`plot_rope_scores`: RoPE attention scores, which depend on ``m - n`` alone;
* :func:`plot_rope_sections`: which rotary pairs follow t, h and w in M-RoPE
  (:mod:`pe_core.rope_nd`), contiguous and interleaved;
* :func:`plot_alibi`: ALiBi's linear distance penalties;
* :func:`plot_fourier_features`: Gaussian Fourier features of a line, and their error
  against the plain float32 formula (:mod:`pe_core.fourier`).
* :func:`plot_resample_gap`: how far ``jax.image.resize`` and ``tf.image.resize`` are
  from PyTorch's ``F.interpolate`` on a position table, and :mod:`pe_core.resample`.

``pe-core plot heatmap|similarity|distance|spectrum ... --out FILE.png`` draws the
first four from the command line.

>>> from pe_core.plots import plot_spectrum
>>> fig = plot_spectrum(64)
>>> fig.axes[0].get_yscale()
'log'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pe_core._fourier import host_constants, reduced_turns, sin_cos
from pe_core.alibi import alibi_bias, alibi_slopes
from pe_core.analysis import (
    _check_int,
    _check_metric,
    resolution_report,
    similarity,
    similarity_by_distance,
    similarity_matrix,
)
from pe_core.codes import binary_encode, normalized_positions
from pe_core.encoding import encode
from pe_core.fourier import fourier_features
from pe_core.frequency import frequencies
from pe_core.nd import grid, grid_encoding
from pe_core.presets import resolve_spec
from pe_core.relative import relative_matrix
from pe_core.relative_index import relative_position_index
from pe_core.resample import resample_pos_embed
from pe_core.rope_nd import pair_axes
from pe_core.spec import Spec
from pe_core.timestep import timestep_embedding
from pe_core.typing import Interpolation, Metric, PresetLike
from pe_core_backends import get_namespace, is_installed

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_EXTRA",
    "plot_alibi",
    "plot_grid_similarity",
    "plot_heatmap",
    "plot_long_distance",
    "plot_normalized",
    "plot_resample_gap",
    "plot_rope_scores",
    "plot_rope_sections",
    "plot_similarity",
    "plot_similarity_by_distance",
    "plot_spectrum",
    "plot_swin_index",
    "plot_timestep_embedding",
    "resample_gaps",
]

#: What to install for plotting.
PLOT_EXTRA = "pip install 'pe-core[plot]'"

_DIVERGING = "RdBu_r"


def _figure(ncols: int = 1, *, width: float = 6.4, height: float = 4.4) -> Any:
    """A new Figure and its axes (without pyplot)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"pe_core.plots needs matplotlib: {PLOT_EXTRA}") from exc
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _integer_ticks(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _spec_label(spec: Spec) -> str:
    return spec.name or "custom spec"


def plot_heatmap(
    d: int = 128,
    length: int = 100,
    spec: Spec | PresetLike | None = None,
    *,
    code: Literal["sinusoidal", "binary"] = "sinusoidal",
) -> Figure:
    """The encoding of positions ``0 .. length-1`` as an image: one row per position,
    one column per feature.

    Parameters
    ----------
    d : int
        Number of features (bits for ``code="binary"``).
    length : int
        Number of positions.
    spec : Spec or str, optional
        Spec or preset name for the sinusoidal code; ``"vaswani"`` by default.
    code : {"sinusoidal", "binary"}
        The sinusoidal encoding, or the bits of the position
        (:func:`pe_core.codes.binary_encode`).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_heatmap(16, 20)
    >>> fig.axes[0].images[0].get_array().shape
    (20, 16)
    """
    length = _check_int("length", length, 1)
    if code == "sinusoidal":
        resolved = resolve_spec(spec)
        table = np.asarray(encode(np.arange(length), d, spec=resolved, dtype="float64"))
        title = f"Sinusoidal encoding ({_spec_label(resolved)}, d={d})"
        limits, cmap, label = (-1.0, 1.0), _DIVERGING, "value"
    elif code == "binary":
        if spec is not None:
            raise ValueError(f"spec applies to the sinusoidal code only. Received: {spec!r}")
        table = np.asarray(binary_encode(np.arange(length), _check_int("d", d, 1)), np.float64)
        title = f"Binary code ({d} bits)"
        limits, cmap, label = (0.0, 1.0), "Greys", "bit"
    else:
        raise ValueError(f"Unknown code {code!r}. Expected one of: binary, sinusoidal.")
    fig, ax = _figure()
    image = ax.imshow(
        table,
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=limits[0],
        vmax=limits[1],
        origin="upper",
    )
    ax.set_xlabel("feature")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label=label)
    return fig


def plot_similarity(
    d: int = 128,
    length: int = 100,
    spec: Spec | PresetLike | None = None,
    *,
    metric: Metric = "cosine",
) -> Figure:
    """The ``length x length`` similarity matrix of positions ``0 .. length-1``.

    For the sinusoidal code it is constant along every diagonal: the similarity of
    ``p`` and ``q`` depends on ``q - p`` alone.

    Parameters
    ----------
    d : int
        Number of features.
    length : int
        Number of positions.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.
    metric : {"cosine", "dot", "euclidean"}
        See :func:`pe_core.analysis.similarity`.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_similarity(32, 50, metric="euclidean")
    >>> fig.axes[0].get_title()
    'Euclidean distance between positions (vaswani, d=32)'
    """
    metric = _check_metric(metric)
    length = _check_int("length", length, 1)
    resolved = resolve_spec(spec)
    matrix = np.asarray(similarity(np.arange(length), d, resolved, metric=metric))
    fig, ax = _figure(width=5.6, height=4.6)
    image = ax.imshow(matrix, interpolation="nearest", origin="upper", cmap="viridis")
    names = {"cosine": "Cosine similarity", "dot": "Dot product", "euclidean": "Euclidean distance"}
    ax.set_title(f"{names[metric]} between positions ({_spec_label(resolved)}, d={d})")
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    fig.colorbar(image, ax=ax, label=metric)
    return fig


def plot_grid_similarity(
    shape: tuple[int, int] = (14, 14),
    d: int = 768,
    spec: Spec | PresetLike | None = "mae_2d",
    *,
    patches: Sequence[tuple[int, int]] = ((7, 7), (2, 3), (0, 13)),
) -> Figure:
    """Cosine similarity of one patch's N-D encoding with every patch of a 2-D grid.

    One panel per patch of ``patches``: cell ``(i, j)`` shows the cosine of
    ``encode(grid(shape), d, spec)`` at ``(i, j)`` with its value at the marked patch.

    Parameters
    ----------
    shape : (int, int)
        Grid size ``(h, w)``; 14 x 14 is ViT-B/16 at 224 pixels.
    d : int
        Number of features.
    spec : Spec or str
        A spec with ``axes == 2``; ``"mae_2d"`` by default.
    patches : sequence of (int, int)
        The reference patches ``(row, column)``.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_grid_similarity((6, 5), 32, patches=[(2, 3)])
    >>> image = fig.axes[0].images[0].get_array()
    >>> image.shape, round(float(image[2, 3]), 6)
    ((6, 5), 1.0)
    """
    resolved = resolve_spec(spec)
    if resolved.axes != 2:
        raise ValueError(f"spec must have axes == 2 (a 2-D grid). Received: axes={resolved.axes}")
    h, w = (_check_int("shape", n, 1) for n in shape)
    for row, col in patches:
        if not (0 <= row < h and 0 <= col < w):
            raise ValueError(f"patches must lie in the {h} x {w} grid. Received: {(row, col)}")
    table = np.asarray(encode(grid((h, w)), d, spec=resolved, dtype="float64")).reshape(-1, d)
    cosines = np.asarray(similarity_matrix(table))
    fig, axes = _figure(len(patches), width=3.4 * len(patches) + 1.0, height=3.6)
    axes = np.atleast_1d(axes)
    rows = [cosines[row * w + col].reshape(h, w) for row, col in patches]
    low = min(float(values.min()) for values in rows)  # one colour scale, low .. 1
    image = None
    for ax, (row, col), values in zip(axes, patches, rows, strict=True):
        image = ax.imshow(values, cmap="viridis", vmin=low, vmax=1.0, interpolation="nearest")
        ax.scatter([col], [row], marker="s", s=60, facecolors="none", edgecolors="red")
        ax.set_title(f"patch (row {row}, column {col})")
        ax.set_xlabel("column")
        ax.set_ylabel("row")
        _integer_ticks(ax)
    fig.colorbar(image, ax=list(axes), label="cosine similarity", shrink=0.85)
    fig.suptitle(f"Similarity of patch positions ({_spec_label(resolved)}, d={d}, {h} x {w} grid)")
    return fig


def plot_similarity_by_distance(
    dims: Sequence[int] = (16, 64, 256),
    bases: Sequence[float] = (100.0, 10000.0),
    *,
    max_distance: int = 200,
    spec: Spec | PresetLike | None = None,
    metric: Metric = "cosine",
) -> Figure:
    """Similarity of ``PE(p)`` and ``PE(p + k)`` against ``k``, one curve per
    ``(d, base)``.

    Parameters
    ----------
    dims : sequence of int
        Feature counts; one colour each.
    bases : sequence of float
        Values of :attr:`~pe_core.Spec.base`; one line style each.
    max_distance : int
        The largest distance ``k`` drawn.
    spec : Spec or str, optional
        The spec whose ``base`` is replaced; ``"vaswani"`` by default.
    metric : {"cosine", "dot", "euclidean"}
        See :func:`pe_core.analysis.similarity_by_distance`.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_similarity_by_distance((16, 64), (100.0, 10000.0), max_distance=50)
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['d=16, base=100', 'd=16, base=10000', 'd=64, base=100', 'd=64, base=10000']
    """
    metric = _check_metric(metric)
    max_distance = _check_int("max_distance", max_distance, 1)
    dims, bases = tuple(dims), tuple(bases)
    if not dims or not bases:
        raise ValueError(f"dims and bases must not be empty. Received: {dims!r}, {bases!r}")
    resolved = resolve_spec(spec)
    fig, ax = _figure(width=7.0)
    colours = [f"C{i}" for i in range(len(dims))]
    styles = ["-", "--", ":", "-."]
    k = np.arange(max_distance + 1)
    for colour, d in zip(colours, dims, strict=True):
        for j, base in enumerate(bases):
            values = similarity_by_distance(
                d, resolved.replace(base=float(base)), max_distance=max_distance, metric=metric
            )
            ax.plot(
                k,
                np.asarray(values),
                color=colour,
                linestyle=styles[j % len(styles)],
                label=f"d={d}, base={base:g}",
            )
    ax.set_xlabel("distance k")
    ax.set_ylabel(f"{metric} of PE(p), PE(p+k)")
    exponent = "2i/d" if resolved.denominator == "d" else "i/(d/2 − 1)"
    ax.set_title(f"Similarity against distance (frequencies base^(−{exponent}))")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.legend(fontsize="small", ncols=2 if len(dims) * len(bases) > 4 else 1)
    ax.grid(alpha=0.3)
    return fig


def plot_spectrum(d: int = 512, specs: Sequence[Spec | PresetLike] | None = None) -> Figure:
    """The wavelength ``2 pi / w_i`` (in positions) of every sin/cos pair ``i``.

    Parameters
    ----------
    d : int
        Number of features (``d // 2`` pairs).
    specs : sequence of Spec or str, optional
        Specs or preset names to compare; by default ``"vaswani"`` (exponent ``2i/d``)
        and ``"tensor2tensor"`` (exponent ``i/(d/2 - 1)``).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_spectrum(16, ["vaswani"])
    >>> [round(float(v), 2) for v in fig.axes[0].lines[0].get_ydata()[:2]]  # 2*pi, 2*pi*10**0.5
    [6.28, 19.87]
    """
    chosen = [resolve_spec(s) for s in (specs or ("vaswani", "tensor2tensor"))]
    if not chosen:
        raise ValueError("specs must not be empty.")
    fig, ax = _figure(width=7.0)
    markers = ["o", "s", "^", "v", "D"]
    for index, spec in enumerate(chosen):
        w = frequencies(d, spec)
        with np.errstate(divide="ignore"):
            wavelength = np.where(w > 0, 2 * math.pi / np.where(w > 0, w, 1.0), np.inf)
        ax.plot(
            np.arange(w.size),
            wavelength,
            marker=markers[index % len(markers)],
            markersize=3 if w.size > 64 else 4,
            linewidth=1,
            label=f"{_spec_label(spec)} (slowest {wavelength[-1]:,.0f})",
        )
    ax.set_yscale("log")
    ax.set_xlabel("pair i (features 2i and 2i+1 in the interleaved layout)")
    ax.set_ylabel("wavelength 2π/ω_i (positions)")
    ax.set_title(f"Wavelength of each sin/cos pair, d={d}")
    ax.axhline(2 * math.pi, color="0.6", linewidth=0.8, linestyle=":")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return fig


def plot_long_distance(
    d: int = 16,
    max_len: int = 100_000,
    spec: Spec | PresetLike | None = None,
    *,
    min_separation: int = 1000,
) -> Figure:
    """Cosine similarity of ``PE(0)`` and ``PE(k)`` for every ``k < max_len``, with
    the most similar far pair that :func:`~pe_core.analysis.resolution_report` finds.

    Parameters
    ----------
    d : int
        Number of features.
    max_len : int
        Distances ``0 .. max_len - 1`` are drawn.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.
    min_separation : int
        Distances from here on count as far.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_long_distance(8, 20_000, min_separation=500)
    >>> fig.axes[0].get_xscale()
    'linear'
    """
    resolved = resolve_spec(spec)
    report = resolution_report(d, resolved, max_len=max_len, min_separation=min_separation)
    cosine = np.asarray(similarity_by_distance(d, resolved, max_distance=max_len - 1))
    fig, ax = _figure(width=7.5)
    ax.plot(np.arange(max_len), cosine, linewidth=0.4, color="C0")
    ax.axvspan(0, min_separation, color="0.9", label=f"k < {min_separation:,}")
    if report.max_far_cosine_pair is not None:
        k = report.max_far_cosine_pair[1]
        ax.plot(
            [k],
            [report.max_far_cosine],
            marker="o",
            color="C3",
            linestyle="none",
            label=f"k = {k:,}: cosine {report.max_far_cosine:.4f}",
        )
    ax.set_xlabel("distance k")
    ax.set_ylabel("cosine of PE(p), PE(p+k)")
    ax.set_title(f"Long-distance similarity ({_spec_label(resolved)}, d={d})")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(fontsize="small", loc="lower right")
    return fig


def plot_normalized(lengths: Sequence[int] = (3, 4, 10, 50)) -> Figure:
    """Positions normalized to ``[0, 1]`` (:func:`pe_core.codes.normalized_positions`)
    for sequences of several lengths: the neighbours' gap ``1/(n-1)`` shrinks as the
    sequence grows.

    Parameters
    ----------
    lengths : sequence of int
        Sequence lengths, one row each.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_normalized((3, 10))
    >>> len(fig.axes[0].collections)
    2
    """
    lengths = tuple(_check_int("length", n, 2) for n in lengths)
    fig, ax = _figure(width=7.0, height=0.7 * len(lengths) + 1.4)
    for row, n in enumerate(lengths):
        values = np.asarray(normalized_positions(n), dtype=np.float64).reshape(-1)
        ax.scatter(values, np.full(values.shape, row), s=18 if n <= 20 else 8)
        ax.text(1.03, row, f"n={n}: gap {values[1] - values[0]:.3g}", va="center")
    ax.set_yticks(range(len(lengths)), [f"length {n}" for n in lengths])
    ax.set_xlim(-0.03, 1.35)
    ax.set_ylim(-0.6, len(lengths) - 0.4)
    ax.set_xlabel("normalized position pos / (n − 1)")
    ax.set_title("Normalized positions: the same neighbours, different distances")
    return fig


def plot_rope_scores(d: int = 64, length: int = 48, *, seed: int = 0) -> Figure:
    """RoPE attention scores for one query and one key placed at every pair of
    positions ``(m, n)``.

    RoPE rotates the query at position ``m`` by ``M_m^T = M_(-m)``, where ``M_m`` is
    :func:`pe_core.relative_matrix` (in the interleaved layout this is exactly
    :func:`pe_core.rope.apply_rope`). The score ``(M_m^T q) . (M_n^T k) = q^T M_(m-n) k``
    depends on ``m - n`` alone: the matrix is constant along its diagonals.

    Parameters
    ----------
    d : int
        Head dimension (even).
    length : int
        Number of positions.
    seed : int
        Seed of the random query and key.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_rope_scores(8, 10)
    >>> scores = fig.axes[0].images[0].get_array()
    >>> bool(abs(scores[0, 3] - scores[5, 8]) < 1e-9)
    True
    """
    length = _check_int("length", length, 2)
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, d))
    rotations = np.asarray(relative_matrix(np.arange(length), d, dtype="float64"))
    transposed = np.swapaxes(rotations, -1, -2)
    queries, keys = transposed @ q, transposed @ k
    scores = queries @ keys.T
    fig, (left, right) = _figure(2, width=10.0, height=4.2)
    image = left.imshow(scores, cmap=_DIVERGING, interpolation="nearest")
    left.set_xlabel("key position n")
    left.set_ylabel("query position m")
    left.set_title("score of rope(q, m) and rope(k, n)")
    fig.colorbar(image, ax=left)
    offsets = np.arange(-(length - 1), length)
    right.plot(-offsets, [np.mean(np.diagonal(scores, o)) for o in offsets], color="C0")
    right.set_xlabel("m − n")
    right.set_ylabel("score")
    right.set_title("every diagonal holds one value")
    right.grid(alpha=0.3)
    fig.suptitle(f"RoPE: scores depend on the distance alone (d={d})")
    return fig


def plot_rope_sections(
    sections: Sequence[int] = (16, 24, 24),
    interleaved: Sequence[int] = (24, 20, 20),
    *,
    base: float = 1_000_000.0,
) -> Figure:
    """Which rotary pairs follow which coordinate in M-RoPE, and the wavelengths each
    coordinate gets (:func:`pe_core.rope_nd.pair_axes`).

    The top panel colours pair ``j`` (of ``rotary_dim / 2``) by its axis ``t``, ``h`` or
    ``w``: ``sections`` laid out contiguously (Qwen2-VL / Qwen2.5-VL ``mrope_section``)
    and ``interleaved`` (Qwen3-VL ``mrope_interleaved``). The bottom panel shows the
    wavelength ``2 pi / w_j`` of the pairs of every axis in both layouts: contiguous
    sections give ``t`` the fastest pairs and ``w`` the slowest; interleaving spreads
    every axis over the whole spectrum.

    Parameters
    ----------
    sections, interleaved : sequence of int
        Pairs per axis of the contiguous and of the interleaved layout (the same sum).
    base : float
        ``rope_theta`` of the wavelengths (Qwen2-VL's by default).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_rope_sections((2, 1, 1), (2, 1, 1))
    >>> fig.axes[0].images[0].get_array().tolist()
    [[0, 0, 1, 2], [0, 1, 2, 0]]
    """
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
    fig, placeholder = _figure(1, width=10.0, height=5.6)
    placeholder.remove()
    top, bottom = fig.subplots(2, 1, height_ratios=[1, 1.6])
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


def plot_alibi(n_heads: int = 8, length: int = 16) -> Figure:
    """ALiBi's bias ``-slope_h * (i - j)`` added to causal attention scores
    (:func:`pe_core.alibi.alibi_bias`).

    Parameters
    ----------
    n_heads : int
        Number of heads (slopes from :func:`pe_core.alibi.alibi_slopes`).
    length : int
        Number of positions.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_alibi(4, 8)
    >>> len(fig.axes[1].lines)
    4
    """
    length = _check_int("length", length, 2)
    slopes = alibi_slopes(_check_int("n_heads", n_heads, 1))
    biases = np.asarray(alibi_bias(length, length, n_heads, dtype="float64"))
    bias = np.where(np.isfinite(biases[0]), biases[0], np.nan)  # the mask: blank
    fig, (left, right) = _figure(2, width=10.0, height=4.2)
    image = left.imshow(bias, cmap="magma", interpolation="nearest")
    left.set_xlabel("key position j")
    left.set_ylabel("query position i")
    left.set_title(f"head 0 (slope {slopes[0]:g}); masked above the diagonal")
    _integer_ticks(left)
    fig.colorbar(image, ax=left)
    distance = np.arange(length)
    for h, slope in enumerate(slopes):
        last_row = biases[h, -1, ::-1]  # query length-1 against keys length-1 .. 0
        right.plot(distance, last_row, label=f"head {h}: slope {slope:.4g}")
    right.set_xlabel("distance i − j")
    right.set_ylabel("bias added to the score")
    right.set_title("one slope per head")
    right.legend(fontsize="x-small", ncols=2)
    right.grid(alpha=0.3)
    fig.suptitle(f"ALiBi: a linear penalty on distance ({n_heads} heads)")
    return fig


def plot_swin_index(window_size: int = 3, *, prefix_tokens: int = 0) -> Figure:
    """Swin's relative position index of a window, each cell labelled with its table
    row (:func:`pe_core.relative_index.relative_position_index`).

    Parameters
    ----------
    window_size : int
        Side of the square window (1 to 6: the labels must stay legible).
    prefix_tokens : int
        0 (Swin) or 1 (BEiT's class token first).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_swin_index(2)
    >>> len(fig.axes[0].texts)
    16
    """
    side = _check_int("window_size", window_size, 1)
    if side > 6:
        raise ValueError(f"window_size must be at most 6 (legible labels). Received: {side}")
    index = np.asarray(relative_position_index(side, prefix_tokens=prefix_tokens))
    n = index.shape[0]
    fig, ax = _figure(1, width=6.4, height=5.6)
    image = ax.imshow(index, cmap="viridis", interpolation="nearest")
    for i in range(n):
        for j in range(n):
            color = "k" if index[i, j] > 0.6 * index.max() else "w"  # legible on yellow
            ax.text(j, i, str(index[i, j]), ha="center", va="center", fontsize=7, color=color)
    ax.set_xlabel("key token s = r' W + c'")
    ax.set_ylabel("query token t = r W + c")
    _integer_ticks(ax)
    fig.colorbar(image, ax=ax, label="row of the learned table")
    cls = " and a class token" if prefix_tokens else ""
    ax.set_title(f"Swin's relative position index: a {side} x {side} window{cls}")
    return fig


def plot_fourier_features(
    n_features: int = 32, scale: float = 4.0, *, n_points: int = 256, seed: int = 0
) -> Figure:
    """Random Fourier features of points on a line (:func:`pe_core.fourier_features`) and
    the error of the float32 computations against the float64 formula, by angle size.

    Parameters
    ----------
    n_features : int
        Gaussian frequencies ``f ~ N(0, scale**2)``, drawn with ``seed`` and sorted by
        magnitude (the image shows ``2 * n_features`` feature columns).
    scale : float
        Their standard deviation, in cycles per unit.
    n_points : int
        Points in ``[0, 1]``.
    seed : int
        The frequencies' random seed.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_fourier_features(8, 2.0, n_points=16)
    >>> len(fig.axes[1].lines)
    3
    """
    n_features = _check_int("n_features", n_features, 1)
    n_points = _check_int("n_points", n_points, 2)
    rng = np.random.default_rng(seed)
    freqs = (
        np.sort(np.abs(rng.normal(size=n_features)))
        * scale
        * np.sign(rng.uniform(-1, 1, n_features))
    )
    x = np.linspace(0.0, 1.0, n_points)
    features = np.asarray(fourier_features(x, freqs, dtype="float64"))
    fig, (left, right) = _figure(2, width=10.5, height=4.2)
    image = left.imshow(features, aspect="auto", cmap="RdBu_r", interpolation="nearest")
    left.set_xlabel(f"feature: {n_features} sines | {n_features} cosines, by |f|")
    left.set_ylabel(f"point x in [0, 1] ({n_points} points)")
    left.set_title(f"sin, cos of 2π x f, f ~ N(0, {scale:g}²)")
    fig.colorbar(image, ax=left)
    # the error against the float64 formula of float32 coordinates, per size of x f
    turns_sizes = np.logspace(-1, 5, 25)
    coords = np.random.default_rng(seed + 1).uniform(0.5, 1.0, 512).astype(np.float32)
    xp = get_namespace("numpy")
    curves: dict[str, list[float]] = {"textbook float32": [], "pe_core float32": []}
    curves["pe_core, host (float64, rounded)"] = []
    for size in turns_sizes:
        f = np.array([size * (1 + 1 / 3)])
        angle = 2 * np.pi * coords.astype(np.float64)[:, None] * f
        exact = np.sin(angle)
        plain = np.sin(np.float32(2 * np.pi) * (coords[:, None] * np.float32(f[0])))
        turns = reduced_turns(
            xp, coords[:, None], host_constants(f[None], "float32"), "float32", host=True
        )
        ours = sin_cos(xp, turns)[0]
        host = np.asarray(fourier_features(coords, f))[:, :1]
        for label, values in zip(curves, (plain, ours, host), strict=True):
            curves[label].append(float(np.abs(values.astype(np.float64) - exact).max()))
    for label, errors in curves.items():
        right.loglog(turns_sizes, np.maximum(errors, 1e-9), marker=".", label=label)
    right.set_xlabel("x f in turns (the angle / 2π)")
    right.set_ylabel("largest error of sin")
    right.set_title("the angle reduced in turns keeps float32 accurate")
    right.legend(fontsize="small")
    right.grid(alpha=0.3, which="both")
    fig.suptitle("Fourier features")
    return fig


def plot_timestep_embedding(embedding_dim: int = 256, n_steps: int = 1000) -> Figure:
    """The diffusion timestep embedding (:func:`pe_core.timestep_embedding`, SD's and
    Flux's settings ``flip_sin_to_cos=True, downscale_freq_shift=0``) and the error of
    the usual float32 formula.

    Parameters
    ----------
    embedding_dim : int
        Features per timestep (even, >= 4).
    n_steps : int
        Timesteps ``0 .. n_steps - 1`` (>= 2).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_timestep_embedding(32, 50)
    >>> len(fig.axes[1].lines)
    3
    """
    dim = _check_int("embedding_dim", embedding_dim, 4)
    steps = _check_int("n_steps", n_steps, 2)
    kw: dict[str, Any] = {"flip_sin_to_cos": True, "downscale_freq_shift": 0}
    t = np.arange(steps)
    table = np.asarray(timestep_embedding(t, dim, **kw))
    fig, (left, right) = _figure(2, width=11.0, height=4.4)
    image = left.imshow(table, aspect="auto", cmap=_DIVERGING, vmin=-1, vmax=1)
    left.set_xlabel(f"feature ([cos | sin], {dim // 2} frequencies each)")
    left.set_ylabel("timestep t")
    left.set_title("timestep_embedding(t, dim, flip_sin_to_cos=True, shift=0)")
    fig.colorbar(image, ax=left)
    half = dim // 2
    w32 = np.exp(
        np.float32(-math.log(10000)) * np.arange(half, dtype=np.float32) / np.float32(half)
    )
    for label, times, scale in (
        ("float32 formula, integer t, scale=1", t, 1.0),
        ("float32 formula, t / n_steps, scale=1000", t / steps, 1000.0),
    ):
        exact = np.asarray(timestep_embedding(times, dim, scale=scale, dtype="float64", **kw))
        args = np.float32(scale) * (times.astype(np.float32)[:, None] * w32[None, :])
        usual = np.concatenate([np.cos(args), np.sin(args)], -1).astype(np.float64)
        right.semilogy(t, np.maximum(np.abs(usual - exact).max(-1), 1e-9), label=label)
    ours = np.asarray(timestep_embedding(t / steps, dim, scale=1000.0, **kw), np.float64)
    exact = np.asarray(timestep_embedding(t / steps, dim, scale=1000.0, dtype="float64", **kw))
    right.semilogy(
        t, np.maximum(np.abs(ours - exact).max(-1), 1e-9), label="pe_core, float32, scale=1000"
    )
    right.set_xlabel("timestep index")
    right.set_ylabel("largest error over the features")
    right.set_title("error against the exact value")
    right.legend(fontsize="x-small")
    right.grid(alpha=0.3)
    fig.suptitle("Diffusion timestep embeddings")
    return fig


#: The settings :func:`resample_gaps` compares: (label, mode, grow).
RESAMPLE_SETTINGS: tuple[tuple[str, Interpolation, bool], ...] = (
    ("bicubic, up", "bicubic", True),
    ("bicubic, down", "bicubic", False),
    ("bilinear, up", "bilinear", True),
    ("bilinear, down", "bilinear", False),
)


#: The frameworks whose own resize :func:`resample_gaps` measures, with its label.
RESIZERS = (
    # (backend, label, pe_core measured there too, its bicubic gap mapped per patch)
    ("torch", "F.interpolate float32", False, False),
    ("jax", "jax.image.resize", True, True),
    ("tensorflow", "tf.image.resize", True, False),
)


def resample_gaps(
    old: int = 14,
    new: int = 32,
    channels: int = 768,
    backends: Sequence[str] | None = None,
) -> tuple[dict[str, dict[str, float]], np.ndarray | None]:
    """The numbers of :func:`plot_resample_gap`: for each method, the largest
    ``|value - reference| / max|reference|`` in each of :data:`RESAMPLE_SETTINGS`
    (``antialias=False``), and the bicubic upsampling gap of ``jax.image.resize`` per
    output patch (``None`` without JAX).

    The table is the MAE 2-D sin-cos table of an ``old x old`` grid
    (:func:`pe_core.grid_encoding`), resized to ``new x new`` ("up") and back from
    ``new x new`` to ``old x old`` ("down"). The reference is PyTorch's ``F.interpolate``
    in float64, which pe_core's NumPy float64 resample equals (the tests check it to
    1e-13). ``backends`` (of ``"torch"``, ``"jax"``, ``"tensorflow"``) are the frameworks
    measured, by default every one installed.

    >>> gaps, _ = resample_gaps(4, 6, 8, backends=())
    >>> gaps["pe_core, NumPy float32"]["bicubic, up"] < 1e-6
    True
    """
    small = np.asarray(grid_encoding(channels, (old, old), dtype="float64"))[None]
    big = resample_pos_embed(small, new, num_prefix_tokens=0)  # a smooth new x new table
    gaps: dict[str, dict[str, float]] = {}
    patch_gap = None

    def record(method: str, setting: str, value: np.ndarray, reference: np.ndarray) -> None:
        gap = float(np.abs(value - reference).max() / np.abs(reference).max())
        gaps.setdefault(method, {})[setting] = gap

    for setting, mode, grow in RESAMPLE_SETTINGS:
        source, side, size = (small, old, new) if grow else (big, new, old)
        reference = np.asarray(
            resample_pos_embed(source, size, num_prefix_tokens=0, interpolation=mode)
        )
        source32 = source.astype(np.float32)
        ours = resample_pos_embed(source32, size, num_prefix_tokens=0, interpolation=mode)
        record("pe_core, NumPy float32", setting, np.asarray(ours, np.float64), reference)
        grid_ref = reference.reshape(1, size, size, channels)
        for backend, label, ours_there, mapped in RESIZERS:
            if not (is_installed(backend) if backends is None else backend in backends):
                continue
            xp = get_namespace(backend)
            image = xp.asarray(source32.reshape(1, side, side, channels))
            theirs = xp.to_numpy(xp.image_resize(image, (size, size), mode, False))
            record(label, setting, theirs.astype(np.float64), grid_ref)
            if mapped and setting == "bicubic, up":
                patch_gap = np.abs(theirs - grid_ref)[0].max(axis=-1) / np.abs(grid_ref).max()
            if ours_there:
                placed = resample_pos_embed(
                    xp.asarray(source32), size, num_prefix_tokens=0, interpolation=mode
                )
                record(f"pe_core on {backend}", setting, xp.to_numpy(placed), reference)
    return gaps, patch_gap


def plot_resample_gap(
    old: int = 14, new: int = 32, channels: int = 768, backends: Sequence[str] | None = None
) -> Figure:
    """How far ``jax.image.resize`` and ``tf.image.resize`` are from PyTorch's
    ``F.interpolate`` when a learned position table is resized, and
    :func:`pe_core.resample_pos_embed` on the same frameworks (:func:`resample_gaps`).

    Left: the largest gap, relative to the table's magnitude, per method and setting
    (log scale). Right: the bicubic upsampling gap of ``jax.image.resize`` per output
    patch (when JAX is measured). ``backends`` as for :func:`resample_gaps`.

    Examples
    --------
    >>> fig = plot_resample_gap(4, 6, 8, backends=())
    >>> fig.axes[0].get_yscale()
    'log'
    """
    old = _check_int("old", old, 2)
    new = _check_int("new", new, old + 1)
    channels = _check_int("channels", channels, 2)
    gaps, patch_gap = resample_gaps(old, new, channels, backends)
    fig, (left, right) = _figure(2, width=11.0, height=4.4)
    methods = list(gaps)
    width = 0.8 / len(methods)
    floor = 1e-9  # exact zeros drawn at the floor of the log scale
    for i, method in enumerate(methods):
        values = [max(gaps[method][label], floor) for label, _, _ in RESAMPLE_SETTINGS]
        offsets = np.arange(len(RESAMPLE_SETTINGS)) + (i - (len(methods) - 1) / 2) * width
        left.bar(offsets, values, width=width, label=method)
    left.set_yscale("log")
    left.set_xticks(np.arange(len(RESAMPLE_SETTINGS)))
    left.set_xticklabels([label for label, _, _ in RESAMPLE_SETTINGS])
    left.set_ylabel("max |x - torch float64| / max |torch float64|")
    left.set_title(f"{old}x{old} <-> {new}x{new}, {channels} channels, antialias off")
    left.legend(fontsize="x-small")
    left.grid(alpha=0.3, axis="y")
    if patch_gap is None:
        right.text(0.5, 0.5, "JAX not measured (not installed)", ha="center", va="center")
        right.set_axis_off()
    else:
        image = right.imshow(patch_gap, cmap="magma", interpolation="nearest")
        right.set_title("jax.image.resize, bicubic up: gap per patch")
        right.set_xlabel("patch column")
        right.set_ylabel("patch row")
        fig.colorbar(image, ax=right, label="max over channels / max |table|")
    fig.suptitle("Resizing a position table: other frameworks' resize vs PyTorch's")
    return fig
