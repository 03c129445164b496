"""JAX's host-read guard: patched conversions that raise, and JAX's own transfer guard.

What :func:`pe_core.host_reads.forbid_host_reads` counts as a read of a ``jax.Array``
(``np.asarray(x)``, ``float(x)``, ``.item()``, printing, ...) is caught here by global
patches of NumPy's conversion functions and of ``jax.Array``'s value accessor. They
raise only in a thread that holds the guard and are removed when the last guard exits.
The error is the caller's: :func:`guard` raises ``error(what)``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax._src import array as jax_array

_local = threading.local()
_patch_lock = threading.Lock()
_patch_count = 0
_saved: list[tuple[Any, str, Any]] = []

#: NumPy's conversion functions, wrapped while a JAX guard is active.
_NUMPY_CONVERSIONS = ("asarray", "array", "asanyarray", "ascontiguousarray")


def _guard_error() -> Callable[[str], BaseException] | None:
    """The error of the innermost guard of this thread, ``None`` when it holds none."""
    errors: list[Callable[[str], BaseException]] = getattr(_local, "errors", [])
    return errors[-1] if errors else None


def _holds_jax_value(obj: Any) -> bool:
    """Whether ``obj`` is (or a list/tuple holds) a concrete ``jax.Array`` (tracers are
    refused by JAX itself)."""
    if isinstance(obj, (list, tuple)):
        return any(_holds_jax_value(item) for item in obj)
    return isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)


def _wrap_conversion(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def conversion(obj: Any, *args: Any, **kwargs: Any) -> Any:
        error = _guard_error()
        if error is not None and _holds_jax_value(obj):
            raise error(f"np.{name}(jax.Array) copies a jax.Array's values to the host")
        return original(obj, *args, **kwargs)

    return conversion


def _wrap_value(original: property) -> property:
    fget = original.fget
    assert fget is not None

    def value(self: Any) -> Any:
        error = _guard_error()
        if error is not None:
            raise error(
                "reading a jax.Array's values on the host (float/int/bool/index, .item(), "
                ".tolist(), printing, jax.device_get, ...)"
            )
        return fget(self)

    return property(value, doc=original.__doc__)


def _patch() -> None:
    value = jax_array.ArrayImpl.__dict__.get("_value")
    targets: list[tuple[Any, str, Any]] = [
        (np, name, _wrap_conversion(getattr(np, name), name)) for name in _NUMPY_CONVERSIONS
    ]
    if isinstance(value, property):
        targets.insert(0, (jax_array.ArrayImpl, "_value", _wrap_value(value)))
    for owner, name, replacement in targets:
        _saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, replacement)


def _unpatch() -> None:
    while _saved:
        owner, name, original = _saved.pop()
        setattr(owner, name, original)


@contextlib.contextmanager
def guard(error: Callable[[str], BaseException]) -> Iterator[None]:
    """Inside the block every host read of a ``jax.Array`` in this thread raises
    ``error(what)``; JAX's ``transfer_guard_device_to_host("disallow_explicit")`` is
    set too (it reports, with JAX's error, reads on an accelerator that bypass Python).
    """
    global _patch_count
    with _patch_lock:
        if _patch_count == 0:
            _patch()
        _patch_count += 1
    if not hasattr(_local, "errors"):
        _local.errors = []
    _local.errors.append(error)
    try:
        with jax.transfer_guard_device_to_host("disallow_explicit"):
            yield
    finally:
        _local.errors.pop()
        with _patch_lock:
            _patch_count -= 1
            if _patch_count == 0:
                _unpatch()
