"""The interface every backend adapter implements, in two parts.

:class:`ArrayCore` is what every backend must provide: functions named as in the Python
Array API standard (``sin``, ``floor``, ``stack``, ``concat``, ``astype``, ...) and what
pe_core must know about an array (its dtype, shape and device, whether it is traced).
Nothing in it knows about positional encodings.

:class:`FastPaths` is optional: compilation, writing in place, host-read guards, and the
few whole kernels pe_core's encodings call as one unit (rotating feature pairs for
rotary embeddings, the Toeplitz expansion of T5 biases, the int32 words of int64
positions for the angle kernel, ...). Each has a generic default written with the core,
which an adapter overrides where its framework does better.

:class:`Namespace` is both: the base class of every adapter, and the type pe_core's
kernel is written against.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeAlias

import numpy as np

from pe_core_backends._device import device_path_forced

#: A framework function that an adapter installs as one of the methods below with
#: ``staticmethod`` (``sin = staticmethod(np.sin)``: no extra Python call per use). Its
#: own signature is wider than the method's, so adapters declare it with this type.
ArrayFunction: TypeAlias = Callable[..., Any]

#: Array API name -> its spelling in an array module (NumPy's, where they differ), for
#: adapters that take their functions from one (``module=`` of the class statement).
_MODULE_FUNCTIONS = {"bitwise_right_shift": "right_shift", "concat": "concatenate"} | {
    name: name
    for name in "abs floor log1p round sin cos bitwise_and where zeros_like reshape "
    "expand_dims broadcast_to stack cumsum sum searchsorted take_along_axis".split()
}


class ArrayCore:
    """What every backend provides: Array-API-named functions and facts about arrays.

    Subclasses set :attr:`name` and fill in the framework-specific methods (those that
    raise ``NotImplementedError`` here). ``like`` arguments carry placement: a new
    array is put on the device of ``like``.
    """

    name: str = "?"
    #: float dtype names this backend has (a subset of ``FLOAT_DTYPES``).
    float_dtypes: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")
    #: the array module of ``module=`` (``np``, ``jnp``, ``tf``, ``torch``), whose functions
    #: the defaults of :meth:`zeros` and :meth:`argsort` call (``None`` without one)
    _module: Any = None

    def __init_subclass__(cls, module: Any = None, **spellings: str) -> None:
        """``class Adapter(Namespace, module=np)``: the functions of ``module`` (named as
        in NumPy, or as ``spellings`` say: ``expand_dims="unsqueeze"``) become the class's
        Array API functions that it does not define itself, as ``staticmethod``."""
        super().__init_subclass__()
        if module is not None:
            cls._module = module
        for name, spelling in ({**_MODULE_FUNCTIONS, **spellings} if module else {}).items():
            if name not in cls.__dict__:
                setattr(cls, name, staticmethod(getattr(module, spelling)))

    def __repr__(self) -> str:
        return f"<pe_core_backends namespace {self.name!r}>"

    # -- dtypes ---------------------------------------------------------------
    def _dtype_object(self, name: str) -> Any:
        raise NotImplementedError

    def dtype(self, name: str) -> Any:
        """The framework's dtype object for a canonical dtype name."""
        if name not in self.float_dtypes and name not in ("int32", "int64"):
            raise ValueError(
                f"backend {self.name!r} has no dtype {name!r}. "
                f"Expected one of: {', '.join(self.float_dtypes)}."
            )
        return self._dtype_object(name)

    def supports(self, dtype_name: str) -> bool:
        """Whether arrays of this dtype can be made now (JAX without x64 has no 64-bit)."""
        return True

    def dtype_name(self, dtype: Any) -> str:
        """Canonical name of ``dtype`` (a string, or any framework's dtype object)."""
        if isinstance(dtype, str):
            return dtype
        name = getattr(dtype, "name", None)
        if isinstance(name, str):
            return name
        return str(dtype).rsplit(".", 1)[-1].strip("'>")

    def dtype_of(self, x: Any) -> str:
        """Canonical dtype name of array ``x`` (``'int32'``, ``'float32'``, ``'bool'``...)."""
        return self.dtype_name(x.dtype)

    @staticmethod
    def kind(dtype_name: str) -> str:
        """``'bool'``, ``'int'``, ``'float'`` or ``'complex'`` for a dtype name."""
        if dtype_name == "bool":
            return "bool"
        if dtype_name.startswith(("int", "uint")):
            return "int"
        if dtype_name.startswith(("float", "bfloat")):
            return "float"
        if dtype_name.startswith("complex"):
            return "complex"
        return "other"

    # -- creation and conversion ---------------------------------------------
    def asarray(self, x: Any, dtype: Any = None, like: Any = None) -> Any:
        raise NotImplementedError

    def astype(self, x: Any, dtype: Any) -> Any:
        raise NotImplementedError

    def from_dlpack(self, obj: Any) -> Any:
        """An array of this backend from any object with ``__dlpack__`` (zero-copy)."""
        return np.from_dlpack(obj)

    def to_numpy(self, x: Any) -> np.ndarray:
        """A NumPy copy of a concrete array."""
        return np.asarray(x)

    def concrete(self, x: Any) -> np.ndarray | None:
        """The values of ``x`` as NumPy if they are known now (:meth:`to_numpy`), ``None``
        when ``x`` is traced."""
        return None if self.is_traced(x) else self.to_numpy(x)

    def shape(self, x: Any) -> tuple[int, ...]:
        return tuple(int(n) for n in x.shape)

    def check_known_rank(self, x: Any, what: str) -> None:
        """Raise ``ValueError`` naming ``what`` when ``x``'s number of axes is unknown
        (a traced array of unknown rank); nothing where ranks are always known."""

    # -- tracing ----------------------------------------------------------------
    def is_tracing(self) -> bool:
        """Whether a compiler of this backend is tracing now (new arrays are symbolic)."""
        return False

    def is_traced(self, x: Any) -> bool:
        """Whether ``x`` is a symbolic (traced) value whose numbers are unknown."""
        return False

    def is_exporting(self) -> bool:
        """Whether a graph exporter of this backend is tracing now (``torch.export``:
        ``torch.compiler.is_exporting``, torch >= 2.5); ``False`` where there is none."""
        return False

    def requires_grad(self, x: Any) -> bool:
        """Whether gradients are being recorded for ``x`` (eager autograd: torch).

        Such arrays must go through the differentiable kernel, never through a table
        built from their values (a constant for autograd). Traced values of function
        transforms (``jax.grad``, ``torch.func``) count as traced instead.
        """
        return False

    # -- placement ------------------------------------------------------------
    @property
    def numpy_arrays(self) -> bool:
        """Whether this backend's arrays are NumPy arrays themselves (the host namespace:
        host-built tables and host positions need no conversion). Only NumPy's: an
        adapter built on NumPy's for arrays of its own class is another backend."""
        return self.name == "numpy"

    def on_accelerator(self, x: Any) -> bool:
        """Whether ``x`` lives on a non-CPU device (or the device path is forced).

        Arrays on an accelerator are never read back to the host by pe_core; see
        :func:`~pe_core_backends.force_device_path`.
        """
        return device_path_forced() or self._on_accelerator(x)

    def _on_accelerator(self, x: Any) -> bool:
        return False

    def device_key(self, x: Any) -> Any:
        """A hashable name of the device ``x`` lives on (for caches)."""
        return None

    def from_host(self, table: np.ndarray, like: Any = None) -> Any:
        """A NumPy array as this backend's array on ``like``'s device (one transfer)."""
        return self.asarray(table, like=like)

    def copy(self, x: Any) -> Any:
        """A new array with the values of ``x`` (on its device)."""
        return x

    # -- elementwise functions ------------------------------------------------
    def floor(self, x: Any) -> Any:
        raise NotImplementedError

    def abs(self, x: Any) -> Any:
        raise NotImplementedError

    def log1p(self, x: Any) -> Any:
        """``log(1 + x)`` elementwise."""
        raise NotImplementedError

    def round(self, x: Any) -> Any:
        """Round half to even."""
        raise NotImplementedError

    def sin(self, x: Any) -> Any:
        raise NotImplementedError

    def cos(self, x: Any) -> Any:
        raise NotImplementedError

    def where(self, condition: Any, x: Any, y: Any) -> Any:
        raise NotImplementedError

    def bitwise_right_shift(self, x: Any, bits: int) -> Any:
        """Arithmetic shift of integers: floor division by ``2**bits``."""
        raise NotImplementedError

    def bitwise_and(self, x: Any, mask: int) -> Any:
        raise NotImplementedError

    # -- creation, shapes and joins ---------------------------------------------
    def zeros(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        """Zeros of ``dtype`` (the array module's ``zeros``: no placement by default)."""
        return self._module.zeros(shape, dtype=dtype)

    def zeros_like(self, x: Any) -> Any:
        raise NotImplementedError

    def empty(self, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
        """A new array whose values are unspecified (zeros where nothing cheaper exists)."""
        return self.zeros(shape, dtype, like=like)

    def arange(self, n: int, dtype: Any, like: Any = None) -> Any:
        """``[0, 1, ..., n - 1]`` of integer ``dtype`` (a dtype object of this backend),
        on ``like``'s device."""
        return self.asarray(np.arange(n), dtype=dtype, like=like)

    def stack(self, arrays: list[Any], axis: int = 0) -> Any:
        raise NotImplementedError

    def concat(self, arrays: list[Any], axis: int = 0) -> Any:
        raise NotImplementedError

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def expand_dims(self, x: Any, axis: int) -> Any:
        raise NotImplementedError

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def merge_last_two(self, x: Any) -> Any:
        """``(..., a, b)`` -> ``(..., a * b)``, also when leading sizes are unknown."""
        shape = self.shape(x)
        return self.reshape(x, (*shape[:-2], shape[-2] * shape[-1]))

    def split_last(self, x: Any, size: int) -> Any:
        """``(..., a * size)`` -> ``(..., a, size)``, also when leading sizes are unknown."""
        shape = self.shape(x)
        return self.reshape(x, (*shape[:-1], shape[-1] // size, size))

    def view_as_real(self, z: Any) -> Any:
        """A complex array ``(...,)`` as real ``(..., 2)`` of (real, imaginary) parts."""
        raise NotImplementedError

    # -- gathers, products and reductions ---------------------------------------
    def take(self, x: Any, index: Any, axis: int = 0) -> Any:
        """``x`` indexed along ``axis`` by an integer array ``index`` of any shape
        (``numpy.take``): shape ``x.shape[:axis] + index.shape + x.shape[axis + 1:]``.

        A gather: gradients flow to ``x``.
        """
        if axis >= 0:
            return x[(slice(None),) * axis + (index,)]
        return x[(Ellipsis, index) + (slice(None),) * (-axis - 1)]

    def matrix_transpose(self, x: Any) -> Any:
        """``(..., a, b)`` -> ``(..., b, a)`` (the Array API's ``matrix_transpose``)."""
        return x.mT

    def matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` (the Array API's ``matmul``): batch axes broadcast, also between
        operands of different ranks (a matrix times a stack of matrices)."""
        return a @ b

    def cumsum(self, x: Any, axis: int, dtype: Any) -> Any:
        """Running sums of ``x`` (booleans or integers) along ``axis`` in integer ``dtype``
        (a dtype object of this backend): ``out[..., i] = x[..., 0] + ... + x[..., i]``."""
        raise NotImplementedError(f"backend {self.name!r} has no cumsum")

    def sum(self, x: Any, axis: int, dtype: Any) -> Any:
        """The sum of ``x`` (booleans or integers) along ``axis`` (removed) in ``dtype``."""
        raise NotImplementedError(f"backend {self.name!r} has no sum")

    def searchsorted(self, sorted_sequence: Any, values: Any, side: str = "left") -> Any:
        """Insertion points of ``values`` into the 1-D ascending ``sorted_sequence`` (same
        dtype), as ``numpy.searchsorted``: for ``side="right"`` the number of entries
        ``<= value``. Integer indices of this backend's index dtype."""
        raise NotImplementedError(f"backend {self.name!r} has no searchsorted")

    def argsort(self, x: Any, axis: int) -> Any:
        """Indices that sort integer ``x`` along ``axis`` ascending, stably: equal values
        keep their order (the Array API's ``argsort(x, axis=axis, stable=True)``).
        Integer indices of this backend's index dtype."""
        return self._module.argsort(x, axis=axis, stable=True)

    def take_along_axis(self, x: Any, indices: Any, axis: int) -> Any:
        """``x`` gathered along ``axis`` by integer ``indices`` of the same rank (the Array
        API's ``take_along_axis``): ``out[..., i] = x[..., indices[..., i]]`` for the
        last axis."""
        raise NotImplementedError(f"backend {self.name!r} has no take_along_axis")


class FastPaths(ArrayCore):
    """The optional parts of a backend, each with a generic default built on the core.

    An adapter overrides the ones its framework does better: compilers, in-place
    writes, host-read guards, and the whole kernels pe_core's encodings call as one
    unit (:meth:`rotate_pairs`, :meth:`rotate_small`, :meth:`expand_diagonals`,
    :meth:`int64_words`, ...). Flags (``compiles``, ``mutable``, ...) say which.
    """

    # -- constants for tracing compilers ------------------------------------------
    def host_constant(self, fn: Any, *args: Any) -> Any:
        """Evaluate ``fn(*args)`` in plain Python and treat the result as a constant.

        ``fn`` must be pure and return plain Python data (numbers and tuples). Tracing
        compilers that would otherwise trace into ``fn`` (``torch.compile``) are told
        to run it once and embed the result.
        """
        return fn(*args)

    # -- compilation ----------------------------------------------------------------
    def compile(self, fn: Any) -> Any:
        """``fn`` compiled for this backend where that fuses elementwise work
        (``jax.jit``, ``tf.function(jit_compile=True)``); unchanged elsewhere."""
        return fn

    #: whether :meth:`compile` compiles (fusing elementwise work) rather than returning fn
    compiles: bool = False

    #: whether traced kernels should still go through :meth:`compile` (a tracer that
    #: may not fuse by itself, e.g. ``tf.function`` without XLA)
    compile_when_traced: bool = False

    #: whether traced float32 kernels should take sin/cos from short polynomials (all
    #: multiply-adds, which XLA fuses and vectorises) rather than the library's
    traced_polynomials: bool = True

    #: whether large host-known tables are better multiplied out by the backend itself
    #: (threaded kernels, no host-to-device copy) than built by NumPy and converted
    builds_tables: bool = False

    #: whether :meth:`compile` keeps a bounded number of executables per input shape,
    #: so that eager callers may pass exact shapes (else they pad to a few buckets)
    bounded_compiles: bool = False

    #: whether eager calls of a kernel of many small operations should run as one
    #: program of :meth:`compile` (eager JAX dispatches, and compiles, every operation
    #: on its own) rather than operation by operation
    compile_eager_kernels: bool = False

    def jit(self, fn: Any) -> Any:
        """``fn`` under the framework's tracing compiler with its own cache per input
        signature (``jax.jit``), for a program the caller keeps per configuration;
        :meth:`compile` where there is none."""
        return self.compile(fn)

    def _compilers(self) -> dict[str, Callable[[Any], Any]]:
        """Compiler label -> how :meth:`under_compiler` builds it (none by default)."""
        return {}

    def under_compiler(self, label: str, fn: Any) -> Any:
        """``fn`` under compiler ``label``, one of this backend's registry ``compilers``
        (:func:`pe_core_backends.backend_info`), as ``pe-core check`` runs it: the whole
        function as one graph (``torch.compile(fullgraph=True, dynamic=False)``,
        ``tf.function(jit_compile=...)``, ``jax.jit``).

        Raises
        ------
        ValueError
            For a label this backend cannot build (the message lists those it can).
        """
        builders = self._compilers()
        build = builders.get(label)
        if build is None:
            known = ", ".join(builders) or "none"
            raise ValueError(
                f"backend {self.name!r} cannot build compiler {label!r}. Expected one of: {known}."
            )
        return build(fn)

    # -- in-place output -------------------------------------------------------------
    #: whether arrays can be written in place (``out=`` arguments)
    mutable: bool = False

    def complex_view(self, x: Any) -> Any:
        """A real array ``(..., 2n)`` viewed as complex ``(..., n)`` (same memory)."""
        raise TypeError(f"backend {self.name!r} arrays are immutable; out= is not supported")

    def multiply_into(self, x: Any, y: Any, out: Any) -> Any:
        """``out[...] = x * y`` without a temporary."""
        raise TypeError(f"backend {self.name!r} arrays are immutable; out= is not supported")

    def copy_into(self, out: Any, value: Any) -> Any:
        """``out[...] = value``."""
        raise TypeError(f"backend {self.name!r} arrays are immutable; out= is not supported")

    def take_rows(self, table: Any, indices: Any, out: Any = None) -> Any:
        """``table[indices]`` along the first axis (``indices`` a 1-D integer array).

        With ``out`` (mutable backends; shape ``(len(indices),) + table.shape[1:]``) the
        rows are written into it and it is returned.
        """
        rows = self.take(table, indices, axis=0)
        return rows if out is None else self.copy_into(out, rows)

    def fill_where(self, x: Any, condition: Any, value: int) -> Any:
        """``x`` with the Python number ``value`` where ``condition`` holds. ``x`` must be a
        new array the caller owns: mutable backends may write into it."""
        return self.where(condition, self.asarray(value, dtype=x.dtype), x)

    def cummax(self, x: Any) -> Any:
        """Running maxima of integer ``x`` along its last axis: ``out[..., i]`` is the
        largest of ``x[..., :i + 1]``. The default doubles each step's reach: about
        ``log2(n)`` elementwise passes, each the size of ``x``."""
        n, step = x.shape[-1], 1
        while step < n:
            shifted = self.concat([x[..., :step], x[..., : n - step]], -1)
            x = self.where(shifted > x, shifted, x)
            step *= 2
        return x

    # -- kernels of the encodings ----------------------------------------------------
    def int64_words(self, x: Any) -> tuple[Any, Any]:
        """The int32 words of int64 ``x``: its signed low 32 bits (``x`` modulo
        ``2**32``, wrapped to int32) and ``floor(x / 2**32)`` (the angle kernel's split
        of wide integer positions)."""
        int32 = self.dtype("int32")
        return self.astype(x, int32), self.astype(self.bitwise_right_shift(x, 32), int32)

    def expand_diagonals(self, values: Any, rows: int, cols: int, like: Any = None) -> Any:
        """Per-diagonal values ``(..., rows + cols - 1)`` as a ``(..., rows, cols)`` matrix
        with ``out[..., i, j] = values[..., j - i + rows - 1]`` (a Toeplitz expansion:
        T5's relative bias).

        ``like`` places the index arrays a gather needs (its device).
        """
        wide = self.dtype("int64" if self.supports("int64") else "int32")
        keys = self.expand_dims(self.arange(cols, wide, like=like), 0)
        queries = self.expand_dims(self.arange(rows, wide, like=like), 1)
        return self.take(values, keys - queries + (rows - 1), axis=-1)

    def rotate_pairs(
        self, x: Any, cos: Any, sin: Any, layout: str, rotary_dim: int, working: str
    ) -> Any:
        """Rotate feature pairs of ``x`` (``(..., head_dim)``) by angles with ``cos``/``sin``
        (rotary embeddings).

        ``cos`` and ``sin`` have shape ``P + (rotary_dim/2,)`` with ``P`` broadcasting
        against ``x.shape[:-1]``, in the ``working`` dtype on ``x``'s device. Pairs are
        ``(j, j + r/2)`` for ``layout="half"`` and ``(2j, 2j + 1)`` for
        ``"interleaved"``; features past ``rotary_dim`` pass through. Computed in
        ``working`` precision and rounded once to ``x``'s dtype.
        """
        shape = self.shape(x)
        head_dim, half = shape[-1], rotary_dim // 2
        part = x[..., :rotary_dim] if rotary_dim < head_dim else x
        cast = self.dtype_of(x) != working
        if cast:
            part = self.astype(part, self.dtype(working))
        # Pairs as an axis of size 2 (before the frequencies for "half", after them for
        # "interleaved"); stacking the two results back along it compiles (XLA) to one
        # pass, where concatenating two halves costs an extra copy. split_last and
        # merge_last_two keep working when leading sizes are unknown or symbolic.
        axis = -2 if layout == "half" else -1
        pairs = self.split_last(part, half if layout == "half" else 2)
        if layout == "half":
            a, b = pairs[..., 0, :], pairs[..., 1, :]
        else:
            a, b = pairs[..., 0], pairs[..., 1]
        out = self.merge_last_two(self.stack([a * cos - b * sin, b * cos + a * sin], axis=axis))
        if cast:
            out = self.astype(out, x.dtype)
        if rotary_dim < head_dim:
            out = self.concat([out, x[..., rotary_dim:]], axis=-1)
        return out

    def host_view(self, x: Any) -> np.ndarray | None:
        """The values of ``x`` as a NumPy array without a copy, transfer or synchronisation.

        Only for eager arrays in host memory that nothing records (no autograd, no
        tracing, no function transform, no forced device path); ``None`` otherwise, and
        for backends that cannot tell cheaply. The few-positions lanes of
        :func:`~pe_core.encode` and :func:`~pe_core.apply_rope` compute from such a
        view on the host; ``None`` sends the call down the general route.
        """
        return None

    def rotate_small(self, x: Any, factors: Any, layout: str, rotary_dim: int) -> Any:
        """Rotate a float32 ``x`` in host memory by host-built factors, or ``None``.

        ``factors`` is a :class:`~pe_core._kernel.rope_factors.HostFactors` (NumPy float32
        ``cos``/``sin`` of shape ``P + (rotary_dim/2,)``, ``P`` broadcasting against
        ``x.shape[:-1]``). ``None`` when ``x`` is not an eager float32 array in host
        memory that nothing records, and by default; the caller then takes the general
        route (:meth:`rotate_pairs`).
        """
        return None

    # -- host-read guards (pe_core.host_reads) ----------------------------------------
    #: whether :meth:`host_read_guard` can catch host reads of this backend's arrays
    guards_host_reads: bool = False
    #: the module whose ``guard(error)`` is :meth:`host_read_guard` (guarding adapters)
    _host_reads: Any = None

    def host_read_guard(
        self, error: Callable[[str], BaseException]
    ) -> AbstractContextManager[None]:
        """A context manager inside which reading this backend's arrays' values back to
        the host raises ``error(what)`` (``what`` names the read).

        Only for backends with :attr:`guards_host_reads`; see
        :func:`pe_core.host_reads.forbid_host_reads` for what counts as a read.
        """
        if not self.guards_host_reads:
            raise NotImplementedError(f"backend {self.name!r} cannot guard host reads")
        guard: AbstractContextManager[None] = self._host_reads.guard(error)
        return guard

    # -- comparisons (the resampling page) ----------------------------------------------
    def image_resize(self, x: Any, size: tuple[int, int], method: str, antialias: bool) -> Any:
        """The framework's own image resize of ``x`` ``(N, H, W, C)`` to ``(N, *size, C)``
        (``method`` ``"bilinear"`` or ``"bicubic"``): ``F.interpolate`` with
        ``align_corners=False`` for PyTorch, ``jax.image.resize``, ``tf.image.resize``.
        For comparisons (the resampling page); pe_core's own resampling does not use it."""
        raise NotImplementedError(f"backend {self.name!r} has no image resize of its own")


class Namespace(FastPaths):
    """Base class of the backend adapters: the :class:`ArrayCore` every backend provides
    and the :class:`FastPaths` it may override. pe_core's kernel is written against it."""
