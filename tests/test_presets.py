"""Each preset reproduces its codebase: checked against independent restatements.

``tests/preset_references.py`` restates each codebase's formula line by line (sources
cited there). In float64 the restatements are exact for these positions, so pe_core's
float32 output must agree to ``ATOL32``. In float32 they compute the way the codebase
does; there the codebase's own angle error (a float32 ulp of ``pos * w``) sets the
tolerance, ``4 * 2**-23 * max(1, |angle|)`` (see the references' module docstring).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import numpy as np
import pytest
from conftest import assert_close, positions_on
from hypothesis import given
from hypothesis import strategies as st
from preset_references import PRESET_OF, REFERENCES

import pe_core
from pe_core import _presets, presets

ATOL32 = 1e-6


def _dims(reference: str) -> st.SearchStrategy[int]:
    spec = pe_core.PRESETS[PRESET_OF[reference]]
    # The d/2-1 codebases divide by zero (fairseq) or give NaN (whisper, flax) at d < 4.
    low = 2 if spec.denominator == "d" else 4
    even = st.integers(low // 2, 64).map(lambda n: 2 * n)
    if spec.odd_d in ("zero_pad", "truncate"):
        return st.one_of(even, st.integers(low // 2, 64).map(lambda n: 2 * n + 1))
    return even


@pytest.mark.parametrize("reference", sorted(REFERENCES))
@given(data=st.data())
def test_preset_matches_codebase_float64(backend: str, reference: str, data: st.DataObject) -> None:
    d = data.draw(_dims(reference), label="d")
    positions = np.array(
        data.draw(st.lists(st.integers(0, 20_000), min_size=1, max_size=8), label="positions")
    )
    expected = REFERENCES[reference](positions, d)
    out = pe_core.encode(positions_on(backend, positions), d, spec=PRESET_OF[reference])
    assert_close(out, expected, atol=ATOL32, rtol=1e-7, backend=backend)


@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_preset_matches_codebase_float32_numbers(reference: str) -> None:
    """Against the codebase's own float32 arithmetic, within that arithmetic's rounding."""
    d = 64
    positions = np.arange(0, 2048, 7)
    spec = pe_core.PRESETS[PRESET_OF[reference]]
    codebase = REFERENCES[reference](positions, d, float32=True)
    ours = pe_core.encode(positions, d, spec=spec, dtype="float64")
    angles = (positions[:, None] + spec.offset) * np.max(pe_core.frequencies(d, spec))
    bound = 4 * 2.0**-23 * np.maximum(1.0, np.abs(angles)) + ATOL32
    assert_close(ours, codebase, atol=bound)


def test_fairseq_first_token_is_table_row_two() -> None:
    from preset_references import fairseq

    table = fairseq(np.arange(3), 16, padding_idx=1)
    got = pe_core.encode([0, 1, 2], 16, spec="fairseq")
    assert_close(got, table, atol=ATOL32, rtol=1e-7)
    got = pe_core.encode([0], 16, spec=pe_core.Spec(denominator="half_minus_one", layout="split"))
    assert_close(got[0], np.concatenate([np.zeros(8), np.ones(8)]), atol=0, rtol=1e-7)


def test_every_preset_has_a_reference() -> None:
    # N-D presets (axes > 1) have their references in test_nd_tables.py
    assert set(PRESET_OF.values()) == {n for n, s in pe_core.PRESETS.items() if s.axes == 1}


def test_docs_preset_table_is_the_generated_one() -> None:
    """The conventions page shows the table the code generates (rendered at build).

    The build's hooks import the ``docs`` extra: without it the test skips."""
    import importlib.util
    from pathlib import Path

    from pe_core.presets import preset_table_markdown

    pytest.importorskip("mkdocs", reason="the docs hooks need the docs extra")
    pytest.importorskip("griffe", reason="the docs hooks need the docs extra")
    docs = Path(__file__).parent.parent / "docs"
    page = (docs / "conventions.md").read_text()
    assert "<!-- computed: preset-table -->" in page.splitlines()
    spec = importlib.util.spec_from_file_location("pe_core_docs_hooks", docs / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert preset_table_markdown() in hooks.render(page, "conventions")


def test_every_preset_is_a_module_of_pe_core_presets() -> None:
    """One module per preset, named after its Spec; PRESETS sorted by (order, name)."""
    modules = {
        info.name: importlib.import_module(f"pe_core._presets.{info.name}").PRESET
        for info in pkgutil.iter_modules(_presets.__path__)
        if not info.name.startswith("_")
    }
    assert set(modules) == set(pe_core.PRESETS)
    for name, preset in modules.items():
        assert isinstance(preset, _presets.Preset)
        assert preset.spec is pe_core.PRESETS[name] and preset.spec.name == name
        assert preset.source == pe_core.PRESET_SOURCES[name]
    assert list(pe_core.PRESETS) == sorted(modules, key=lambda n: (modules[n].order, n))
    orders = [preset.order for preset in modules.values()]
    assert len(set(orders)) == len(orders), "each built-in preset has an order of its own"


def test_the_built_in_presets_keep_their_order() -> None:
    """The built-in presets (pe_core.typing.PresetName) come first in PRESETS, in its
    order: a preset added later goes after them."""
    from typing import get_args

    from pe_core.typing import PresetName

    built_in = get_args(PresetName)
    assert tuple(pe_core.PRESETS)[: len(built_in)] == built_in


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"spec": "vaswani"}, TypeError, "Preset.spec must be a pe_core.Spec"),
        ({"source": ""}, TypeError, "Preset.source must be a non-empty string"),
        ({"order": 1.5}, TypeError, "Preset.order must be an int"),
        ({"order": True}, TypeError, "Preset.order must be an int"),
    ],
)
def test_a_bad_preset_names_its_field(fields: dict, error: type, message: str) -> None:
    good = {"spec": pe_core.Spec(name="x"), "source": "x", "order": 1}
    with pytest.raises(error, match=message):
        _presets.Preset(**{**good, **fields})


def test_a_module_without_a_preset_is_refused(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken.py").write_text("PRESET = None\n")
    monkeypatch.setattr(_presets, "__path__", [*_presets.__path__, str(tmp_path)])
    before = dict(pe_core.PRESETS)
    try:
        with pytest.raises(TypeError, match=r"pe_core._presets.broken must define PRESET"):
            presets._discover()
        assert dict(pe_core.PRESETS) == before  # nothing changed
    finally:
        sys.modules.pop("pe_core._presets.broken", None)
        if hasattr(_presets, "broken"):
            delattr(_presets, "broken")
