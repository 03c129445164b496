"""The backend registry: every row matches its adapter, detection and errors read the rows,
and a new row (a stand-in backend written here) reaches every lookup without other edits."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import conftest
import numpy as np
import pytest
from conftest import HANG_TIMEOUT

import pe_core.typing as pt
import pe_core_backends
from pe_core._cli.check_run import compilers as check_compilers
from pe_core_backends import (
    BackendInfo,
    Namespace,
    _registry,
    backend_info,
    backend_of,
    canonical_backend,
    get_namespace,
    installed_backends,
    is_installed,
)
from pe_core_backends._registry import REGISTRY, ROWS, Registry

ROOT = Path(__file__).resolve().parent.parent


def _row_id(row: BackendInfo) -> str:
    return row.name


def _installed_row(row: BackendInfo) -> BackendInfo:
    if importlib.util.find_spec(row.framework) is None:
        pytest.skip(f"{row.framework} is not installed")
    return row


# -- the rows and their adapters -------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_every_row_matches_its_adapter(row: BackendInfo) -> None:
    _installed_row(row)
    module = row.adapter()
    assert module.__name__ == row.module
    assert isinstance(module.NAMESPACE, Namespace)
    assert module.NAMESPACE.name == row.name
    assert get_namespace(row.name) is module.NAMESPACE
    for alias in row.aliases:
        assert get_namespace(alias.upper()) is module.NAMESPACE


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_every_rows_array_types_name_classes_of_its_framework(row: BackendInfo) -> None:
    _installed_row(row)
    get_namespace(row.name)  # imports the framework
    for qualified in row.array_types:
        module, _, name = qualified.rpartition(".")
        klass = getattr(sys.modules[module], name)
        assert isinstance(klass, type), qualified
        assert qualified.partition(".")[0] in row.array_modules


def test_rows_are_the_registry_and_backends_lists_them() -> None:
    assert REGISTRY.rows == ROWS
    assert pe_core_backends.BACKENDS == REGISTRY.names == tuple(sorted(r.name for r in ROWS))
    assert "numpy" in REGISTRY.names  # the default backend


def test_the_backend_fixture_and_the_typing_literal_need_no_edit_for_a_new_row() -> None:
    """The suite's ``backend`` fixture runs over the rows; ``BackendName`` lists the
    built-in backends, in the registry's order, and ``BackendLike`` takes any name."""
    if not os.environ.get("PE_CORE_TEST_BACKENDS", "").strip():
        assert conftest.SELECTED_BACKENDS == REGISTRY.names
    names = iter(REGISTRY.names)
    assert all(name in names for name in get_args(pt.BackendName))
    assert str in get_args(pt.BackendLike)


def test_every_extra_is_declared_in_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    missing = [row.extra for row in ROWS if row.extra not in extras]
    assert not missing, f"rows name extras pyproject.toml lacks: {missing}"


_PROBE = """
import sys
import pe_core_backends
from pe_core_backends._registry import ROWS
frameworks = sorted({row.framework for row in ROWS if row.name != "numpy"} | {"keras", "flax"})
adapters = [row.module for row in ROWS]
print("ADAPTERS", [m for m in adapters if m in sys.modules])
pe_core_backends.get_namespace("np")
print("AFTER", [m for m in adapters if m in sys.modules])
import pe_core
print("FRAMEWORKS", [m for m in frameworks if m in sys.modules])
print("WITH_PE_CORE", [m for m in adapters if m in sys.modules])
"""


