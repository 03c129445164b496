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
  ``HunyuanVideoRotaryPosEmbed``, ...) get that very ``forward`` back, run with
  ``get_timestep_embedding`` / ``get_1d_rotary_pos_embed`` / ``get_3d_rotary_pos_embed``
  computed by :func:`pe_core.timestep_embedding` and pe_core's exact rotary kernel: the
  module's own code and arguments (``max_period`` as the module passes it, or not),
  exact helpers;
* modules that build their tables once (``WanRotaryPosEmbed`` and its copies,
  ``Lumina2RotaryPosEmbed``) get exact tables, checked against their own at patch time;
* ``GaussianFourierProjection`` gets :func:`pe_core.fourier_features` of its weight,
  with ``log(x)`` carried as a float32 pair (float64 accuracy on a float32 device).

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
import math
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from diffusers.models import embeddings as _embeddings
from torch import nn

from pe_core._kernel.angles import exact_cos_sin
from pe_core.fourier import fourier_features
from pe_core.timestep import timestep_embedding
from pe_core_backends import get_namespace

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

_TORCH = get_namespace("torch")

#: Devices where diffusers itself never computes in float64.
_NO_FLOAT64 = ("mps", "npu")

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


# -- exact helpers: diffusers' signatures, pe_core's numbers ---------------------------


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"{name} must be a real number (a Python or NumPy number, not a tensor) for "
            f"pe_core's exact rotary embedding. Received: {type(value).__name__}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite. Received: {value!r}")
    return value


def _rotary_frequencies(dim: int, theta: float, linear_factor: float) -> tuple[float, ...]:
    """diffusers' ``1 / theta ** (arange(0, dim, 2) / dim) / linear_factor`` in float64."""
    return tuple(1.0 / theta ** (i / dim) / linear_factor for i in range(0, dim, 2))


def exact_get_timestep_embedding(
    timesteps: torch.Tensor,
    embedding_dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1,
    scale: float = 1,
    max_period: int = 10000,
) -> torch.Tensor:
    """diffusers' ``get_timestep_embedding`` (same arguments, same defaults, float32
    result on the timesteps' device), computed by :func:`pe_core.timestep_embedding`.

    >>> import torch
    >>> exact_get_timestep_embedding(torch.tensor([0.5, 999.0]), 8, scale=1000).shape
    torch.Size([2, 8])
    """
    if getattr(timesteps, "ndim", None) != 1:
        raise ValueError(
            "timesteps must be a 1-D tensor (as diffusers' get_timestep_embedding "
            f"requires). Received shape: {tuple(getattr(timesteps, 'shape', ()))}"
        )
    return timestep_embedding(
        timesteps,
        embedding_dim,
        flip_sin_to_cos=bool(flip_sin_to_cos),
        downscale_freq_shift=downscale_freq_shift,
        scale=scale,
        max_period=max_period,
    )


