"""MkDocs hooks: the figures and numbers of the pe_core docs, made while the site builds.

Nothing computed is committed; every build draws and measures again with the library:

* ``on_files`` draws every figure of :data:`FIGURES` with :mod:`pe_core.plots` and adds
  it to the site as ``figures/NAME.png``.
* ``on_page_markdown`` replaces each line ``<!-- computed: NAME -->`` with the Markdown
  that ``SNIPPETS[NAME]()`` computes. ``<!-- computed: output -->`` runs the ``python``
  code blocks of the page above it (since the previous such line, in one namespace
  per page) and shows what they print.
* ``on_page_content`` turns every formula (``pymdownx.arithmatex``'s ``\\( ... \\)`` and
  ``\\[ ... \\]`` spans) into MathML with ``latex2mathml``: browsers render it natively,
  so the pages load no script or font from elsewhere and read the same offline;
  ``on_post_page`` does the same for a heading's formula in the table of contents.
* :class:`SphinxRoles` is a griffe extension (registered in ``mkdocs.yml``) that renders
  the Sphinx roles of the docstrings, ``:func:`~pe_core.encode```, as code: `encode`,
  and takes every parameter's default from the signature.
"""

from __future__ import annotations

import ast
import contextlib
import html
import importlib.util
import io
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any

import griffe
import numpy as np
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

import pe_core
from pe_core import plots
from pe_core._kernel.routes import route_table_markdown
from pe_core.analysis import ResolutionReport, resolution_report
from pe_core.presets import preset_table_markdown
from pe_core_backends._registry import REGISTRY

try:  # the docs extra; the hooks' other functions work without it
    from latex2mathml.converter import convert as latex_to_mathml
    from latex2mathml.symbols_parser import convert_symbol
except ImportError:  # pragma: no cover - the site build then stops at the first formula
    latex_to_mathml = convert_symbol = None

log = logging.getLogger("mkdocs.hooks.pe_core")

# -- figures --------------------------------------------------------------------------

#: Site path -> the pe_core.plots call that draws it.
FIGURES: dict[str, Callable[[], Any]] = {
    "figures/heatmap.png": lambda: plots.plot_heatmap(128, 100),
    "figures/binary.png": lambda: plots.plot_heatmap(8, 64, code="binary"),
    "figures/normalized.png": lambda: plots.plot_normalized((3, 4, 10, 50)),
    "figures/spectrum.png": lambda: plots.plot_spectrum(512),
    "figures/similarity.png": lambda: plots.plot_similarity(128, 100),
    "figures/nd_similarity.png": lambda: plots.plot_grid_similarity((14, 14), 768),
    "figures/distance.png": lambda: plots.plot_similarity_by_distance(
        (16, 64, 256), (100.0, 10000.0), max_distance=200
    ),
    "figures/long_distance.png": lambda: plots.plot_long_distance(16, 100_000, min_separation=1000),
    "figures/rope_scores.png": lambda: plots.plot_rope_scores(64, 48),
    "figures/rope_sections.png": lambda: plots.plot_rope_sections(),
    "figures/alibi.png": lambda: plots.plot_alibi(8, 16),
    "figures/timesteps.png": lambda: plots.plot_timestep_embedding(256, 1000),
    "figures/fourier.png": lambda: plots.plot_fourier_features(32, 4.0),
    "figures/swin_index.png": lambda: plots.plot_swin_index(3),
    "figures/resample_gap.png": lambda: plots.plot_resample_gap(14, 32, 768),
}


def on_files(files: Files, config: Any) -> Files:
    for path, draw in FIGURES.items():
        figure = draw()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=110)
        files.append(File.generated(config, path, content=buffer.getvalue()))
    return files


# -- computed Markdown ----------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _small(value: float) -> str:
    """A difference: 0, a rounding error like 2.2e-16, or a size like 0.46."""
    if value == 0:
        return "0"
    return f"{value:.2g}" if value >= 1e-3 else f"{value:.1e}"


