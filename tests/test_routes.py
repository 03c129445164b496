"""The route table: every threshold written once, every route a row of the table.

The route functions of each family (``host_route``, ``device_route``,
``factors_route``) name only routes that :data:`pe_core._kernel.routes.ROUTES` lists,
and a call's route is the one its family's function names (the numbers of each route
are checked against float64 references by the tests of that route).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import pe_core
from pe_core import _rope_call, _sinusoidal
from pe_core._kernel import host_tables, routes
from pe_core._kernel.placement import prepare_positions
from pe_core_backends import get_namespace

ROOT = Path(__file__).resolve().parent.parent
NUMPY = get_namespace("numpy")


def _names(family: str) -> set[str]:
    return {route.name for route in routes.ROUTES if route.family == family}


def test_every_threshold_is_written_once() -> None:
    """No module but routes.py assigns a name of the table (a second spelling)."""
    thresholds = {name for name in routes.__all__ if name.isupper()}
    written = []
    for path in sorted((ROOT / "pe_core").rglob("*.py")):
        if path.name == "routes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            written += [
                f"{path.relative_to(ROOT)}:{node.lineno} {t.id}"
                for t in targets
                if isinstance(t, ast.Name) and t.id in thresholds
            ]
    assert not written, written


def test_the_check_of_second_spellings_can_fail() -> None:
    source = "FEW_POSITIONS = 64\n"
    tree = ast.parse(source)
    assigned = [t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets]
    assert set(assigned) & {name for name in routes.__all__ if name.isupper()}


@pytest.mark.parametrize(
    ("values", "n_pairs", "layout", "working", "expected"),
    [
        (np.arange(5), 4, "interleaved", "float32", "small"),
        (np.arange(100, 132), 64, "interleaved", "float32", "run_start_row"),
        (np.arange(100, 132), 64, "split", "float32", "run_tables"),
        (np.arange(4096), 64, "interleaved", "float64", "run_tables"),
        (np.random.default_rng(0).integers(0, 1000, 64), 160, "split", "float32", "rows"),
        (np.random.default_rng(0).integers(0, 1000, 64), 160, "split", "float64", "small"),
        (np.random.default_rng(0).permutation(4096) + 4096, 64, "interleaved", "float32", "gather"),
        (np.arange(3) * 10.0**15 + 0.5, 4, "interleaved", "float32", "exact_kernel"),
    ],
)
def test_host_route_names_a_row_of_the_table(values, n_pairs, layout, working, expected) -> None:
    omegas = tuple(10000.0 ** (-2 * i / (2 * n_pairs)) for i in range(n_pairs))
    route, _ = host_tables.host_route(
        values,
        omegas,
        offset=0,
        layout=layout,
        working=working,
        max_abs=float(np.abs(values).max()),
        rounded_once=working == "float64",
        mutable=True,
    )
    assert route == expected
    assert route in _names("encode (host positions)")


def test_device_route_names_a_row_of_the_table() -> None:
    positions = prepare_positions(np.arange(4), NUMPY, None)
    assert _sinusoidal.device_route(NUMPY, positions) == "kernel"
    assert "kernel" in _names("encode (device or traced positions)")


def test_factors_route_names_a_row_of_the_table() -> None:
    x = np.zeros((3, 8), np.float32)
    few = prepare_positions(np.arange(3), NUMPY, None)
    assert _rope_call.factors_route(NUMPY, few, (1.0, 0.1), "float32", x) == "small"
    half = x.astype(np.float16)
    assert _rope_call.factors_route(NUMPY, few, (1.0, 0.1), "float64", half) == "host_table"
    assert {"small", "host_table", "kernel", "lane"} == _names("rope cos/sin")


def test_the_route_table_renders_every_row() -> None:
    table = routes.route_table_markdown().splitlines()
    assert len(table) == 2 + len(routes.ROUTES)
    assert all(
        f"`{route.name}`" in row for route, row in zip(routes.ROUTES, table[2:], strict=True)
    )


def test_each_host_route_gives_the_encoding() -> None:
    """One call per host route, against the float64 textbook formula."""
    for values in (
        np.arange(5),
        np.arange(100, 132),
        np.random.default_rng(0).permutation(4096),
        np.arange(3) * 10.0**3 + 0.5,
    ):
        d = 128
        got = pe_core.encode(values, d)
        w = 10000.0 ** (-np.arange(0, d, 2) / d)
        angles = values.astype(np.float64)[:, None] * w
        expected = np.stack([np.sin(angles), np.cos(angles)], -1).reshape(len(values), d)
        assert np.abs(got - expected).max() < 1e-6
