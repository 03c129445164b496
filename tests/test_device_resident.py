"""Device-resident positions: pe_core computes on the device, never reading values back.

Every case runs twice: once on the *device path* (``force_device_path()``, which makes
pe_core treat torch and JAX arrays as if on an accelerator) under
``forbid_host_reads()``, where any read of a value raises
:class:`~pe_core.host_reads.HostReadError`; and once as an ordinary call, the
reference. The two must agree (float32 to 2e-6; float16/bfloat16 to an ulp).

The NaN policy of the device path: NaN and infinite positions are not looked for;
they give NaN in the rows (``encode``) or outputs (``apply_rope``) of those positions and
finite values elsewhere, with no exception. ``check_values=True`` reads the positions and
raises ``ValueError`` as host positions do.

TensorFlow is left out: its reads happen in C++ and cannot be intercepted. The Keras
layers run with the JAX backend in a subprocess (Keras picks its backend at import).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, to_numpy

import pe_core
from pe_core.host_reads import forbid_host_reads
from pe_core_backends import force_device_path, get_namespace

KERAS_INNER = os.environ.get("PE_CORE_DEVICE_KERAS_INNER")
outer = pytest.mark.skipif(bool(KERAS_INNER), reason="runs in the outer process")

FRAMEWORKS = ("torch", "jax")
#: Allowed difference between the device path and the ordinary call, per output dtype:
#: (atol, rtol). Low-precision results may differ by one rounding (an ulp).
TOLERANCE = {
    "float64": (1e-12, 0.0),
    "float32": (2e-6, 0.0),
    "bfloat16": (2**-8, 2**-7),
    "float16": (2**-11, 2**-10),
}

RNG = np.random.default_rng(0)


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> str:
    """torch and JAX; skipped when missing."""
    pytest.importorskip(request.param)
    return request.param


def on_device(framework: str, values: Any, dtype: str | None = None) -> Any:
    """``values`` as an array of ``framework`` (skips 64-bit JAX dtypes without x64)."""
    values = np.asarray(values)
    dtype = dtype or values.dtype.name
    xp = get_namespace(framework)
    if not xp.supports(dtype):
        pytest.skip(f"{framework} has no {dtype} now (jax_enable_x64 is off)")
    if dtype == "bfloat16":
        return xp.astype(xp.asarray(values.astype(np.float32)), xp.dtype("bfloat16"))
    return xp.asarray(values.astype(dtype), dtype=xp.dtype(dtype))


def on_the_device_path(call: Callable[[], Any]) -> Any:
    """``call()`` with the device path forced and every host read an error."""
    with force_device_path(), forbid_host_reads():
        return call()


def assert_same(got: Any, expected: Any, dtype: str = "float32") -> None:
    """Same framework, dtype, shape and values (to ``TOLERANCE[dtype]``)."""
    assert type(got) is type(expected)
    assert got.dtype == expected.dtype
    assert tuple(got.shape) == tuple(expected.shape)
    atol, rtol = TOLERANCE[dtype]
    assert_close(to_numpy(got), to_numpy(expected), atol=atol, rtol=rtol)


def compare(call: Callable[[], Any], dtype: str = "float32") -> Any:
    """Run ``call`` on the device path and as an ordinary call; they must agree."""
    got = on_the_device_path(call)
    expected = call()
    for g, e in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, expected)), strict=True):
        assert_same(g, e, dtype)
    return got


# --------------------------------------------------------------------------- encode

INT_POSITIONS: dict[str, np.ndarray] = {
    "consecutive": np.arange(100),
    "a permutation": RNG.permutation(100),
    "per-example offsets (4, 16)": np.array([0, 3, 250, 7000])[:, None] + np.arange(16),
    "a 0-d scalar": np.array(7),
    "large": 10**6 + np.arange(80),
}


@pytest.mark.parametrize("int_dtype", ["int32", "int64"])
@pytest.mark.parametrize("kind", INT_POSITIONS)
def test_encode_of_integer_positions_stays_on_the_device(
    framework: str, kind: str, int_dtype: str
) -> None:
    pos = on_device(framework, INT_POSITIONS[kind], int_dtype)
    compare(lambda: pe_core.encode(pos, 16))


def test_encode_of_fractional_positions_stays_on_the_device(framework: str) -> None:
    pos = on_device(framework, [0.5, 1.25, -3.5, 1e4 + 0.75, 123456.5], "float32")
    compare(lambda: pe_core.encode(pos, 16))


def preset_cases() -> list[Any]:
    cases = []
    for name, spec in pe_core.PRESETS.items():
        if spec.axes > 1:  # N-D presets: tests/test_nd_tables.py
            continue
        for d in (16, 15):
            if d % 2 and spec.odd_d != "zero_pad":
                continue
            cases.append(pytest.param(name, d, id=f"{name}-d{d}"))
    return cases


@pytest.mark.parametrize(("preset", "d"), preset_cases())
def test_encode_with_every_preset_stays_on_the_device(framework: str, preset: str, d: int) -> None:
    pos = on_device(framework, np.arange(70) + 40, "int32")
    compare(lambda: pe_core.encode(pos, d, spec=preset))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_encode_in_every_output_dtype_stays_on_the_device(framework: str, dtype: str) -> None:
    if not get_namespace(framework).supports(dtype):
        pytest.skip(f"{framework} has no {dtype} now (jax_enable_x64 is off)")
    pos = on_device(framework, RNG.integers(0, 10**5, 24), "int32")
    compare(lambda: pe_core.encode(pos, 16, dtype=dtype), dtype)


def test_encode_into_a_torch_out_buffer_stays_on_the_device() -> None:
    torch = pytest.importorskip("torch")
    pos = torch.arange(100, dtype=torch.int32) + 5000
    out = torch.full((100, 16), 7.0)
    got = on_the_device_path(lambda: pe_core.encode(pos, 16, out=out))
    assert got is out
    assert_close(out.numpy(), pe_core.encode(pos, 16).numpy(), atol=2e-6, rtol=0)


# --------------------------------------------------------------------------- apply_rope

ROPE_POSITIONS: dict[str, np.ndarray] = {
    "(seq,)": np.arange(8) * 1000 + 3,
    "(batch, 1, seq)": np.array([0, 4093])[:, None, None] + np.arange(8),
    "a scalar": np.array(70000),
}

SCALINGS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def rope_input(framework: str, dtype: str = "float32") -> Any:
    return on_device(framework, RNG.standard_normal((2, 4, 8, 16)), dtype)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("shape", ROPE_POSITIONS)
def test_apply_rope_with_device_positions_stays_on_the_device(
    framework: str, shape: str, layout: str
) -> None:
    x = rope_input(framework)
    pos = on_device(framework, ROPE_POSITIONS[shape], "int32")
    compare(lambda: pe_core.apply_rope(x, pos, layout=layout))


@pytest.mark.parametrize("scaling", SCALINGS)
def test_apply_rope_with_every_scaling_without_seq_len_stays_on_the_device(
    framework: str, scaling: str
) -> None:
    x = rope_input(framework)
    pos = on_device(framework, ROPE_POSITIONS["(batch, 1, seq)"] + 9000, "int32")
    compare(lambda: pe_core.apply_rope(x, pos, scaling=SCALINGS[scaling], base=500000.0))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_to_a_partial_rotary_dim_stays_on_the_device(
    framework: str, layout: str
) -> None:
    x = rope_input(framework)
    pos = on_device(framework, ROPE_POSITIONS["(seq,)"], "int32")
    compare(lambda: pe_core.apply_rope(x, pos, layout=layout, rotary_dim=8))


@pytest.mark.parametrize("positions", ["int32", "int64", "float32"])
@pytest.mark.parametrize("x_dtype", ["float32", "bfloat16"])
def test_apply_rope_in_every_dtype_stays_on_the_device(
    framework: str, x_dtype: str, positions: str
) -> None:
    x = rope_input(framework, x_dtype)
    values = ROPE_POSITIONS["(seq,)"] + (0.25 if positions == "float32" else 0)
    pos = on_device(framework, values, positions)
    compare(lambda: pe_core.apply_rope(x, pos), x_dtype)


def test_the_rope_module_function_stays_on_the_device(framework: str) -> None:
    from pe_core.rope import apply_rope

    x = rope_input(framework)
    compare(lambda: apply_rope(x, on_device(framework, np.arange(8), "int32")))


def test_apply_rope_with_host_positions_only_uploads(framework: str) -> None:
    """Host-known positions may use host-built tables, moved to the device."""
    x = rope_input(framework)
    for pos in (range(8), 5, np.arange(8) + 10**6):
        compare(lambda pos=pos: pe_core.apply_rope(x, pos))


# --------------------------------------------------------------------------- ALiBi


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_alibi_bias_on_a_framework_only_uploads(framework: str, causal: bool) -> None:
    """alibi_bias takes lengths, not arrays: its host-built bias is uploaded, never read."""
    compare(lambda: pe_core.alibi_bias(5, 9, 6, causal=causal, backend=framework))


# --------------------------------------------------------------------------- the NaN policy

BAD_POSITIONS = np.array([0.0, np.nan, 2.0, np.inf, 4.5, -np.inf, 6.0, 7.0])
BAD = ~np.isfinite(BAD_POSITIONS)


def test_encode_gives_nan_rows_for_nan_and_inf_positions(framework: str) -> None:
    pos = on_device(framework, BAD_POSITIONS, "float32")
    got = to_numpy(on_the_device_path(lambda: pe_core.encode(pos, 16)))
    assert np.isnan(got[BAD]).all()
    expected = pe_core.encode(BAD_POSITIONS[~BAD], 16)
    assert_close(got[~BAD], expected, atol=2e-6, rtol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_gives_nan_outputs_for_nan_and_inf_positions(
    framework: str, layout: str
) -> None:
    x = rope_input(framework)
    pos = on_device(framework, BAD_POSITIONS, "float32")
    got = to_numpy(on_the_device_path(lambda: pe_core.apply_rope(x, pos, layout=layout)))
    assert np.isnan(got[:, :, BAD]).all()
    finite = on_device(framework, BAD_POSITIONS[~BAD], "float32")
    expected = to_numpy(pe_core.apply_rope(x[:, :, ~BAD], finite, layout=layout))
    assert_close(got[:, :, ~BAD], expected, atol=2e-6, rtol=0)


CHECKED_CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "encode": lambda x, pos: pe_core.encode(pos, 16, check_values=True),
    "apply_rope": lambda x, pos: pe_core.apply_rope(x, pos, check_values=True),
}


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("function", CHECKED_CALLS)
def test_check_values_raises_for_a_non_finite_device_position(
    framework: str, function: str, bad: float
) -> None:
    x = rope_input(framework)
    pos = on_device(framework, [0.0, 1.0, bad, 3.0, 4.0, 5.0, 6.0, 7.0], "float32")
    with force_device_path(), pytest.raises(ValueError, match=str(bad)):
        CHECKED_CALLS[function](x, pos)


@pytest.mark.parametrize("function", CHECKED_CALLS)
def test_check_values_accepts_finite_device_positions(framework: str, function: str) -> None:
    x = rope_input(framework)
    pos = on_device(framework, np.arange(8), "int32")
    with force_device_path():
        checked = CHECKED_CALLS[function](x, pos)
    plain = pe_core.encode(pos, 16) if function == "encode" else pe_core.apply_rope(x, pos)
    assert_same(checked, plain)


# --------------------------------------------------------------------------- the path taken


def test_the_device_path_never_asks_for_concrete_values(
    framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not even through pe_core's own accessors, which a guard on NumPy would not see."""

    def refuse(self: Any, x: Any) -> Any:
        raise AssertionError(f"the device path read {type(x).__name__} values to the host")

    namespace = type(get_namespace(framework))
    monkeypatch.setattr(namespace, "concrete", refuse)
    monkeypatch.setattr(namespace, "to_numpy", refuse)
    x = rope_input(framework)
    pos = on_device(framework, np.arange(100) + 7, "int32")
    with force_device_path():
        pe_core.encode(pos, 16)
        pe_core.apply_rope(x, pos[:8])


