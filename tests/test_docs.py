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

pytestmark = pytest.mark.slow  # builds the site once (about a minute) and runs every page's code

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
        if "timm" in modules_needed(code):  # timm imports torchvision: a stand-in if missing
            from _timm_import import import_timm

            import_timm()
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
        "latex2mathml",
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
    # Built with every framework the pages' code needs, every output is shown.
    complete = all(_installed(name) for name in hooks.OPTIONAL_FOR_PAGES)
    shown = set()
    for page in site.rglob("*.html"):
        html = page.read_text()
        assert "<!-- computed:" not in html, page
        assert not complete or "not run when these pages were built" not in html, page
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


def test_outputs_needing_a_missing_framework_say_so(hooks, monkeypatch):
    """A build without a framework a page's code needs (the ``docs`` extra alone) shows a
    note in place of each output from there on; any other missing module stops it."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        hooks.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "torch" else find_spec(name, *args),
    )
    page = (
        "```python\nprint(1)\n```\n<!-- computed: output -->\n"
        "```python\nimport torch\nprint(2)\n```\n<!-- computed: output -->\n"
        "```python\nprint(3)\n```\n<!-- computed: output -->"
    )
    rendered = hooks.render(page, "page.md")
    assert "```text\n1\n```" in rendered
    note = "(not run when these pages were built: the code needs torch, which was not installed"
    assert rendered.count(note) == 2  # the later blocks may use the skipped one's names
    code = 'import pe_core\npe_core.encode([0], 8, backend="jax")'
    assert hooks.needed_modules(code) == {"pe_core", "jax"}
    with pytest.raises(Exception, match="No module named 'pe_core_no_such_module'"):
        hooks.render("```python\nimport pe_core_no_such_module\n```\n<!-- computed: output -->")


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


@pytest.fixture(scope="module")
def pages(site) -> dict[str, str]:
    """Every built page's HTML by its path in the site."""
    return {page.relative_to(site).as_posix(): page.read_text() for page in site.rglob("*.html")}


_CODE = re.compile(r"<(pre|code|script|style)\b.*?</\1>", re.S)
_MATHML = re.compile(r"<math\b.*?</math>", re.S)


def _prose(html: str) -> str:
    """The page without its code, scripts, styles and MathML."""
    return _MATHML.sub("", _CODE.sub("", html))


#: Loads of another host: a script, a stylesheet, a font, a preconnect, an image or frame.
_EXTERNAL = re.compile(
    r"""<(?:script|link|img|iframe|source|audio|video)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//|@import\s+(?:url\()?["']?(?:https?:)?//""",
    re.I,
)


def test_site_loads_nothing_from_elsewhere(site, pages):
    """No page or stylesheet of the site fetches a script, stylesheet or font from another
    host (the theme's web fonts are off, the math is MathML): it reads the same offline."""
    files = dict(pages)
    files.update(
        (path.relative_to(site).as_posix(), path.read_text()) for path in site.rglob("*.css")
    )
    found = {
        name: match.group(0) for name, text in files.items() for match in _EXTERNAL.finditer(text)
    }
    assert found == {}
    assert _EXTERNAL.search('<script src="https://cdn.example/x.js">')  # the check can fail
    assert _EXTERNAL.search("<link rel=stylesheet href=//fonts.example/css>")


_TEX_LEFT = re.compile(r"\\[(\[]|\$\$|\\begin\{|\\(?:frac|omega|text|mathrm|lfloor)\b")


