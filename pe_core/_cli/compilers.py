"""The compilers ``pe-core check`` runs a backend's functions under, in the registry's
order (:attr:`pe_core_backends.BackendInfo.compilers`).

The labels come from the registry; building each compiler still imports its framework
here, until :mod:`pe_core_backends` offers a function that compiles ``fn`` under a
named compiler (then this module becomes that call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pe_core_backends import backend_info

__all__ = ["compilers"]


def compilers(name: str, fn: Callable[..., Any]) -> list[tuple[str, Callable[..., Any]]]:
    """``fn`` under each compiler the registry lists for backend ``name``, in its order
    (none for NumPy); an unknown ``name`` is a ValueError naming the known backends."""
    compiled: list[tuple[str, Callable[..., Any]]] = []
    for label in backend_info(name).compilers:
        if label == "jax.jit":
            import jax

            compiled.append((label, jax.jit(fn)))
        elif label == "torch.compile":
            import torch

            compiled.append((label, torch.compile(fn, fullgraph=True, dynamic=False)))
        elif label == "tf.function":
            import tensorflow as tf

            compiled.append((label, tf.function(fn, jit_compile=False, reduce_retracing=True)))
        elif label == "tf.function(jit_compile=True)":
            import tensorflow as tf

            compiled.append((label, tf.function(fn, jit_compile=True)))
        else:
            raise ValueError(
                f"pe-core check cannot build compiler {label!r} of backend {name!r}. "
                "Expected one of: jax.jit, torch.compile, tf.function, "
                "tf.function(jit_compile=True)."
            )
    return compiled