# --------------------------------------------------------------------------- torch layers


TORCH_OFFSETS = (
    "an int offset",
    "a large int offset",
    "per-example tensor offsets",
    "a 0-d tensor offset",
)


def torch_offset(torch: Any, name: str) -> Any:
    return {
        "an int offset": 5,
        "a large int offset": 10**6,
        "per-example tensor offsets": torch.tensor([0, 4093]),
        "a 0-d tensor offset": torch.tensor(12),
    }[name]


@pytest.mark.parametrize("max_len", [None, 64], ids=["no cache", "a max_len cache"])
@pytest.mark.parametrize("offset", TORCH_OFFSETS)
def test_the_torch_sinusoidal_layer_stays_on_the_device(offset: str, max_len: int | None) -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import SinusoidalEncoding

    layer = SinusoidalEncoding(16, spec="fairseq", max_len=max_len)
    x = torch.as_tensor(RNG.standard_normal((2, 12, 16)), dtype=torch.float32)
    compare(lambda: layer(x, offset=torch_offset(torch, offset)))


@pytest.mark.parametrize("offset", TORCH_OFFSETS)
def test_the_torch_rotary_layer_stays_on_the_device(offset: str) -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbedding

    rope = RotaryEmbedding(16, scaling=SCALINGS["llama3"])
    q = torch.as_tensor(RNG.standard_normal((2, 4, 8, 16)), dtype=torch.float32)
    k = torch.as_tensor(RNG.standard_normal((2, 4, 8, 16)), dtype=torch.bfloat16)
    compare(lambda: rope(q, k, offset=torch_offset(torch, offset)), "bfloat16")