def test_import_pe_core_imports_no_framework_and_no_adapter() -> None:
    """In a fresh process: the rows are built but nothing they name is imported until a
    backend is asked for (the probe sees an adapter once it is); ``import pe_core`` adds
    the NumPy adapter only (NumPy is required: its host paths use it on every call)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE)],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
    assert lines["ADAPTERS"] == "[]"
    assert lines["AFTER"] == "['pe_core_backends._numpy']"
    assert lines["FRAMEWORKS"] == "[]"
    assert lines["WITH_PE_CORE"] == "['pe_core_backends._numpy']"


# -- detection ------------------------------------------------------------------------


def test_detection_of_each_installed_backends_array(backend: str) -> None:
    xp = get_namespace(backend)
    for values in ([1.5, 2.5], [[1, 2], [3, 4]]):
        array = xp.asarray(np.asarray(values))
        assert backend_of(array) == backend
        assert [row.name for row in REGISTRY.rows if row.is_array(array)] == [backend]


def test_detection_of_other_array_classes_of_the_frameworks() -> None:
    assert backend_of(np.float32(1.0)) == "numpy"  # a NumPy scalar
    assert backend_of(np.ma.masked_array([1.0])) == "numpy"  # a subclass, numpy.ma
    if importlib.util.find_spec("torch") is not None:
        import torch

        assert backend_of(torch.nn.Parameter(torch.ones(2))) == "torch"
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow as tf

        assert backend_of(tf.Variable([1.0])) == "tensorflow"
    if importlib.util.find_spec("jax") is not None:
        import jax

        assert backend_of(jax.numpy.ones(2)) == "jax"


@pytest.mark.parametrize("value", [[1, 2], (1.0,), 3, 2.5, None, "numpy", object()])
def test_python_values_belong_to_no_backend(value: Any) -> None:
    assert backend_of(value) is None


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lookup",
    [canonical_backend, backend_info, get_namespace, is_installed],
    ids=lambda f: f.__name__,
)
def test_unknown_names_raise_a_value_error_naming_the_allowed_set(lookup: Any) -> None:
    with pytest.raises(ValueError, match="Unknown backend 'mxnet'") as info:
        lookup("mxnet")
    assert f"Expected one of: {', '.join(REGISTRY.names)}." in str(info.value)


def test_a_backend_name_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="Received: 3"):
        backend_info(3)  # type: ignore[arg-type]


def test_check_compilers_follow_the_registry_and_refuse_unknown_names() -> None:
    def fn(x: Any) -> Any:
        return x

    assert check_compilers("numpy", fn) == []
    for name in ("jax", "tensorflow"):  # torch.compile is built in the slow test below
        if is_installed(name):
            labels = [label for label, _ in check_compilers(name, fn)]
            assert tuple(labels) == backend_info(name).compilers
    with pytest.raises(ValueError, match=r"Unknown backend 'mxnet'. Expected one of: "):
        check_compilers("mxnet", fn)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"name": "Torch"}, ValueError, "lowercase identifier"),
        ({"name": ""}, ValueError, "must not be empty"),
        ({"name": 3}, TypeError, "BackendInfo.name must be a string"),
        ({"module": "x; import os"}, ValueError, "module path"),
        ({"module": "pe_core_backends.class"}, ValueError, "module path"),
        ({"framework": "torch.nn"}, ValueError, "top-level module name"),
        ({"extra": None}, TypeError, "BackendInfo.extra"),
        ({"array_types": "torch.Tensor"}, TypeError, "tuple of non-empty strings"),
        ({"array_types": ("Tensor",)}, ValueError, "qualified names"),
        ({"aliases": ("PT",)}, ValueError, "lowercase"),
        ({"compilers": ["torch.compile"]}, TypeError, "BackendInfo.compilers"),
    ],
)
def test_a_bad_row_names_its_field(changes: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        dataclasses.replace(REGISTRY.by_name["torch"], **changes)


def test_a_name_used_twice_is_refused() -> None:
    twin = dataclasses.replace(REGISTRY.by_name["torch"], name="torch2")  # alias 'pytorch' again
    with pytest.raises(ValueError, match="'pytorch' is used by both 'torch' and 'torch2'"):
        Registry((*ROWS, twin))
    with pytest.raises(TypeError, match="BackendInfo"):
        Registry((*ROWS, "mlx"))  # type: ignore[arg-type]


# -- a backend added by one row ---------------------------------------------------------

_FRAMEWORK = "pe_registry_test_framework"
_ADAPTER = "pe_registry_test_adapter"
_BROKEN_ADAPTER = "pe_registry_test_broken_adapter"
_MISSING_FRAMEWORK = "pe_registry_test_missing_framework"


@pytest.fixture
def extra_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackendInfo]:
    """A stand-in framework and its adapter, written to ``tmp_path``, and a registry with
    their row (and one whose framework is missing) in place of the real one."""
    (tmp_path / f"{_FRAMEWORK}.py").write_text("class Array:\n    pass\n")
    (tmp_path / f"{_ADAPTER}.py").write_text(
        textwrap.dedent(
            """
            from pe_core_backends._numpy import NumpyNamespace

            class StandInNamespace(NumpyNamespace):
                name = "standin"

            NAMESPACE = StandInNamespace()
            """
        )
    )
    (tmp_path / f"{_BROKEN_ADAPTER}.py").write_text(f"import {_MISSING_FRAMEWORK}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    row = BackendInfo(
        name="standin",
        title="Stand-in",
        module=_ADAPTER,
        framework=_FRAMEWORK,
        extra="standin",
        array_types=(f"{_FRAMEWORK}.Array",),
        aliases=("si",),
    )
    missing = BackendInfo(
        name="absent",
        title="Absent",
        module=_BROKEN_ADAPTER,
        framework=_MISSING_FRAMEWORK,
        extra="absent-extra",
        array_types=(f"{_MISSING_FRAMEWORK}.Array",),
    )
    monkeypatch.setattr(_registry, "REGISTRY", Registry((*ROWS, row, missing)))
    yield row
    for name in (_FRAMEWORK, _ADAPTER, _BROKEN_ADAPTER):
        sys.modules.pop(name, None)


def test_an_extra_row_reaches_every_lookup(extra_backend: BackendInfo) -> None:
    assert canonical_backend("SI") == "standin"
    assert backend_info("si") is extra_backend
    assert is_installed("standin") and _FRAMEWORK not in sys.modules  # found, not imported
    assert "standin" in installed_backends() and "absent" not in installed_backends()

    assert _ADAPTER not in sys.modules
    xp = get_namespace("standin")  # imports the adapter named by the row
    assert _ADAPTER in sys.modules and xp is sys.modules[_ADAPTER].NAMESPACE
    assert xp.name == "standin"

    framework = importlib.import_module(_FRAMEWORK)
    array = framework.Array()
    assert backend_of(array) == "standin"
    assert backend_of(np.zeros(2)) == "numpy"  # the real rows still answer

    with pytest.raises(ValueError, match=r"Expected one of: .*standin, tensorflow, torch\."):
        canonical_backend("mxnet")


def test_an_extra_row_whose_framework_is_missing_names_its_extra(
    extra_backend: BackendInfo,
) -> None:
    with pytest.raises(ImportError, match=r"needs Absent .*pip install 'pe-core\[absent-extra\]'"):
        get_namespace("absent")


@pytest.mark.slow
def test_a_first_get_namespace_inside_torch_compile_traces(extra_backend: BackendInfo) -> None:
    """torch.compile(fullgraph=True) runs the row's import statement while it traces:
    the adapter is imported for the first time inside the compiled function."""
    torch = pytest.importorskip("torch")

    def fn(x: Any) -> Any:
        return x * len(get_namespace("standin").name)

    assert _ADAPTER not in sys.modules
    compiled = torch.compile(fn, fullgraph=True, backend="eager")
    assert compiled(torch.ones(2)).tolist() == [7.0, 7.0]
    assert _ADAPTER in sys.modules

    labels = [label for label, _ in check_compilers("torch", fn)]
    assert tuple(labels) == backend_info("torch").compilers


# -- capabilities that keep framework code in the adapters ------------------------------


def _host(xp: Namespace, x: Any) -> np.ndarray:
    return np.asarray(xp.to_numpy(x))


def _toeplitz(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    return values[..., j - i + rows - 1]


def _check_gathers_and_transposes(xp: Namespace) -> None:
    wide = "int64" if xp.supports("int64") else "int32"
    r = xp.arange(5, xp.dtype(wide))
    assert xp.dtype_of(r) == wide and _host(xp, r).tolist() == [0, 1, 2, 3, 4]
    table = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    index = np.array([[0, 3], [2, 2]], dtype=wide)
    t, i = xp.asarray(table), xp.asarray(index)
    assert np.array_equal(_host(xp, xp.take(t, i, axis=0)), table[index])
    assert np.array_equal(_host(xp, xp.take(t, i % 3, axis=-1)), table[..., index % 3])
    cube = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    assert np.array_equal(
        _host(xp, xp.take(xp.asarray(cube), i % 3, axis=1)), np.take(cube, index % 3, axis=1)
    )
    assert np.array_equal(_host(xp, xp.matrix_transpose(xp.asarray(cube))), cube.swapaxes(1, 2))
    values = np.arange(12.0, dtype=np.float32).reshape(2, 6)  # rows + cols - 1 = 6
    expanded = _host(xp, xp.expand_diagonals(xp.asarray(values), 3, 4))
    assert expanded.shape == (2, 3, 4) and np.array_equal(expanded, _toeplitz(values, 3, 4))


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_integer_ranges_gathers_and_transposes(row: BackendInfo) -> None:
    _check_gathers_and_transposes(get_namespace(_installed_row(row).name))


def test_the_generic_defaults_of_ranges_gathers_and_transposes() -> None:
    """A new adapter that does not override them still gets working versions."""
    from pe_core_backends._numpy import NumpyNamespace

    class Generic(NumpyNamespace):
        name = "generic"
        arange = Namespace.arange
        take = Namespace.take
        matrix_transpose = Namespace.matrix_transpose
        expand_diagonals = Namespace.expand_diagonals

    _check_gathers_and_transposes(Generic())


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_compile_eager_kernels_and_jit(row: BackendInfo) -> None:
    xp = get_namespace(_installed_row(row).name)
    assert xp.compile_eager_kernels is (row.name == "jax")
    assert xp.numpy_arrays is (row.name == "numpy")
    program = xp.jit(lambda a: a * 2 + 1)
    if not xp.compile_eager_kernels:
        return
    x = xp.asarray(np.arange(3, dtype=np.int32))
    assert _host(xp, program(x)).tolist() == [1, 3, 5]


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_under_compiler_builds_the_registry_compilers(row: BackendInfo) -> None:
    xp = get_namespace(_installed_row(row).name)
    if row.name == "torch":  # torch.compile imports the compiler: see the slow test
        return
    x = xp.asarray(np.arange(3, dtype=np.float32))
    for label in row.compilers:
        compiled = xp.under_compiler(label, lambda a: a * 2.0)
        assert _host(xp, compiled(x)).tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(ValueError, match=rf"backend {row.name!r} cannot build compiler 'nope'"):
        xp.under_compiler("nope", lambda a: a)


@pytest.mark.slow
def test_under_compiler_builds_torch_compile() -> None:
    torch = pytest.importorskip("torch")
    xp = get_namespace("torch")
    (label,) = backend_info("torch").compilers
    compiled = xp.under_compiler(label, lambda a: a * 2.0)
    assert compiled(torch.arange(3.0)).tolist() == [0.0, 2.0, 4.0]
