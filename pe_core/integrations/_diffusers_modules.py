"""The diffusers classes :mod:`pe_core.integrations.diffusers` covers, and how it
patches each (:func:`plan`): methods run with the exact helpers
(:mod:`pe_core.integrations._diffusers_helpers`), tables built once rebuilt exactly
(checked against the module's own), or a forward written here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pe_core.fourier import fourier_features
from pe_core.integrations._diffusers_helpers import (
    NO_FLOAT64,
    exact_cos_sin_table,
    exact_get_1d_rotary_pos_embed,
    exact_globals,
    gaussian_fourier_forward,
    inverse_frequencies,
    rebind,
)
from pe_core.timestep import timestep_embedding

__all__ = [
    "CHECKS",
    "FORWARDS",
    "METHODS",
    "REFUSED",
    "TABLES",
    "class_key",
    "plan",
    "positional_class",
]

#: A module is positional (patched or refused) if its class, from diffusers, has one of
#: these in its name.
_POSITIONAL_NAMES = (
    "Timesteps",
    "FourierProjection",
    "FourierFeatures",
    "FourierEmbedding",
    "Rotary",
    "Rope",
    "RoPE",
    "PosEmbed",
)


# -- tables built once -----------------------------------------------------------------


def _wan_dims(module: Any) -> tuple[int, int, int]:
    head = int(module.attention_head_dim)
    h = 2 * (head // 6)
    return head - 2 * h, h, h


def _wan_tables(module: Any, like: torch.Tensor, use_real: bool) -> Any:
    """The tables of ``WanRotaryPosEmbed.__init__`` (theta 10000, the default every
    diffusers model uses: checked against the module's own tables)."""
    pos = torch.arange(int(module.max_seq_len), device=like.device)
    wide = like.dtype in (torch.float64, torch.complex128) or (
        use_real and like.device.type not in NO_FLOAT64
    )
    dtype = torch.float64 if wide else torch.float32
    parts = [
        exact_get_1d_rotary_pos_embed(
            d, pos, 10000.0, use_real=use_real, repeat_interleave_real=use_real, freqs_dtype=dtype
        )
        for d in _wan_dims(module)
    ]
    if use_real:
        return tuple(torch.cat([p[i] for p in parts], dim=1).to(like.dtype) for i in (0, 1))
    return (torch.cat(parts, dim=1).to(like.dtype),)


@dataclass(frozen=True)
class _Tables:
    """Tables a module builds in ``__init__``: instance attributes (buffers or plain)
    replaced by exact ones; ``uncached``: its methods cached on the class
    (``lru_cache``) from those tables, run uncached while patched."""

    names: tuple[str, ...]
    build: Callable[[Any, torch.Tensor], tuple[Any, ...]]
    uncached: tuple[str, ...] = ()


def _complex_table(dim: int, index: torch.Tensor, theta: float) -> torch.Tensor:
    """``polar(1, index * 1/theta^(2i/dim))`` as complex64, from float64 on the host
    (what QwenImage's ``rope_params`` computes in float32)."""
    table = exact_get_1d_rotary_pos_embed(dim, index.double(), theta, freqs_dtype=torch.float64)
    return table.to(torch.complex64)


def _qwen_tables(module: Any, like: torch.Tensor) -> tuple[Any, ...]:
    n = int(like.shape[0])
    pos, neg = torch.arange(n), torch.arange(n).flip(0) * -1 - 1
    return tuple(
        torch.cat([_complex_table(d, index, module.theta) for d in module.axes_dim], dim=1)
        for index in (pos, neg)
    )


def _qwen21_tables(module: Any, like: torch.Tensor) -> tuple[Any, ...]:
    index = torch.cat([torch.arange(8192), torch.arange(1024).flip(0) * -1 - 1])
    return ([_complex_table(d, index, module.theta) for d in module.axes_dim],)


def _lumina2_tables(module: Any, like: Any) -> tuple[Any, ...]:
    method = type(module)._precompute_freqs_cis
    rebound = rebind(method, exact_globals(method))
    return (rebound(module, module.axes_dim, module.axes_lens, module.theta),)


_WAN_REAL = _Tables(("freqs_cos", "freqs_sin"), lambda m, like: _wan_tables(m, like, True))
_WAN_COMPLEX = _Tables(("freqs",), lambda m, like: _wan_tables(m, like, False))
_LUMINA2 = _Tables(("freqs_cis",), _lumina2_tables)
_QWEN = _Tables(
    ("pos_freqs", "neg_freqs"), _qwen_tables, ("_get_device_freqs", "_compute_video_freqs")
)
_QWEN_LAYER3D = _Tables(
    ("pos_freqs", "neg_freqs"),
    _qwen_tables,
    ("_get_device_freqs", "_compute_video_freqs", "_compute_condition_freqs"),
)
_QWEN21 = _Tables(("freqs",), _qwen21_tables)


# -- forwards written here -------------------------------------------------------------


def _qwen21_timesteps_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
    """``QwenImage21TemporalTimesteps.forward``: ``[cos | sin]`` of
    ``time_factor * t * 10000^(-i/half)`` (its ``freqs`` checked at patch time)."""
    return timestep_embedding(
        timestep.float(),
        int(self.timestep_dim),
        flip_sin_to_cos=True,
        downscale_freq_shift=0,
        scale=float(self.time_factor),
    )


def _check_qwen21_timesteps(module: Any) -> None:
    half = int(module.timestep_dim) // 2
    exact = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    gap = float((module.freqs.detach().cpu().double() - exact).abs().max())
    if not gap <= 1e-6:
        raise ValueError(
            f"its freqs differ from max_period=10000's by {gap:.3g}: built with another max_period"
        )


def _hw_rotary(
    self: Any, height: int, width: int, spread: tuple[int, int] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """CogView4's and GLM-Image's rotary: ``[h | w | h | w]`` frequencies of ``dim // 2``
    each, rows and columns at their index (spread over ``spread`` ids), on the host."""
    half = self.dim // 2
    omegas = inverse_frequencies(half, self.theta, half // 2)
    parts = []
    for axis, n, cells in ((0, height, (height, 1)), (1, width, (1, width))):
        ids = torch.arange(n) if spread is None else torch.arange(n) * spread[axis] // n
        cos, sin = exact_cos_sin_table(ids.double(), omegas)
        parts.append((cos.view(*cells, -1), sin.view(*cells, -1)))
    out = []
    for i in (0, 1):
        grid = torch.cat([p[i].expand(height, width, -1) for p in parts], dim=-1)
        out.append(torch.cat([grid, grid], dim=-1).reshape(height * width, -1))
    return out[0], out[1]


def _cogview4_forward(self: Any, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``CogView4RotaryPosEmbed.forward``: ids spread over ``rope_axes_dim``."""
    _, _, height, width = hidden_states.shape
    p = self.patch_size
    return _hw_rotary(self, height // p, width // p, tuple(self.rope_axes_dim))


def _glm_image_forward(self: Any, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``GlmImageRotaryPosEmbed.forward``: CogView4's with the ids themselves."""
    _, _, height, width = hidden_states.shape
    return _hw_rotary(self, height // self.patch_size, width // self.patch_size, None)


def _cosmos_forward(
    self: Any, hidden_states: torch.Tensor, fps: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``CosmosRotaryPosEmbed.forward``: ``[t | h | w | t | h | w]``, theta ``10000 *
    ntk`` per axis, frames at ``t / fps * base_fps`` (float64 on the host)."""
    _, _, frames, height, width = hidden_states.shape
    sizes = [n // p for n, p in zip((frames, height, width), self.patch_size, strict=True)]
    t = torch.arange(sizes[0], dtype=torch.float64)
    if fps is not None:
        t = t / float(fps) * self.base_fps
    axes = (
        (t, self.dim_t, self.t_ntk_factor),
        (torch.arange(sizes[1], dtype=torch.float64), self.dim_h, self.h_ntk_factor),
        (torch.arange(sizes[2], dtype=torch.float64), self.dim_w, self.w_ntk_factor),
    )
    cos, sin = [], []
    for axis, (pos, dim, ntk) in enumerate(axes):
        c, s = exact_cos_sin_table(pos, inverse_frequencies(dim, 10000.0 * ntk, dim // 2))
        shape = [1, 1, 1, -1]
        shape[axis] = sizes[axis]
        cos.append(c.view(shape).expand(*sizes, -1))
        sin.append(s.view(shape).expand(*sizes, -1))
    device = hidden_states.device
    return (
        torch.cat(cos * 2, dim=-1).flatten(0, 2).to(device),
        torch.cat(sin * 2, dim=-1).flatten(0, 2).to(device),
    )


# LTX-Video and LTX-2: the angle of frequency ``w = theta^(k/(n-1)) pi/2`` at a fractional
# coordinate ``g`` is ``w (2 g - 1)``, ``g`` an id (or a patch's midpoint) over the base
# size: here ``2 w g`` is reduced exactly from the ids and ``w`` subtracted after.


def _ltx_frequencies(theta: float, n: int) -> tuple[float, ...]:
    """``theta ** linspace(0, 1, n) * pi / 2`` in float64."""
    steps = [k / (n - 1) for k in range(n)] if n > 1 else [0.0]
    return tuple(float(theta) ** e * math.pi / 2.0 for e in steps)


def _shifted(
    cos: torch.Tensor, sin: torch.Tensor, phases: tuple[float, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of ``angle - phase`` (per last-axis column) from those of
    ``angle`` (the phases' own in float64 on the host)."""
    cp = torch.tensor([math.cos(p) for p in phases], device=cos.device)
    sp = torch.tensor([math.sin(p) for p in phases], device=cos.device)
    return cos * cp + sin * sp, sin * cp - cos * sp


def _summed(
    a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of the sum of two angles from theirs."""
    return a[0] * b[0] - a[1] * b[1], a[1] * b[0] + a[0] * b[1]


def _ltx_axis(
    coords: torch.Tensor, ws: tuple[float, ...], base: float, ends: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of ``w (2 g - 1)``: ``g = coords / base``, or the midpoint of
    ``[coords, ends)`` over ``base``."""
    if ends is None:
        omegas = tuple(2.0 * w / base for w in ws)
        return _shifted(*exact_cos_sin_table(coords, omegas), ws)
    omegas = tuple(w / base for w in ws)
    both = _summed(exact_cos_sin_table(coords, omegas), exact_cos_sin_table(ends, omegas))
    return _shifted(*both, ws)


def _interleaved(
    axes: list[tuple[torch.Tensor, torch.Tensor]], dim: int, elems: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[f0 axes..., f1 axes..., ...]``, each twice, after ``dim % elems`` (1, 0)
    pads."""
    out = []
    for i in (0, 1):
        x = torch.stack([a[i] for a in axes], dim=-1).flatten(-2).repeat_interleave(2, dim=-1)
        pad = torch.full((*x.shape[:-1], dim % elems), float(1 - i), device=x.device)
        out.append(torch.cat([pad, x], dim=-1))
    return out[0], out[1]


def _real_scale(value: Any) -> float:
    """A scale factor as a host number (a tensor one is read back: diffusers' pipelines
    pass Python numbers)."""
    return float(value)


def _ltx_forward(
    self: Any,
    hidden_states: torch.Tensor,
    num_frames: int | None = None,
    height: int | None = None,
    width: int | None = None,
    rope_interpolation_scale: Any = None,
    video_coords: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``LTXVideoRotaryPosEmbed.forward``."""
    batch, device = hidden_states.size(0), hidden_states.device
    ws = _ltx_frequencies(self.theta, self.dim // 6)
    bases = (self.base_num_frames, self.base_height, self.base_width)
    if video_coords is None:
        if num_frames is None or height is None or width is None:
            raise TypeError("num_frames, height and width are needed without video_coords")
        sizes = (num_frames, height, width)
        grids = torch.meshgrid(
            *(torch.arange(n, dtype=torch.float32, device=device) for n in sizes), indexing="ij"
        )
        coords = [g.reshape(1, -1).expand(batch, -1) for g in grids]
        if rope_interpolation_scale is None:
            bases = (1.0, 1.0, 1.0)
        else:
            patches = (self.patch_size_t, self.patch_size, self.patch_size)
            bases = tuple(
                b / (_real_scale(s) * p)
                for b, s, p in zip(bases, rope_interpolation_scale, patches, strict=True)
            )
    else:
        coords = [video_coords[:, i] for i in range(3)]
    axes = [_ltx_axis(c, ws, float(b)) for c, b in zip(coords, bases, strict=True)]
    return _interleaved(axes, self.dim, 6)


def _ltx2_forward(
    self: Any, coords: torch.Tensor, device: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``LTX2AudioVideoRotaryPosEmbed.forward`` (and SANA-WM's copy)."""
    device = device or coords.device
    dims = coords.shape[1]
    elems = 2 * dims
    ws = _ltx_frequencies(self.theta, self.dim // elems)
    bases = (self.base_num_frames, self.base_height, self.base_width)[:dims]
    if self.modality == "audio":
        bases = (self.base_num_frames,)
    axes = []
    for i, base in enumerate(bases):
        if coords.ndim == 4:
            axes.append(_ltx_axis(coords[:, i, :, 0], ws, float(base), coords[:, i, :, 1]))
        else:
            axes.append(_ltx_axis(coords[:, i], ws, float(base)))
    axes = [(c.to(device), s.to(device)) for c, s in axes]
    if self.rope_type == "interleaved":
        return _interleaved(axes, self.dim, elems)
    out = []
    for i in (0, 1):
        x = torch.stack([a[i] for a in axes], dim=-1).flatten(-2)
        pad = torch.full((*x.shape[:-1], self.dim // 2 - x.shape[-1]), float(1 - i), device=device)
        x = torch.cat([pad, x], dim=-1)
        x = x.reshape(x.shape[0], x.shape[1], self.num_attention_heads, -1)
        out.append(torch.swapaxes(x, 1, 2))
    return out[0], out[1]


def _ltx2_vae_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    """``LTX2VideoVaeRotaryPosEmbed3D.forward``: each of (T, H, W) rotates its chunk of
    ``head_dim`` (pairs) by its index times ``1 / base^(2i/dim)``."""
    device = hidden_states.device
    out, start = [], 0
    for axis, dim in enumerate(self.rope_dim_split):
        x = hidden_states[..., start : start + dim]
        start += dim
        n = hidden_states.shape[axis + 1]
        positions = torch.arange(n, dtype=torch.float32, device=device)
        cos, sin = exact_cos_sin_table(positions, inverse_frequencies(dim, self.base))
        shape = [1, 1, 1, 1, 1, dim // 2]
        shape[axis + 1] = n
        cos, sin = cos.reshape(shape), sin.reshape(shape)
        pairs = x.reshape(*x.shape[:-1], dim // 2, 2)
        even, odd = pairs[..., 0].float(), pairs[..., 1].float()
        rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
        out.append(rotated.reshape(x.shape).to(x.dtype))
    return torch.cat(out, dim=-1)


def _helios_forward(
    self: Any, frame_indices: torch.Tensor, height: int, width: int, device: Any
) -> torch.Tensor:
    """``HeliosRotaryPosEmbed.forward``: ``[cos t, cos y, cos x, sin t, sin y, sin x]``
    (frequencies repeated twice) over (batch, frames, height, width)."""
    batch, frames = frame_indices.shape[:2]
    t = frame_indices.to(device=device, dtype=torch.float32)
    y = torch.arange(height, device=device, dtype=torch.float32)
    x = torch.arange(width, device=device, dtype=torch.float32)
    sizes = (batch, frames, height, width)
    axes = ((t[:, :, None, None], self.DT), (y[:, None], self.DY), (x, self.DX))
    cos, sin = [], []
    for pos, dim in axes:
        c, s = exact_cos_sin_table(pos, inverse_frequencies(dim, self.theta, dim // 2))
        cos.append(c.expand(*sizes, -1).movedim(-1, 0).repeat_interleave(2, dim=0))
        sin.append(s.expand(*sizes, -1).movedim(-1, 0).repeat_interleave(2, dim=0))
    return torch.cat(cos + sin, dim=0).permute(1, 0, 2, 3, 4)


def _omnigen_forward(
    self: Any, hidden_states: torch.Tensor, position_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``OmniGenSuScaledRotaryEmbedding.forward``: the first row's ids times
    ``1 / (factor_i base^(2i/dim))`` (the long factors past the original length,
    chosen on the device), ``[f | f]``, times the su-scaling factor."""
    base = float(self.base)
    original = self.original_max_position_embeddings
    scale = self.max_position_embeddings / original
    factor = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(original))
    pos = position_ids[0].to(device=hidden_states.device, dtype=torch.float32)
    tables = []
    half = len(range(0, self.dim, 2))
    for ext in (self.short_factor, self.long_factor):
        ext = list(ext) * (half if len(ext) == 1 else 1)  # broadcast as torch does
        omegas = tuple(
            1.0 / (float(e) * base ** (i / self.dim))
            for e, i in zip(ext, range(0, self.dim, 2), strict=True)
        )
        c, s = exact_cos_sin_table(pos, omegas)
        tables.append((torch.cat([c, c], dim=-1), torch.cat([s, s], dim=-1)))
    long = torch.max(position_ids) + 1 > original
    cos, sin = (torch.where(long, tables[1][i], tables[0][i]) * factor for i in (0, 1))
    return cos, sin


def _audio_dit_forward(
    self: Any, hidden_states: torch.Tensor, seq_len: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``AudioDiTRotaryEmbedding.forward``: ids times ``1 / base^(2i/dim)``, ``[f | f]``."""
    seq_len = hidden_states.shape[1] if seq_len is None else seq_len
    pos = torch.arange(seq_len, device=hidden_states.device, dtype=torch.float32)
    cos, sin = exact_cos_sin_table(pos, inverse_frequencies(self.dim, self.base))
    dtype = hidden_states.dtype
    return torch.cat([cos, cos], dim=-1).to(dtype), torch.cat([sin, sin], dim=-1).to(dtype)


# Modules keeping only ``inv_freq = 1 / theta ** (2i / d)`` (float32): theta is found
# from it at patch time (rounded to 4 significant digits, then every entry checked
# within float32 rounding of that theta's) and kept in the patch.

_THETA = "_pe_core_theta"


def _check_inv_freq(module: Any) -> dict[str, Any]:
    inv = module._buffers["inv_freq"].detach().cpu().double()
    n = int(inv.shape[0])
    exponents = torch.arange(n, dtype=torch.float64) / n
    theta = float(f"{float(inv[-1]) ** (-1.0 / float(exponents[-1])):.4g}") if n > 1 else 1.0
    exact = 1.0 / theta**exponents
    if not bool(((inv - exact).abs() <= 4 * 2.0**-24 * exact).all()):
        raise ValueError(
            "its inv_freq is not 1 / theta ** (2i / d) for a theta of 4 significant digits"
        )
    return {_THETA: theta}


def _inv_freq_cos_sin(self: Any, pos: torch.Tensor, scale: float = 1.0) -> Any:
    n = int(self._buffers["inv_freq"].shape[0])
    theta = vars(self)[_THETA]
    return exact_cos_sin_table(pos, tuple(scale / theta ** (i / n) for i in range(n)))


def _anima_forward(
    self: Any, hidden_states: torch.Tensor, position_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``AnimaRotaryEmbedding.forward``: ``[f | f]`` of ids times ``inv_freq``."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.to(hidden_states.device).float())
    dtype = hidden_states.dtype
    return torch.cat([cos, cos], dim=-1).to(dtype), torch.cat([sin, sin], dim=-1).to(dtype)


def _interleaved_mrope(
    self: Any, position_ids: torch.Tensor, sections: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen-VL's interleaved M-RoPE: ``position_ids`` (3, B, N); frequency ``j`` of the
    t axis, but of h where ``j % 3 == 1`` and of w where ``j % 3 == 2`` (below
    ``3 * section``)."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.float())  # (3, B, N, n)
    n = cos.shape[-1]
    axis = [0] * n
    for a in (1, 2):
        for j in range(a, min(3 * sections[a], n), 3):
            axis[j] = a
    pick = torch.tensor(axis, device=cos.device)[None, None, None, :]
    cos = torch.gather(cos, 0, pick.expand(1, *cos.shape[1:]))[0]
    sin = torch.gather(sin, 0, pick.expand(1, *sin.shape[1:]))[0]
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def _cosmos3_text_forward(
    self: Any, position_ids: torch.Tensor, device: Any, dtype: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``Cosmos3VLTextRotaryEmbedding.forward``."""
    if position_ids.ndim == 2:
        position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
    cos, sin = _interleaved_mrope(self, position_ids.to(device), tuple(self.rope_axes_dim))
    return cos.to(dtype), sin.to(dtype)


def _ideogram4_forward(self: Any, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``Ideogram4MRoPE.forward``."""
    if position_ids.ndim != 3 or position_ids.shape[-1] != 3:
        raise ValueError(
            f"`position_ids` must have shape (B, L, 3), got {tuple(position_ids.shape)}."
        )
    return _interleaved_mrope(self, position_ids.permute(2, 0, 1), tuple(self.mrope_section))


def _minimax_h3_forward(self: Any, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxH3RotaryPosEmbed.forward``: ``[t | h | w | t | h | w]``."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.float())  # (N, 3, n)
    cos, sin = cos.flatten(-2), sin.flatten(-2)
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def _minimax_h3_video_forward(
    self: Any, position_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxH3VideoRotaryPosEmbed.forward``: ``2 pi`` coordinates times ``inv_freq``,
    axes concatenated, tiled twice."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.float(), 2.0 * math.pi)  # (B, N, A, n)
    return tuple(x.flatten(2, 3).tile(2).unsqueeze(2) for x in (cos, sin))


def _music3_rotary_forward(
    self: Any, seq_len: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxMusic3RotaryEmbedding.forward``."""
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)
    cos, sin = exact_cos_sin_table(pos, inverse_frequencies(self.rotary_dim, self.theta))
    return torch.cat([cos, cos], dim=-1).contiguous(), torch.cat([sin, sin], dim=-1).contiguous()


def _music3_fourier_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
    """``MiniMaxMusic3FourierEmbedding.forward``: ``[cos | sin]`` of ``2 pi t w``."""
    return fourier_features(timestep.float(), self.weight[:, 0], order="cos_sin")


def _expo_fourier_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
    """``StableAudio3ExpoFourierFeatures.forward``: ``[cos | sin]`` of ``2 pi t f``, ``f``
    log-uniform from ``min_freq`` to ``max_freq``."""
    if timestep.dim() == 1:
        timestep = timestep.unsqueeze(-1)
    half = self.dim // 2
    lo, hi = math.log(self.min_freq), math.log(self.max_freq)
    steps = [k / (half - 1) for k in range(half)] if half > 1 else [0.0]
    omegas = tuple(2.0 * math.pi * math.exp(e * (hi - lo) + lo) for e in steps)
    cos, sin = exact_cos_sin_table(timestep.float()[..., 0], omegas)
    return torch.cat([cos, sin], dim=-1).to(timestep.dtype)


def _mochi_fourier_forward(self: Any, inputs: torch.Tensor) -> torch.Tensor:
    """Mochi VAE's ``FourierFeatures.forward``: the inputs, then ``sin`` and ``cos`` of
    ``2^f 2 pi x`` (channel-major, ``f`` in ``range(start, stop, step)``)."""
    original = inputs.dtype
    x = inputs.to(torch.float32)
    freqs = np.array([2.0**f for f in range(self.start, self.stop, self.step)])
    n = len(freqs)
    feats = fourier_features(x.movedim(1, -1), freqs)  # (B, T, H, W, C, 2n)
    sin = feats[..., :n].flatten(-2).movedim(-1, 1)
    cos = feats[..., n:].flatten(-2).movedim(-1, 1)
    return torch.cat([x, sin, cos], dim=1).to(original)


# Kandinsky 5 and 6: tables of angles ``pos * exp(-ln(max_period) i / half)`` in
# __init__, indexed by position ids; here the cosines and sines of those angles (divided
# by the call's scale factors) are formed from the ids, exactly.


def _kandinsky_omegas(dim: int, max_period: float, factor: float = 1.0) -> tuple[float, ...]:
    half = int(dim) // 2
    return tuple(math.exp(-math.log(max_period) * i / half) * factor for i in range(half))


def _kandinsky_cos_sin(
    table: torch.Tensor, pos: Any, omegas: tuple[float, ...]
) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.as_tensor(pos, device=table.device)
    pos = torch.where(pos < 0, pos + table.shape[0], pos)  # indexing's wrap-around
    cos, sin = exact_cos_sin_table(pos, omegas)
    return cos.to(table.dtype), sin.to(table.dtype)


def _rope_matrices(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    rope = torch.stack([cos, -sin, sin, cos], dim=-1)
    return rope.view(*rope.shape[:-1], 2, 2).unsqueeze(-4)


def _kandinsky_1d_forward(self: Any, pos: Any) -> torch.Tensor:
    table = self._buffers.get("args", self._buffers.get("angles"))
    factor = float(getattr(self, "freqs_scaling", 1.0))
    omegas = _kandinsky_omegas(self.dim, self.max_period, factor)
    return _rope_matrices(*_kandinsky_cos_sin(table, pos, omegas))


def _kandinsky_3d_cos_sin(
    self: Any, prefix: str, pos: Any, scale_factor: Any
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [
        _kandinsky_cos_sin(
            getattr(self, f"{prefix}{i}"),
            pos[i],
            tuple(w / _real_scale(scale_factor[i]) for w in _kandinsky_omegas(d, self.max_period)),
        )
        for i, d in enumerate(self.axes_dims)
    ]


def _grid_cat(parts: list[torch.Tensor], sizes: tuple[int, ...]) -> torch.Tensor:
    """``[t | h | w]`` over the ``(..., T, H, W)`` grid of ``sizes``."""
    lead = len(sizes) - 3
    out = []
    for axis, x in enumerate(parts):
        shape = [1] * len(sizes) + [-1]
        shape[lead + axis] = sizes[lead + axis]
        out.append(x.view(shape).expand(*sizes, -1))
    return torch.cat(out, dim=-1)


def _kandinsky5_3d_forward(
    self: Any, shape: Any, pos: Any, scale_factor: Any = (1.0, 1.0, 1.0)
) -> torch.Tensor:
    batch, duration, height, width = shape
    axes = _kandinsky_3d_cos_sin(self, "args_", pos, scale_factor)
    sizes = (batch, duration, height, width)
    return _rope_matrices(*(_grid_cat([a[i] for a in axes], sizes) for i in (0, 1)))


def _kandinsky6_3d_forward(
    self: Any, pos: Any, scale_factor: Any = (1.0, 1.0, 1.0)
) -> torch.Tensor:
    sizes = tuple(int(p.shape[0]) for p in pos)
    axes = _kandinsky_3d_cos_sin(self, "angles_", pos, scale_factor)
    return _rope_matrices(*(_grid_cat([a[i] for a in axes], sizes) for i in (0, 1)))


def _check_kandinsky(module: Any) -> None:
    """The angle tables are ``arange(max_pos) x`` the frequencies the forward uses."""
    if hasattr(module, "axes_dims"):
        prefix = "args_" if "args_0" in module._buffers else "angles_"
        tables = [(f"{prefix}{i}", d, 1.0) for i, d in enumerate(module.axes_dims)]
    else:
        name = "args" if "args" in module._buffers else "angles"
        tables = [(name, module.dim, float(getattr(module, "freqs_scaling", 1.0)))]
    for name, dim, factor in tables:
        table = module._buffers[name].detach().cpu().double()
        omegas = torch.tensor(
            _kandinsky_omegas(dim, module.max_period, factor), dtype=torch.float64
        )
        exact = torch.outer(torch.arange(table.shape[0], dtype=torch.float64), omegas)
        tolerance = 1e-5 + 4.0 * table.shape[0] * 2.0**-24
        if exact.shape != table.shape or not float((table - exact).abs().max()) <= tolerance:
            raise ValueError(
                f"its {name} is not arange(max_pos) x exp(-ln(max_period) i / half): built "
                "with other frequencies"
            )


# -- the covered classes ---------------------------------------------------------------

_T = "diffusers.models.transformers."

#: class -> the methods run with exact helpers (the module's own code), and instance
#: caches to empty while patched.
METHODS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "diffusers.models.embeddings.Timesteps": (("forward",), ()),
    _T + "transformer_bria.BriaTimesteps": (("forward",), ()),
    _T + "transformer_bria_fibo.BriaFiboTimesteps": (("forward",), ()),
    _T + "transformer_flux.FluxPosEmbed": (("forward",), ()),
    _T + "transformer_flux2.Flux2PosEmbed": (("forward",), ()),
    _T + "transformer_flux3.Flux3PosEmbed": (("forward",), ()),
    _T + "transformer_bria.BriaEmbedND": (("forward",), ()),
    _T + "transformer_bria.BriaPosEmbed": (("forward",), ()),
    _T + "transformer_bria_fibo.BriaFiboEmbedND": (("forward",), ()),
    _T + "transformer_krea2.Krea2RotaryPosEmbed": (("forward",), ()),
    _T + "transformer_longcat_image.LongCatImagePosEmbed": (("forward",), ()),
    _T + "transformer_ovis_image.OvisImagePosEmbed": (("forward",), ()),
    _T + "transformer_hunyuan_video.HunyuanVideoRotaryPosEmbed": (("forward",), ()),
    _T + "transformer_hunyuan_video15.HunyuanVideo15RotaryPosEmbed": (("forward",), ()),
    _T + "transformer_hunyuan_video_framepack.HunyuanVideoFramepackRotaryPosEmbed": (
        ("forward",),
        (),
    ),
    _T + "transformer_hunyuanimage.HunyuanImageRotaryPosEmbed": (("forward",), ()),
    _T + "transformer_motif_video.MotifVideoRotaryPosEmbed": (("forward",), ()),
    _T + "transformer_easyanimate.EasyAnimateRotaryPosEmbed": (("forward",), ()),
    _T + "transformer_anyflow.AnyFlowRotaryPosEmbed": (("_build_freqs",), ("_freqs_cache",)),
    _T + "transformer_anyflow_far.AnyFlowCausalRotaryPosEmbed": (
        ("_build_freqs",),
        ("_freqs_cache",),
    ),
    _T + "transformer_skyreels_v2.SkyReelsV2Timesteps": (("forward",), ()),
}

#: class -> its tables, rebuilt exactly.
TABLES: dict[str, _Tables] = {
    _T + "transformer_wan.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_wan_animate.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_video.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_skyreels_v2.SkyReelsV2RotaryPosEmbed": _WAN_REAL,
    _T + "transformer_chronoedit.ChronoEditRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_wm.SanaWMRotaryPosEmbed": _WAN_COMPLEX,
    _T + "transformer_lumina2.Lumina2RotaryPosEmbed": _LUMINA2,
    _T + "transformer_qwenimage.QwenEmbedRope": _QWEN,
    _T + "transformer_qwenimage.QwenEmbedLayer3DRope": _QWEN_LAYER3D,
    _T + "transformer_qwenimage21.QwenImage21Rope": _QWEN21,
    _T + "transformer_nucleusmoe_image.NucleusMoEEmbedRope": _Tables(
        ("pos_freqs", "neg_freqs"), _qwen_tables, ("_compute_video_freqs",)
    ),
}

#: class -> its forward, written here.
FORWARDS: dict[str, Callable[..., Any]] = {
    "diffusers.models.embeddings.GaussianFourierProjection": gaussian_fourier_forward,
    _T + "stable_audio_transformer.StableAudioGaussianFourierProjection": (
        gaussian_fourier_forward
    ),
    _T + "transformer_qwenimage21.QwenImage21TemporalTimesteps": _qwen21_timesteps_forward,
    _T + "transformer_cogview4.CogView4RotaryPosEmbed": _cogview4_forward,
    _T + "transformer_glm_image.GlmImageRotaryPosEmbed": _glm_image_forward,
    _T + "transformer_cosmos.CosmosRotaryPosEmbed": _cosmos_forward,
    _T + "transformer_kandinsky.Kandinsky5RoPE1D": _kandinsky_1d_forward,
    _T + "transformer_kandinsky.Kandinsky5RoPE3D": _kandinsky5_3d_forward,
    _T + "transformer_kandinsky6.Kandinsky6RoPE1D": _kandinsky_1d_forward,
    _T + "transformer_kandinsky6.Kandinsky6RoPE3D": _kandinsky6_3d_forward,
    _T + "transformer_kandinsky6_sr.Kandinsky6SRRoPE3D": _kandinsky6_3d_forward,
    _T + "transformer_ltx.LTXVideoRotaryPosEmbed": _ltx_forward,
    _T + "transformer_ltx2.LTX2AudioVideoRotaryPosEmbed": _ltx2_forward,
    _T + "transformer_sana_wm_refiner.SanaWMLTX2AudioVideoRotaryPosEmbed": _ltx2_forward,
    _T + "transformer_helios.HeliosRotaryPosEmbed": _helios_forward,
    _T + "transformer_cosmos3.Cosmos3VLTextRotaryEmbedding": _cosmos3_text_forward,
    _T + "transformer_ideogram4.Ideogram4MRoPE": _ideogram4_forward,
    _T + "transformer_minimax_h3.MiniMaxH3RotaryPosEmbed": _minimax_h3_forward,
    _T + "transformer_minimax_music3.MiniMaxMusic3RotaryEmbedding": _music3_rotary_forward,
    _T + "transformer_minimax_music3.MiniMaxMusic3FourierEmbedding": _music3_fourier_forward,
    _T + "transformer_stable_audio3.StableAudio3ExpoFourierFeatures": _expo_fourier_forward,
    "diffusers.models.autoencoders.autoencoder_kl_minimax_h3.MiniMaxH3VideoRotaryPosEmbed": (
        _minimax_h3_video_forward
    ),
    "diffusers.models.autoencoders.autoencoder_kl_mochi.FourierFeatures": _mochi_fourier_forward,
    "diffusers.models.condition_embedders.condition_embedder_anima.AnimaRotaryEmbedding": (
        _anima_forward
    ),
    _T + "transformer_omnigen.OmniGenSuScaledRotaryEmbedding": _omnigen_forward,
    _T + "transformer_longcat_audio_dit.AudioDiTRotaryEmbedding": _audio_dit_forward,
    "diffusers.models.autoencoders.ltx2_diffusion_decoder.LTX2VideoVaeRotaryPosEmbed3D": (
        _ltx2_vae_forward
    ),
}

#: class -> a check at patch time that the module's attributes are those its forward
#: here assumes (ValueError: refused); what it returns is set on the module while patched.
CHECKS: dict[str, Callable[[Any], dict[str, Any] | None]] = {
    _T + "transformer_qwenimage21.QwenImage21TemporalTimesteps": _check_qwen21_timesteps,
    _T + "transformer_cosmos3.Cosmos3VLTextRotaryEmbedding": _check_inv_freq,
    _T + "transformer_ideogram4.Ideogram4MRoPE": _check_inv_freq,
    _T + "transformer_minimax_h3.MiniMaxH3RotaryPosEmbed": _check_inv_freq,
    "diffusers.models.autoencoders.autoencoder_kl_minimax_h3.MiniMaxH3VideoRotaryPosEmbed": (
        _check_inv_freq
    ),
    "diffusers.models.condition_embedders.condition_embedder_anima.AnimaRotaryEmbedding": (
        _check_inv_freq
    ),
    **{
        _T + f"transformer_kandinsky{m}.Kandinsky{v}": _check_kandinsky
        for m, v in [
            ("", "5RoPE1D"),
            ("", "5RoPE3D"),
            ("6", "6RoPE1D"),
            ("6", "6RoPE3D"),
            ("6_sr", "6SRRoPE3D"),
        ]
    },
}


#: class -> why it is refused (its formula cannot be made exact here).
REFUSED: dict[str, str] = {
    _T + "transformer_mochi.MochiRoPE": (
        "its angles are learned frequencies (a model parameter passed to each call) times "
        "fractional positions, summed over three axes: not reproduced exactly without "
        "reading the parameter back to the host"
    ),
    "diffusers.models.autoencoders.autoencoder_same.RotaryEmbedding": (
        "it returns the angles themselves (float32), whose cosines and sines its "
        "attention takes: the patch would have to replace the attention"
    ),
    _T + "transformer_stable_audio3.StableAudio3RotaryEmbedding": (
        "it returns the angles themselves (float32), whose cosines and sines its "
        "attention takes: the patch would have to replace the attention"
    ),
}


def class_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def positional_class(cls: type) -> bool:
    """A diffusers class this integration patches, or one with a positional name
    (patched or refused)."""
    key = class_key(cls)
    if key in METHODS or key in TABLES or key in FORWARDS:
        return True
    return cls.__module__.startswith("diffusers.") and any(
        word in cls.__name__ for word in _POSITIONAL_NAMES
    )


class _Uncached:
    """A method cached on its class (``lru_cache``) run uncached for one module (a plain
    object, as :class:`_ExactMethod`)."""

    def __init__(self, module: nn.Module, name: str) -> None:
        self.module = module
        self.name = name
        self.function = getattr(type(module), name).__wrapped__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.module, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Uncached, (self.module, self.name))


class _ExactMethod:
    """A method of a patched module run with the exact helpers (or written here): a
    plain object (copied by ``copy.deepcopy``, pickled with the module by rebuilding it),
    never a parameter or buffer."""

    def __init__(self, module: nn.Module, name: str) -> None:
        self.module = module
        self.name = name
        self.function = _exact_function(type(module), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.module, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ExactMethod, (self.module, self.name))


def _exact_function(cls: type, name: str) -> Any:
    """``cls.name`` run with pe_core's exact helpers, or this module's own forward."""
    own = FORWARDS.get(class_key(cls))
    if own is not None and name == "forward":
        return own
    function = getattr(cls, name)
    if hasattr(function, "__wrapped__"):
        raise ValueError(f"its {name} is wrapped by a decorator")
    replacements = exact_globals(function)
    if not replacements:
        raise ValueError(f"its {name} calls none of diffusers' positional helpers")
    return rebind(function, replacements)


def _plan_methods(module: nn.Module, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _ExactMethod(module, name) for name in names}


def _table_tolerance(module: nn.Module, rows: int) -> float:
    """How far diffusers' own float32 tables may be from exact ones: a few float32
    roundings of the largest angle (positions below ``max_seq_len``, the axes' lengths
    or the tables' rows, frequencies at most 1 rad per position)."""
    longest = max(
        [int(getattr(module, "max_seq_len", 0) or 0), rows]
        + [int(n) for n in getattr(module, "axes_lens", ()) or ()]
    )
    return 1e-5 + 4.0 * longest * 2.0**-24


def _plan_tables(module: nn.Module, tables: _Tables) -> dict[str, Any]:
    current = [getattr(module, name) for name in tables.names]
    like = current[0][0] if isinstance(current[0], list) else current[0]
    new = tables.build(module, like)
    tolerance = _table_tolerance(module, int(like.shape[0]))
    theta = getattr(module, "theta", 10000)
    for name, old, exact in zip(tables.names, current, new, strict=True):
        olds = old if isinstance(old, list) else [old]
        exacts = exact if isinstance(exact, list) else [exact]
        for o, x in zip(olds, exacts, strict=True):
            if o.shape != x.shape:
                raise ValueError(
                    f"its {name} has shape {tuple(o.shape)}, pe_core's table for its "
                    f"attributes {tuple(x.shape)}"
                )
            gap = float((o.detach().cpu().to(torch.complex128) - x.cpu()).abs().max())
            if not gap <= tolerance:  # once, at patch time
                raise ValueError(
                    f"its {name} differs from pe_core's table for theta={theta} by {gap:.3g} "
                    f"(more than float32 rounding, {tolerance:.3g}): built with another "
                    "theta or layout"
                )
    return dict(zip(tables.names, new, strict=True))


def plan(module: nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """How to patch ``module``: the instance attributes and the buffers to set;
    ValueError: refused."""
    key = class_key(type(module))
    if key in REFUSED:
        raise ValueError(REFUSED[key])
    found = (CHECKS[key](module) if key in CHECKS else None) or {}
    if key in METHODS:
        names, caches = METHODS[key]
        values = _plan_methods(module, names)
        values.update({name: None for name in caches})
        return values, {}
    if key in FORWARDS:
        return {**found, **_plan_methods(module, ("forward",))}, {}
    if key in TABLES:
        tables = _plan_tables(module, TABLES[key])
        buffers = {name: table for name, table in tables.items() if name in module._buffers}
        values = {name: table for name, table in tables.items() if name not in buffers}
        values.update({name: _Uncached(module, name) for name in TABLES[key].uncached})
        return values, buffers
    bases = [class_key(b) for b in type(module).__mro__[1:]]
    covered = [b for b in bases if b in METHODS or b in TABLES or b in FORWARDS]
    if covered:
        raise ValueError(f"a subclass of {covered[0]} (not reviewed: it may change the formula)")
    raise ValueError("its formula is not one this integration reproduces (yet)")
