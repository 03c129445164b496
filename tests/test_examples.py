"""The examples train: a few steps of each, and the loss falls."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import HANG_TIMEOUT

pytestmark = pytest.mark.slow  # runs each example script in its own process

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STEPS = 25


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"pe_core_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_loss_falls(result: dict) -> None:
    losses = result["losses"]
    assert len(losses) == STEPS
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.9 * first, f"loss did not fall: {first:.3f} -> {last:.3f}"
    assert 0.0 <= result["accuracy"] <= 1.0


def test_torch_example() -> None:
    pytest.importorskip("torch")
    assert_loss_falls(load("torch_reverse").main(steps=STEPS))


def test_flax_example() -> None:
    pytest.importorskip("flax")
    pytest.importorskip("optax")
    assert_loss_falls(load("flax_reverse").main(steps=STEPS))


def test_keras_example() -> None:
    """In a subprocess: Keras fixes its backend once per process (JAX here)."""
    pytest.importorskip("keras")
    pytest.importorskip("jax")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import keras_reverse; "
        f"print(json.dumps(keras_reverse.main(steps={STEPS})))"
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert_loss_falls(json.loads(result.stdout.strip().splitlines()[-1]))
