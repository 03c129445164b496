"""Framework code lives in its rooms: ``pe_core_backends`` and ``pe_core/layers/<framework>.py``.

Every module under ``pe_core/`` is read as a syntax tree (nothing is imported) and two
things are looked for:

* **framework imports**: ``import torch``, ``from jax import numpy``, function-local ones
  included, and ``importlib.import_module("tensorflow")``, ``__import__("torch")``,
  ``sys.modules["jax"]``;
* **backend-name comparisons**: a value compared with a backend name or alias written as
  a string (``xp.name == "torch"``, ``backend in ("jax", "torch")``, ``case "tf":``,
  ``module.startswith("torch")``), where a :class:`pe_core_backends.Namespace`
  capability or a registry fact belongs instead.

:data:`ROOMS` are the framework layers and every module of ``pe_core/integrations/`` but
its ``__init__.py`` is one too (:func:`is_room`): there both are at home. :data:`EXCEPTIONS` lists
the other modules that still hold such code and which kind: it may only shrink, since a
listed module that no longer needs its exception fails the test too. The checker is
shown able to fail on synthetic sources.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from pe_core_backends._registry import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pe_core"

#: Top-level modules that are frameworks (NumPy is pe_core's own dependency, not one).
FRAMEWORKS: frozenset[str] = frozenset(
    {row.framework for row in REGISTRY.rows}
    | {module for row in REGISTRY.rows for module in row.array_modules}
    | {"flax"}
) - {"numpy"}

#: Backend names and aliases, as the registry knows them.
BACKEND_NAMES: frozenset[str] = frozenset(REGISTRY.by_alias)

#: The framework layers and integrations: framework imports and backend names are at
#: home here.
#: The framework layers: a module here may import its framework and name backends.
ROOMS: frozenset[str] = frozenset(
    {
        "pe_core/layers/torch.py",
        "pe_core/layers/flax.py",
        "pe_core/layers/keras.py",
    }
)

#: The integrations' folder: every module in it but ``__init__.py`` is a room (another
#: library's models made exact), so a new integration is one file, listed nowhere here.
INTEGRATIONS = "pe_core/integrations/"


def is_room(path: str) -> bool:
    """Whether ``path`` (relative to the repository) may hold framework code."""
    if path.startswith(INTEGRATIONS):
        return path.rpartition("/")[2] != "__init__.py"
    return path in ROOMS


#: Modules that still hold framework code -> the kinds they hold ("import", "compare").
#: Only ever remove entries: test_every_exception_is_still_needed fails on a stale one.
EXCEPTIONS: dict[str, frozenset[str]] = {}


@dataclasses.dataclass(frozen=True)
class Offence:
    path: str
    line: int
    kind: str  # "import" or "compare"
    code: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.code}"


def _top(module: str) -> str:
    return module.partition(".")[0]


def _strings(node: ast.AST) -> list[str]:
    """The string constants of ``node``: itself, or the items of a tuple/list/set literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for item in node.elts for s in _strings(item)]
    return []


def _names_backend(node: ast.AST) -> bool:
    return any(s in BACKEND_NAMES for s in _strings(node))


def _names_framework(node: ast.AST) -> bool:
    return any(_top(s) in FRAMEWORKS for s in _strings(node))


