"""The guard itself: ``forbid_host_reads`` catches every host read and nothing else.

One case per read, for torch and for JAX; ordinary device-side work must pass. The
``.cpu()``/``.to("cpu")`` reads need a tensor that is *not* on the CPU: the ``meta``
device serves on every machine (the guard raises before torch would).
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import HANG_TIMEOUT

from pe_core.host_reads import GUARDED_BACKENDS, HostReadError, forbid_host_reads
from pe_core_backends import get_namespace, is_installed
from pe_core_backends._registry import REGISTRY

# --------------------------------------------------------------------------- torch

TORCH_READS: dict[str, Callable[[Any], Any]] = {
    "item": lambda t: t["scalar"].item(),
    "tolist": lambda t: t["vector"].tolist(),
    "numpy": lambda t: t["vector"].numpy(),
    "np.asarray": lambda t: np.asarray(t["vector"]),
    "np.array": lambda t: np.array(t["vector"]),
    "bool": lambda t: bool(t["scalar"] > 0),
    "if": lambda t: 1 if t["scalar"] else 0,
    "int": lambda t: int(t["scalar"]),
    "float": lambda t: float(t["scalar"]),
    "complex": lambda t: complex(t["scalar"]),
    "operator.index": lambda t: operator.index(t["int_scalar"]),
    "list index": lambda t: [0, 1, 2][t["int_scalar"]],
    "range bound": lambda t: range(t["int_scalar"]),
    "repr": lambda t: repr(t["vector"]),
    "str": lambda t: str(t["vector"]),
    "format": lambda t: f"{t['scalar']:.3f}",
    "torch.equal": lambda t: t["torch"].equal(t["vector"], t["vector"]),
    "torch.allclose": lambda t: t["torch"].allclose(t["vector"], t["vector"]),
    "nonzero": lambda t: t["vector"].nonzero(),
    "one-argument where": lambda t: t["torch"].where(t["vector"] > 1),
    "masked_select": lambda t: t["vector"].masked_select(t["vector"] > 1),
    "unique": lambda t: t["torch"].unique(t["vector"]),
    "boolean-mask indexing": lambda t: t["vector"][t["vector"] > 1],
    ".cpu() of a device tensor": lambda t: t["meta"].cpu(),
    '.to("cpu") of a device tensor': lambda t: t["meta"].to("cpu"),
    ".to(device=cpu) of a device tensor": lambda t: t["meta"].to(device=t["torch"].device("cpu")),
    ".to(cpu, dtype) of a device tensor": lambda t: t["meta"].to("cpu", t["torch"].float64),
    ".to(cpu_tensor) of a device tensor": lambda t: t["meta"].to(t["vector"]),
    "copy_ of a device tensor into a cpu tensor": lambda t: t["vector"].clone().copy_(t["meta"]),
}

TORCH_DEVICE_OPS: dict[str, Callable[[Any], Any]] = {
    "arithmetic": lambda t: t["vector"] * 2 + 1 - t["vector"] / 3,
    "sin and cos": lambda t: t["torch"].sin(t["vector"]) + t["vector"].cos(),
    "reshape": lambda t: t["vector"].reshape(2, 2),
    "indexing with Python ints": lambda t: t["vector"][1] + t["vector"][1:3].sum(),
    "torch.arange on the same device": lambda t: t["torch"].arange(4, device=t["vector"].device),
    "three-argument where": lambda t: t["torch"].where(t["vector"] > 1, t["vector"], 0.0),
    "a dtype change": lambda t: t["vector"].to(t["torch"].bfloat16).float(),
    "an upload of a NumPy array": lambda t: t["torch"].as_tensor(np.arange(3.0)),
    "a cpu tensor moved to the cpu (no copy)": lambda t: t["vector"].to("cpu").cpu(),
    "shape and len": lambda t: (tuple(t["vector"].shape), len(t["vector"]), t["vector"].ndim),
    "a meta tensor's shape": lambda t: t["meta"].reshape(-1).shape,
}


@pytest.fixture(scope="module")
def tensors() -> dict[str, Any]:
    torch = pytest.importorskip("torch")
    return {
        "torch": torch,
        "scalar": torch.tensor(2.5),
        "int_scalar": torch.tensor(1),
        "vector": torch.arange(4.0),
        "meta": torch.empty(4, device="meta"),
    }


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.parametrize("read", TORCH_READS)
def test_the_guard_catches_a_torch_host_read(tensors: dict[str, Any], read: str) -> None:
    with forbid_host_reads("torch"), pytest.raises(HostReadError):
        TORCH_READS[read](tensors)


@pytest.mark.parametrize("op", TORCH_DEVICE_OPS)
def test_the_guard_lets_torch_device_work_pass(tensors: dict[str, Any], op: str) -> None:
    with forbid_host_reads("torch"):
        TORCH_DEVICE_OPS[op](tensors)


def test_torch_reads_work_again_after_the_guard(tensors: dict[str, Any]) -> None:
    with pytest.raises(HostReadError), forbid_host_reads("torch"):
        tensors["scalar"].item()
    assert tensors["scalar"].item() == 2.5
    assert repr(tensors["vector"]) == "tensor([0., 1., 2., 3.])"


def test_the_torch_error_names_the_read(tensors: dict[str, Any]) -> None:
    with forbid_host_reads("torch"), pytest.raises(HostReadError, match=r"\.item\(\)"):
        tensors["scalar"].item()


def test_nested_torch_guards_restore_each_level(tensors: dict[str, Any]) -> None:
    with forbid_host_reads("torch"):
        with forbid_host_reads("torch"):
            pass
        with pytest.raises(HostReadError):
            tensors["scalar"].item()  # the outer guard is still on
    tensors["scalar"].item()


def test_the_torch_guard_is_local_to_its_thread(tensors: dict[str, Any]) -> None:
    seen: list[float] = []
    with forbid_host_reads("torch"):
        worker = threading.Thread(target=lambda: seen.append(tensors["scalar"].item()))
        worker.start()
        worker.join()
    assert seen == [2.5]


@pytest.mark.gpu
def test_the_guard_catches_a_copy_from_a_cuda_tensor() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    x = torch.arange(4.0, device="cuda")
    with forbid_host_reads("torch"), pytest.raises(HostReadError):
        x.cpu()
    with forbid_host_reads("torch"):
        torch.arange(4.0).to("cuda")  # an upload is not a read


# --------------------------------------------------------------------------- jax

JAX_READS: dict[str, Callable[[Any], Any]] = {
    "np.asarray": lambda a: np.asarray(a["vector"]),
    "np.array": lambda a: np.array(a["vector"]),
    "np.asarray of a list of arrays": lambda a: np.asarray([a["scalar"], a["scalar"]]),
    "float": lambda a: float(a["scalar"]),
    "int": lambda a: int(a["scalar"]),
    "item": lambda a: a["scalar"].item(),
    "tolist": lambda a: a["vector"].tolist(),
    "bool of a comparison": lambda a: bool(a["scalar"] > 0),
    "if": lambda a: 1 if a["scalar"] > 0 else 0,
    "list index": lambda a: [0, 1, 2][a["int_scalar"]],
    "repr": lambda a: repr(a["vector"]),
    "format": lambda a: f"{a['scalar']:.3f}",
    "jax.device_get": lambda a: a["jax"].device_get(a["vector"]),
    "jnp.nonzero without size": lambda a: a["jax"].numpy.nonzero(a["vector"]),
}

JAX_DEVICE_OPS: dict[str, Callable[[Any], Any]] = {
    "arithmetic": lambda a: a["vector"] * 2.0 + 1 - a["vector"] / 3,
    "sin and cos": lambda a: a["jax"].numpy.sin(a["vector"]) + a["jax"].numpy.cos(a["vector"]),
    "reshape": lambda a: a["vector"].reshape(2, 2),
    "indexing with Python ints": lambda a: a["vector"][1] + a["vector"][1:3].sum(),
    "jnp.arange": lambda a: a["jax"].numpy.arange(4),
    "where": lambda a: a["jax"].numpy.where(a["vector"] > 1, a["vector"], 0.0),
    "an upload of a NumPy array": lambda a: a["jax"].numpy.asarray(np.arange(3.0)),
    "jit": lambda a: a["jax"].jit(lambda v: v * 2)(a["vector"]),
    "np.asarray of host data": lambda a: np.asarray([1.0, 2.0]),
    "shape": lambda a: (a["vector"].shape, a["vector"].dtype, a["vector"].ndim),
}


@pytest.fixture(scope="module")
def jax_arrays() -> dict[str, Any]:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    return {
        "jax": jax,
        "scalar": jnp.float32(2.5),
        "int_scalar": jnp.int32(1),
        "vector": jnp.arange(4.0),
    }


@pytest.mark.parametrize("read", JAX_READS)
def test_the_guard_catches_a_jax_host_read(jax_arrays: dict[str, Any], read: str) -> None:
    with forbid_host_reads("jax"), pytest.raises(HostReadError):
        JAX_READS[read](jax_arrays)


@pytest.mark.parametrize("op", JAX_DEVICE_OPS)
def test_the_guard_lets_jax_device_work_pass(jax_arrays: dict[str, Any], op: str) -> None:
    with forbid_host_reads("jax"):
        JAX_DEVICE_OPS[op](jax_arrays)


def test_jax_reads_work_again_after_the_guard(jax_arrays: dict[str, Any]) -> None:
    original = np.asarray
    with pytest.raises(HostReadError), forbid_host_reads("jax"):
        float(jax_arrays["scalar"])
    assert np.asarray is original
    assert float(jax_arrays["scalar"]) == 2.5
    assert np.asarray(jax_arrays["vector"]).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_nested_jax_guards_restore_each_level(jax_arrays: dict[str, Any]) -> None:
    with forbid_host_reads("jax"):
        with forbid_host_reads("jax"):
            pass
        with pytest.raises(HostReadError):
            float(jax_arrays["scalar"])  # the outer guard is still on
    assert float(jax_arrays["scalar"]) == 2.5


def test_the_jax_guard_is_local_to_its_thread(jax_arrays: dict[str, Any]) -> None:
    seen: list[float] = []
    with forbid_host_reads("jax"):
        worker = threading.Thread(target=lambda: seen.append(float(jax_arrays["scalar"])))
        worker.start()
        worker.join()
    assert seen == [2.5]


def test_traced_values_are_left_to_jax(jax_arrays: dict[str, Any]) -> None:
    jax = jax_arrays["jax"]
    with forbid_host_reads("jax"), pytest.raises(jax.errors.TracerArrayConversionError):
        jax.jit(lambda v: np.asarray(v))(jax_arrays["vector"])


# --------------------------------------------------------------------------- choosing backends


def test_the_default_guards_every_imported_framework(
    tensors: dict[str, Any], jax_arrays: dict[str, Any]
) -> None:
    with forbid_host_reads():
        with pytest.raises(HostReadError):
            tensors["scalar"].item()
        with pytest.raises(HostReadError):
            float(jax_arrays["scalar"])


def test_naming_one_backend_leaves_the_other_alone(
    tensors: dict[str, Any], jax_arrays: dict[str, Any]
) -> None:
    with forbid_host_reads("torch"):
        assert float(jax_arrays["scalar"]) == 2.5
    with forbid_host_reads("jnp"):
        assert tensors["scalar"].item() == 2.5


@pytest.mark.parametrize("backend", ["tensorflow", "numpy", "mxnet"])
def test_backends_that_cannot_be_guarded_are_refused(backend: str) -> None:
    with pytest.raises(ValueError, match=backend), forbid_host_reads(backend):
        pass


def test_the_default_imports_no_framework() -> None:
    import subprocess

    code = (
        "import sys\n"
        "from pe_core.host_reads import forbid_host_reads\n"
        "with forbid_host_reads():\n"
        "    pass\n"
        "assert not {'torch', 'jax', 'tensorflow'} & set(sys.modules), sorted(sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stderr[-2000:]


# --------------------------------------------------------------------------- the backends' guards


@pytest.mark.parametrize("name", REGISTRY.names)
def test_the_guarded_backends_are_those_whose_adapter_guards(name: str) -> None:
    if not is_installed(name):
        pytest.skip(f"{name} is not installed")
    xp = get_namespace(name)
    assert xp.guards_host_reads is (name in GUARDED_BACKENDS)
    if not xp.guards_host_reads:
        with pytest.raises(NotImplementedError, match=name):
            xp.host_read_guard(HostReadError)


class _OwnError(Exception):
    pass


def test_a_backend_guard_raises_the_callers_error(
    tensors: dict[str, Any], jax_arrays: dict[str, Any]
) -> None:
    """The guards live in the adapters and raise whatever error the caller makes."""
    with get_namespace("torch").host_read_guard(_OwnError):
        with pytest.raises(_OwnError, match=r"^\.item\(\) reads a torch tensor's value"):
            tensors["scalar"].item()
    with get_namespace("jax").host_read_guard(_OwnError):
        with pytest.raises(_OwnError, match=r"^np\.asarray\(jax\.Array\) copies"):
            np.asarray(jax_arrays["vector"])
    assert tensors["scalar"].item() == 2.5 and float(jax_arrays["scalar"]) == 2.5
