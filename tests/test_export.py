"""Exported artifacts serve every length with exact angles; arrays offered through DLPack.

* ``torch.export`` (strict and not) and ONNX (run in onnxruntime) of a model with
  ``SinusoidalEncoding`` and ``RotaryEmbedding``, at sequence lengths 1 to 4096 and at
  position 10**6;
* ``jax.export`` with symbolic (batch, seq) of encode, apply_rope and the Flax layers;
* TensorFlow ``apply_rope`` with unknown dimensions (``tf.function`` signatures);
* Keras ``model.export`` on the JAX and TensorFlow backends (the code of
  docs/deploying.md), reloaded in a fresh process where pe_core cannot be imported;
* objects that only implement ``__dlpack__``.

References are float64 formulas (``tests/reference.py``), independent of pe_core.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close
from reference import schedule, table

import pe_core
from pe_core.testing import reference_rope

ROOT = Path(__file__).resolve().parent.parent
BIG = 10**6


def encode_reference(positions: np.ndarray, d: int) -> np.ndarray:
    return table(positions, schedule(d), "interleaved", d)


def model_reference(x: np.ndarray, offset: np.ndarray, heads: int = 4) -> list[np.ndarray]:
    """float64 outputs ``(h, q, k)`` of the models below."""
    batch, n, d = x.shape
    positions = np.asarray(offset, dtype=np.float64)[:, None] + np.arange(n)
    h = x + encode_reference(positions, d)
    q = h.reshape(batch, n, heads, d // heads).transpose(0, 2, 1, 3)
    q = reference_rope(q, positions[:, None, :])
    return [h, q, q]


# --------------------------------------------------------------------------- PyTorch


@pytest.fixture(scope="module")
def torch_model():
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbedding, SinusoidalEncoding

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pe = SinusoidalEncoding(16)
            self.rope = RotaryEmbedding(4)

        def forward(self, x, offset):
            h = self.pe(x, offset)
            q = h.unflatten(-1, (4, -1)).transpose(1, 2)
            q, k = self.rope(q, q, offset=offset)
            return h, q, k

    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=1, max=8192)
    example = (torch.randn(2, 16, 16), torch.tensor([0, BIG]))
    return Tiny().eval(), example, ({0: batch, 1: seq}, {0: batch})


LENGTHS = (1, 17, 1000, 4096)


def check_served(run, lengths=LENGTHS) -> None:
    """``run(x, offset)`` (NumPy in, NumPy out) against the float64 reference."""
    rng = np.random.default_rng(0)
    for n in lengths:
        x = rng.standard_normal((3, n, 16)).astype(np.float32)
        offset = np.array([0, 7, BIG])
        for got, want in zip(run(x, offset), model_reference(x, offset), strict=True):
            assert_close(np.asarray(got), want, atol=5e-6)
    zeros = np.zeros((1, 2, 16), np.float32)
    h = np.asarray(run(zeros, np.array([BIG]))[0])  # the encoding itself at 10**6
    assert_close(h, encode_reference(BIG + np.arange(2.0), 16)[None], atol=1e-6)


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_torch_export_serves_every_length_exactly(torch_model, strict: bool, tmp_path) -> None:
    import torch

    model, example, dynamic_shapes = torch_model
    program = torch.export.export(model, example, dynamic_shapes=dynamic_shapes, strict=strict)
    torch.export.save(program, tmp_path / "tiny.pt2")
    served = torch.export.load(tmp_path / "tiny.pt2").module()

    def run(x, offset):
        return [t.numpy() for t in served(torch.from_numpy(x), torch.from_numpy(offset))]

    check_served(run, lengths=LENGTHS if strict else (1, 17))


@pytest.mark.slow
def test_onnx_export_runs_in_onnxruntime_at_every_length(torch_model, tmp_path) -> None:
    import torch

    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    model, example, dynamic_shapes = torch_model
    program = torch.onnx.export(
        model,
        example,
        dynamo=True,
        dynamic_shapes=dynamic_shapes,
        input_names=["x", "offset"],
        output_names=["h", "q", "k"],
        verbose=False,
    )
    program.save(str(tmp_path / "tiny.onnx"))
    session = ort.InferenceSession(str(tmp_path / "tiny.onnx"))
    assert [i.shape for i in session.get_inputs()] == [["batch", "seq", 16], ["batch"]]

    def run(x, offset):
        return session.run(None, {"x": x, "offset": offset})

    check_served(run)
    for n in (1, 17, 1000):  # and the eager model, on the same inputs
        x = np.random.default_rng(n).standard_normal((2, n, 16)).astype(np.float32)
        offset = np.array([3, BIG])
        eager = model(torch.from_numpy(x), torch.from_numpy(offset))
        for got, want in zip(run(x, offset), eager, strict=True):
            assert_close(got, want.numpy(), atol=2e-6, backend="numpy", dtype="float32")


# --------------------------------------------------------------------------- JAX


def test_jax_export_with_symbolic_batch_and_sequence() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax import export

    b, s = export.symbolic_shape("b, s")
    encode = export.export(jax.jit(lambda p: pe_core.encode(p, 16)))(
        jax.ShapeDtypeStruct((b, s), jnp.int32)
    )
    encode = export.deserialize(encode.serialize())
    positions = np.array([[0, 1, 2], [BIG, BIG + 1, 5]])
    got = encode.call(jnp.asarray(positions, jnp.int32))
    assert_close(got, encode_reference(positions, 16), atol=1e-6, backend="jax")

    rope = export.export(jax.jit(pe_core.apply_rope))(
        jax.ShapeDtypeStruct((b, s, 8), jnp.float32), jax.ShapeDtypeStruct((s,), jnp.int32)
    )
    for n in (1, 5, 300):
        x = np.random.default_rng(n).standard_normal((2, n, 8)).astype(np.float32)
        p = np.arange(n) + BIG
        got = rope.call(jnp.asarray(x), jnp.asarray(p, jnp.int32))
        assert_close(got, reference_rope(x, p), atol=5e-6)


@pytest.mark.parametrize("api", ["nnx", "linen"])
def test_jax_export_of_the_flax_layers(api: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax import export

    flax_layers = pytest.importorskip("pe_core.layers.flax")
    if api == "nnx":
        pe, rope = flax_layers.SinusoidalEncoding(16), flax_layers.RotaryEmbedding(4)
    else:
        linen_pe = flax_layers.LinenSinusoidalEncoding(16)
        linen_rope = flax_layers.LinenRotaryEmbedding(4)

        def pe(x, offset):
            return linen_pe.apply({}, x, offset)

        def rope(q, k, offset):
            return linen_rope.apply({}, q, k, offset=offset)

    def forward(x, offset):
        h = pe(x, offset)
        q = h.reshape(*h.shape[:2], 4, 4).transpose(0, 2, 1, 3)
        q, k = rope(q, q, offset=offset)
        return h, q, k

    b, s = export.symbolic_shape("b, s")
    exported = export.export(jax.jit(forward))(
        jax.ShapeDtypeStruct((b, s, 16), jnp.float32), jax.ShapeDtypeStruct((b,), jnp.int32)
    )
    served = export.deserialize(exported.serialize())

    def run(x, offset):
        return served.call(jnp.asarray(x), jnp.asarray(offset, jnp.int32))

    check_served(run, lengths=(1, 17, 300))


# --------------------------------------------------------------------------- TensorFlow


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_tf_apply_rope_with_unknown_dimensions(layout: str) -> None:
    tf = pytest.importorskip("tensorflow")

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None, None, 8], tf.float32),
            tf.TensorSpec([None], tf.int64),
        ]
    )
    def rotate(x, p):
        return pe_core.apply_rope(x, p, layout=layout, rotary_dim=6)

    for n in (1, 7):
        x = np.random.default_rng(n).standard_normal((2, 3, n, 8)).astype(np.float32)
        p = np.arange(n) + BIG
        expected = np.concatenate([reference_rope(x[..., :6], p, layout=layout), x[..., 6:]], -1)
        assert_close(rotate(tf.constant(x), tf.constant(p)), expected, atol=5e-6)


# --------------------------------------------------------------------------- Keras


def keras_blocks() -> tuple[str, str]:
    """The Keras section of docs/deploying.md: the export block and the serving block."""
    text = (ROOT / "docs" / "deploying.md").read_text()
    section = text.split("## Keras", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.M | re.S)
    assert len(blocks) == 2, "docs/deploying.md: the Keras section has two python blocks"
    return blocks[0], blocks[1]


#: Runs first in the serving process: pe_core cannot be imported there.
BLOCK_IMPORTS = textwrap.dedent(
    """
    import sys

    class _Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pe_core", "pe_core_backends"):
                raise ImportError(f"{name} is blocked in the serving process")

    sys.meta_path.insert(0, _Blocked())
    sys.path = [p for p in sys.path if p not in ("", ".", ROOT)]
    """
)


def run_python(code: str, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend", ["jax", "tensorflow"])
def test_keras_export_reloads_without_pe_core(keras_backend: str, tmp_path) -> None:
    for module in ("keras", "tensorflow", keras_backend):
        pytest.importorskip(module)
    export_block, serve_block = keras_blocks()
    env = {
        **os.environ,
        "KERAS_BACKEND": keras_backend,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": str(ROOT),
    }
    references = textwrap.dedent(
        """
        import numpy as np
        outputs = {}
        for n in (2, 33):
            x = np.random.default_rng(n).standard_normal((2, n, 64)).astype("float32")
            outputs[f"x{n}"] = x
            for name, y in zip("hqk", model(x)):
                outputs[f"{name}{n}"] = np.asarray(y)
        np.savez("references.npz", **outputs)
        """
    )
    run_python(export_block + references, tmp_path, env)
    compare = textwrap.dedent(
        """
        references = np.load("references.npz")
        for n in (2, 33):
            outputs = served.serve(tf.constant(references[f"x{n}"]))
            for name, y in zip("hqk", outputs):
                np.testing.assert_allclose(y.numpy(), references[f"{name}{n}"], atol=5e-6)
        assert not any(m.startswith("pe_core") for m in sys.modules)
        print("served")
        """
    )
    serve_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    code = BLOCK_IMPORTS.replace("ROOT", repr(str(ROOT))) + serve_block + compare
    assert "served" in run_python(code, tmp_path, serve_env)


# --------------------------------------------------------------------------- DLPack


class DLPackOnly:
    """An array that offers nothing but the DLPack protocol (as CuPy arrays do)."""

    def __init__(self, array: np.ndarray, device: tuple[int, int] | None = None) -> None:
        self.array = array
        self.device = device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


def test_dlpack_arrays_are_imported_by_the_backend_computed_on(backend: str) -> None:
    positions = np.array([0, 5, BIG], dtype=np.int32)
    got = pe_core.encode(DLPackOnly(positions), 8, backend=backend)
    assert_close(got, encode_reference(positions, 8), atol=1e-6, backend=backend)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    rotated = pe_core.apply_rope(DLPackOnly(x), DLPackOnly(positions), backend=backend)
    assert_close(rotated, reference_rope(x, positions), atol=5e-6, backend=backend)


def test_dlpack_arrays_numpy_cannot_read_are_refused_clearly() -> None:
    on_gpu = DLPackOnly(np.arange(3), device=(2, 0))
    with pytest.raises(TypeError, match=r"DLPack array \(DLPackOnly\) on a cuda device.*backend="):
        pe_core.encode(on_gpu, 8)
    with pytest.raises(TypeError, match="x is a DLPack array"):
        pe_core.apply_rope(DLPackOnly(np.ones((3, 8), np.float32), device=(2, 0)), range(3))
