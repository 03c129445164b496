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

A module is patched only after a check at patch time: its own ``forward`` must give
transformers' standard cos/sin (``cat(freqs, freqs)``, cos and sin times the
attention factor; for M-RoPE modules, Qwen2-VL and its copies, the module's own
``recomposition_frequencies`` of the three rows of position ids) at position ids of
shape ``(1, n)`` and ``(3, 1, n)``, and its float32 ``inv_freq`` must equal pe_core's
frequencies to float32 rounding. A rotary embedding of another kind (Cohere's
interleaved layout, vision rotary embeddings) is refused with an error that names it:
nothing is patched then.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from pe_core._kernel.angles import exact_cos_sin, word64_constants
from pe_core.rope_scaling import rope_frequencies
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

    config: Any
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


@dataclass
class _Patch:
    forward: Any  # the instance's own "forward" attribute before patching, or None
    ropes: dict[str | None, _Rope]


def _frequencies(
    config: Any, layer_type: str | None, seq_len: int | None = None
) -> tuple[tuple[float, ...], float]:
    inv_freq, scale = rope_frequencies(config, seq_len=seq_len, layer_type=layer_type)
    return tuple(float(w) for w in inv_freq), float(scale)


def _is_rotary(module: nn.Module) -> bool:
    return type(module).__name__.endswith("RotaryEmbedding")


def _layer_types(module: nn.Module) -> list[str | None] | None:
    """The rope keys of a transformers rotary module, or ``None`` if it is of another kind."""
    rope_type = getattr(module, "rope_type", None)
    if getattr(module, "config", None) is None:
        return None
    try:
        params = list(inspect.signature(type(module).forward).parameters)[1:]
    except (TypeError, ValueError):
        return None
    if isinstance(rope_type, str):
        ok = params[:2] == ["x", "position_ids"] and isinstance(
            getattr(module, "inv_freq", None), torch.Tensor
        )
        return [None] if ok else None
    if isinstance(rope_type, dict) and rope_type:
        keys = sorted(rope_type)
        ok = params[:3] == ["x", "position_ids", "layer_type"] and all(
            isinstance(getattr(module, f"{key}_inv_freq", None), torch.Tensor) for key in keys
        )
        return list(keys) if ok else None
    return None


def _attr(module: nn.Module, layer_type: str | None, name: str) -> Any:
    prefix = "" if layer_type is None else f"{layer_type}_"
    return getattr(module, prefix + name, getattr(module, name, None))


def _standard_mismatch(module: nn.Module, layer_type: str | None) -> str | None:
    """Why ``module``'s own forward is not transformers' standard cos/sin (None if it is).

    Runs the undecorated forward (no dynamic/longrope update: no side effect) at a few
    positions and compares it with ``cat(f, f).cos() * attention_scaling``,
    ``f = position_ids[..., None] * inv_freq``, from the module's own buffers (M-RoPE:
    the module's ``recomposition_frequencies`` of ``f.cos() * attention_scaling``).
    """
    inv_freq = _attr(module, layer_type, "inv_freq")
    scale = _attr(module, layer_type, "attention_scaling")
    if not isinstance(scale, (int, float)):
        return "it has no attention_scaling"
    raw = getattr(type(module).forward, "__wrapped__", type(module).forward)
    n = _PROBE_POSITIONS
    steps = torch.arange(n, device=inv_freq.device)
    # (1, n), and (3, 1, n) with distinct rows: a module that mixes axes of its position
    # ids (M-RoPE's sections) computes something else there
    for pos in (steps[None], torch.stack((steps, 2 * steps + 1, 3 * steps + 2))[:, None]):
        reason = _probe(module, raw, layer_type, pos, inv_freq.float(), scale)
        if reason is not None:
            return reason
    return None


def _probe(
    module: nn.Module,
    raw: Any,
    layer_type: str | None,
    pos: torch.Tensor,
    inv_freq: torch.Tensor,
    scale: float,
) -> str | None:
    x = torch.zeros(1, dtype=torch.float32, device=inv_freq.device)
    args = (x, pos) if layer_type is None else (x, pos, layer_type)
    shape = tuple(pos.shape)
    try:
        with torch.no_grad():
            out = raw(module, *args)
    except Exception as error:  # any failure means "not the standard forward"
        return f"its forward fails on position_ids of shape {shape}: {error}"
    recompose = _recomposition(module)
    if recompose is not None and pos.ndim == 2:
        pos = pos.expand(3, -1, -1)
    freqs = pos[..., None].float() * inv_freq
    half = (freqs.cos() * scale, freqs.sin() * scale)
    expected = tuple(_full(part, recompose) for part in half)
    if not (isinstance(out, tuple) and len(out) == 2):
        return "its forward does not return (cos, sin)"
    for got, want in zip(out, expected, strict=True):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return (
                f"for position_ids of shape {shape} its forward returns cos/sin of another "
                f"shape than position_ids.shape + (2 * len(inv_freq),) = {tuple(want.shape)}"
            )
        if not torch.allclose(got.float(), want, rtol=0.0, atol=1e-6):
            return (
                "its forward does not compute cat(freqs, freqs).cos() * attention_scaling"
                if recompose is None
                else "its forward does not compute recomposition_frequencies(freqs.cos() "
                "* attention_scaling) of the position ids expanded to 3 rows"
            )
    return None


