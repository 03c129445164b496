"""``rope_cos_sin``: exact RoPE tables in every layout, on every backend, eager and traced.

References: mpmath (positions and frequencies taken as exact binary numbers), the
layouts restated from one another, :func:`pe_core.apply_rope` (a rotation with the
tables is its rotation), and transformers 5.24's ``LlamaRotaryEmbedding`` (default,
linear, dynamic, yarn, llama3 and longrope configs).
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest
from conftest import assert_close, to_numpy

import pe_core
from pe_core import RopeSpec, apply_rope, rope_cos_sin
from pe_core.host_reads import forbid_host_reads
from pe_core_backends import force_device_path, get_namespace

LAYOUTS = ("half", "interleaved", "half_width")

YARN = RopeSpec(
    scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
)


def yarn(layout: str) -> RopeSpec:
    """:data:`YARN` pairing as a table ``layout`` is laid out."""
    return RopeSpec(
        scaling=YARN.scaling, layout="interleaved" if layout == "interleaved" else "half"
    )


def mp_cos_sin(positions: Any, omegas: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of ``p * w`` in mpmath, ``p`` an exact integer or float."""
    flat = np.asarray(positions).ravel().tolist()
    c = np.empty((len(flat), len(omegas)))
    s = np.empty_like(c)
    with mpmath.workdps(60):
        for i, p in enumerate(flat):
            for j, w in enumerate(omegas):
                angle = mpmath.mpf(p) * mpmath.mpf(w)
                c[i, j], s[i, j] = float(mpmath.cos(angle)), float(mpmath.sin(angle))
    shape = (*np.shape(positions), len(omegas))
    return c.reshape(shape), s.reshape(shape)


def half_width_reference(positions: Any, head_dim: int, spec: RopeSpec | None = None):
    spec = spec or RopeSpec()
    omegas, factor = spec.constants(head_dim)
    c, s = mp_cos_sin(positions, omegas)
    return c * factor, s * factor


# ------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_at_large_positions_on_every_backend(backend: str, layout: str) -> None:
    positions = np.array([0, 1, 99_999, 100_000, 100_001, 2**31 - 1, -(2**31)], np.int64)
    xp = get_namespace(backend)
    pos = positions if backend == "numpy" else xp.asarray(positions.astype(np.int32))
    cos, sin = rope_cos_sin(pos, 64, layout=layout)
    assert get_namespace(backend).dtype_of(cos) == "float32"
    c, s = half_width_reference(positions, 64)
    if layout == "half":
        c, s = np.concatenate([c, c], -1), np.concatenate([s, s], -1)
    elif layout == "interleaved":
        c, s = np.repeat(c, 2, -1), np.repeat(s, 2, -1)
    assert_close(to_numpy(cos), c, atol=1e-6)
    assert_close(to_numpy(sin), s, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_near_the_int64_extremes_on_the_host(dtype: str) -> None:
    positions = np.array([2**63 - 1, -(2**63), 2**62 + 12345, 10**18], np.int64)
    cos, sin = rope_cos_sin(positions, 16, spec=YARN, layout="half_width", dtype=dtype)
    c, s = half_width_reference(positions, 16, YARN)
    atol = 1e-12 if dtype == "float64" else 1e-6
    assert_close(cos, c, atol=atol)
    assert_close(sin, s, atol=atol)


def test_float_positions_are_exact() -> None:
    positions = np.array([0.5, 1e5 + 0.25, -12345.75])
    cos, sin = rope_cos_sin(positions, 32, layout="half_width", dtype="float64")
    c, s = half_width_reference(positions, 32)
    assert_close(cos, c, atol=1e-12)
    assert_close(sin, s, atol=1e-12)


def test_float32_product_is_not_what_it_returns() -> None:
    # the plain float32 product is off by milliradians at 1e5: the tables are not
    positions = np.arange(100_000, 100_016)
    cos, _ = rope_cos_sin(positions, 128, layout="half_width")
    omegas = np.asarray(RopeSpec().constants(128)[0])
    naive = np.cos(positions[:, None].astype(np.float32) * omegas.astype(np.float32))
    exact, _ = half_width_reference(positions, 128)
    assert np.abs(naive - exact).max() > 1e-3
    assert np.abs(cos - exact).max() < 1e-6


# ------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("spec", [None, YARN, RopeSpec(base=5e5, rotary_dim=8)])
def test_layouts_agree(spec: RopeSpec | None) -> None:
    positions = np.arange(12).reshape(3, 4) * 997
    half = rope_cos_sin(positions, 16, spec=spec, layout="half")
    width = rope_cos_sin(positions, 16, spec=spec, layout="half_width")
    n = width[0].shape[-1]
    assert n == (4 if spec is not None and spec.rotary_dim == 8 else 8)
    for full, narrow in zip(half, width, strict=True):
        assert full.shape == (3, 4, 2 * n)
        np.testing.assert_array_equal(full, np.concatenate([narrow, narrow], -1))
    spec_i = (
        None if spec is None else RopeSpec(**{**spec.apply_rope_kwargs(), "layout": "interleaved"})
    )
    # a spec's pairing by default
    inter = rope_cos_sin(positions, 16, spec=spec_i, layout="interleaved" if spec is None else None)
    for pairs, narrow in zip(inter, width, strict=True):
        np.testing.assert_array_equal(pairs, np.repeat(narrow, 2, -1))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_rotation_with_the_tables_is_apply_rope(layout: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 16))
    positions = np.array([[0, 1, 2, 3, 4], [70_000, 70_001, 9, 8, 123_456]])
    spec = RopeSpec(layout=layout, scaling={"rope_type": "linear", "factor": 2.0})
    cos, sin = rope_cos_sin(positions, 16, spec=spec, dtype="float64")
    if layout == "half":
        rotated = np.concatenate([-x[..., 8:], x[..., :8]], -1)
    else:
        rotated = np.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)
    assert_close(x * cos + rotated * sin, apply_rope(x, positions, spec=spec), atol=1e-12)


