"""The backend registry: one :class:`BackendInfo` row per backend pe_core runs on.

Everything that names backends reads these rows: :func:`pe_core_backends.get_namespace`
(which adapter module to import, which pip extra a missing framework needs),
:func:`pe_core_backends.backend_of` (which array classes belong to which backend),
:func:`pe_core_backends.canonical_backend` (names and aliases),
:func:`pe_core_backends.installed_backends`, and ``pe-core check`` (which compilers to
try). Adding a backend is one row in :data:`ROWS` plus one adapter module that defines
``NAMESPACE``, and its pip extra in ``pyproject.toml`` (docs/architecture.md and
docs/install.md, "Adding a backend"); the test suite's ``backend`` fixture and the
``Literal`` of :mod:`pe_core.typing` need no edit.

Nothing here imports a framework: rows hold names, never modules or classes.

>>> from pe_core_backends._registry import REGISTRY
>>> REGISTRY.names
('jax', 'numpy', 'tensorflow', 'torch')
>>> REGISTRY.by_name["torch"].array_types
('torch.Tensor',)
"""

from __future__ import annotations

import dataclasses
import keyword
import linecache
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["REGISTRY", "ROWS", "BackendInfo", "Registry"]


def _dotted_name(value: str) -> bool:
    """Whether ``value`` is a module path: identifiers (no keywords) joined by dots."""
    parts = value.split(".")
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in parts)


def _check_strings(field: str, value: Any, *, dotted: bool = False) -> None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(
            f"BackendInfo.{field} must be a tuple of non-empty strings. Received: {value!r}"
        )
    if dotted:
        bad = [v for v in value if not _dotted_name(v) or "." not in v]
        if bad:
            raise ValueError(
                f"BackendInfo.{field} holds qualified names such as 'torch.Tensor'. "
                f"Received: {bad[0]!r}"
            )