def _recomposition(module: nn.Module) -> Any:
    """M-RoPE (Qwen2-VL and its copies): the module's own ``recomposition_frequencies``
    (which picks each section's row of position ids and concatenates), else ``None``."""
    recompose = getattr(module, "recomposition_frequencies", None)
    return recompose if callable(recompose) and hasattr(module, "mrope_section") else None


def _full(half: torch.Tensor, recompose: Any) -> torch.Tensor:
    """cos or sin of the pairs, to transformers' full width."""
    return torch.cat((half, half), dim=-1) if recompose is None else recompose(half)


def _rope(module: Any, layer_type: str | None) -> _Rope:
    """Read one rope of ``module`` and check it against transformers' buffers."""
    config = module.config
    rope_type = str(module.rope_type if layer_type is None else module.rope_type[layer_type])
    omegas, scale = _frequencies(config, layer_type)
    theirs = _attr(module, layer_type, "original_inv_freq")
    if not isinstance(theirs, torch.Tensor):
        theirs = _attr(module, layer_type, "inv_freq")
    theirs_host = theirs.detach().double().cpu().numpy()  # once, at patch time
    their_scale = _attr(module, layer_type, "attention_scaling")
    name = type(module).__name__ + ("" if layer_type is None else f" ({layer_type!r})")
    if theirs_host.shape != (len(omegas),) or not np.allclose(
        theirs_host, omegas, rtol=_FREQ_RTOL, atol=0.0
    ):
        raise ValueError(
            f"{name}: its inv_freq (rope_type {rope_type!r}) differs from pe_core's "
            f"frequencies for its config beyond float32 rounding; not patched. "
            f"transformers: {theirs_host.tolist()}, pe_core: {list(omegas)}"
        )
    if not math.isclose(float(their_scale), scale, rel_tol=_FREQ_RTOL):
        raise ValueError(
            f"{name}: its attention_scaling {their_scale!r} differs from pe_core's "
            f"attention factor {scale!r} for its config; not patched."
        )
    rope = _Rope(config, layer_type, rope_type, omegas, scale)
    if rope_type == "longrope":
        params = config.rope_parameters
        params = params if layer_type is None else params[layer_type]
        limit = params.get("original_max_position_embeddings")
        if limit is None:  # transformers' forward reads it there too
            raise ValueError(
                f"{name}: rope_type 'longrope' needs original_max_position_embeddings in "
                f"the config's rope_parameters; not patched. Received: {dict(params)!r}"
            )
        limit = int(limit)
        rope.long = (*_frequencies(config, layer_type, seq_len=limit + 1), limit)
    elif "dynamic" in rope_type:
        rope.original_max = int(module.original_max_seq_len)
        rope.cached = int(_attr(module, layer_type, "max_seq_len_cached"))
        if rope.cached > rope.original_max:  # the module had grown before the patch
            rope.omegas, rope.scale = _frequencies(config, layer_type, seq_len=rope.cached)
    return rope


def _dynamic_update(rope: _Rope, position_ids: torch.Tensor) -> None:
    """transformers' ``dynamic_frequency_update``, mirrored on the rope (host read of
    ``max(position_ids)``, as transformers does)."""
    seq_len = int(position_ids.max()) + 1
    if seq_len > rope.cached:  # growth
        rope.omegas, rope.scale = _frequencies(rope.config, rope.layer_type, seq_len=seq_len)
        rope.cached = seq_len
        rope.tables = {}
    elif seq_len < rope.original_max and rope.cached > rope.original_max:  # reset
        rope.omegas, rope.scale = _frequencies(rope.config, rope.layer_type)
        rope.cached = rope.original_max
        rope.tables = {}


#: pe_core's torch namespace (this module imports torch anyway).
_TORCH = get_namespace("torch")


#: Integer position dtypes of the one-word route (int32 promotes to int64 there).
_WORD_DTYPES = (torch.int64, torch.int32)

