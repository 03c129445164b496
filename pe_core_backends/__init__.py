"""Array namespaces for the frameworks pe_core runs on.

This package knows arrays and frameworks. Each backend module exposes one
:class:`Namespace` object: the Array-API-named functions the pe_core kernel uses
(``sin``, ``floor``, ``stack``, ...), which every backend provides, and optional fast
paths with generic defaults, a few of them whole kernels of pe_core's encodings (see
``pe_core_backends/_namespace.py``).
A framework is imported only when its namespace is asked for, and the backend of an
array is found by looking its class up in :data:`sys.modules`, so nothing here ever
imports a framework the caller did not hand us. Which backends exist, their adapter
modules, pip extras and array classes are one :class:`BackendInfo` row each in
``pe_core_backends/_registry.py`` (:func:`backend_info` reads one).

>>> from pe_core_backends import get_namespace, backend_of
>>> import numpy as np
>>> backend_of(np.zeros(3))
'numpy'
>>> get_namespace("numpy").name
'numpy'
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from pe_core_backends import _registry
from pe_core_backends._device import device_path_forced, force_device_path
from pe_core_backends._namespace import Namespace
from pe_core_backends._registry import BackendInfo
from pe_core_backends._torch_dtensor import (
    any_dtensor,
    encode_on_shards,
    map_shards,
    rope_on_shards,
)

__all__ = [
    "BACKENDS",
    "FLOAT_DTYPES",
    "HOST",
    "BackendInfo",
    "Namespace",
    "any_dtensor",
    "backend_info",
    "backend_of",
    "canonical_backend",
    "check_foreign",
    "device_path_forced",
    "encode_on_shards",
    "force_device_path",
    "from_dlpack",
    "get_namespace",
    "installed_backends",
    "is_dlpack",
    "is_installed",
    "map_shards",
    "rope_on_shards",
]

#: The backend names pe_core knows, sorted (the registry's rows when pe_core_backends was
#: imported; :func:`installed_backends` and the error messages read the registry itself).
BACKENDS: tuple[str, ...] = _registry.REGISTRY.names

#: Floating dtype names pe_core speaks, widest first.
FLOAT_DTYPES: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")


def _known() -> str:
    return ", ".join(_registry.REGISTRY.names)


def canonical_backend(name: str) -> str:
    """Return the canonical backend name for ``name`` (a name or an alias, any case).

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If ``name`` is not a known backend (the message lists the known ones).

    Examples
    --------
    >>> canonical_backend("tf")
    'tensorflow'
    """
    registry = _registry.REGISTRY
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string, one of: {_known()}. Received: {name!r}")
    if name in registry.by_name:  # already canonical: the common case
        return name
    key = registry.by_alias.get(name.lower())
    if key is None:
        raise ValueError(f"Unknown backend {name!r}. Expected one of: {_known()}.")
    return key


def backend_info(name: str) -> BackendInfo:
    """The registry row of backend ``name`` (a name or an alias): its adapter module,
    framework, pip extra, array classes and compilers. Nothing is imported.

    Raises
    ------
    TypeError, ValueError
        As :func:`canonical_backend`.

    Examples
    --------
    >>> info = backend_info("tf")
    >>> info.name, info.extra, info.array_types
    ('tensorflow', 'tensorflow', ('tensorflow.Tensor', 'tensorflow.Variable'))
    """
    return _registry.REGISTRY.by_name[canonical_backend(name)]


def get_namespace(name: str) -> Namespace:
    """Return the :class:`Namespace` of backend ``name``, importing its framework.

    Raises
    ------
    ValueError
        For an unknown backend name (the message lists the known ones).
    ImportError
        If the framework is not installed (the message names the pip extra).

    Examples
    --------
    >>> get_namespace("numpy").sin(0.0)
    np.float64(0.0)
    """
    info = backend_info(name)
    try:
        # a plain import statement per row (no cache of our own): after the first call
        # it is a sys.modules lookup, and torch.compile traces it, first call included
        module = info.adapter()
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] == info.framework:
            raise ImportError(
                f"backend {info.name!r} needs {info.title} ({info.framework}), which is not "
                f"installed: pip install 'pe-core[{info.extra}]'"
            ) from exc
        raise
    namespace: Namespace = module.NAMESPACE
    return namespace


def is_installed(name: str) -> bool:
    """Whether backend ``name`` can be imported (without importing it).

    >>> is_installed("numpy")
    True
    """
    from importlib.util import find_spec

    framework = backend_info(name).framework
    return framework in sys.modules or find_spec(framework) is not None


def installed_backends() -> tuple[str, ...]:
    """The known backends whose framework is installed, sorted by name.

    >>> "numpy" in installed_backends()
    True
    """
    return tuple(name for name in _registry.REGISTRY.names if is_installed(name))


#: Python's own value types: never a backend's arrays (NumPy's scalars subclass some of
#: them, but they are other classes).
_PYTHON_TYPES = (int, float, bool, complex, range, list, tuple, dict, str, bytes, type(None))


def backend_of(obj: Any) -> str | None:
    """Name the backend an array belongs to, or ``None`` for Python values.

    Each class of ``obj.__class__.__mro__`` whose top-level module is one of a backend's
    ``array_modules`` is checked against that backend's ``array_types``. Only frameworks
    already in :data:`sys.modules` are consulted, so this never imports one.

    >>> import numpy as np
    >>> backend_of(np.arange(2)), backend_of([0, 1])
    ('numpy', None)
    """
    if obj.__class__ in _PYTHON_TYPES:  # Python values (torch.compile cannot walk their MRO)
        return None
    by_module = _registry.REGISTRY.by_module
    # obj.__class__, not type(obj): torch.compile iterates the MRO of a tensor's
    # __class__ but not of type() of a torch.Tensor subclass (a Parameter, a DTensor)
    for klass in obj.__class__.__mro__:
        for row in by_module.get(klass.__module__.partition(".")[0], ()):
            if row.is_array(obj):
                return row.name
    return None


#: DLPack device types (``__dlpack_device__()[0]``) whose memory the host reads.
_DLPACK_HOST_DEVICES = {1: "cpu", 3: "cuda_host", 13: "cuda_managed"}

#: Names of the other DLPack device types, for messages.
_DLPACK_DEVICE_NAMES = {2: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm"}


def is_dlpack(obj: Any) -> bool:
    """Whether ``obj`` is an array of no known backend that offers DLPack (``__dlpack__``),
    such as a CuPy array.

    >>> import numpy as np
    >>> is_dlpack(np.zeros(2)), is_dlpack([1, 2])  # NumPy is a backend of its own
    (False, False)
    """
    return hasattr(type(obj), "__dlpack__") and backend_of(obj) is None


def from_dlpack(obj: Any, name: str = "numpy", *, what: str = "array") -> Any:
    """An array that offers only DLPack (``__dlpack__``) as an array of backend ``name``.

    The framework's own ``from_dlpack`` imports it, without a copy where it can. NumPy
    reads host memory only: an array on an accelerator needs a backend that lives there
    (``backend="torch"`` or ``"jax"``), and the error says so.

    Raises
    ------
    TypeError
        When backend ``name`` cannot import the array (device, dtype), naming why.

    Examples
    --------
    >>> import numpy as np
    >>> class Wrapped:  # any object with the DLPack protocol, e.g. a CuPy array
    ...     def __init__(self, a): self.a = a
    ...     def __dlpack__(self, **kwargs): return self.a.__dlpack__(**kwargs)
    ...     def __dlpack_device__(self): return self.a.__dlpack_device__()
    >>> from_dlpack(Wrapped(np.arange(3))).tolist()
    [0, 1, 2]
    """
    key = canonical_backend(name)
    device = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
    if key == "numpy" and device is not None and int(device[0]) not in _DLPACK_HOST_DEVICES:
        kind = _DLPACK_DEVICE_NAMES.get(int(device[0]), f"type {int(device[0])}")
        raise TypeError(
            f"{what} is a DLPack array ({type(obj).__name__}) on a {kind} device, which "
            "NumPy cannot read. Compute where it lives: pass backend='torch' or "
            "backend='jax' (or convert it to that framework's array first)."
        )
    try:
        return get_namespace(key).from_dlpack(obj)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(
            f"{what} offers DLPack ({type(obj).__name__}) but backend {key!r} could not "
            f"import it: {exc}. Convert it to a {_titles()} array first."
        ) from exc


def check_foreign(obj: Any, backend: str | None = None, *, what: str = "input") -> None:
    """Refuse an array pe_core would otherwise read on the host behind the caller's back.

    * A lazy array (a dask collection: it has ``__dask_graph__``) is never computed
      silently, whatever ``backend`` says.
    * With no ``backend`` named, an array of another Array API namespace (it has
      ``__array_namespace__`` but is no backend's, e.g. ``array_api_strict``) would come
      back as a NumPy array: the error says how to pass it instead. With ``backend=``
      it is imported through DLPack (:func:`from_dlpack`) and the result is that
      backend's array, as asked.

    Raises
    ------
    TypeError
        Naming the array's type and how to pass it.

    Examples
    --------
    >>> import numpy as np
    >>> check_foreign(np.arange(3)), check_foreign(range(3))  # backends and Python values
    (None, None)
    >>> class Lazy:
    ...     def __dask_graph__(self): return {}
    >>> check_foreign(Lazy(), what="pos")
    Traceback (most recent call last):
    ...
    TypeError: pos is a lazy array (...Lazy); pe_core does not compute it behind your back...
    """
    kind = type(obj)
    if hasattr(kind, "__dask_graph__"):
        raise TypeError(
            f"{what} is a lazy array ({kind.__module__}.{kind.__name__}); pe_core does not "
            f"compute it behind your back. Compute it first ({what}.compute()), or apply "
            "pe_core to each block (dask.array.map_blocks), which keeps it lazy."
        )
    if backend is None and hasattr(kind, "__array_namespace__") and backend_of(obj) is None:
        try:
            namespace = obj.__array_namespace__().__name__
        except Exception:  # a namespace without a name: say the type's module
            namespace = kind.__module__.partition(".")[0]
        raise TypeError(
            f"{what} is an array of the Array API namespace {namespace!r} "
            f"({kind.__name__}), which is not a pe_core backend ({_titles()}). Pass it "
            f"converted (np.asarray({what}) for host memory, or a framework's from_dlpack), "
            "or name the backend to compute on: backend='numpy', 'torch' or 'jax' imports "
            "it through DLPack and returns that backend's array."
        )


def _titles() -> str:
    """``"NumPy, JAX, PyTorch or TensorFlow"``: the frameworks' names, for messages."""
    titles = [row.title for row in _registry.REGISTRY.rows]
    return ", ".join(titles[:-1]) + f" or {titles[-1]}" if len(titles) > 1 else titles[0]


if TYPE_CHECKING:
    #: The NumPy namespace: where host values (Python data, NumPy arrays, host tables) are
    #: computed. Defined once here; every module that computes on the host reads it.
    HOST: Namespace


def __getattr__(name: str) -> Any:
    # HOST is looked up on first use: importing pe_core_backends imports no adapter
    if name == "HOST":
        return get_namespace("numpy")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
