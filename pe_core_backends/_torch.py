"""PyTorch adapter: new tensors follow the device of the tensor they are made ``like``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pe_core_backends._namespace import Namespace


@torch.compiler.assume_constant_result
def _host_constant(fn: Any, *args: Any) -> Any:
    return fn(*args)


class TorchNamespace(Namespace):
    name = "torch"

    def host_constant(self, fn: Any, *args: Any) -> Any:
        return _host_constant(fn, *args)

    def _dtype_object(self, name: str) -> Any:
        return getattr(torch, name)

    def dtype_name(self, dtype: Any) -> str:
        if isinstance(dtype, torch.dtype):
            return str(dtype).rsplit(".", 1)[-1]
        return super().dtype_name(dtype)

    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        device = like.device if isinstance(like, torch.Tensor) else None
        if isinstance(x, torch.Tensor):
            return x.to(device=device if device is not None else x.device, dtype=dtype)
        return torch.as_tensor(x, dtype=dtype, device=device)

    def astype(self, x: Any, dtype: Any) -> Any:
        return x.to(dtype)

    def to_numpy(self, x: Any) -> np.ndarray:
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()

    def concrete(self, x: Any) -> np.ndarray | None:
        if torch.compiler.is_compiling() or getattr(torch, "_C", None) is None:
            return None
        if x.device.type == "meta":
            return None
        return self.to_numpy(x)

    def _on_accelerator(self, x: Any) -> bool:
        device = getattr(x, "device", None)
        return device is not None and device.type not in ("cpu", "meta")

    floor = staticmethod(torch.floor)
    round = staticmethod(torch.round)
    sin = staticmethod(torch.sin)
    cos = staticmethod(torch.cos)
    reshape = staticmethod(torch.reshape)

    def bitwise_right_shift(self, x: Any, bits: int) -> Any:
        return torch.bitwise_right_shift(x, bits)

    def bitwise_and(self, x: Any, mask: int) -> Any:
        return torch.bitwise_and(x, mask)

    where = staticmethod(torch.where)
    zeros_like = staticmethod(torch.zeros_like)

    def expand_dims(self, x: Any, axis: int) -> Any:
        return torch.unsqueeze(x, axis)

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        return torch.broadcast_to(x, shape)

    def stack(self, arrays: list[Any], axis: int = 0) -> Any:
        return torch.stack(arrays, dim=axis)

    def concat(self, arrays: list[Any], axis: int = 0) -> Any:
        return torch.cat(arrays, dim=axis)

    mutable = True

    def view_as_real(self, z: Any) -> Any:
        return torch.view_as_real(z)

    def complex_view(self, x: Any) -> Any:
        return torch.view_as_complex(x.unflatten(-1, (-1, 2)))

    def multiply_into(self, x: Any, y: Any, out: Any) -> Any:
        return torch.mul(x, y, out=out)

    def copy_into(self, out: Any, value: Any) -> Any:
        return out.copy_(value)

    def zeros(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        device = like.device if isinstance(like, torch.Tensor) else None
        return torch.zeros(shape, dtype=dtype, device=device)


NAMESPACE = TorchNamespace()
