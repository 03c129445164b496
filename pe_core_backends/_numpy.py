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


class NumpyNamespace(Namespace, module=np):
    name = "numpy"

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

    def on_accelerator(self, x: Any) -> bool:
        return False  # host memory only, whatever force_device_path says

    def argsort(self, x: Any, axis: int) -> Any:
        return np.argsort(x, axis=axis, kind="stable")

    def cummax(self, x: Any) -> Any:
        return np.maximum.accumulate(x, axis=-1)

    mutable = True

    def view_as_real(self, z: Any) -> Any:
        z = np.ascontiguousarray(z)
        real = np.float32 if z.dtype == np.complex64 else np.float64
        return z.view(real).reshape((*z.shape, 2))

    def complex_view(self, x: Any) -> Any:
        return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)

    def multiply_into(self, x: Any, y: Any, out: Any) -> Any:
        return np.multiply(x, y, out=out)

    def copy_into(self, out: Any, value: Any) -> Any:
        out[...] = value
        return out

    def empty(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        return np.empty(shape, dtype=dtype)

    def host_view(self, x: Any) -> np.ndarray | None:
        return x if isinstance(x, np.ndarray) else None

    def rotate_small(self, x: Any, factors: Any, layout: str, rotary_dim: int) -> Any:
        if type(x) is not np.ndarray or x.dtype != np.float32:
            return None
        head_dim, half = x.shape[-1], rotary_dim // 2
        out = np.empty_like(x)
        part, target = x[..., :rotary_dim], out[..., :rotary_dim]
        if rotary_dim < head_dim:
            out[..., rotary_dim:] = x[..., rotary_dim:]
        if layout == "interleaved":  # pairs (2j, 2j + 1), as the general kernel computes
            cos, sin = factors.cos(x.ndim), factors.sin(x.ndim)
            a, b = part[..., 0::2], part[..., 1::2]
            target[..., 0::2] = a * cos - b * sin
            target[..., 1::2] = b * cos + a * sin
            return out
        cos, sin = factors.doubled_cos(x.ndim), factors.sin(x.ndim)
        np.multiply(part, cos, out=target)
        target[..., :half] -= part[..., half:] * sin
        target[..., half:] += part[..., :half] * sin
        return out

    def take_rows(self, table: Any, indices: Any, out: Any = None) -> Any:
        # mode="clip" lets np.take write into out directly (mode="raise" buffers it)
        return np.take(table, indices, axis=0, out=out, mode="clip")

    def arange(self, n: int, dtype: Any, like: Any = None) -> Any:
        return np.arange(n, dtype=dtype)

    def matrix_transpose(self, x: Any) -> Any:
        return np.swapaxes(x, -1, -2)

    def expand_diagonals(self, values: Any, rows: int, cols: int, like: Any = None) -> Any:
        # windows values[s : s + cols] for s = 0 .. rows - 1, the last row's first
        windows = np.lib.stride_tricks.sliding_window_view(values, cols, axis=-1)
        return np.ascontiguousarray(windows[..., ::-1, :])


NAMESPACE = NumpyNamespace()
