"""PyTorch rotary kernel: the rotation of :func:`pe_core.rope.apply_rope` in place.

Used by :meth:`TorchNamespace.rotate_pairs` for eager calls without autograd on plain
tensors (any strides: transposed, sliced or broadcast views): a preallocated output and
in-place products and sums, and, for contiguous float16/bfloat16 on the CPU,
cache-sized float32 blocks. Everything runs on the device of the input; the factors
(``cos``, ``sin``) arrive as tensors there.

Every value is ``round(round(a * cos) - round(b * sin))`` and ``round(round(b * cos) +
round(a * sin))``, each product and sum its own correctly rounded operation: the bits of
the generic formula (:meth:`pe_core_backends.Namespace.rotate_pairs`, which autograd,
``torch.compile`` and the other backends run), whatever the layout of ``x``, its shape
or the CPU's vector width. A fused multiply-add (``torch.addcmul``) or a complex
multiply (``x`` viewed as complex) would be faster, but both round differently in the
vectorised body of a loop and in its scalar tail, so a transposed view, a shard or the
key of a ``(q, k)`` pair would differ from the contiguous whole by an ulp.
"""

from __future__ import annotations

import math
from typing import Any

import torch

#: Elements per block of the blocked CPU path for float16/bfloat16 inputs: each
#: block is widened into two float32 scratch buffers of 1 MiB that stay in cache.
_TORCH_BLOCK = 2**18
#: Most leading rows (heads) in one block: they share the block's cos/sin.
_BLOCK_GROUPS = 16


def fast_path_ok(x: Any) -> bool:
    """The in-place path: eager, no autograd, a plain tensor (any strides)."""
    if torch.compiler.is_compiling() or type(x) is not torch.Tensor:
        return False
    if torch.is_grad_enabled() and x.requires_grad:
        return False
    return x.dim() >= 1 and x.device.type != "meta"


def rotate(x: Any, cos: Any, sin: Any, layout: str, rotary_dim: int, working: str) -> Any:
    """The rotation with a preallocated output and in-place multiply-adds.

    ``cos`` and ``sin`` are tensors of shape ``P + (r/2,)`` in the working dtype on
    ``x``'s device, ``P`` broadcasting against ``x.shape[:-1]``. With ``(a, b)`` the
    pair halves (``x[..., :r/2]`` and ``x[..., r/2:]`` for the half layout,
    ``x[..., 0::2]`` and ``x[..., 1::2]`` for the interleaved one): ``out_a = a * cos``,
    ``out_a -= b * sin``, ``out_b = b * cos``, ``out_b += a * sin``, with one scratch
    buffer of half of ``x``'s size. The output has ``x``'s layout
    (:func:`torch.empty_like`). Contiguous float16/bfloat16 inputs on the CPU are widened
    to the working dtype block by block into scratch buffers that stay in cache
    (mixed-dtype kernels are slow on CPU), so only the input and the output cross memory.
    """
    shape = tuple(x.shape)
    half = rotary_dim // 2
    pos_shape = tuple(cos.shape[:-1])
    pshape = (1,) * (len(shape) - 1 - len(pos_shape)) + pos_shape
    factors = (cos.reshape(*pshape, half), sin.reshape(*pshape, half))
    wdtype = getattr(torch, working)
    out = torch.empty_like(x)
    plan = _block_plan(x, pshape) if x.dtype != wdtype else None
    scratch: dict[str, Any] = {}
    if plan is None:  # whole tensors: a few passes, broadcasting the factors
        _rotate_block(x, out, factors, layout, rotary_dim, wdtype, scratch)
        return out
    outer, shared, groups, group_step, seq_step = plan
    seq, dim = shape[-2], shape[-1]
    n_outer = math.prod(outer)
    per_outer = tuple(
        torch.broadcast_to(f, (*outer, *(1,) * shared, seq, f.shape[-1]))
        .reshape(n_outer, seq, f.shape[-1])
        .contiguous()
        for f in factors
    )
    xv = x.view(n_outer, groups, seq, dim)
    ov = out.view(n_outer, groups, seq, dim)
    for o in range(n_outer):
        for s in range(0, seq, seq_step):
            for g in range(0, groups, group_step):
                _rotate_block(
                    xv[o, g : g + group_step, s : s + seq_step],
                    ov[o, g : g + group_step, s : s + seq_step],
                    tuple(f[o, s : s + seq_step] for f in per_outer),
                    layout,
                    rotary_dim,
                    wdtype,
                    scratch,
                )
    return out


