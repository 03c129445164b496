"""The test suite runs on the NumPy-only install: every optional import is guarded.

``pip install 'pe-core[test]'`` brings NumPy and the test tools and nothing else. Every
other package (the frameworks, the peers, the ``docs`` and ``plot`` extras, what they pull
in) is optional: a test module that imports one at collection does so after
``pytest.importorskip`` of its package (or inside ``try``/``except ImportError``), and a
test that loads a file of the project by path (``docs/hooks.py``) skips first for every
package that file imports. The extras are read from ``pyproject.toml``.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
from collections.abc import Set
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: The files pytest imports at collection: the test modules, conftest and the helpers
#: they import (tests/typing_user/ is run by its own script, with the frameworks).
COLLECTED = sorted(TESTS.glob("*.py"))
LOCAL = {path.stem for path in COLLECTED} | {"tests", "pe_core", "pe_core_backends"}
LOCAL |= {path.name for path in ROOT.iterdir() if path.is_dir() and not path.name.startswith(".")}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def modules_of(requirement: str) -> set[str]:
    """The top-level modules a requirement installs (the normalised name when it is not
    installed here)."""
    match = _NAME.match(requirement)
    assert match, requirement
    name = match.group(0)
    normal = re.sub(r"[-_.]+", "-", name).lower()
    return _installed_modules().get(normal) or {normal.replace("-", "_")}


@functools.cache
def _installed_modules() -> dict[str, set[str]]:
    """Installed distribution (normalised name) -> its top-level modules."""
    modules: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), set()).add(module)
    return modules


@functools.cache
def always_there() -> frozenset[str]:
    """The modules of the NumPy-only test install: the dependencies and the test extra."""
    project = _pyproject()
    modules = set(sys.stdlib_module_names) | LOCAL | {"__future__"}
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        modules |= modules_of(requirement)
    return frozenset(modules)


def _catches_import_error(node: ast.Try) -> bool:
    names = {"ImportError", "ModuleNotFoundError", "Exception"}
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if handler.type is None or any(isinstance(k, ast.Name) and k.id in names for k in kinds):
            return True
    return False


def _skip_of(node: ast.AST) -> str | None:
    """The package ``pytest.importorskip("package...")`` asks for, if ``node`` is one."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "importorskip"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value).split(".")[0]
    return None


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module.split(".")[0]]
    return []


def unguarded_imports(source: str, always: Set[str]) -> list[tuple[int, str]]:
    """``(line, package)`` of each import run at import time of ``source`` whose package
    is optional and neither skipped for before it nor caught by ``except ImportError``.

    An import under ``if`` runs on its condition (``TYPE_CHECKING``, an environment
    variable set where the package is known to be installed): the condition is the guard."""
    found: list[tuple[int, str]] = []
    skipped: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            for node in ast.walk(statement) if not isinstance(statement, ast.Try) else ():
                package = _skip_of(node)
                if package:
                    skipped.add(package)
            if isinstance(statement, ast.Try):
                if not _catches_import_error(statement):
                    visit(statement.body + statement.orelse + statement.finalbody)
            elif isinstance(statement, ast.With):
                visit(statement.body)
            for package in _imported(statement):
                if package not in always and package not in skipped:
                    found.append((statement.lineno, package))

    visit(ast.parse(source).body)
    return found


@pytest.mark.parametrize("path", COLLECTED, ids=lambda path: path.name)
def test_collection_needs_no_extra(path: Path) -> None:
    found = unguarded_imports(path.read_text(), always_there())
    assert not found, f"{path.name}: optional imports without importorskip first: {found}"


def test_the_check_sees_unguarded_imports() -> None:
    always = {"numpy", "pytest", "__future__"}
    source = (
        "import numpy\nimport torch\n"
        "jax = pytest.importorskip('jax')\nimport jax.numpy\nfrom flax import nnx\n"
        "try:\n    import keras\nexcept ImportError:\n    keras = None\n"
        "if TYPE_CHECKING:\n    import tensorflow\n"
        "with open(__file__):\n    import matplotlib\n"
        "def f():\n    import mkdocs\n"
    )
    assert unguarded_imports(source, always) == [(2, "torch"), (5, "flax"), (13, "matplotlib")]


def test_the_extras_are_optional() -> None:
    """What the frameworks' and the docs' extras install is outside the test install."""
    always = always_there()
    extras = _pyproject()["optional-dependencies"]
    for extra in ("jax", "torch", "flax", "keras", "plot", "docs", "parity"):
        for requirement in set(extras[extra]) - set(extras["test"]):
            assert not modules_of(requirement) <= always, (extra, requirement)


# -- files loaded by path --------------------------------------------------------------


def _loaded_files(function: ast.FunctionDef) -> list[Path]:
    """The project files ``function`` loads with ``spec_from_file_location`` (named by a
    literal ``"NAME.py"``)."""
    files = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == (
            "spec_from_file_location"
        ):
            for part in ast.walk(node):
                if isinstance(part, ast.Constant) and re.fullmatch(r"[\w-]+\.py", str(part.value)):
                    hits = [
                        hit
                        for folder in ("docs", "examples", "benchmarks", "tests")
                        for hit in (ROOT / folder).rglob(str(part.value))
                    ]
                    assert len(hits) == 1, (part.value, hits)
                    files.append(hits[0])
    return files


def test_files_loaded_by_path_skip_for_what_they_import() -> None:
    always = always_there()
    checked = 0
    for path in COLLECTED:
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for loaded in _loaded_files(function):
                needs = {package for _, package in unguarded_imports(loaded.read_text(), always)}
                skips = {_skip_of(node) for node in ast.walk(function)} - {None}
                missing = needs - skips
                assert not missing, (
                    f"{path.name}::{function.name} loads {loaded.name}, which imports "
                    f"{sorted(missing)}: pytest.importorskip them first"
                )
                checked += 1
    assert checked >= 2  # the docs hooks, loaded by test_docs.py and test_presets.py


def test_the_preset_table_test_skips_without_the_docs_extra(monkeypatch) -> None:
    """Run for real with the ``docs`` extra's packages made unimportable."""
    import test_presets

    for module in ("mkdocs", "griffe", "matplotlib", "latex2mathml"):
        for name in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    with pytest.raises(pytest.skip.Exception, match="docs extra"):
        test_presets.test_docs_preset_table_is_the_generated_one()