def permutation_demo() -> str:
    """Self-attention on "I love AI" and "AI love I", with and without positions."""
    rng = np.random.default_rng(0)
    d = 16
    vocabulary = ["I", "love", "AI"]
    embedding = dict(zip(vocabulary, rng.normal(size=(3, d)), strict=True))
    w_q, w_k, w_v = rng.normal(size=(3, d, d)) / math.sqrt(d)

    def attention(x: np.ndarray) -> np.ndarray:
        scores = (x @ w_q) @ (x @ w_k).T / math.sqrt(d)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return (weights / weights.sum(axis=-1, keepdims=True)) @ (x @ w_v)

    def outputs(words: list[str], positions: bool) -> dict[str, np.ndarray]:
        x = np.stack([embedding[w] for w in words])
        if positions:
            x = x + pe_core.encode(range(len(words)), d, dtype="float64")
        return dict(zip(words, attention(x), strict=True))

    rows = []
    for positions, label in (
        (False, "token embeddings only"),
        (True, "plus `encode(range(3), 16)`"),
    ):
        first = outputs(["I", "love", "AI"], positions)
        second = outputs(["AI", "love", "I"], positions)
        rows.append(
            [label] + [_small(float(np.max(np.abs(first[w] - second[w])))) for w in vocabulary]
        )
    return _table(["input of attention", '"I"', '"love"', '"AI"'], rows)


def div_term_check() -> str:
    d = 512
    two_i = np.arange(0, d, 2)
    textbook = np.exp(two_i * -(math.log(10000.0) / d))  # the tutorials' div_term
    power = 10000.0 ** (-two_i / d)
    library = pe_core.frequencies(d)
    textbook32 = np.exp(two_i.astype(np.float32) * np.float32(-(math.log(10000.0) / d)))
    error32 = np.abs(textbook32.astype(np.float64) - library)
    growing = np.exp(two_i * (math.log(10000.0) / d))  # the sign dropped
    below = int(np.count_nonzero(growing < 2 * math.pi))  # they grow with i: a prefix
    return "\n".join(
        [
            f"* `d = {d}`, all {d // 2} frequencies, float64: "
            f"max relative difference between `exp(2i·(−ln 10000/d))` and `10000^(−2i/d)`: "
            f"**{_small(float(np.max(np.abs(textbook / power - 1))))}**; between either and "
            f"`pe_core.frequencies(512)`: "
            f"**{_small(float(np.max(np.abs(textbook / library - 1))))}**.",
            f"* The same line in float32 (the textbook's dtype) gives frequencies off by up "
            f"to **{float(error32.max()):.1e}** "
            f"(pair {int(np.argmax(error32))}), and the angle `pos·ω` by that much times the "
            f"position: **{float(error32.max()) * 1e6:.2g} rad at position 10⁶**. That is one "
            "reason pe_core computes angles its own way ([Precision](precision.md)).",
            f"* Without the minus sign, `exp(2i·(+ln 10000/d))`: pairs 0 to {below - 1} "
            f"turn by less than a full circle per position (pair {below - 1} by "
            f"{growing[below - 1]:.3f} rad), the other {d // 2 - below} of {d // 2} "
            f"(pair {below} on, {growing[below]:.3f} rad and up) by more.",
        ]
    )


def rotation_check() -> str:
    m1 = np.asarray(pe_core.relative_matrix(1, 4, dtype="float64"))
    text = np.array2string(m1, precision=4, suppress_small=True, floatmode="fixed")
    d = 8

    def pe(p: int) -> np.ndarray:
        return np.asarray(pe_core.encode(p, d, dtype="float64"))

    def m(k: int) -> np.ndarray:
        return np.asarray(pe_core.relative_matrix(k, d, dtype="float64"))

    checks = [
        ("`M_5 @ PE(3) − PE(8)`", np.abs(m(5) @ pe(3) - pe(8))),
        ("`M_1000 @ PE(123456) − PE(124456)`", np.abs(m(1000) @ pe(123456) - pe(124456))),
        ("`M_5 @ M_5ᵀ − I` (orthogonal)", np.abs(m(5) @ m(5).T - np.eye(d))),
        ("`M_2 @ M_3 − M_5` (shifts add)", np.abs(m(2) @ m(3) - m(5))),
        ("`M_(−5) − M_5ᵀ`", np.abs(m(-5) - m(5).T)),
    ]
    rows = [[what, _small(float(err.max()))] for what, err in checks]
    return (
        "`pe_core.relative_matrix(1, 4)`, the rotation for one step with `d = 4` "
        "(pairs turning by 1 and 0.01 radians):\n\n```text\n"
        + text
        + "\n```\n\nand, with `d = 8` in float64:\n\n"
        + _table(["identity", "max abs error"], rows)
    )


