"""Extending pe_core without editing it: a toy preset, a toy RoPE scaling type, a toy
backend, a toy integration and a toy relative index kind, each added the way
docs/architecture.md describes (a preset, a scaling type or an integration is one module; a
backend is an adapter module and one registry row; a relative index kind is a registered
host table and a face).

The toy modules are written to a scratch folder. For the preset and the scaling type the
folder is put on the package's ``__path__`` (``pe_core._presets``, ``pe_core._scaling``)
and the private discovery hook (``pe_core.presets._discover``,
``pe_core.rope_scaling._discover``) is run again, which is what importing pe_core does
with a module added to the package; for the backend the registry is swapped for one with
the extra row. Everything is restored afterwards. Each toy's numbers are checked against
a float64 restatement of its formula.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from conftest import assert_close, positions_on

import pe_core
from pe_core import _presets, _scaling, integrations, presets, rope_scaling, rope_spec
from pe_core._index import place as index_place
from pe_core.rope_scaling import rope_frequencies
from pe_core_backends import (
    BackendInfo,
    _registry,
    backend_info,
    backend_of,
    canonical_backend,
    get_namespace,
)
from pe_core_backends._registry import ROWS, Registry

ATOL32 = 4e-6  # float32 outputs against the float64 restatements


@contextlib.contextmanager
def _added_modules(
    package: ModuleType, folder: Path, discover: Callable[[], None]
) -> Iterator[None]:
    """``package`` also searches ``folder`` and ``discover`` has run; afterwards the
    folder's modules are forgotten and ``discover`` runs again on the package alone."""
    added = [f"{package.__name__}.{path.stem}" for path in folder.glob("*.py")]
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(package, "__path__", [*package.__path__, str(folder)])
            try:
                discover()
                yield
            finally:
                for name in added:
                    sys.modules.pop(name, None)
                    with contextlib.suppress(AttributeError):
                        delattr(package, name.rpartition(".")[2])
    finally:
        discover()


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return folder


# --------------------------------------------------------------------------- a preset

TOY_PRESET = '''
    """The ``toy`` preset: base 100, sines then cosines."""

    from pe_core._presets import Preset
    from pe_core.spec import Spec

    PRESET = Preset(
        spec=Spec(base=100.0, layout="split", name="toy"),
        source="the toy codebase: base 100, the sines then the cosines",
        order=1000,
    )
'''


def _toy_preset_reference(positions: np.ndarray, d: int) -> np.ndarray:
    """float64: ``[sin(p w_0), ..., sin(p w_{d/2-1}), cos(p w_0), ...]``, ``w_j = 100^(-2j/d)``."""
    omegas = 100.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = positions.astype(np.float64)[:, None] * omegas
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)


@pytest.fixture
def toy_preset(tmp_path: Path) -> Iterator[None]:
    builtin = list(pe_core.PRESETS.items())
    folder = _write(tmp_path / "presets", "toy", TOY_PRESET)
    with _added_modules(_presets, folder, presets._discover):
        yield
    assert list(pe_core.PRESETS.items()) == builtin
    with pytest.raises(ValueError, match="Unknown preset 'toy'"):
        pe_core.encode([0], 8, spec="toy")


def test_a_preset_module_is_a_preset(toy_preset: None) -> None:
    assert pe_core.PRESETS is presets.PRESETS  # the same table, refilled in place
    names = list(pe_core.PRESETS)
    assert names[-1] == "toy"  # order=1000: after the built-in presets, whose order stays
    assert names[:-1] == [name for name in names if name != "toy"]
    assert pe_core.PRESETS["toy"] == pe_core.Spec(base=100.0, layout="split", name="toy")
    assert pe_core.PRESET_SOURCES["toy"].startswith("the toy codebase")
    last = presets.preset_table_markdown().splitlines()[-1]
    assert last.startswith("| `toy` | `100.0` |") and last.endswith("the cosines |")
    with pytest.raises(ValueError, match=r"Expected one of: .*tensor2tensor_3d, .*toy, vaswani"):
        presets.resolve_spec("bert")


