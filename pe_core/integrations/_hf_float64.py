"""transformers' own rope init functions, evaluated in float64 (at patch time only).

A rotary module whose rope type :func:`pe_core.rope_scaling.rope_frequencies` does not
read (vision towers' ``"axial"`` frequencies, a model's own ``compute_*_rope_parameters``)
keeps transformers' formula: the module's init function is run again with every
float32 request made a float64 one (:class:`Float64Mode`) and the default dtype float64,
so that its frequencies carry no float32 rounding. The caller checks the result
against the module's float32 ``inv_freq`` before using it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

__all__ = ["Float64Mode", "float64_init_functions", "run_float64"]


def _up(value: Any) -> Any:
    return torch.float64 if value is torch.float32 else value


class Float64Mode(TorchFunctionMode):
    """Every torch call asking for float32 (``dtype=``, ``.to(torch.float)``,
    ``.float()``) gets float64 instead."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {k: _up(v) for k, v in (kwargs or {}).items()}
        args = tuple(_up(a) for a in args)
        if getattr(func, "__name__", "") == "float" and args and isinstance(args[0], torch.Tensor):
            return args[0].double()
        return func(*args, **kwargs)


def float64_init_functions(module: Any, rope_type: str) -> list[Callable[..., Any]]:
    """The init functions that may have built ``module``'s ``inv_freq``: transformers'
    ``ROPE_INIT_FUNCTIONS[rope_type]`` (read from the loaded transformers, never
    imported here) and the module's own ``compute_*_rope_parameters`` methods."""
    found: list[Callable[..., Any]] = []
    utils = sys.modules.get("transformers.modeling_rope_utils")
    table = getattr(utils, "ROPE_INIT_FUNCTIONS", {}) if utils is not None else {}
    if rope_type in table:
        found.append(table[rope_type])
    for name in sorted(dir(type(module))):
        if name.startswith("compute_") and name.endswith("rope_parameters"):
            method = getattr(module, name, None)
            if callable(method):
                found.append(method)
    return found


def run_float64(
    function: Callable[..., Any], config: Any, layer_type: str | None, seq_len: int | None
) -> tuple[np.ndarray, float]:
    """``function(config, ...)`` in float64: ``(inv_freq, attention_factor)``."""
    try:
        accepted: Mapping[str, inspect.Parameter] = inspect.signature(function).parameters
    except (TypeError, ValueError):
        accepted = {}
    wide = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    kwargs: dict[str, Any] = {}
    for key, value in (("layer_type", layer_type), ("seq_len", seq_len)):
        if value is not None and (wide or key in accepted):
            kwargs[key] = value
    if "device" in accepted:
        kwargs["device"] = None
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad(), Float64Mode():
            out = function(config, **kwargs)
    finally:
        torch.set_default_dtype(previous)
    inv_freq, factor = out
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.dtype != torch.float64:
        raise TypeError("the init function does not return a float64 tensor in float64 mode")
    return inv_freq.detach().cpu().numpy(), float(factor)