def relative_dot() -> str:
    d = 512

    def pe(p: int) -> np.ndarray:
        return np.asarray(pe_core.encode(p, d, dtype="float64"))

    w = pe_core.frequencies(d)
    rows = [
        [f"`PE({p}) · PE({p + 3})`", f"{float(pe(p) @ pe(p + 3)):.12f}"]
        for p in (2, 10, 1000, 123456)
    ]
    rows.append(["`Σ_i cos(3·ω_i)`", f"{float(np.cos(3 * w).sum()):.12f}"])
    return _table([f"d = {d}, float64", "value"], rows)


def spectrum_numbers() -> str:
    d = 512
    rows = []
    for name in ("vaswani", "tensor2tensor"):
        w = pe_core.frequencies(d, name)
        rows.append(
            [
                f"`{name}`",
                f"{2 * math.pi / w[0]:.4f}",
                f"{2 * math.pi / w[1]:.4f}",
                f"{2 * math.pi / w[-1]:,.1f}",
            ]
        )
    return _table([f"d = {d}", "pair 0 wavelength", "pair 1", f"pair {d // 2 - 1} (slowest)"], rows)


def _report_row(label: str, report: ResolutionReport) -> list[str]:
    far = (
        ["—", "—"]
        if report.max_far_cosine is None
        else [str(report.max_far_cosine_pair), f"{report.max_far_cosine:.4f}"]
    )
    length = f"{report.distinguishable_length:,}"
    if report.distinguishable_length == report.max_len:
        length = f"≥ {length} (all)"
    return [
        label,
        str(report.min_distance_pair),
        f"{report.min_distance:.4g}",
        *far,
        length,
    ]


_REPORT_HEADER = [
    "code",
    "closest pair",
    "distance",
    "most similar far pair",
    "cosine",
    "distinguishable up to length",
]


def resolution_sinusoidal() -> str:
    max_len, separation = 100_000, 1000
    rows, seconds = [], []
    for d in (8, 16, 32, 64, 128, 512):
        start = time.perf_counter()
        report = resolution_report(d, max_len=max_len, min_separation=separation)
        seconds.append(time.perf_counter() - start)
        rows.append(_report_row(f"sinusoidal, d = {d}", report))
    return (
        _table(_REPORT_HEADER, rows)
        + f"\n\nPositions `0 … {max_len - 1:,}`; far means at least {separation:,} apart; "
        f"distinguishable means every pair at least 10⁻³ apart. Each report took "
        f"{min(seconds) * 1000:.0f}–{max(seconds) * 1000:.0f} ms on the machine that built "
        "this page (one similarity value per distance, not one per pair)."
    )


def resolution_codes() -> str:
    max_len, separation = 4096, 64
    cases = [
        ("sinusoidal, d = 12", {"d": 12}),
        ("binary, 12 bits", {"d": 12, "code": "binary"}),
        ("normalized `p/(n−1)`", {"d": 1, "code": "normalized"}),
    ]
    rows = [
        _report_row(label, resolution_report(max_len=max_len, min_separation=separation, **kw))
        for label, kw in cases
    ]
    return (
        _table(_REPORT_HEADER, rows)
        + f"\n\nPositions `0 … {max_len - 1:,}` (the normalized code: one sequence of "
        f"{max_len:,} tokens); far means at least {separation} apart; tolerance 10⁻³."
    )


