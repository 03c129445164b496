"""The house rules of the package layout (docs/architecture.md), each shown able to fail.

* No ``import`` of a ``pe_core`` / ``pe_core_backends`` module inside a function: every
  dependency between the package's modules is visible at the top of the importing
  module, where ``lint-imports`` and a reader see it.
* ``lint-imports`` (the contracts in ``pyproject.toml``: layers, no cycles, frameworks
  only in their rooms) passes on the package, and breaks on a copy of the package
  given one upward import.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pe_core", "pe_core_backends")


def local_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a package module inside a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom):
                module = inner.module or ""
                if inner.level or module.split(".")[0] in PACKAGES:
                    found.append((inner.lineno, "." * inner.level + module))
            elif isinstance(inner, ast.Import):
                found += [
                    (inner.lineno, alias.name)
                    for alias in inner.names
                    if alias.name.split(".")[0] in PACKAGES
                ]
    return found


def package_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_no_function_local_import_of_a_package_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in package_files()
        for line, module in local_imports(path.read_text())
    ]
    assert not offenders, "imports inside functions:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    from pe_core import encoding\n",
        "def f():\n    import pe_core.rope\n",
        "def f():\n    from . import spec\n",
        "class A:\n    def m(self):\n        from pe_core_backends import get_namespace\n",
        "async def f():\n    from pe_core._kernel.angles import exact_turns\n",
    ],
)
def test_the_local_import_check_can_fail(source: str) -> None:
    assert len(local_imports(source)) == 1


def test_the_local_import_check_passes_framework_and_top_level_imports() -> None:
    source = "import pe_core\nfrom pe_core import spec\ndef f():\n    import torch\n"
    assert local_imports(source) == []


def _lint_imports() -> str | None:
    found = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return found if Path(found).exists() else None


def _run_lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    lint = _lint_imports()
    assert lint is not None
    env = {"PYTHONPATH": str(cwd), "PATH": str(Path(sys.executable).parent)}
    return subprocess.run(
        [lint, "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _lint_imports() is None:
        pytest.skip("import-linter is not installed (pip install 'pe-core[test]')")
    copy = tmp_path_factory.mktemp("house")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_lint_imports_keeps_every_contract(package_copy: Path) -> None:
    result = _run_lint(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # the kernel reaching up to a public face
        ("pe_core/_kernel/angles.py", "import pe_core.encoding", "runs one way"),
        # the backends reaching up into pe_core
        ("pe_core_backends/_numpy.py", "import pe_core.spec", "never the other way"),
        # a framework outside its rooms
        ("pe_core/rope_layout.py", "import torch", "frameworks only"),
    ],
)
def test_lint_imports_breaks_on_a_wrong_import(
    package_copy: Path, module: str, line: str, contract: str
) -> None:
    path = package_copy / module
    original = path.read_text()
    try:
        path.write_text(original + f"\n{line}  # noqa\n")
        result = _run_lint(package_copy)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if " BROKEN" in row]
    assert any(contract in row for row in broken), result.stdout


def test_every_public_module_is_in_the_api_reference() -> None:
    """The root of ``pe_core/`` is the public API: each module there without a leading
    underscore is documented (in the API reference or, like ``pe_core.rope_nd``, on its
    own page; the command line on its page), internals are private."""
    lines = [
        line for page in (ROOT / "docs").rglob("*.md") for line in page.read_text().splitlines()
    ]
    documented = {line.removeprefix("::: ").strip() for line in lines if line.startswith(":::")}
    root = ROOT / "pe_core"
    public = {p.stem for p in root.glob("*.py")} | {p.name for p in root.iterdir() if p.is_dir()}
    public = {name for name in public if not name.startswith("_")} - {"cli"}
    missing = sorted(f"pe_core.{name}" for name in public if f"pe_core.{name}" not in documented)
    assert not missing, f"public modules without a reference in docs/: {missing}"
    assert (ROOT / "docs" / "cli.md").exists()
