"""timm's rotary modules with exact angles: which classes, their formulas restated in
float64 on the host, and the methods a patched module runs.

Every grid timm builds (``'index'``, ``'pixel'``, ``'centered'``, rescaled to a
``ref_feat_shape`` or not) is affine in the integer index ``i`` along each axis, so
every angle is ``i * omega + phase`` with ``omega`` and ``phase`` worked out in float64
on the host: pe_core's kernel reduces ``i * omega`` exactly and the constant phase is
added by the angle-sum formula (within about 2e-7 of the float64 values).
"""

from __future__ import annotations

import functools
import math
import types
from typing import Any

import torch

from pe_core._kernel.angles import exact_cos_sin
from pe_core_backends import get_namespace

__all__ = ["CLASSES", "REFUSED", "plan", "rebuild_cache", "rotary_class"]

_TORCH = get_namespace("torch")
_SINCOS = "timm.layers.pos_embed_sincos"

#: The classes patched (``module.Class``).
CLASSES = (
    f"{_SINCOS}.RotaryEmbedding",
    f"{_SINCOS}.RotaryEmbeddingCat",
    f"{_SINCOS}.RotaryEmbeddingDinoV3",
    f"{_SINCOS}.RotaryEmbeddingMRope",
    f"{_SINCOS}.FourierEmbed",
)

#: Rotary or Fourier modules of timm refused, and why.
REFUSED = {
    f"{_SINCOS}.RotaryEmbeddingMixed": (
        "its frequencies are learned parameters (freqs): there is no fixed formula to reproduce"
    ),
}


#: What a patched module of each class must have: the method the patch replaces and the
#: attributes its formula reads (timm 1.0.31's internals).
_AXIAL = (
    "_build_embed",
    "_build_embed_cat",
    "_update_cached_embed",
    "_compute_bands",
    "bands",
    "dim",
    "in_pixels",
    "max_res",
    "temperature",
    "linear_bands",
    "feat_shape",
    "ref_feat_shape",
    "grid_offset",
    "grid_indexing",
    "rotate_half",
    "grid_type",
    "normalize_coords",
    "aug_active",
)
_NEEDS = {
    "RotaryEmbedding": tuple(a for a in _AXIAL if a != "_build_embed_cat"),
    "RotaryEmbeddingCat": _AXIAL,
    "RotaryEmbeddingDinoV3": (
        "_create_embed",
        "_cache_embed",
        "periods",
        "dim",
        "temperature",
        "min_period",
        "max_period",
        "feat_shape",
        "pos_embed_cached",
        "grid_offset",
        "grid_indexing",
        "normalize_coords",
        "rotate_half",
        "aug_active",
    ),
    "FourierEmbed": ("forward", "bands", "max_res", "num_bands", "concat_grid", "keep_spatial"),
    "RotaryEmbeddingMRope": (
        "get_embed",
        "inv_freq",
        "axis",
        "dim",
        "mrope_section",
        "temperature",
        "grid_indexing",
        "aug_active",
    ),
}


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def rotary_class(cls: type) -> bool:
    """Whether ``cls`` is a rotary (or Fourier position) module of timm."""
    if not cls.__module__.startswith("timm.") or not issubclass(cls, torch.nn.Module):
        return False
    if any(_key(base) in CLASSES or _key(base) in REFUSED for base in cls.__mro__):
        return True
    name = cls.__name__.lower()
    return "rotary" in name or name.startswith("rope") or "ropeembed" in name


# -- float64 restatements of timm's frequencies (host) --------------------------------


def _linspace(start: float, stop: float, steps: int) -> list[float]:
    if steps == 1:
        return [start]
    return [start + (stop - start) * k / (steps - 1) for k in range(steps)]


def _bands64(module: Any) -> tuple[float, ...]:
    """``_build_bands`` of a ``RotaryEmbedding``/``RotaryEmbeddingCat`` in float64."""
    n = int(module.dim) // 4
    if module.in_pixels:
        max_freq = float(module.max_res)
        if module.linear_bands:
            bands = _linspace(1.0, max_freq / 2, n)
        else:
            bands = [2.0**e for e in _linspace(0.0, math.log2(max_freq) - 1, n)]
        return tuple(b * math.pi for b in bands)
    temperature = float(module.temperature)
    return tuple(1.0 / temperature ** (k / n) for k in range(n))