def normalized_gaps() -> str:
    from pe_core.codes import normalized_positions

    rows = []
    for n in (3, 4, 10, 100, 1000, 100_000):
        values = np.asarray(normalized_positions(n), dtype=np.float64).reshape(-1)
        rows.append([f"{n:,}", f"{values[1] - values[0]:.3g}"])
    return _table(["sequence length n", "distance between neighbours"], rows)


def rope_check() -> str:
    from pe_core.rope import apply_rope
    from pe_core.rope_scaling import rope_frequencies

    rng = np.random.default_rng(0)
    d = 8
    positions = np.array([0, 1, 5, 100, 12345, 10**6])
    x = rng.normal(size=(positions.size, d))
    rotated = np.asarray(apply_rope(x, positions, layout="interleaved"))
    # RoPE's own frequencies, base ** (-2j/d), which may differ from the exp/log form of
    # pe_core.frequencies in the last bit
    inv_freq, _ = rope_frequencies({"head_dim": d, "rope_theta": 10000.0})
    spec = pe_core.Spec(frequencies=tuple(inv_freq))
    m = np.asarray(pe_core.relative_matrix(positions, d, spec, dtype="float64"))
    error = float(np.max(np.abs(rotated - np.einsum("pji,pj->pi", m, x))))
    q, k = rng.normal(size=(2, 1, d))
    rows = []
    for first, second in ((3, 1), (102, 100), (10**6 + 2, 10**6)):
        score = float(
            (
                np.asarray(apply_rope(q, np.array([first]), layout="interleaved"))
                @ np.asarray(apply_rope(k, np.array([second]), layout="interleaved")).T
            )[0, 0]
        )
        rows.append([f"m = {first:,}, n = {second:,}", f"{score:.12f}"])
    return (
        f'* `apply_rope(x, pos, layout="interleaved")` against `M_pos^T @ x` (d = {d}, '
        f"positions up to 10⁶, float64): max abs difference **{_small(error)}**.\n\n"
        + _table(["rope(q, m) · rope(k, n), d = 8", "score"], rows)
    )


def binary_neighbours() -> str:
    from pe_core.codes import binary_encode

    bits = np.asarray(binary_encode(np.arange(256), 8), dtype=np.float64)
    rows = []
    for p in (0, 1, 2, 3, 7, 63, 127):
        flipped = int(np.sum(bits[p] != bits[p + 1]))
        distance = float(np.linalg.norm(bits[p + 1] - bits[p]))
        rows.append([f"{p} → {p + 1}", str(flipped), f"{distance:.3f}"])
    return _table(["neighbours (8 bits)", "bits that change", "Euclidean distance"], rows)


def alibi_slopes() -> str:
    from pe_core.alibi import alibi_slopes as slopes

    rows = [[str(n), ", ".join(f"{s:.4g}" for s in slopes(n))] for n in (4, 8, 12)]
    return _table(["heads", "slopes m_h"], rows)


#: Marker name -> the function computing its Markdown.
SNIPPETS: dict[str, Callable[[], str]] = {
    "permutation-demo": permutation_demo,
    "div-term-check": div_term_check,
    "rotation-check": rotation_check,
    "relative-dot": relative_dot,
    "spectrum-numbers": spectrum_numbers,
    "resolution-sinusoidal": resolution_sinusoidal,
    "resolution-codes": resolution_codes,
    "normalized-gaps": normalized_gaps,
    "binary-neighbours": binary_neighbours,
    "rope-check": rope_check,
    "alibi-slopes": alibi_slopes,
    "route-table": route_table_markdown,
    "preset-table": preset_table_markdown,
}

_MARKER = re.compile(r"^<!-- computed: ([\w-]+) -->$")


