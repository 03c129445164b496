"""NumPy adapter."""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import numpy as np

from pe_core_backends._namespace import Namespace

_DTYPE_NAMES: dict[np.dtype, str] = {}


@functools.lru_cache(maxsize=1)
def _has_ml_dtypes() -> bool:
    """Whether ``ml_dtypes`` (NumPy's bfloat16; installed with JAX) can be imported."""
    return "ml_dtypes" in sys.modules or importlib.util.find_spec("ml_dtypes") is not None


class NumpyNamespace(Namespace):
    name = "numpy"
    has_devices = False

    @property
    def float_dtypes(self) -> tuple[str, ...]:  # type: ignore[override]
        """float64, float32, float16, and bfloat16 where ``ml_dtypes`` is installed."""
        base = ("float64", "float32", "float16")
        return (*base[:2], "bfloat16", base[2]) if _has_ml_dtypes() else base

    def _dtype_object(self, name: str) -> Any:
        if name == "bfloat16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(name)

    def dtype_name(self, dtype: Any) -> str:
        if isinstance(dtype, str):
            return dtype
        name = _DTYPE_NAMES.get(dtype) if isinstance(dtype, np.dtype) else None
        if name is not None:
            return name
        try:
            name = np.dtype(dtype).name
        except TypeError:
            return super().dtype_name(dtype)
        if isinstance(dtype, np.dtype):
            _DTYPE_NAMES[dtype] = name  # ``dtype.name`` is slow (a Python property)
        return name

    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        return np.asarray(x, dtype=dtype)

    def astype(self, x: Any, dtype: Any) -> Any:
        return np.asarray(x).astype(dtype, copy=False)

    abs = staticmethod(np.abs)
    floor = staticmethod(np.floor)
    round = staticmethod(np.round)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    bitwise_right_shift = staticmethod(np.right_shift)
    bitwise_and = staticmethod(np.bitwise_and)
    where = staticmethod(np.where)
    zeros_like = staticmethod(np.zeros_like)
    reshape = staticmethod(np.reshape)
    expand_dims = staticmethod(np.expand_dims)
    broadcast_to = staticmethod(np.broadcast_to)

    def stack(self, arrays: list[Any], axis: int = 0) -> Any:
        return np.stack(arrays, axis=axis)

    def concat(self, arrays: list[Any], axis: int = 0) -> Any:
        return np.concatenate(arrays, axis=axis)

    mutable = True

    def view_as_real(self, z: Any) -> Any:
        z = np.ascontiguousarray(z)
        real = np.float32 if z.dtype == np.complex64 else np.float64
        return z.view(real).reshape((*z.shape, 2))

    def complex_view(self, x: Any) -> Any:
        kind = np.complex64 if x.dtype == np.float32 else np.complex128
        return x.view(kind)

    def multiply_into(self, x: Any, y: Any, out: Any) -> Any:
        return np.multiply(x, y, out=out)

    def copy_into(self, out: Any, value: Any) -> Any:
        out[...] = value
        return out

    def zeros(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        return np.zeros(shape, dtype=dtype)

    def empty(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        return np.empty(shape, dtype=dtype)

    def take_rows(self, table: Any, indices: Any, out: Any = None) -> Any:
        # mode="clip" lets np.take write into out directly (mode="raise" buffers it)
        return np.take(table, indices, axis=0, out=out, mode="clip")


NAMESPACE = NumpyNamespace()