# ------------------------------------------------------------------------- configs


def test_model_config_partial_rotary_and_attention_factor() -> None:
    config = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "partial_rotary_factor": 0.5,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "rope_theta": 1e4,
            "original_max_position_embeddings": 2048,
        },
    }
    cos, sin = rope_cos_sin(np.arange(5), config, dtype="float64")
    omegas, factor = pe_core.rope_frequencies(config)
    assert cos.shape == (5, 2 * len(omegas)) == (5, 8)
    assert factor == pytest.approx(0.1 * np.log(4.0) + 1)
    c, s = mp_cos_sin(np.arange(5), tuple(float(w) for w in omegas))
    assert_close(cos, np.concatenate([c, c], -1) * factor, atol=1e-12)
    assert_close(sin, np.concatenate([s, s], -1) * factor, atol=1e-12)


def test_per_layer_type_config() -> None:
    gemma3 = {
        "head_dim": 16,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    full = rope_cos_sin(np.arange(4), gemma3, layer_type="full_attention", layout="half_width")
    local = rope_cos_sin(np.arange(4), gemma3, layer_type="sliding_attention", layout="half_width")
    assert not np.allclose(full[1], local[1])
    spec = RopeSpec(scaling=gemma3, layer_type="sliding_attention")
    np.testing.assert_array_equal(
        rope_cos_sin(np.arange(4), 16, spec=spec, layout="half_width")[1], local[1]
    )
    with pytest.raises(ValueError, match="layer"):
        rope_cos_sin(np.arange(4), gemma3)


@pytest.mark.parametrize("rope_type", ["dynamic", "longrope"])
def test_sequence_length_types_follow_max_position(rope_type: str) -> None:
    params: dict[str, Any] = {"rope_type": rope_type, "factor": 2.0}
    if rope_type == "longrope":
        params = {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    config = {"head_dim": 8, "max_position_embeddings": 32, "rope_parameters": params}
    if rope_type == "longrope":
        config["original_max_position_embeddings"] = 16
    short = rope_cos_sin(np.arange(10), config, layout="half_width", dtype="float64")
    long = rope_cos_sin(np.arange(100), config, layout="half_width", dtype="float64")
    omegas, factor = pe_core.rope_frequencies(config, seq_len=100)
    c, _ = mp_cos_sin(np.arange(100), tuple(float(w) for w in omegas))
    assert_close(long[0], c * factor, atol=1e-12)
    assert not np.allclose(short[0], long[0][:10])


# ------------------------------------------------------------------------- transformers

_SHORT = [1.0 + 0.1 * i for i in range(8)]
_LONG = [1.5 + 0.3 * i for i in range(8)]

HF_CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "linear": {"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}},
    "dynamic": {
        "max_position_embeddings": 32,
        "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
    },
    "yarn": {
        "max_position_embeddings": 256,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 1e4,
        },
    },
    "llama3": {
        "max_position_embeddings": 512,
        "rope_parameters": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 500000.0,
        },
    },
    "longrope": {
        "max_position_embeddings": 256,
        "original_max_position_embeddings": 32,
        "rope_parameters": {
            "rope_type": "longrope",
            "short_factor": _SHORT,
            "long_factor": _LONG,
            "rope_theta": 1e4,
        },
    },
}


