"""The documentation site: it builds with ``mkdocs build --strict``, every figure is in
it (drawn at build time by docs/hooks.py), every ``python`` block of README.md and
docs/ runs, the API reference shows the signatures' defaults, and the project text
names no work items or machine paths."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

from pe_core_backends._registry import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.M | re.S)


#: Every page with code: README.md and docs/ (docs/testing.md has its own test below).
PAGES = [ROOT / "README.md"] + [
    page for page in sorted(DOCS.rglob("*.md")) if page.name != "testing.md" or page.parent != DOCS
]
_BACKEND = re.compile(r"""backend\s*=\s*["'](\w+)["']""")
#: Backend name or alias -> the framework it needs (the backend registry's rows).
_MODULE_OF_BACKEND = {
    key: REGISTRY.by_name[name].framework for key, name in REGISTRY.by_alias.items()
}


def modules_needed(code: str) -> set[str]:
    """The top-level modules a block imports or asks for with ``backend="..."``."""
    needed = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            needed.add(parts[0])
            if parts[:2] == ["pe_core", "layers"] and len(parts) > 2:
                needed.add(parts[2])  # pe_core.layers.torch needs torch
            if parts[:2] == ["pe_core", "plots"]:
                needed.add("matplotlib")
    for name in _BACKEND.findall(code):
        if name in _MODULE_OF_BACKEND:  # an unknown name (an error example) needs nothing
            needed.add(_MODULE_OF_BACKEND[name])
    return needed


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


#: ``<!-- fragment: why -->`` on the line before a block: an excerpt that is not meant
#: to run on its own (the reason is required); the test skips that block only.
_FRAGMENT = re.compile(r"^<!-- fragment: (.+\S) -->\n```python\n", re.M)
_CUDA = re.compile(r"""device=["']cuda|\.cuda\(\)""")
_CLUSTER = re.compile(r"jax\.distributed\.initialize\(|torch\.distributed\b")


def page_blocks(page: Path) -> list[tuple[str, str | None]]:
    """Each python block of ``page`` with its fragment reason (``None``: it runs)."""
    text = page.read_text()
    reasons = {match.end(): match.group(1) for match in _FRAGMENT.finditer(text)}
    return [
        (match.group(1), reasons.get(match.start(1)))
        for match in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    ]


def _unavailable(code: str) -> str | None:
    """Why ``code`` cannot run on this machine, or ``None``."""
    missing = sorted(m for m in modules_needed(code) if not _installed(m))
    if missing:
        return f"needs {', '.join(missing)}"
    if _CLUSTER.search(code):
        return "needs a multi-process cluster"
    if _CUDA.search(code):
        import torch

        if not torch.cuda.is_available():
            return "needs a CUDA device"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    """The blocks of a page run in order in one namespace (a later block may use an
    earlier one's names), in a scratch folder. From the first block that needs a
    framework that is not installed, a CUDA device or a cluster, the rest of the page is
    skipped; a block marked ``<!-- fragment: why -->`` is skipped alone."""
    blocks = page_blocks(page)
    if not blocks:
        pytest.skip("no python blocks")
    monkeypatch.chdir(tmp_path)
    name = page.relative_to(ROOT).as_posix()
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, (code, fragment) in enumerate(blocks, 1):
        if fragment is not None:
            continue
        reason = _unavailable(code)
        if reason:
            pytest.skip(f"{name} block {number} and after: {reason}")
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                exec(compile(code, f"{name} python block {number}", "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{name} python block {number} raised {exc!r}:\n{code}")


def test_fragment_markers_name_a_reason(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n<!-- fragment: an excerpt of a model -->\n"
        "```python\nmodel.fit()\n```\n<!-- fragment: -->\n```python\ny = 2\n```\n"
        "<!-- fragment: second -->\n```python\nz\n```\n"
    )
    assert page_blocks(page) == [
        ("x = 1\n", None),
        ("model.fit()\n", "an excerpt of a model"),
        ("y = 2\n", None),  # no reason, no fragment: it runs
        ("z\n", "second"),
    ]


def test_modules_needed_reads_imports_and_backends():
    code = "import math, numpy as np, pe_core\nfrom pe_core.layers import flax\nimport jax.numpy\n"
    code += 'from pe_core import plots\npe_core.encode([0], 8, backend="pytorch")'
    assert modules_needed(code) == {
        "math",
        "numpy",
        "pe_core",
        "flax",
        "jax",
        "torch",
        "matplotlib",
    }


@pytest.fixture(scope="module")
def hooks():
    pytest.importorskip("mkdocs")
    pytest.importorskip("griffe")
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("pe_core_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    for name in (
        "mkdocs",
        "material",
        "mkdocstrings",
        "mkdocstrings_handlers.python",
        "matplotlib",
    ):
        pytest.importorskip(name)
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")]
        + ["-d", str(out)],
        cwd=out,  # the config must not depend on the working directory
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return out


def test_site_has_every_figure(site, hooks):
    for path in hooks.FIGURES:
        data = (site / path).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000, path


def test_pages_show_existing_figures_and_no_markers(site, hooks):
    shown = set()
    for page in site.rglob("*.html"):
        html = page.read_text()
        assert "<!-- computed:" not in html, page
        for src in re.findall(r'<img[^>]+src="([^"]+\.png)"', html):
            target = (page.parent / src).resolve()
            assert target.is_file(), f"{page}: {src}"
            shown.add(target.relative_to(site.resolve()).as_posix())
    assert shown == set(hooks.FIGURES), "every figure drawn is shown, and only those"


def test_pages_are_built(site):
    for page in ("index", "concepts", "conventions", "precision", "performance", "testing", "api"):
        assert (site / page / "index.html").is_file() or (site / f"{page}.html").is_file(), page
    api = (site / "api" / "index.html").read_text()
    for anchor in (
        "pe_core.encode",
        "pe_core.analysis.resolution_report",
        "pe_core.testing.check_encoding",
    ):
        assert f'id="{anchor}"' in api, anchor


def test_testing_page_code_runs(hooks):
    """Every python block of docs/testing.md, in order, in one namespace."""
    pytest.importorskip("hypothesis")
    namespace: dict = {"__name__": "docs_testing"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for code in python_blocks(DOCS / "testing.md"):
            exec(compile(code, "docs/testing.md", "exec"), namespace)
    out = printed.getvalue()
    assert "positions 0..512, atol 1e-3: every property holds" in out
    assert "properties failed for fn=textbook" in out
    assert "pe_core.encode: every property holds" in out
    assert "test_textbook_agrees_on_short_sequences passed" in out


def test_render_replaces_markers_and_runs_code(hooks):
    page = "x\n\n```python\nprint(6 * 7)\n```\n\n<!-- computed: output -->\n<!-- computed: alibi-slopes -->"
    rendered = hooks.render(page, "page.md")
    assert "```text\n42\n```" in rendered
    assert "| heads | slopes m_h |" in rendered
    other = "```bash\necho no\n```\n<!-- computed: output -->"
    assert "(nothing printed)" in hooks.render(other)  # only python blocks run
    with pytest.raises(Exception, match="unknown marker <!-- computed: nope -->"):
        hooks.render("<!-- computed: nope -->")


def test_api_reference_shows_the_signature_defaults(hooks):
    """A braced type, ``backend : {"numpy", "jax", ...}``, would make the numpy parser
    show its first value as the default; the reference shows the signature's."""
    import griffe

    extension = hooks.SphinxRoles()
    checked = 0
    for package in ("pe_core", "pe_core_backends"):
        root = griffe.load(
            package, search_paths=[str(ROOT)], extensions=griffe.load_extensions(extension)
        )
        objects = [root]
        while objects:
            obj = objects.pop()
            for member in obj.members.values():
                if not member.is_alias and (
                    member.is_module or member.is_class or member.is_function
                ):
                    objects.append(member)
            if not obj.is_function or obj.docstring is None:
                continue
            signature = {p.name: p.default for p in obj.parameters}
            for section in obj.docstring.parse("numpy", warnings=False):
                if section.kind.value != "parameters":
                    continue
                for parameter in section.value:
                    if parameter.name in signature:
                        shown, truth = parameter.default, signature[parameter.name]
                        assert str(shown) == str(truth), (obj.path, parameter.name, shown, truth)
                        checked += 1
    assert checked > 100


def test_braced_types_keep_their_values(hooks):
    text = 'backend : {"numpy", "jax"}, optional\n    Where.\nlayout : {"a", "b"}'
    assert hooks._choices_as_types(text, {"backend"}) == (
        'backend : "numpy" | "jax", optional\n    Where.\nlayout : {"a", "b"}'
    )


def test_grouped_parameters_are_split(hooks):
    text = "Parameters\n----------\nlo, hi : int\n    Bounds.\n\n    More.\n\nx : float\n    X."
    assert hooks._split_grouped(text, {"lo", "hi", "x"}) == (
        "Parameters\n----------\nlo : int\n    Bounds.\n\n    More.\nhi : int\n    Bounds.\n\n"
        "    More.\n\nx : float\n    X."
    )


def test_project_text_names_no_work_items_or_machine_paths():
    pattern = re.compile(r"\bissues?\s*#?\d+\b|" + "/wo" + r"rk/|/ho" + r"me/\w", re.I)
    folders = ("pe_core", "pe_core_backends", "tests", "docs", "benchmarks", "examples")
    files = [ROOT / name for name in ("README.md", "pyproject.toml", "mkdocs.yml", "MANIFEST.in")]
    files += [
        path
        for folder in folders
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".md", ".json", ".js", ".yml")
    ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        if path.is_file()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_sphinx_roles_become_code(hooks):
    text = "See :func:`~pe_core.encode` and :class:`pe_core.Spec`.\n\n>>> 1 + 1\n2\n\nExamples\n--------\n>>> 2\n2"
    out = hooks._fence_doctests(hooks._ROLE.sub(hooks._role_as_code, text))
    assert out.startswith("See `encode` and `pe_core.Spec`.")
    assert "```pycon\n>>> 1 + 1\n2\n```" in out
    assert out.endswith("Examples\n--------\n>>> 2\n2")  # left to the numpy parser


def test_index_quickstart_runs():
    """The NumPy blocks of the home page's quickstart (the framework blocks import
    PyTorch, JAX, TensorFlow, Flax or Keras, whose own tests cover those layers)."""
    namespace: dict = {"__name__": "docs_index"}
    printed = io.StringIO()
    framework = re.compile(
        r"^(import|from) (jax|torch|tensorflow|flax|keras)\b|pe_core\.layers", re.M
    )
    blocks = [code for code in python_blocks(DOCS / "index.md") if not framework.search(code)]
    assert len(blocks) >= 2
    with contextlib.redirect_stdout(printed):
        for code in blocks:
            exec(compile(code, "docs/index.md", "exec"), namespace)
    assert "most similar pair >= 1000 apart" in printed.getvalue()