def exact_get_1d_rotary_pos_embed(
    dim: int,
    pos: Any,
    theta: float = 10000.0,
    use_real: bool = False,
    linear_factor: float = 1.0,
    ntk_factor: float = 1.0,
    repeat_interleave_real: bool = True,
    freqs_dtype: torch.dtype = torch.float32,
) -> Any:
    """diffusers' ``get_1d_rotary_pos_embed`` (same arguments and outputs), with the
    angles ``pos * w`` reduced exactly by pe_core's kernel.

    The frequencies are diffusers' formula in float64; the positions are taken as given
    (the float32 values diffusers' modules pass are exact). With ``freqs_dtype=float64``
    (what diffusers asks for on CPU and CUDA) the angles are formed in float64, else in
    float32 (MPS, NPU, and the modules that ask for float32): within 1e-6 of float64 either
    way. Real outputs are float32; complex ones complex128 for float64, else complex64,
    as diffusers returns.

    >>> import torch
    >>> cos, sin = exact_get_1d_rotary_pos_embed(8, torch.tensor([0.0, 1e4]), use_real=True)
    >>> cos.shape, cos.dtype
    (torch.Size([2, 8]), torch.float32)
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2 or dim % 2:
        raise ValueError(f"dim must be an even integer >= 2. Received: {dim!r}")
    if isinstance(pos, (int, np.integer)) and not isinstance(pos, bool):
        pos = torch.arange(int(pos))
    if isinstance(pos, np.ndarray):
        pos = torch.from_numpy(pos)
    if not isinstance(pos, torch.Tensor) or pos.ndim != 1:
        raise ValueError(
            "pos must be an int, a 1-D NumPy array or a 1-D tensor (as diffusers' "
            f"get_1d_rotary_pos_embed requires). Received: {type(pos).__name__} of shape "
            f"{tuple(getattr(pos, 'shape', ()))}"
        )
    base = _real("theta", theta) * _real("ntk_factor", ntk_factor)
    omegas = _TORCH.host_constant(
        _rotary_frequencies, int(dim), base, _real("linear_factor", linear_factor)
    )
    wide = freqs_dtype == torch.float64 and pos.device.type not in _NO_FLOAT64
    cos, sin = exact_cos_sin(_TORCH, pos, omegas, working="float64" if wide else "float32")
    if not use_real:
        return torch.complex(cos, sin)
    cos, sin = cos.float(), sin.float()
    if repeat_interleave_real:
        return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def _rebind(function: Callable[..., Any], replacements: dict[str, Any]) -> Any:
    """``function`` with the names of ``replacements`` in its globals swapped: the same
    code, defaults and closure, run with the exact helpers."""
    namespace = dict(function.__globals__)
    namespace.update(replacements)
    rebound = types.FunctionType(
        function.__code__,
        namespace,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    rebound.__kwdefaults__ = function.__kwdefaults__
    rebound.__qualname__ = function.__qualname__
    rebound.__doc__ = function.__doc__
    return rebound


#: diffusers' helpers and pe_core's exact ones: a name is replaced in a function's
#: globals only where it is diffusers' own object.
_EXACT: dict[str, tuple[Any, Any]] = {
    "get_timestep_embedding": (
        _embeddings.get_timestep_embedding,
        exact_get_timestep_embedding,
    ),
    "get_1d_rotary_pos_embed": (
        _embeddings.get_1d_rotary_pos_embed,
        exact_get_1d_rotary_pos_embed,
    ),
}
# diffusers' own 3-D helper, calling the exact 1-D one (its grids are its own)
_EXACT["get_3d_rotary_pos_embed"] = (
    _embeddings.get_3d_rotary_pos_embed,
    _rebind(
        _embeddings.get_3d_rotary_pos_embed,
        {"get_1d_rotary_pos_embed": exact_get_1d_rotary_pos_embed},
    ),
)


def _exact_globals(function: Callable[..., Any]) -> dict[str, Any]:
    found = function.__globals__
    return {name: exact for name, (theirs, exact) in _EXACT.items() if found.get(name) is theirs}


# -- GaussianFourierProjection ---------------------------------------------------------

_LN2_HI = math.ldexp(round(math.log(2.0) * 2.0**16), -16)  # 16 bits: e * _LN2_HI exact
_LN2_LO = math.log(2.0) - _LN2_HI
_SQRT2 = math.sqrt(2.0)
#: 2 s^(2k+1) / (2k+1), k = 1..6: log(m) = 2 atanh(s) beyond its first term
#: (|s| <= 0.172: the next term is below 1e-12).
_ATANH = tuple(2.0 / (2 * k + 1) for k in range(1, 7))


def _two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    c = a * 4097.0  # Veltkamp: 12 + 12 bits of a float32
    high = c - (c - a)
    return high, a - high


def _log_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log(x)`` of float32 ``x`` as ``hi + lo`` within about 1e-12 relative (float32
    operations only): ``x = m 2^e`` read from the bits, ``log m = 2 atanh((m-1)/(m+1))``
    with the quotient in two words. NaN where ``x`` is not positive and finite (diffusers
    gives NaN features there too)."""
    valid = (x > 0) & torch.isfinite(x)
    tiny = x < 2.0**-126  # subnormal: scaled into the normal range first
    safe = torch.where(valid, torch.where(tiny, x * 2.0**24, x), torch.ones_like(x))
    bits = safe.view(torch.int32)
    e = ((bits >> 23) - 127 - torch.where(tiny, 24, 0)).to(torch.float32)
    m = ((bits & 0x7FFFFF) | 0x3F800000).view(torch.float32)  # [1, 2)
    big = m > _SQRT2
    m = torch.where(big, m * 0.5, m)
    e = e + big.to(torch.float32)
    a = m - 1.0  # exact (Sterbenz)
    b_hi, b_lo = _two_sum(torch.ones_like(m), m)
    s_hi = a / b_hi
    p = s_hi * b_hi
    sh, sl = _split(s_hi)
    bh, bl = _split(b_hi)
    p_err = ((sh * bh - p) + sh * bl + sl * bh) + sl * bl  # s_hi * b_hi - p, exactly
    s_lo = (((a - p) - p_err) - s_hi * b_lo) / b_hi
    u = s_hi * s_hi
    series = torch.full_like(u, _ATANH[-1])
    for c in reversed(_ATANH[:-1]):
        series = c + u * series
    tail = s_hi * u * series
    hi, err = _two_sum(e * _LN2_HI, 2.0 * s_hi)
    lo = err + (2.0 * s_lo + (tail + e * _LN2_LO))
    nan = torch.full_like(x, float("nan"))
    return torch.where(valid, hi, nan), torch.where(valid, lo, nan)


