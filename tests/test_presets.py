"""Each preset reproduces its codebase: checked against independent restatements.

``tests/preset_references.py`` restates each codebase's formula line by line (sources
cited there). In float64 the restatements are exact for these positions, so pe_core's
float32 output must agree to ``ATOL32``. In float32 they compute the way the codebase
does; there the codebase's own angle error (a float32 ulp of ``pos * w``) sets the
tolerance, ``4 * 2**-23 * max(1, |angle|)`` (see the references' module docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, positions_on
from hypothesis import given
from hypothesis import strategies as st
from preset_references import PRESET_OF, REFERENCES

import pe_core

ATOL32 = 1e-6


def _dims(reference: str) -> st.SearchStrategy[int]:
    spec = pe_core.PRESETS[PRESET_OF[reference]]
    # The d/2-1 codebases divide by zero (fairseq) or give NaN (whisper, flax) at d < 4.
    low = 2 if spec.denominator == "d" else 4
    even = st.integers(low // 2, 64).map(lambda n: 2 * n)
    if spec.odd_d == "zero_pad":
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
    from pathlib import Path

    from pe_core.presets import preset_table_markdown

    page = (Path(__file__).parent.parent / "docs" / "conventions.md").read_text()
    start = page.index("<!-- preset-table:start -->") + len("<!-- preset-table:start -->")
    end = page.index("<!-- preset-table:end -->")
    assert page[start:end].strip() == preset_table_markdown()