@pytest.mark.parametrize("n", [24, 48])  # below and beyond the configs' original lengths
@pytest.mark.parametrize("name", HF_CONFIGS)
def test_agrees_with_transformers_rotary_module(name: str, n: int) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=4, **HF_CONFIGS[name]
    )
    module = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(config)
    position_ids = torch.arange(n)[None].expand(2, n)
    x = torch.zeros(1, dtype=torch.float32)
    hf_cos, hf_sin = module(x, position_ids)
    cos, sin = rope_cos_sin(position_ids, config)
    # float32 structure: same shape, layout, attention factor (the module's own float32
    # angles are within 4e-6 rad at these positions)
    assert_close(cos, hf_cos, atol=1e-5)
    assert_close(sin, hf_sin, atol=1e-5)
    # float64: the module's frequencies and scale (after its per-call update) are ours
    c64, s64 = rope_cos_sin(position_ids, config, dtype="float64")
    inv_freq = module.inv_freq.double()
    structure = torch.cat([inv_freq, inv_freq]) * position_ids[..., None].double()
    scale = module.attention_scaling
    assert_close(c64, torch.cos(structure) * scale, atol=1e-5)
    assert_close(s64, torch.sin(structure) * scale, atol=1e-5)
    omegas, factor = pe_core.rope_frequencies(config, seq_len=n)
    np.testing.assert_allclose(module.inv_freq.numpy(), omegas, rtol=1e-6)
    assert factor == pytest.approx(scale, rel=1e-6)