def test_a_preset_module_encodes(toy_preset: None, backend: str) -> None:
    positions = np.array([0, 1, 2, 7, 100, 2047])
    expected = _toy_preset_reference(positions, 16)
    out = pe_core.encode(positions_on(backend, positions), 16, spec="toy")
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")
    exact = pe_core.encode(positions, 16, spec="toy", dtype="float64")
    assert_close(exact, expected, atol=1e-12, dtype="float64")


def test_a_preset_module_must_name_its_spec_after_itself(tmp_path: Path) -> None:
    folder = _write(tmp_path / "presets", "toy", TOY_PRESET.replace('name="toy"', 'name="other"'))
    builtin = list(pe_core.PRESETS)
    with pytest.raises(ValueError, match=r"Spec named 'other'. Expected the module's name, 'toy'"):
        with _added_modules(_presets, folder, presets._discover):
            pass  # pragma: no cover
    assert list(pe_core.PRESETS) == builtin  # a failed discovery changes nothing


# --------------------------------------------------------------------------- a scaling type

TOY_SCALING = '''
    """The ``toy`` rope_type: plain RoPE frequencies divided by ``divisor`` (default 2)."""

    from pe_core._scaling._common import _base_inv_freq, _factor
    from pe_core._scaling._types import RopeScalingType, ScalingInputs


    def _toy(a: ScalingInputs):
        divisor = a.params.get("divisor")
        divisor = 2.0 if divisor is None else _factor(divisor, "toy", "divisor")
        return _base_inv_freq(a.theta, a.rotary_dim) / divisor, 1.0


    SCALING_TYPE = RopeScalingType(_toy, optional=("divisor",))
'''


def _toy_inv_freq(theta: float, rotary_dim: int, divisor: float = 2.0) -> np.ndarray:
    return theta ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim) / divisor


