"""The one compile-and-cache wrapper: a kernel compiled once per backend and static arguments.

A kernel is a module-level function ``kernel(xp, *arrays, *static)``: ``xp`` a
:class:`~pe_core_backends.Namespace`, then its array arguments, then hashable static
arguments (sizes, frequencies as tuples, dtype names). :func:`compiled` returns the
backend's compiled program of the arrays alone (``jax.jit``, ``tf.function``; the
plain function on backends that compile nothing), built once per ``(backend, kernel,
static)`` and kept in one bounded cache.

>>> from pe_core._kernel.compiled import compiled
>>> def twice(xp, x, factor):
...     return x * factor
>>> program = compiled("numpy", twice, 2.0)
>>> float(program(3.0))
6.0
>>> compiled("numpy", twice, 2.0) is program
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

from pe_core_backends import get_namespace

__all__ = ["compiled"]


@functools.lru_cache(maxsize=256)
def compiled(backend: str, kernel: Callable[..., Any], *static: Hashable) -> Callable[..., Any]:
    """The compiled program ``arrays -> kernel(xp, *arrays, *static)`` on ``backend``."""
    xp = get_namespace(backend)
    return xp.compile(lambda *arrays: kernel(xp, *arrays, *static))
