"""The release: the workflow that builds, checks, smoke-tests and publishes the
distributions, the CHANGELOG and the project URLs of the package metadata."""

from __future__ import annotations

import ast
import json
import re
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
URL_KEYS = ("Homepage", "Documentation", "Repository", "Issues", "Changelog")


@pytest.fixture(scope="module")
def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def package_version(pyproject: dict) -> str:
    """The version pyproject.toml declares: dynamic, read from ``pe_core.__version__``
    (found in the source, without importing the package)."""
    assert "version" in pyproject["project"]["dynamic"]
    module, name = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"].rsplit(".", 1)
    source = ROOT.joinpath(*module.split(".")) / "__init__.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module}.{name} is not assigned in {source}")


def _steps(job: dict) -> str:
    """Every ``run`` and ``uses`` of a job, one per line."""
    return "\n".join(str(step.get("run", step.get("uses", ""))) for step in job["steps"])


def test_release_workflow_builds_checks_smoke_tests_and_publishes():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger == {"push": {"tags": ["v*"]}}
    jobs = workflow["jobs"]
    assert set(jobs) == {"build", "smoke-test", "publish"}
    assert jobs["smoke-test"]["needs"] == "build" and jobs["publish"]["needs"] == "smoke-test"

    build = _steps(jobs["build"])
    assert "python -m build" in build
    assert re.search(r"twine check (--strict )?dist/\*", build)
    assert "actions/upload-artifact" in build

    smoke = _steps(jobs["smoke-test"])
    assert re.search(r"python -m venv (\S+)", smoke)
    venv = re.search(r"python -m venv (\S+)", smoke).group(1).strip('"')
    assert re.search(rf"{re.escape(venv)}/bin/python\"? -m pip install dist/\*\.whl", smoke)
    assert re.search(rf"{re.escape(venv)}/bin/python\"? -c \"import [^\"]*pe_core", smoke)
    assert f'{venv}/bin/pe-core" --help' in smoke
    assert "actions/checkout" not in smoke  # the wheel alone, not the source tree

    publish = jobs["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    assert "pypa/gh-action-pypi-publish" in _steps(publish)
    uses = [step for step in publish["steps"] if "gh-action-pypi-publish" in step.get("uses", "")]
    assert "password" not in uses[0].get("with", {})  # trusted publishing: no token
    assert workflow["permissions"] == {"contents": "read"}


def test_changelog_names_the_version_and_says_nothing_is_published(pyproject):
    text = (ROOT / "CHANGELOG.md").read_text()
    version = package_version(pyproject)
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert "## [Unreleased]" in text
    assert re.search(rf"\*\*{re.escape(version)}\*\*|\b{re.escape(version)}\b", text)
    assert "Nothing has been published yet" in text
    assert re.search(r"^\[Unreleased\]: https://\S+$", text, flags=re.M)
    assert "CHANGELOG.md" in (ROOT / "MANIFEST.in").read_text()  # in the sdist


def test_project_urls_are_complete_and_consistent(pyproject):
    urls = pyproject["project"]["urls"]
    assert tuple(urls) == URL_KEYS
    repository = urls["Repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repository)
    assert urls["Homepage"] == repository
    assert urls["Issues"] == f"{repository}/issues"
    assert urls["Changelog"] == f"{repository}/blob/main/CHANGELOG.md"
    owner, name = repository.removeprefix("https://github.com/").split("/")
    assert urls["Documentation"] == f"https://{owner}.github.io/{name}/"


def test_installed_metadata_has_the_urls(pyproject):
    """The metadata of an install of this checkout (CI's ``pip install -e .``) carries
    the URLs; an install of another checkout is not this one's to check."""
    try:
        distribution = metadata.distribution(pyproject["project"]["name"])
    except metadata.PackageNotFoundError:
        pytest.skip("pe-core is not installed")
    origin = json.loads(distribution.read_text("direct_url.json") or "{}").get("url")
    here = Path(distribution.locate_file("")).resolve() == ROOT  # an egg-info in the root
    if origin != ROOT.as_uri() and not here:
        pytest.skip(f"the installed pe-core is not this checkout ({origin})")
    shown = dict(
        entry.split(", ", 1) for entry in distribution.metadata.get_all("Project-URL") or []
    )
    assert shown == pyproject["project"]["urls"]
