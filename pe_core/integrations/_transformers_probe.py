"""Reading a transformers rotary module at patch time: its rope keys, the layout of its
forward (probed), and where its float64 frequencies come from.

:func:`plan` gives the ropes and layouts :mod:`pe_core.integrations.transformers` patches
a module with, or why the module is not covered (nothing is patched then).
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from pe_core.integrations._hf_float64 import float64_init_functions, run_float64
from pe_core.rope_scaling import READ_CONFIG_KEYS, rope_frequencies

__all__ = [
    "Layout",
    "LearnedScale",
    "Rope",
    "arrange",
    "is_rotary",
    "plan",
    "recomposition",
    "rotary_modules",
]

#: Positions of the check at patch time.
_PROBE_POSITIONS = 16

#: Relative agreement of transformers' float32 ``inv_freq`` / attention factor with
#: pe_core's float64 ones (float32 rounding of a power: a few ulps).
_FREQ_RTOL = 1e-5


@dataclass
class Rope:
    """One rope of a module (one per layer type for per-layer-type modules)."""

    source: Any  # seq_len -> (omegas, scale): pe_core's frequencies or transformers' in float64
    layer_type: str | None  # the key of the config's rope, None for a single rope
    rope_type: str
    omegas: tuple[float, ...]
    scale: float
    long: tuple[tuple[float, ...], float, int] | None = None  # longrope: long set, limit
    original_max: int = 0  # dynamic: the module's original_max_seq_len
    cached: int = 0  # dynamic: the module's max_seq_len_cached (mirrored)
    learned: tuple[int, int] | None = None  # LearnedScale: its parameter's id and version
    # the constants of the int64 route on a device, per (set, device, dtype, width):
    # built on first use there, dropped when the frequencies change (dynamic)
    tables: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles rebuild the tables
        return {**vars(self), "tables": {}}


@dataclass(frozen=True)
class Layout:
    """How a module arranges the cos/sin of its pairs (found by probing its forward)."""

    kind: str  # one of _LAYOUTS
    expand: int = 0  # recompose: (batch, n) position ids are expanded to that many rows first
    cast: bool = True  # the module returns x.dtype (else float32, as vision towers do)


#: The layouts a module's forward may have, tried in this order: transformers' standard
#: ``cat(f, f)``, each frequency twice in a row (Cohere), one column per pair (GPT-OSS),
#: complex ``polar`` (DeepSeek-V2, Llama 4), the module's own
#: ``recomposition_frequencies`` of the pairs (M-RoPE, vision towers), ``(sin, cos)`` of
#: one column per pair (GPT-J, CodeGen: rows of their table).
_LAYOUTS = ("half", "interleaved", "pairs", "complex", "recompose", "sincos")

#: The base of GPT-J / CodeGen's ``create_sinusoidal_positions`` table.
_TABLE_BASE = 10000.0


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


#: Class-name suffixes of transformers' rotary modules besides ``*RotaryEmbedding*``:
#: DINOv3-ViT's and Sapiens2's ``*RopePositionEmbedding`` (DINOv3's 2-D grid); CLVP's,
#: Wav2Vec2-Conformer's, Wav2Vec2-BERT's and SeamlessM4T's ``*RotaryPositionalEmbedding``
#: (a table per sequence length).
_ROTARY_SUFFIXES = ("RopePositionEmbedding", "RotaryPositionalEmbedding")


def is_rotary(module: Any) -> bool:
    """Whether ``module``'s class is a transformers rotary module: its name contains
    ``RotaryEmbedding`` or ends with one of :data:`_ROTARY_SUFFIXES`."""
    name = type(module).__name__
    return "RotaryEmbedding" in name or name.endswith(_ROTARY_SUFFIXES)


def _layer_types(module: nn.Module) -> tuple[list[str | None] | None, str]:
    """The rope keys of a transformers rotary module, or ``None`` and why not."""
    rope_type = getattr(module, "rope_type", None)
    if getattr(module, "config", None) is None:
        owner = type(module).__module__
        if not owner.startswith("transformers."):  # timm's RotaryEmbeddingCat in TimmWrapper
            return None, (
                f"it has no config: a module of {owner.split('.')[0]!r}, not of "
                "transformers (its cos/sin are that library's own)"
            )
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
    if not isinstance(rope_type, str) and rope_type != {}:  # ESM's {}: its default rope
        return None, "it has no rope_type"
    return [None], ""


def _attr(module: nn.Module, layer_type: str | None, name: str) -> Any:
    prefix = "" if layer_type is None else f"{layer_type}_"
    return getattr(module, prefix + name, getattr(module, name, None))


def recomposition(module: nn.Module, layer_type: str | None) -> Any:
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


def _probe_positions(device: torch.device, rows: int = 3) -> list[torch.Tensor]:
    """(1, n); (3, 1, n), (2, n) and (2, 1, n) with distinct rows: a module that mixes the
    rows of its position ids (M-RoPE, vision towers) computes something else there than
    one that does not; and (rows, 1, n) with distinct rows for a module with more
    sections (HunYuan-VL's 4). A module that expands ids to its own number of rows
    (NeoMME's 2, HunYuan-VL's 4) fails on the other row counts, and with rows all
    alike computes what ``cat(f, f)`` does: only its own count of distinct rows tells."""
    steps = torch.arange(_PROBE_POSITIONS, device=device)
    shapes = [
        steps[None],
        torch.stack((steps, 2 * steps + 1, 3 * steps + 2))[:, None],
        torch.stack((steps, 2 * steps + 1)),
        torch.stack((steps, 2 * steps + 1))[:, None],
    ]
    if rows > 3:
        shapes.append(torch.stack([(k + 1) * steps + k for k in range(rows)])[:, None])
    return shapes


def arrange(
    layout: Layout, cos: torch.Tensor, sin: torch.Tensor, recompose: Any
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
    if kind == "sincos":
        return sin, cos
    return recompose(cos.clone()), recompose(sin.clone())


def _detect_layout(
    module: nn.Module,
    layer_type: str | None,
    inv_freq: torch.Tensor | None = None,
    scale: Any = None,
) -> tuple[Layout | None, str]:
    """The layout of ``module``'s own forward (None and why if it is none of _LAYOUTS).

    Runs the undecorated forward (no dynamic/longrope update: no side effect) at the
    probe positions and compares it with each layout of ``f.cos() * attention_scaling``,
    ``f = position_ids[..., None] * inv_freq`` from the module's own buffers (or the
    ``inv_freq`` and ``scale`` given: a table module's).
    """
    if inv_freq is None:
        inv_freq = _attr(module, layer_type, "inv_freq")
        scale = _attr(module, layer_type, "attention_scaling")
    inv_freq = inv_freq.float()
    if not isinstance(scale, (int, float)):
        return None, "it has no attention_scaling"
    raw = getattr(type(module).forward, "__wrapped__", type(module).forward)
    recompose = recomposition(module, layer_type)
    x = torch.zeros(1, dtype=torch.float64, device=inv_freq.device)
    candidates = [
        Layout(kind, expand)
        for kind in _LAYOUTS
        for expand in (_expand_rows(module) if kind == "recompose" else (0,))
        if kind != "recompose" or recompose is not None
    ]
    ran, failures = 0, []
    for pos in _probe_positions(inv_freq.device, max(_expand_rows(module))):
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
            Layout(c.kind, c.expand, cast)
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
            "recomposition_frequencies; (sin, cos) of one column per pair)"
        )
    return candidates[0], ""


def _expand_rows(module: nn.Module) -> tuple[int, ...]:
    """Rows a recomposing module may expand ``(batch, n)`` position ids to: none, 3 (M-RoPE's
    temporal, height, width), 2 (NeoMME's row and column), or one per section of its
    ``mrope_section`` (HunYuan-VL's 4)."""
    section = getattr(module, "mrope_section", None)
    rows = len(section) if isinstance(section, (list, tuple)) else 3
    return (0, 3, 2) if rows <= 3 else (0, 3, 2, rows)


def _expected(
    layout: Layout, pos: torch.Tensor, inv_freq: torch.Tensor, scale: float, recompose: Any
) -> Any:
    if layout.kind == "recompose" and layout.expand and pos.ndim == 2:
        pos = pos.expand(layout.expand, -1, -1)
    freqs = pos[..., None].float() * inv_freq
    try:
        return arrange(layout, freqs.cos() * scale, freqs.sin() * scale, recompose)
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


def _rope(module: Any, layer_type: str | None) -> tuple[Rope | None, str]:
    """Read one rope of ``module`` (None and why if its frequencies are not known)."""
    rope_type = module.rope_type if layer_type is None else module.rope_type[layer_type]
    rope_type = "default" if rope_type == {} else str(rope_type)
    source, why = _source(module, layer_type, rope_type)
    if source is None:
        return None, why
    omegas, scale = source()
    rope = Rope(source, layer_type, rope_type, omegas, scale)
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


def rotary_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(path, m) for path, m in model.named_modules() if is_rotary(m)]


def _table(module: nn.Module) -> tuple[torch.Tensor, dict[str, Any]] | None:
    """GPT-J / CodeGen's modules: no config, no ``inv_freq``, a ``(sin, cos)`` table
    ``embed_positions`` (``create_sinusoidal_positions``) over ``pos_embd_dim`` columns.
    Their float32 ``inv_freq`` (as transformers builds the table's) and the config
    mapping pe_core reads their frequencies from; None for other modules."""
    table, dim = getattr(module, "embed_positions", None), getattr(module, "pos_embd_dim", None)
    if not (isinstance(table, torch.Tensor) and table.ndim == 2 and isinstance(dim, int)):
        return None
    if dim % 2 or table.shape[1] != dim:
        return None
    steps = torch.arange(0, dim, 2, dtype=torch.int64, device=table.device)
    return 1.0 / (_TABLE_BASE ** (steps / dim)), {"rope_theta": _TABLE_BASE, "head_dim": dim}


def _table_plan(
    module: nn.Module, inv_freq: torch.Tensor, mapping: dict[str, Any]
) -> tuple[tuple[dict[str | None, Rope], dict[str | None, Layout]] | None, str]:
    """A table module's rope and layout: its forward must give the table's sin/cos of
    ``position_ids * inv_freq`` (checked as any module's), ``inv_freq`` pe_core's
    frequencies for base 10000 over ``pos_embd_dim`` to float32 rounding."""
    layout, why = _detect_layout(module, None, inv_freq, 1.0)
    if layout is None:
        return None, f"its cos/sin come from a table of its own: {why}"
    source = _PeCoreSource(mapping, None)
    omegas, scale = source()
    theirs = inv_freq.double().cpu().numpy()
    if len(omegas) != theirs.shape[0] or not np.allclose(theirs, omegas, rtol=_FREQ_RTOL):
        return None, "its table's frequencies differ from pe_core's for base 10000"
    return ({None: Rope(source, None, "default", omegas, scale)}, {None: layout}), ""


class LearnedScale:
    """The frequencies of a module with a learned log-scale per pair (Mistral Large 4's
    ``alpha``: ``w = inv_freq * exp(alpha)``): ``base``'s float64 frequencies times the
    float64 ``exp`` of the parameter's current value (read on the host)."""

    def __init__(self, base: Any, module: nn.Module, name: str) -> None:
        self.base, self.module, self.name = base, module, name

    def parameter(self) -> torch.Tensor:
        return getattr(self.module, self.name)

    def __call__(self, seq_len: int | None = None) -> tuple[tuple[float, ...], float]:
        omegas, scale = self.base(seq_len=seq_len)
        log_scale = self.parameter().detach().double().cpu().numpy()
        return tuple(float(w) for w in np.asarray(omegas) * np.exp(log_scale)), scale


def _learned(module: nn.Module, layer_types: list[str | None]) -> tuple[str | None, str]:
    """The name of the module's learned log-scale of its frequencies (``alpha``), ``""``
    if it has no parameter, or ``None`` and why its parameters are not covered."""
    learned = [name for name, _ in module.named_parameters(recurse=False)]
    if not learned:
        return "", ""
    inv_freq = getattr(module, "inv_freq", None)
    alpha = getattr(module, "alpha", None)
    if not (
        learned == ["alpha"]
        and layer_types == [None]
        and isinstance(inv_freq, torch.Tensor)
        and isinstance(alpha, torch.Tensor)
        and alpha.shape == inv_freq.shape
        and alpha.device.type != "meta"
    ):
        return None, (
            f"it has learned parameters ({', '.join(learned)}) that its forward may read: "
            "its frequencies are not its config's"
        )
    return "alpha", ""


def plan(
    module: nn.Module,
) -> tuple[tuple[dict[str | None, Rope], dict[str | None, Layout]] | None, str]:
    """The ropes and layouts of one module, or None and why it is not covered."""
    layer_types, why = _layer_types(module)
    learned, why_learned = _learned(module, layer_types or [None])
    if learned is None:
        return None, why_learned
    if layer_types is None:
        table = _table(module) if not learned else None
        return (None, why) if table is None else _table_plan(module, *table)
    ropes: dict[str | None, Rope] = {}
    layouts: dict[str | None, Layout] = {}
    for lt in layer_types:
        where = "" if lt is None else f"layer type {lt!r}: "
        if learned:  # the layout of inv_freq * exp(alpha), its float32 product
            effective = module.inv_freq.float() * getattr(module, learned).detach().float().exp()
            scale = _attr(module, lt, "attention_scaling")
            layout, why = _detect_layout(module, lt, effective, scale)
        else:
            layout, why = _detect_layout(module, lt)
        if layout is None:
            return None, where + why
        rope, why = _rope(module, lt)
        if rope is None:
            return None, where + why
        if learned:
            if rope.long is not None or rope.original_max:
                return None, (
                    f"it has a learned alpha with rope_type {rope.rope_type!r}, whose "
                    "frequencies change with the positions: not covered"
                )
            rope.source = LearnedScale(rope.source, module, learned)
            rope.omegas, rope.scale = rope.source()
            parameter = rope.source.parameter()
            rope.learned = (id(parameter), parameter._version)
        ropes[lt], layouts[lt] = rope, layout
    return (ropes, layouts), ""
