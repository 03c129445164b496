"""The pages' Markdown, checked without building the site (fast, no docs extra needed).

* Nothing follows a table on the next line: Python-Markdown's tables run to the first
  blank line, so a heading written right under a table becomes one of its rows (and
  its anchor is gone).
* No escape shows in a table cell: a code span keeps its backslashes, so ``\\|`` inside
  backticks prints ``\\|``. Python-Markdown's tables do not split a cell at a ``|``
  inside backticks: write it bare there (``\\|`` is for a ``|`` outside code).
* Every ``#anchor`` link, in the page or to another page, names a heading of its
  target (ids computed as Python-Markdown's ``toc`` extension does, which mkdocs uses;
  cross-checked against it when it is installed) or an object of the API reference.
* Every public layer class of each ``pe_core.layers`` module is on its page.
* The ``docs`` extra installs what the site build imports.
"""

from __future__ import annotations

import ast
import html
import importlib
import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
IDS = [page.relative_to(DOCS).as_posix() for page in PAGES]

_FENCE = re.compile(r"^\s*(```|~~~)")
_ROW = re.compile(r"^\s*\|")
_MARKER = re.compile(r"^\s*<!-- computed: [\w-]+ -->\s*$")  # may render as a table
_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_VISIBLE_ESCAPE = re.compile(r"\\[!-/:-@\[-`{-~]")  # a backslash before ASCII punctuation


def prose(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every line outside fenced code."""
    fence: str | None = None
    for number, line in enumerate(text.split("\n"), 1):
        match = _FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def _outside_code(line: str) -> str:
    return _CODE.sub(lambda m: " " * len(m.group(0)), line)


# -- tables ------------------------------------------------------------------------------


def swallowed_lines(text: str) -> list[tuple[int, str]]:
    """Lines a table (or a computed table) takes as a row though they are none."""
    lines = dict(prose(text))
    found = []
    for number, line in lines.items():
        if _ROW.match(line) or _MARKER.match(line):
            following = lines.get(number + 1)
            if following and following.strip() and not _ROW.match(following):
                found.append((number + 1, following))
    return found


def visible_escapes(text: str) -> list[tuple[int, str]]:
    """Code spans of table rows that show a backslash escape."""
    return [
        (number, match.group(0))
        for number, line in prose(text)
        if _ROW.match(line)
        for match in _CODE.finditer(line)
        if _VISIBLE_ESCAPE.search(match.group(2))
    ]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_nothing_follows_a_table_on_the_next_line(page: Path) -> None:
    assert swallowed_lines(page.read_text()) == [], "add a blank line after the table"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_escape_shows_in_a_table_cell(page: Path) -> None:
    assert visible_escapes(page.read_text()) == [], "write | bare inside backticks"


def test_the_table_checks_see_the_faults() -> None:
    text = (
        "| a | b |\n|---|---|\n| `[cos \\| sin]` | `[cos | sin]` |\n## Swallowed\n\n"
        "| x | y \\| z |\n\n<!-- computed: preset-table -->\n## Also swallowed\n\n"
        "```text\n| in code |\n## not a heading\n```\n"
    )
    assert swallowed_lines(text) == [(4, "## Swallowed"), (9, "## Also swallowed")]
    assert visible_escapes(text) == [(3, "`[cos \\| sin]`")]


# -- anchors -----------------------------------------------------------------------------


def slugify(value: str, separator: str = "-") -> str:
    """Python-Markdown's ``toc`` slug (its default ``slugify``)."""
    value = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(rf"[{separator}\s]+", separator, value)


def heading_text(raw: str) -> str:
    """The text of a heading as ``toc`` reads it: the rendered inline content without
    its tags (code verbatim, link text, no emphasis marks or backslash escapes)."""
    parts = []
    for index, piece in enumerate(_CODE.split(raw)):
        kind = index % 3  # re.split with two groups: text, backticks, code
        if kind == 2:
            parts.append(piece.strip())
        elif kind == 0:
            piece = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", piece)
            piece = re.sub(r"<[^>]+>", "", piece)
            piece = re.sub(r"(\*{1,2}|(?<!\w)_{1,2})(\S.*?)\1(?!\w)", r"\2", piece)
            parts.append(re.sub(r"\\(.)", r"\1", piece))
    return html.unescape("".join(parts)).strip()


def heading_ids(text: str) -> list[str]:
    """The ids of a page's headings, in order, as ``toc`` gives them."""
    used: set[str] = set(re.findall(r"""\bid=["']([^"']+)["']""", text))
    ids = []
    in_table = False  # a table runs to the first blank line, headings included
    for _, line in prose(text):
        was_in_table, in_table = (
            in_table,
            bool(line.strip()) and (in_table or bool(_ROW.match(line))),
        )
        match = _HEADING.match(line)
        if not match or was_in_table:
            continue
        raw = match.group(2)
        attr = re.search(r"\s*\{:?\s*([^}]*)\}\s*$", raw)
        custom = re.search(r"#([\w-]+)", attr.group(1)) if attr else None
        if custom:
            ids.append(custom.group(1))
            used.add(custom.group(1))
            continue
        if attr:
            raw = raw[: attr.start()]
        slug = base = slugify(heading_text(raw))
        count = 0
        while slug in used or not slug:
            count += 1
            slug = f"{base}_{count}"
        used.add(slug)
        ids.append(slug)
    return ids


def _api_objects() -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)", (DOCS / "api.md").read_text(), flags=re.M))