def test_every_formula_is_mathml(pages, hooks):
    """Every formula is MathML in the built pages: no TeX is left in the text, every math
    page has its <math> elements, and known formulas have their MathML."""
    math_pages = {name for name, html in pages.items() if 'class="arithmatex"' in html}
    assert {"concepts/index.html", "rope_scaling/index.html", "relative/index.html"} <= math_pages
    for name, html in pages.items():
        left = _TEX_LEFT.findall(_prose(html))
        assert left == [], f"{name}: TeX left in the text: {left[:5]}"
    for name in math_pages:
        html = pages[name]
        assert re.findall(r'class="arithmatex">(?!<math )', html) == [], name
    concepts = pages["concepts/index.html"]
    assert (
        '<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline"><mrow><mi>d</mi><mo>&#x0003D;</mo><mn>16</mn></mrow></math>'
        in concepts
    )
    # a display formula with an aligned environment: a table of rows
    assert re.search(r'<div class="arithmatex"><math [^>]*display="block"><mrow><mtable', concepts)
    alibi = pages["alibi/index.html"]
    assert hooks.tex_to_mathml("m_k = 2^{-8k/p}") in alibi
    relative = pages["relative/index.html"]  # \Big\lfloor in a cases environment
    assert '<mo minsize="1.623em" maxsize="1.623em">\u230a</mo>' in relative


def test_formula_conversion_covers_the_constructs_and_refuses_the_rest(hooks):
    pytest.importorskip("latex2mathml")
    convert = hooks.tex_to_mathml
    for tex in (
        r"\begin{aligned} a &= b \\ c &= d \end{aligned}",
        r"\operatorname{clip}\big(\lfloor x \rfloor \bmod 2^{32}\big)",
        r"\begin{pmatrix} \cos\theta & -\sin\theta \\ \sin\theta & \cos\theta \end{pmatrix}",
        r"\text{bucket}(a) = \begin{cases} a & a < m \\ \Big\lfloor \dfrac{a}{m} \Big\rfloor & \text{else} \end{cases}",
        r"\texttt{cu\_seqlens}[k] \le t, \; \ln\!\left(\left\lceil x \right\rceil\right), \lVert v \rVert",
    ):
        mathml = convert(tex, display=True)
        text = re.sub(r"<[^>]+>", " ", mathml)
        assert "\\" not in text and "mathspace" not in mathml, (tex, mathml)
        assert mathml.startswith(
            '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">'
        )
    assert "<mtable" in convert(r"\begin{aligned} a &= b \\ c &= d \end{aligned}")
    assert "<mtext>cu_seqlens</mtext>" in convert(r"\text{cu\_seqlens}")
    with pytest.raises(ValueError, match=r"the formula '\\\\unknowncommand x' does not convert"):
        convert(r"\unknowncommand x")
    with pytest.raises(ValueError, match="does not convert"):
        convert("a & b")  # a column separator outside a table, left as text
    toc = '<nav aria-label="by \\(M_k\\)"><a>by \\(M_k\\)</a><code>\\(x\\)</code></nav>'
    assert hooks.render_leftover_math(toc) == (  # a heading's math in the contents
        f'<nav aria-label="by Mk"><a>by {convert("M_k")}</a><code>\\(x\\)</code></nav>'
    )
    page = '<p><span class="arithmatex">\\(a &lt; b\\)</span></p>'
    assert hooks.render_math(page) == (
        '<p><span class="arithmatex">' + convert("a < b") + "</span></p>"
    )


_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):")


def test_api_pages_render_roles_and_doctests(pages):
    """No Sphinx role reaches a page (module docstrings included), no doctest lands in a
    parameter or exception table or in a paragraph, and the packages' own examples show
    as code."""
    roles = {name: _SPHINX_ROLE.findall(html) for name, html in pages.items()}
    assert {name: found for name, found in roles.items() if found} == {}
    api = pages["api/index.html"]
    for table in re.findall(r"<table\b.*?</table>", api, flags=re.S):
        assert "&gt;&gt;&gt;" not in table, table[:500]
    for name, html in pages.items():
        assert "&gt;&gt;&gt;" not in _prose(html), name
    for package, example in (("pe_core", "pe_core.encode"), ("pe_core_backends", "backend_of")):
        start = api.index(f'<h2 id="{package}" class="doc doc-heading">')
        section = api[start : api.find('class="doc doc-heading"', start + 60)]
        code = "".join(re.findall(r"<pre\b.*?</pre>", section, flags=re.S))
        assert "&gt;&gt;&gt;" in code and example in re.sub(r"<[^>]+>", "", code), package