#: Most positions whose cos/sin are computed at full width (the constants repeated:
#: fewest operations, decode steps); more positions compute the pairs once and
#: concatenate (half the sin/cos work, prefill).
_FULL_WIDTH_MAX = 256

#: Radians per unit of the wrapped int64 word (``2pi / 2**64``, exact scaling).
_RADIANS_PER_WORD = 2.0 * math.pi / 2.0**64


def _word_tables(
    rope: _Rope, which: int, device: torch.device, dtype: torch.dtype, full: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The int64 words ``F`` and the rests ``2pi g`` of
    :func:`~pe_core._kernel.angles.word64_constants` as tensors on ``device``: built
    once per device, dtype and width (eager), inline when compiling (graph constants)."""
    key = (which, device, dtype, full)
    found = rope.tables.get(key)
    if found is not None:
        return found
    omegas = rope.omegas if which == 0 else rope.long[0]  # type: ignore[index]
    words, rests = word64_constants(omegas)
    radians = [2.0 * math.pi * g for g in rests]
    if full:
        words, radians = words * 2, radians * 2
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
    rope: _Rope, which: int, position_ids: torch.Tensor, dtype: torch.dtype, full: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of one frequency set of ``rope`` (0: its own, 1: longrope's long set)."""
    omegas, scale = (rope.omegas, rope.scale) if which == 0 else rope.long[:2]  # type: ignore[index]
    if position_ids.dtype in _WORD_DTYPES:
        tables = _word_tables(rope, which, position_ids.device, dtype, full)
        return _word_cos_sin(position_ids, tables, scale)
    working = "float64" if dtype == torch.float64 else "float32"
    cos, sin = exact_cos_sin(_TORCH, position_ids, omegas, working=working, scale=scale)
    return (torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)) if full else (cos, sin)


class _ExactForward:
    """The ``forward`` of a patched module: a plain object (copied by ``copy.deepcopy``,
    pickled with the module), never a parameter or buffer."""

    def __init__(self, name: str, ropes: dict[str | None, _Rope], recompose: Any) -> None:
        self.name = name
        self.ropes = ropes
        self.recompose = recompose  # M-RoPE: the module's recomposition_frequencies

    def __call__(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rope = self.ropes.get(layer_type)
        if rope is None:
            raise ValueError(
                f"{self.name} (patched by pe_core) has ropes for layer_type in "
                f"{sorted(map(str, self.ropes))}. Received: layer_type={layer_type!r}"
            )
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        recompose = self.recompose
        if recompose is not None and position_ids.ndim == 2:
            position_ids = position_ids.expand(3, -1, -1)  # text-only M-RoPE ids
        full = recompose is None and position_ids.numel() <= _FULL_WIDTH_MAX
        if rope.long is not None:  # longrope: long factors past the original length
            short = _cos_sin(rope, 0, position_ids, dtype, full)
            long = _cos_sin(rope, 1, position_ids, dtype, full)
            use_long = torch.max(position_ids) + 1 > rope.long[2]
            cos = torch.where(use_long, long[0], short[0])
            sin = torch.where(use_long, long[1], short[1])
        else:
            if rope.original_max:
                _dynamic_update(rope, position_ids)
            cos, sin = _cos_sin(rope, 0, position_ids, dtype, full)
        if not full:
            cos, sin = _full(cos, recompose), _full(sin, recompose)
        if x.dtype != dtype:
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
    plans: list[tuple[nn.Module, dict[str | None, _Rope]]] = []
    refused: list[str] = []
    for path, module in found:
        if _PATCH in vars(module):
            continue
        name = f"{type(module).__name__} at {path or '<model>'!r}"
        layer_types = _layer_types(module)
        if layer_types is None:
            refused.append(f"{name}: not a transformers text rotary embedding")
            continue
        reasons = [r for lt in layer_types if (r := _standard_mismatch(module, lt)) is not None]
        if reasons:
            refused.append(f"{name}: {reasons[0]}")
            continue
        plans.append((module, {lt: _rope(module, lt) for lt in layer_types}))
    if refused:
        raise ValueError(
            f"{type(model).__name__} has rotary embeddings patch_rotary_embeddings does "
            "not cover (nothing was patched): " + "; ".join(refused)
        )
    for module, ropes in plans:
        own = vars(module).get("forward")
        object.__setattr__(module, _PATCH, _Patch(own, ropes))
        object.__setattr__(
            module, "forward", _ExactForward(type(module).__name__, ropes, _recomposition(module))
        )
    return [module for module, _ in plans]


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
        this function does not cover (vision rotary embeddings, a forward that
        is not transformers' standard cos/sin) or disagrees with pe_core's frequencies
        for its config. The message names the module; no module is patched then.

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
