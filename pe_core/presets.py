"""Named specs reproducing the sinusoidal encodings of well-known codebases.

Every preset is an ordinary :class:`~pe_core.spec.Spec`, defined in a module of its own
in ``pe_core/_presets/`` (the module's name is the preset's name; it defines ``PRESET``,
a :class:`pe_core._presets.Preset`). This module finds them all when it is imported and
builds the tables below; the docs render them. :data:`PRESETS` is ordered by each
preset's ``order`` (ties by name): the built-in presets first, as they have always been
listed, then any added one with a larger ``order``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType

from pe_core import _presets
from pe_core._modules import module_entries
from pe_core._presets import Preset
from pe_core.spec import Spec
from pe_core.typing import PresetLike

#: Preset name -> :class:`Spec`, and preset name -> its sources: filled by _discover.
_SPECS: dict[str, Spec] = {}
_SOURCES: dict[str, str] = {}


def _discover() -> None:
    """(Re)build the tables from the modules found on ``pe_core._presets.__path__``.

    Every module whose name does not start with ``_`` must define ``PRESET``, a
    :class:`Preset` whose ``spec.name`` is the module's name. The tables are filled in
    place (:data:`PRESETS` is a view of them), sorted by ``(order, name)``. A private
    hook: a test extends the package's ``__path__`` with a folder of its own, calls this,
    and calls it again once the folder is gone.
    """
    found: dict[str, Preset] = module_entries(_presets, "PRESET", Preset, "preset module")
    for name, preset in found.items():
        if preset.spec.name != name:
            raise ValueError(
                f"preset module {_presets.__name__}.{name} defines a Spec named "
                f"{preset.spec.name!r}. Expected the module's name, {name!r}."
            )
    ordered = sorted(found.items(), key=lambda item: (item[1].order, item[0]))
    _SPECS.clear()
    _SPECS.update((name, preset.spec) for name, preset in ordered)
    _SOURCES.clear()
    _SOURCES.update((name, preset.source) for name, preset in ordered)


_discover()

#: Preset name -> :class:`Spec` (read-only).
PRESETS: Mapping[str, Spec] = MappingProxyType(_SPECS)

#: Preset name -> the codebases it matches, for the docs' conventions table.
PRESET_SOURCES: Mapping[str, str] = MappingProxyType(_SOURCES)

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
    ValueError: Unknown preset 'bert'. Expected one of: cogvideox, diffusers_flip_sin_to_cos, fairseq, flax, mae_2d, musicgen, positional_encodings_1d, positional_encodings_2d, positional_encodings_3d, tensor2tensor, tensor2tensor_2d, tensor2tensor_3d, timm_sincos_2d, vaswani, whisper.
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
    | preset | `base` | `min_timescale` | `denominator` | `frequencies` | `layout` | `offset` | `odd_d` | `axes` | `axis_order` | `order` | `axis_shares` | `axis_layout` | reproduces |
    """
    names = [f.name for f in fields(Spec) if f.name != "name"]
    lines = [
        "| preset | " + " | ".join(f"`{n}`" for n in names) + " | reproduces |",
        "|" + "---|" * (len(names) + 2),
    ]
    for key, spec in PRESETS.items():
        cells = " | ".join(f"`{getattr(spec, n)!r}`" for n in names)
        lines.append(f"| `{key}` | {cells} | {PRESET_SOURCES[key]} |")
    return "\n".join(lines)
