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
    "get_namespace",
    "installed_backends",
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