def _gaussian_fourier_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """``GaussianFourierProjection.forward`` with exactly reduced angles."""
    weight = self.weight
    dtype = torch.promote_types(x.dtype, weight.dtype)
    order: Literal["sin_cos", "cos_sin"] = "cos_sin" if self.flip_sin_to_cos else "sin_cos"
    if self.log and x.dtype == torch.float64:
        coords, freqs = torch.log(x), weight.double()
    elif self.log:
        hi, lo = _log_pair(x.float())
        coords, freqs = torch.stack((hi, lo), dim=-1), torch.stack((weight, weight)).float()
    else:
        coords, freqs = x, weight
        if coords.dtype in (torch.float16, torch.bfloat16):
            coords = coords.float()
        if freqs.dtype in (torch.float16, torch.bfloat16):
            freqs = freqs.float()
    return fourier_features(coords, freqs, order=order, dtype=dtype)


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
        use_real and like.device.type not in _NO_FLOAT64
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
    replaced by exact ones."""

    names: tuple[str, ...]
    build: Callable[[Any, torch.Tensor], tuple[Any, ...]]


def _lumina2_tables(module: Any, like: Any) -> tuple[Any, ...]:
    method = type(module)._precompute_freqs_cis
    rebound = _rebind(method, _exact_globals(method))
    return (rebound(module, module.axes_dim, module.axes_lens, module.theta),)


_WAN_REAL = _Tables(("freqs_cos", "freqs_sin"), lambda m, like: _wan_tables(m, like, True))
_WAN_COMPLEX = _Tables(("freqs",), lambda m, like: _wan_tables(m, like, False))
_LUMINA2 = _Tables(("freqs_cis",), _lumina2_tables)


# -- the covered classes ---------------------------------------------------------------

_T = "diffusers.models.transformers."

#: class -> the methods run with exact helpers (the module's own code), and instance
#: caches to empty while patched.
_METHODS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
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
}

#: class -> its tables, rebuilt exactly.
_TABLES: dict[str, _Tables] = {
    _T + "transformer_wan.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_wan_animate.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_video.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_skyreels_v2.SkyReelsV2RotaryPosEmbed": _WAN_REAL,
    _T + "transformer_chronoedit.ChronoEditRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_wm.SanaWMRotaryPosEmbed": _WAN_COMPLEX,
    _T + "transformer_lumina2.Lumina2RotaryPosEmbed": _LUMINA2,
}

#: class -> its forward, written here.
_FORWARDS: dict[str, Callable[..., Any]] = {
    "diffusers.models.embeddings.GaussianFourierProjection": _gaussian_fourier_forward,
}


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def covered_classes() -> tuple[str, ...]:
    """The diffusers classes (``module.Class``) this integration patches.

    >>> "diffusers.models.embeddings.Timesteps" in covered_classes()
    True
    """
    return tuple(sorted({*_METHODS, *_TABLES, *_FORWARDS}))


def _is_positional(module: nn.Module) -> bool:
    return _positional_class(type(module))


def _positional_class(cls: type) -> bool:
    """A diffusers class this integration patches, or one with a positional name
    (patched or refused)."""
    if _key(cls) in _METHODS or _key(cls) in _TABLES or _key(cls) in _FORWARDS:
        return True
    return cls.__module__.startswith("diffusers.") and any(
        word in cls.__name__ for word in _POSITIONAL_NAMES
    )


# -- patching --------------------------------------------------------------------------


@dataclass
class _Patch:
    """What a patch replaced on one module: instance attributes (their previous values;
    ``absent``: those the instance did not have) and buffers (the original tensors)."""

    attributes: dict[str, Any] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)


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
    own = _FORWARDS.get(_key(cls))
    if own is not None and name == "forward":
        return own
    function = getattr(cls, name)
    if hasattr(function, "__wrapped__"):
        raise ValueError(f"its {name} is wrapped by a decorator")
    replacements = _exact_globals(function)
    if not replacements:
        raise ValueError(f"its {name} calls none of diffusers' positional helpers")
    return _rebind(function, replacements)


def _plan_methods(module: nn.Module, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _ExactMethod(module, name) for name in names}


def _table_tolerance(module: nn.Module) -> float:
    """How far diffusers' own float32 tables may be from exact ones: a few float32
    roundings of the largest angle (positions below ``max_seq_len`` or the axes'
    lengths, frequencies at most 1 rad per position)."""
    longest = max(
        [int(getattr(module, "max_seq_len", 0) or 0)]
        + [int(n) for n in getattr(module, "axes_lens", ()) or ()]
    )
    return 1e-5 + 4.0 * longest * 2.0**-24


def _plan_tables(module: nn.Module, tables: _Tables) -> dict[str, Any]:
    current = [getattr(module, name) for name in tables.names]
    like = current[0][0] if isinstance(current[0], list) else current[0]
    new = tables.build(module, like)
    tolerance = _table_tolerance(module)
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
                    f"its {name} differs from pe_core's table for theta=10000 by {gap:.3g} "
                    f"(more than float32 rounding, {tolerance:.3g}): built with another "
                    "theta or layout"
                )
    return dict(zip(tables.names, new, strict=True))


def _plan(module: nn.Module) -> tuple[str, dict[str, Any]]:
    """How to patch ``module``: ("attributes" | "tables", values); ValueError: refused."""
    key = _key(type(module))
    if key in _METHODS:
        names, caches = _METHODS[key]
        values = _plan_methods(module, names)
        values.update({name: None for name in caches})
        return "attributes", values
    if key in _FORWARDS:
        return "attributes", _plan_methods(module, ("forward",))
    if key in _TABLES:
        return "tables", _plan_tables(module, _TABLES[key])
    bases = [_key(b) for b in type(module).__mro__[1:]]
    covered = [b for b in bases if b in _METHODS or b in _TABLES or b in _FORWARDS]
    if covered:
        raise ValueError(f"a subclass of {covered[0]} (not reviewed: it may change the formula)")
    raise ValueError("its formula is not one this integration reproduces (yet)")


def _apply(module: nn.Module, kind: str, values: dict[str, Any]) -> None:
    patch = _Patch()
    for name, value in values.items():
        if kind == "tables" and name in module._buffers:
            patch.buffers[name] = module._buffers[name]  # type: ignore[assignment]
            module._buffers[name] = value
        else:
            if name in vars(module):
                patch.attributes[name] = vars(module)[name]
            else:
                patch.absent.add(name)
            object.__setattr__(module, name, value)
    object.__setattr__(module, _PATCH, patch)


def _restore(module: nn.Module) -> None:
    patch = vars(module).pop(_PATCH, None)
    if patch is None:
        return
    for name in patch.absent:
        vars(module).pop(name, None)
    for name, old in patch.attributes.items():
        object.__setattr__(module, name, old)
    for name, old in patch.buffers.items():
        now = module._buffers.get(name)
        if now is not None and (now.device != old.device or now.dtype != old.dtype):
            old = old.to(device=now.device, dtype=now.dtype)  # moved or cast since
        module._buffers[name] = old


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
            if _is_positional(module) and id(module) not in seen:
                seen.add(id(module))
                found.append((prefix + (path or "<model>"), module))
    if not found:
        raise ValueError(
            f"{name} has no Timesteps, GaussianFourierProjection or rotary-embedding "
            "module of diffusers: there is nothing to patch."
        )
    plans: list[tuple[nn.Module, str, dict[str, Any]]] = []
    refused: list[str] = []
    for path, module in found:
        if _PATCH in vars(module):
            continue
        try:
            kind, values = _plan(module)
        except (ValueError, TypeError) as error:
            refused.append(f"{type(module).__name__} at {path!r}: {error}")
            continue
        plans.append((module, kind, values))
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
    for module, kind, values in plans:
        _apply(module, kind, values)
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
            _restore(module)
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
            _restore(module)
