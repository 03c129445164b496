"""pe_core.typing: every Literal alias lists exactly the values the runtime accepts."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from conftest import HANG_TIMEOUT

import pe_core
import pe_core.typing as pt
import pe_core_backends
from pe_core import analysis, resample, rope_layout, rope_nd, rope_scaling, spec, t5
from pe_core_backends._registry import REGISTRY


def _runtime_choices() -> dict[str, Callable[[], tuple[Any, ...]]]:
    """Alias name -> the runtime tuple (or registry keys) it must equal, in order."""
    return {
        "BackendName": lambda: pe_core_backends.BACKENDS,
        "FloatDTypeName": lambda: pe_core_backends.FLOAT_DTYPES,
        "TableLayout": lambda: rope_layout.TABLE_LAYOUTS,
        "Denominator": lambda: spec._DENOMINATORS,
        "OddDPolicy": lambda: spec._ODD_D,
        "AxisOrder": lambda: spec._AXIS_ORDERS,
        "SinCosOrder": lambda: spec._ORDERS,
        "AxisLayout": lambda: spec._AXIS_LAYOUTS,
        "PresetName": lambda: tuple(pe_core.PRESETS),
        "Metric": lambda: analysis.METRICS,
        "PositionCode": lambda: analysis.CODES,
        "RopeLayout": lambda: rope_layout.LAYOUTS,
        "RopeType": lambda: tuple(sorted(rope_scaling.SCALING_TYPES)),
        "SectionLayout": lambda: rope_nd.SECTION_LAYOUTS,
        "NamedFrequencies": lambda: rope_nd._NAMED_FREQUENCIES,
        "T5Arithmetic": lambda: t5.ARITHMETICS,
        "RotaryFeatures": lambda: rope_layout.ROTARY_FEATURES,
        "Interpolation": lambda: resample.INTERPOLATIONS,
        "NumpyBackend": lambda: _aliases("numpy"),
        "JaxBackend": lambda: _aliases("jax"),
        "TorchBackend": lambda: _aliases("torch"),
        "TensorFlowBackend": lambda: _aliases("tensorflow"),
    }


def _aliases(backend: str) -> tuple[str, ...]:
    """The names ``canonical_backend`` turns into ``backend``, in the registry's order."""
    return tuple(alias for alias, name in REGISTRY.by_alias.items() if name == backend)


#: The aliases of tables that grow by one module or row (a preset module, a rope_type
#: module, a backend row): their Literal lists the built-in values, each still in the
#: table and in the table's order, and a value added later need not be added to it
#: (``PresetLike`` and ``BackendLike`` take any string; docs/architecture.md).
_GROWING = {"BackendName", "PresetName", "RopeType"}


def _in_order_within(values: tuple[Any, ...], table: tuple[Any, ...]) -> bool:
    """Whether ``values`` are entries of ``table``, in its order (a subsequence)."""
    remaining = iter(table)
    return all(value in remaining for value in values)


def _literal_aliases() -> list[str]:
    return [name for name in pt.__all__ if get_origin(getattr(pt, name)) is Literal]


@pytest.mark.parametrize("name", sorted(_runtime_choices()))
def test_literal_alias_equals_the_runtime_choices(name: str) -> None:
    alias = getattr(pt, name)
    assert get_origin(alias) is Literal
    runtime = tuple(_runtime_choices()[name]())
    if name in _GROWING:
        assert _in_order_within(get_args(alias), runtime), (get_args(alias), runtime)
    else:
        assert get_args(alias) == runtime


def test_in_order_within_is_a_subsequence_check() -> None:
    assert _in_order_within(("a", "c"), ("a", "b", "c"))
    assert _in_order_within((), ("a",))
    assert not _in_order_within(("c", "a"), ("a", "b", "c"))
    assert not _in_order_within(("a", "d"), ("a", "b", "c"))


def test_every_literal_alias_is_checked_against_the_runtime() -> None:
    assert sorted(_literal_aliases()) == sorted(_runtime_choices())


def test_rope_types_are_the_scaling_table() -> None:
    assert rope_scaling.ROPE_TYPES == tuple(rope_scaling.SCALING_TYPES)
    assert _in_order_within(get_args(pt.RopeType), rope_scaling.ROPE_TYPES)


def test_growing_aliases_exist() -> None:
    assert _GROWING <= set(_runtime_choices())


@pytest.mark.parametrize(
    ("alias", "local"),
    [
        (pt.TableLayout, spec.Layout),
        (pt.Denominator, spec.Denominator),
        (pt.OddDPolicy, spec.OddDPolicy),
        (pt.AxisOrder, spec.AxisOrder),
        (pt.SinCosOrder, spec.SinCosOrder),
        (pt.AxisLayout, spec.AxisLayout),
        (pt.T5Arithmetic, t5.Arithmetic),
    ],
)
def test_module_aliases_agree_with_pe_core_typing(alias: Any, local: Any) -> None:
    assert get_args(local) == get_args(alias)


