"""What an eager call must not cost: no compiler import (torch), bounded compiles (JAX)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_TORCH_FIRST_CALL = """
import sys
import pe_core, torch
from pe_core.rope import apply_rope
pe_core.encode(torch.arange(5), 8)
pe_core.encode(torch.arange(5000) * 3, 64)
apply_rope(torch.ones(2, 4, 8), torch.arange(4))
loaded = sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor")))
print("LOADED", loaded)
"""


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_first_eager_torch_calls_import_no_compiler_module() -> None:
    pytest.importorskip("torch")
    out = _run(_TORCH_FIRST_CALL)
    assert "LOADED []" in out, out


def test_the_probe_sees_a_compiler_import() -> None:
    """Meta-test: the probe above does report dynamo when something loads it."""
    pytest.importorskip("torch")
    out = _run(
        _TORCH_FIRST_CALL.replace("import pe_core, torch", "import pe_core, torch, torch._dynamo")
    )
    assert "torch._dynamo" in out.split("LOADED", 1)[1]


def test_constant_marker_is_the_one_the_public_api_sets() -> None:
    """The torch adapter sets dynamo's constant marker itself (to avoid the import); it
    must stay the attribute ``torch.compiler.assume_constant_result`` sets."""
    torch = pytest.importorskip("torch")

    def probe() -> int:
        return 1

    before = set(vars(probe))
    torch.compiler.assume_constant_result(probe)
    assert set(vars(probe)) - before == {"_dynamo_marked_constant"}
    from pe_core_backends import _torch

    assert getattr(_torch._host_constant, "_dynamo_marked_constant", False) is True


def test_eager_jax_keeps_a_bounded_number_of_executables() -> None:
    jax = pytest.importorskip("jax")
    import numpy as np

    from pe_core.rope import apply_rope
    from pe_core_backends import _jax

    rotator = _jax._rotator("half", 8, "float32")
    for n in range(1, 3 * _jax.MAX_EXECUTABLES):
        x = jax.device_put(np.ones((n, 8), np.float32))
        apply_rope(x, jax.device_put(np.arange(n)))
    assert len(rotator._executables) == _jax.MAX_EXECUTABLES
