"""Which transformers models ``patch_rotary_embeddings`` makes exact: every family, measured.

``python -m benchmarks.hf_coverage [--jobs N] [--timeout S] [--only a,b] [--memory GIB]
[--out FILE]``
enumerates every model type of the installed transformers whose modeling module defines
a class named ``*RotaryEmbedding*``, ``*RopePositionEmbedding`` or
``*RotaryPositionalEmbedding``, and for each one, in its own process (a timeout
each):

1. builds the model of the type's default config (``AutoModel``'s class for it, else
   the first model class of its modeling module that builds) with its parameters on
   the ``meta`` device (nothing allocated, nothing downloaded; buffers such as
   ``inv_freq`` are real);
2. builds it a second time with transformers' own code run in float64 (the default
   dtype float64 and every float32 dtype a float64 one): the float64 reference, the
   module's own formula without float32 rounding;
3. calls ``patch_rotary_embeddings`` on each rotary module alone (the reason it is
   refused, if it is) and on the whole model (``crashed`` if that raises anything
   else than the documented ``ValueError``);
4. calls each patched module at positions ``1e5 ... 1e5 + 7`` (modules called as
   ``forward(x, position_ids)``; the last 8 rows of a table module's table, GPT-J and
   CodeGen, whose forward serves no further), or its vision ``forward(seqlen)`` at 1024
   positions (``forward(pixel_values)``: a 128 x 128 grid of patches, in eval mode;
   EfficientLoFTR's ``forward(x)``: a 128 x 128 grid of features; Llama 4's vision
   ``forward(hidden_states)``: its whole table; the speech encoders' and CLVP's
   ``forward(hidden_states)``: the last 8 rows of the table of ``1e5 + 8`` positions;
   timm's modules: ``get_embed`` of a 128 x 128 grid),
   and compares the cos/sin with the float64 reference's: ``exact`` within
   :data:`EXACT` (also reported: the unpatched module's error), ``wrong`` beyond.

Each module is one row: family, module path, class, kind (``text`` for modules called
with position ids, ``sequence`` for a table per sequence length, ``vision`` otherwise), status (``exact`` / ``refused`` /
``crashed`` / ``wrong`` / ``build failed``), errors and the reason. Prints a summary
and a Markdown table; ``--out`` writes the table there too. A full run takes a while
(a process per family): run it with ``--jobs 1`` or 2 on a shared machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import contextlib
import importlib
import inspect
import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

#: Largest cos/sin error (absolute) of an ``exact`` module at position 1e5.
EXACT = 4e-7

#: First position of the text probe.
FAR = 100_000

#: Positions of the vision probe (``forward(seqlen)``).
VISION_LEN = 1024

#: Patches per side of the grid probe (``forward(pixel_values)``).
GRID = 128


#: A rotary class in a modeling module (as ``is_rotary`` of pe_core's probe names them).
ROTARY_CLASS = (
    r"class (\w*RotaryEmbedding\w*|\w*RopePositionEmbedding|\w*RotaryPositionalEmbedding)\("
)


def families() -> list[tuple[str, str]]:
    """``(model_type, modeling module)`` of every model type with a rotary class."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    out = []
    seen = set()
    types = sorted(CONFIG_MAPPING_NAMES, key=lambda t: (_folder(t) != t, t))
    for model_type in types:
        folder = _folder(model_type)
        if folder in seen:
            continue
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not (name.startswith("modeling_") and name.endswith(".py")):
                continue
            if "_tf_" in name or "_flax_" in name:
                continue
            with open(os.path.join(path, name), encoding="utf-8") as handle:
                if re.search(ROTARY_CLASS, handle.read()):
                    out.append((model_type, f"transformers.models.{folder}.{name[:-3]}"))
                    seen.add(folder)
                    break
    return sorted(out)


def _folder(model_type: str) -> str:
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    return model_type_to_module_name(model_type)


@contextlib.contextmanager
def _meta_parameters() -> Iterator[None]:
    """Parameters on the meta device while building (buffers stay real, and the
    parameters of rotary modules: Mistral Large 4's ``alpha``)."""
    import torch

    from pe_core.integrations._transformers_probe import is_rotary

    original = torch.nn.Module.register_parameter

    def register(self: Any, name: str, param: Any) -> None:
        if param is not None and param.device.type != "meta" and not is_rotary(self):
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(self, name, param)

    torch.nn.Module.register_parameter = register  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original  # type: ignore[method-assign]