# ------------------------------------------------------------------------- backends, modes


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_dtypes(backend: str, dtype: str) -> None:
    xp = get_namespace(backend)
    if not xp.supports(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    cos, sin = rope_cos_sin(range(1000, 1010), 16, dtype=dtype, backend=backend)
    assert xp.dtype_of(cos) == xp.dtype_of(sin) == dtype
    c, s = half_width_reference(np.arange(1000, 1010), 16)
    tol = {"float64": 1e-12, "float32": 1e-6, "float16": 2**-11, "bfloat16": 2**-8}[dtype]
    assert_close(to_numpy(cos), np.concatenate([c, c], -1), atol=tol)
    assert_close(to_numpy(sin), np.concatenate([s, s], -1), atol=tol)


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_device_positions_stay_on_the_device(framework: str, layout: str) -> None:
    pytest.importorskip(framework)
    xp = get_namespace(framework)
    pos = xp.asarray(np.array([[0, 5, 100_000], [3, 2**31 - 1, 7]], np.int32))
    with force_device_path(), forbid_host_reads():
        cos, sin = rope_cos_sin(pos, 32, spec=yarn(layout), layout=layout)
    expected = rope_cos_sin(pos, 32, spec=yarn(layout), layout=layout)
    assert_close(cos, expected[0], atol=2e-6)
    assert_close(sin, expected[1], atol=2e-6)


def test_jax_jit() -> None:
    jax = pytest.importorskip("jax")
    pos = jax.numpy.arange(100_000, 100_008)[None]
    for layout in LAYOUTS:
        spec = yarn(layout)
        jitted = jax.jit(
            lambda p, spec=spec, layout=layout: rope_cos_sin(p, 16, spec=spec, layout=layout)
        )
        got = jitted(pos)
        expected = rope_cos_sin(np.arange(100_000, 100_008)[None], 16, spec=spec, layout=layout)
        assert_close(to_numpy(got[0]), expected[0], atol=1e-6)
        assert_close(to_numpy(got[1]), expected[1], atol=1e-6)


@pytest.mark.slow
def test_torch_compile_fullgraph() -> None:
    torch = pytest.importorskip("torch")
    config = {"head_dim": 16, "rope_parameters": {"rope_type": "llama3", "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 64, "rope_theta": 5e5}}  # fmt: skip
    compiled = torch.compile(
        lambda p: rope_cos_sin(p, config, layout="interleaved"), fullgraph=True
    )
    pos = torch.arange(100_000, 100_008)[None]
    got = compiled(pos)
    expected = rope_cos_sin(pos.numpy(), config, layout="interleaved")
    assert_close(got[0].numpy(), expected[0], atol=1e-6)
    assert_close(got[1].numpy(), expected[1], atol=1e-6)


def test_tf_function_jit_compile_and_unknown_shapes() -> None:
    tf = pytest.importorskip("tensorflow")
    expected = rope_cos_sin(np.arange(100_000, 100_006)[None], 16, spec=YARN, layout="half_width")
    for kwargs in (
        {"jit_compile": True},
        {"input_signature": [tf.TensorSpec([None, None], tf.int32)]},
    ):
        fn = tf.function(lambda p: rope_cos_sin(p, 16, spec=YARN, layout="half_width"), **kwargs)
        got = fn(tf.constant(np.arange(100_000, 100_006, dtype=np.int32)[None]))
        assert_close(got[0].numpy(), expected[0], atol=1e-6)
        assert_close(got[1].numpy(), expected[1], atol=1e-6)


def test_host_tables_handed_out_are_copies() -> None:
    torch = pytest.importorskip("torch")
    cos, _ = rope_cos_sin(torch.arange(4), 8)
    cos.zero_()
    assert float(rope_cos_sin(torch.arange(4), 8)[0][0, 0]) == 1.0


# ------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim_or_config": 7}, ValueError, "head_dim"),
        ({"head_dim_or_config": 8.0}, TypeError, "head_dim_or_config"),
        ({"head_dim_or_config": True}, TypeError, "head_dim_or_config"),
        ({"head_dim_or_config": RopeSpec()}, TypeError, "spec=spec"),
        ({"layout": "rotate"}, ValueError, "layout"),
        ({"spec": RopeSpec(layout="interleaved"), "layout": "half"}, ValueError, "pairs"),
        ({"spec": {"base": 10.0}}, TypeError, "RopeSpec"),
        ({"head_dim_or_config": {"head_dim": 8}, "spec": RopeSpec()}, ValueError, "not both"),
        ({"layer_type": "full_attention"}, ValueError, "model config"),
        ({"spec": RopeSpec(rotary_dim=16)}, ValueError, "rotary_dim"),
        ({"dtype": "int32"}, ValueError, "dtype"),
    ],
)
def test_refusals(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    kwargs = {"head_dim_or_config": 8, **kwargs}
    with pytest.raises(error, match=match):
        rope_cos_sin(np.arange(3), **kwargs)


def test_refuses_non_finite_positions_and_traced_dynamic() -> None:
    with pytest.raises(ValueError, match="positions"):
        rope_cos_sin(np.array([0.0, np.nan]), 8)
    jax = pytest.importorskip("jax")
    spec = RopeSpec(scaling={"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 8})
    with pytest.raises(ValueError, match="seq_len"):
        jax.jit(lambda p: rope_cos_sin(p, 8, spec=spec))(jax.numpy.arange(4))
