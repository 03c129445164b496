"""Make a Hugging Face transformers model use pe_core's exact RoPE cos/sin.

transformers' rotary-embedding modules (``LlamaRotaryEmbedding`` and its copies) form
the angle ``position_ids * inv_freq`` in float32 from a float32 ``inv_freq``: at
position ``1e5`` the fastest pairs are off by several milliradians, and the error grows
with the position. :func:`patch_rotary_embeddings` replaces, in place, the ``forward``
of every such module of a model by one that returns the cos/sin of the float64
frequencies of :func:`pe_core.rope_scaling.rope_frequencies` (read from the module's
config: every ``rope_type`` and per-layer-type rule transformers has), reduced exactly
by pe_core's integer kernel on the device of ``position_ids``, times the module's
attention factor, in the dtype transformers returns (``x.dtype``). The module keeps
its buffers, its state dict and its class; :func:`unpatch_rotary_embeddings` (or
leaving :func:`patched_rotary_embeddings`) gives back the original ``forward``.

Integer position ids (what transformers passes) take a one-word int64 reduction
(:func:`~pe_core._kernel.angles.word64_constants`) whose constants are built once per
device and dtype: a decode step costs what transformers' own forward costs.

Rules transformers applies per call are kept: ``longrope`` takes its long factors
when ``max(position_ids) + 1`` exceeds ``original_max_position_embeddings`` (chosen on
the device, no host read), ``dynamic`` grows its base with the longest sequence seen
and returns to the original one for short sequences (the module's own rule; it reads
``max(position_ids)`` on the host, as transformers does). Every other type reads
nothing back: the patched module runs under ``torch.compile(fullgraph=True)``.

A module is patched only after a check at patch time: its own ``forward``, run at
position ids of shapes ``(1, n)``, ``(3, 1, n)`` and ``(2, n)``, must give the cos/sin
of ``position_ids * inv_freq`` times its attention factor in a layout pe_core knows
(``cat(freqs, freqs)``; each frequency twice in a row, as Cohere; one column per pair,
as GPT-OSS; complex, as DeepSeek-V2; the module's own ``recomposition_frequencies``,
as M-RoPE text models and vision towers), and its float32 ``inv_freq`` must equal
the float64 frequencies to float32 rounding: pe_core's for its config, else
transformers' own init function of the module run in float64
(:mod:`pe_core.integrations._hf_float64`). A rotary embedding of another kind is
refused with an error that names it and the reason: nothing is patched then.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from pe_core._kernel.angles import exact_cos_sin, word64_constants
from pe_core.integrations._hf_float64 import float64_init_functions, run_float64
from pe_core.rope_scaling import READ_CONFIG_KEYS, rope_frequencies
from pe_core_backends import get_namespace

__all__ = ["patch_rotary_embeddings", "patched_rotary_embeddings", "unpatch_rotary_embeddings"]

ModelT = TypeVar("ModelT", bound=nn.Module)

#: The attribute a patched module keeps its patch in (a plain attribute: never in the
#: state dict, never saved).
_PATCH = "_pe_core_exact_rope"

#: Positions of the check at patch time.
_PROBE_POSITIONS = 16

#: Relative agreement of transformers' float32 ``inv_freq`` / attention factor with
#: pe_core's float64 ones (float32 rounding of a power: a few ulps).
_FREQ_RTOL = 1e-5


@dataclass
class _Rope:
    """One rope of a module (one per layer type for per-layer-type modules)."""

    source: Any  # seq_len -> (omegas, scale): pe_core's frequencies or transformers' in float64
    layer_type: str | None  # the key of the config's rope, None for a single rope
    rope_type: str
    omegas: tuple[float, ...]
    scale: float
    long: tuple[tuple[float, ...], float, int] | None = None  # longrope: long set, limit
    original_max: int = 0  # dynamic: the module's original_max_seq_len
    cached: int = 0  # dynamic: the module's max_seq_len_cached (mirrored)
    # the constants of the int64 route on a device, per (set, device, dtype, width):
    # built on first use there, dropped when the frequencies change (dynamic)
    tables: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles rebuild the tables
        return {**vars(self), "tables": {}}


@dataclass(frozen=True)
class _Layout:
    """How a module arranges the cos/sin of its pairs (found by probing its forward)."""

    kind: str  # one of _LAYOUTS
    expand: bool = False  # recompose: (batch, n) position ids are expanded to 3 rows first
    cast: bool = True  # the module returns x.dtype (else float32, as vision towers do)


#: The layouts a module's forward may have, tried in this order: transformers' standard
#: ``cat(f, f)``, each frequency twice in a row (Cohere), one column per pair (GPT-OSS),
#: ``(sin, cos)`` of one column per pair (GPT-J, CodeGen), complex ``polar`` (DeepSeek-V2,
#: Llama 4), the module's own ``recomposition_frequencies`` of the pairs (M-RoPE, vision
#: towers).
_LAYOUTS = ("half", "interleaved", "pairs", "complex", "recompose")


@dataclass
class _Patch:
    forward: Any  # the instance's own "forward" attribute before patching, or None
    ropes: dict[str | None, _Rope]


#: Rope-dict keys transformers' rotary modules never read (attention-side keys, such
#: as Llama 4 / Ministral 3's attention temperature): dropped before pe_core reads the dict.
_IGNORED_ROPE_KEYS = frozenset({"llama_4_scaling_beta"})


def _config_mapping(module: Any, layer_type: str | None, rope_type: str) -> dict[str, Any]:
    """The module's config as pe_core reads it: ``to_dict()``, plus the keys pe_core reads
    that the config holds as attributes only (transformers' ``attribute_map`` aliases,
    such as JetMoe's ``head_dim`` for ``kv_channels``), with the module's own rope type
    (a module may run another type than its config's, as Molmo2's unscaled one) and
    without the rope keys transformers' rotary modules ignore."""
    config = module.config
    out = dict(config.to_dict())
    for key in READ_CONFIG_KEYS:
        if key in ("rope_parameters", "rope_scaling") or out.get(key) is not None:
            continue
        try:
            value = getattr(config, key)
        except Exception:
            continue
        if isinstance(value, (int, float, str, list, tuple, dict)) and not isinstance(value, bool):
            out[key] = value
    params = out.get("rope_parameters")
    if isinstance(params, dict):
        if layer_type is not None and isinstance(params.get(layer_type), dict):
            params = {**params, layer_type: _own_rope(params[layer_type], rope_type)}
        elif layer_type is None or "rope_type" in params:
            params = _own_rope(params, rope_type)
        out["rope_parameters"] = params
    return out


def _own_rope(params: dict[str, Any], rope_type: str) -> dict[str, Any]:
    params = {k: v for k, v in params.items() if k not in _IGNORED_ROPE_KEYS}
    theirs = params.get("rope_type", params.get("type", "default"))
    if rope_type == theirs:
        return params
    kept = {"rope_theta", "partial_rotary_factor"} if rope_type == "default" else set(params)
    return {**{k: v for k, v in params.items() if k in kept}, "rope_type": rope_type}


def _frequencies(
    config: Any, layer_type: str | None, seq_len: int | None = None
) -> tuple[tuple[float, ...], float]:
    inv_freq, scale = rope_frequencies(config, seq_len=seq_len, layer_type=layer_type)
    return tuple(float(w) for w in inv_freq), float(scale)


class _PeCoreSource:
    """pe_core's frequencies for a config mapping (picklable)."""

    def __init__(self, mapping: dict[str, Any], layer_type: str | None) -> None:
        self.mapping, self.layer_type = mapping, layer_type

    def __call__(self, seq_len: int | None = None) -> tuple[tuple[float, ...], float]:
        return _frequencies(self.mapping, self.layer_type, seq_len)


class _Float64Source:
    """transformers' own init function of the module, evaluated in float64."""

    def __init__(self, function: Any, config: Any, layer_type: str | None) -> None:
        self.function, self.config, self.layer_type = function, config, layer_type

    def __call__(self, seq_len: int | None = None) -> tuple[tuple[float, ...], float]:
        inv_freq, scale = run_float64(self.function, self.config, self.layer_type, seq_len)
        return tuple(float(w) for w in inv_freq), scale


def _is_rotary(module: nn.Module) -> bool:
    return "RotaryEmbedding" in type(module).__name__


def _layer_types(module: nn.Module) -> tuple[list[str | None] | None, str]:
    """The rope keys of a transformers rotary module, or ``None`` and why not."""
    rope_type = getattr(module, "rope_type", None)
    if getattr(module, "config", None) is None:
        return None, "it has no config"
    try:
        params = list(inspect.signature(type(module).forward).parameters)[1:]
    except (TypeError, ValueError):
        return None, "its forward has no signature"
    if isinstance(rope_type, dict) and rope_type:
        keys = sorted(rope_type)
        if params[:3] != ["x", "position_ids", "layer_type"]:
            return (
                None,
                f"its forward takes ({', '.join(params)}), not (x, position_ids, layer_type)",
            )
        missing = [
            k for k in keys if not isinstance(getattr(module, f"{k}_inv_freq", None), torch.Tensor)
        ]
        if missing:
            return None, f"it has no {missing[0]}_inv_freq buffer"
        return list(keys), ""
    if params[:2] != ["x", "position_ids"]:
        return None, f"its forward takes ({', '.join(params)}), not (x, position_ids)"
    if not isinstance(getattr(module, "inv_freq", None), torch.Tensor):
        return None, "it has no inv_freq buffer (its cos/sin come from a table of its own)"
    if not isinstance(rope_type, str):
        return None, "it has no rope_type"
    return [None], ""


def _attr(module: nn.Module, layer_type: str | None, name: str) -> Any:
    prefix = "" if layer_type is None else f"{layer_type}_"
    return getattr(module, prefix + name, getattr(module, name, None))


def _recomposition(module: nn.Module, layer_type: str | None) -> Any:
    """The module's own ``recomposition_frequencies`` (M-RoPE and vision towers: it picks
    each section's row of position ids and concatenates), bound to ``layer_type`` if it
    takes one; else ``None``."""
    method = getattr(module, "recomposition_frequencies", None)
    if not callable(method):
        return None
    try:
        takes = len(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return None
    return functools.partial(method, layer_type=layer_type) if takes >= 2 else method


def _probe_positions(device: torch.device) -> list[torch.Tensor]:
    """(1, n); (3, 1, n) and (2, n) with distinct rows: a module that mixes the rows of
    its position ids (M-RoPE, vision towers) computes something else there than one
    that does not."""
    steps = torch.arange(_PROBE_POSITIONS, device=device)
    return [
        steps[None],
        torch.stack((steps, 2 * steps + 1, 3 * steps + 2))[:, None],
        torch.stack((steps, 2 * steps + 1)),
    ]


def _arrange(
    layout: _Layout, cos: torch.Tensor, sin: torch.Tensor, recompose: Any
) -> tuple[torch.Tensor, torch.Tensor] | torch.Tensor:
    """The module's output from the cos/sin of its pairs."""
    kind = layout.kind
    if kind == "half":
        return torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    if kind == "interleaved":
        return cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
    if kind == "pairs":
        return cos, sin
    if kind == "complex":
        return torch.complex(cos, sin)
    return recompose(cos.clone()), recompose(sin.clone())


def _detect_layout(module: nn.Module, layer_type: str | None) -> tuple[_Layout | None, str]:
    """The layout of ``module``'s own forward (None and why if it is none of _LAYOUTS).

    Runs the undecorated forward (no dynamic/longrope update: no side effect) at the
    probe positions and compares it with each layout of ``f.cos() * attention_scaling``,
    ``f = position_ids[..., None] * inv_freq`` from the module's own buffers.
    """
    inv_freq = _attr(module, layer_type, "inv_freq").float()
    scale = _attr(module, layer_type, "attention_scaling")
    if not isinstance(scale, (int, float)):
        return None, "it has no attention_scaling"
    raw = getattr(type(module).forward, "__wrapped__", type(module).forward)
    recompose = _recomposition(module, layer_type)
    x = torch.zeros(1, dtype=torch.float64, device=inv_freq.device)
    candidates = [
        _Layout(kind, expand)
        for kind in _LAYOUTS
        for expand in ((False, True) if kind == "recompose" else (False,))
        if kind != "recompose" or recompose is not None
    ]
    ran, failures = 0, []
    for pos in _probe_positions(inv_freq.device):
        args = (x, pos) if layer_type is None else (x, pos, layer_type)
        try:
            with torch.no_grad():
                out = raw(module, *args)
        except Exception as error:
            failures.append(f"{tuple(pos.shape)}: {type(error).__name__}: {error}")
            continue
        ran += 1
        cast = (out[0] if isinstance(out, tuple) else out).dtype == torch.float64
        candidates = [
            _Layout(c.kind, c.expand, cast)
            for c in candidates
            if _matches(out, _expected(c, pos, inv_freq, scale, recompose))
        ]
    if not ran:
        return None, "its forward fails on every probe shape of position_ids: " + "; ".join(
            failures
        )
    if not candidates:
        return None, (
            "its forward does not compute the cos/sin of position_ids * inv_freq times "
            "attention_scaling in a layout pe_core knows (cat(f, f); each frequency twice "
            "in a row; one column per pair; complex polar; the module's own "
            "recomposition_frequencies)"
        )
    return candidates[0], ""


def _expected(
    layout: _Layout, pos: torch.Tensor, inv_freq: torch.Tensor, scale: float, recompose: Any
) -> Any:
    if layout.kind == "recompose" and layout.expand and pos.ndim == 2:
        pos = pos.expand(3, -1, -1)
    freqs = pos[..., None].float() * inv_freq
    try:
        return _arrange(layout, freqs.cos() * scale, freqs.sin() * scale, recompose)
    except Exception:
        return None


def _matches(out: Any, want: Any) -> bool:
    if want is None:
        return False
    if isinstance(want, torch.Tensor):
        if not (isinstance(out, torch.Tensor) and out.is_complex() and out.shape == want.shape):
            return False
        return bool(
            torch.allclose(
                torch.view_as_real(out).double(),
                torch.view_as_real(want).double(),
                rtol=0.0,
                atol=1e-6,
            )
        )
    if not (isinstance(out, tuple) and len(out) == 2):
        return False
    for got, expect in zip(out, want, strict=True):
        if not isinstance(got, torch.Tensor) or got.shape != expect.shape or got.is_complex():
            return False
        if not torch.allclose(got.double(), expect.double(), rtol=0.0, atol=1e-6):
            return False
    return True


def _source(module: Any, layer_type: str | None, rope_type: str) -> tuple[Any, str]:
    """Where the module's float64 frequencies come from: pe_core's
    :func:`~pe_core.rope_scaling.rope_frequencies` of its config, else transformers' own
    init function in float64; each checked against the module's float32 ``inv_freq`` and
    ``attention_scaling``. ``(None, why)`` if neither agrees."""
    theirs = _attr(module, layer_type, "original_inv_freq")
    if not isinstance(theirs, torch.Tensor):
        theirs = _attr(module, layer_type, "inv_freq")
    theirs_host = theirs.detach().double().cpu().numpy()  # once, at patch time
    their_scale = float(_attr(module, layer_type, "attention_scaling"))
    tried: list[Any] = []
    why = []
    try:
        tried.append(_PeCoreSource(_config_mapping(module, layer_type, rope_type), layer_type))
    except Exception as error:
        why.append(f"its config: {error}")
    tried += [
        _Float64Source(fn, module.config, layer_type)
        for fn in float64_init_functions(module, rope_type)
    ]
    for source in tried:
        try:
            omegas, scale = source()
        except Exception as error:
            if isinstance(source, _PeCoreSource):
                why.append(f"pe_core's rope_frequencies: {error}")
            continue
        if (
            len(omegas) == theirs_host.shape[0]
            and np.allclose(theirs_host, omegas, rtol=_FREQ_RTOL, atol=0.0)
            and math.isclose(their_scale, scale, rel_tol=_FREQ_RTOL)
        ):
            return source, ""
        if isinstance(source, _PeCoreSource):
            why.append(
                f"its inv_freq / attention_scaling (rope_type {rope_type!r}) differ from "
                f"pe_core's frequencies for its config beyond float32 rounding "
                f"(transformers: {theirs_host.tolist()[:4]}..., {their_scale}; "
                f"pe_core: {list(omegas)[:4]}..., {scale})"
            )
    if len(tried) > 1 or not why:
        why.append("transformers' own init function run in float64 does not give its inv_freq")
    return None, "; ".join(why)


def _rope(module: Any, layer_type: str | None) -> tuple[_Rope | None, str]:
    """Read one rope of ``module`` (None and why if its frequencies are not known)."""
    rope_type = str(module.rope_type if layer_type is None else module.rope_type[layer_type])
    source, why = _source(module, layer_type, rope_type)
    if source is None:
        return None, why
    omegas, scale = source()
    rope = _Rope(source, layer_type, rope_type, omegas, scale)
    if rope_type == "longrope":
        params = getattr(module.config, "rope_parameters", None) or {}
        params = params if layer_type is None else params.get(layer_type, {})
        limit = params.get("original_max_position_embeddings")
        if limit is None:  # transformers' forward reads it there too
            return None, (
                "rope_type 'longrope' needs original_max_position_embeddings in the "
                f"config's rope_parameters. Received: {dict(params)!r}"
            )
        limit = int(limit)
        rope.long = (*source(seq_len=limit + 1), limit)
    elif "dynamic" in rope_type:
        rope.original_max = int(module.original_max_seq_len)
        rope.cached = int(_attr(module, layer_type, "max_seq_len_cached"))
        if rope.cached > rope.original_max:  # the module had grown before the patch
            rope.omegas, rope.scale = source(seq_len=rope.cached)
    return rope, ""


def _dynamic_update(rope: _Rope, position_ids: torch.Tensor) -> None:
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
    rope: _Rope, which: int, device: torch.device, dtype: torch.dtype, width: str
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
    rope: _Rope, which: int, position_ids: torch.Tensor, dtype: torch.dtype, width: str
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
    return _arrange(_Layout(width), cos, sin, None)  # type: ignore[return-value]


class _ExactForward:
    """The ``forward`` of a patched module: a plain object (copied by ``copy.deepcopy``,
    pickled with the module), never a parameter or buffer."""

    def __init__(
        self,
        name: str,
        ropes: dict[str | None, _Rope],
        layouts: dict[str | None, _Layout],
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
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if layout.kind == "recompose" and layout.expand and position_ids.ndim == 2:
            position_ids = position_ids.expand(3, -1, -1)  # text-only M-RoPE ids
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
            cos, sin = _arrange(layout, cos, sin, self.recompose[layer_type])
        if layout.cast and x.dtype != dtype:
            cos, sin = cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
        return cos, sin


def _rotary_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(path, m) for path, m in model.named_modules() if _is_rotary(m)]


def _patch(model: nn.Module) -> list[nn.Module]:
    """Patch ``model``'s rotary embeddings; the modules newly patched."""
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module (a transformers model). Received: "
            f"{type(model).__name__}"
        )
    found = _rotary_modules(model)
    if not found:
        raise ValueError(
            f"{type(model).__name__} has no rotary embedding (no submodule whose class "
            "name ends with 'RotaryEmbedding'): there is nothing to patch."
        )
    plans: list[tuple[nn.Module, dict[str | None, _Rope], dict[str | None, _Layout]]] = []
    refused: list[str] = []
    for path, module in found:
        if _PATCH in vars(module):
            continue
        name = f"{type(module).__name__} at {path or '<model>'!r}"
        try:
            plan, why = _plan(module)
        except Exception as error:
            plan, why = None, f"reading it failed: {type(error).__name__}: {error}"
        if plan is None:
            refused.append(f"{name}: {why}")
            continue
        plans.append((module, *plan))
    if refused:
        raise ValueError(
            f"{type(model).__name__} has rotary embeddings patch_rotary_embeddings does "
            "not cover (nothing was patched): " + "; ".join(refused)
        )
    for module, ropes, layouts in plans:
        own = vars(module).get("forward")
        object.__setattr__(module, _PATCH, _Patch(own, ropes))
        recompose = {lt: _recomposition(module, lt) for lt in ropes}
        forward = _ExactForward(type(module).__name__, ropes, layouts, recompose)
        object.__setattr__(module, "forward", forward)
    return [module for module, *_ in plans]


def _plan(
    module: nn.Module,
) -> tuple[tuple[dict[str | None, _Rope], dict[str | None, _Layout]] | None, str]:
    """The ropes and layouts of one module, or None and why it is not covered."""
    layer_types, why = _layer_types(module)
    if layer_types is None:
        return None, why
    ropes: dict[str | None, _Rope] = {}
    layouts: dict[str | None, _Layout] = {}
    for lt in layer_types:
        where = "" if lt is None else f"layer type {lt!r}: "
        layout, why = _detect_layout(module, lt)
        if layout is None:
            return None, where + why
        rope, why = _rope(module, lt)
        if rope is None:
            return None, where + why
        ropes[lt], layouts[lt] = rope, layout
    return (ropes, layouts), ""


def _unpatch(module: nn.Module) -> None:
    patch = vars(module).pop(_PATCH, None)
    if patch is None:
        return
    if patch.forward is None:
        del module.__dict__["forward"]
    else:
        object.__setattr__(module, "forward", patch.forward)


def patch_rotary_embeddings(model: ModelT) -> ModelT:
    """Make every rotary embedding of a transformers ``model`` compute exact cos/sin.

    In place: each rotary-embedding module (``LlamaRotaryEmbedding``,
    ``Qwen2RotaryEmbedding``, ``Phi3RotaryEmbedding``, ``GPTNeoXRotaryEmbedding``,
    ``Gemma3RotaryEmbedding`` with its per-layer-type ropes, ...) keeps its class, its
    buffers and its attributes; its ``forward(x, position_ids[, layer_type])`` is
    replaced by one that returns

        ``cos = attention_factor * cos(position_ids * w)``, ``sin`` likewise,
        each concatenated with itself (transformers' ``cat(freqs, freqs)``; M-RoPE
        modules such as ``Qwen2VLRotaryEmbedding``: recomposed by the module's own
        ``recomposition_frequencies`` from the three rows of position ids),

    with ``w`` the float64 frequencies of :func:`pe_core.rope_scaling.rope_frequencies`
    for the module's config and rope type, the angle reduced exactly on the device of
    ``position_ids`` (no host read, except ``dynamic``'s ``max(position_ids)``, which
    transformers reads too), computed in float32 (float64 for a float64 ``x``) and
    returned in ``x.dtype``. Nothing enters the state dict; a model patched twice is
    patched once.

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model (or any module holding transformers rotary embeddings).

    Returns
    -------
    torch.nn.Module
        ``model`` itself.

    Raises
    ------
    TypeError
        ``model`` is not a ``torch.nn.Module``.
    ValueError
        ``model`` has no rotary embedding; or one of its rotary embeddings is of a kind
        this function does not cover (no ``inv_freq`` buffer, another call signature,
        a forward in none of the layouts above) or whose frequencies disagree with the
        float64 ones for its config. The message names the module; no module is patched then.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> from pe_core.integrations.transformers import (
    ...     patch_rotary_embeddings, unpatch_rotary_embeddings)
    >>> _ = torch.manual_seed(0)
    >>> config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
    ...                      num_hidden_layers=1, num_attention_heads=2,
    ...                      num_key_value_heads=2)
    >>> model = LlamaForCausalLM(config).eval()
    >>> ids = torch.tensor([[1, 2, 3, 4]])
    >>> before = model(ids).logits
    >>> model = patch_rotary_embeddings(model)
    >>> bool(torch.allclose(model(ids).logits, before, atol=1e-5))
    True
    >>> far = model(ids, position_ids=torch.arange(10**5, 10**5 + 4)[None]).logits
    >>> unpatch_rotary_embeddings(model) is model
    True
    """
    _patch(model)
    return model


def unpatch_rotary_embeddings(model: ModelT) -> ModelT:
    """Give every rotary embedding of ``model`` patched by :func:`patch_rotary_embeddings`
    its original ``forward`` back (in place); returns ``model``.

    Modules that are not patched are left alone. transformers' own ``dynamic`` state
    (``max_seq_len_cached``, ``inv_freq``) is as it was before the patch.

    >>> import torch
    >>> unpatch_rotary_embeddings(torch.nn.Linear(2, 2)).in_features
    2
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module (a transformers model). Received: "
            f"{type(model).__name__}"
        )
    for module in model.modules():
        _unpatch(module)
    return model


@contextlib.contextmanager
def patched_rotary_embeddings(model: ModelT) -> Iterator[ModelT]:
    """:func:`patch_rotary_embeddings` for the duration of a ``with`` block.

    On exit the modules it patched get their original ``forward`` back (modules patched
    before the block stay patched).

    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
    ...                      num_hidden_layers=1, num_attention_heads=2)
    >>> model = LlamaForCausalLM(config).eval()
    >>> with patched_rotary_embeddings(model) as exact:
    ...     far = exact(torch.tensor([[1, 2]]), position_ids=torch.tensor([[10**6, 10**6 + 1]]))
    >>> "forward" in vars(model.model.rotary_emb)  # the original forward is back
    False
    """
    patched = _patch(model)
    try:
        yield model
    finally:
        for module in patched:
            _unpatch(module)
