"""The documentation site: it builds with ``mkdocs build --strict``, every figure is in
it (drawn at build time by docs/hooks.py), and the code on docs/testing.md runs."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.M | re.S)


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
        timeout=300,
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


def test_pending_pages_are_left_out_until_they_exist(hooks, tmp_path):
    (tmp_path / "rope.md").write_text("# RoPE\n")
    nav = [
        {"Home": "index.md"},
        {"RoPE": "rope.md"},
        {"ALiBi": "alibi.md"},
        {"Framework layers": [{"PyTorch": "layers/torch.md"}]},
        {"Typo": "concpets.md"},  # not pending: left for the strict build to reject
    ]
    assert hooks._prune(nav, tmp_path) == [
        {"Home": "index.md"},
        {"RoPE": "rope.md"},
        {"Typo": "concpets.md"},
    ]


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
