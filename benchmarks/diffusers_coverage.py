"""What ``pe_core.integrations.diffusers`` covers of the installed diffusers.

``python -m benchmarks.diffusers_coverage [--classes-only]`` prints two Markdown tables:

1. every positional module class of ``diffusers.models`` (a ``torch.nn.Module`` whose
   name has ``Timesteps``, ``FourierProjection``, ``FourierFeatures``,
   ``FourierEmbedding``, ``Rotary``, ``Rope``/``RoPE`` or ``PosEmbed`` in it, found by
   importing every module of ``diffusers.models``): patched (and how) or refused;
2. every tiny model of :mod:`benchmarks.diffusers_models` (random weights, small
   configs built in code), one denoising step unpatched and patched: **exact** (every
   positional module patched, output within float32 tolerance of the unpatched one,
   unpatch bitwise), **refused** (the reason, and what ``strict=False`` then gives),
   **crashed** (the exception) or **wrong** (outputs beyond tolerance, or unpatch not
   bitwise).

Nothing is downloaded; the tables go into ``docs/diffusers.md``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import traceback
import warnings
from collections.abc import Sequence

import torch

from benchmarks.common import md_table


def positional_classes() -> dict[str, type]:
    """``module.Class`` -> class, for every positional module class of diffusers.models."""
    import diffusers.models

    from pe_core.integrations.diffusers import _key, _positional_class

    found: dict[str, type] = {}
    prefix = diffusers.models.__name__ + "."
    for info in pkgutil.walk_packages(diffusers.models.__path__, prefix):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # optional dependencies of some model files
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, torch.nn.Module)
                and cls.__module__ == info.name
                and _positional_class(cls)
            ):
                found[_key(cls)] = cls
    return dict(sorted(found.items()))


def how(key: str) -> str:
    from pe_core.integrations import _diffusers_modules as modules

    checked = " (its attributes checked at patch time)" if key in modules.CHECKS else ""
    if key in modules.METHODS:
        names = ", ".join(modules.METHODS[key][0])
        return f"exact: its own `{names}` with pe_core's helpers"
    if key in modules.TABLES:
        uncached = " (its cached methods cached anew)" if modules.TABLES[key].uncached else ""
        return f"exact: its tables rebuilt by pe_core (checked against its own){uncached}"
    if key in modules.FORWARDS:
        if modules.FORWARDS[key] is modules.gaussian_fourier_forward:
            return "exact: its forward restated, log as a 64-bit fixed-point integer"
        return f"exact: its forward restated with pe_core's exact angles{checked}"
    if key in modules.REFUSED:
        return f"refused: {modules.REFUSED[key]}"
    cls = positional_classes()[key]
    if "__new__" in vars(cls):
        return "deprecated alias: builds the class of its model's module"
    return "refused: formula not reproduced yet"


def class_rows() -> list[list[str]]:
    rows = []
    for key in positional_classes():
        module, _, name = key.rpartition(".")
        rows.append([f"`{name}`", f"`{module.removeprefix('diffusers.models.')}`", how(key)])
    return rows


def model_row(name: str, build) -> list[str]:
    from pe_core.integrations.diffusers import (
        _positional_class,
        patch_positional_embeddings,
        unpatch_positional_embeddings,
    )

    try:
        torch.manual_seed(0)
        model, call = build()
        model.eval()
        kinds = sorted({type(m).__name__ for m in model.modules() if _positional_class(type(m))})
        with torch.no_grad():
            before = call(model)
            keys = set(model.state_dict())
            status, note = "exact", ""
            try:
                patch_positional_embeddings(model)
            except ValueError as error:
                status = "refused"
                note = str(error).split(": ", 1)[-1]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    patch_positional_embeddings(model, strict=False)
            after = call(model)
            same_keys = set(model.state_dict()) == keys
            unpatch_positional_embeddings(model)
            bitwise = torch.equal(call(model), before)
        scale = float(before.abs().max())
        diff = float((after - before).abs().max())
        ok = diff <= 1e-4 * max(scale, 1.0) and bitwise and same_keys
        if not ok:
            status = "wrong"
            note = f"unpatch bitwise: {bitwise}, state dict unchanged: {same_keys}"
        tail = "" if status == "exact" else f" ({note})"
        if status == "refused":
            tail = f" (strict=False patches the rest; {note})"
        return [name, ", ".join(f"`{k}`" for k in kinds), status + tail, f"{diff / scale:.1e}"]
    except Exception as error:  # a crash is a finding, reported in the table
        traceback.print_exc(file=sys.stderr)
        return [name, "", f"crashed: {type(error).__name__}: {error}", ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes-only", action="store_true")
    args = parser.parse_args(argv)
    import diffusers

    print(f"diffusers {diffusers.__version__}, torch {torch.__version__}\n")
    rows = class_rows()
    covered = sum(r[2].startswith("exact") for r in rows)
    print(f"Positional module classes: {len(rows)}, patched exactly: {covered}\n")
    print(md_table(["class", "module", "patch"], rows))
    if args.classes_only:
        return 0
    from benchmarks.diffusers_models import MODELS

    print()
    print(
        md_table(
            [
                "model (tiny)",
                "positional modules",
                "status",
                "one step: max difference / max output",
            ],
            [model_row(name, build) for name, build in MODELS.items()],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
