"""The diffusers classes :mod:`pe_core.integrations.diffusers` covers, and how it
patches each (:func:`plan`): methods run with the exact helpers
(:mod:`pe_core.integrations._diffusers_helpers`), tables built once rebuilt exactly
(checked against the module's own), or a forward of
:mod:`pe_core.integrations._diffusers_forwards`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from pe_core.integrations._diffusers_forwards import (
    anima_forward,
    audio_dit_forward,
    check_inv_freq,
    check_kandinsky,
    check_qwen21_timesteps,
    cogview4_forward,
    cosmos3_text_forward,
    cosmos_forward,
    expo_fourier_forward,
    glm_image_forward,
    helios_forward,
    hunyuan_video_forward,
    ideogram4_forward,
    kandinsky5_3d_forward,
    kandinsky6_3d_forward,
    kandinsky_1d_forward,
    ltx2_forward,
    ltx2_vae_forward,
    ltx_forward,
    minimax_h3_forward,
    minimax_h3_video_forward,
    mochi_fourier_forward,
    music3_fourier_forward,
    music3_rotary_forward,
    omnigen_forward,
    qwen21_timesteps_forward,
)
from pe_core.integrations._diffusers_helpers import (
    NO_FLOAT64,
    exact_get_1d_rotary_pos_embed,
    exact_globals,
    gaussian_fourier_forward,
    rebind,
)

__all__ = [
    "CHECKS",
    "FORWARDS",
    "METHODS",
    "REFUSED",
    "TABLES",
    "class_key",
    "plan",
    "positional_class",
]

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
        use_real and like.device.type not in NO_FLOAT64
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
    replaced by exact ones; ``uncached``: its methods cached on the class
    (``lru_cache``) from those tables, run uncached while patched."""

    names: tuple[str, ...]
    build: Callable[[Any, torch.Tensor], tuple[Any, ...]]
    uncached: tuple[str, ...] = ()


def _complex_table(dim: int, index: torch.Tensor, theta: float) -> torch.Tensor:
    """``polar(1, index * 1/theta^(2i/dim))`` as complex64, from float64 on the host
    (what QwenImage's ``rope_params`` computes in float32)."""
    table = exact_get_1d_rotary_pos_embed(dim, index.double(), theta, freqs_dtype=torch.float64)
    return table.to(torch.complex64)


def _qwen_tables(module: Any, like: torch.Tensor) -> tuple[Any, ...]:
    n = int(like.shape[0])
    pos, neg = torch.arange(n), torch.arange(n).flip(0) * -1 - 1
    return tuple(
        torch.cat([_complex_table(d, index, module.theta) for d in module.axes_dim], dim=1)
        for index in (pos, neg)
    )


def _qwen21_tables(module: Any, like: torch.Tensor) -> tuple[Any, ...]:
    index = torch.cat([torch.arange(8192), torch.arange(1024).flip(0) * -1 - 1])
    return ([_complex_table(d, index, module.theta) for d in module.axes_dim],)


def _lumina2_tables(module: Any, like: Any) -> tuple[Any, ...]:
    method = type(module)._precompute_freqs_cis
    rebound = rebind(method, exact_globals(method))
    return (rebound(module, module.axes_dim, module.axes_lens, module.theta),)


_WAN_REAL = _Tables(("freqs_cos", "freqs_sin"), lambda m, like: _wan_tables(m, like, True))
_WAN_COMPLEX = _Tables(("freqs",), lambda m, like: _wan_tables(m, like, False))
_LUMINA2 = _Tables(("freqs_cis",), _lumina2_tables)
_QWEN = _Tables(
    ("pos_freqs", "neg_freqs"), _qwen_tables, ("_get_device_freqs", "_compute_video_freqs")
)
_QWEN_LAYER3D = _Tables(
    ("pos_freqs", "neg_freqs"),
    _qwen_tables,
    ("_get_device_freqs", "_compute_video_freqs", "_compute_condition_freqs"),
)
_QWEN21 = _Tables(("freqs",), _qwen21_tables)


# -- the covered classes ---------------------------------------------------------------

_T = "diffusers.models.transformers."

#: class -> the methods run with exact helpers (the module's own code), and instance
#: caches to empty while patched.
METHODS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
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
    _T + "transformer_skyreels_v2.SkyReelsV2Timesteps": (("forward",), ()),
}

#: class -> its tables, rebuilt exactly.
TABLES: dict[str, _Tables] = {
    _T + "transformer_wan.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_wan_animate.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_video.WanRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_skyreels_v2.SkyReelsV2RotaryPosEmbed": _WAN_REAL,
    _T + "transformer_chronoedit.ChronoEditRotaryPosEmbed": _WAN_REAL,
    _T + "transformer_sana_wm.SanaWMRotaryPosEmbed": _WAN_COMPLEX,
    _T + "transformer_lumina2.Lumina2RotaryPosEmbed": _LUMINA2,
    _T + "transformer_qwenimage.QwenEmbedRope": _QWEN,
    _T + "transformer_qwenimage.QwenEmbedLayer3DRope": _QWEN_LAYER3D,
    _T + "transformer_qwenimage21.QwenImage21Rope": _QWEN21,
    _T + "transformer_nucleusmoe_image.NucleusMoEEmbedRope": _Tables(
        ("pos_freqs", "neg_freqs"), _qwen_tables, ("_compute_video_freqs",)
    ),
}

