"""The figures of precision: Fourier features and timestep embeddings against float64,
and other frameworks' resize against PyTorch's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pe_core._fourier import host_constants, reduced_turns, sin_cos
from pe_core._plots.base import DIVERGING, new_figure
from pe_core.fourier import fourier_features
from pe_core.nd import grid_encoding
from pe_core.resample import resample_pos_embed
from pe_core.timestep import timestep_embedding
from pe_core.typing import Interpolation
from pe_core_backends import HOST, get_namespace, is_installed

#: The settings :func:`~pe_core.plots.resample_gaps` compares: (label, mode, grow).
RESAMPLE_SETTINGS: tuple[tuple[str, Interpolation, bool], ...] = (
    ("bicubic, up", "bicubic", True),
    ("bicubic, down", "bicubic", False),
    ("bilinear, up", "bilinear", True),
    ("bilinear, down", "bilinear", False),
)

#: The frameworks whose own resize :func:`~pe_core.plots.resample_gaps` measures, with its label.
RESIZERS = (
    # (backend, label, pe_core measured there too, its bicubic gap mapped per patch)
    ("torch", "F.interpolate float32", False, False),
    ("jax", "jax.image.resize", True, True),
    ("tensorflow", "tf.image.resize", True, False),
)


def draw_fourier_features(n_features: int, scale: float, n_points: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    magnitudes = np.sort(np.abs(rng.normal(size=n_features))) * scale
    freqs = magnitudes * np.sign(rng.uniform(-1, 1, n_features))
    x = np.linspace(0.0, 1.0, n_points)
    features = np.asarray(fourier_features(x, freqs, dtype="float64"))
    fig, (left, right) = new_figure(2, width=10.5, height=4.2)
    image = left.imshow(features, aspect="auto", cmap="RdBu_r", interpolation="nearest")
    left.set(
        xlabel=f"feature: {n_features} sines | {n_features} cosines, by |f|",
        ylabel=f"point x in [0, 1] ({n_points} points)",
        title=f"sin, cos of 2π x f, f ~ N(0, {scale:g}²)",
    )
    fig.colorbar(image, ax=left)
    # the error against the float64 formula of float32 coordinates, per size of x f
    turns_sizes = np.logspace(-1, 5, 25)
    coords = np.random.default_rng(seed + 1).uniform(0.5, 1.0, 512).astype(np.float32)
    curves: dict[str, list[float]] = {"textbook float32": [], "pe_core float32": []}
    curves["pe_core, host (float64, rounded)"] = []
    for size in turns_sizes:
        f = np.array([size * (1 + 1 / 3)])
        exact = np.sin(2 * np.pi * coords.astype(np.float64)[:, None] * f)
        plain = np.sin(np.float32(2 * np.pi) * (coords[:, None] * np.float32(f[0])))
        constants = host_constants(f[None], "float32")
        turns = reduced_turns(HOST, coords[:, None], constants, "float32", host=True)
        ours = sin_cos(HOST, turns)[0]
        host = np.asarray(fourier_features(coords, f))[:, :1]
        for label, values in zip(curves, (plain, ours, host), strict=True):
            curves[label].append(float(np.abs(values.astype(np.float64) - exact).max()))
    for label, errors in curves.items():
        right.loglog(turns_sizes, np.maximum(errors, 1e-9), marker=".", label=label)
    right.set(xlabel="x f in turns (the angle / 2π)", ylabel="largest error of sin")
    right.set_title("the angle reduced in turns keeps float32 accurate")
    right.legend(fontsize="small")
    right.grid(alpha=0.3, which="both")
    fig.suptitle("Fourier features")
    return fig


def draw_timestep_embedding(dim: int, steps: int) -> Any:
    kw: dict[str, Any] = {"flip_sin_to_cos": True, "downscale_freq_shift": 0}
    t = np.arange(steps)
    table = np.asarray(timestep_embedding(t, dim, **kw))
    fig, (left, right) = new_figure(2, width=11.0, height=4.4)
    image = left.imshow(table, aspect="auto", cmap=DIVERGING, vmin=-1, vmax=1)
    left.set(xlabel=f"feature ([cos | sin], {dim // 2} frequencies each)", ylabel="timestep t")
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
    # exact: the last curve's, t / n_steps at scale 1000
    label = "pe_core, float32, scale=1000"
    right.semilogy(t, np.maximum(np.abs(ours - exact).max(-1), 1e-9), label=label)
    right.set(xlabel="timestep index", ylabel="largest error over the features")
    right.set_title("error against the exact value")
    right.legend(fontsize="x-small")
    right.grid(alpha=0.3)
    fig.suptitle("Diffusion timestep embeddings")
    return fig


def measure_gaps(
    old: int, new: int, channels: int, backends: Sequence[str] | None
) -> tuple[dict[str, dict[str, float]], np.ndarray | None]:
    small = np.asarray(grid_encoding(channels, (old, old), dtype="float64"))[None]
    big = resample_pos_embed(small, new, num_prefix_tokens=0)  # a smooth new x new table
    gaps: dict[str, dict[str, float]] = {}
    patch_gap = None

    def record(method: str, setting: str, value: np.ndarray, reference: np.ndarray) -> None:
        gap = float(np.abs(value - reference).max() / np.abs(reference).max())
        gaps.setdefault(method, {})[setting] = gap

    for setting, mode, grow in RESAMPLE_SETTINGS:
        source, side, size = (small, old, new) if grow else (big, new, old)
        kw: dict[str, Any] = {"num_prefix_tokens": 0, "interpolation": mode}
        reference = np.asarray(resample_pos_embed(source, size, **kw))
        source32 = source.astype(np.float32)
        ours = resample_pos_embed(source32, size, **kw)
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
                placed = resample_pos_embed(xp.asarray(source32), size, **kw)
                record(f"pe_core on {backend}", setting, xp.to_numpy(placed), reference)
    return gaps, patch_gap


def draw_resample_gap(old: int, new: int, channels: int, backends: Sequence[str] | None) -> Any:
    gaps, patch_gap = measure_gaps(old, new, channels, backends)
    fig, (left, right) = new_figure(2, width=11.0, height=4.4)
    methods = list(gaps)
    width = 0.8 / len(methods)
    floor = 1e-9  # exact zeros drawn at the floor of the log scale
    for i, method in enumerate(methods):
        values = [max(gaps[method][label], floor) for label, _, _ in RESAMPLE_SETTINGS]
        offsets = np.arange(len(RESAMPLE_SETTINGS)) + (i - (len(methods) - 1) / 2) * width
        left.bar(offsets, values, width=width, label=method)
    left.set_yscale("log")
    left.set_xticks(np.arange(len(RESAMPLE_SETTINGS)), [label for label, _, _ in RESAMPLE_SETTINGS])
    left.set(
        ylabel="max |x - torch float64| / max |torch float64|",
        title=f"{old}x{old} <-> {new}x{new}, {channels} channels, antialias off",
    )
    left.legend(fontsize="x-small")
    left.grid(alpha=0.3, axis="y")
    if patch_gap is None:
        right.text(0.5, 0.5, "JAX not measured (not installed)", ha="center", va="center")
        right.set_axis_off()
    else:
        image = right.imshow(patch_gap, cmap="magma", interpolation="nearest")
        right.set(xlabel="patch column", ylabel="patch row")
        right.set_title("jax.image.resize, bicubic up: gap per patch")
        fig.colorbar(image, ax=right, label="max over channels / max |table|")
    fig.suptitle("Resizing a position table: other frameworks' resize vs PyTorch's")
    return fig
