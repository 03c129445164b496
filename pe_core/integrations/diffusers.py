"""Make a diffusers model, or every model of a pipeline, compute its positional
embeddings exactly.

diffusers forms the angles of its sinusoidal embeddings in float32 where the device or
the code asks for it: ``Timesteps`` (``get_timestep_embedding``: 0.083 rad off at
``scale=1000`` and timesteps near 1000), ``GaussianFourierProjection``
(``log(x) * W * 2pi`` in float32), and the rotary embeddings of its DiT and video
transformers, whose ``get_1d_rotary_pos_embed`` takes float64 frequencies on CPU and
CUDA but float32 ones on MPS and NPU (``maybe_adjust_dtype_for_device``), and float32
everywhere for HunyuanVideo, HunyuanImage and EasyAnimate.
:func:`patch_positional_embeddings` makes every such module of a model compute the
same formula with exactly reduced angles, on the device of its inputs, with no float64
needed there:

* modules whose ``forward`` calls diffusers' helpers (``Timesteps``, ``FluxPosEmbed``,
  ``HunyuanVideo15RotaryPosEmbed``, ...) get that very ``forward`` back, run with
  ``get_timestep_embedding`` / ``get_1d_rotary_pos_embed`` / ``get_3d_rotary_pos_embed``
  computed by :func:`pe_core.timestep_embedding` and pe_core's exact rotary reduction: the
  module's own code and arguments (``max_period`` as the module passes it, or not),
  exact helpers;
* modules that build their tables once (``WanRotaryPosEmbed`` and its copies,
  ``Lumina2RotaryPosEmbed``, QwenImage's ``QwenEmbedRope``) get exact tables, checked
  against their own at patch time;
* ``GaussianFourierProjection`` computes ``w log(x)`` in turns from ``log(x)`` as a
  64-bit fixed-point integer and its weights as int64 words (float64 accuracy on a
  float32 device, no float64 there);
* modules with a formula of their own (CogView4, Cosmos, LTX, LTX-2, Kandinsky,
  Helios, OmniGen, QwenImage 2.1's timesteps, ...), and ``HunyuanVideoRotaryPosEmbed``
  (each axis's ids reduced once rather than once per grid cell), get a forward restated with
  pe_core's exact angles, their stored tables or ``inv_freq`` checked at patch time
  against the formula.

Each patched module keeps its class, parameters and buffers' entries; the patch is a
plain instance attribute (never in ``state_dict()``), and
:func:`unpatch_positional_embeddings` gives back the original objects (the original
forward, the original table tensors): outputs are then bitwise the unpatched ones.
Positional modules of a kind not covered are refused with an error naming each of them
and why (``strict=False`` leaves them as they are, with a warning). Text encoders of a
pipeline are transformers models: see :mod:`pe_core.integrations.transformers`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, TypeVar

from torch import nn

# diffusers' helpers with exact numbers: public here, where they are documented
from pe_core.integrations._diffusers_helpers import (
    exact_get_1d_rotary_pos_embed as exact_get_1d_rotary_pos_embed,
)
from pe_core.integrations._diffusers_helpers import (
    exact_get_timestep_embedding as exact_get_timestep_embedding,
)
from pe_core.integrations._diffusers_modules import FORWARDS as _FORWARDS
from pe_core.integrations._diffusers_modules import METHODS as _METHODS
from pe_core.integrations._diffusers_modules import TABLES as _TABLES
from pe_core.integrations._diffusers_modules import class_key as _key  # noqa: F401 (benchmarks)
from pe_core.integrations._diffusers_modules import plan as _plan
from pe_core.integrations._diffusers_modules import positional_class as _positional_class
from pe_core.integrations._patching import patch, plan_all, unpatch

__all__ = [
    "covered_classes",
    "patch_positional_embeddings",
    "patched_positional_embeddings",
    "unpatch_positional_embeddings",
]

T = TypeVar("T")

#: The attribute a patched module keeps its patch in (a plain attribute: never in the
#: state dict).
_PATCH = "_pe_core_exact_positional"


def covered_classes() -> tuple[str, ...]:
    """The diffusers classes (``module.Class``) this integration patches.

    >>> "diffusers.models.embeddings.Timesteps" in covered_classes()
    True
    """
    return tuple(sorted({*_METHODS, *_TABLES, *_FORWARDS}))


def _models(target: Any) -> tuple[str, list[nn.Module]]:
    """The torch modules of a model or pipeline, and what to call it in errors."""
    name = type(target).__name__
    if isinstance(target, nn.Module):
        return name, [target]
    components = getattr(target, "components", None)
    if isinstance(components, dict):
        return name, [m for m in components.values() if isinstance(m, nn.Module)]
    raise TypeError(
        "model_or_pipeline must be a torch.nn.Module (a diffusers model) or a diffusers "
        f"pipeline (with .components). Received: {name}"
    )


def _patch(target: Any, strict: bool) -> list[nn.Module]:
    """Patch ``target``; the modules newly patched."""
    name, models = _models(target)
    found: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()
    for index, model in enumerate(models):
        prefix = "" if len(models) == 1 else f"component {index}: "
        for path, module in model.named_modules():
            if _positional_class(type(module)) and id(module) not in seen:
                seen.add(id(module))
                found.append((prefix + (path or "<model>"), module))
    if not found:
        raise ValueError(
            f"{name} has no Timesteps, GaussianFourierProjection or rotary-embedding "
            "module of diffusers: there is nothing to patch."
        )
    plans, refused = plan_all(found, _PATCH, _plan)
    if refused and strict:
        raise ValueError(
            f"{name} has positional modules patch_positional_embeddings does not cover "
            "(nothing was patched; strict=False patches the others): " + "; ".join(refused)
        )
    if refused:
        warnings.warn(
            f"{name}: left as diffusers computes them: " + "; ".join(refused),
            stacklevel=3,
        )
    for module, attributes, buffers in plans:
        patch(module, _PATCH, attributes, buffers)
    return [module for module, _, _ in plans]


def patch_positional_embeddings(model_or_pipeline: T, *, strict: bool = True) -> T:
    """Make every ``Timesteps``, ``GaussianFourierProjection`` and rotary embedding of a
    diffusers model (or of every model of a pipeline) compute exactly.

    In place. Each module computes its own formula, with diffusers' arguments, its
    angles reduced exactly on the device of its inputs: within 1e-6 of a float64
    evaluation of that formula (timesteps at ``scale=1000``, rotary positions to 1e4 and
    beyond), float32 on devices without float64. Outputs keep diffusers' shapes and
    dtypes; nothing enters ``state_dict()``; patching twice patches once;
    :func:`unpatch_positional_embeddings` gives back the original objects (bitwise the
    original outputs). No patched module reads its inputs back to the host, and the
    model runs under ``torch.compile(fullgraph=True)``.

    Parameters
    ----------
    model_or_pipeline : torch.nn.Module or diffusers pipeline
        A diffusers model (``UNet2DConditionModel``, ``FluxTransformer2DModel``, ...) or
        a pipeline: every ``torch.nn.Module`` of ``pipeline.components``.
    strict : bool, default True
        With positional modules of a kind this integration does not reproduce: raise
        (nothing patched), or, with ``False``, patch the others and warn naming them.

    Returns
    -------
    the model or pipeline itself.

    Raises
    ------
    TypeError
        Not a torch module nor a pipeline.
    ValueError
        No such module at all (the message names the class); or, with ``strict``, a
        positional module not covered (each named, with the reason).

    Examples
    --------
    >>> import torch
    >>> from diffusers import UNet2DModel
    >>> from pe_core.integrations.diffusers import (
    ...     patch_positional_embeddings, unpatch_positional_embeddings)
    >>> _ = torch.manual_seed(0)
    >>> unet = UNet2DModel(sample_size=8, in_channels=1, out_channels=1,
    ...     block_out_channels=(8, 8), layers_per_block=1, norm_num_groups=4,
    ...     down_block_types=("DownBlock2D", "DownBlock2D"),
    ...     up_block_types=("UpBlock2D", "UpBlock2D")).eval()
    >>> x = torch.randn(1, 1, 8, 8)
    >>> before = unet(x, 999).sample
    >>> unet = patch_positional_embeddings(unet)
    >>> bool(torch.allclose(unet(x, 999).sample, before, atol=1e-4))
    True
    >>> bool(torch.equal(unpatch_positional_embeddings(unet)(x, 999).sample, before))
    True
    """
    _patch(model_or_pipeline, strict)
    return model_or_pipeline


def unpatch_positional_embeddings(model_or_pipeline: T) -> T:
    """Give every module patched by :func:`patch_positional_embeddings` its original
    objects back (in place); returns the argument. Modules not patched are left alone.

    >>> import torch
    >>> unpatch_positional_embeddings(torch.nn.Linear(2, 2)).in_features
    2
    """
    _, models = _models(model_or_pipeline)
    for model in models:
        for module in model.modules():
            unpatch(module, _PATCH)
    return model_or_pipeline


@contextlib.contextmanager
def patched_positional_embeddings(model_or_pipeline: T, *, strict: bool = True) -> Iterator[T]:
    """:func:`patch_positional_embeddings` for the duration of a ``with`` block (modules
    patched before it stay patched).

    >>> import torch
    >>> from diffusers.models.embeddings import Timesteps
    >>> proj = Timesteps(8, True, 0, scale=1000)
    >>> with patched_positional_embeddings(proj):
    ...     exact = proj(torch.tensor([0.999]))
    >>> "forward" in vars(proj)
    False
    """
    patched = _patch(model_or_pipeline, strict)
    try:
        yield model_or_pipeline
    finally:
        for module in patched:
            unpatch(module, _PATCH)
