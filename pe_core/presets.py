"""Named specs reproducing the sinusoidal encodings of well-known codebases.

Every preset is an ordinary :class:`~pe_core.spec.Spec`; this table is the single
place they are defined, and the docs render it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pe_core.spec import Spec
from pe_core.typing import PresetLike

#: Preset name -> (Spec, the codebases whose numbers it reproduces).
_TABLE: dict[str, tuple[Spec, str]] = {
    "vaswani": (
        Spec(name="vaswani"),
        "Attention Is All You Need; the textbook PyTorch PositionalEncoding modules; "
        "Hugging Face DistilBERT create_sinusoidal_embeddings; keras-hub "
        "SinePositionEncoding; PyPI positional-encodings PositionalEncoding1D (even d)",
    ),
    "tensor2tensor": (
        Spec(denominator="half_minus_one", layout="split", odd_d="zero_pad", name="tensor2tensor"),
        "tensor2tensor common_attention.get_timing_signal_1d (min_timescale=1, "
        "max_timescale=1e4, start_index=0)",
    ),
    "fairseq": (
        Spec(
            denominator="half_minus_one",
            layout="split",
            offset=2,
            odd_d="zero_pad",
            name="fairseq",
        ),
        "fairseq SinusoidalPositionalEmbedding with padding_idx=1: the first token "
        "reads table row padding_idx + 1 = 2",
    ),
    "whisper": (
        Spec(denominator="half_minus_one", layout="split", name="whisper"),
        "OpenAI whisper model.sinusoids (max_timescale=10000; even channels only)",
    ),
    "flax": (
        Spec(denominator="half_minus_one", layout="split", odd_d="zero_pad", name="flax"),
        "flax examples (wmt, lm1b) sinusoidal_init (min_scale=1, max_scale=1e4)",
    ),
    # N-D presets (pe_core.nd): coordinates (..., axes), one 1-D encoding per axis
    "mae_2d": (
        Spec(layout="split", axes=2, axis_order="reversed", name="mae_2d"),
        "MAE util/pos_embed.get_2d_sincos_pos_embed (rows after the cls row), also in DiT; "
        "diffusers get_2d_sincos_pos_embed with base_size and interpolation_scale through "
        "pe_core.grid_encoding. The first half of the features encodes the column",
    ),
    "tensor2tensor_2d": (
        Spec(
            denominator="half_minus_one",
            layout="split",
            odd_d="zero_pad",
            axes=2,
            name="tensor2tensor_2d",
        ),
        "tensor2tensor common_attention.add_timing_signal_nd on [batch, h, w, channels] "
        "(min_timescale=1, max_timescale=1e4; channels // 4 pairs per axis)",
    ),
    "tensor2tensor_3d": (
        Spec(
            denominator="half_minus_one",
            layout="split",
            odd_d="zero_pad",
            axes=3,
            name="tensor2tensor_3d",
        ),
        "tensor2tensor common_attention.add_timing_signal_nd on [batch, t, h, w, channels] "
        "(channels // 6 pairs per axis)",
    ),
    "positional_encodings_2d": (
        Spec(odd_d="truncate", axes=2, name="positional_encodings_2d"),
        "PyPI positional-encodings PositionalEncoding2D (channel-last, torch and TF): "
        "ceil(ch / 4) pairs per axis, truncated to ch",
    ),
    "positional_encodings_3d": (
        Spec(odd_d="truncate", axes=3, name="positional_encodings_3d"),
        "PyPI positional-encodings PositionalEncoding3D (channel-last, torch and TF): "
        "ceil(ch / 6) pairs per axis, truncated to ch",
    ),
}

#: Preset name -> :class:`Spec` (read-only).
PRESETS: Mapping[str, Spec] = MappingProxyType({name: spec for name, (spec, _) in _TABLE.items()})

#: Preset name -> the codebases it matches, for the docs' conventions table.
PRESET_SOURCES: Mapping[str, str] = MappingProxyType(
    {name: source for name, (_, source) in _TABLE.items()}
)

DEFAULT_PRESET = "vaswani"


def resolve_spec(spec: Spec | PresetLike | None) -> Spec:
    """Turn ``None``, a preset name or a :class:`Spec` into a :class:`Spec`.

    Examples
    --------
    >>> resolve_spec("whisper").layout
    'split'
    >>> resolve_spec(None) == PRESETS["vaswani"]
    True
    >>> resolve_spec("bert")
    Traceback (most recent call last):
    ...
    ValueError: Unknown preset 'bert'. Expected one of: fairseq, flax, mae_2d, positional_encodings_2d, positional_encodings_3d, tensor2tensor, tensor2tensor_2d, tensor2tensor_3d, vaswani, whisper.
    """
    if spec is None:
        return PRESETS[DEFAULT_PRESET]
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, str):
        try:
            return PRESETS[spec]
        except KeyError:
            raise ValueError(
                f"Unknown preset {spec!r}. Expected one of: {', '.join(sorted(PRESETS))}."
            ) from None
    raise TypeError(f"spec must be a pe_core.Spec, a preset name or None. Received: {spec!r}")


def preset_table_markdown() -> str:
    """The preset table as Markdown: one row per preset, one column per Spec field.

    The docs' conventions page embeds exactly this text (a test keeps them equal).

    >>> print(preset_table_markdown().splitlines()[0])
    | preset | `base` | `min_timescale` | `denominator` | `frequencies` | `layout` | `offset` | `odd_d` | `axes` | `axis_order` | reproduces |
    """
    from dataclasses import fields

    names = [f.name for f in fields(Spec) if f.name != "name"]
    lines = [
        "| preset | " + " | ".join(f"`{n}`" for n in names) + " | reproduces |",
        "|" + "---|" * (len(names) + 2),
    ]
    for key, spec in PRESETS.items():
        cells = " | ".join(f"`{getattr(spec, n)!r}`" for n in names)
        lines.append(f"| `{key}` | {cells} | {PRESET_SOURCES[key]} |")
    return "\n".join(lines)