def _rope_reference(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """float64 RoPE, half layout: feature ``j`` turns with ``j + r/2`` by ``p * inv_freq[j]``."""
    x = x.astype(np.float64)
    n = len(inv_freq)
    angles = positions.astype(np.float64)[:, None] * inv_freq
    a, b = x[..., :n], x[..., n : 2 * n]
    return np.concatenate(
        [a * np.cos(angles) - b * np.sin(angles), b * np.cos(angles) + a * np.sin(angles)],
        axis=-1,
    )


@pytest.fixture
def toy_scaling(tmp_path: Path) -> Iterator[None]:
    folder = _write(tmp_path / "scaling", "toy", TOY_SCALING)
    try:
        with _added_modules(_scaling, folder, rope_scaling._discover):
            yield
    finally:
        rope_spec._cached_rope_constants.cache_clear()
    assert tuple(rope_scaling.SCALING_TYPES) == rope_scaling.ROPE_TYPES
    with pytest.raises(ValueError, match="Unknown rope_type 'toy'") as info:
        rope_frequencies({"head_dim": 8, "rope_parameters": {"rope_type": "toy"}})
    assert str(info.value).endswith(f"Expected one of: {', '.join(rope_scaling.ROPE_TYPES)}.")


def test_a_scaling_type_module_is_a_rope_type(toy_scaling: None) -> None:
    types = list(rope_scaling.SCALING_TYPES)
    assert types == sorted(types) and "toy" in types
    assert rope_scaling.allowed_keys("toy") - rope_scaling.allowed_keys("default") == {"divisor"}
    assert not rope_scaling.needs_seq_len({"rope_type": "toy"})
    inv_freq, attention = rope_frequencies({"head_dim": 8, "rope_parameters": {"rope_type": "toy"}})
    np.testing.assert_allclose(inv_freq, _toy_inv_freq(10000.0, 8), rtol=1e-15, atol=0)
    assert attention == 1.0
    config = {"head_dim": 64, "rope_theta": 5e5, "rope_scaling": {"type": "toy", "divisor": 8}}
    inv_freq, _ = rope_frequencies(config)
    np.testing.assert_allclose(inv_freq, _toy_inv_freq(5e5, 64, 8.0), rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match=r"Unknown key 'factor' .* Expected keys: .*divisor"):
        rope_frequencies({"head_dim": 8, "rope_parameters": {"rope_type": "toy", "factor": 2}})
    with pytest.raises(ValueError, match="divisor for rope_type 'toy' must be > 0"):
        rope_frequencies({"head_dim": 8, "rope_parameters": {"rope_type": "toy", "divisor": 0}})


def test_a_scaling_type_module_rotates(toy_scaling: None, backend: str) -> None:
    x = np.random.default_rng(5).standard_normal((3, 6, 16)).astype(np.float32)
    positions = np.arange(6) + 40
    expected = _rope_reference(x, positions, _toy_inv_freq(10000.0, 16))
    xp = get_namespace(backend)
    out = pe_core.apply_rope(
        xp.asarray(x), positions_on(backend, positions), scaling={"rope_type": "toy"}
    )
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")
    spec = pe_core.RopeSpec(scaling={"rope_type": "toy", "divisor": 4.0})
    out = pe_core.apply_rope(x, positions, spec=spec)
    assert_close(out, _rope_reference(x, positions, _toy_inv_freq(10000.0, 16, 4.0)), atol=ATOL32)


# --------------------------------------------------------------------------- a backend

_FRAMEWORK = "pe_extending_toy_framework"
_ADAPTER = "pe_extending_toy_adapter"

TOY_FRAMEWORK = '''
    """A toy array library: NumPy arrays of a class of its own."""

    import numpy as np


    class ToyArray(np.ndarray):
        """The toy framework's array."""
'''

TOY_ADAPTER = f'''
    """The toy backend's adapter: NumPy's, with the toy's array class."""

    import numpy as np

    from {_FRAMEWORK} import ToyArray
    from pe_core_backends._numpy import NumpyNamespace


    class ToyNamespace(NumpyNamespace):
        name = "toy"

        def asarray(self, x, dtype=None, like=None):
            return np.asarray(x, dtype=dtype).view(ToyArray)

        def to_numpy(self, x):
            return np.asarray(x).view(np.ndarray)


    NAMESPACE = ToyNamespace()
'''

TOY_ROW = BackendInfo(
    name="toy",
    title="Toy",
    module=_ADAPTER,
    framework=_FRAMEWORK,
    extra="toy",
    array_types=(f"{_FRAMEWORK}.ToyArray",),
    aliases=("toys",),
)


@pytest.fixture
def toy_backend(tmp_path: Path) -> Iterator[ModuleType]:
    """The toy framework and adapter on ``sys.path`` and a registry with the toy's row."""
    _write(tmp_path, _FRAMEWORK, TOY_FRAMEWORK)
    _write(tmp_path, _ADAPTER, TOY_ADAPTER)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        patch.setattr(_registry, "REGISTRY", Registry((*ROWS, TOY_ROW)))
        try:
            yield importlib.import_module(_FRAMEWORK)
        finally:
            for name in (_FRAMEWORK, _ADAPTER):
                sys.modules.pop(name, None)
    with pytest.raises(ValueError, match="Unknown backend 'toy'"):
        canonical_backend("toy")


def _vaswani_reference(positions: np.ndarray, d: int) -> np.ndarray:
    """float64: ``pe[p, 2j] = sin(p w_j)``, ``pe[p, 2j + 1] = cos(p w_j)``, ``w_j = 1e4^(-2j/d)``."""
    omegas = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = positions.astype(np.float64)[:, None] * omegas
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(positions), d)


