"""PyTorch adapter: new tensors follow the device of the tensor they are made ``like``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from pe_core_backends import _torch_host_reads, _torch_rope
from pe_core_backends._device import device_path_forced
from pe_core_backends._namespace import ArrayFunction, Namespace


def _writable(x: Any) -> Any:
    """``x``, or a copy of it when it is a read-only NumPy array.

    torch shares a NumPy array's memory and warns when that array is read-only (writing to
    the tensor would write to it): pe_core's cached tables and a caller's read-only inputs
    are copied instead, so no warning escapes and no cache can be written through a result.
    """
    if isinstance(x, np.ndarray) and not torch.compiler.is_compiling() and not x.flags.writeable:
        return x.copy()  # (compiled code takes host arrays as constants: nothing to share)
    return x


def _mark_constant(fn: Any) -> Any:
    """``torch.compiler.assume_constant_result(fn)`` without importing the compiler.

    The public decorator imports ``torch._dynamo`` (seconds) only to set one marker on
    ``fn``; eager code never needs it. When dynamo is loaded already the public API is
    used; otherwise the same marker is set directly (a test checks that it is the one
    the public API sets, so a change in PyTorch shows up there).
    """
    if "torch._dynamo" in sys.modules:
        return torch.compiler.assume_constant_result(fn)
    fn._dynamo_marked_constant = True
    return fn


@_mark_constant
def _host_constant(fn: Any, *args: Any) -> Any:
    return fn(*args)


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _specialized(value: Any) -> Any:
    """``value`` with every symbolic number in it made the number it is now.

    While ``torch.compile`` traces with dynamic shapes, a size read off a tensor (and,
    with ``dynamic=True``, a float read off an object) is symbolic; the host constants
    are static configuration (a feature width, a base), so the compiled graph is
    specialised to their values, with a guard that recompiles if one changes.
    """
    # Dynamo reports a symbolic number as the Python type it stands for: ask about all.
    if isinstance(value, (bool, int, float, *_SYMBOLIC)):
        return torch.fx.experimental.symbolic_shapes.guard_scalar(value)
    if isinstance(value, (tuple, list)):
        items = [_specialized(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return value


def _device(like: Any) -> Any:
    """The device of ``like`` when it is a tensor, else ``None``."""
    return like.device if isinstance(like, torch.Tensor) else None


class TorchNamespace(
    Namespace,
    module=torch,
    bitwise_right_shift="bitwise_right_shift",
    concat="cat",  # torch's joins take axis= for dim= (as NumPy's)
    expand_dims="unsqueeze",
    take_along_axis="take_along_dim",
):
    name = "torch"
    builds_tables = True
    # Inductor's C++ code generator walks a fused loop body without memoising shared
    # subexpressions: the polynomials' made it take minutes; the library's sin/cos do not.
    traced_polynomials = False

    def host_constant(self, fn: Any, *args: Any) -> Any:
        if torch.compiler.is_compiling():
            args = tuple([_specialized(a) for a in args])
        return _host_constant(fn, *args)

    def _dtype_object(self, name: str) -> Any:
        return getattr(torch, name)

    def dtype_name(self, dtype: Any) -> str:
        if isinstance(dtype, torch.dtype):
            return str(dtype).rsplit(".", 1)[-1]
        return super().dtype_name(dtype)

    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        device = _device(like)
        if isinstance(x, torch.Tensor):
            return x.to(device=device if device is not None else x.device, dtype=dtype)
        return torch.as_tensor(_writable(x), dtype=dtype, device=device)

    def astype(self, x: Any, dtype: Any) -> Any:
        return x.to(dtype)

    from_dlpack: ArrayFunction = staticmethod(torch.from_dlpack)

    def to_numpy(self, x: Any) -> np.ndarray:
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()

    def shape(self, x: Any) -> tuple[int, ...]:
        return tuple(x.shape)

    def is_tracing(self) -> bool:
        return torch.compiler.is_compiling()

    def is_traced(self, x: Any) -> bool:
        if torch.compiler.is_compiling() or getattr(torch, "_C", None) is None:
            return True
        # fake and meta tensors, and the wrappers of function transforms (torch.func's
        # vmap, grad, jacrev: plain torch.Tensor to Python, with no storage to read)
        return x.device.type == "meta" or torch._C._functorch.is_functorch_wrapped_tensor(x)

    def is_exporting(self) -> bool:
        return bool(getattr(torch.compiler, "is_exporting", lambda: False)())

    def requires_grad(self, x: Any) -> bool:
        return bool(x.requires_grad) and torch.is_grad_enabled()

    def _on_accelerator(self, x: Any) -> bool:
        device = getattr(x, "device", None)
        return device is not None and device.type not in ("cpu", "meta")

    def device_key(self, x: Any) -> Any:
        return str(x.device) if isinstance(x, torch.Tensor) else "cpu"

    def from_host(self, table: np.ndarray, like: Any = None) -> Any:
        host = torch.from_numpy(_writable(np.ascontiguousarray(table)))
        device = _device(like)
        if device is None or device.type == "cpu":
            return host
        if device.type == "cuda":
            # From pinned memory the copy is asynchronous: no stream synchronisation.
            return host.pin_memory().to(device, non_blocking=True)
        return host.to(device)

    def copy(self, x: Any) -> Any:
        return x.clone()

    def host_view(self, x: Any) -> np.ndarray | None:
        if type(x) is not torch.Tensor or x.requires_grad or device_path_forced():
            return None
        if x.device.type != "cpu" or x.dtype is torch.bfloat16:
            return None
        if torch.compiler.is_compiling() or torch._C._functorch.is_functorch_wrapped_tensor(x):
            return None
        return x.numpy()

    def rotate_small(self, x: Any, factors: Any, layout: str, rotary_dim: int) -> Any:
        if device_path_forced():  # as on an accelerator: the general route
            return None
        return _torch_rope.rotate_small(x, factors, layout, rotary_dim)

    def rotate_pairs(
        self, x: Any, cos: Any, sin: Any, layout: str, rotary_dim: int, working: str
    ) -> Any:

        wrapped = torch._C._functorch.is_functorch_wrapped_tensor
        if (
            _torch_rope.fast_path_ok(x)
            and not (cos.requires_grad or sin.requires_grad)
            and not (wrapped(x) or wrapped(cos) or wrapped(sin))  # torch.func: no out=
        ):
            return _torch_rope.rotate(x, cos, sin, layout, rotary_dim, working)
        return super().rotate_pairs(x, cos, sin, layout, rotary_dim, working)

    view_as_real: ArrayFunction = staticmethod(torch.view_as_real)

    mutable = True

    def complex_view(self, x: Any) -> Any:
        return torch.view_as_complex(x.unflatten(-1, (-1, 2)))

    def multiply_into(self, x: Any, y: Any, out: Any) -> Any:
        return torch.mul(x, y, out=out)

    def copy_into(self, out: Any, value: Any) -> Any:
        return out.copy_(value)

    def zeros(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        return torch.zeros(shape, dtype=dtype, device=_device(like))

    def empty(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        return torch.empty(shape, dtype=dtype, device=_device(like))

    def take_rows(self, table: Any, indices: Any, out: Any = None) -> Any:
        return torch.index_select(table, 0, indices, out=out)

    def arange(self, n: int, dtype: Any, like: Any = None) -> Any:
        return torch.arange(n, dtype=dtype, device=_device(like))

    def int64_words(self, x: Any) -> tuple[Any, Any]:
        if sys.byteorder != "little" or not torch.compiler.is_compiling() or self.is_exporting():
            return super().int64_words(x)
        # compiled code: the words are the tensor's own memory, read as int32 (inductor
        # does not vectorise int64 shifts and narrowing on CPUs without AVX-512); exported
        # programs keep the arithmetic (ONNX has no reinterpreting view)
        words = x.contiguous().reshape(-1).view(torch.int32).reshape(*x.shape, 2)
        return words[..., 0], words[..., 1]

    def expand_diagonals(self, values: Any, rows: int, cols: int, like: Any = None) -> Any:
        if torch.compiler.is_compiling():
            # unfold's shape rule equates a symbolic window with its size: the gather
            # keeps sequence lengths symbolic (and fuses into the next kernel)
            return super().expand_diagonals(values, rows, cols, like=like)
        # windows values[s : s + cols] for s = 0 .. rows - 1, the last row's first
        return values.unfold(-1, cols, 1).flip(-2)

    def _compilers(self) -> dict[str, Callable[[Any], Any]]:
        # one graph with static shapes (imports the compiler)
        return {"torch.compile": lambda fn: torch.compile(fn, fullgraph=True, dynamic=False)}

    guards_host_reads = True
    _host_reads = _torch_host_reads

    def image_resize(self, x: Any, size: tuple[int, int], method: str, antialias: bool) -> Any:
        nchw = x.permute(0, 3, 1, 2)
        out = torch.nn.functional.interpolate(
            nchw, size=size, mode=method, align_corners=False, antialias=antialias
        )
        return out.permute(0, 2, 3, 1)

    # -- position ids from data (pe_core.position_ids) ---------------------------------
    def cumsum(self, x: Any, axis: int, dtype: Any) -> Any:
        if dtype == torch.int64 and x.dtype == dtype:  # the argument costs ~1 us of dispatch
            return torch.cumsum(x, dim=axis)  # (integers narrower than int64 would widen)
        return torch.cumsum(x, dim=axis, dtype=dtype)

    def sum(self, x: Any, axis: int, dtype: Any) -> Any:
        return torch.sum(x, dim=axis, dtype=dtype)

    def searchsorted(self, sorted_sequence: Any, values: Any, side: str = "left") -> Any:
        return torch.searchsorted(sorted_sequence, values, right=side == "right")

    def cummax(self, x: Any) -> Any:
        return torch.cummax(x, dim=-1).values

    def fill_where(self, x: Any, condition: Any, value: int) -> Any:
        return x.masked_fill_(condition, value)


NAMESPACE = TorchNamespace()