def test_the_torch_rotary_layer_with_position_tensors_stays_on_the_device() -> None:
    torch = pytest.importorskip("torch")
    from pe_core.layers.torch import RotaryEmbedding

    rope = RotaryEmbedding(16, layout="interleaved", rotary_dim=8)
    q, k = torch.as_tensor(RNG.standard_normal((2, 2, 4, 8, 16)), dtype=torch.float32)
    positions = torch.tensor([[3, 9, 27, 81, 243, 729, 2187, 6561]]).reshape(1, 1, 8)
    compare(lambda: rope(q, k, positions=positions.expand(2, 1, 8)))


# --------------------------------------------------------------------------- Flax layers


def jax_offsets(jnp: Any) -> dict[str, Any]:
    return {
        "an int offset": 5,
        "per-example array offsets": jnp.array([0, 4093]),
        "a 0-d array offset": jnp.array(12),
    }


FLAX_OFFSETS = ("an int offset", "per-example array offsets", "a 0-d array offset")


@pytest.mark.parametrize("offset", FLAX_OFFSETS)
@pytest.mark.parametrize("api", ["nnx", "linen"])
def test_the_flax_sinusoidal_layers_stay_on_the_device(api: str, offset: str) -> None:
    pytest.importorskip("flax")
    import jax.numpy as jnp

    from pe_core.layers import flax as layers

    x = jnp.asarray(RNG.standard_normal((2, 12, 16)), dtype=jnp.float32)
    value = jax_offsets(jnp)[offset]
    if api == "nnx":
        layer = layers.SinusoidalEncoding(16, spec="tensor2tensor", max_len=64)
        compare(lambda: layer(x, value))
    else:
        linen = layers.LinenSinusoidalEncoding(16, spec="tensor2tensor", max_len=64)
        compare(lambda: linen.apply({}, x, offset=value))