def render(markdown: str, page_name: str = "page") -> str:
    """The page with every marker replaced (the tests use it too)."""
    out: list[str] = []
    namespace: dict[str, Any] = {"__name__": f"docs_{page_name}"}
    pending: list[str] = []  # python blocks not run yet
    missing: list[str] = []  # what this build lacks for the page's code, from there on
    language: str | None = None  # inside a fenced block: its language
    block: list[str] = []
    for line in markdown.split("\n"):
        stripped = line.strip()
        if language is not None:
            out.append(line)
            if stripped.startswith("```") and not stripped.strip("`"):
                if language == "python":
                    pending.append("\n".join(block))
                language = None
            else:
                block.append(line)
            continue
        if stripped.startswith("```"):
            out.append(line)
            language, block = (stripped[3:].split() or [""])[0], []
            continue
        match = _MARKER.match(stripped)
        if match is None:
            out.append(line)
            continue
        name = match.group(1)
        if name == "output":
            missing = missing or _missing(pending)
            out.append(_not_run(missing) if missing else _run(pending, namespace, page_name))
            pending = []
        elif name in SNIPPETS:
            out.append(SNIPPETS[name]())
        else:
            raise PluginError(
                f"{page_name}: unknown marker <!-- computed: {name} -->. "
                f"Expected one of: output, {', '.join(sorted(SNIPPETS))}."
            )
    return "\n".join(out)


#: The packages a page's code may need beyond the ``docs`` extra: the frameworks and the
#: peers it is compared with. A build without one shows, in place of each output from the
#: first block that needs it to the end of the page, a note naming it (the later blocks
#: may use the earlier ones' names); the full build (tests/test_docs.py) has them all and
#: shows every output. Any other module a block lacks stops the build.
OPTIONAL_FOR_PAGES = frozenset(
    {"torch", "jax", "flax", "tensorflow", "keras", "keras_hub", "transformers", "diffusers"}
)
_BACKEND_ARGUMENT = re.compile(r"""backend\s*=\s*["'](\w+)["']""")


def needed_modules(code: str) -> set[str]:
    """The top-level modules ``code`` imports or asks for with ``backend="..."``."""
    needed = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            needed |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            needed.add(node.module.split(".")[0])
    for name in _BACKEND_ARGUMENT.findall(code):
        if name in REGISTRY.by_alias:  # an unknown name (an error example) needs nothing
            needed.add(REGISTRY.by_name[REGISTRY.by_alias[name]].framework)
    return needed


def _missing(blocks: list[str]) -> list[str]:
    """The optional packages ``blocks`` need that this build does not have."""
    needed = set().union(*(needed_modules(code) for code in blocks))
    return sorted(m for m in needed & OPTIONAL_FOR_PAGES if importlib.util.find_spec(m) is None)


def _not_run(missing: list[str]) -> str:
    names = ", ".join(missing)
    log.info("docs hooks: an output not run: this build lacks %s", names)
    return (
        f"```text\n(not run when these pages were built: the code needs {names}, "
        "which was not installed; run it to see its output)\n```"
    )