#: class -> its forward, written here.
FORWARDS: dict[str, Callable[..., Any]] = {
    "diffusers.models.embeddings.GaussianFourierProjection": gaussian_fourier_forward,
    _T + "stable_audio_transformer.StableAudioGaussianFourierProjection": (
        gaussian_fourier_forward
    ),
    _T + "transformer_qwenimage21.QwenImage21TemporalTimesteps": qwen21_timesteps_forward,
    _T + "transformer_cogview4.CogView4RotaryPosEmbed": cogview4_forward,
    _T + "transformer_glm_image.GlmImageRotaryPosEmbed": glm_image_forward,
    _T + "transformer_cosmos.CosmosRotaryPosEmbed": cosmos_forward,
    _T + "transformer_kandinsky.Kandinsky5RoPE1D": kandinsky_1d_forward,
    _T + "transformer_kandinsky.Kandinsky5RoPE3D": kandinsky5_3d_forward,
    _T + "transformer_kandinsky6.Kandinsky6RoPE1D": kandinsky_1d_forward,
    _T + "transformer_kandinsky6.Kandinsky6RoPE3D": kandinsky6_3d_forward,
    _T + "transformer_kandinsky6_sr.Kandinsky6SRRoPE3D": kandinsky6_3d_forward,
    _T + "transformer_ltx.LTXVideoRotaryPosEmbed": ltx_forward,
    _T + "transformer_ltx2.LTX2AudioVideoRotaryPosEmbed": ltx2_forward,
    _T + "transformer_sana_wm_refiner.SanaWMLTX2AudioVideoRotaryPosEmbed": ltx2_forward,
    _T + "transformer_helios.HeliosRotaryPosEmbed": helios_forward,
    _T + "transformer_hunyuan_video.HunyuanVideoRotaryPosEmbed": hunyuan_video_forward,
    _T + "transformer_cosmos3.Cosmos3VLTextRotaryEmbedding": cosmos3_text_forward,
    _T + "transformer_ideogram4.Ideogram4MRoPE": ideogram4_forward,
    _T + "transformer_minimax_h3.MiniMaxH3RotaryPosEmbed": minimax_h3_forward,
    _T + "transformer_minimax_music3.MiniMaxMusic3RotaryEmbedding": music3_rotary_forward,
    _T + "transformer_minimax_music3.MiniMaxMusic3FourierEmbedding": music3_fourier_forward,
    _T + "transformer_stable_audio3.StableAudio3ExpoFourierFeatures": expo_fourier_forward,
    "diffusers.models.autoencoders.autoencoder_kl_minimax_h3.MiniMaxH3VideoRotaryPosEmbed": (
        minimax_h3_video_forward
    ),
    "diffusers.models.autoencoders.autoencoder_kl_mochi.FourierFeatures": mochi_fourier_forward,
    "diffusers.models.condition_embedders.condition_embedder_anima.AnimaRotaryEmbedding": (
        anima_forward
    ),
    _T + "transformer_omnigen.OmniGenSuScaledRotaryEmbedding": omnigen_forward,
    _T + "transformer_longcat_audio_dit.AudioDiTRotaryEmbedding": audio_dit_forward,
    "diffusers.models.autoencoders.ltx2_diffusion_decoder.LTX2VideoVaeRotaryPosEmbed3D": (
        ltx2_vae_forward
    ),
}

#: class -> a check at patch time that the module's attributes are those its forward
#: here assumes (ValueError: refused); what it returns is set on the module while patched.
CHECKS: dict[str, Callable[[Any], dict[str, Any] | None]] = {
    _T + "transformer_qwenimage21.QwenImage21TemporalTimesteps": check_qwen21_timesteps,
    _T + "transformer_cosmos3.Cosmos3VLTextRotaryEmbedding": check_inv_freq,
    _T + "transformer_ideogram4.Ideogram4MRoPE": check_inv_freq,
    _T + "transformer_minimax_h3.MiniMaxH3RotaryPosEmbed": check_inv_freq,
    "diffusers.models.autoencoders.autoencoder_kl_minimax_h3.MiniMaxH3VideoRotaryPosEmbed": (
        check_inv_freq
    ),
    "diffusers.models.condition_embedders.condition_embedder_anima.AnimaRotaryEmbedding": (
        check_inv_freq
    ),
    **{
        _T + f"transformer_kandinsky{m}.Kandinsky{v}": check_kandinsky
        for m, v in [
            ("", "5RoPE1D"),
            ("", "5RoPE3D"),
            ("6", "6RoPE1D"),
            ("6", "6RoPE3D"),
            ("6_sr", "6SRRoPE3D"),
        ]
    },
}