def _api_anchor_resolves(anchor: str) -> bool:
    """An id of the API reference: a ``:::`` object or one of its members."""
    shown = _api_objects()
    if anchor in shown:
        return True
    owner = max((name for name in shown if anchor.startswith(name + ".")), key=len, default=None)
    if owner is None:
        return False
    try:
        value = importlib.import_module(owner)
    except ImportError:
        pytest.skip(f"{owner} needs a framework that is not installed")
    for attribute in anchor[len(owner) + 1 :].split("."):
        if not hasattr(value, attribute):
            return False
        value = getattr(value, attribute)
    return True


def anchor_links(page: Path) -> Iterator[tuple[int, Path, str]]:
    """``(line, target page, anchor)`` of every ``#anchor`` link to a page of the site."""
    for number, line in prose(page.read_text()):
        for url in _LINK.findall(_outside_code(line)):
            if "#" not in url or re.match(r"\w+:", url):
                continue
            path, anchor = url.split("#", 1)
            target = (page.parent / path).resolve() if path else page
            if target.suffix == ".md":
                yield number, target, anchor


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_anchor_link_names_a_heading(page: Path) -> None:
    broken = []
    for number, target, anchor in anchor_links(page):
        if not target.is_file():
            broken.append((number, str(target.relative_to(DOCS)), "no such page"))
        elif target == DOCS / "api.md" and _api_anchor_resolves(anchor):
            continue
        elif anchor not in heading_ids(target.read_text()):
            broken.append((number, f"{target.relative_to(DOCS).as_posix()}#{anchor}"))
    assert broken == []


def test_heading_ids_follow_the_toc_rules() -> None:
    text = (
        "# Title\n## `max_len`: one *policy*\n## What `print(layer)` shows\n## Title\n"
        "## LongRoPE (Phi-3)\n## Custom {#mine}\n## [Link](x.md) and odd_d & _more_\n"
        "## RoPE is $M_\\text{pos}$\n"
        "```text\n# not a heading\n```\n## žlutý kůň\n| a table |\n## swallowed\n"
    )
    assert heading_ids(text) == [
        "title",
        "max_len-one-policy",
        "what-printlayer-shows",
        "title_1",
        "longrope-phi-3",
        "mine",
        "link-and-odd_d-more",
        "rope-is-m_textpos",
        "zluty-kun",
    ]


