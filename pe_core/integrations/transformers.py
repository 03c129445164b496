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
as M-RoPE text models and vision towers, ids expanded to the module's own number of
rows; ``(sin, cos)`` of one column per pair, as GPT-J and CodeGen's tables, whose
frequencies are base 10000 over ``pos_embd_dim``), and its float32 ``inv_freq`` must
equal the float64 frequencies to float32 rounding: pe_core's for its config, else
transformers' own init function of the module run in float64
(:mod:`pe_core.integrations._hf_float64`). Three 2-D grid modules that take no
position ids are covered too (:mod:`pe_core.integrations._transformers_grid`): Llama 4's
vision table (rebuilt in float64), DINOv3's patch centres (DINOv3-ViT's and
Sapiens2's ``*RopePositionEmbedding``, EoMT-DINOv3) and
EfficientLoFTR's feature grid (float64 cos/sin per grid size). Mistral Large 4's
learned ``alpha`` (frequencies ``inv_freq * exp(alpha)``) is followed: its value is read
on the host at patch time and again when it changes, and its own forward runs while
alpha's gradient is wanted. The modules that build one table per sequence length
(``forward(hidden_states)``: the rotary speech encoders' ``*RotaryPositionalEmbedding``
of Wav2Vec2-Conformer, Wav2Vec2-BERT and SeamlessM4T, and CLVP's) compute it with
exactly reduced angles and cache it as they do
(:mod:`pe_core.integrations._transformers_sequence`). timm's rotary modules inside a
transformers model (PE-Video's ``TimmWrapper`` tower) are patched and unpatched by
:mod:`pe_core.integrations.timm` (which itself never imports timm).
A rotary embedding of another kind (other learned parameters, a module of another
library) is refused with an error that names it and the reason: nothing is patched then.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TypeVar

from torch import nn

from pe_core.integrations._patching import patch, unpatch
from pe_core.integrations._timm_modules import plan as timm_plan
from pe_core.integrations._timm_modules import rotary_class as timm_rotary_class
from pe_core.integrations._transformers_forward import ExactForward
from pe_core.integrations._transformers_grid import grid_plan
from pe_core.integrations._transformers_probe import plan, recomposition, rotary_modules
from pe_core.integrations._transformers_sequence import sequence_plan
from pe_core.integrations.timm import _unpatch as timm_unpatch

__all__ = ["patch_rotary_embeddings", "patched_rotary_embeddings", "unpatch_rotary_embeddings"]

ModelT = TypeVar("ModelT", bound=nn.Module)

#: The attribute a patched module keeps its patch in (a plain attribute: never in the
#: state dict, never saved).
_PATCH = "_pe_core_exact_rope"

#: The attribute :mod:`pe_core.integrations.timm` keeps its patch of a timm module in
#: (checked here without importing it).
_TIMM_PATCH = "_pe_core_exact_rotary"


def _check_model(model: Any) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module (a transformers model). Received: "
            f"{type(model).__name__}"
        )


def _timm_rotary_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The rotary modules of timm in ``model`` (a ``TimmWrapper`` tower, as PE-Video's),
    found by their class's module and name (the timm integration never imports timm)."""
    if not any(type(m).__module__.startswith("timm.") for m in model.modules()):
        return []
    return [(path, m) for path, m in model.named_modules() if timm_rotary_class(type(m))]


def _timm_plan(module: nn.Module) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """The timm integration's patch of a timm module, or why it refuses it."""
    try:
        return timm_plan(module), ""
    except (ValueError, TypeError) as error:
        return None, f"a module of timm that pe_core.integrations.timm does not cover: {error}"


def _patch(model: nn.Module) -> list[nn.Module]:
    """Patch ``model``'s rotary embeddings; the modules newly patched."""
    _check_model(model)
    timm = _timm_rotary_modules(model)
    of_timm = {id(m) for _, m in timm}
    found = [(p, m) for p, m in rotary_modules(model) if id(m) not in of_timm] + timm
    if not found:
        raise ValueError(
            f"{type(model).__name__} has no rotary embedding (no submodule whose class "
            "name contains 'RotaryEmbedding' or ends with 'RopePositionEmbedding' or "
            "'RotaryPositionalEmbedding', no rotary module of timm): there is nothing "
            "to patch."
        )
    plans: list[tuple[nn.Module, str, dict[str, Any], dict[str, Any]]] = []
    refused: list[str] = []
    for path, module in found:
        record = _TIMM_PATCH if id(module) in of_timm else _PATCH
        if record in vars(module):
            continue
        name = f"{type(module).__name__} at {path or '<model>'!r}"
        try:
            if record == _TIMM_PATCH:
                planned, why = _timm_plan(module)
            else:
                planned, why = grid_plan(module)
                if planned is None and not why:
                    planned, why = sequence_plan(module)
                if planned is None and not why:
                    planned, why = _rope_plan(module)
        except Exception as error:
            planned, why = None, f"reading it failed: {type(error).__name__}: {error}"
        if planned is None:
            refused.append(f"{name}: {why}")
            continue
        plans.append((module, record, *planned))
    if refused:
        raise ValueError(
            f"{type(model).__name__} has rotary embeddings patch_rotary_embeddings does "
            "not cover (nothing was patched): " + "; ".join(refused)
        )
    for module, record, attributes, buffers in plans:
        patch(module, record, attributes, buffers)
    return [module for module, *_ in plans]


def _unpatch(module: nn.Module) -> None:
    """Unpatch one module (a timm module by the timm integration)."""
    unpatch(module, _PATCH)
    if _TIMM_PATCH in vars(module):
        timm_unpatch(module)


def _rope_plan(module: nn.Module) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """The patch of a module called with position ids: an :class:`ExactForward`."""
    planned, why = plan(module)
    if planned is None:
        return None, why
    ropes, layouts = planned
    recompose = {lt: recomposition(module, lt) for lt in ropes}
    return ({"forward": ExactForward(type(module).__name__, ropes, layouts, recompose)}, {}), ""


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
    _check_model(model)
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