def _upcast_mode() -> Any:
    """A torch function mode that runs float32 requests as float64."""
    import torch
    from torch.overrides import TorchFunctionMode

    def up(value: Any) -> Any:
        return torch.float64 if value is torch.float32 else value

    class Upcast(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "dtype" in kwargs:
                kwargs["dtype"] = up(kwargs["dtype"])
            args = tuple(up(a) for a in args)
            name = getattr(func, "__name__", "")
            if name == "float":
                return args[0].double()
            out = func(*args, **kwargs)
            return out

    return Upcast()


#: Config settings of the families whose default config builds no model or no rotary
#: module (set on the config, sub-configs by name).
OVERRIDES: dict[str, dict[str, Any]] = {
    "cohere_compass": {
        "text_config": {
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
        }
    },
    "dbrx": {"attn_config": {"rope_theta": 10000.0}},
    "zamba2": {"use_mem_rope": True},
    # default configs with settings left None that a checkpoint's config supplies
    "chameleon": {"vocabulary_map": {"<image>": 1}},
    "deepseek_ocr2": {
        "text_config": {
            "mlp_layer_types": ["dense", "sparse"],
            "num_experts_per_tok": 1,
            "n_group": 1,
            "topk_group": 1,
        }
    },
    "diffusion_gemma": {
        "text_config": {"num_experts": 4, "top_k_experts": 1, "moe_intermediate_size": 64}
    },
    "dots1": {"n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 1},
    "esm": {"vocab_size": 33, "position_embedding_type": "rotary"},
    "gemma3n": {"text_config": {"num_kv_shared_layers": 0}},
    "granite4_vision": {"deepstack_layer_map": [(1, 0)]},
    "granitemoehybrid": {"position_embedding_type": "rope"},
    "hunyuan_v1_dense": {"head_dim": 128},
    "hunyuan_v1_moe": {"head_dim": 128},
    "hunyuan_vl": {
        "text_config": {"head_dim": 128, "rope_parameters": {"mrope_section": [16, 16, 16, 16]}}
    },
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "ministral": {"head_dim": 128},
    "moonshine_streaming": {"num_key_value_heads": 8},
    "nemotron": {"num_key_value_heads": 48},
    # the text module's M-RoPE sections cover half the head (checkpoints' configs)
    "glm4v": {"text_config": {"rope_parameters": {"partial_rotary_factor": 0.5}}},
    "glm4v_moe": {"text_config": {"head_dim": 128}},
    "glm_image": {"text_config": {"rope_parameters": {"partial_rotary_factor": 0.5}}},
    # speech encoders whose default position embedding is relative: their rotary one
    "seamless_m4t": {"position_embeddings_type": "rotary"},
    "wav2vec2-bert": {"position_embeddings_type": "rotary"},
    "wav2vec2-conformer": {"position_embeddings_type": "rotary"},
}


#: Families whose default config asks tens of GB of the allocator while building (each
#: full-size weight is allocated before it moves to ``meta``): built shrunk
#: (:data:`SMALL`, in the config and every sub-config), then with their OVERRIDES. The
#: rotary modules read none of the shrunk settings (head sizes and rope settings are kept).
SHRUNK = frozenset(
    "axk1 bailing_hybrid beam blt chameleon cohere cohere2 cohere2_moe cohere_compass "
    "deepseek_ocr2 deepseek_v3 deepseek_v32 deepseek_v4 diffusion_gemma dots1 "
    "dots3_note emu3 esm gemma3n gemma4 glm4_moe glm4v_moe glm5_next glm_moe_dsa "
    "gpt_oss granite4_vision granitemoehybrid hunyuan_v1_dense hunyuan_v1_moe "
    "hunyuan_vl hy_v3 hy_v4_vl inkling2 kimi_k25 lfm2_moe llama4 longcat_flash "
    "mimo_v2_flash minimax_m2 minimax_m3_vl ministral mistral4 mistral_large4 "
    "moonshine_streaming muse_glimmer muse_spark nemotron pe_audio_video pe_video "
    "qwen2_5_omni qwen3_omni_moe qwen4_exp step3p7".split()
)

#: Upper bounds of the size settings of a shrunk config (a smaller value is kept).
SMALL = {
    **dict.fromkeys(
        ("num_hidden_layers", "num_layers", "n_layers", "encoder_layers", "decoder_layers"), 2
    ),  # the layer counts (_LAYER_COUNTS)
    **dict.fromkeys(("vocab_size", "codebook_size"), 512),
    **dict.fromkeys(
        (
            "intermediate_size",
            "moe_intermediate_size",
            "ffn_hidden_size",
            "expert_ffn_hidden_size",
            "shared_intermediate_size",
            "shared_expert_intermediate_size",
        ),
        64,
    ),
    **dict.fromkeys(
        ("n_routed_experts", "num_experts", "num_local_experts", "n_experts", "moe_num_experts"),
        4,
    ),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k", "n_group", "topk_group"), 1),
}


def _config(model_type: str) -> Any:
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    if model_type in SHRUNK:  # built again, so that settings derived from sizes follow
        config = AutoConfig.for_model(model_type, **_small(config, set()))
    _override(config, OVERRIDES.get(model_type, {}))
    return config


def _small(config: Any, seen: set[int]) -> dict[str, Any]:
    """The settings of ``config`` (and of its sub-configs) above :data:`SMALL`, capped;
    a padding id beyond the capped vocabulary becomes 0."""
    seen.add(id(config))
    out: dict[str, Any] = {}
    for key, value in list(vars(config).items()):
        if hasattr(value, "to_dict") and id(value) not in seen:
            inner = _small(value, seen)
            if inner:
                out[key] = inner
        elif key in SMALL and isinstance(value, int) and not isinstance(value, bool):
            if key == "num_hidden_layers" and config.to_dict().get("per_layer_config"):
                continue  # its per-layer settings name layers by index
            if key in _LAYER_COUNTS and _fixed_per_layer(config, value):
                continue  # lists of one entry per layer kept by the rebuilt config
            if value > SMALL[key]:
                out[key] = SMALL[key]
    pad = getattr(config, "pad_token_id", None)
    if isinstance(pad, int) and "vocab_size" in out and pad >= out["vocab_size"]:
        out["pad_token_id"] = 0
    return out


#: The layer counts of :data:`SMALL`.
_LAYER_COUNTS = ("num_hidden_layers", "num_layers", "n_layers", "encoder_layers", "decoder_layers")


def _fixed_per_layer(config: Any, layers: int) -> bool:
    """Whether ``config``'s class has a list or tuple default of ``layers`` entries (a
    pyramid's ``hidden_sizes``, MuseSpark's audio tower): a list the rebuilt config
    keeps, so that its layer count cannot shrink (lists a config derives from its
    layer count, such as ``layer_types``, default to ``None`` and are derived again)."""
    for name in dir(type(config)):
        value = getattr(type(config), name, None)
        if isinstance(value, (list, tuple)) and value and len(value) == layers:
            return True
    return False


def _override(config: Any, settings: dict[str, Any]) -> None:
    for key, value in settings.items():
        inner = getattr(config, key, None)
        if isinstance(value, dict) and (hasattr(inner, "to_dict") or isinstance(inner, dict)):
            if isinstance(inner, dict):  # a dict setting (rope_parameters): merged
                setattr(config, key, {**inner, **value})
                continue
            _override(inner, value)
        else:
            setattr(config, key, value)


def _model_classes(model_type: str, module_name: str, config: Any) -> list[Any]:
    from transformers import PreTrainedModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    module = importlib.import_module(module_name)
    names = []
    auto = MODEL_MAPPING_NAMES.get(model_type)
    if isinstance(auto, str):
        names.append(auto)
    for name, obj in vars(module).items():
        if (
            inspect.isclass(obj)
            and issubclass(obj, PreTrainedModel)
            and obj.__module__ == module_name
            and isinstance(config, getattr(obj, "config_class", None) or type(None))
            and name not in names
            and not name.endswith("PreTrainedModel")
        ):
            names.append(name)
    names.sort(key=lambda n: (n != auto, not n.endswith("Model"), "ForConditional" in n))
    return [getattr(module, n) for n in names if hasattr(module, n)]


#: Sub-configs a family's model may be built from when no class of the whole config
#: builds a model with a rotary module (a tower that needs a library not installed,
#: a default class without rotary modules).
SUB_CONFIGS = ("text_config", "thinker_config")


def _candidates(model_type: str, module_name: str, config: Any) -> Iterator[tuple[Any, str]]:
    """``(model class, sub-config name or "")`` to try, in order."""
    for cls in _model_classes(model_type, module_name, config):
        yield cls, ""
    for key in SUB_CONFIGS:
        inner = getattr(config, key, None)
        if hasattr(inner, "to_dict"):
            for cls in _model_classes(model_type, module_name, inner):
                yield cls, key


def _build(model_type: str, module_name: str, reference: bool) -> Any:
    import torch

    from pe_core.integrations._transformers_probe import is_rotary

    config = _config(model_type)
    errors = []
    for cls, key in _candidates(model_type, module_name, config):
        try:
            with _meta_parameters():
                if reference:
                    previous = torch.get_default_dtype()
                    torch.set_default_dtype(torch.float64)
                    try:
                        with _upcast_mode():
                            fresh = _config(model_type)
                            model = cls(getattr(fresh, key) if key else fresh)
                    finally:
                        torch.set_default_dtype(previous)
                else:
                    model = cls(getattr(config, key) if key else config)
        except Exception as error:
            errors.append(f"{cls.__name__}: {type(error).__name__}: {error}"[:200])
            continue
        if any(is_rotary(m) for m in model.modules()):
            return model
        errors.append(f"{cls.__name__}: no rotary module")
    raise RuntimeError("; ".join(errors) or "no model class")


def _kind(module: Any, path: str) -> str:
    """``vision`` for the rotary modules of vision towers and of 2-D grids (a forward
    without position ids), ``sequence`` for a table per sequence length
    (``forward(hidden_states)`` of speech encoders and CLVP), else ``text``."""
    if hasattr(module, "cached_sequence_length"):  # speech encoders', CLVP's 1-D tables
        return "sequence"
    name = type(module).__name__.lower() + " " + path.lower()
    params = list(inspect.signature(type(module).forward).parameters)[1:]
    grid = params in (["pixel_values"], ["x"], ["hidden_states"])
    return "vision" if ("vision" in name or "visual" in name or grid) else "text"


def _cos_sin(out: Any) -> tuple[Any, Any]:
    import torch

    if isinstance(out, tuple) and len(out) == 2:
        return out
    if isinstance(out, torch.Tensor) and out.is_complex():
        return out.real, out.imag
    if isinstance(out, torch.Tensor):
        return out.double().cos(), out.double().sin()
    raise TypeError(f"returns {type(out).__name__}")


def _probe(module: Any, kind: str, dtype: Any, upcast: bool, rows: int = 3) -> tuple[Any, Any]:
    """The module's cos/sin at the probe positions (M-RoPE text modules: ``rows`` distinct
    rows of position ids)."""
    import torch

    context = _upcast_mode() if upcast else contextlib.nullcontext()
    with torch.no_grad(), context:
        if type(module).__module__.startswith("timm."):  # timm's table of a large grid
            table = module.get_embed([GRID, GRID])
            return table, table
        params = list(inspect.signature(type(module).forward).parameters)[1:]
        if params[:2] == ["x", "position_ids"]:
            x = torch.zeros(1, dtype=dtype)
            table = getattr(module, "embed_positions", None)  # GPT-J, CodeGen: its last rows
            first = FAR if table is None else min(FAR, table.shape[0] - 8)
            pos = torch.arange(first, first + 8)[None]
            if hasattr(module, "mrope_section") or callable(
                getattr(module, "recomposition_frequencies", None)
            ):
                pos = torch.cat([pos + 3 * i for i in range(2 if kind == "vision" else rows)])
                pos = pos if kind == "vision" else pos[:, None]
            args: tuple[Any, ...] = (x, pos)
            rope_type = getattr(module, "rope_type", None)
            if isinstance(rope_type, dict) and rope_type:
                args = (x, pos, sorted(rope_type)[0])
            return _cos_sin(module(*args))
        if params == ["pixel_values"]:  # DINOv3-style 2-D grids: a large grid, eval mode
            size = module.config.patch_size
            ph, pw = (size, size) if isinstance(size, int) else size
            pixels = torch.zeros(1, 1, GRID * ph, GRID * pw, dtype=dtype)
            return _cos_sin(module.eval()(pixels))
        if params == ["x"] and hasattr(module.config, "q_aggregation_stride"):  # EfficientLoFTR
            k, stride = module.config.q_aggregation_kernel_size, module.config.q_aggregation_stride
            side = k + stride * (GRID - 1)
            return _cos_sin(module(torch.zeros(1, 1, side, side, dtype=dtype)))
        if params == ["hidden_states"] and hasattr(module, "cached_sequence_length"):
            out = module(torch.zeros(1, FAR + 8, 1, dtype=dtype))  # a table per length
            if out.ndim == 5:  # stack([cos, sin]): its last 8 rows
                return out[0, -8:, 0, 0], out[1, -8:, 0, 0]
            return _cos_sin(out[0, -8:])  # CLVP's angles
        if params == ["hidden_states"]:  # Llama 4's vision tower: its whole table
            return _cos_sin(module(torch.zeros(1, dtype=dtype)))
        return _cos_sin(module(VISION_LEN))


def run_family(model_type: str, module_name: str) -> list[dict[str, Any]]:
    """Rows of one family (in this process)."""
    import torch

    from pe_core.integrations._transformers_probe import is_rotary
    from pe_core.integrations.transformers import patch_rotary_embeddings

    torch.manual_seed(0)
    torch.set_num_threads(1)
    try:
        model = _build(model_type, module_name, reference=False)
        reference = _build(model_type, module_name, reference=True)
    except Exception as error:
        return [{"family": model_type, "status": "build failed", "reason": str(error)[:300]}]
    refs = dict(reference.named_modules())
    rows = []
    for path, module in model.named_modules():
        if not is_rotary(module):
            continue
        row: dict[str, Any] = {
            "family": model_type,
            "module": path,
            "class": type(module).__name__,
            "kind": _kind(module, path),
        }
        rows.append(row)
        ref = refs.get(path)
        try:
            section = getattr(module, "mrope_section", None) or ()
            counts = sorted({3, 2, len(section)} - {0, 1}, key=lambda n: n != 3)
            for n_rows in counts:  # the module's own number of rows: the first it takes
                try:
                    want = _probe(ref, row["kind"], torch.float64, upcast=True, rows=n_rows)
                    break
                except Exception:
                    if n_rows == counts[-1]:
                        raise
            before = _probe(module, row["kind"], torch.float32, upcast=False, rows=n_rows)
            row["unpatched"] = max(
                float((b.double() - w.double()).abs().max())
                for b, w in zip(before, want, strict=True)
            )
        except Exception as error:
            want = None
            row["probe"] = f"{type(error).__name__}: {error}"[:200]
        try:
            patch_rotary_embeddings(module)
        except ValueError as error:
            row["status"], row["reason"] = "refused", str(error)[:400]
            continue
        except Exception as error:
            row["status"], row["reason"] = "crashed", f"{type(error).__name__}: {error}"[:400]
            continue
        if want is None:
            row["status"], row["reason"] = "unverified", row.pop("probe")
            continue
        try:
            got = _probe(module, row["kind"], torch.float32, upcast=False, rows=n_rows)
            err = max(
                float((g.double() - w.double()).abs().max()) for g, w in zip(got, want, strict=True)
            )
        except Exception as error:
            row["status"], row["reason"] = "crashed", f"{type(error).__name__}: {error}"[:400]
            continue
        row["patched"] = err
        row["status"] = "exact" if err <= EXACT else "wrong"
    # the whole model in one call: refused or patched, never a crash
    try:
        from pe_core.integrations.transformers import unpatch_rotary_embeddings

        unpatch_rotary_embeddings(model)
        patch_rotary_embeddings(model)
        whole = "patched"
    except ValueError:
        whole = "refused"
    except Exception as error:
        whole = f"crashed: {type(error).__name__}: {error}"[:300]
    for row in rows:
        row["whole"] = whole
    if not rows:
        rows.append({"family": model_type, "status": "build failed", "reason": "no rotary"})
    return rows


#: Families whose video tower is a timm model (transformers' ``TimmWrapper``): timm
#: imports torchvision, not installed here. They are built with a stub torchvision
#: (:func:`_torchvision_stub`) in their own process.
TIMM_FAMILIES = frozenset({"pe_video", "pe_audio_video"})


class _StubMeta(type):
    """Placeholders' attributes are placeholders too (``InterpolationMode.BICUBIC``)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _StubMeta(name, (_Placeholder,), {"__module__": cls.__module__})


class _Placeholder(metaclass=_StubMeta):
    """A torchvision name of the stub: it can be imported, subclassed and compared
    against; using it (an instance, a call) raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"torchvision stub: {type(self).__qualname__} was used")


def _torchvision_stub() -> None:
    """Serve ``torchvision`` and its submodules as stub packages whose every name is a
    :class:`_Placeholder` (for good: in a family's own process), and make transformers
    check again which libraries it can use."""
    import importlib.abc
    import importlib.machinery
    import sys
    import types

    import transformers.utils.import_utils as import_utils

    class Module(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            value = _StubMeta(name, (_Placeholder,), {"__module__": self.__name__})
            setattr(self, name, value)
            return value

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name == "torchvision" or name.startswith("torchvision."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec: Any) -> Any:
            return Module(spec.name)

        def exec_module(self, module: Any) -> None:
            module.__version__ = "0.0.0+stub"

    sys.meta_path.insert(0, Finder())
    for name in ("is_torchvision_available", "is_torchvision_v2_available", "is_timm_available"):
        getattr(getattr(import_utils, name), "cache_clear", lambda: None)()


def _child(model_type: str, module_name: str, conn: Any, memory: float) -> None:
    if memory > 0:  # a family that asks too much fails alone (MemoryError), not the machine
        import resource

        limit = int(memory * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        if model_type in TIMM_FAMILIES:
            _torchvision_stub()
        rows = run_family(model_type, module_name)
    except BaseException as error:
        rows = [{"family": model_type, "status": "crashed", "reason": repr(error)[:300]}]
    conn.send(json.dumps(rows))
    conn.close()


def _one(
    model_type: str, module_name: str, timeout: float, memory: float = 0.0
) -> list[dict[str, Any]]:
    """One family in a process of its own (forked: torch and transformers are imported
    once, in the parent), killed after ``timeout`` seconds."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(model_type, module_name, send, memory))
    process.start()
    send.close()
    rows = None
    if receive.poll(timeout):
        try:
            rows = json.loads(receive.recv())
        except EOFError:
            rows = None
    process.join(5)
    if process.is_alive():
        process.kill()
        process.join()
        return rows or [{"family": model_type, "status": "build failed", "reason": "timeout"}]
    if rows is None:
        return [{"family": model_type, "status": "crashed", "reason": f"exit {process.exitcode}"}]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| family | module | class | kind | status | unpatched | patched | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        err = [
            f"{r[k]:.1e}" if isinstance(r.get(k), float) else "" for k in ("unpatched", "patched")
        ]
        reason = str(r.get("reason", "")).replace("|", "/").replace("\n", " ")
        lines.append(
            f"| {r['family']} | `{r.get('module', '')}` | {r.get('class', '')} | "
            f"{r.get('kind', '')} | {r['status']} | {err[0]} | {err[1]} | {reason[:160]} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    by_family: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        by_family.setdefault((r["family"], r.get("kind", "?")), set()).add(r["status"])
    out = []
    for kind in ("text", "vision", "sequence", "?"):
        fams = {f: s for (f, k), s in by_family.items() if k == kind}
        if not fams:
            continue
        exact = sum(1 for s in fams.values() if s == {"exact"})
        counts: dict[str, int] = {}
        for s in fams.values():
            for status in s:
                counts[status] = counts.get(status, 0) + 1
        out.append(f"{kind}: {len(fams)} families, {exact} all exact; modules' statuses: {counts}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hf_coverage")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--memory", type=float, default=0.0, help="GiB of address space a family may use"
    )
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    import torch  # noqa: F401 - imported once, before the forks
    import transformers  # noqa: F401

    import pe_core.integrations.transformers  # noqa: F401

    todo = families()
    if args.only:
        wanted = set(args.only.split(","))
        todo = [t for t in todo if t[0] in wanted]
    rows: list[dict[str, Any]] = []
    with futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        jobs = [pool.submit(_one, t, m, args.timeout, args.memory) for t, m in todo]
        for job in jobs:
            rows.extend(job.result())
    text = summary(rows) + "\n\n" + table(rows) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
        with open(args.out + ".json", "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
