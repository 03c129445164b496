"""Array namespaces for the frameworks pe_core runs on.

This package knows arrays and frameworks and nothing about positional encodings.
Each backend module exposes one :class:`Namespace` object with the handful of
Array-API-named functions the pe_core kernel uses (``sin``, ``floor``, ``stack``, ...).
A framework is imported only when its namespace is asked for, and the backend of an
array is found by looking its class up in :data:`sys.modules`, so nothing here ever
imports a framework the caller did not hand us.

>>> from pe_core_backends import get_namespace, backend_of
>>> import numpy as np
>>> backend_of(np.zeros(3))
'numpy'
>>> get_namespace("numpy").name
'numpy'
"""

from __future__ import annotations

import sys
from typing import Any

from pe_core_backends._device import device_path_forced, force_device_path
from pe_core_backends._namespace import Namespace

__all__ = [
    "BACKENDS",
    "FLOAT_DTYPES",
    "Namespace",
    "backend_of",
    "canonical_backend",
    "device_path_forced",
    "force_device_path",
    "from_dlpack",
    "get_namespace",
    "installed_backends",
    "is_dlpack",
    "is_installed",
]

#: Backend name -> (framework module, pip extra).
_REGISTRY: dict[str, tuple[str, str]] = {
    "numpy": ("numpy", "numpy"),
    "jax": ("jax", "jax"),
    "torch": ("torch", "torch"),
    "tensorflow": ("tensorflow", "tensorflow"),
}

#: The backend names pe_core knows, sorted.
BACKENDS: tuple[str, ...] = tuple(sorted(_REGISTRY))

#: Floating dtype names pe_core speaks, widest first.
FLOAT_DTYPES: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")

_ALIASES = {"np": "numpy", "tf": "tensorflow", "pytorch": "torch", "jnp": "jax"}


def canonical_backend(name: str) -> str:
    """Return the canonical backend name for ``name``.

    Raises
    ------
    ValueError
        If ``name`` is not a known backend.

    Examples
    --------
    >>> canonical_backend("tf")
    'tensorflow'
    """
    if not isinstance(name, str):
        raise TypeError(
            f"backend must be a string, one of: {', '.join(BACKENDS)}. Received: {name!r}"
        )
    if name in _REGISTRY:  # already canonical: the common case
        return name
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _REGISTRY:
        raise ValueError(f"Unknown backend {name!r}. Expected one of: {', '.join(BACKENDS)}.")
    return key


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
    key = canonical_backend(name)
    framework, extra = _REGISTRY[key]
    try:
        module = _import_adapter(key)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] == framework:
            raise ImportError(
                f"backend {key!r} needs {framework}, which is not installed: "
                f"pip install 'pe-core[{extra}]'"
            ) from exc
        raise
    return module.NAMESPACE


def _import_adapter(key: str) -> Any:
    # Plain import statements, no cache of our own: after the first call each is a
    # sys.modules lookup, and torch.compile traces it without guarding on mutable state.
    if key == "numpy":
        from pe_core_backends import _numpy as module
    elif key == "jax":
        from pe_core_backends import _jax as module
    elif key == "torch":
        from pe_core_backends import _torch as module
    else:
        from pe_core_backends import _tensorflow as module
    return module


def is_installed(name: str) -> bool:
    """Whether backend ``name`` can be imported (without importing it).

    >>> is_installed("numpy")
    True
    """
    from importlib.util import find_spec

    framework = _REGISTRY[canonical_backend(name)][0]
    return framework in sys.modules or find_spec(framework) is not None


def installed_backends() -> tuple[str, ...]:
    """The known backends whose framework is installed.

    >>> "numpy" in installed_backends()
    True
    """
    return tuple(name for name in BACKENDS if is_installed(name))


def backend_of(obj: Any) -> str | None:
    """Name the backend an array belongs to, or ``None`` for Python values.

    Only frameworks already in :data:`sys.modules` are consulted, so this never
    imports one.

    >>> import numpy as np
    >>> backend_of(np.arange(2)), backend_of([0, 1])
    ('numpy', None)
    """
    for klass in type(obj).__mro__:
        top = klass.__module__.split(".")[0]
        if (
            top == "torch"
            and "torch" in sys.modules
            and isinstance(obj, sys.modules["torch"].Tensor)
        ):
            return "torch"
        if top in ("jax", "jaxlib") and "jax" in sys.modules:
            if isinstance(obj, sys.modules["jax"].Array):
                return "jax"
        if top in ("tensorflow", "keras", "tf_keras") and "tensorflow" in sys.modules:
            tf = sys.modules["tensorflow"]
            if isinstance(obj, (tf.Tensor, tf.Variable)):
                return "tensorflow"
    if "numpy" in sys.modules:
        np = sys.modules["numpy"]
        if isinstance(obj, (np.ndarray, np.generic)):
            return "numpy"
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
    device = None
    if hasattr(obj, "__dlpack_device__"):
        device = obj.__dlpack_device__()
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
            f"import it: {exc}. Convert it to a NumPy, JAX, PyTorch or TensorFlow array first."
        ) from exc
