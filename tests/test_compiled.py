"""encode inside compiled code: traced positions work and new values never retrace."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import pe_core

D = 16


def expected(positions: np.ndarray, spec: str = "vaswani") -> np.ndarray:
    return pe_core.encode(positions, D, spec=spec, dtype="float64")


@pytest.mark.parametrize("spec", ["vaswani", "fairseq"])
def test_jax_jit_traces_once(spec: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []

    @jax.jit
    def f(p):
        traces.append(1)
        return pe_core.encode(p, D, spec=spec)

    for offset in (0, 5, 123_456, 2**23):
        p = offset + jnp.arange(10, dtype=jnp.int32)
        assert_close(f(p), expected(offset + np.arange(10), spec), atol=1e-6, backend="jax")
    assert len(traces) == 1
    fractional = jax.jit(lambda p: pe_core.encode(p, D))(jnp.linspace(-3.0, 3.0, 7))
    assert_close(fractional, expected(np.linspace(-3.0, 3.0, 7).astype(np.float32)), atol=1e-6)


def test_torch_compile_fullgraph_no_recompile() -> None:
    torch = pytest.importorskip("torch")
    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    f = torch.compile(lambda p: pe_core.encode(p, D), backend=counting_backend, fullgraph=True)
    for offset in (0, 5, 123_456, 2**23):
        p = offset + torch.arange(10)
        assert_close(f(p), expected(offset + np.arange(10)), atol=1e-6, backend="torch")
    assert len(compiles) == 1
    out = f(torch.linspace(-3.0, 3.0, 10))
    assert_close(out, expected(np.linspace(-3.0, 3.0, 10).astype(np.float32)), atol=1e-6)


def test_torch_compile_inductor_matches_eager() -> None:
    torch = pytest.importorskip("torch")
    f = torch.compile(lambda p: pe_core.encode(p, D), fullgraph=True)
    p = torch.arange(2**24 - 50, 2**24)
    assert_close(f(p), pe_core.encode(np.arange(2**24 - 50, 2**24), D, dtype="float64"), atol=1e-6)


def test_tf_function_jit_compile_traces_once() -> None:
    tf = pytest.importorskip("tensorflow")
    traces = []

    @tf.function(jit_compile=True)
    def f(p):
        traces.append(1)
        return pe_core.encode(p, D)

    for offset in (0, 5, 123_456, 2**23):
        p = offset + tf.range(10)
        assert_close(f(p), expected(offset + np.arange(10)), atol=1e-6, backend="tensorflow")
    assert len(traces) == 1


def test_torch_follows_device_and_dtype() -> None:
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        p = torch.arange(4, device=device)
        out = pe_core.encode(p, D, dtype=torch.bfloat16)
        assert out.device == p.device and out.dtype == torch.bfloat16


@pytest.mark.gpu
def test_gpu_agrees_with_cpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    p = torch.arange(2**24 - 1000, 2**24, device="cuda")
    assert_close(
        pe_core.encode(p, 256),
        pe_core.encode(np.arange(2**24 - 1000, 2**24), 256, dtype="float64"),
        atol=1e-6,
    )
