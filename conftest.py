"""Collection on any install: the doctests of modules that need a framework that is not
installed are skipped (``pytest`` with NumPy alone passes, with skips).

* A module of ``pe_core`` or ``pe_core_backends`` that imports a missing framework at
  its top level (``pe_core/layers/torch.py``, ``pe_core_backends/_jax.py``, ...) is not
  collected.
* A doctest whose examples import a missing framework, name one with
  ``backend="..."``, or draw with ``pe_core.plots`` without matplotlib, is skipped.

The test modules under ``tests/`` skip themselves (``pytest.importorskip`` and the
``backend`` fixture of ``tests/conftest.py``).

Under pytest-xdist (``pytest -n 2``) a worker that has finished its tests ignores SIGINT
while it tears down (``pytest_sessionfinish`` below).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
import signal
from pathlib import Path

import pytest

from pe_core_backends._registry import REGISTRY

ROOT = Path(__file__).resolve().parent
PACKAGES = (ROOT / "pe_core", ROOT / "pe_core_backends")
#: The backends' frameworks (the registry's rows; NumPy is always there), the layers',
#: and the libraries the integrations import.
FRAMEWORKS = (
    *(row.framework for row in REGISTRY.rows if row.name != "numpy"),
    *("flax", "keras", "keras_hub", "transformers", "diffusers", "timm"),
)
#: Backend name or alias -> the framework it needs.
_BACKEND_NAMES = {key: REGISTRY.by_name[name].framework for key, name in REGISTRY.by_alias.items()}
_DOCTEST_IMPORT = re.compile(r"^\s*(?:from|import)\s+(\w+)")
_DOCTEST_BACKEND = re.compile(r"""backend\s*=\s*["'](\w+)["']""")
_DOCTEST_PLOTS = re.compile(r"\bplots\b|\bplot_\w+\(")  # pe_core.plots imports matplotlib


@functools.cache
def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def top_level_imports(path: Path) -> set[str]:
    """The top-level packages a module imports when it is imported."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError):
        return set()
    names = set()
    for node in tree.body:  # module level only: imports inside functions are lazy
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.suffix != ".py" or not any(
        package in collection_path.parents for package in PACKAGES
    ):
        return None
    missing = [m for m in FRAMEWORKS if m in top_level_imports(collection_path)]
    if any(not installed(m) for m in missing):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        examples = getattr(getattr(item, "dtest", None), "examples", None)
        if not examples:
            continue
        needed = set()
        for example in examples:
            needed.update(_DOCTEST_IMPORT.findall(example.source))
            needed.update(
                _BACKEND_NAMES[b]
                for b in _DOCTEST_BACKEND.findall(example.source)
                if b in _BACKEND_NAMES
            )
            if _DOCTEST_PLOTS.search(example.source):
                needed.add("matplotlib")
        missing = sorted(m for m in needed & {*FRAMEWORKS, "matplotlib"} if not installed(m))
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"doctest needs {', '.join(missing)}"))
        elif "timm" in needed:
            item.add_marker(pytest.mark.needs_timm_import)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """timm imports torchvision for its data pipelines: a doctest using timm's models
    imports it with a stand-in ``torchvision`` where none is installed
    (``tests/_timm_import.py``)."""
    if item.get_closest_marker("needs_timm_import") is not None:
        spec = importlib.util.spec_from_file_location(
            "_timm_import", ROOT / "tests" / "_timm_import.py"
        )
        assert spec is not None and spec.loader is not None
        helper = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helper)
        helper.import_timm()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker that has run its tests ignores SIGINT from then on.

    Once the last worker reports, the controller tells every worker to exit, and execnet
    gives a worker 5 s to finish what it is doing before it sends the worker SIGINT. What
    a worker still does then is pytest's teardown, whose ``gc.collect()`` runs the
    finalizers of every framework object the tests made (about a second for a few test
    files; more for a whole half of the suite on a busy machine). Interrupted, it printed
    an "Exception ignored in ... KeyboardInterrupt" traceback after a green run. A
    finished worker has nothing left to interrupt (Ctrl+C still stops the controller,
    which ends the workers), so it finishes its teardown instead.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: leave the handler alone
            pass