#: class -> why it is refused (its formula cannot be made exact here).
REFUSED: dict[str, str] = {
    _T + "transformer_mochi.MochiRoPE": (
        "its angles are learned frequencies (a model parameter passed to each call) times "
        "fractional positions, summed over three axes: not reproduced exactly without "
        "reading the parameter back to the host"
    ),
    "diffusers.models.autoencoders.autoencoder_same.RotaryEmbedding": (
        "it returns the angles themselves (float32), whose cosines and sines its "
        "attention takes: the patch would have to replace the attention"
    ),
    _T + "transformer_stable_audio3.StableAudio3RotaryEmbedding": (
        "it returns the angles themselves (float32), whose cosines and sines its "
        "attention takes: the patch would have to replace the attention"
    ),
}


def class_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def positional_class(cls: type) -> bool:
    """A diffusers class this integration patches, or one with a positional name
    (patched or refused)."""
    key = class_key(cls)
    if key in METHODS or key in TABLES or key in FORWARDS:
        return True
    return cls.__module__.startswith("diffusers.") and any(
        word in cls.__name__ for word in _POSITIONAL_NAMES
    )


class _Uncached:
    """A method cached on its class (``lru_cache``, whose entries were built from the
    module's own tables) run with a cache of this module's own while patched, as
    diffusers caches it: up to 128 calls by their arguments, none when compiling or
    exporting (a plain object, as :class:`_ExactMethod`)."""

    def __init__(self, module: nn.Module, name: str) -> None:
        self.module = module
        self.name = name
        self.function = getattr(type(module), name).__wrapped__
        self.cache: dict[Any, Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or torch.compiler.is_exporting():
            return self.function(self.module, *args, **kwargs)
        key = (args, tuple(kwargs.items()))
        try:
            found = self.cache.get(key)
        except TypeError:  # unhashable arguments: not cached (lru_cache would raise)
            return self.function(self.module, *args, **kwargs)
        if found is None:
            found = self.function(self.module, *args, **kwargs)
            if len(self.cache) >= 128:
                self.cache.clear()
            self.cache[key] = found
        return found

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Uncached, (self.module, self.name))


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
    own = FORWARDS.get(class_key(cls))
    if own is not None and name == "forward":
        return own
    function = getattr(cls, name)
    if hasattr(function, "__wrapped__"):
        raise ValueError(f"its {name} is wrapped by a decorator")
    replacements = exact_globals(function)
    if not replacements:
        raise ValueError(f"its {name} calls none of diffusers' positional helpers")
    return rebind(function, replacements)


def _plan_methods(module: nn.Module, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _ExactMethod(module, name) for name in names}


def _table_tolerance(module: nn.Module, rows: int) -> float:
    """How far diffusers' own float32 tables may be from exact ones: a few float32
    roundings of the largest angle (positions below ``max_seq_len``, the axes' lengths
    or the tables' rows, frequencies at most 1 rad per position)."""
    longest = max(
        [int(getattr(module, "max_seq_len", 0) or 0), rows]
        + [int(n) for n in getattr(module, "axes_lens", ()) or ()]
    )
    return 1e-5 + 4.0 * longest * 2.0**-24


def _plan_tables(module: nn.Module, tables: _Tables) -> dict[str, Any]:
    current = [getattr(module, name) for name in tables.names]
    like = current[0][0] if isinstance(current[0], list) else current[0]
    new = tables.build(module, like)
    tolerance = _table_tolerance(module, int(like.shape[0]))
    theta = getattr(module, "theta", 10000)
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
                    f"its {name} differs from pe_core's table for theta={theta} by {gap:.3g} "
                    f"(more than float32 rounding, {tolerance:.3g}): built with another "
                    "theta or layout"
                )
    return dict(zip(tables.names, new, strict=True))


def plan(module: nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """How to patch ``module``: the instance attributes and the buffers to set;
    ValueError: refused."""
    key = class_key(type(module))
    if key in REFUSED:
        raise ValueError(REFUSED[key])
    found = (CHECKS[key](module) if key in CHECKS else None) or {}
    if key in METHODS:
        names, caches = METHODS[key]
        values = _plan_methods(module, names)
        values.update({name: None for name in caches})
        return values, {}
    if key in FORWARDS:
        return {**found, **_plan_methods(module, ("forward",))}, {}
    if key in TABLES:
        tables = _plan_tables(module, TABLES[key])
        buffers = {name: table for name, table in tables.items() if name in module._buffers}
        values = {name: table for name, table in tables.items() if name not in buffers}
        values.update({name: _Uncached(module, name) for name in TABLES[key].uncached})
        return values, buffers
    bases = [class_key(b) for b in type(module).__mro__[1:]]
    covered = [b for b in bases if b in METHODS or b in TABLES or b in FORWARDS]
    if covered:
        raise ValueError(f"a subclass of {covered[0]} (not reviewed: it may change the formula)")
    raise ValueError("its formula is not one this integration reproduces (yet)")