def _make_loader(module: str, name: str) -> Callable[[], ModuleType]:
    """A function whose body is the plain import statement ``import <module>``.

    torch.compile runs import statements while it traces (a first ``get_namespace`` call
    may happen inside a compiled function) but cannot call :func:`importlib.import_module`,
    so each row gets a statement of its own, generated from its (validated) module path
    the way :mod:`dataclasses` generates ``__init__``.
    """
    package, _, leaf = module.rpartition(".")
    statement = (
        f"from {package} import {leaf} as adapter" if package else f"import {leaf} as adapter"
    )
    scope: dict[str, Any] = {}
    source = f"def load_{name}_adapter():\n    {statement}\n    return adapter\n"
    filename = f"<pe_core_backends adapter loader: {module}>"
    # its source findable by inspect (as IPython does for its cells): tf.function's
    # AutoGraph reads the source of every function it meets, else warns
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    loader: Callable[[], ModuleType] = scope[f"load_{name}_adapter"]
    loader.__module__ = __name__
    return loader


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """One backend: its names, its adapter module, its framework and how to detect its arrays.

    Parameters
    ----------
    name : str
        The canonical name (``backend="torch"``): lowercase letters, digits and ``_``.
    title : str
        The framework's name in messages (``"PyTorch"``).
    module : str
        The adapter module (``"pe_core_backends._torch"``); it defines ``NAMESPACE``, a
        :class:`pe_core_backends.Namespace` whose ``name`` is ``name``. Imported the first
        time the backend is used.
    framework : str
        The framework's top-level import name (``"torch"``): what :func:`is_installed`
        looks for and what a missing-framework ``ImportError`` is recognised by.
    extra : str
        The pip extra that installs the framework: ``pip install 'pe-core[<extra>]'``.
    array_types : tuple of str
        Qualified names of the framework's array classes (``"torch.Tensor"``: a module,
        then the class's name in it). :func:`backend_of` looks them up in
        :data:`sys.modules` only, so detection never imports a framework.
    aliases : tuple of str, optional
        Other names accepted for ``name`` (``"pytorch"``), lowercase.
    array_modules : tuple of str, optional
        Top-level modules whose classes may be this backend's arrays (``jaxlib`` defines
        JAX's array class, Keras wraps TensorFlow variables). Default: ``framework`` alone.
    compilers : tuple of str, optional
        The compilers ``pe-core check --thorough`` runs this backend's functions under
        (``"torch.compile"``), in order; empty for a backend with none (NumPy).

    Raises
    ------
    TypeError, ValueError
        For a field of the wrong type or value, naming it.

    Examples
    --------
    >>> from pe_core_backends import backend_info
    >>> info = backend_info("pytorch")
    >>> info.name, info.framework, info.extra
    ('torch', 'torch', 'torch')
    """

    name: str
    title: str
    module: str
    framework: str
    extra: str
    array_types: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    array_modules: tuple[str, ...] = ()
    compilers: tuple[str, ...] = ()
    #: The adapter module's import, as a plain import statement (see _make_loader).
    _load: Callable[[], ModuleType] = dataclasses.field(
        init=False, repr=False, compare=False, hash=False
    )
    #: array_types split into (module, class name), for is_array.
    _array_paths: tuple[tuple[str, str], ...] = dataclasses.field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        for field in ("name", "title", "module", "framework", "extra"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise TypeError(f"BackendInfo.{field} must be a string. Received: {value!r}")
            if not value:
                raise ValueError(f"BackendInfo.{field} must not be empty. Received: ''")
        if not (self.name.isidentifier() and self.name == self.name.lower()):
            raise ValueError(
                "BackendInfo.name must be a lowercase identifier such as 'torch'. "
                f"Received: {self.name!r}"
            )
        if not _dotted_name(self.module):
            raise ValueError(
                "BackendInfo.module must be a module path such as 'pe_core_backends._torch'. "
                f"Received: {self.module!r}"
            )
        if not _dotted_name(self.framework) or "." in self.framework:
            raise ValueError(
                "BackendInfo.framework must be a top-level module name such as 'torch'. "
                f"Received: {self.framework!r}"
            )
        _check_strings("array_types", self.array_types, dotted=True)
        for field in ("aliases", "array_modules", "compilers"):
            _check_strings(field, getattr(self, field))
        if any(alias != alias.lower() for alias in self.aliases):
            raise ValueError(f"BackendInfo.aliases must be lowercase. Received: {self.aliases!r}")
        if not self.array_modules:
            object.__setattr__(self, "array_modules", (self.framework,))
        object.__setattr__(self, "_load", _make_loader(self.module, self.name))
        paths = tuple(qualified.rpartition(".")[::2] for qualified in self.array_types)
        object.__setattr__(self, "_array_paths", paths)

    def adapter(self) -> ModuleType:
        """The adapter module, imported on first use (``ImportError`` if its framework is
        missing)."""
        return self._load()

    def is_array(self, obj: Any) -> bool:
        """Whether ``obj`` is an instance of one of :attr:`array_types`. Only modules
        already in :data:`sys.modules` are consulted: nothing is imported."""
        modules = sys.modules
        for module, attribute in self._array_paths:
            if module in modules and isinstance(obj, getattr(modules[module], attribute)):
                return True
        return False


class Registry:
    """The rows and the lookups built from them (by name, by alias, by module).

    Parameters
    ----------
    rows : iterable of BackendInfo
        One per backend; names and aliases must be unique.

    Raises
    ------
    TypeError
        For a row that is not a :class:`BackendInfo`.
    ValueError
        For a name or alias used twice.
    """

    rows: tuple[BackendInfo, ...]
    #: canonical name -> row
    by_name: Mapping[str, BackendInfo]
    #: canonical name or alias -> canonical name
    by_alias: Mapping[str, str]
    #: top-level module -> the rows whose arrays its classes may be
    by_module: Mapping[str, tuple[BackendInfo, ...]]
    #: the canonical names, sorted
    names: tuple[str, ...]

    def __init__(self, rows: Iterable[BackendInfo]) -> None:
        self.rows = tuple(rows)
        by_alias: dict[str, str] = {}
        by_module: dict[str, tuple[BackendInfo, ...]] = {}
        for row in self.rows:
            if not isinstance(row, BackendInfo):
                raise TypeError(f"a registry row must be a BackendInfo. Received: {row!r}")
            for key in (row.name, *row.aliases):
                if key in by_alias:
                    raise ValueError(
                        f"backend name {key!r} is used by both {by_alias[key]!r} and "
                        f"{row.name!r}. Expected each name and alias once."
                    )
                by_alias[key] = row.name
            for top in row.array_modules:
                by_module[top] = (*by_module.get(top, ()), row)
        # Plain dicts, read-only by their type: torch.compile cannot read a mapping proxy
        # once any dict has changed in its trace (pe_core's caches fill on a first call).
        self.by_name = {row.name: row for row in self.rows}
        self.by_alias = by_alias
        self.by_module = by_module
        self.names = tuple(sorted(self.by_name))

    def __repr__(self) -> str:
        return f"Registry({', '.join(self.names)})"


#: One row per backend. NumPy's row must stay: it is the default backend.
ROWS: tuple[BackendInfo, ...] = (
    BackendInfo(
        name="numpy",
        title="NumPy",
        module="pe_core_backends._numpy",
        framework="numpy",
        extra="numpy",
        array_types=("numpy.ndarray", "numpy.generic"),
        aliases=("np",),
    ),
    BackendInfo(
        name="jax",
        title="JAX",
        module="pe_core_backends._jax",
        framework="jax",
        extra="jax",
        array_types=("jax.Array",),
        aliases=("jnp",),
        array_modules=("jax", "jaxlib"),
        compilers=("jax.jit",),
    ),
    BackendInfo(
        name="torch",
        title="PyTorch",
        module="pe_core_backends._torch",
        framework="torch",
        extra="torch",
        array_types=("torch.Tensor",),
        aliases=("pytorch",),
        compilers=("torch.compile",),
    ),
    BackendInfo(
        name="tensorflow",
        title="TensorFlow",
        module="pe_core_backends._tensorflow",
        framework="tensorflow",
        extra="tensorflow",
        array_types=("tensorflow.Tensor", "tensorflow.Variable"),
        aliases=("tf",),
        array_modules=("tensorflow", "keras", "tf_keras"),
        compilers=("tf.function", "tf.function(jit_compile=True)"),
    ),
)

#: The registry every lookup reads (``pe_core_backends._registry.REGISTRY`` at call time,
#: so a test can swap in one with an extra row).
REGISTRY: Registry = Registry(ROWS)
