"""What ``pe_core.integrations.timm`` covers of the installed timm.

``python -m benchmarks.timm_coverage [--quick]`` prints a Markdown table: every timm
model whose name suggests a rotary embedding (``*rope*``, ``eva*``, ``*dinov3*``,
``*naflex*``, ``vit_pe_*``, ``qwen3_vit*``, ``deepseek_vit*``, ``samvit*``,
``gemma4_vit*``), built tiny (random weights, one block, small width where the model
takes ``embed_dim``/``num_heads``; nothing downloaded), one forward unpatched and
patched: **exact** (every rotary module patched, output within float32 tolerance of the
unpatched one, unpatch bitwise, state dict unchanged), **refused** (the reason, and what
``strict=False`` then gives), **no rotary module**, **skipped** (no tiny build or call
found), **crashed** (the exception) or **wrong** (beyond tolerance, or unpatch not
bitwise). ``--quick``: the first model of each family. The table goes into
``docs/timm.md``.

timm imports torchvision, which is not always installable next to a CPU build of torch:
it is imported with a stand-in torchvision where needed (``tests/_timm_import.py``).
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import importlib.util
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import md_table

PATTERNS = (
    "*rope*",
    "eva*",
    "*dinov3*",
    "*naflex*",
    "vit_pe_*",
    "qwen3_vit*",
    "deepseek_vit*",
    "samvit*",
    "gemma4_vit*",
)
#: Tiny builds tried in order: the first that builds and runs is used.
TINY = (
    {"img_size": 64, "depth": 1, "embed_dim": 64, "num_heads": 2},
    {"img_size": 64, "depth": 1},
    {"depth": 1},
)


def import_timm() -> Any:
    """timm, with a stand-in torchvision where none imports (``tests/_timm_import.py``)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "_timm_import.py"
    spec = importlib.util.spec_from_file_location("_timm_import", path)
    assert spec is not None and spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    return helper.import_timm()


def names(timm: Any, quick: bool) -> list[str]:
    found = [n for n in timm.list_models() if any(fnmatch.fnmatch(n, p) for p in PATTERNS)]
    if not quick:
        return found
    families: dict[str, str] = {}
    for name in found:
        families.setdefault("_".join(name.split("_")[:2]), name)
    return sorted(families.values())


def build(timm: Any, name: str) -> tuple[Any, Any, dict[str, Any]]:
    """A tiny model and an input it runs on; LookupError when none is found."""
    for kwargs in TINY:
        try:
            torch.manual_seed(0)
            model = timm.create_model(name, pretrained=False, **kwargs).eval()
            size = kwargs.get("img_size") or model.pretrained_cfg.get("input_size", (3, 224))[-1]
            x = torch.randn(1, 3, size, size)
            with torch.no_grad():
                model(x)
            return model, x, kwargs
        except Exception:  # the next, larger build is tried
            continue
    raise LookupError("no tiny build that runs on an image")


def model_row(timm: Any, name: str) -> list[str]:
    from pe_core.integrations._timm_modules import rotary_class
    from pe_core.integrations.timm import patch_rotary_embeddings, unpatch_rotary_embeddings

    try:
        model, x, _ = build(timm, name)
    except LookupError as error:
        return [name, "", f"skipped ({error})", ""]
    try:
        kinds = sorted({type(m).__name__ for m in model.modules() if rotary_class(type(m))})
        if not kinds:
            return [name, "", "no rotary module", ""]
        with torch.no_grad():
            before = model(x)
            keys = {k: v.clone() for k, v in model.state_dict().items()}
            status, note = "exact", ""
            try:
                patch_rotary_embeddings(model)
            except ValueError as error:
                status = "refused"
                note = str(error).split(": ", 1)[-1]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    patch_rotary_embeddings(model, strict=False)
            after = model(x)
            state = model.state_dict()
            same_state = state.keys() == keys.keys() and all(
                torch.equal(state[k], v) for k, v in keys.items()
            )
            unpatch_rotary_embeddings(model)
            bitwise = torch.equal(model(x), before)
        scale = float(before.abs().max())
        diff = float((after - before).abs().max())
        if not (diff <= 1e-4 * max(scale, 1.0) and bitwise and same_state):
            status = "wrong"
            note = f"unpatch bitwise: {bitwise}, state dict unchanged: {same_state}"
        tail = "" if status == "exact" else f" ({note})"
        if status == "refused":
            tail = f" (strict=False patches the rest; {note})"
        return [name, ", ".join(f"`{k}`" for k in kinds), status + tail, f"{diff / scale:.1e}"]
    except Exception as error:  # a crash is a finding, reported in the table
        traceback.print_exc(file=sys.stderr)
        return [name, "", f"crashed: {type(error).__name__}: {error}", ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one model per family")
    args = parser.parse_args(argv)
    timm = import_timm()
    print(f"timm {timm.__version__}, torch {torch.__version__}\n")
    rows = [model_row(timm, name) for name in names(timm, args.quick)]
    counts = collections.Counter(row[2].split(" (")[0].split(":")[0] for row in rows)
    print(
        f"Models: {len(rows)}; "
        + ", ".join(f"{status}: {count}" for status, count in sorted(counts.items()))
        + "\n"
    )
    print(
        md_table(
            ["model (tiny)", "rotary modules", "status", "forward: max difference / max output"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