def _is_sys_modules(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _kind(node: ast.AST) -> str | None:
    """``"import"``, ``"compare"`` or ``None`` for one syntax node."""
    if isinstance(node, ast.Import):
        return "import" if any(_top(a.name) in FRAMEWORKS for a in node.names) else None
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return "import" if node.level == 0 and _top(module) in FRAMEWORKS else None
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        return "compare" if any(_names_backend(operand) for operand in operands) else None
    if isinstance(node, ast.MatchValue):
        return "compare" if _names_backend(node.value) else None
    if isinstance(node, ast.Subscript):  # sys.modules["torch"]
        return "import" if _is_sys_modules(node.value) and _names_framework(node.slice) else None
    if isinstance(node, ast.Call) and node.args:
        func, first = node.func, node.args[0]
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and _names_framework(first):
            return "import"
        if name == "get" and isinstance(func, ast.Attribute) and _is_sys_modules(func.value):
            return "import" if _names_framework(first) else None
        if name in ("startswith", "endswith") and (
            _names_backend(first) or _names_framework(first)
        ):
            return "compare"
    return None


def offences(source: str, path: str = "<source>") -> list[Offence]:
    """Every framework import and backend-name comparison in ``source``, in line order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        kind = _kind(node)
        if kind is not None:
            line = getattr(node, "lineno", 0)
            found.append(Offence(path, line, kind, ast.unparse(node).splitlines()[0][:100]))
    return sorted(found, key=lambda o: (o.line, o.kind))


def package_offences(root: Path = ROOT) -> dict[str, list[Offence]]:
    """The offences of every module under ``root/pe_core``, by path relative to ``root``."""
    by_path: dict[str, list[Offence]] = {}
    for file in sorted((root / "pe_core").rglob("*.py")):
        path = file.relative_to(root).as_posix()
        found = offences(file.read_text(encoding="utf-8"), path)
        if found:
            by_path[path] = found
    return by_path


def misplaced(
    by_path: dict[str, list[Offence]], exceptions: dict[str, frozenset[str]]
) -> list[str]:
    """The offences outside :data:`ROOMS` that ``exceptions`` does not allow."""
    return [
        str(o)
        for path, found in by_path.items()
        if not is_room(path)
        for o in found
        if o.kind not in exceptions.get(path, frozenset())
    ]


def stale(by_path: dict[str, list[Offence]], exceptions: dict[str, frozenset[str]]) -> list[str]:
    """The kinds ``exceptions`` allows a module that it no longer holds."""
    held = {path: {o.kind for o in found} for path, found in by_path.items()}
    return [
        f"{path}: {kind}"
        for path, kinds in sorted(exceptions.items())
        for kind in sorted(kinds - held.get(path, set()))
    ]


# --------------------------------------------------------------------------- the package


def test_framework_code_only_in_its_rooms() -> None:
    found = misplaced(package_offences(), EXCEPTIONS)
    assert not found, (
        "framework code outside pe_core_backends and pe_core/layers/<framework>.py "
        "(use a Namespace capability or a registry fact):\n" + "\n".join(found)
    )


def test_every_exception_is_still_needed() -> None:
    found = stale(package_offences(), EXCEPTIONS)
    assert not found, "remove these from EXCEPTIONS (no longer needed):\n" + "\n".join(found)


def test_the_rooms_and_exceptions_name_real_modules() -> None:
    missing = sorted(p for p in ROOMS | set(EXCEPTIONS) if not (ROOT / p).is_file())
    assert not missing
    assert not {p for p in EXCEPTIONS if is_room(p)}
    assert is_room("pe_core/integrations/transformers.py")
    assert not is_room("pe_core/integrations/__init__.py")
    assert all(kinds and kinds <= {"import", "compare"} for kinds in EXCEPTIONS.values())


def test_the_vocabulary_comes_from_the_registry() -> None:
    assert {"torch", "jax", "tensorflow", "keras", "flax", "jaxlib"} <= FRAMEWORKS
    assert "numpy" not in FRAMEWORKS
    assert {"numpy", "np", "jax", "torch", "pytorch", "tensorflow", "tf"} <= BACKEND_NAMES


# --------------------------------------------------------------------------- the checker itself

OFFENDING = {
    "import torch": "import",
    "import jax.numpy as jnp": "import",
    "from tensorflow import keras": "import",
    "from flax import linen as nn": "import",
    "import keras": "import",
    "def f():\n    import torch\n    return torch": "import",
    "import importlib\nimportlib.import_module('tensorflow')": "import",
    "__import__('jax')": "import",
    "import sys\nt = sys.modules['torch']": "import",
    "import sys\nt = sys.modules.get('jax.numpy')": "import",
    "if xp.name == 'torch':\n    pass": "compare",
    "ok = backend != 'tf'": "compare",
    "ok = 'numpy' == xp.name": "compare",
    "ok = source in (None, 'jax', 'torch')": "compare",
    "ok = name not in ['tensorflow']": "compare",
    "ok = name is 'pytorch'": "compare",
    "match name:\n    case 'jnp':\n        pass": "compare",
    "ok = type(x).__module__.startswith('torch')": "compare",
}

CLEAN = [
    "import numpy as np",
    "from pe_core_backends import get_namespace\nxp = get_namespace('numpy')",
    "backend = 'torch'",
    "def f(backend='jax'):\n    return backend",
    "ok = xp.name == other.name",
    "ok = dtype == 'float32'",
    "ok = name in ('float16', 'bfloat16')",
    '"""Docstring that says\n>>> import torch\n"""',
    "import torchvision_like_but_not",
    "from . import torch",
    "ok = label.startswith('float')",
]


@pytest.mark.parametrize("source", list(OFFENDING), ids=list(range(len(OFFENDING))))
def test_the_checker_flags_an_offending_source(source: str) -> None:
    found = offences(source)
    assert [o.kind for o in found] == [OFFENDING[source]], found


@pytest.mark.parametrize("source", CLEAN, ids=list(range(len(CLEAN))))
def test_the_checker_passes_clean_source(source: str) -> None:
    assert offences(source) == []


def test_the_package_checks_fail_on_a_planted_tree(tmp_path: Path) -> None:
    """A stand-in package: an offence outside the rooms is reported with its place, the
    rooms pass, an exception covers only its kind, and a stale exception is reported."""
    (tmp_path / "pe_core" / "layers").mkdir(parents=True)
    (tmp_path / "pe_core" / "layers" / "torch.py").write_text("import torch\n")
    (tmp_path / "pe_core" / "planted.py").write_text(
        "def f(xp):\n    if xp.name == 'jax':\n        import jax\n"
    )
    (tmp_path / "pe_core" / "clean.py").write_text("import numpy as np\n")
    by_path = package_offences(tmp_path)
    assert sorted(by_path) == ["pe_core/layers/torch.py", "pe_core/planted.py"]
    assert misplaced(by_path, {}) == [
        "pe_core/planted.py:2: compare: xp.name == 'jax'",
        "pe_core/planted.py:3: import: import jax",
    ]
    only_imports = {"pe_core/planted.py": frozenset({"import"})}
    assert misplaced(by_path, only_imports) == ["pe_core/planted.py:2: compare: xp.name == 'jax'"]
    assert stale(by_path, only_imports) == []
    too_wide = {"pe_core/clean.py": frozenset({"import"}), **only_imports}
    assert stale(by_path, too_wide) == ["pe_core/clean.py: import"]
