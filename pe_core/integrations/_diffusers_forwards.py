"""Forwards written for the diffusers classes whose formula no diffusers helper computes
(CogView4, Cosmos, LTX-Video and LTX-2, Kandinsky, Helios, OmniGen, MiniMax, Stable
Audio, ...): each computes its class's own formula with exactly reduced angles;
:mod:`pe_core.integrations._diffusers_modules` names the class each serves.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pe_core.fourier import fourier_features
from pe_core.integrations._diffusers_helpers import (
    exact_cos_sin_table,
    inverse_frequencies,
    word_cos_sin,
)
from pe_core.timestep import timestep_embedding

__all__ = [
    "anima_forward",
    "audio_dit_forward",
    "check_inv_freq",
    "check_kandinsky",
    "check_qwen21_timesteps",
    "cogview4_forward",
    "cosmos3_text_forward",
    "cosmos_forward",
    "expo_fourier_forward",
    "glm_image_forward",
    "helios_forward",
    "hunyuan_video_forward",
    "ideogram4_forward",
    "kandinsky5_3d_forward",
    "kandinsky6_3d_forward",
    "kandinsky_1d_forward",
    "ltx2_forward",
    "ltx2_vae_forward",
    "ltx_forward",
    "minimax_h3_forward",
    "minimax_h3_video_forward",
    "mochi_fourier_forward",
    "music3_fourier_forward",
    "music3_rotary_forward",
    "omnigen_forward",
    "qwen21_timesteps_forward",
]


def qwen21_timesteps_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
    """``QwenImage21TemporalTimesteps.forward``: ``[cos | sin]`` of
    ``time_factor * t * 10000^(-i/half)`` (its ``freqs`` checked at patch time)."""
    return timestep_embedding(
        timestep.float(),
        int(self.timestep_dim),
        flip_sin_to_cos=True,
        downscale_freq_shift=0,
        scale=float(self.time_factor),
    )


def check_qwen21_timesteps(module: Any) -> None:
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
        cos, sin = exact_cos_sin_table(ids, omegas)  # integer ids: one-word reduction
        parts.append((cos.view(*cells, -1), sin.view(*cells, -1)))
    out = []
    for i in (0, 1):
        grid = torch.cat([p[i].expand(height, width, -1) for p in parts], dim=-1)
        out.append(torch.cat([grid, grid], dim=-1).reshape(height * width, -1))
    return out[0], out[1]


def cogview4_forward(self: Any, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``CogView4RotaryPosEmbed.forward``: ids spread over ``rope_axes_dim``."""
    _, _, height, width = hidden_states.shape
    p = self.patch_size
    return _hw_rotary(self, height // p, width // p, tuple(self.rope_axes_dim))


def glm_image_forward(self: Any, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``GlmImageRotaryPosEmbed.forward``: CogView4's with the ids themselves."""
    _, _, height, width = hidden_states.shape
    return _hw_rotary(self, height // self.patch_size, width // self.patch_size, None)


def hunyuan_video_forward(
    self: Any, hidden_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``HunyuanVideoRotaryPosEmbed.forward``: ``[t | h | w]`` of the latent grid, each
    axis's frequencies interleaved twice; the cos/sin of each axis's integer ids once
    (one row per id, not per grid cell), then spread over the grid."""
    _, _, frames, height, width = hidden_states.shape
    p, pt = self.patch_size, self.patch_size_t
    sizes = (frames // pt, height // p, width // p)
    device = hidden_states.device
    cos, sin = [], []
    for axis, (n, dim) in enumerate(zip(sizes, self.rope_dim, strict=True)):
        ids = torch.arange(n, device=device)
        c, s = word_cos_sin(ids, inverse_frequencies(dim, self.theta))
        shape = [1, 1, 1, dim]
        shape[axis] = n
        cos.append(c.repeat_interleave(2, dim=-1).view(shape).expand(*sizes, dim))
        sin.append(s.repeat_interleave(2, dim=-1).view(shape).expand(*sizes, dim))
    count = sizes[0] * sizes[1] * sizes[2]
    return torch.cat(cos, dim=-1).view(count, -1), torch.cat(sin, dim=-1).view(count, -1)


def cosmos_forward(
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


def ltx_forward(
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
        if rope_interpolation_scale is None:
            bases = (1.0, 1.0, 1.0)
        else:
            patches = (self.patch_size_t, self.patch_size, self.patch_size)
            bases = tuple(
                b / (_real_scale(s) * p)
                for b, s, p in zip(bases, rope_interpolation_scale, patches, strict=True)
            )
        # each axis's integer ids reduced once, then spread over the grid
        count = sizes[0] * sizes[1] * sizes[2]
        axes = []
        for axis, (n, base) in enumerate(zip(sizes, bases, strict=True)):
            ids = torch.arange(n, device=device)
            shape = [1, 1, 1, len(ws)]
            shape[axis] = n
            axes.append(
                tuple(
                    x.view(shape).expand(*sizes, -1).reshape(1, count, -1).expand(batch, -1, -1)
                    for x in _ltx_axis(ids, ws, float(base))
                )
            )
    else:
        coords = [video_coords[:, i] for i in range(3)]
        axes = [_ltx_axis(c, ws, float(b)) for c, b in zip(coords, bases, strict=True)]
    return _interleaved(axes, self.dim, 6)  # type: ignore[arg-type]


def ltx2_forward(
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


def ltx2_vae_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
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


def helios_forward(
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


def omnigen_forward(
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


def audio_dit_forward(
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


def check_inv_freq(module: Any) -> dict[str, Any]:
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


def anima_forward(
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


def cosmos3_text_forward(
    self: Any, position_ids: torch.Tensor, device: Any, dtype: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``Cosmos3VLTextRotaryEmbedding.forward``."""
    if position_ids.ndim == 2:
        position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
    cos, sin = _interleaved_mrope(self, position_ids.to(device), tuple(self.rope_axes_dim))
    return cos.to(dtype), sin.to(dtype)


def ideogram4_forward(self: Any, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``Ideogram4MRoPE.forward``."""
    if position_ids.ndim != 3 or position_ids.shape[-1] != 3:
        raise ValueError(
            f"`position_ids` must have shape (B, L, 3), got {tuple(position_ids.shape)}."
        )
    return _interleaved_mrope(self, position_ids.permute(2, 0, 1), tuple(self.mrope_section))


def minimax_h3_forward(self: Any, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxH3RotaryPosEmbed.forward``: ``[t | h | w | t | h | w]``."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.float())  # (N, 3, n)
    cos, sin = cos.flatten(-2), sin.flatten(-2)
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def minimax_h3_video_forward(
    self: Any, position_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxH3VideoRotaryPosEmbed.forward``: ``2 pi`` coordinates times ``inv_freq``,
    axes concatenated, tiled twice."""
    cos, sin = _inv_freq_cos_sin(self, position_ids.float(), 2.0 * math.pi)  # (B, N, A, n)
    return tuple(x.flatten(2, 3).tile(2).unsqueeze(2) for x in (cos, sin))


def music3_rotary_forward(
    self: Any, seq_len: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``MiniMaxMusic3RotaryEmbedding.forward``."""
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)
    cos, sin = exact_cos_sin_table(pos, inverse_frequencies(self.rotary_dim, self.theta))
    return torch.cat([cos, cos], dim=-1).contiguous(), torch.cat([sin, sin], dim=-1).contiguous()


def music3_fourier_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
    """``MiniMaxMusic3FourierEmbedding.forward``: ``[cos | sin]`` of ``2 pi t w``."""
    return fourier_features(timestep.float(), self.weight[:, 0], order="cos_sin")


def expo_fourier_forward(self: Any, timestep: torch.Tensor) -> torch.Tensor:
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


def mochi_fourier_forward(self: Any, inputs: torch.Tensor) -> torch.Tensor:
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


def kandinsky_1d_forward(self: Any, pos: Any) -> torch.Tensor:
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


def kandinsky5_3d_forward(
    self: Any, shape: Any, pos: Any, scale_factor: Any = (1.0, 1.0, 1.0)
) -> torch.Tensor:
    batch, duration, height, width = shape
    axes = _kandinsky_3d_cos_sin(self, "args_", pos, scale_factor)
    sizes = (batch, duration, height, width)
    return _rope_matrices(*(_grid_cat([a[i] for a in axes], sizes) for i in (0, 1)))


def kandinsky6_3d_forward(self: Any, pos: Any, scale_factor: Any = (1.0, 1.0, 1.0)) -> torch.Tensor:
    sizes = tuple(int(p.shape[0]) for p in pos)
    axes = _kandinsky_3d_cos_sin(self, "angles_", pos, scale_factor)
    return _rope_matrices(*(_grid_cat([a[i] for a in axes], sizes) for i in (0, 1)))


def check_kandinsky(module: Any) -> None:
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
