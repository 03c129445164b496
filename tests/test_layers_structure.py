"""The framework layers' package: one framework-neutral configuration, thin framework files.

* The modules of ``pe_core/layers`` import one another one way: ``_checks`` (nothing of
  the layers), ``_config``, ``_config_nd``, ``_tables``, then the framework files.
* The neutral modules load no framework.
* The PyTorch and Flax layers built with the same arguments hold the same configuration
  (the Keras layers' ``get_config`` is checked per backend in test_layers_keras.py and
  test_layers_relative.py).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

LAYERS = Path(__file__).resolve().parent.parent / "pe_core" / "layers"
#: Bottom to top: a module may import only the modules before it.
ORDER = ("_checks", "_config", "_config_nd", "_config_index", "_tables", "__init__")
FRAMEWORK_FILES = ("torch", "flax", "keras")


def layer_imports(path: Path) -> set[str]:
    """The ``pe_core.layers`` modules ``path`` imports, anywhere in it (``TYPE_CHECKING``
    blocks and functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["pe_core", "layers"] and len(parts) > 2:
                found.add(parts[2])
    return found - {"__init__"}


def test_the_layer_modules_import_one_way() -> None:
    modules = {path.stem for path in LAYERS.glob("*.py")}
    assert modules == set(ORDER) | set(FRAMEWORK_FILES), "a new module: place it in ORDER"
    for rank, name in enumerate(ORDER):
        below = set(ORDER[:rank])
        assert layer_imports(LAYERS / f"{name}.py") <= below, name
    for name in FRAMEWORK_FILES:
        assert layer_imports(LAYERS / f"{name}.py") <= set(ORDER) - {"__init__"}, name


def test_layer_imports_reads_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from pe_core.layers._checks import check_dropout\n"
        "from pe_core.layers import _config\n"
        "if TYPE_CHECKING:\n    import pe_core.layers._tables\n"
        "def f():\n    from pe_core.layers._config_nd import patch_grid\n"
    )
    assert layer_imports(source) == {"_checks", "_config", "_config_nd", "_tables"}


def test_the_neutral_modules_load_no_framework() -> None:
    code = (
        "import sys\n"
        "import pe_core.layers, pe_core.layers._tables\n"
        "frameworks = ('torch', 'jax', 'flax', 'keras', 'tensorflow')\n"
        "print(sorted(name for name in frameworks if name in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.stdout.strip() == "[]"


CASES = [
    ("SinusoidalEncoding", (16,), {"spec": "fairseq", "max_len": 32}),
    ("RotaryEmbedding", (8,), {"rotary_dim": 4, "scaling": {"rope_type": "linear", "factor": 2.0}}),
    ("AlibiBias", (4,), {"alibi_bias_max": 16.0, "causal": False}),
    ("SinusoidalPatchEncoding", (8,), {"grid_shape": (2, 3), "spec": "mae_2d"}),
    ("RotaryEmbeddingND", (8, (2, 2)), {"frequencies": "per_axis", "grid_shape": (2, 3)}),
]


@pytest.mark.parametrize("name, args, kwargs", CASES, ids=[case[0] for case in CASES])
def test_torch_and_flax_layers_share_one_configuration(
    name: str, args: tuple, kwargs: dict
) -> None:
    torch_layers = pytest.importorskip("pe_core.layers.torch")
    flax_layers = pytest.importorskip("pe_core.layers.flax")
    built = [
        getattr(torch_layers, name)(*args, **kwargs),
        getattr(flax_layers, name)(*args, **kwargs),
        getattr(flax_layers, "Linen" + name)(*args, **kwargs),
    ]
    configs = [layer._layer_config() for layer in built]
    assert configs[0] == configs[1] == configs[2]
    for layer in built[:2]:  # torch's extra_repr, NNX's __repr__
        assert repr(layer) == f"{name}({built[0]._layer_repr()})"


def test_t5_layers_share_one_configuration() -> None:
    torch_layers = pytest.importorskip("pe_core.layers.torch")
    flax_layers = pytest.importorskip("pe_core.layers.flax")
    from flax import nnx

    kwargs = {"num_buckets": 8, "max_distance": 20, "bidirectional": False}
    built = [
        torch_layers.T5RelativeBias(3, **kwargs),
        flax_layers.T5RelativeBias(3, **kwargs, rngs=nnx.Rngs(0)),
        flax_layers.LinenT5RelativeBias(3, **kwargs),
    ]
    assert [layer._layer_config() for layer in built] == [{"n_heads": 3, **kwargs}] * 3
