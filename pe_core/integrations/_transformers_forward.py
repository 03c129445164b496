"""The ``forward`` of a patched transformers rotary module: exact cos/sin of its ropes.

Integer position ids take the one-word int64 reduction
(:func:`~pe_core._kernel.angles.word64_constants`), its constants built once per device,
dtype and width; other position ids the exact kernel
(:func:`~pe_core._kernel.angles.exact_cos_sin`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pe_core._kernel.angles import exact_cos_sin, word64_constants
from pe_core.integrations._transformers_probe import Layout, LearnedScale, Rope, arrange
from pe_core_backends import get_namespace

__all__ = ["ExactForward"]


def _dynamic_update(rope: Rope, position_ids: torch.Tensor) -> None:
    """transformers' ``dynamic_frequency_update``, mirrored on the rope (host read of
    ``max(position_ids)``, as transformers does)."""
    seq_len = int(position_ids.max()) + 1
    if seq_len > rope.cached:  # growth
        rope.omegas, rope.scale = rope.source(seq_len=seq_len)
        rope.cached = seq_len
        rope.tables = {}
    elif seq_len < rope.original_max and rope.cached > rope.original_max:  # reset
        rope.omegas, rope.scale = rope.source()
        rope.cached = rope.original_max
        rope.tables = {}


def _learned_update(rope: Rope) -> None:
    """A learned log-scale (Mistral Large 4's ``alpha``) changed since its frequencies
    were read (its id or version counter: loaded, trained): read again on the host."""
    parameter = rope.source.parameter()
    key = (id(parameter), parameter._version)
    if key != rope.learned:
        rope.omegas, rope.scale = rope.source()
        rope.learned = key
        rope.tables = {}


#: pe_core's torch namespace (this module imports torch anyway).
_TORCH = get_namespace("torch")


#: Integer position dtypes of the one-word route (int32 promotes to int64 there).
_WORD_DTYPES = (torch.int64, torch.int32)

#: Most positions whose cos/sin are computed at full width (the constants repeated:
#: fewest operations, decode steps); more positions compute the pairs once and
#: arrange them (half the sin/cos work, prefill).
_FULL_WIDTH_MAX = 256

#: Radians per unit of the wrapped int64 word (``2pi / 2**64``, exact scaling).
_RADIANS_PER_WORD = 2.0 * math.pi / 2.0**64


def _word_tables(
    rope: Rope, which: int, device: torch.device, dtype: torch.dtype, width: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The int64 words ``F`` and the rests ``2pi g`` of
    :func:`~pe_core._kernel.angles.word64_constants` as tensors on ``device``, arranged
    to ``width`` (``"pairs"``, ``"half"``, ``"interleaved"``): built once per device,
    dtype and width (eager), inline when compiling (graph constants)."""
    key = (which, device, dtype, width)
    found = rope.tables.get(key)
    if found is not None:
        return found
    omegas = rope.omegas if which == 0 else rope.long[0]  # type: ignore[index]
    words, rests = word64_constants(omegas)
    radians = [2.0 * math.pi * g for g in rests]
    if width == "half":
        words, radians = words * 2, radians * 2
    elif width == "interleaved":
        words = tuple(w for w in words for _ in (0, 1))
        radians = [r for r in radians for _ in (0, 1)]
    tables = (
        torch.tensor(words, dtype=torch.int64, device=device),
        torch.tensor(radians, dtype=dtype, device=device),
    )
    if not torch.compiler.is_compiling():
        rope.tables[key] = tables
    return tables


def _word_cos_sin(
    position_ids: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor], scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``scale * cos`` and ``scale * sin`` of integer positions, exactly reduced: the
    angle is ``wrap(p * F) * 2pi / 2**64 + p * 2pi g`` (int64 wrap-around, see
    :func:`~pe_core._kernel.angles.word64_constants`), within about 3e-7 rad in
    float32 (1e-15 in float64) for every int64 position."""
    words, radians = tables
    p = position_ids.unsqueeze(-1)
    angles = (p * words).to(radians.dtype).mul_(_RADIANS_PER_WORD)
    angles = angles.addcmul_(p.to(radians.dtype), radians)
    cos, sin = angles.cos(), angles.sin()
    if scale != 1.0:
        cos, sin = cos.mul_(scale), sin.mul_(scale)
    return cos, sin


def _cos_sin(
    rope: Rope, which: int, position_ids: torch.Tensor, dtype: torch.dtype, width: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of one frequency set of ``rope`` (0: its own, 1: longrope's long set), at
    ``width`` (``"pairs"``: one column per pair; ``"half"`` / ``"interleaved"``: the
    module's full width). The one place the tables are computed."""
    omegas, scale = (rope.omegas, rope.scale) if which == 0 else rope.long[:2]  # type: ignore[index]
    if position_ids.dtype in _WORD_DTYPES:
        tables = _word_tables(rope, which, position_ids.device, dtype, width)
        return _word_cos_sin(position_ids, tables, scale)
    working = "float64" if dtype == torch.float64 else "float32"
    cos, sin = exact_cos_sin(_TORCH, position_ids, omegas, working=working, scale=scale)
    if width == "pairs":
        return cos, sin
    return arrange(Layout(width), cos, sin, None)  # type: ignore[return-value]


class ExactForward:
    """The ``forward`` of a patched module: a plain object (copied by ``copy.deepcopy``,
    pickled with the module), never a parameter or buffer."""

    def __init__(
        self,
        name: str,
        ropes: dict[str | None, Rope],
        layouts: dict[str | None, Layout],
        recompose: dict[str | None, Any],
    ) -> None:
        self.name = name
        self.ropes = ropes
        self.layouts = layouts
        self.recompose = recompose  # per rope: the module's recomposition_frequencies

    def __call__(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | torch.Tensor:
        rope = self.ropes.get(layer_type)
        if rope is None:
            raise ValueError(
                f"{self.name} (patched by pe_core) has ropes for layer_type in "
                f"{sorted(map(str, self.ropes))}. Received: layer_type={layer_type!r}"
            )
        layout = self.layouts[layer_type]
        if isinstance(rope.source, LearnedScale):
            parameter = rope.source.parameter()
            if parameter.requires_grad and torch.is_grad_enabled():  # alpha's gradient
                module = rope.source.module
                return type(module).forward(module, x, position_ids)
            _learned_update(rope)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if layout.kind == "recompose" and layout.expand and position_ids.ndim == 2:
            position_ids = position_ids.expand(layout.expand, -1, -1)  # text-only M-RoPE ids
        full = layout.kind in ("half", "interleaved") and position_ids.numel() <= _FULL_WIDTH_MAX
        width = layout.kind if full else "pairs"
        if rope.long is not None:  # longrope: long factors past the original length
            short = _cos_sin(rope, 0, position_ids, dtype, width)
            long = _cos_sin(rope, 1, position_ids, dtype, width)
            use_long = torch.max(position_ids) + 1 > rope.long[2]
            cos = torch.where(use_long, long[0], short[0])
            sin = torch.where(use_long, long[1], short[1])
        else:
            if rope.original_max:
                _dynamic_update(rope, position_ids)
            cos, sin = _cos_sin(rope, 0, position_ids, dtype, width)
        if layout.kind == "complex":
            return torch.complex(cos, sin)
        if not full:
            cos, sin = arrange(layout, cos, sin, self.recompose[layer_type])
        if layout.cast and x.dtype != dtype:
            cos, sin = cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
        return cos, sin
