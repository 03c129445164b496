"""Catch code that reads array values back to the host: :func:`forbid_host_reads`.

On a GPU or TPU, reading a value of a device array in Python (``float(x)``,
``x.item()``, ``np.asarray(x)``, ``if x > 0:``, printing) copies it to the host and
waits for every queued kernel: a synchronisation that stalls the accelerator. Such a read
is easy to add by accident and invisible in the results. Inside
``with forbid_host_reads():`` each one raises :class:`HostReadError` instead, with a
traceback pointing at it, so a test can prove that a function stays on the device.

pe_core's own tests run its device path under this guard (see ``docs/devices.md``);
it works as well on your code, and on a CPU-only machine.

>>> import torch
>>> from pe_core.host_reads import HostReadError, forbid_host_reads
>>> x = torch.arange(4.0)
>>> with forbid_host_reads("torch"):
...     y = torch.sin(x) * 2 + x[1]  # stays on x's device: allowed
...     float(y.sum())  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pe_core.host_reads.HostReadError: float(tensor) reads a torch tensor's value on the host ...
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from pe_core_backends import backend_info, canonical_backend

__all__ = ["GUARDED_BACKENDS", "HostReadError", "forbid_host_reads"]

#: The backends :func:`forbid_host_reads` can guard.
GUARDED_BACKENDS: tuple[str, ...] = ("jax", "torch")

_HINT = (
    " inside forbid_host_reads(): on an accelerator this copies to the host and "
    "synchronises. Keep the computation on the device (or move the read outside the block)."
)


class HostReadError(RuntimeError):
    """An array's values were read back to the host inside :func:`forbid_host_reads`."""


@contextlib.contextmanager
def forbid_host_reads(*backends: str) -> Iterator[None]:
    """Raise :class:`HostReadError` on any host read of a torch or JAX array in the block.

    Parameters
    ----------
    *backends : {"torch", "jax"}
        The frameworks to guard (aliases such as ``"pytorch"`` are accepted; the named
        frameworks are imported). By default every one of them that is already imported,
        so the guard never imports a framework you did not use.

    Raises
    ------
    HostReadError
        Inside the block, at the read. What counts as a read:

        * **torch** (a :class:`torch.overrides.TorchFunctionMode`, so subclasses and
          every device are covered): ``.item()``, ``.tolist()``, ``.numpy()``,
          ``np.asarray(t)`` (``__array__``), ``bool(t)`` (``if t:``, ``t and ...``),
          ``int(t)``, ``float(t)``, ``complex(t)``, ``operator.index(t)`` (``t`` as a
          list index or a ``range`` bound), ``repr``/``str``/``format`` (printing);
          ``.cpu()``, ``.to("cpu")`` and ``cpu_tensor.copy_(t)`` of a tensor on another
          device; and the operations that synchronise because their output size
          depends on the values: ``nonzero``, ``argwhere``, one-argument ``where``,
          ``masked_select``, ``unique``, boolean-mask indexing ``t[mask]``,
          ``torch.equal``, ``torch.allclose``, ``is_nonzero``.
        * **jax**: ``np.asarray``/``np.array``/``np.asanyarray``/``np.ascontiguousarray``
          of a ``jax.Array`` (called through the ``numpy`` module, as nearly all code
          does), ``float``/``int``/``bool``/``complex``/``operator.index``,
          ``.item()``, ``.tolist()``, ``.tobytes()``, printing, ``jax.device_get`` and
          ``jnp.nonzero`` without ``size=``. On an accelerator JAX's own transfer guard
          is also set (``jax.transfer_guard_device_to_host("disallow_explicit")``), and
          it reports reads that bypass Python with JAX's error.
    ValueError
        For a backend other than torch and jax (TensorFlow's reads happen in C++
        and cannot be intercepted).

    Notes
    -----
    *Uploads are allowed.* Moving host data to the device (``torch.as_tensor(a,
    device=...)``, ``jnp.asarray(np_array)``, Python scalars in arithmetic,
    ``host_tensor.to("cuda")``) is not a read and does not wait for the device, so code
    may still build small constant tables on the host and move them over. (JAX's
    ``jax.transfer_guard("disallow")`` would also refuse those, down to the Python
    scalar in ``x * 2.0``; that is why only the device-to-host direction is guarded.)

    *CPU tensors.* ``.cpu()`` or ``.to("cpu")`` of a tensor already on the CPU moves
    nothing, so it passes; what is then done with its values (``.numpy()``, ``.item()``,
    ...) is caught. With :func:`pe_core_backends.force_device_path` this makes the
    guard meaningful on a CPU-only machine: every read of a value is still caught.

    *Scope.* Torch function modes are per thread; the JAX checks are global patches of
    ``numpy``'s conversion functions and of ``jax.Array``'s value accessor that raise
    only in the thread that holds the guard, and are removed when the last guard
    exits. The guard nests and restores everything on exit, also on error. Code that
    bound ``from numpy import asarray`` before the block, and NumPy ufuncs applied
    directly to a CPU ``jax.Array`` (``np.sin(x)``, which read through the buffer
    protocol in C), are not seen.

    Examples
    --------
    A function that stays on the device passes; one that reads does not:

    >>> import jax.numpy as jnp
    >>> from pe_core.host_reads import forbid_host_reads
    >>> x = jnp.arange(8.0)
    >>> def normalise(v):
    ...     return v / jnp.max(jnp.abs(v))  # stays on the device
    >>> def normalise_with_a_read(v):
    ...     return v / float(jnp.max(jnp.abs(v)))  # float(): a host read
    >>> with forbid_host_reads("jax"):
    ...     y = normalise(x)
    >>> with forbid_host_reads("jax"):
    ...     normalise_with_a_read(x)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.host_reads.HostReadError: reading a jax.Array's values on the host ...

    Outside the block the same reads work again:

    >>> float(normalise_with_a_read(x)[-1])
    1.0
    """
    names = _resolve(backends)
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(_GUARDS[name]())
        yield