def _run(blocks: list[str], namespace: dict[str, Any], page_name: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for code in blocks:
            try:
                exec(compile(code, f"<{page_name} code block>", "exec"), namespace)
            except Exception as exc:
                raise PluginError(f"{page_name}: a code block raised {exc!r}:\n{code}") from exc
    text = printed.getvalue().rstrip("\n") or "(nothing printed)"
    return f"```text\n{text}\n```"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return render(markdown, page.file.src_uri)


# -- math -----------------------------------------------------------------------------

#: ``\Big\lfloor``: latex2mathml sizes a delimiter given as a character, not as a command.
_SIZED_COMMAND = re.compile(r"(\\[bB]igg?[lrm]?)\s*(\\[A-Za-z]+)")
#: ``\text{cu\_seqlens}``: text arguments are kept verbatim, escapes included.
_TEXT_ARGUMENT = re.compile(r"(\\text(?:tt|rm|it|bf|sf)?\{)([^{}]*)\}")
_TEXT_ESCAPE = re.compile(r"\\([_%&#$])")
#: latex2mathml's named widths (MathML 3) as lengths (MathML Core, what browsers render).
_SPACES = {"thin": 1 / 6, "medium": 2 / 9, "thick": 5 / 18}
_NAMED_WIDTH = re.compile(r'width="(negative)?(thin|medium|thick)mathspace"')
#: Left over by a command or an environment the converter does not know.
_UNCONVERTED = re.compile(r">[^<]*(?:\\|&(?!#x[0-9A-Fa-f]+;|[a-z]+;))[^<]*<")


def _sized_delimiter(match: re.Match[str]) -> str:
    code = convert_symbol(match.group(2))
    return match.group(1) + (chr(int(code, 16)) if code else match.group(2))


def _width(match: re.Match[str]) -> str:
    em = _SPACES[match.group(2)] * (-1 if match.group(1) else 1)
    return f'width="{em:.4f}em"'


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """One formula (the TeX between ``\\(`` and ``\\)``) as a MathML ``<math>`` element.

    Raises ``ValueError`` naming the formula if any of it is left unconverted (a
    command or environment the converter does not know), so no page shows raw TeX.
    """
    if latex_to_mathml is None:
        raise PluginError("The formulas need latex2mathml: pip install '.[docs]'.")
    source = re.sub(r"\\(begin|end)\{aligned\}", r"\\\1{split}", tex)  # same layout
    source = _SIZED_COMMAND.sub(_sized_delimiter, source)
    source = _TEXT_ARGUMENT.sub(lambda m: m[1] + _TEXT_ESCAPE.sub(r"\1", m[2]) + "}", source)
    mathml = latex_to_mathml(source, display="block" if display else "inline")
    mathml = _NAMED_WIDTH.sub(_width, mathml)
    left = _UNCONVERTED.search(mathml)
    if left is not None:
        raise ValueError(f"the formula {tex!r} does not convert to MathML: {left.group(0)}")
    return mathml


#: What pymdownx.arithmatex (generic mode) writes for ``$...$`` and ``$$...$$``.
_ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]\s*</(?P=tag)>',
    re.S,
)


def render_math(html_text: str, page_name: str = "page") -> str:
    """Every arithmatex formula of a page's HTML replaced by its MathML."""

    def convert(match: re.Match[str]) -> str:
        tex = html.unescape(match["tex"]).strip()
        try:
            mathml = tex_to_mathml(tex, display=match["open"] == "[")
        except Exception as exc:
            raise PluginError(f"{page_name}: {exc}") from exc
        return f'<{match["tag"]} class="arithmatex">{mathml}</{match["tag"]}>'

    return _ARITHMATEX.sub(convert, html_text)


def on_page_content(html_text: str, page: Any, config: Any, files: Files) -> str:
    return render_math(html_text, page.file.src_uri)


#: Where TeX is code, not math (code, scripts, styles, the MathML already made), and tags.
_NOT_TEXT = re.compile(r"<(pre|code|script|style|math)\b.*?</\1>|<[^>]*>", re.S)
_INLINE_TEX = re.compile(r"\\\((.+?)\\\)", re.S)


def render_leftover_math(html_text: str, page_name: str = "page") -> str:
    """Formulas outside the content: a heading's math, without its arithmatex span, in
    the table of contents the theme draws from the headings (as MathML), and in its
    attributes (``aria-label``: as the formula's text)."""

    def mathml(match: re.Match[str]) -> str:
        try:
            return tex_to_mathml(html.unescape(match.group(1)).strip())
        except Exception as exc:
            raise PluginError(f"{page_name}: {exc}") from exc

    def text(match: re.Match[str]) -> str:
        return html.escape(html.unescape(re.sub(r"<[^>]+>", "", mathml(match))))

    out, end = [], 0
    for part in _NOT_TEXT.finditer(html_text):
        out.append(_INLINE_TEX.sub(mathml, html_text[end : part.start()]))
        out.append(part.group(0) if part.group(1) else _INLINE_TEX.sub(text, part.group(0)))
        end = part.end()
    out.append(_INLINE_TEX.sub(mathml, html_text[end:]))
    return "".join(out)