def rotate_small(x: Any, factors: Any, layout: str, rotary_dim: int) -> Any:
    """The rotation of a small eager float32 CPU tensor by host-built factors, or ``None``.

    ``factors`` is a :class:`~pe_core.rope_small.HostFactors`; its NumPy arrays become
    tensors without a copy (``torch.from_numpy``). ``None`` for anything else: tensors
    that autograd records, traced or wrapped tensors, other devices or dtypes.
    """
    if (
        not fast_path_ok(x)
        or x.dtype is not torch.float32
        or x.device.type != "cpu"
        or torch._C._functorch.is_functorch_wrapped_tensor(x)
    ):
        return None
    ndim, head_dim, half = x.dim(), x.shape[-1], rotary_dim // 2
    if layout == "half" and rotary_dim == head_dim:
        # x * [cos, cos] + roll(x, r/2) * [-sin, sin]: whole-tensor passes, the same
        # products and sums (same rounding) as the general kernel
        cos, signed_sin = factors.converted(
            ("torch-half", ndim),
            lambda: tuple(torch.from_numpy(f) for f in factors.half_layout(ndim)),
        )
        out = torch.mul(x, cos)
        return out.add_(torch.roll(x, half, -1).mul_(signed_sin))
    prepared = tuple(torch.from_numpy(a) for a in (factors.cos(ndim), factors.sin(ndim)))
    out = torch.empty_like(x)
    _rotate_block(x, out, prepared, layout, rotary_dim, torch.float32, {})
    return out


def _block_plan(x: Any, pshape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """How to cut a large CPU tensor into blocks of about ``_TORCH_BLOCK`` elements.

    ``x`` is viewed as ``(O, G, S, D)``: ``G`` merges the trailing leading axes along
    which the positions are broadcast (its blocks share one ``(S, ...)`` slab of
    factors), ``O`` the leading axes before them. ``None``: one pass over the whole
    tensor (small tensors, GPUs, or many tiny blocks as in decoding).
    """
    shape = tuple(x.shape)
    numel = x.numel()
    if x.device.type != "cpu" or len(shape) < 2 or numel <= 2 * _TORCH_BLOCK:
        return None
    if not x.is_contiguous():  # views are widened whole (the blocks view x's memory)
        return None
    n_lead = len(shape) - 2
    seq, dim = shape[-2], shape[-1]
    shared = 0
    while shared < n_lead and pshape[n_lead - 1 - shared] == 1:
        shared += 1
    outer = shape[: n_lead - shared]
    groups = math.prod(shape[n_lead - shared : n_lead])
    # Blocks span up to _BLOCK_GROUPS heads (sharing their cos/sin rows) and as many
    # positions as fit; heads vary fastest, so each slab of cos/sin stays in cache.
    group_step = min(groups, _BLOCK_GROUPS)
    seq_step = min(seq, max(1, _TORCH_BLOCK // (group_step * dim)))
    if seq_step == seq:
        group_step = min(groups, max(1, _TORCH_BLOCK // (seq * dim)))
    n_blocks = math.prod(outer) * -(-groups // group_step) * -(-seq // seq_step)
    if n_blocks * _TORCH_BLOCK > 4 * numel:
        return None
    return outer, shared, groups, group_step, seq_step


def _scratch(scratch: dict[str, Any], key: str, like: Any, dtype: Any) -> Any:
    """A reusable contiguous buffer of ``like``'s shape (one allocation per call)."""
    n = like.numel()
    buffer = scratch.get(key)
    if buffer is None or buffer.numel() < n:
        buffer = scratch[key] = torch.empty(n, dtype=dtype, device=like.device)
    return buffer[:n].view(like.shape)


def _rotate_block(
    x: Any,
    out: Any,
    factors: tuple[Any, ...],
    layout: str,
    rotary_dim: int,
    working: Any,
    scratch: dict[str, Any],
) -> None:
    head_dim, half = x.shape[-1], rotary_dim // 2
    if rotary_dim < head_dim:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
        x, out = x[..., :rotary_dim], out[..., :rotary_dim]
    widen = x.dtype != working
    if widen:
        x = _scratch(scratch, "x", x, working).copy_(x)
    target = _scratch(scratch, "out", x, working) if widen else out
    if layout == "half":
        a, b = x[..., :half], x[..., half:]
        out_a, out_b = target[..., :half], target[..., half:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out_a, out_b = target[..., 0::2], target[..., 1::2]
    cos, sin = factors
    # each product and sum rounded on its own: no addcmul (a fused multiply-add in the
    # vectorised body of the loop, not always in its tail), no complex multiply
    product = _scratch(scratch, "product", a, working)
    torch.mul(a, cos, out=out_a)
    out_a.sub_(torch.mul(b, sin, out=product))
    torch.mul(b, cos, out=out_b)
    out_b.add_(torch.mul(a, sin, out=product))
    if widen:
        out.copy_(target)