def _resolve(backends: tuple[str, ...]) -> tuple[str, ...]:
    if not backends:
        return tuple(n for n in GUARDED_BACKENDS if backend_info(n).framework in sys.modules)
    names = []
    for backend in backends:
        name = canonical_backend(backend)
        if name not in GUARDED_BACKENDS:
            raise ValueError(
                f"forbid_host_reads guards {' and '.join(GUARDED_BACKENDS)} arrays only. "
                f"Received: {backend!r}"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


# --------------------------------------------------------------------------- torch

#: Tensor methods and torch functions that always hand values to Python.
_TORCH_READS: dict[str, str] = {
    "item": ".item()",
    "tolist": ".tolist()",
    "numpy": ".numpy()",
    "__array__": "np.asarray(tensor)",
    "__bool__": "bool(tensor)",
    "__int__": "int(tensor)",
    "__float__": "float(tensor)",
    "__complex__": "complex(tensor)",
    "__index__": "operator.index(tensor)",
    "__repr__": "repr(tensor)",
    "__str__": "str(tensor)",
    "__format__": "format(tensor)",
    "equal": "torch.equal",
    "allclose": "torch.allclose",
    "is_nonzero": "is_nonzero",
}

#: Operations whose output size depends on the values: they synchronise.
_TORCH_SYNCS: dict[str, str] = {
    "nonzero": "nonzero",
    "argwhere": "argwhere",
    "masked_select": "masked_select",
    "unique": "unique",
    "unique_consecutive": "unique_consecutive",
    "_unique2": "unique",
}


def _torch_read(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What host read ``func(*args, **kwargs)`` is, or ``None`` when it is not one.

    Called on every torch operation inside the guard: one dict lookup settles most.
    """
    name = getattr(func, "__name__", "")
    read = _TORCH_READS.get(name)
    if read is not None:
        return read
    sync = _TORCH_SYNCS.get(name)
    if sync is not None:
        return f"{sync} (its output size depends on the values)"
    check = _TORCH_ARGUMENT_CHECKS.get(name)
    return None if check is None else check(sys.modules["torch"], args, kwargs)


#: ``check(torch, args, kwargs)``: what host read the call is, or ``None``.
_ArgumentCheck = Callable[[Any, tuple[Any, ...], dict[str, Any]], str | None]


def _one_argument_where(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if len(args) + len(kwargs) == 1:
        return "one-argument torch.where (its output size depends on the values)"
    return None


def _bool_mask_index(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if len(args) == 2 and _has_bool_mask(torch, args[1]):
        return "boolean-mask indexing (its output size depends on the values)"
    return None


def _cpu(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    return ".cpu()" if args and _off_cpu(torch, args[0]) else None


def _to_cpu(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if not (args and _off_cpu(torch, args[0])):
        return None
    try:
        device = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
    except Exception:  # let torch report bad arguments itself
        return None
    if device is not None and torch.device(device).type == "cpu":
        return '.to("cpu")'
    return None


def _copy_to_cpu(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if len(args) < 2:
        return None
    dst, src = args[0], args[1]
    if isinstance(dst, torch.Tensor) and dst.device.type == "cpu" and _off_cpu(torch, src):
        return "cpu_tensor.copy_(device_tensor)"
    return None


#: Operations that read the host only for some arguments -> the check of those.
_TORCH_ARGUMENT_CHECKS: dict[str, _ArgumentCheck] = {
    "where": _one_argument_where,
    "__getitem__": _bool_mask_index,
    "cpu": _cpu,
    "to": _to_cpu,
    "copy_": _copy_to_cpu,
}


def _off_cpu(torch: Any, x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type != "cpu"


def _has_bool_mask(torch: Any, index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


@functools.lru_cache(maxsize=1)
def _torch_mode_class() -> type:
    import torch
    from torch.overrides import TorchFunctionMode

    class ForbidHostReadsMode(TorchFunctionMode):
        """Raises :class:`HostReadError` on the host reads of :func:`_torch_read`."""

        def __torch_function__(
            self,
            func: Any,
            types: Any,
            args: tuple[Any, ...] = (),
            kwargs: dict[str, Any] | None = None,
        ) -> Any:
            kwargs = kwargs or {}
            what = _torch_read(func, args, kwargs)
            if what is not None:
                raise HostReadError(f"{what} reads a torch tensor's value on the host" + _HINT)
            return func(*args, **kwargs)

    del torch
    return ForbidHostReadsMode


@contextlib.contextmanager
def _guard_torch() -> Iterator[None]:
    with _torch_mode_class()():
        yield


# --------------------------------------------------------------------------- jax

_local = threading.local()
_patch_lock = threading.Lock()
_patch_count = 0
_saved: list[tuple[Any, str, Any]] = []

#: NumPy's conversion functions, wrapped while a JAX guard is active.
_NUMPY_CONVERSIONS = ("asarray", "array", "asanyarray", "ascontiguousarray")


def _jax_guarded() -> bool:
    return getattr(_local, "jax_depth", 0) > 0


def _is_jax_value(jax: Any, obj: Any) -> bool:
    """A concrete ``jax.Array`` (tracers are refused by JAX itself)."""
    return isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)


def _holds_jax_value(jax: Any, obj: Any) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_holds_jax_value(jax, item) for item in obj)
    return _is_jax_value(jax, obj)


def _wrap_conversion(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    jax = sys.modules["jax"]

    @functools.wraps(original)
    def conversion(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if _jax_guarded() and _holds_jax_value(jax, obj):
            raise HostReadError(
                f"np.{name}(jax.Array) copies a jax.Array's values to the host" + _HINT
            )
        return original(obj, *args, **kwargs)

    return conversion


def _wrap_value(original: property) -> property:
    fget = original.fget
    assert fget is not None

    def value(self: Any) -> Any:
        if _jax_guarded():
            raise HostReadError(
                "reading a jax.Array's values on the host (float/int/bool/index, .item(), "
                ".tolist(), printing, jax.device_get, ...)" + _HINT
            )
        return fget(self)

    return property(value, doc=original.__doc__)


def _patch_jax() -> None:
    import numpy as np
    from jax._src import array as jax_array

    targets: list[tuple[Any, str, Any]] = []
    value = jax_array.ArrayImpl.__dict__.get("_value")
    if isinstance(value, property):
        targets.append((jax_array.ArrayImpl, "_value", _wrap_value(value)))
    for name in _NUMPY_CONVERSIONS:
        targets.append((np, name, _wrap_conversion(getattr(np, name), name)))
    for owner, name, replacement in targets:
        _saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, replacement)


def _unpatch_jax() -> None:
    while _saved:
        owner, name, original = _saved.pop()
        setattr(owner, name, original)


@contextlib.contextmanager
def _guard_jax() -> Iterator[None]:
    global _patch_count
    import jax

    with _patch_lock:
        if _patch_count == 0:
            _patch_jax()
        _patch_count += 1
    _local.jax_depth = getattr(_local, "jax_depth", 0) + 1
    try:
        with jax.transfer_guard_device_to_host("disallow_explicit"):
            yield
    finally:
        _local.jax_depth -= 1
        with _patch_lock:
            _patch_count -= 1
            if _patch_count == 0:
                _unpatch_jax()


_GUARDS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "torch": _guard_torch,
    "jax": _guard_jax,
}