def test_one_row_and_an_adapter_make_a_backend(toy_backend: ModuleType) -> None:
    assert canonical_backend("TOYS") == "toy" and backend_info("toy") is TOY_ROW
    xp = get_namespace("toy")
    positions = xp.asarray(np.array([0, 1, 5, 99, 4096]))
    assert type(positions) is toy_backend.ToyArray and backend_of(positions) == "toy"

    out = pe_core.encode(positions, 12)
    assert type(out) is toy_backend.ToyArray
    expected = _vaswani_reference(np.array([0, 1, 5, 99, 4096]), 12)
    assert_close(out, expected, atol=ATOL32, backend="toy", dtype="float32")
    exact = pe_core.encode(positions, 12, dtype="float64")
    assert_close(exact, expected, atol=1e-12, backend="toy", dtype="float64")

    table = pe_core.encode(range(300), 8, backend="toy")  # Python positions, made there
    assert type(table) is toy_backend.ToyArray
    assert_close(table, _vaswani_reference(np.arange(300), 8), atol=ATOL32, backend="toy")


def test_the_toy_backend_is_not_numpy(toy_backend: ModuleType) -> None:
    """The toy checks can fail: a plain NumPy result is not the toy's."""
    with pytest.raises(AssertionError, match="expected a toy array"):
        assert_close(np.zeros(2), np.zeros(2), atol=0, backend="toy")
    assert backend_of(np.zeros(2)) == "numpy"


# --------------------------------------------------------------------------- an integration

_LIBRARY = "pe_core_toy_models"  # the toy library whose models the integration patches

TOY_LIBRARY = '''
    """A toy model library: its rotary module forms ``positions * inv_freq`` in float32."""

    import numpy as np


    class ToyRotary:
        def __init__(self, head_dim, base=10000.0):
            self.inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)

        def cos_sin(self, positions):
            angles = np.asarray(positions, np.float32)[:, None] * self.inv_freq
            return np.cos(angles), np.sin(angles)


    class ToyModel:
        def __init__(self, head_dim, layers=2):
            self.rotaries = [ToyRotary(head_dim) for _ in range(layers)]
'''

TOY_INTEGRATION = f'''
    """``pe_core.integrations.toy``: a toy library's rotary modules made exact."""

    import {_LIBRARY}

    import pe_core


    def _exact_cos_sin(module, positions):
        d = 2 * module.inv_freq.shape[-1]
        table = pe_core.encode(positions, d, spec=pe_core.Spec(layout="split"))
        return table[:, d // 2 :], table[:, : d // 2]


    def patch_rotary_embeddings(model):
        if not isinstance(model, {_LIBRARY}.ToyModel):
            raise ValueError(f"{{type(model).__name__}} has no rotary module")
        for module in model.rotaries:
            module.cos_sin = lambda positions, module=module: _exact_cos_sin(module, positions)
        return model
'''


@pytest.fixture
def toy_integration(tmp_path: Path) -> Iterator[ModuleType]:
    """The toy library on ``sys.path`` and ``pe_core.integrations.toy``, one module added to
    the integrations package, as a new integration is (docs/architecture.md)."""
    _write(tmp_path / "library", _LIBRARY, TOY_LIBRARY)
    folder = _write(tmp_path / "integrations", "toy", TOY_INTEGRATION)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path / "library"))
        patch.setattr(integrations, "__path__", [*integrations.__path__, str(folder)])
        try:
            yield importlib.import_module("pe_core.integrations.toy")
        finally:
            for name in ("pe_core.integrations.toy", _LIBRARY):
                sys.modules.pop(name, None)
            with contextlib.suppress(AttributeError):
                delattr(integrations, "toy")


