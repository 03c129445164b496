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


def _ids(n: int = 12) -> np.ndarray:
    return np.arange(n).reshape(1, n) % 64


def _ones(n: int = 12, dtype: str = "int32") -> np.ndarray:
    return np.ones((1, n), dtype)


def _text(*inputs: str, **extra: Any) -> Any:
    """A builder: tiny text-backbone arguments plus ``extra``; token ids, a mask and
    ``inputs`` (``"position_ids"``)."""
    data = {"token_ids": _ids(), "padding_mask": _ones()}
    data.update({name: np.arange(12).reshape(1, 12) for name in inputs})
    return lambda: (extra, data)


def _smollm() -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {
        "vocabulary_size": 64, "hidden_dim": 16, "intermediate_dim": 32, "num_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "attention_bias": False,
        "attention_dropout": 0.0, "rope_layer_enabled_list": [True, False],
        "layer_types": ["attention"] * 2, "mlp_bias": False, "layer_norm_epsilon": 1e-5,
        "max_position_embeddings": 64, "rope_theta": 10000.0, "partial_rotary_factor": 1.0,
    }  # fmt: skip
    return kwargs, {"token_ids": _ids(), "padding_mask": _ones()}


def _t5gemma(version: str) -> Any:
    def build() -> tuple[dict[str, Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {"vocabulary_size": 64}
        for side in ("encoder", "decoder"):
            kwargs.update({
                f"{side}_hidden_dim": 16, f"{side}_intermediate_dim": 32,
                f"{side}_num_layers": 2, f"{side}_num_attention_heads": 2,
                f"{side}_num_key_value_heads": 1, f"{side}_head_dim": 8,
                f"{side}_layer_types": ["sliding_attention", "full_attention"],
            })  # fmt: skip
        kwargs["sliding_window"] = 4
        if version == "2":
            kwargs["global_rope_scaling_factor"] = 8.0
        data = {
            "encoder_token_ids": _ids(), "encoder_padding_mask": _ones(),
            "decoder_token_ids": _ids(8), "decoder_padding_mask": _ones(8),
        }  # fmt: skip
        return kwargs, data

    return build


def _gemma3n() -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {
        "text_vocab_size": 64, "text_hidden_size": 16, "num_hidden_layers": 2,
        "pad_token_id": 0, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 8, "intermediate_size": [32, 32], "hidden_activation": "gelu_approximate",
        "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4,
        "rope_theta": 1e6, "max_position_embeddings": 64, "vocab_size_per_layer_input": 64,
        "hidden_size_per_layer_input": 2, "altup_num_inputs": 2, "laurel_rank": 1,
    }  # fmt: skip
    return kwargs, {"token_ids": _ids(), "padding_mask": _ones()}


def _moonshine() -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {
        "vocabulary_size": 64, "filter_dim": 16, "encoder_num_layers": 1,
        "decoder_num_layers": 1, "hidden_dim": 16, "intermediate_dim": 32,
        "encoder_num_heads": 2, "decoder_num_heads": 2,
    }  # fmt: skip
    rng = np.random.default_rng(0)
    data = {
        "encoder_input_values": rng.standard_normal((1, 1600, 1)).astype("float32"),
        "encoder_padding_mask": _ones(1600, "bool"),
        "decoder_token_ids": _ids(), "decoder_padding_mask": _ones(12, "bool"),
    }  # fmt: skip
    return kwargs, data


def _flux() -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {
        "input_channels": 4, "hidden_size": 32, "mlp_ratio": 2.0, "num_heads": 2,
        "depth": 1, "depth_single_blocks": 1, "axes_dim": [4, 6, 6], "theta": 10000,
        "use_bias": True, "image_shape": (16, 4), "text_shape": (8, 16),
        "image_ids_shape": (16, 3), "text_ids_shape": (8, 3), "y_shape": (8,),
    }  # fmt: skip
    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(np.arange(4), np.arange(4), indexing="ij"), -1).reshape(16, 2)
    data = {
        "image": rng.standard_normal((1, 16, 4)).astype("float32"),
        "image_ids": np.concatenate([np.zeros((16, 1)), grid], -1)[None].astype("float32"),
        "text": rng.standard_normal((1, 8, 16)).astype("float32"),
        "text_ids": np.zeros((1, 8, 3), "float32"),
        "y": rng.standard_normal((1, 8)).astype("float32"),
        "timesteps": np.asarray([0.5], "float32"), "guidance": np.asarray([1.0], "float32"),
    }  # fmt: skip
    return kwargs, data


def _dinov3() -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {
        "patch_size": 4, "num_layers": 1, "hidden_dim": 16, "num_heads": 2,
        "intermediate_dim": 32, "image_shape": (16, 16, 3),
    }  # fmt: skip
    image = np.random.default_rng(0).standard_normal((1, 16, 16, 3)).astype("float32")
    return kwargs, {"pixel_values": image}


def _sam3() -> tuple[dict[str, Any], dict[str, Any]]:
    import keras_hub

    L = keras_hub.layers
    kwargs = {
        "vision_encoder": L.SAM3VisionEncoder(
            image_shape=(56, 56, 3), patch_size=14, num_layers=2, hidden_dim=16,
            intermediate_dim=32, num_heads=2, fpn_hidden_dim=16,
            fpn_scale_factors=[4.0, 2.0, 1.0, 0.5], pretrain_image_shape=(28, 28, 3),
            window_size=2, global_attn_indexes=[1],
        ),
        "text_encoder": L.SAM3TextEncoder(
            vocabulary_size=64, embedding_dim=16, hidden_dim=16, num_layers=1,
            num_heads=2, intermediate_dim=32,
        ),
        "geometry_encoder": L.SAM3GeometryEncoder(
            num_layers=1, hidden_dim=16, intermediate_dim=32, num_heads=2, roi_size=7,
        ),
        "detr_encoder": L.SAM3DetrEncoder(
            num_layers=1, hidden_dim=16, intermediate_dim=32, num_heads=2,
        ),
        "detr_decoder": L.SAM3DetrDecoder(
            image_shape=(56, 56, 3), patch_size=14, num_layers=1, hidden_dim=16,
            intermediate_dim=32, num_heads=2, num_queries=4,
        ),
        "mask_decoder": L.SAM3MaskDecoder(num_upsampling_stages=3, hidden_dim=16, num_heads=2),
    }  # fmt: skip
    rng = np.random.default_rng(0)
    data = {
        "pixel_values": rng.standard_normal((1, 56, 56, 3)).astype("float32"),
        "token_ids": _ids(8), "padding_mask": _ones(8),
        "boxes": np.zeros((1, 1, 5), "float32"), "box_labels": np.zeros((1, 1), "int32"),
    }  # fmt: skip
    return kwargs, data


def _roformer() -> tuple[dict[str, Any], dict[str, Any]]:
    data = {"token_ids": _ids(), "segment_ids": np.zeros((1, 12), "int32"), "padding_mask": _ones()}
    return {"dropout": 0.0}, data


#: Qwen 3.5 with a full-attention layer (one layer is linear attention only: no rotary).
_QWEN3_5 = {"num_layers": 2, "layer_types": ["linear_attention", "full_attention"],
            "head_dim": 16, "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1]}  # fmt: skip

#: Per-backbone builders: constructor arguments (over :data:`TINY`, where the class
#: takes them) and inputs, for the families the generic tiny arguments do not build.
SPECIAL: dict[str, Any] = {
    "DINOV3Backbone": _dinov3,
    "FluxBackbone": _flux,
    "Gemma3Backbone": _text(image_size=16, vision_encoder=None, use_sliding_window_attention=True,
                            sliding_window_size=4, global_rope_scaling_factor=8.0),
    "Gemma3nBackbone": _gemma3n,
    "Gemma4Backbone": _text("position_ids", image_size=16, layer_types=["sliding_attention", "full_attention"],
                            num_layers=2, sliding_window_size=4, global_head_dim=16,
                            global_rope_partial_rotary_factor=0.5, global_rope_wavelength=1e6),
    "MoonshineBackbone": _moonshine,
    "Qwen3MoeBackbone": _text(head_dim=8, top_k=1, num_experts=2, moe_intermediate_dim=16),
    "Qwen3_5Backbone": _text(**_QWEN3_5),
    "Qwen3_5MoeBackbone": _text(**_QWEN3_5, top_k=1, num_experts=2, moe_intermediate_dim=16,
                                shared_expert_intermediate_size=16),
    "QwenMoeBackbone": _text(top_k=1, num_experts=2, moe_intermediate_dim=16,
                             shared_expert_intermediate_dim=16),
    "RoformerV2Backbone": _roformer,
    "SAM3PromptableConceptBackbone": _sam3,
    "SmolLM3Backbone": _smollm,
    "SmolLMBackbone": _smollm,
    "T5Gemma2Backbone": _t5gemma("2"),
    "T5GemmaBackbone": _t5gemma("1"),
}  # fmt: skip

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


def classify(name: str, cls: type) -> tuple[str, str]:
    import keras
    from keras import ops

    from pe_core.integrations.keras_hub import patch_rotary_embeddings, unpatch_rotary_embeddings

    params = inspect.signature(cls.__init__).parameters.values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    extra, data = SPECIAL[name]() if name in SPECIAL else ({}, None)
    missing = [n for n in required if n not in ("self", "args", "kwargs", *TINY, *extra)]
    if missing:
        return "not built", f"needs {', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}"
    kwargs = {**{n: TINY[n] for n in required if n in TINY}, **extra}
    try:
        keras.utils.set_random_seed(0)
        model = cls(**kwargs)
    except Exception as exc:
        return "not built", f"{type(exc).__name__}: {str(exc)[:80]}"
    if data is None:
        data = {}
        for input_name in [t.name.split(":")[0] for t in model.inputs]:
            if "token_ids" in input_name:
                data[input_name] = _ids()
            elif "padding_mask" in input_name:
                data[input_name] = _ones()
            else:
                return "not built", f"needs input {input_name!r}"

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
    parser.add_argument("--only", nargs="*", default=[], help="these backbones only")
    parser.add_argument("--no-cost", action="store_true", help="skip the timing")
    args = parser.parse_args(argv)
    only = set(args.only)
    load = loadavg()
    import keras

    rows = [
        [name, *classify(name, cls)] for name, cls in rotary_backbones() if not only or name in only
    ]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[1]] = counts.get(row[1], 0) + 1
    speed = cost(args.quick) if keras.backend.backend() == "jax" and not args.no_cost else []
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
