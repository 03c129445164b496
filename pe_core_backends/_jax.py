"""JAX adapter (``jax.numpy`` already speaks the Array API).

pe_core never flips ``jax_enable_x64``: asking for float64 while it is off is an error
that says how to turn it on.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pe_core_backends import _jax_host_reads
from pe_core_backends._namespace import ArrayFunction, Namespace

#: Compiled executables kept per jitted function for eager calls (one per input shape).
MAX_EXECUTABLES = 8

#: ``jax.config``, read here and never set. Its options (``jax_enable_x64``) are
#: attributes JAX adds at run time, which its type hints do not declare.
_config: Any = jax.config


class BoundedJit:
    """``jax.jit(fn)`` whose eager executables are kept in a bounded LRU cache.

    Eager JAX compiles a jitted function once per input shape and keeps every
    executable for the life of the process (hundreds of distinct sequence lengths grew
    a process by gigabytes). Here eager calls go through explicitly compiled
    executables, at most :data:`MAX_EXECUTABLES` per function; evicted ones are freed.
    Under an outer ``jax.jit`` the function is inlined as usual.
    """

    def __init__(self, fn: Any, max_entries: int = MAX_EXECUTABLES) -> None:
        self._fn = fn
        self._jit = jax.jit(fn)
        self._max_entries = max_entries
        self._executables: OrderedDict[Any, Any] = OrderedDict()

    def __call__(self, *args: Any) -> Any:
        if any(isinstance(a, jax.core.Tracer) for a in args):
            return self._jit(*args)
        key = tuple((a.shape, str(a.dtype), getattr(a, "sharding", None)) for a in args)
        executable = self._executables.get(key)
        if executable is None:
            # A fresh function object per shape: JAX's tracing and lowering caches are
            # keyed weakly on it, so evicting the executable frees them too.
            def fresh(*inner: Any) -> Any:
                return self._fn(*inner)

            executable = jax.jit(fresh).lower(*args).compile()
            self._executables[key] = executable
            while len(self._executables) > self._max_entries:
                self._executables.popitem(last=False)
        else:
            self._executables.move_to_end(key)
        return executable(*args)


def _extended_sharding(like: Any, shape: tuple[int, ...]) -> Any:
    """The sharding of ``like`` (a ``NamedSharding`` over several devices) extended to a
    table of ``shape`` = ``like.shape + (features...)`` (its new axes whole), or ``None``
    when the shapes do not line up or the sharding is of another kind."""
    sharding = getattr(like, "sharding", None)
    ndim = len(like.shape)
    if not isinstance(sharding, jax.sharding.NamedSharding) or tuple(shape[:ndim]) != tuple(
        like.shape
    ):
        return None
    spec = tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))
    return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*spec))


@functools.lru_cache(maxsize=64)
def _rotator(layout: str, rotary_dim: int, working: str) -> Any:
    """:meth:`Namespace.rotate_pairs` under ``jax.jit`` for one configuration."""

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        # XLA on CPU fuses cos/sin (and the angle kernel before them) into the loop over x
        # and evaluates them again for every head, which made the call 3-4x slower.
        # lax.optimization_barrier does not stop it there; writing the table with a
        # scatter (an exact copy) does, and costs least of the alternatives tried (a
        # reduction with zeros, a matmul by the identity).
        table = jnp.stack([cos, sin])
        table = jnp.zeros_like(table).at[jnp.arange(2)].set(table)
        return Namespace.rotate_pairs(NAMESPACE, x, table[0], table[1], layout, rotary_dim, working)

    return BoundedJit(rotate)


class JaxNamespace(Namespace, module=jnp):
    name = "jax"

    def _dtype_object(self, name: str) -> Any:
        if name == "int64" and not _config.jax_enable_x64:
            raise ValueError("backend 'jax' has no dtype 'int64' while jax_enable_x64 is off.")
        if name == "float64" and not _config.jax_enable_x64:
            raise ValueError(
                "backend 'jax' has no dtype 'float64' while jax_enable_x64 is off; "
                "pe_core does not change it for you: call "
                "jax.config.update('jax_enable_x64', True) first, or ask for float32."
            )
        return jnp.dtype(name)

    def supports(self, dtype_name: str) -> bool:
        return bool(_config.jax_enable_x64) or not dtype_name.endswith("64")

    def dtype_name(self, dtype: Any) -> str:
        if isinstance(dtype, str):
            return dtype
        try:
            return jnp.dtype(dtype).name
        except TypeError:
            return super().dtype_name(dtype)

    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        if (
            isinstance(x, np.ndarray)
            and dtype is None
            and x.dtype == np.float64
            and not _config.jax_enable_x64
        ):
            dtype = jnp.float32
        if isinstance(x, (np.ndarray, np.generic)) and not self.is_tracing():
            # jax.device_put moves host data without compiling anything; jnp.asarray
            # compiles a copy per shape (about 1.5 MB of executable each, never freed).
            host = np.asarray(x, dtype=None if dtype is None else jnp.dtype(dtype))
            if host.dtype.itemsize == 8 and not _config.jax_enable_x64:
                host = host.astype(np.float32 if host.dtype.kind == "f" else np.int32)
            return jax.device_put(host)
        return jnp.asarray(x, dtype=dtype)

    def astype(self, x: Any, dtype: Any) -> Any:
        return jnp.asarray(x).astype(dtype)

    from_dlpack: ArrayFunction = staticmethod(jax.dlpack.from_dlpack)

    def is_tracing(self) -> bool:
        try:
            from jax._src.core import trace_state_clean
        except ImportError:  # pragma: no cover - another JAX layout
            return isinstance(jnp.zeros(()), jax.core.Tracer)
        return not trace_state_clean()

    def is_traced(self, x: Any) -> bool:
        return isinstance(x, jax.core.Tracer)

    def shape(self, x: Any) -> tuple[Any, ...]:
        # sizes may be symbolic (jax.export's shape polymorphism): never int() them
        return tuple(x.shape)

    def _on_accelerator(self, x: Any) -> bool:
        devices = getattr(x, "devices", None)
        if devices is None or isinstance(x, jax.core.Tracer):
            return False  # (traced: nothing is read anyway)
        return any(device.platform != "cpu" for device in devices())

    def device_key(self, x: Any) -> Any:
        devices = getattr(x, "devices", None)
        if devices is None or isinstance(x, jax.core.Tracer):
            return None
        key = tuple(sorted(str(device) for device in devices()))
        sharding = getattr(x, "sharding", None)
        if len(key) > 1 and isinstance(sharding, jax.sharding.NamedSharding):
            return (key, sharding)  # tables placed like x differ by its sharding too
        return key

    def from_host(self, table: np.ndarray, like: Any = None) -> Any:
        if table.dtype == np.float64 and not _config.jax_enable_x64:
            table = table.astype(np.float32)
        if like is not None and hasattr(like, "devices") and not isinstance(like, jax.core.Tracer):
            devices = like.devices()
            if len(devices) == 1:
                return jax.device_put(table, next(iter(devices)))
            sharding = _extended_sharding(like, table.shape)
            if sharding is not None:  # rows of sharded positions: sharded like them
                return jax.device_put(table, sharding)
        if self.is_tracing():
            return jnp.asarray(table)
        return jax.device_put(table)

    def view_as_real(self, z: Any) -> Any:
        return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1)

    compiles = True
    bounded_compiles = True

    def rotate_pairs(
        self, x: Any, cos: Any, sin: Any, layout: str, rotary_dim: int, working: str
    ) -> Any:
        # jitted: one fused pass (inlined under an outer jit)
        return _rotator(layout, rotary_dim, working)(x, cos, sin)

    compile: ArrayFunction = staticmethod(BoundedJit)
    compile_eager_kernels = True
    jit: ArrayFunction = staticmethod(jax.jit)

    def _compilers(self) -> dict[str, Callable[[Any], Any]]:
        return {"jax.jit": jax.jit}

    def arange(self, n: int, dtype: Any, like: Any = None) -> Any:
        return jnp.arange(n, dtype=dtype)

    def matrix_transpose(self, x: Any) -> Any:
        return jnp.swapaxes(x, -1, -2)

    guards_host_reads = True
    _host_reads = _jax_host_reads

    def cummax(self, x: Any) -> Any:
        return jax.lax.cummax(x, axis=x.ndim - 1)

    def image_resize(self, x: Any, size: tuple[int, int], method: str, antialias: bool) -> Any:
        return jax.image.resize(
            x,
            (x.shape[0], *size, x.shape[-1]),
            method="cubic" if method == "bicubic" else "linear",
            antialias=antialias,
        )


NAMESPACE = JaxNamespace()
