"""Flax layers (NNX and linen): values, jax.jit, jax.vmap, nnx.scan / nn.scan, validation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

import flax.linen as nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

import pe_core  # noqa: E402
from pe_core import device_tables  # noqa: E402
from pe_core.layers.flax import (  # noqa: E402
    LinenRotaryEmbedding,
    LinenSinusoidalEncoding,
    RotaryEmbedding,
    SinusoidalEncoding,
)
from pe_core.rope import apply_rope  # noqa: E402

D = 16
BATCH, SEQ = 3, 6
OFFSETS = np.array([0, 7, 100_000])


def reference(offsets: np.ndarray, length: int = SEQ, spec: str = "vaswani") -> np.ndarray:
    """``(batch, length, D)`` float64 encodings of each example's positions."""
    return np.stack(
        [pe_core.encode(np.arange(o, o + length), D, spec=spec, dtype="float64") for o in offsets]
    )


@pytest.fixture
def x() -> jax.Array:
    return jax.random.normal(jax.random.key(0), (BATCH, SEQ, D))


def nnx_layer(**kwargs: object) -> SinusoidalEncoding:
    return SinusoidalEncoding(D, **kwargs)


def linen_layer(**kwargs: object):
    layer = LinenSinusoidalEncoding(D, **kwargs)
    return lambda *args, **kw: layer.apply({}, *args, **kw)


MAKERS = {"nnx": nnx_layer, "linen": linen_layer}


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("api", MAKERS)
def test_values_int_and_per_example_offsets(api: str, x: jax.Array) -> None:
    layer = MAKERS[api](spec="fairseq")
    checks = {"atol": 1e-6, "rtol": 1e-7, "backend": "jax", "dtype": "float32"}
    got = layer(x, 5) - x
    assert_close(got, reference([5, 5, 5], spec="fairseq"), **checks)
    got = layer(x, jnp.asarray(OFFSETS)) - x
    assert_close(got, reference(OFFSETS, spec="fairseq"), **checks)
    got = layer(x, OFFSETS.astype(np.int32)) - x  # NumPy offsets too
    assert_close(got, reference(OFFSETS, spec="fairseq"), **checks)


@pytest.mark.parametrize("api", MAKERS)
def test_max_len_only_bounds_a_cache(api: str, x: jax.Array) -> None:
    cached, plain = MAKERS[api](max_len=8), MAKERS[api]()
    for offset in (0, 2, 3, 50):  # 3 + 6 > 8 and 50 are computed on the fly
        assert_close(cached(x, offset), plain(x, offset), atol=1e-6, rtol=1e-7, backend="jax")


@pytest.mark.parametrize("api", MAKERS)
def test_bfloat16_only_rounds_the_output(api: str) -> None:
    layer = MAKERS[api]()
    y = layer(jnp.zeros((1, 300, D), jnp.bfloat16), 1000)
    # the float32 encoding (exact angles, JAX's float32 sin/cos), rounded once
    expected = pe_core.encode(jnp.arange(1000, 1300), D).astype(jnp.bfloat16)
    assert_equal(y[0], expected, backend="jax", dtype="bfloat16")


# --------------------------------------------------------------------------- transforms


@pytest.mark.parametrize("api", MAKERS)
def test_jit_traces_once_for_new_offsets(api: str, x: jax.Array) -> None:
    layer = MAKERS[api]()
    traces = []

    @jax.jit
    def f(x, offsets):
        traces.append(1)
        return layer(x, offsets)

    for shift in (0, 1, 2**20):
        offsets = jnp.asarray(OFFSETS + shift, dtype=jnp.int32)
        got = f(x, offsets) - x
        assert_close(got, reference(OFFSETS + shift), atol=2e-6, rtol=1e-7, backend="jax")
    assert len(traces) == 1
    static = jax.jit(lambda x: layer(x, 9))(x)  # an int offset is a compile-time constant
    assert_close(static - x, reference([9, 9, 9]), atol=1e-6, rtol=1e-7, backend="jax")


@pytest.mark.parametrize("api", MAKERS)
def test_vmap_over_examples(api: str, x: jax.Array) -> None:
    layer = MAKERS[api]()
    offsets = jnp.asarray(OFFSETS, dtype=jnp.int32)
    per_example = jax.vmap(lambda xi, oi: layer(xi, oi))(x, offsets)  # xi: (seq, d_model)
    assert_close(per_example, layer(x, offsets), atol=1e-6, rtol=1e-7, backend="jax")


