"""``import pe_core`` loads no framework; the check itself is shown able to fail."""

from __future__ import annotations

import subprocess
import sys

from conftest import HANG_TIMEOUT

FRAMEWORKS = ("torch", "jax", "tensorflow", "keras", "flax")


def frameworks_loaded_by(code: str) -> list[str]:
    probe = code + f"\nimport sys\nprint(','.join(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    return [name for name in last.split(",") if name]


def test_import_pe_core_loads_no_framework() -> None:
    assert frameworks_loaded_by("import pe_core, pe_core_backends; pe_core.encode([0, 1], 8)") == []


def test_import_prints_nothing() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import pe_core"],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.stdout == "" and result.stderr == ""


def test_the_check_can_fail() -> None:
    """Meta-test: the probe does see a framework when one is imported (an installed
    one; with NumPy alone, a stand-in module under a framework's name)."""
    import importlib.util

    installed = [name for name in FRAMEWORKS if importlib.util.find_spec(name) is not None]
    if installed:
        name = installed[0]
        code = f"import pe_core; import {name}"
    else:
        name = "torch"
        code = "import pe_core, sys, types; sys.modules['torch'] = types.ModuleType('torch')"
    assert frameworks_loaded_by(code) == [name]


def test_backend_inference_does_not_import() -> None:
    code = "import numpy as np, pe_core_backends; assert pe_core_backends.backend_of(np.zeros(1)) == 'numpy'"
    assert frameworks_loaded_by(code) == []
