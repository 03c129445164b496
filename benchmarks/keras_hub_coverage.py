"""keras-hub coverage and cost of ``pe_core.integrations.keras_hub.patch_rotary_embeddings``.

``KERAS_BACKEND=jax python -m benchmarks.keras_hub_coverage [--quick]``:

1. **Coverage.** Every backbone class of the installed keras-hub whose family's source
   uses rotary embeddings is built tiny from a generic set of text-model arguments
   (random weights, nothing downloaded), called on 12 tokens, patched, called again,
   unpatched, and classified: ``exact`` (patched output within float32 tolerance of the
   unpatched one, unpatch bitwise), ``refused`` (the patch's ``ValueError``, with its
   reason), ``crashed`` (any other error while patching or calling), ``wrong`` (outputs
   apart), or ``not built`` (the family needs arguments the generic set lacks, or
   inputs other than token ids). The exactness of each layer kind at position 1e5 is
   checked in ``tests/test_integration_keras_hub.py``.
2. **Cost.** A small Llama backbone (2 layers, hidden 256, 4 heads) under ``jax.jit``
   (``stateless_call``): patched vs unpatched, a 1-token call and a 512-token prefill,
   timed alternately in the same run; the ratio is patched over unpatched.

Prints Markdown tables; writes nothing.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.common import fmt_ms, header, loadavg, machine_md, md_table, time_call

#: Generic tiny arguments for text backbones.
TINY: dict[str, Any] = {
    "vocabulary_size": 64,
    "num_layers": 1,
    "num_query_heads": 2,
    "num_key_value_heads": 1,
    "num_heads": 2,
    "hidden_dim": 16,
    "intermediate_dim": 32,
    "head_dim": 8,
    "head_size": 8,
    "num_experts": 2,
    "top_k": 1,
    "moe_intermediate_dim": 16,
    "shared_expert_intermediate_dim": 16,
    "shared_expert_intermediate_size": 16,
}

_USES_ROPE = re.compile(r"[Rr]otary|rope_(theta|wavelength|max_wavelength|scaling)")


def rotary_backbones() -> list[tuple[str, type]]:
    import keras_hub
    from keras_hub.src.models.backbone import Backbone

    found = []
    for name in sorted(dir(keras_hub.models)):
        cls = getattr(keras_hub.models, name)
        if not (isinstance(cls, type) and issubclass(cls, Backbone)) or cls is Backbone:
            continue
        folder = os.path.dirname(inspect.getfile(cls))
        text = "".join(
            open(os.path.join(folder, f)).read() for f in os.listdir(folder) if f.endswith(".py")
        )
        if _USES_ROPE.search(text):
            found.append((name, cls))  # aliases (ESM2Backbone) under their own name
    return found


def classify(cls: type) -> tuple[str, str]:
    import keras
    from keras import ops

    from pe_core.integrations.keras_hub import patch_rotary_embeddings, unpatch_rotary_embeddings

    params = inspect.signature(cls.__init__).parameters.values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    missing = [n for n in required if n not in ("self", "args", "kwargs") and n not in TINY]
    if missing:
        return "not built", f"needs {', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}"
    kwargs = {n: TINY[n] for n in required if n in TINY}
    try:
        keras.utils.set_random_seed(0)
        model = cls(**kwargs)
    except Exception as exc:
        return "not built", f"{type(exc).__name__}: {str(exc)[:80]}"
    names = [t.name.split(":")[0] for t in model.inputs]
    data = {}
    for name in names:
        if "token_ids" in name:
            data[name] = np.arange(12).reshape(1, 12) % 64
        elif "padding_mask" in name:
            data[name] = np.ones((1, 12), "int32")
        else:
            return "not built", f"needs input {name!r}"

    def run() -> list[np.ndarray]:
        out = model(data)
        outs = (
            out.values()
            if isinstance(out, dict)
            else out
            if isinstance(out, (list, tuple))
            else [out]
        )
        return [np.asarray(ops.convert_to_numpy(ops.cast(o, "float32"))) for o in outs]

    try:
        before = run()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:80]
        return "not built", f"unpatched call: {type(exc).__name__}: {first}"
    try:
        patch_rotary_embeddings(model)
    except ValueError as exc:
        return "refused", str(exc)[:160]
    except Exception as exc:
        return "crashed", f"{type(exc).__name__}: {str(exc)[:120]}"
    try:
        patched = run()
        unpatch_rotary_embeddings(model)
        after = run()
    except Exception as exc:
        return "crashed", f"{type(exc).__name__}: {str(exc)[:120]}"
    close = all(
        np.allclose(p, b, atol=2e-5, rtol=1e-4) for p, b in zip(patched, before, strict=True)
    )
    same = all(np.array_equal(a, b) for a, b in zip(after, before, strict=True))
    if close and same:
        diff = max(float(np.abs(p - b).max()) for p, b in zip(patched, before, strict=True))
        return "exact", f"patched vs unpatched: {diff:.1e}; unpatch bitwise"
    return "wrong", f"patched close: {close}, unpatch bitwise: {same}"


def cost(quick: bool) -> list[list[str]]:
    import jax
    import keras
    import keras_hub

    from pe_core.integrations.keras_hub import patch_rotary_embeddings, unpatch_rotary_embeddings

    keras.utils.set_random_seed(0)
    model = keras_hub.models.LlamaBackbone(
        vocabulary_size=1000, num_layers=2, num_query_heads=4, num_key_value_heads=2,
        hidden_dim=256, intermediate_dim=512,
    )  # fmt: skip
    trainable = [v.value for v in model.trainable_variables]
    other = [v.value for v in model.non_trainable_variables]

    def program() -> Any:
        def call(ids: Any, mask: Any) -> Any:
            return model.stateless_call(trainable, other, {"token_ids": ids, "padding_mask": mask})[
                0
            ]

        return jax.jit(call)

    rows = []
    for name, seq in (("1 token", 1), ("prefill 512", 512)):
        ids = np.arange(seq).reshape(1, seq) % 1000
        mask = np.ones((1, seq), "int32")
        unpatch_rotary_embeddings(model)
        theirs = program()
        patch_rotary_embeddings(model)
        ours = program()
        best_o = best_t = float("inf")

        def timed(fn: Any, ids: Any = ids, mask: Any = mask) -> Any:
            return jax.block_until_ready(fn(ids, mask))

        for _ in range(2 if quick else 5):
            kw = {"min_time": 0.02 if quick else 0.2, "max_calls": 200}
            best_t = min(best_t, time_call(lambda f=theirs: timed(f), 3, **kw)["median_ms"])
            best_o = min(best_o, time_call(lambda f=ours: timed(f), 3, **kw)["median_ms"])
        rows.append([name, fmt_ms(best_o), fmt_ms(best_t), f"{best_o / best_t:.2f}"])
    unpatch_rotary_embeddings(model)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.keras_hub_coverage", description=__doc__
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    args = parser.parse_args(argv)
    load = loadavg()
    import keras

    rows = [[name, *classify(cls)] for name, cls in rotary_backbones()]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[1]] = counts.get(row[1], 0) + 1
    speed = cost(args.quick) if keras.backend.backend() == "jax" else []
    head = header(["keras_hub_coverage", *(["--quick"] if args.quick else [])], load)
    print(machine_md(head))
    print(f"- Keras backend: {keras.backend.backend()}")
    print("- " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    print()
    print(
        md_table(
            ["backbone", "result", "detail"],
            [[f"`{r[0]}`", r[1], r[2].replace("|", "/")] for r in rows],
        )
    )
    if speed:
        print()
        print(md_table(["Llama backbone (jax.jit)", "patched ms", "unpatched ms", "ratio"], speed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