def test_nnx_scan_decodes_token_by_token(x: jax.Array) -> None:
    layer = SinusoidalEncoding(D)

    @nnx.scan(in_axes=(None, nnx.Carry, 1), out_axes=(nnx.Carry, 1))
    def decode(layer, step, token):  # token: (batch, d_model)
        return step + 1, layer(token[:, None, :], step)[:, 0]

    _, y = decode(layer, jnp.int32(4), x)
    assert_close(y, layer(x, 4), atol=1e-6, rtol=1e-7, backend="jax")


def test_linen_scan_decodes_token_by_token(x: jax.Array) -> None:
    class Step(nn.Module):
        @nn.compact
        def __call__(self, step, token):
            return step + 1, LinenSinusoidalEncoding(D)(token[:, None, :], step)[:, 0]

    decode = nn.scan(
        Step, variable_broadcast="params", split_rngs={"params": False}, in_axes=1, out_axes=1
    )
    _, y = decode().apply({}, jnp.int32(4), x)
    assert_close(y, linen_layer()(x, 4), atol=1e-6, rtol=1e-7, backend="jax")


def test_nnx_dropout_and_jit() -> None:
    layer = SinusoidalEncoding(D, dropout=0.5, rngs=nnx.Rngs(dropout=0))
    x = jnp.ones((4, 8, D))
    y = nnx.jit(lambda m, x: m(x))(layer, x)
    assert bool((y == 0).any())
    layer.eval()
    assert_close(layer(x), SinusoidalEncoding(D)(x), atol=0, rtol=1e-7, backend="jax")


def test_linen_dropout() -> None:
    layer = LinenSinusoidalEncoding(D, dropout=0.5)
    x = jnp.ones((4, 8, D))
    y = layer.apply({}, x, deterministic=False, rngs={"dropout": jax.random.key(0)})
    assert bool((y == 0).any())
    want = LinenSinusoidalEncoding(D).apply({}, x)
    assert_close(layer.apply({}, x), want, atol=0, rtol=1e-7, backend="jax")


# --------------------------------------------------------------------------- RotaryEmbedding


def rope_nnx(**kwargs: object):
    return RotaryEmbedding(8, **kwargs)


def rope_linen(**kwargs: object):
    layer = LinenRotaryEmbedding(8, **kwargs)
    return lambda *args, **kw: layer.apply({}, *args, **kw)


ROPES = {"nnx": rope_nnx, "linen": rope_linen}


@pytest.mark.parametrize("api", ROPES)
def test_rotary_matches_apply_rope(api: str) -> None:
    kwargs = {"base": 500.0, "layout": "interleaved", "rotary_dim": 4}
    rope = ROPES[api](**kwargs, scaling={"rope_type": "linear", "factor": 2.0})
    kwargs["scaling"] = {"rope_type": "linear", "factor": 2.0}
    q, k = jax.random.normal(jax.random.key(1), (2, 2, 3, 5, 8))  # (batch, heads, seq, hd)
    q1, _ = rope(q, k, offset=4)
    checks = {"rtol": 1e-7, "backend": "jax", "dtype": "float32"}
    assert_close(q1, apply_rope(q, np.arange(4, 9), **kwargs), atol=1e-6, **checks)
    offsets = jnp.array([0, 1000])
    q2, k2 = jax.jit(rope)(q, k, offset=offsets)
    for b, start in enumerate((0, 1000)):
        want = apply_rope(k[b], np.arange(start, start + 5), **kwargs)
        assert_close(k2[b], want, atol=2e-6, **checks)
    positions = jnp.array([3, 1, 4, 1, 5])
    q3, _ = rope(q, k, positions=positions)
    assert_close(q3, apply_rope(q, positions, **kwargs), atol=1e-6, **checks)
    per_example = jax.vmap(lambda qi, ki, oi: rope(qi, ki, offset=oi))(q, k, offsets)
    assert_close(per_example[0], q2, atol=2e-6, **checks)


