"""What a first session with pe_core meets: reprs, misspelt keys, meta tensors, signatures.

* Layer reprs show the values a layer computes with (the ``rope_theta`` and scaling read
  from a model config, not the ``base`` argument's default).
* A misspelt ``rope_type`` value or key is reported with the close match and the allowed
  values; a model config's top-level key one or two edits from a key pe_core reads warns
  (``RopeConfigWarning``), and ``RopeSpec`` checks a model config at construction.
* Tensors on PyTorch's ``meta`` device give meta results of the right shape and dtype.
* Flax layers show their constructor's parameters to :func:`inspect.signature`.

The Keras reprs are checked in ``tests/test_layers_keras.py`` (one subprocess per
backend); real configs not warning and ``seq_len=0`` against transformers in
``tests/test_model_configs.py``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from pe_core import RopeSpec, apply_rope, encode
from pe_core.rope_scaling import RopeConfigWarning, rope_frequencies

LLAMA3 = {
    "head_dim": 16,
    "rope_theta": 500000.0,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
LLAMA3_TEXT = (
    "head_dim=16, base=500000, layout='half', rope_type='llama3', factor=8.0, "
    "low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192"
)
LONGROPE = {  # original_max_position_embeddings top-level: Phi-3's place for it
    "head_dim": 8,
    "max_position_embeddings": 64,
    "original_max_position_embeddings": 16,
    "rope_scaling": {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.5, 2.0, 3.0],
        "long_factor": [2.0, 3.0, 5.0, 7.0],
    },
}


# --------------------------------------------------------------------------- misspelt keys


@pytest.mark.parametrize(
    ("scaling", "pattern"),
    [
        ({"rope_type": "linaer", "factor": 2}, r"'linaer' \(did you mean 'linear'\?\).*llama3"),
        ({"rope_typ": "linear", "factor": 2}, r"'rope_typ' \(did you mean 'rope_type'\?\).*yarn"),
        ({"rope_type": "linear", "factr": 2}, r"'factr' \(did you mean 'factor'\?\).*Expected"),
        ({"rope_scaling": {"type": "dynamc", "factor": 2}}, r"did you mean 'dynamic'"),
    ],
)
def test_misspelt_rope_types_and_keys_name_the_close_match(scaling, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        RopeSpec(scaling=scaling)  # at construction, a model config too
    with pytest.raises(ValueError, match=pattern):
        apply_rope(np.ones((3, 8), np.float32), range(3), scaling=scaling)


def test_a_model_config_is_checked_when_the_spec_is_built() -> None:
    bad = {**LLAMA3, "rope_scaling": {**LLAMA3["rope_scaling"], "low_freq_factr": 1.0}}
    with pytest.raises(ValueError, match=r"'low_freq_factr' \(did you mean 'low_freq_factor'"):
        RopeSpec(scaling=bad)
    nested = {"head_dim": 8, "rope_parameters": {"full_attention": {"rope_type": "lineer"}}}
    with pytest.raises(ValueError, match="did you mean 'linear'"):
        RopeSpec(scaling=nested, layer_type="full_attention")


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("rope_thetta", "rope_theta"),
        ("rope_scalling", "rope_scaling"),
        ("partial_rotary_factr", "partial_rotary_factor"),
        ("max_position_embedings", "max_position_embeddings"),
        ("haed_dim", "head_dim"),
    ],
)
def test_a_misspelt_config_key_warns_naming_the_key_read(key: str, meant: str) -> None:
    config = {"head_dim": 8, "vocab_size": 32000, key: LLAMA3.get(meant, 0.5)}
    if meant == "head_dim":
        config = {"hidden_size": 64, "num_attention_heads": 8, key: 16}
    with pytest.warns(RopeConfigWarning, match=rf"'{key}' \(did you mean '{meant}'\?\)"):
        rope_frequencies(config)
    with pytest.warns(RopeConfigWarning, match=rf"'{key}'"):
        RopeSpec(scaling=config)


# --------------------------------------------------------------------------- reprs


def _torch_layers(T):
    return {
        "RotaryEmbedding(16, scaling=LLAMA3)": (
            T.RotaryEmbedding(16, base=20000.0, scaling=LLAMA3),
            LLAMA3_TEXT,
        ),
        "RotaryEmbedding longrope": (
            T.RotaryEmbedding(8, scaling=LONGROPE),
            "rope_type='longrope', short_factor=[1.0, 1.5, 2.0, 3.0], long_factor=[2.0, 3.0, "
            "5.0, 7.0], original_max_position_embeddings=16, max_position_embeddings=64, "
            "attention_factor=1.224744871391589",
        ),
        "RotaryEmbedding partial": (
            T.RotaryEmbedding(16, scaling={"head_dim": 16, "partial_rotary_factor": 0.5}),
            "head_dim=16, base=10000, layout='half', rotary_dim=8",
        ),
        "SinusoidalEncoding": (
            T.SinusoidalEncoding(16, max_len=32),
            "d_model=16, spec='vaswani' (base=10000, layout='interleaved'), max_len=32",
        ),
        "RotaryEmbeddingND": (
            T.RotaryEmbeddingND(16, sections=(4, 4)),
            "head_dim=16, sections=(4, 4), base=10000, layout='half'",
        ),
        "SinusoidalPatchEncoding": (
            T.SinusoidalPatchEncoding(16, grid_shape=(2, 2), spec="mae_2d"),
            "d_model=16, grid_shape=(2, 2), spec='mae_2d' (base=10000,",
        ),
        "T5RelativeBias": (
            T.T5RelativeBias(4),
            "n_heads=4, num_buckets=32, max_distance=128, bidirectional=True",
        ),
        "AlibiBias": (T.AlibiBias(4), "n_heads=4, alibi_bias_max=8.0, causal=True"),
        "FourierFeatures": (
            T.FourierFeatures(2, 4, scale=10.0),
            "in_features=2, num_frequencies=4, scale=10.0, trainable=False, order='sin_cos'",
        ),
        "RelativePositionBias": (
            T.RelativePositionBias((2, 2), 4),
            "window_size=(2, 2), n_heads=4, prefix_tokens=0",
        ),
        "Timesteps": (
            T.Timesteps(8, True, 0, scale=1000),
            "num_channels=8, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000",
        ),
    }


def test_torch_reprs_show_the_values_used() -> None:
    T = pytest.importorskip("pe_core.layers.torch")
    for name, (layer, text) in _torch_layers(T).items():
        assert text in repr(layer), (name, repr(layer))
        assert "scaling=" not in repr(layer)  # the rope applied, not the whole config
    assert "base=20000" not in repr(T.RotaryEmbedding(16, base=20000.0, scaling=LLAMA3))
    assert "attention_factor" in repr(
        T.RotaryEmbedding(
            8, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
        )
    )


def test_flax_reprs_show_the_values_used() -> None:
    pytest.importorskip("flax")
    from flax import nnx

    import pe_core.layers.flax as F

    rngs = nnx.Rngs(0)
    layers = {
        "RotaryEmbedding": (F.RotaryEmbedding(16, scaling=LLAMA3), LLAMA3_TEXT),
        "LinenRotaryEmbedding": (F.LinenRotaryEmbedding(16, scaling=LLAMA3), LLAMA3_TEXT),
        "SinusoidalEncoding": (F.SinusoidalEncoding(16), "spec='vaswani' (base=10000,"),
        "LinenSinusoidalEncoding": (F.LinenSinusoidalEncoding(16), "spec='vaswani' (base=10000,"),
        "RotaryEmbeddingND": (F.RotaryEmbeddingND(16, sections=(4, 4)), "base=10000"),
        "LinenRotaryEmbeddingND": (F.LinenRotaryEmbeddingND(16, sections=(4, 4)), "base=10000"),
        "SinusoidalPatchEncoding": (F.SinusoidalPatchEncoding(16, grid_shape=(2, 2)), "(2, 2)"),
        "LinenSinusoidalPatchEncoding": (F.LinenSinusoidalPatchEncoding(16, (2, 2)), "(2, 2)"),
        "T5RelativeBias": (F.T5RelativeBias(4, rngs=rngs), "n_heads=4, num_buckets=32"),
        "LinenT5RelativeBias": (F.LinenT5RelativeBias(4), "n_heads=4, num_buckets=32"),
        "AlibiBias": (F.AlibiBias(4), "n_heads=4, alibi_bias_max=8.0, causal=True"),
        "LinenAlibiBias": (F.LinenAlibiBias(4), "n_heads=4, alibi_bias_max=8.0, causal=True"),
        "FourierFeatures": (F.FourierFeatures(2, 4), "in_features=2, num_freq"),
        "LinenFourierFeatures": (F.LinenFourierFeatures(2, 4), "in_features=2, num_freq"),
        "RelativePositionBias": (F.RelativePositionBias((2, 2), 4), "n_heads=4"),
        "LinenRelativePositionBias": (F.LinenRelativePositionBias((2, 2), 4), "n_heads=4"),
        "Timesteps": (F.Timesteps(8, True, 0), "num_channels=8, flip_sin_to_cos=True"),
        "LinenTimesteps": (F.LinenTimesteps(8, True, 0), "num_channels=8, flip_sin_to_cos=True"),
    }
    for name, (layer, text) in layers.items():
        for shown in (repr(layer), str(layer)):
            assert shown.startswith(f"{name}(") and text in shown, (name, shown)


def test_flax_layers_show_their_constructor_signature() -> None:
    pytest.importorskip("flax")
    import pe_core.layers.flax as F

    classes = [getattr(F, name) for name in F.__all__ if isinstance(getattr(F, name), type)]
    assert len(classes) >= 18
    for cls in classes:
        params = inspect.signature(cls).parameters
        kinds = {p.kind for p in params.values()}
        assert inspect.Parameter.VAR_POSITIONAL not in kinds, (cls.__name__, params)
        first = next(iter(params))
        assert first in {
            "head_dim",
            "d_model",
            "n_heads",
            "in_features",
            "window_size",
            "num_channels",
        }, (cls.__name__, params)
        if not cls.__name__.startswith("Linen"):  # the constructor's, **kwargs for NNX's own
            init = [
                p
                for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                if p.kind is not inspect.Parameter.VAR_KEYWORD
            ]
            shown = list(params.values())
            assert [p.name for p in shown[: len(init)]] == [p.name for p in init], cls.__name__
            assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in shown[len(init) :])
    rope = F.RotaryEmbedding(8)
    assert list(inspect.signature(rope).parameters)[:2] == ["q", "k"]  # the instance's call


# --------------------------------------------------------------------------- meta tensors


def test_meta_tensors_give_meta_results_of_the_right_shape() -> None:
    torch = pytest.importorskip("torch")
    import pe_core.layers.torch as T

    def run(device: str) -> list:
        x = torch.zeros(2, 5, 16, device=device)
        layers = _torch_layers(T)
        calls = [
            lambda: apply_rope(x, range(5)),
            lambda: apply_rope(x.half(), torch.arange(5, device=device), rotary_dim=8),
            lambda: apply_rope((x, x.double()), range(2, 7), scaling=LLAMA3),
            lambda: encode(range(5), 16, like=x),
            lambda: encode(torch.arange(5, device=device), 16),
            lambda: layers["RotaryEmbedding(16, scaling=LLAMA3)"][0](x, x, offset=3),
            lambda: T.RotaryEmbedding(16, trainable_frequencies=True).to(device)(x, x),
            lambda: layers["SinusoidalEncoding"][0].to(device)(x),
            lambda: layers["RotaryEmbeddingND"][0](
                x[:, :4], x[:, :4], torch.zeros(4, 2, device=device)
            ),
            lambda: layers["SinusoidalPatchEncoding"][0](x[:, :4]),
            lambda: layers["T5RelativeBias"][0].to(device)(5, 7),
            lambda: layers["FourierFeatures"][0].to(device)(x[..., :2]),
            lambda: layers["RelativePositionBias"][0].to(device)(),
            lambda: layers["Timesteps"][0](torch.zeros(3, device=device)),
        ]
        out = []
        for call in calls:
            result = call()
            for t in result if isinstance(result, tuple) else (result,):
                out.append((t.device.type, tuple(t.shape), t.dtype))
        return out

    cpu, meta = run("cpu"), run("meta")
    assert {device for device, *_ in meta} == {"meta"}
    assert [rest for _, *rest in meta] == [rest for _, *rest in cpu]