def test_open_aliases_widen_the_literals() -> None:
    """``backend=`` also takes the aliases canonical_backend accepts, ``dtype=``
    framework dtype objects and ``spec=`` any string (checked when the call runs)."""
    assert get_args(pt.BackendLike) == (pt.BackendName, str)
    assert pe_core_backends.canonical_backend("TF") in get_args(pt.BackendName)
    assert get_args(pt.DTypeLike) == (pt.FloatDTypeName, Any)
    assert get_args(pt.PresetLike) == (pt.PresetName, str)


def test_all_lists_every_alias_once() -> None:
    assert [name for name in pt.__all__ if not hasattr(pt, name)] == []
    assert len(set(pt.__all__)) == len(pt.__all__)
    imported = {
        *("Any", "Literal", "Protocol", "TypeAlias", "TypeVar", "TYPE_CHECKING"),
        *("Mapping", "Sequence"),
    }
    public = {name for name in vars(pt) if name[0].isupper()} - imported
    assert public == set(pt.__all__)


def test_importing_pe_core_typing_loads_no_framework() -> None:
    frameworks = ("torch", "jax", "tensorflow", "keras", "flax")
    probe = (
        "import sys, pe_core.typing\n"
        f"print(','.join(m for m in {frameworks!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_backend_literals_cover_every_alias() -> None:
    literals = (pt.NumpyBackend, pt.JaxBackend, pt.TorchBackend, pt.TensorFlowBackend)
    names = [name for alias in literals for name in get_args(alias)]
    assert sorted(names) == sorted(REGISTRY.by_alias)
    assert {pe_core_backends.canonical_backend(get_args(a)[0]) for a in literals} == set(
        get_args(pt.BackendName)
    )


#: The functions whose *call shape* changes the result type (docs/testing.md lists them):
#: ``encode`` and the factories of sizes give NumPy for host data and the named backend's
#: array for ``backend="torch"``, ...; ``apply_rope`` gives a tuple for a tuple. Every other
#: function is typed by one signature with ``ArrayT`` or ``BackendArrayT``.
OVERLOADED: tuple[Callable[..., Any], ...] = (
    pe_core.encode,
    pe_core.apply_rope,
    pe_core.alibi_bias,
    pe_core.t5_bucket_matrix,
    pe_core.grid,
    pe_core.grid_encoding,
    pe_core.relative_position_index,
    pe_core.normalized_positions,
    pe_core.transformer_xl_embedding,
)

PACKAGE = Path(pe_core.__file__).parent


def _functions() -> Iterator[tuple[str, ast.FunctionDef]]:
    """``(module path, function)`` for every module-level function of the package."""
    for path in sorted(
        [*PACKAGE.rglob("*.py"), *Path(pe_core_backends.__file__).parent.rglob("*.py")]
    ):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                yield path.name, node


def _is_overload(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in node.decorator_list)


def test_overloads_only_where_the_call_shape_changes_the_result() -> None:
    """One typing shape: the overload sets are exactly :data:`OVERLOADED`'s, and few."""
    stubs = [node.name for _, node in _functions() if _is_overload(node)]
    assert sorted(set(stubs)) == sorted(f.__name__ for f in OVERLOADED)
    assert len(stubs) <= 45


def test_public_array_functions_are_typed_by_their_input() -> None:
    """No public function returns the untyped ``Array`` alias: an array result is typed
    by ``ArrayT``, ``BackendArrayT`` or a framework type (a planted one is found). An
    overload set's implementation is not what a checker reads; a function of sizes alone
    that is not an overload set says ``Any`` (the backend chosen at run time decides)."""
    overloaded = {f.__name__ for f in OVERLOADED}

    def untyped(source: str) -> list[str]:
        return [
            node.name
            for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef)
            and not node.name.startswith("_")
            and node.name not in overloaded
            and node.returns is not None
            and ast.unparse(node.returns) == "Array"
        ]

    assert untyped("def f(x) -> Array: ...\ndef g(x: ArrayT) -> ArrayT: ...") == ["f"]
    found = {
        path.name: untyped(path.read_text(encoding="utf-8"))
        for path in PACKAGE.glob("*.py")
        if not path.name.startswith("_")
    }
    assert {name: functions for name, functions in found.items() if functions} == {}


@pytest.mark.skipif(not hasattr(typing, "get_overloads"), reason="Python >= 3.11")
@pytest.mark.parametrize("function", OVERLOADED, ids=lambda f: f.__name__)
def test_the_overloads_have_the_implementation_parameters(function: Callable[..., Any]) -> None:
    """Every overload names the implementation's parameters, of the same kinds and with
    the same defaults (an overload may make one required: ``backend`` with a
    backend's name), so a parameter added to the function is added to its overloads."""
    overloads = typing.get_overloads(function)
    assert len(overloads) >= 2, function.__name__  # apply_rope: an array, a tuple
    implementation = inspect.signature(function).parameters
    for overload in overloads:
        parameters = inspect.signature(overload).parameters
        assert list(parameters) == list(implementation), overload
        for name, parameter in parameters.items():
            assert parameter.kind == implementation[name].kind, (overload, name)
            if parameter.default is not inspect.Parameter.empty:
                assert parameter.default == implementation[name].default, (overload, name)