def on_post_page(output: str, page: Any, config: Any) -> str:
    return render_leftover_math(output, page.file.src_uri)


# -- docstrings -----------------------------------------------------------------------

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")


def _role_as_code(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


_SECTION_RULE = re.compile(r"^\s*-{3,}\s*$")


def _fence_doctests(text: str) -> str:
    """Put doctest runs outside an ``Examples`` section into ``pycon`` code blocks
    (inside one, the numpy-style parser already renders them as code)."""
    lines, out = text.split("\n"), []
    in_examples, i = False, 0
    while i < len(lines):
        line = lines[i]
        if line.strip() and i + 1 < len(lines) and _SECTION_RULE.match(lines[i + 1]):
            in_examples = line.strip() in ("Examples", "Example")
        if not in_examples and line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{indent}```")
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


_CHOICES = re.compile(
    r"^(?P<head>\s*(?P<names>\w+(?:, \w+)*) : )\{(?P<choices>[^{}]+)\}(?P<tail>.*)$"
)


def _choices_as_types(text: str, parameters: Any) -> str:
    """``name : {"a", "b"}`` -> ``name : "a" | "b"`` for the parameters of the signature.

    The numpy docstring parser takes the first of the braced values as the default
    (numpydoc's convention); the signature is the truth (``backend=None`` follows the
    input), so where the signature has the parameter its default is shown instead.
    """

    def rewrite(line: str) -> str:
        match = _CHOICES.match(line)
        if match is None or not all(n in parameters for n in match["names"].split(", ")):
            return line
        choices = " | ".join(c.strip() for c in match["choices"].split(","))
        return f"{match['head']}{choices}{match['tail']}"

    return "\n".join(rewrite(line) for line in text.split("\n"))


_GROUPED = re.compile(r"^(?P<indent>\s*)(?P<names>\w+(?:, \w+)+)(?P<type> : .*)?$")


def _split_grouped(text: str, parameters: Any) -> str:
    """``a, b : int`` + description -> one entry per name, each with the description.

    The numpy parser gives every name of a group the signature default of the first.
    """
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        match = _GROUPED.match(lines[i])
        names = match["names"].split(", ") if match else []
        if not names or not all(name in parameters for name in names):
            out.append(lines[i])
            i += 1
            continue
        indent, j = len(match["indent"]), i + 1
        while j < len(lines) and (
            not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
        ):
            j += 1
        while j > i + 1 and not lines[j - 1].strip():  # blank lines stay after the group
            j -= 1
        for name in names:
            out.append(f"{match['indent']}{name}{match['type'] or ''}")
            out.extend(lines[i + 1 : j])
        i = j
    return "\n".join(out)


def _parameter_names(obj: griffe.Object) -> set[str]:
    try:
        return {parameter.name for parameter in obj.parameters}  # functions; classes: __init__
    except (AttributeError, griffe.AliasResolutionError):
        return set()


class SphinxRoles(griffe.Extension):
    """Make the Sphinx-flavoured docstrings read well in Markdown.

    Roles become code (``:func:`~pe_core.encode``` -> `encode`, ``:class:`pe_core.Spec```
    -> `pe_core.Spec`), doctest runs outside an ``Examples`` section become code
    blocks instead of paragraphs (the docstrings are written for doctest and ``help()``),
    and a parameter typed with braced values, ``backend : {"numpy", "jax", ...}``, shows
    the signature's default rather than the first value.
    """

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        # griffe fires on_object for the members of a package, not for the package itself.
        self.on_object(obj=pkg)

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        # Once the whole tree is loaded (a class's parameters are its __init__'s); an
        # alias shares its target's docstring, which is rewritten once, as the target.
        if obj.docstring is not None and not obj.is_alias:
            value = _ROLE.sub(_role_as_code, obj.docstring.value)
            parameters = _parameter_names(obj)
            value = _split_grouped(_choices_as_types(value, parameters), parameters)
            obj.docstring.value = _fence_doctests(value)