def _periods64(module: Any) -> tuple[float, ...]:
    """``RotaryEmbeddingDinoV3._compute_periods`` in float64."""
    n = int(module.dim) // 4
    if module.min_period is not None and module.max_period is not None:
        lo, hi = float(module.min_period), float(module.max_period)
        return tuple(lo * (hi / lo) ** e for e in _linspace(0.0, 1.0, n))
    if module.temperature is None:
        raise ValueError("it has neither min/max periods nor a temperature")
    t = float(module.temperature)
    return tuple(t ** (2.0 * k / (int(module.dim) // 2)) for k in range(n))


def _inv_freq64(module: Any) -> tuple[float, ...]:
    """``RotaryEmbeddingMRope._compute_inv_freq`` in float64."""
    dim, t = int(module.dim), float(module.temperature)
    return tuple(1.0 / t ** (k / dim) for k in range(0, dim, 2))


def _mrope_axes(dim: int, section: tuple[int, ...]) -> tuple[int, ...]:
    axes = [0] * (dim // 2)
    for c in range(1, min(section[1] * 3, dim // 2), 3):
        axes[c] = 1
    for c in range(2, min(section[2] * 3, dim // 2), 3):
        axes[c] = 2
    return tuple(axes)


def _axis_terms(
    feat_shape: tuple[int, ...],
    bands: tuple[float, ...],
    grid_type: str,
    ref_feat_shape: tuple[int, ...] | None,
    grid_offset: float,
    grid_indexing: str,
    normalize_coords: str,
) -> tuple[tuple[int, tuple[float, ...], tuple[float, ...], tuple[float, ...]], ...]:
    """Per coordinate channel of timm's ``_build_grid``: its spatial axis and, per band,
    ``omega`` and ``cos``/``sin`` of the phase (angle ``= index * omega + phase``)."""
    ndim = len(feat_shape)
    order = list(range(ndim))
    if grid_indexing == "xy" and ndim >= 2:
        order[0], order[1] = 1, 0
    if normalize_coords == "max":
        denoms = [float(max(feat_shape))] * ndim
    elif normalize_coords == "min":
        denoms = [float(min(feat_shape))] * ndim
    else:
        denoms = [float(s) for s in feat_shape]
    terms = []
    for axis in order:
        size = feat_shape[axis]
        if grid_type == "pixel":
            a, b = (2.0 / (size - 1) if size > 1 else 0.0), -1.0
        elif grid_type == "centered":
            a, b = 1.0 / denoms[axis], (0.5 + grid_offset) / denoms[axis]
        else:  # index
            a, b = 1.0, float(grid_offset)
        if ref_feat_shape is not None:
            a, b = a / size * ref_feat_shape[axis], b / size * ref_feat_shape[axis]
        if grid_type == "centered":
            a, b = 2.0 * a, 2.0 * b - 1.0
        omegas = tuple(a * w for w in bands)
        terms.append(
            (
                axis,
                omegas,
                tuple(math.cos(b * w) for w in bands),
                tuple(math.sin(b * w) for w in bands),
            )
        )
    return tuple(terms)


# -- exact tables (device) --------------------------------------------------------------


def _channel_sin_cos(
    feat_shape: tuple[int, ...],
    terms: tuple[tuple[int, tuple[float, ...], tuple[float, ...], tuple[float, ...]], ...],
    device: torch.device,
    working: str,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per coordinate channel, ``sin`` and ``cos`` (``(*feat_shape, bands)``), exactly."""
    ndim = len(feat_shape)
    out = []
    for axis, omegas, cos_phase, sin_phase in terms:
        index = torch.arange(feat_shape[axis], device=device, dtype=torch.int32)
        cos, sin = exact_cos_sin(_TORCH, index, omegas, working=working)
        cp = torch.tensor(cos_phase, dtype=cos.dtype, device=device)
        sp = torch.tensor(sin_phase, dtype=cos.dtype, device=device)
        cos, sin = cos * cp - sin * sp, sin * cp + cos * sp
        view = [1] * ndim + [len(omegas)]
        view[axis] = feat_shape[axis]
        full = [*feat_shape, len(omegas)]
        out.append((sin.reshape(view).expand(full), cos.reshape(view).expand(full)))
    return out


def _axial_sin_cos(
    feat_shape: tuple[int, ...],
    terms: tuple[tuple[int, tuple[float, ...], tuple[float, ...], tuple[float, ...]], ...],
    rotate_half: bool,
    device: torch.device,
    working: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 2 * ndim * bands) ``sin`` and ``cos`` in timm's layout, exactly."""
    channels = _channel_sin_cos(feat_shape, terms, device, working)
    sin = torch.cat([s for s, _ in channels], dim=-1).reshape(math.prod(feat_shape), -1)
    cos = torch.cat([c for _, c in channels], dim=-1).reshape(math.prod(feat_shape), -1)
    if rotate_half:
        return torch.cat([sin, sin], dim=-1), torch.cat([cos, cos], dim=-1)
    return sin.repeat_interleave(2, -1), cos.repeat_interleave(2, -1)


def _exact_build_fourier_pos_embed(
    feat_shape: Any,
    bands: torch.Tensor,
    *,
    include_grid: bool,
    dtype: torch.dtype,
    device: torch.device,
    bands64: tuple[float, ...],
) -> list[torch.Tensor]:
    """timm's ``build_fourier_pos_embed`` as ``FourierEmbed.forward`` calls it (pixel
    grid, its bands), the angles exact; the grid itself is timm's."""
    shape = _shape(feat_shape)
    terms = _TORCH.host_constant(_axis_terms, shape, bands64, "pixel", None, 0.0, "ij", "separate")
    channels = _channel_sin_cos(shape, terms, device, "float32")
    sin = torch.stack([s for s, _ in channels], dim=-2).to(dtype)
    cos = torch.stack([c for _, c in channels], dim=-2).to(dtype)
    axes = [torch.linspace(-1.0, 1.0, steps=n, device=device, dtype=torch.float32) for n in shape]
    grid = torch.stack(torch.meshgrid(axes, indexing="ij"), dim=-1).unsqueeze(-1)
    return [grid, sin, cos] if include_grid else [sin, cos]


def _fourier_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """``FourierEmbed.forward`` (timm 1.0.31's code), its ``build_fourier_pos_embed`` exact."""
    batch, feat_shape = x.shape[0], x.shape[2:]
    emb = _exact_build_fourier_pos_embed(
        feat_shape,
        self.bands,
        include_grid=self.concat_grid,
        dtype=x.dtype,
        device=x.device,
        bands64=self._pe_core_timm_bands,
    )
    table = torch.cat(emb, dim=-1).transpose(-1, -2).flatten(len(feat_shape))
    batch_expand = (batch,) + (-1,) * (x.ndim - 1)
    if self.keep_spatial:
        return torch.cat([x, table.unsqueeze(0).expand(batch_expand).permute(0, 3, 1, 2)], dim=1)
    x = torch.cat([x.permute(0, 2, 3, 1), table.unsqueeze(0).expand(batch_expand)], dim=-1)
    return x.reshape(batch, feat_shape.numel(), -1)


def _shape(feat_shape: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in feat_shape)


def _working(dtype: torch.dtype | None) -> str:
    return "float64" if dtype == torch.float64 else "float32"


def _rotary_build_embed(
    self: Any,
    feat_shape: Any,
    bands: torch.Tensor,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    augment: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_RotaryEmbeddingBase._build_embed`` with exact angles (augmented: timm's own)."""
    if augment:
        return self._pe_core_timm_original._build_embed(feat_shape, bands, device, dtype, augment)
    where = bands.device if device is None else torch.device(device)
    return _axial_embed(self, self._pe_core_timm_bands, feat_shape, where, dtype, bands.dtype)


def _axial_embed(
    self: Any,
    bands64: tuple[float, ...],
    feat_shape: Any,
    where: torch.device,
    dtype: torch.dtype | None,
    bands_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    shape = _shape(feat_shape)
    ref = None if self.ref_feat_shape is None else _shape(self.ref_feat_shape)
    terms = _TORCH.host_constant(
        _axis_terms,
        shape,
        bands64,
        self.grid_type,
        ref,
        float(self.grid_offset),
        self.grid_indexing,
        self.normalize_coords,
    )
    out = torch.float32 if dtype is None else dtype
    sin, cos = _axial_sin_cos(shape, terms, self.rotate_half, where, _working(bands_dtype))
    return sin.to(out), cos.to(out)


def _dinov3_create_embed(self: Any, feat_shape: Any, no_aug: bool = False) -> torch.Tensor:
    """``RotaryEmbeddingDinoV3._create_embed`` with exact angles (augmented: timm's own)."""
    if not no_aug and self.training and self.aug_active:
        return self._pe_core_timm_original._create_embed(feat_shape, no_aug)
    return _dinov3_embed(self, self._pe_core_timm_bands, feat_shape)


def _dinov3_embed(self: Any, bands64: tuple[float, ...], feat_shape: Any) -> torch.Tensor:
    shape = _shape(feat_shape)
    if len(shape) != 2:
        raise ValueError(f"Expected 2 spatial dimensions, got {len(shape)}")
    terms = _TORCH.host_constant(
        _axis_terms,
        shape,
        bands64,
        "centered",
        None,
        float(self.grid_offset),
        self.grid_indexing,
        self.normalize_coords,
    )
    periods = self.periods
    sin, cos = _axial_sin_cos(
        shape, terms, self.rotate_half, periods.device, _working(periods.dtype)
    )
    return torch.cat([sin, cos], dim=-1).to(periods.dtype)


def _mrope_tables(
    shape: tuple[int, int], omegas: tuple[float, ...], axes: tuple[int, ...], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    h, w = shape
    ch, sh = exact_cos_sin(_TORCH, torch.arange(h, device=device, dtype=torch.int32), omegas)
    cw, sw = exact_cos_sin(_TORCH, torch.arange(w, device=device, dtype=torch.int32), omegas)
    full = (h, w, len(omegas))
    on_h = torch.tensor([a == 1 for a in axes], device=device)
    on_w = torch.tensor([a == 2 for a in axes], device=device)
    cos = torch.where(on_h, ch[:, None].expand(full), torch.where(on_w, cw[None].expand(full), 1.0))
    sin = torch.where(on_h, sh[:, None].expand(full), torch.where(on_w, sw[None].expand(full), 0.0))
    return sin.reshape(h * w, -1), cos.reshape(h * w, -1)


def _mrope_get_embed(self: Any, shape: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``RotaryEmbeddingMRope.get_embed`` with exact angles (augmented: timm's own)."""
    if self.training and self.aug_active:
        return self._pe_core_timm_original.get_embed(shape, dtype)
    size = _shape(shape)
    if len(size) != 2:
        raise ValueError(f"Expected 2 spatial dimensions, got {len(size)}")
    sin, cos = _mrope_tables(
        (size[0], size[1]), self._pe_core_timm_bands, self._pe_core_timm_axes, self.inv_freq.device
    )
    embed = torch.cat([sin, sin, cos, cos], dim=-1)
    return embed if dtype is None else embed.to(dtype)


# -- plans -------------------------------------------------------------------------------


def _check(name: str, buffer: torch.Tensor | None, expected: tuple[float, ...]) -> None:
    """The module's stored frequencies are timm's formula (else it was changed)."""
    if buffer is None or buffer.device.type == "meta":
        raise ValueError(f"its {name} buffer is not materialized")
    got = buffer.detach().to("cpu", torch.float64).reshape(-1)
    want = torch.tensor(expected, dtype=torch.float64)
    if got.shape != want.shape or not torch.allclose(got, want, rtol=2e-6, atol=0.0):
        raise ValueError(
            f"its {name} buffer differs from timm's formula for its configuration (set "
            "by hand?): the formula to reproduce is unknown"
        )


class _Original:
    """The class's own methods, bound to the module (what augmented training runs)."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_module":  # copy and pickle look these up
            raise AttributeError(name)
        return types.MethodType(getattr(type(self._module), name), self._module)


def plan(module: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The instance attributes and buffers patching ``module`` sets; ValueError (with
    the reason) for a module this integration does not reproduce."""
    key = _key(type(module))
    if key in REFUSED:
        raise ValueError(REFUSED[key])
    if key not in CLASSES:
        covered = [_key(b) for b in type(module).__mro__ if _key(b) in CLASSES + tuple(REFUSED)]
        if covered:
            raise ValueError(
                f"a subclass of {covered[0].rsplit('.', 1)[-1]} whose own code is not "
                "checked: not covered"
            )
        raise ValueError("a rotary embedding with a formula of its own: not covered")
    name = key.rsplit(".", 1)[-1]
    missing = [a for a in _NEEDS[name] if not hasattr(module, a)]
    if missing:
        raise ValueError(
            f"this timm version's {name} has no {', '.join(missing)} (the internals the "
            "patch replaces, as in timm 1.0.31): not covered"
        )
    common: dict[str, Any] = {"_pe_core_timm_original": _Original(module)}
    if getattr(module, "feat_shape", None) is not None:
        common["_pe_core_timm_feat_shape"] = tuple(module.feat_shape)
    if name in ("RotaryEmbedding", "RotaryEmbeddingCat"):
        return _plan_axial(module, common)
    if name == "RotaryEmbeddingDinoV3":
        return _plan_dinov3(module, common)
    if name == "FourierEmbed":
        return _plan_fourier(module, common)
    return _plan_mrope(module, common)


def _plan_axial(module: Any, common: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if module.grid_type not in ("index", "pixel", "centered"):
        raise ValueError(f"its grid_type {module.grid_type!r} is not one of timm's")
    if module.grid_indexing not in ("ij", "xy"):
        raise ValueError(f"its grid_indexing {module.grid_indexing!r} is not one of timm's")
    bands = _bands64(module)
    _check("bands", module.bands, tuple(float(torch.tensor(b).float()) for b in bands))
    attributes = {
        **common,
        "_pe_core_timm_bands": bands,
        "_build_embed": functools.partial(_rotary_build_embed, module),
    }
    buffers: dict[str, Any] = {}
    if module.feat_shape is not None:
        where = module.bands.device
        sin, cos = _axial_embed(module, bands, module.feat_shape, where, None, module.bands.dtype)
        if type(module).__name__ == "RotaryEmbeddingCat":
            old = module.pos_embed
            buffers["pos_embed"] = torch.cat([sin, cos], -1).to(old.device, old.dtype)
        else:
            old = module.pos_embed_sin
            buffers["pos_embed_sin"] = sin.to(old.device, old.dtype)
            buffers["pos_embed_cos"] = cos.to(old.device, old.dtype)
    return attributes, buffers


def _plan_dinov3(module: Any, common: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if module.normalize_coords not in ("min", "max", "separate"):
        raise ValueError(f"its normalize_coords {module.normalize_coords!r} is not one of timm's")
    periods = _periods64(module)
    _check("periods", module.periods, periods)
    attributes = {
        **common,
        "_pe_core_timm_bands": tuple(2.0 * math.pi / p for p in periods),
        "_create_embed": functools.partial(_dinov3_create_embed, module),
    }
    buffers: dict[str, Any] = {}
    if module.feat_shape is not None and module.pos_embed_cached is not None:
        old = module.pos_embed_cached
        table = _dinov3_embed(module, attributes["_pe_core_timm_bands"], module.feat_shape)
        buffers["pos_embed_cached"] = table.to(old.device, old.dtype)
    return attributes, buffers


def _plan_mrope(module: Any, common: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if module.grid_indexing != "ij":
        raise ValueError(f"its grid_indexing {module.grid_indexing!r} is not 'ij'")
    inv_freq = _inv_freq64(module)
    _check("inv_freq", module.inv_freq, inv_freq)
    axes = _mrope_axes(int(module.dim), tuple(module.mrope_section))
    if tuple(int(a) for a in module.axis.tolist()) != axes:
        raise ValueError("its axis buffer differs from timm's assignment for its mrope_section")
    attributes = {
        **common,
        "_pe_core_timm_bands": inv_freq,
        "_pe_core_timm_axes": axes,
        "get_embed": functools.partial(_mrope_get_embed, module),
    }
    return attributes, {}


def rebuild_cache(module: Any) -> None:
    """timm's own cached table for the module's current ``feat_shape`` (after an unpatch,
    when the shape changed while patched: the table kept is for the old shape)."""
    if type(module).__name__ == "RotaryEmbeddingDinoV3":
        module._cache_embed(module.feat_shape)
    else:
        module._update_cached_embed(module.feat_shape, module._compute_bands(module.bands.device))


def _plan_fourier(module: Any, common: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    n, half = int(module.num_bands), float(module.max_res) / 2
    bands = tuple(b * math.pi for b in _linspace(1.0, half, n))  # pixel_freq_bands, linear
    _check("bands", module.bands, tuple(float(torch.tensor(b).float()) for b in bands))
    attributes = {
        **common,
        "_pe_core_timm_bands": bands,
        "forward": functools.partial(_fourier_forward, module),
    }
    return attributes, {}