def test_heading_ids_are_python_markdowns() -> None:
    """The restatement against the ``toc`` extension itself, on every page."""
    markdown = pytest.importorskip("markdown")
    extensions = ["admonition", "attr_list", "md_in_html", "tables", "toc"]
    pymdownx = ("pymdownx.details", "pymdownx.superfences", "pymdownx.arithmatex")
    for name in pymdownx:
        pytest.importorskip(name)
    configs = {"pymdownx.arithmatex": {"generic": True}}
    for page in PAGES:
        text = page.read_text()
        rendered = markdown.markdown(
            text, extensions=extensions + list(pymdownx), extension_configs=configs
        )
        found = re.findall(r"<h[1-6] id=\"([^\"]+)\"", rendered)
        assert found == heading_ids(text), page.relative_to(DOCS)


# -- the layers pages ------------------------------------------------------------------


def public_layers(module: str) -> list[str]:
    """The classes of ``pe_core/layers/<module>.py``'s ``__all__`` (read, not imported:
    no framework needed)."""
    tree = ast.parse((ROOT / "pe_core" / "layers" / f"{module}.py").read_text())
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [name for name in ast.literal_eval(node.value) if name in classes]
    raise AssertionError(f"pe_core/layers/{module}.py has no __all__")


@pytest.mark.parametrize("module", ["torch", "flax", "keras"])
def test_every_layer_is_on_its_page(module: str) -> None:
    layers = public_layers(module)
    assert len(layers) >= 9
    page = (DOCS / "layers" / f"{module}.md").read_text()
    shown = {match.group(2).split("(")[0] for match in _CODE.finditer(page)}
    assert [name for name in layers if name not in shown] == []
    kinds = {name.removeprefix("Linen") for name in layers}  # Flax: linen twins
    count = re.search(r"holds (\w+) ", page)
    words = {9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
    assert count and count.group(1) == words[len(kinds)], "the page says how many"


# -- the docs extra --------------------------------------------------------------------


def test_the_docs_extra_installs_what_the_build_imports() -> None:
    """docs/hooks.py's imports and those of the page code the build runs (the blocks
    above a ``<!-- computed: output -->``), but for the frameworks the hooks name in
    ``OPTIONAL_FOR_PAGES`` (their outputs then say they were not run), come with the
    ``docs`` extra; so does a signature formatter (Ruff or Black) for mkdocstrings."""
    from test_optional_imports import modules_of, unguarded_imports

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["docs"]
    hooks = (DOCS / "hooks.py").read_text()
    optional = next(
        ast.literal_eval(node.value.args[0])
        for node in ast.walk(ast.parse(hooks))
        if isinstance(node, ast.Assign)
        and getattr(node.targets[0], "id", "") == "OPTIONAL_FOR_PAGES"
    )
    installed = set(sys.stdlib_module_names) | {"pe_core", "pe_core_backends"}
    for requirement in project["dependencies"] + extra:
        installed |= modules_of(requirement)
    # what a requirement of the extra brings along: mkdocstrings-python's API loader
    installed |= {"griffe", "markdown"}
    needed = {package for _, package in unguarded_imports(hooks, frozenset())}
    for page in PAGES:
        text = page.read_text()
        ran = text[: max(text.rfind("<!-- computed: output -->"), 0)]
        for code in re.findall(r"^```python\n(.*?)^```$", ran, flags=re.M | re.S):
            needed |= {package for _, package in unguarded_imports(code, frozenset())}
    assert sorted(needed - installed - optional) == []
    assert {"ruff", "black"} & {re.split(r"[^\w-]", r)[0] for r in extra}


# -- install commands ------------------------------------------------------------------


def test_install_commands_are_those_of_a_checkout() -> None:
    """pe-core is on no package index: ``pip install 'pe-core[hf]'`` finds nothing. The
    pages and the README say ``pip install '.[hf]'`` (in a checkout), as the install
    page does."""
    found = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in [ROOT / "README.md", *PAGES]
        for number, line in enumerate(page.read_text().split("\n"), 1)
        if re.search(r"pe[-_]core\[", line)
    ]
    assert found == []
