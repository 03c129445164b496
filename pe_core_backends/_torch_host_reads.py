"""PyTorch's host-read guard: a :class:`torch.overrides.TorchFunctionMode` that raises.

What :func:`pe_core.host_reads.forbid_host_reads` counts as a read of a torch tensor
(``.item()``, ``float(t)``, ``.cpu()`` of a device tensor, value-dependent output
sizes, ...) is decided here, one dict lookup per torch operation for most of them.
The error is the caller's: :func:`guard` raises ``error(what)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: Tensor methods and torch functions that always hand values to Python.
_TORCH_READS: dict[str, str] = {
    **{name: f".{name}()" for name in ("item", "tolist", "numpy")},
    "__array__": "np.asarray(tensor)",
    **{f"__{f}__": f"{f}(tensor)" for f in ("bool", "int", "float", "complex", "repr", "str")},
    "__format__": "format(tensor)",
    "__index__": "operator.index(tensor)",
    "equal": "torch.equal",
    "allclose": "torch.allclose",
    "is_nonzero": "is_nonzero",
}

#: Operations whose output size depends on the values: they synchronise.
_TORCH_SYNCS: dict[str, str] = {
    **{name: name for name in ("nonzero", "argwhere", "masked_select", "unique")},
    "unique_consecutive": "unique_consecutive",
    "_unique2": "unique",
}

#: Both, as what each read is.
_READS = _TORCH_READS | {
    name: f"{sync} (its output size depends on the values)" for name, sync in _TORCH_SYNCS.items()
}


def read_of(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What host read ``func(*args, **kwargs)`` is, or ``None`` when it is not one.

    Called on every torch operation inside the guard: one dict lookup settles most.
    """
    name = getattr(func, "__name__", "")
    read = _READS.get(name)
    if read is not None:
        return read
    check = _TORCH_ARGUMENT_CHECKS.get(name)
    return None if check is None else check(args, kwargs)


#: ``check(args, kwargs)``: what host read the call is, or ``None``.
_ArgumentCheck = Callable[[tuple[Any, ...], dict[str, Any]], str | None]


def _one_argument_where(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if len(args) + len(kwargs) == 1:
        return "one-argument torch.where (its output size depends on the values)"
    return None


def _bool_mask_index(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    index = args[1] if len(args) == 2 else ()
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items):
        return "boolean-mask indexing (its output size depends on the values)"
    return None


def _to_cpu(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if not (args and _off_cpu(args[0])):
        return None
    try:
        device = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
    except Exception:  # let torch report bad arguments itself
        return None
    if device is not None and torch.device(device).type == "cpu":
        return '.to("cpu")'
    return None


def _copy_to_cpu(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    if len(args) < 2:
        return None
    dst, src = args[0], args[1]
    if isinstance(dst, torch.Tensor) and dst.device.type == "cpu" and _off_cpu(src):
        return "cpu_tensor.copy_(device_tensor)"
    return None


#: Operations that read the host only for some arguments -> the check of those.
_TORCH_ARGUMENT_CHECKS: dict[str, _ArgumentCheck] = {
    "where": _one_argument_where,
    "__getitem__": _bool_mask_index,
    "cpu": lambda args, kwargs: ".cpu()" if args and _off_cpu(args[0]) else None,
    "to": _to_cpu,
    "copy_": _copy_to_cpu,
}


def _off_cpu(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type != "cpu"


class ForbidHostReadsMode(TorchFunctionMode):
    """Raises ``error(what)`` on the host reads of :func:`read_of`."""

    def __init__(self, error: Callable[[str], BaseException]) -> None:
        super().__init__()
        self._error = error

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        what = read_of(func, args, kwargs)
        if what is not None:
            raise self._error(f"{what} reads a torch tensor's value on the host")
        return func(*args, **kwargs)


@contextlib.contextmanager
def guard(error: Callable[[str], BaseException]) -> Iterator[None]:
    """Inside the block every host read of a torch tensor raises ``error(what)``.

    Torch function modes are per thread: other threads are not affected.
    """
    with ForbidHostReadsMode(error):
        yield