def test_rotary_under_scan() -> None:
    rope = RotaryEmbedding(8)
    q = jax.random.normal(jax.random.key(2), (2, 5, 8))  # (batch, seq, head_dim)

    def step(offset, token):  # token: (batch, head_dim)
        rotated, _ = rope(token[:, None], token[:, None], offset=offset)
        return offset + 1, rotated[:, 0]

    _, y = jax.lax.scan(step, jnp.int32(10), jnp.swapaxes(q, 0, 1))
    want = rope(q, q, offset=10)[0]
    assert_close(jnp.swapaxes(y, 0, 1), want, atol=1e-6, rtol=1e-7, backend="jax")

    class Step(nn.Module):
        @nn.compact
        def __call__(self, offset, token):
            rotated, _ = LinenRotaryEmbedding(8)(token[:, None], token[:, None], offset=offset)
            return offset + 1, rotated[:, 0]

    decode = nn.scan(
        Step, variable_broadcast="params", split_rngs={"params": False}, in_axes=1, out_axes=1
    )
    _, y = decode().apply({}, jnp.int32(10), q)
    assert_close(y, rope(q, q, offset=10)[0], atol=1e-6, rtol=1e-7, backend="jax")


# --------------------------------------------------------------------------- placed tables


@pytest.mark.parametrize("max_len", [None, 64])
@pytest.mark.parametrize("api", MAKERS)
def test_a_repeated_int_offset_reuses_the_placed_table(
    api: str, max_len: int | None, x: jax.Array, placements: list
) -> None:
    layer = MAKERS[api](max_len=max_len)
    first = layer(x, 9)
    assert placements == [(SEQ, D)]
    second = layer(x, 9)
    assert placements == [(SEQ, D)]  # neither built nor moved again
    assert_close(first - x, reference([9] * BATCH), atol=1e-6, backend="jax", dtype="float32")
    assert_equal(second, first)
    layer(x, 10)  # other rows: their own table
    layer(x.astype(jnp.bfloat16), 9)  # another dtype: its own table
    assert placements == [(SEQ, D)] * 3


def test_traced_calls_keep_the_traced_path(x: jax.Array, placements: list) -> None:
    layer = SinusoidalEncoding(D, max_len=64)
    misses = device_tables.stats()["misses"]
    got = jax.jit(lambda x: layer(x, 9))(x)
    assert device_tables.stats()["misses"] == misses  # the cache was not asked
    assert_close(got - x, reference([9] * BATCH), atol=1e-6, backend="jax", dtype="float32")


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("cls", [SinusoidalEncoding, LinenSinusoidalEncoding])
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": 0}, ValueError, "d_model must be an integer >= 1.*Received: 0"),
        ({"d_model": 9}, ValueError, "d must be even.*d=9"),
        ({"d_model": 8, "spec": "bert"}, ValueError, "Unknown preset 'bert'"),
        ({"d_model": 8, "dropout": 1.0}, ValueError, r"dropout must be a number in \[0, 1\)"),
        ({"d_model": 8, "max_len": -1}, ValueError, "max_len must be None or a positive"),
    ],
)
def test_sinusoidal_constructors_validate(cls: type, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        cls(**kwargs)


@pytest.mark.parametrize("cls", [RotaryEmbedding, LinenRotaryEmbedding])
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim": 7}, ValueError, "head_dim must be even"),
        ({"head_dim": 8, "base": 0.5}, ValueError, "base"),
        ({"head_dim": 8, "layout": "neox"}, ValueError, "Unknown layout 'neox'"),
        ({"head_dim": 8, "rotary_dim": 10}, ValueError, "at most head_dim=8"),
        ({"head_dim": 8, "scaling": {"rope_type": "bogus"}}, ValueError, "bogus"),
    ],
)
def test_rotary_constructors_validate(cls: type, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        cls(**kwargs)


@pytest.mark.parametrize("api", MAKERS)
def test_call_time_errors(api: str) -> None:
    layer = MAKERS[api]()
    with pytest.raises(ValueError, match="has 12 features but the layer was built with d_model=16"):
        layer(jnp.zeros((2, 3, 12)))
    with pytest.raises(TypeError, match="offset must be an int"):
        layer(jnp.zeros((2, 3, D)), 1.5)
    with pytest.raises(ValueError, match=r"offset of shape \(3,\)"):
        layer(jnp.zeros((2, 3, D)), jnp.array([1, 2, 3]))
    with pytest.raises(TypeError, match="floating"):
        layer(jnp.zeros((2, 3, D), jnp.int32))
    rope = ROPES[api]()
    with pytest.raises(ValueError, match="has 6 features but the layer was built with head_dim=8"):
        rope(jnp.zeros((1, 2, 8)), jnp.zeros((1, 2, 6)))
    with pytest.raises(ValueError, match="either positions or offset"):
        rope(jnp.zeros((1, 2, 8)), jnp.zeros((1, 2, 8)), positions=jnp.arange(2), offset=1)
