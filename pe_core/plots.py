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
* :func:`plot_spectrum`: the wavelength of every sin/cos pair, and how far other specs'
  wavelengths are from the first's;
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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from pe_core._plots import attention, encodings, precision
from pe_core._plots.base import PLOT_EXTRA
from pe_core._plots.precision import RESAMPLE_SETTINGS as RESAMPLE_SETTINGS
from pe_core._plots.precision import RESIZERS as RESIZERS
from pe_core.analysis import _check_metric
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import Metric, PresetLike
from pe_core.validation import positive_int

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
    return encodings.draw_heatmap(d, positive_int(length, "length"), spec, code)


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
    return encodings.draw_similarity(d, positive_int(length, "length"), spec, metric)


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
    return encodings.draw_grid_similarity(shape, d, spec, patches)


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
    max_distance = positive_int(max_distance, "max_distance")
    dims, bases = tuple(dims), tuple(bases)
    if not dims or not bases:
        raise ValueError(f"dims and bases must not be empty. Received: {dims!r}, {bases!r}")
    return encodings.draw_similarity_by_distance(dims, bases, max_distance, spec, metric)


def plot_spectrum(d: int = 512, specs: Sequence[Spec | PresetLike] | None = None) -> Figure:
    """The wavelength ``2 pi / w_i`` (in positions) of every sin/cos pair ``i``.

    With several specs a second panel shows how far each one's wavelengths are from the
    first spec's, in percent: on the log scale of the first panel, schedules as close as
    ``2i/d`` and ``i/(d/2 - 1)`` lie on top of each other (3.7% apart at most for
    ``d = 512``).

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
    >>> fig = plot_spectrum(512)  # vaswani, and tensor2tensor's difference from it below
    >>> [round(float(v), 2) for v in fig.axes[1].lines[0].get_ydata()[[0, -1]]]  # percent
    [0.0, 3.66]
    """
    chosen = [resolve_spec(s) for s in (specs or ("vaswani", "tensor2tensor"))]
    if not chosen:
        raise ValueError("specs must not be empty.")
    return encodings.draw_spectrum(d, chosen)


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
    return encodings.draw_long_distance(d, max_len, spec, min_separation)


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
    return encodings.draw_normalized(tuple(positive_int(n, "length", minimum=2) for n in lengths))


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
    return attention.draw_rope_scores(d, positive_int(length, "length", minimum=2), seed)


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
    return attention.draw_rope_sections(sections, interleaved, base)


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
    return attention.draw_alibi(n_heads, positive_int(length, "length", minimum=2))


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
    side = positive_int(window_size, "window_size")
    if side > 6:
        raise ValueError(f"window_size must be at most 6 (legible labels). Received: {side}")
    return attention.draw_swin_index(side, prefix_tokens)


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
    n_features = positive_int(n_features, "n_features")
    n_points = positive_int(n_points, "n_points", minimum=2)
    return precision.draw_fourier_features(n_features, scale, n_points, seed)


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
    dim = positive_int(embedding_dim, "embedding_dim", minimum=4)
    return precision.draw_timestep_embedding(dim, positive_int(n_steps, "n_steps", minimum=2))


def resample_gaps(
    old: int = 14, new: int = 32, channels: int = 768, backends: Sequence[str] | None = None
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
    return precision.measure_gaps(old, new, channels, backends)


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
    old = positive_int(old, "old", minimum=2)
    new = positive_int(new, "new", minimum=old + 1)
    channels = positive_int(channels, "channels", minimum=2)
    return precision.draw_resample_gap(old, new, channels, backends)