@pytest.mark.parametrize("offset", FLAX_OFFSETS)
@pytest.mark.parametrize("api", ["nnx", "linen"])
def test_the_flax_rotary_layers_stay_on_the_device(api: str, offset: str) -> None:
    pytest.importorskip("flax")
    import jax.numpy as jnp

    from pe_core.layers import flax as layers

    q, k = jnp.asarray(RNG.standard_normal((2, 2, 4, 8, 16)), dtype=jnp.float32)
    value = jax_offsets(jnp)[offset]
    if api == "nnx":
        rope = layers.RotaryEmbedding(16, scaling=SCALINGS["yarn"])
        compare(lambda: rope(q, k, offset=value))
    else:
        linen = layers.LinenRotaryEmbedding(16, scaling=SCALINGS["yarn"])
        compare(lambda: linen.apply({}, q, k, offset=value))


# --------------------------------------------------------------------------- Keras layers


@outer
def test_the_keras_layers_stay_on_the_device_with_the_jax_backend() -> None:
    if find_spec("keras") is None or find_spec("jax") is None:
        pytest.skip("needs keras and jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PE_CORE_DEVICE_KERAS_INNER": "jax"}
    env.pop("PYTEST_XDIST_WORKER", None)
    test = f"{__file__}::test_keras_layer_on_jax_stays_on_the_device"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", test]
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        command, env=env, cwd=root, capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


KERAS_CASES = ("sinusoidal", "sinusoidal with a max_len cache", "rotary")


@pytest.mark.skipif(not KERAS_INNER, reason="runs in the KERAS_BACKEND=jax subprocess")
@pytest.mark.parametrize("offset", FLAX_OFFSETS)
@pytest.mark.parametrize("layer", KERAS_CASES)
def test_keras_layer_on_jax_stays_on_the_device(layer: str, offset: str) -> None:
    import jax.numpy as jnp

    from pe_core.layers import keras as layers

    value = jax_offsets(jnp)[offset]
    x = jnp.asarray(RNG.standard_normal((2, 8, 16)), dtype=jnp.float32)
    if layer == "rotary":
        rope = layers.RotaryEmbedding(16, scaling=SCALINGS["linear"])
        compare(lambda: rope(x, x, offset=value))
    else:
        encoding = layers.SinusoidalEncoding(16, max_len=64 if "max_len" in layer else None)
        compare(lambda: encoding(x, offset=value))
