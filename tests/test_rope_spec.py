"""RopeSpec: frozen, validated RoPE configuration; the registry of scaling types."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import assert_close, assert_equal, positions_on
from hypothesis import given
from hypothesis import strategies as st

from pe_core import RopeSpec, apply_rope
from pe_core import rope_spec as rope_spec_module
from pe_core.rope_scaling import SCALING_TYPES, RopeScalingType, ScalingInputs, rope_frequencies
from pe_core.rope_spec import FrozenMapping, freeze, thaw

ATOL32 = 4e-6


def reference_rope(x: np.ndarray, pos: np.ndarray, inv_freq: np.ndarray, layout: str) -> np.ndarray:
    """Float64 rotation of the first ``2 * len(inv_freq)`` features by ``pos * inv_freq``."""
    x = np.asarray(x, dtype=np.float64)
    n = len(inv_freq)
    theta = np.asarray(pos, dtype=np.float64)[..., None] * np.asarray(inv_freq)
    cos, sin = np.cos(theta), np.sin(theta)
    out = x.copy()
    if layout == "half":
        a, b = x[..., :n], x[..., n : 2 * n]
        out[..., :n], out[..., n : 2 * n] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
        out[..., 0 : 2 * n : 2], out[..., 1 : 2 * n : 2] = a * cos - b * sin, b * cos + a * sin
    return out


def plain_inv_freq(base: float, dim: int) -> np.ndarray:
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


# --------------------------------------------------------------------------- the spec


def test_spec_is_frozen_hashable_and_equal_by_value():
    a = RopeSpec(
        scaling={"rope_type": "longrope", "short_factor": [1.0, 2.0], "long_factor": [3, 4]}
    )
    b = RopeSpec(
        scaling={"rope_type": "longrope", "short_factor": [1.0, 2.0], "long_factor": [3, 4]}
    )
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert isinstance(a.scaling, FrozenMapping) and a.scaling["short_factor"] == (1.0, 2.0)
    assert a != RopeSpec(layout="interleaved")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.base = 2.0  # type: ignore[misc]


def test_freeze_and_thaw_round_trip():
    config = {"a": [1, {"b": np.float64(2.5)}], "c": np.array([1, 2])}
    frozen = freeze(config)
    hash(frozen)
    assert thaw(frozen) == {"a": [1, {"b": 2.5}], "c": [1, 2]}
    assert frozen == {"a": (1, {"b": 2.5}), "c": (1, 2)}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"base": 1.0}, ValueError, r"base \(rope_theta\) must be a finite number > 1"),
        ({"base": float("inf")}, ValueError, r"base \(rope_theta\) must be a finite number"),
        ({"base": "1e4"}, TypeError, r"base \(rope_theta\) must be a finite number"),
        ({"layout": "neox"}, ValueError, r"Unknown layout 'neox'. Expected one of: half"),
        ({"rotary_dim": 3}, ValueError, r"rotary_dim must be even"),
        ({"rotary_dim": 0}, ValueError, r"rotary_dim must be an integer >= 2"),
        ({"rotary_dim": 4.0}, TypeError, r"rotary_dim must be an integer >= 2"),
        ({"scaling": [("rope_type", "linear")]}, TypeError, r"scaling must be a mapping"),
        ({"scaling": {"rope_type": "bogus"}}, ValueError, r"Unknown rope_type 'bogus'"),
        ({"scaling": {"rope_type": "linear", "fctor": 2}}, ValueError, r"Unknown key 'fctor'"),
        ({"scaling": {"rope_type": "linear"}}, ValueError, r"requires the key 'factor'"),
        ({"layer_type": 3, "scaling": {}}, TypeError, r"layer_type must be a string or None"),
        ({"layer_type": "full_attention"}, ValueError, r"but scaling is None"),
        (
            {"layer_type": "full_attention", "scaling": {"rope_type": "default"}},
            ValueError,
            r"scaling is a rope-parameters dict",
        ),
    ],
)
def test_spec_validates_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        RopeSpec(**kwargs)


def test_spec_checks_head_dim_when_building_constants():
    with pytest.raises(ValueError, match="head_dim must be even"):
        RopeSpec().constants(7)
    with pytest.raises(ValueError, match="rotary_dim must be even and at most head_dim=8"):
        RopeSpec(rotary_dim=16).constants(8)
    with pytest.raises(ValueError, match="partial_rotary_factor must be in"):
        RopeSpec(scaling={"rope_type": "default", "partial_rotary_factor": 2.0}).constants(8)


@given(
    base=st.floats(2.0, 1e6),
    dim=st.sampled_from([2, 4, 8, 64]),
    factor=st.floats(0.25, 64.0),
)
def test_constants_match_independent_formula(base, dim, factor):
    spec = RopeSpec(base=base, scaling={"rope_type": "linear", "factor": factor})
    inv_freq, attention_factor = spec.constants(dim)
    assert_close(inv_freq, plain_inv_freq(base, dim) / factor, rtol=1e-14, atol=0)
    assert attention_factor == 1.0


def test_spec_reads_a_config_object_and_a_layer_type():
    gemma3 = {
        "head_dim": 8,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }

    class Config:
        def to_dict(self):
            return gemma3

    sliding = RopeSpec(scaling=Config(), layer_type="sliding_attention")
    assert_close(sliding.constants(8)[0], plain_inv_freq(1e4, 8), rtol=1e-15, atol=0)
    full = RopeSpec(scaling=gemma3, layer_type="full_attention")
    assert_close(full.constants(8)[0], plain_inv_freq(1e6, 8) / 8, rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match="Unknown layer_type 'global'"):
        RopeSpec(scaling=gemma3, layer_type="global")


@given(
    layout=st.sampled_from(["half", "interleaved"]),
    rotary_dim=st.sampled_from([None, 4]),
    scaling=st.sampled_from(
        [
            None,
            {"rope_type": "linear", "factor": 2.0},
            {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 4},
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        ]
    ),
)
def test_apply_rope_with_spec_equals_keywords_numpy(layout, rotary_dim, scaling):
    x = np.random.default_rng(0).standard_normal((2, 7, 8)).astype(np.float32)
    kwargs = {"base": 500.0, "layout": layout, "rotary_dim": rotary_dim, "scaling": scaling}
    want = apply_rope(x, np.arange(7), **kwargs)
    got = apply_rope(x, np.arange(7), spec=RopeSpec(**kwargs))
    assert_equal(got, want)


def test_apply_rope_with_spec_on_every_backend(backend):
    x = np.random.default_rng(1).standard_normal((3, 5, 8)).astype(np.float32)
    pos = np.arange(5) + 1000
    spec = RopeSpec(
        base=100.0, layout="interleaved", scaling={"rope_type": "linear", "factor": 4.0}
    )
    from pe_core_backends import get_namespace

    out = apply_rope(get_namespace(backend).asarray(x), positions_on(backend, pos), spec=spec)
    expected = reference_rope(x, pos, plain_inv_freq(100.0, 8) / 4.0, "interleaved")
    assert_close(out, expected, atol=ATOL32, backend=backend, dtype="float32")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": 500.0},
        {"layout": "interleaved"},
        {"rotary_dim": 4},
        {"scaling": {"rope_type": "linear", "factor": 2.0}},
        {"layer_type": "sliding_attention"},
    ],
)
def test_spec_and_the_same_keywords_together_are_refused(kwargs):
    with pytest.raises(ValueError, match="either as spec= or as"):
        apply_rope(np.ones((2, 4), np.float32), range(2), spec=RopeSpec(), **kwargs)
    with pytest.raises(TypeError, match="spec must be a RopeSpec"):
        apply_rope(np.ones((2, 4), np.float32), range(2), spec={"base": 2.0})


# --------------------------------------------------------------------------- the registry


def _halved(inputs: ScalingInputs) -> tuple[np.ndarray, float]:
    """A toy type: plain RoPE frequencies divided by ``2 * divisor``, attention 0.5."""
    divisor = float(inputs.params["divisor"])
    return plain_inv_freq(inputs.theta, inputs.rotary_dim) / (2 * divisor), 0.5


def _by_length(inputs: ScalingInputs) -> tuple[np.ndarray, float]:
    """A toy type whose frequencies shrink with the sequence length."""
    length = 1 if inputs.seq_len is None else inputs.seq_len
    return plain_inv_freq(inputs.theta, inputs.rotary_dim) / length, 1.0


@pytest.fixture
def toy_types(monkeypatch):
    """Register two toy types for one test, then remove them and their cached constants."""
    monkeypatch.setitem(
        SCALING_TYPES, "toy_halved", RopeScalingType(_halved, required=("divisor",))
    )
    monkeypatch.setitem(
        SCALING_TYPES, "toy_by_length", RopeScalingType(_by_length, needs_seq_len=True)
    )
    yield
    monkeypatch.undo()
    rope_spec_module._cached_rope_constants.cache_clear()
    with pytest.raises(ValueError, match="Unknown rope_type 'toy_halved'"):
        rope_frequencies({"head_dim": 8, "rope_parameters": {"rope_type": "toy_halved"}})


def test_a_registered_type_works_through_apply_rope(toy_types, backend):
    from pe_core_backends import get_namespace

    x = np.random.default_rng(2).standard_normal((2, 6, 8)).astype(np.float32)
    pos = np.arange(6) + 37
    scaling = {"rope_type": "toy_halved", "divisor": 3.0}
    out = apply_rope(get_namespace(backend).asarray(x), positions_on(backend, pos), scaling=scaling)
    expected = reference_rope(x, pos, plain_inv_freq(10000.0, 8) / 6.0, "half") * 0.5
    assert_close(out, expected, atol=ATOL32, backend=backend)
    with pytest.raises(ValueError, match="requires the key 'divisor'"):
        RopeSpec(scaling={"rope_type": "toy_halved"})
    with pytest.raises(ValueError, match="Unknown key 'factor'"):
        RopeSpec(scaling={"rope_type": "toy_halved", "divisor": 2, "factor": 2})


def test_a_registered_seq_len_type_gets_max_pos_plus_one(toy_types):
    x = np.random.default_rng(3).standard_normal((5, 4))
    pos = np.array([0, 3, 1, 9, 2])
    out = apply_rope(x, pos, scaling={"rope_type": "toy_by_length"})
    assert_close(
        out, reference_rope(x, pos, plain_inv_freq(1e4, 4) / 10, "half"), atol=0, rtol=1e-7
    )
    assert RopeSpec(scaling={"rope_type": "toy_by_length"}).needs_seq_len
    with pytest.raises(ValueError, match="rope_type 'toy_by_length' chooses its frequencies"):
        apply_rope(
            x, pos[:, None].repeat(2, 1), scaling={"rope_type": "toy_by_length"}, sections=(1, 1)
        )


@pytest.mark.parametrize("framework", ["torch", "keras", "flax"])
def test_a_registered_type_works_through_the_layers(toy_types, framework):
    pytest.importorskip(framework)
    x = np.random.default_rng(4).standard_normal((1, 2, 5, 8)).astype(np.float32)
    scaling = {"rope_type": "toy_halved", "divisor": 2.0}
    if framework == "torch":
        import torch

        from pe_core.layers.torch import RotaryEmbedding

        q, k = RotaryEmbedding(8, scaling=scaling)(torch.from_numpy(x), torch.from_numpy(x))
    elif framework == "keras":
        from pe_core.layers.keras import RotaryEmbedding

        q, k = RotaryEmbedding(8, scaling=scaling)(x, x)
    else:
        from pe_core.layers.flax import RotaryEmbedding

        q, k = RotaryEmbedding(8, scaling=scaling)(x, x)
    expected = reference_rope(x, np.arange(5), plain_inv_freq(1e4, 8) / 4.0, "half") * 0.5
    assert_close(q, expected, atol=ATOL32)
    assert_close(k, expected, atol=ATOL32)
