"""Make a timm model's rotary position embeddings compute exactly.

timm builds the sin/cos tables of its axial rotary embeddings in float32: positions
(an index grid, a ``[-1, 1]`` pixel grid, DINOv3's centered grid, rescaled to a
``ref_feat_shape``) times frequency bands, then ``sin``/``cos``. The float32 product
loses the angle as the positions grow: on an unscaled index grid (RoPE-ViT, Qwen3-ViT)
the tables are 2e-6 off at 64 x 64 and 2e-5 at 512 x 512, with pixel bands 4e-5; grids
rescaled to a ``ref_feat_shape`` (EVA-02, PE) or normalized (DINOv3) stay within 6e-7.
:func:`patch_rotary_embeddings` makes every such module of a model compute its own
formula with exactly reduced angles (within 3e-7 of float64 at any grid size), on its
own device, with no float64 needed there:

* ``RotaryEmbedding`` and ``RotaryEmbeddingCat`` (EVA-02, the RoPE-ViTs
  ``vit_*_rope_*``, PE, Qwen3-ViT, DeepSeek-ViT; SAM-ViT and NaFlexViT built with
  rotary embeddings): pixel or
  language (``temperature``) bands, ``'index'``, ``'pixel'`` or ``'centered'`` grids,
  ``ref_feat_shape``, ``grid_offset``, ``grid_indexing``, interleaved or half
  (``rotate_half``) layout; their cached table, ``get_embed``, ``get_batch_embeds``
  and ``forward``;
* ``RotaryEmbeddingDinoV3`` (``vit_*_dinov3``): periods from ``temperature`` or
  ``min_period``/``max_period``, ``normalize_coords``, ``grid_offset``,
  ``grid_indexing``, in either layout;
* ``RotaryEmbeddingMRope``: the interleaved height/width/temporal channels;
* ``FourierEmbed``: the sin/cos of its pixel-grid Fourier features.

Training-time coordinate augmentation (``shift_coords``, ``jitter_coords``,
``rescale_coords``, active only while ``module.training``) draws random numbers in
timm's order: a patched module runs timm's own code then, unchanged. Learned
frequencies (``RotaryEmbeddingMixed``) and rotary modules with formulas of their own
are refused with an error naming each and why (``strict=False`` leaves them as they
are, with a warning).

Each patched module keeps its class, parameters and buffers' entries; the patch is a
plain instance attribute (never in ``state_dict()``), and
:func:`unpatch_rotary_embeddings` gives back the original objects: outputs are then
bitwise the unpatched ones. This module does not import timm: it recognizes timm's
classes by module and name.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TypeVar

from torch import nn

from pe_core.integrations._patching import patch, plan_all, unpatch
from pe_core.integrations._timm_modules import CLASSES as _CLASSES
from pe_core.integrations._timm_modules import plan as _plan
from pe_core.integrations._timm_modules import rebuild_cache as _rebuild_cache
from pe_core.integrations._timm_modules import rotary_class as _rotary_class

__all__ = [
    "covered_classes",
    "patch_rotary_embeddings",
    "patched_rotary_embeddings",
    "unpatch_rotary_embeddings",
]

T = TypeVar("T", bound=nn.Module)

#: The attribute a patched module keeps its patch in (never in the state dict).
_PATCH = "_pe_core_exact_rotary"


def covered_classes() -> tuple[str, ...]:
    """The timm classes (``module.Class``) this integration patches.

    >>> "timm.layers.pos_embed_sincos.RotaryEmbeddingCat" in covered_classes()
    True
    """
    return tuple(sorted(_CLASSES))


def _patch(model: nn.Module, strict: bool) -> list[nn.Module]:
    """Patch ``model``; the modules newly patched."""
    name = type(model).__name__
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a timm model). Received: {name}")
    found = [
        (path or "<model>", module)
        for path, module in model.named_modules()
        if _rotary_class(type(module))
    ]
    if not found:
        raise ValueError(
            f"{name} has no rotary-embedding module of timm: there is nothing to patch."
        )
    plans, refused = plan_all(found, _PATCH, _plan)
    if refused and strict:
        raise ValueError(
            f"{name} has rotary modules patch_rotary_embeddings does not cover (nothing "
            "was patched; strict=False patches the others): " + "; ".join(refused)
        )
    if refused:
        warnings.warn(f"{name}: left as timm computes them: " + "; ".join(refused), stacklevel=3)
    for module, attributes, buffers in plans:
        patch(module, _PATCH, attributes, buffers)
    return [module for module, _, _ in plans]


def patch_rotary_embeddings(model: T, *, strict: bool = True) -> T:
    """Make every rotary embedding of a timm model compute exactly.

    In place. Each module computes its own formula (its grid, bands or periods, layout
    and options), its angles reduced exactly on the device of its buffers: within 1e-6
    of a float64 evaluation of that formula at any feature shape, in float32. Outputs
    keep timm's shapes and dtypes; nothing enters ``state_dict()``; patching twice
    patches once; :func:`unpatch_rotary_embeddings` gives back the original objects
    (bitwise the original outputs). No patched module reads a tensor back to the host,
    and patched modules run under ``torch.compile(fullgraph=True)``. In training mode
    with coordinate augmentation on, timm's own code runs (its random draws).

    Parameters
    ----------
    model : torch.nn.Module
        A timm model (``timm.create_model(...)``) or any module holding timm's rotary
        modules.
    strict : bool, default True
        With rotary modules this integration does not reproduce (learned frequencies,
        formulas of their own): raise (nothing patched), or, with ``False``, patch the
        others and warn naming them.

    Returns
    -------
    the model itself.

    Raises
    ------
    TypeError
        Not a torch module.
    ValueError
        No timm rotary module at all (the message names the class); or, with
        ``strict``, a rotary module not covered (each named, with the reason).

    Examples
    --------
    >>> import torch
    >>> from timm.layers.pos_embed_sincos import RotaryEmbeddingCat
    >>> rope = RotaryEmbeddingCat(64, in_pixels=False, feat_shape=[2, 4096])
    >>> before = rope.get_embed()
    >>> rope = patch_rotary_embeddings(rope)
    >>> float((rope.get_embed() - before).abs().max()) > 1e-4  # timm's float32 angles
    True
    >>> torch.equal(unpatch_rotary_embeddings(rope).get_embed(), before)
    True
    """
    _patch(model, strict)
    return model


def unpatch_rotary_embeddings(model: T) -> T:
    """Give every module patched by :func:`patch_rotary_embeddings` its original
    objects back (in place); returns the model. Modules not patched are left alone.

    >>> import torch
    >>> unpatch_rotary_embeddings(torch.nn.Linear(2, 2)).in_features
    2
    """
    for module in model.modules():
        _unpatch(module)
    return model


def _unpatch(module: nn.Module) -> None:
    """Unpatch one module; a cached table resized while patched is rebuilt by timm."""
    if _PATCH not in vars(module):
        return
    then = vars(module).get("_pe_core_timm_feat_shape")
    now = getattr(module, "feat_shape", None)
    unpatch(module, _PATCH)
    if then is not None and now is not None and tuple(now) != then:
        _rebuild_cache(module)


@contextlib.contextmanager
def patched_rotary_embeddings(model: T, *, strict: bool = True) -> Iterator[T]:
    """:func:`patch_rotary_embeddings` for the duration of a ``with`` block (modules
    patched before it stay patched).

    >>> from timm.layers.pos_embed_sincos import RotaryEmbeddingDinoV3
    >>> rope = RotaryEmbeddingDinoV3(64)
    >>> with patched_rotary_embeddings(rope):
    ...     table = rope.get_embed([16, 16])
    >>> "_create_embed" in vars(rope), tuple(table.shape)
    (False, (256, 128))
    """
    patched = _patch(model, strict)
    try:
        yield model
    finally:
        for module in patched:
            _unpatch(module)