def test_one_module_makes_an_integration(toy_integration: ModuleType) -> None:
    library = sys.modules[_LIBRARY]
    model = library.ToyModel(64)
    positions = np.array([0, 1, 7, 4096, 100_000])
    angles = positions[:, None] * 10000.0 ** (-np.arange(0, 64, 2, dtype=np.float64) / 64)
    cos_before, _ = model.rotaries[0].cos_sin(positions)
    assert np.max(np.abs(cos_before - np.cos(angles))) > 1e-3  # float32 angles at 1e5
    assert toy_integration.patch_rotary_embeddings(model) is model
    for module in model.rotaries:
        cos, sin = module.cos_sin(positions)
        assert_close(cos, np.cos(angles), atol=ATOL32, dtype="float32")
        assert_close(sin, np.sin(angles), atol=ATOL32, dtype="float32")
    with pytest.raises(ValueError, match="list has no rotary module"):
        toy_integration.patch_rotary_embeddings([])


def test_an_integration_module_is_a_framework_room() -> None:
    """The house rules take an integration module as a room by its place alone: the
    rooms test lists none, and the import contract ignores every ``integrations.*``."""
    rooms = importlib.import_module("test_framework_rooms")
    source = "import torch\n\ndef f(xp):\n    return xp.name == 'torch'\n"
    found = {"pe_core/integrations/toy.py": rooms.offences(source, "pe_core/integrations/toy.py")}
    assert len(found["pe_core/integrations/toy.py"]) == 2
    assert rooms.misplaced(found, {}) == []
    planted = {"pe_core/toy.py": rooms.offences(source, "pe_core/toy.py")}
    assert len(rooms.misplaced(planted, {})) == 2


# --------------------------------------------------------------------------- a relative index kind

TOY_INDEX = '''
    """A toy relative index kind: ``|i - j|`` clipped at ``limit``, for ``n`` tokens."""

    import numpy as np

    from pe_core._index import place
    from pe_core.validation import positive_int


    @place.host_table("toy_distance")
    def toy_distance_host(n, limit):
        tokens = np.arange(n)
        return np.minimum(np.abs(tokens[:, None] - tokens[None, :]), limit)


    def toy_distance_index(n, limit, *, backend=None, like=None):
        n, limit = positive_int(n, "n"), positive_int(limit, "limit")
        xp = place.int_namespace(backend, like)
        place.check_size(n * n, "toy_distance_index")
        return place.table(xp, "toy_distance", (n, limit), place.anchor(xp, like))
'''


@pytest.fixture
def toy_index(tmp_path: Path) -> Iterator[ModuleType]:
    """A relative index kind as docs/architecture.md adds one: a host table registered
    with ``pe_core._index.place.host_table`` and a face that validates and places it."""
    _write(tmp_path, "pe_core_toy_index", TOY_INDEX)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        try:
            yield importlib.import_module("pe_core_toy_index")
        finally:
            sys.modules.pop("pe_core_toy_index", None)
            index_place.TABLES.pop("toy_distance", None)


def test_a_host_table_and_a_face_make_a_relative_index_kind(
    toy_index: ModuleType, backend: str
) -> None:
    expected = np.minimum(np.abs(np.arange(5)[:, None] - np.arange(5)[None, :]), 3)
    out = toy_index.toy_distance_index(5, 3, backend=backend)
    assert backend_of(out) == backend
    assert get_namespace(backend).dtype_of(out) in ("int64", "int32")
    np.testing.assert_array_equal(get_namespace(backend).to_numpy(out), expected)
    with pytest.raises(ValueError, match=r"limit must be an integer >= 1\. Received: 0"):
        toy_index.toy_distance_index(5, 0, backend=backend)


def test_a_relative_index_kind_is_a_constant_under_jit(toy_index: ModuleType) -> None:
    jax = pytest.importorskip("jax")
    table = jax.jit(lambda x: toy_index.toy_distance_index(4, 2, like=x))(jax.numpy.zeros(1))
    expected = np.minimum(np.abs(np.arange(4)[:, None] - np.arange(4)[None, :]), 2)
    np.testing.assert_array_equal(np.asarray(table), expected)
