"""TensorFlow adapter: the one hand-written mapping onto Array API names."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from pe_core_backends._namespace import ArrayFunction, Namespace

#: Graphs kept per compiled function for eager calls (one per input dtypes and ranks).
MAX_SIGNATURES = 16


class ShapeGenericFunction:
    """``fn`` for TensorFlow: one XLA call inside a trace, a shape-generic graph eagerly.

    ``tf.function(fn, jit_compile=True)`` called eagerly traces and XLA-compiles once per
    input shape and keeps every program (about 0.2 s and 0.6 MB per new sequence
    length, and TensorFlow's retracing warnings after five). Eager calls here run
    graphs traced once per input dtypes and ranks, every size unknown (``None``),
    without XLA: any length reuses them, and at most :data:`MAX_SIGNATURES` are kept.
    They are traced with ``get_concrete_function``, so TensorFlow's retracing
    detector never sees them. Inside a ``tf.function`` the XLA version is called where
    every size is known (it fuses the kernel's many elementwise operations into the
    caller's graph); where a size is unknown the operations are traced inline.
    """

    def __init__(self, fn: Any, max_entries: int = MAX_SIGNATURES) -> None:
        self._fn = fn
        self._xla = tf.function(fn, jit_compile=True, autograph=False)
        self._generic = tf.function(fn, jit_compile=False, autograph=False)
        self._max_entries = max_entries
        self._graphs: OrderedDict[Any, Any] = OrderedDict()

    def __call__(self, *args: Any) -> Any:
        if not tf.executing_eagerly():
            if any(None in tuple(getattr(a, "shape", ())) for a in args):
                # an XLA call compiles once per concrete shape at run time (a served
                # graph would compile per new length): the kernel's operations go into
                # the caller's graph as they are instead
                return self._fn(*args)
            return self._xla(*args)
        arrays = [tf.convert_to_tensor(a) for a in args]
        key = tuple((a.dtype, a.shape.rank) for a in arrays)
        graph = self._graphs.get(key)
        if graph is None:
            specs = [tf.TensorSpec([None] * rank, dtype) for dtype, rank in key]
            graph = self._generic.get_concrete_function(*specs)
            self._graphs[key] = graph
            while len(self._graphs) > self._max_entries:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return graph(*arrays)


# tf.round: half to even, as the Array API
class TensorflowNamespace(Namespace, module=tf, concat="concat"):
    name = "tensorflow"
    compile_when_traced = True

    def _dtype_object(self, name: str) -> Any:
        return tf.dtypes.as_dtype(name)

    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        if isinstance(x, (tf.Tensor, tf.Variable)):
            return x if dtype is None else tf.cast(x, dtype)
        return tf.convert_to_tensor(x, dtype=dtype)

    def astype(self, x: Any, dtype: Any) -> Any:
        return tf.cast(x, dtype)

    def from_dlpack(self, obj: Any) -> Any:
        device = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
        if int(device) == 1:
            # host memory: through NumPy (a copy); TensorFlow's zero-copy import aborts
            # the process on buffers that are not 64-byte aligned
            return tf.convert_to_tensor(np.from_dlpack(obj))
        return tf.experimental.dlpack.from_dlpack(obj.__dlpack__())

    def to_numpy(self, x: Any) -> np.ndarray:
        x = tf.convert_to_tensor(x)
        if x.dtype == tf.bfloat16:
            x = tf.cast(x, tf.float32)
        return x.numpy()

    @tf.autograph.experimental.do_not_convert
    def is_tracing(self) -> bool:
        return not tf.executing_eagerly()

    @tf.autograph.experimental.do_not_convert
    def is_traced(self, x: Any) -> bool:
        return not tf.executing_eagerly() or not hasattr(x, "numpy")

    def _on_accelerator(self, x: Any) -> bool:
        device = getattr(x, "device", "") or ""
        return ":GPU:" in device or ":TPU:" in device

    def device_key(self, x: Any) -> Any:
        return getattr(x, "device", None) or None

    def from_host(self, table: np.ndarray, like: Any = None) -> Any:
        device = getattr(like, "device", None) if like is not None else None
        if device and tf.executing_eagerly():
            with tf.device(device):
                return tf.identity(tf.convert_to_tensor(table))
        return tf.convert_to_tensor(table)

    log1p: ArrayFunction = staticmethod(tf.math.log1p)

    def bitwise_right_shift(self, x: Any, bits: int) -> Any:
        return tf.bitwise.right_shift(x, tf.constant(bits, dtype=x.dtype))

    def bitwise_and(self, x: Any, mask: int) -> Any:
        return tf.bitwise.bitwise_and(x, tf.constant(mask, dtype=x.dtype))

    def shape(self, x: Any) -> tuple[Any, ...]:
        # None for sizes unknown while tracing (e.g. a Keras batch axis)
        return tuple(None if n is None else int(n) for n in x.shape)

    def check_known_rank(self, x: Any, what: str) -> None:
        if isinstance(x, (tf.Tensor, tf.Variable)) and x.shape.rank is None:
            raise ValueError(
                f"{what} must have a known rank (number of axes) under tf.function; "
                "received a tensor of unknown rank (shape None, e.g. input_signature="
                "[tf.TensorSpec(None, ...)]). Give its axes, e.g. tf.TensorSpec([None, None], "
                "tf.float32) for two axes (their sizes may stay None)."
            )

    def merge_last_two(self, x: Any) -> Any:
        return tf.reshape(x, tf.concat([tf.shape(x)[:-2], [x.shape[-2] * x.shape[-1]]], axis=0))

    def split_last(self, x: Any, size: int) -> Any:
        return tf.reshape(x, tf.concat([tf.shape(x)[:-1], [x.shape[-1] // size, size]], axis=0))

    def view_as_real(self, z: Any) -> Any:
        return tf.stack([tf.math.real(z), tf.math.imag(z)], axis=-1)

    compiles = True
    # eager calls run shape-generic graphs (ShapeGenericFunction): exact shapes are fine
    bounded_compiles = True

    compile: ArrayFunction = staticmethod(ShapeGenericFunction)

    def _compilers(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "tf.function": lambda fn: tf.function(fn, jit_compile=False, reduce_retracing=True),
            "tf.function(jit_compile=True)": lambda fn: tf.function(fn, jit_compile=True),
        }

    def arange(self, n: int, dtype: Any, like: Any = None) -> Any:
        return tf.range(n, dtype=dtype)

    def take(self, x: Any, index: Any, axis: int = 0) -> Any:
        return tf.gather(x, index, axis=axis if axis >= 0 else len(x.shape) + axis)

    def matrix_transpose(self, x: Any) -> Any:
        rank = len(x.shape)
        return tf.transpose(x, [*range(rank - 2), rank - 1, rank - 2])

    def image_resize(self, x: Any, size: tuple[int, int], method: str, antialias: bool) -> Any:
        return tf.image.resize(x, size, method=method, antialias=antialias)

    # -- position ids from data (pe_core.position_ids) ---------------------------------
    def cumsum(self, x: Any, axis: int, dtype: Any) -> Any:
        return tf.math.cumsum(tf.cast(x, dtype), axis=axis)

    def sum(self, x: Any, axis: int, dtype: Any) -> Any:
        return tf.math.reduce_sum(tf.cast(x, dtype), axis=axis)

    def searchsorted(self, sorted_sequence: Any, values: Any, side: str = "left") -> Any:
        return tf.searchsorted(sorted_sequence, values, side=side, out_type=tf.int64)

    def take_along_axis(self, x: Any, indices: Any, axis: int) -> Any:
        # the last axis (what pe_core gathers along): the others are batch axes
        return tf.gather(x, indices, axis=axis, batch_dims=len(x.shape) - 1)


NAMESPACE = TensorflowNamespace()
