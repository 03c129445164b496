"""PyTorch layers: a drop-in for the textbook module, checkpoints, devices, compilation."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal

torch = pytest.importorskip("torch")

import pe_core  # noqa: E402
from pe_core.layers.torch import RotaryEmbedding, SinusoidalEncoding  # noqa: E402
from pe_core.rope import apply_rope  # noqa: E402


# The textbook module of ../shared/seeds/000_c1d67e8b74097198.txt, copied verbatim
# except for its debug print.
class PositionalEncoding(torch.nn.Module):
    def __init__(self, d_model=312, dropout=0.05, max_len=80):
        super().__init__()
        self.dropout = torch.nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].clone().detach().requires_grad_(False)
        return self.dropout(x)


def truth(positions: np.ndarray, d: int) -> np.ndarray:
    """float64 reference straight from the formula (positions small enough for float64)."""
    i = np.arange(0, d, 2)
    angles = np.asarray(positions, dtype=np.float64)[..., None] * np.exp(
        i * -(math.log(10000.0) / d)
    )
    out = np.empty((*angles.shape[:-1], d))
    out[..., 0::2], out[..., 1::2] = np.sin(angles), np.cos(angles)
    return out


# --------------------------------------------------------------------------- drop-in


@pytest.mark.parametrize("d_model", [312, 16])
def test_same_outputs_as_the_textbook_module(d_model: int) -> None:
    torch.manual_seed(0)
    textbook = PositionalEncoding(d_model, dropout=0.05, max_len=80).eval()
    ours = SinusoidalEncoding(d_model, dropout=0.05).eval()
    x = torch.randn(3, 80, d_model)
    assert_close(ours(x), textbook(x), atol=2e-5, backend="torch")  # same dtype and device
    # and ours is the closer one to the float64 formula
    exact = truth(np.arange(80), d_model)
    ours_error = np.abs(ours.encoding(80).double().numpy() - exact).max()
    textbook_error = np.abs(textbook.pe[0].double().numpy() - exact).max()
    assert ours_error <= 1e-6 and ours_error < textbook_error


def test_textbook_checkpoint_loads_strictly() -> None:
    class Model(torch.nn.Module):
        def __init__(self, positional: torch.nn.Module) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 16)
            self.pos_encoder = positional

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            return self.pos_encoder(self.embed(tokens))

    old = Model(PositionalEncoding(16, dropout=0.0, max_len=80)).eval()
    checkpoint = old.state_dict()
    assert "pos_encoder.pe" in checkpoint
    new = Model(SinusoidalEncoding(16)).eval()
    result = new.load_state_dict(checkpoint)  # strict=True: 'pe' is checked and dropped
    assert not result.missing_keys and not result.unexpected_keys
    tokens = torch.randint(0, 10, (2, 50))
    assert_close(new(tokens), old(tokens), atol=2e-5, rtol=1e-7, backend="torch")
    assert "pos_encoder.pe" not in new.state_dict()
    assert "pos_encoder.pe" in checkpoint  # the caller's dict is left alone
    new.load_state_dict(checkpoint, strict=False)  # the other documented way


def test_checkpoint_with_another_table_is_an_error() -> None:
    layer = SinusoidalEncoding(16)
    with pytest.raises(RuntimeError, match="32 features but the layer was built with d_model=16"):
        layer.load_state_dict(PositionalEncoding(32, max_len=10).state_dict())
    wrong = PositionalEncoding(16, max_len=10).state_dict()
    wrong["pe"] = wrong["pe"] * 2
    with pytest.raises(RuntimeError, match="differs from this layer's encoding"):
        layer.load_state_dict(wrong)
    # a table of another spec is caught too
    with pytest.raises(RuntimeError, match="'whisper'"):
        SinusoidalEncoding(16, spec="whisper").load_state_dict(
            PositionalEncoding(16, max_len=10).state_dict()
        )


def test_nothing_in_state_dict() -> None:
    for layer in (SinusoidalEncoding(8), SinusoidalEncoding(8, max_len=64, dropout=0.1)):
        layer(torch.zeros(1, 4, 8))
        assert dict(layer.state_dict()) == {}
        assert list(layer.buffers()) == [] and list(layer.parameters()) == []


# --------------------------------------------------------------------------- offsets, max_len


def test_offsets_int_and_per_example() -> None:
    layer = SinusoidalEncoding(16)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    full = truth(np.arange(100), 16)
    want = np.broadcast_to(full[7:12], (3, 5, 16))
    assert_close(layer(x, offset=7) - x, want, atol=0, rtol=1e-7, backend="torch", dtype="float64")
    offsets = torch.tensor([0, 40, 91])
    got = layer(x, offset=offsets) - x
    for b, start in enumerate(offsets.tolist()):
        assert_close(got[b], full[start : start + 5], atol=1e-12, rtol=1e-7, backend="torch")
    assert_close(layer(x, offset=torch.tensor(7)) - x, layer(x, offset=7) - x, atol=0, rtol=1e-7)


def test_large_offsets_are_exact() -> None:
    layer = SinusoidalEncoding(16)
    x = torch.zeros(1, 4, 16)
    got = layer(x, offset=10**7)[0]
    exact = pe_core.encode(np.arange(10**7, 10**7 + 4), 16, dtype="float64")
    assert_close(got, exact, atol=1e-6, rtol=1e-7, backend="torch", dtype="float32")


def test_max_len_only_bounds_a_cache() -> None:
    cached = SinusoidalEncoding(16, max_len=32)
    plain = SinusoidalEncoding(16)
    x = torch.randn(2, 100, 16)
    for offset, length in [(0, 10), (20, 12), (30, 5), (0, 100), (200, 3)]:
        got, want = cached(x[:, :length], offset), plain(x[:, :length], offset)
        assert_close(got, want, atol=1e-6, rtol=1e-7, backend="torch")
    assert (torch.device("cpu"), torch.float32) in cached._cache
    assert cached._cache[(torch.device("cpu"), torch.float32)].shape == (32, 16)


# --------------------------------------------------------------------------- dtypes, devices


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_only_rounds_the_output(dtype: torch.dtype) -> None:
    layer = SinusoidalEncoding(16)
    x = torch.zeros(1, 300, 16, dtype=dtype)
    y = layer(x, offset=1000)
    assert y.dtype == dtype
    # The exact value rounded once to the output dtype (eager encode works in float64 here).
    reference = pe_core.encode(np.arange(1000, 1300), 16, dtype="float64")
    assert_equal(y[0], torch.from_numpy(reference).to(dtype))  # the same dtype too


def test_float64_inputs_get_float64_values() -> None:
    layer = SinusoidalEncoding(8)
    y = layer(torch.zeros(1, 3, 8, dtype=torch.float64), offset=123_456)
    want = truth(np.arange(123_456, 123_459), 8)
    assert_close(y[0], want, atol=1e-9, rtol=1e-7, backend="torch", dtype="float64")


def test_follows_the_input_device() -> None:
    layer = SinusoidalEncoding(8, max_len=16)
    devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for offset in (0, 20, torch.tensor([1, 2])):
            y = layer(torch.zeros(2, 4, 8, device=device), offset)
            assert y.device.type == device


def test_gradients_flow_through_the_input() -> None:
    x = torch.randn(2, 3, 8, requires_grad=True)
    SinusoidalEncoding(8)(x).sum().backward()
    assert_equal(x.grad, torch.ones_like(x))


def test_dropout_in_training_only() -> None:
    layer = SinusoidalEncoding(8, dropout=0.5)
    x = torch.ones(4, 16, 8)
    assert (layer(x) == 0).any()
    layer.eval()
    assert_equal(layer(x), SinusoidalEncoding(8)(x))


# --------------------------------------------------------------------------- compilation


def counting_compile(module: torch.nn.Module) -> tuple[object, list[int]]:
    torch._dynamo.reset()
    compiles: list[int] = []

    def backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    return torch.compile(module, backend=backend, fullgraph=True), compiles


def test_compile_no_recompile_for_a_symbolic_length() -> None:
    layer = SinusoidalEncoding(16)
    compiled, compiles = counting_compile(layer)
    # a symbolic length and tensor offsets: one graph for every length
    for length, offset in [(20, [0, 3]), (23, [5, 1]), (31, [1000, 2]), (16, [7, 10**6])]:
        x = torch.randn(2, length, 16)
        torch._dynamo.mark_dynamic(x, 1)
        offsets = torch.tensor(offset)
        assert_close(compiled(x, offsets), layer(x, offsets), atol=1e-6, backend="torch")
    x = torch.randn(2, 40, 16)
    torch._dynamo.mark_dynamic(x, 1)
    got, want = compiled(x, torch.tensor([0, 1])), layer(x, torch.tensor([0, 1]))
    assert_close(got, want, atol=1e-5, rtol=1.3e-6, backend="torch", dtype="float32")
    assert len(compiles) == 1


def test_compile_int_offsets_recompile_at_most_once() -> None:
    layer = SinusoidalEncoding(16)
    compiled, compiles = counting_compile(layer)
    for length, offset in [(20, 2), (23, 3), (30, 70), (17, 10**6), (25, 5)]:
        x = torch.randn(2, length, 16)
        assert_close(compiled(x, offset), layer(x, offset), atol=1e-6, backend="torch")
    assert len(compiles) <= 2  # PyTorch specialises the first int, then makes it dynamic


def test_compile_decoding_one_token_at_a_time() -> None:
    layer = SinusoidalEncoding(16)
    compiled, compiles = counting_compile(layer)
    for step in range(6):
        x = torch.randn(3, 1, 16)
        offsets = torch.tensor([step, step + 10, step + 20])
        assert_close(compiled(x, offsets), layer(x, offsets), atol=1e-6, backend="torch")
    assert len(compiles) == 1


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_model": 0}, ValueError, "d_model must be an integer >= 1.*Received: 0"),
        ({"d_model": 2.5}, TypeError, "d_model must be an integer >= 1.*Received: 2.5"),
        ({"d_model": True}, TypeError, "Received: True"),
        ({"d_model": 7}, ValueError, "d must be even.*d=7"),
        ({"d_model": 8, "spec": "bert"}, ValueError, "Unknown preset 'bert'"),
        ({"d_model": 8, "dropout": 1.0}, ValueError, r"dropout must be a number in \[0, 1\)"),
        ({"d_model": 8, "dropout": "0.1"}, TypeError, "Received: '0.1'"),
        ({"d_model": 8, "max_len": 0}, ValueError, "max_len must be None or a positive"),
        ({"d_model": 8, "max_len": 1.5}, TypeError, "Received: 1.5"),
    ],
)
def test_constructor_validates(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SinusoidalEncoding(**kwargs)


def test_odd_d_model_with_a_zero_pad_spec() -> None:
    y = SinusoidalEncoding(7, spec="flax")(torch.zeros(1, 2, 7))
    assert y.shape == (1, 2, 7)
    assert_equal(y[..., -1], torch.zeros(1, 2))


def test_call_time_errors() -> None:
    layer = SinusoidalEncoding(16)
    with pytest.raises(ValueError, match="has 12 features but the layer was built with d_model=16"):
        layer(torch.zeros(2, 3, 12))
    with pytest.raises(TypeError, match="floating"):
        layer(torch.zeros(2, 3, 16, dtype=torch.int64))
    with pytest.raises(TypeError, match="offset must be an int"):
        layer(torch.zeros(2, 3, 16), offset=1.5)
    with pytest.raises(TypeError, match="offset must be an int"):
        layer(torch.zeros(2, 3, 16), offset=torch.tensor([True, False]))
    with pytest.raises(ValueError, match=r"offset of shape \(3,\)"):
        layer(torch.zeros(2, 3, 16), offset=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"\(\.\.\., seq, d_model\)"):
        layer(torch.zeros(16))


# --------------------------------------------------------------------------- RotaryEmbedding


def test_rotary_matches_apply_rope() -> None:
    rope = RotaryEmbedding(16, base=500.0, layout="interleaved", rotary_dim=8)
    q = torch.randn(2, 3, 5, 16)
    k = torch.randn(2, 3, 7, 16)  # k may be longer than q
    kwargs = {"base": 500.0, "layout": "interleaved", "rotary_dim": 8}
    # torch.testing.assert_close's float32 tolerances; expected torch: same dtype and device
    checks = {"atol": 1e-5, "rtol": 1.3e-6, "backend": "torch", "dtype": "float32"}
    q1, k1 = rope(q, k, offset=4)
    assert_close(q1, apply_rope(q, np.arange(4, 9), **kwargs), **checks)
    assert_close(k1, apply_rope(k, np.arange(4, 11), **kwargs), **checks)
    offsets = torch.tensor([0, 1000])
    q2, k2 = rope(q, k, offset=offsets)
    for b, start in enumerate(offsets.tolist()):
        assert_close(q2[b], apply_rope(q[b], np.arange(start, start + 5), **kwargs), **checks)
        assert_close(k2[b], apply_rope(k[b], np.arange(start, start + 7), **kwargs), **checks)
    positions = torch.tensor([3, 1, 4, 1, 5])
    q3, _ = rope(q, q, positions=positions)
    assert_close(q3, apply_rope(q, positions, **kwargs), **checks)


def test_rotary_scores_depend_on_relative_positions() -> None:
    rope = RotaryEmbedding(32, scaling={"rope_type": "linear", "factor": 4.0})
    q, k = torch.randn(2, 1, 2, 6, 32, dtype=torch.float64).unbind(0)
    q1, k1 = rope(q, k)
    q2, k2 = rope(q, k, offset=10**5)
    assert_close(q1 @ k1.mT, q2 @ k2.mT, atol=1e-9, backend="torch", dtype="float64")


def test_rotary_keeps_dtype_and_state_free() -> None:
    rope = RotaryEmbedding(8)
    q = torch.randn(1, 4, 8, dtype=torch.bfloat16)
    q1, k1 = rope(q, q.clone(), offset=torch.tensor([3]))
    assert q1.dtype == k1.dtype == torch.bfloat16
    reference = apply_rope(q.float(), np.arange(3, 7)).to(torch.bfloat16)
    assert_close(q1, reference, atol=1e-2, backend="torch", dtype="bfloat16")
    assert dict(rope.state_dict()) == {}
    assert "head_dim=8" in repr(rope)


def test_rotary_compiles_without_recompiles() -> None:
    rope = RotaryEmbedding(8)
    compiled, compiles = counting_compile(rope)
    for length, offset in [(20, [2, 3]), (23, [3, 3]), (30, [7, 1]), (70, [10**5, 1])]:
        q, k = torch.randn(2, 2, 3, length, 8).unbind(0)
        torch._dynamo.mark_dynamic(q, 2)
        torch._dynamo.mark_dynamic(k, 2)
        got = compiled(q, k, offset=torch.tensor(offset))
        want = rope(q, k, offset=torch.tensor(offset))
        for got_part, want_part in zip(got, want, strict=True):  # (q, k)
            assert_close(got_part, want_part, atol=1e-5, backend="torch")
    assert len(compiles) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"head_dim": 7}, ValueError, "head_dim must be even.*Received: 7"),
        ({"head_dim": 0}, ValueError, "head_dim must be an integer >= 2.*Received: 0"),
        (
            {"head_dim": 8, "base": 1.0},
            ValueError,
            r"base \(rope_theta\) must be a finite number > 1",
        ),
        ({"head_dim": 8, "layout": "neox"}, ValueError, "Unknown layout 'neox'"),
        ({"head_dim": 8, "rotary_dim": 3}, ValueError, "rotary_dim must be even.*Received: 3"),
        ({"head_dim": 8, "rotary_dim": 16}, ValueError, "at most head_dim=8. Received: 16"),
        ({"head_dim": 8, "scaling": "linear"}, TypeError, "scaling must be None or a dict"),
        ({"head_dim": 8, "scaling": {"rope_type": "bogus"}}, ValueError, "bogus"),
    ],
)
def test_rotary_constructor_validates(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        RotaryEmbedding(**kwargs)


def test_rotary_call_time_errors() -> None:
    rope = RotaryEmbedding(8)
    q = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="has 6 features but the layer was built with head_dim=8"):
        rope(q, torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="either positions or offset"):
        rope(q, q, positions=torch.arange(3), offset=2)
    with pytest.raises(ValueError, match=r"offset of shape \(3,\)"):
        rope(q, q, offset=torch.tensor([1, 2, 3]))


def test_import_pe_core_layers_loads_no_framework() -> None:
    code = (
        "import sys, pe_core.layers\n"
        "print(','.join(m for m in ('torch', 'jax', 'tensorflow', 'keras', 'flax') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
