"""What an eager call must not cost: no compiler import (torch), bounded compiles (JAX)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import HANG_TIMEOUT

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
        timeout=HANG_TIMEOUT,
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


def test_eager_jax_device_path_compiles_only_the_bounded_kernels(caplog) -> None:
    """On the device path every eager JAX operation pe_core runs at a new length is one
    of its bounded kernels: no eager slice, pad or op-by-op angle kernel compiled per
    shape (those executables would never be freed)."""
    jax = pytest.importorskip("jax")
    import logging

    import numpy as np

    import pe_core
    from pe_core.rope import apply_rope
    from pe_core_backends import force_device_path

    def calls(n: int) -> None:
        positions = jax.device_put(np.arange(n) * 3)
        x = jax.device_put(np.ones((2, n, 16), np.float32))
        pe_core.encode(positions, 16)
        apply_rope(x, positions)

    with force_device_path():
        calls(37)
        previous = jax.config.jax_log_compiles
        jax.config.update("jax_log_compiles", True)
        try:
            with caplog.at_level(logging.WARNING, logger="jax"):
                calls(38)
        finally:
            jax.config.update("jax_log_compiles", previous)
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    names = sorted(message.split(" ", 2)[1] for message in compiled)
    # the encode kernel, RoPE's cos/sin kernel and the rotation
    assert names == ["jit(fresh)"] * 3, names


def test_device_tables_keep_reusable_keys_within_their_bounds() -> None:
    import numpy as np

    from pe_core import device_tables
    from pe_core_backends import get_namespace

    xp = get_namespace("numpy")
    device_tables.clear()
    built = []

    def build() -> tuple[np.ndarray, np.ndarray]:
        built.append(1)
        return np.zeros(4), np.ones(4)

    first = device_tables.cached(xp, ("k",), None, "float32", build, private=True)
    again = device_tables.cached(xp, ("k",), None, "float32", build, private=True)
    assert len(built) == 1 and again[0] is first[0] and again[1].tolist() == [1.0] * 4
    device_tables.cached(xp, None, None, "float32", build)  # one-off: placed, not kept
    assert len(built) == 2 and device_tables.stats()["entries"] == 1
    for i in range(device_tables.MAX_ENTRIES + 5):
        device_tables.cached(xp, ("n", i), None, "float32", build)
    assert device_tables.stats()["entries"] == device_tables.MAX_ENTRIES
    device_tables.clear()
