"""``SinusoidalEncoding`` as a drop-in for the textbook PyTorch ``PositionalEncoding`` modules.

Three modules are restated line by line below:

* PyTorch's own tutorial ("Language Modeling with ``nn.Transformer``"):
  ``PositionalEncoding(d_model, dropout=0.1, max_len=5000)``, seq-first inputs
  ``[seq_len, batch_size, d_model]``, a ``pe`` buffer of shape ``(max_len, 1, d_model)``;
* the Chinese positional-encoding tutorial pe_core started from:
  ``PositionalEncoding(d_model=312, dropout=0.05, max_len=80)``, batch-first inputs, a
  ``(1, max_len, d_model)`` buffer (its debug ``print`` left out);
* the other seed tutorial's ``SinusoidalPositionalEncoding(d_model, max_len=5000,
  dropout=0.1)`` (note its argument order), batch-first.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, assert_equal

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import pe_core  # noqa: E402
from pe_core.layers.torch import SinusoidalEncoding  # noqa: E402


class TutorialPositionalEncoding(nn.Module):  # PyTorch's tutorial, seq-first
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)

        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Arguments:
            x: Tensor, shape ``[seq_len, batch_size, embedding_dim]``
        """
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class SeedPositionalEncoding(torch.nn.Module):  # the Chinese tutorial, batch-first
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


class SinusoidalPositionalEncoding(nn.Module):  # the other seed tutorial, batch-first
    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


def exact(length: int, d: int) -> np.ndarray:
    """float64 reference from the formula (positions small enough for float64)."""
    angles = np.arange(length, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    out = np.empty((length, d))
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return out


def textbook_tolerance(length: int) -> float:
    return 1e-5 + 2e-7 * length  # float32 rounding of the textbook tables


# --------------------------------------------------------------------------- construction


def test_positional_arguments_as_the_textbook_module() -> None:
    layer = SinusoidalEncoding(512, 0.1, 5000)
    assert (layer.d_model, layer.dropout, layer.max_len, layer.batch_first) == (
        512,
        0.1,
        5000,
        True,
    )
    assert layer.extra_repr() == (
        "d_model=512, spec='vaswani' (base=10000, layout='interleaved'), dropout=0.1, max_len=5000"
    )
    assert SinusoidalEncoding(512, batch_first=False).extra_repr().endswith("batch_first=False")


def test_swapped_arguments_are_named() -> None:
    # SinusoidalPositionalEncoding(d_model, max_len, dropout) argument order, by mistake
    with pytest.raises(ValueError, match=r"look swapped.*\(d_model, dropout, max_len\)"):
        SinusoidalEncoding(512, 5000, 0.1)
    with pytest.raises(TypeError, match="batch_first must be True or False"):
        SinusoidalEncoding(8, batch_first="no")


# --------------------------------------------------------------------------- same outputs


@pytest.mark.parametrize(("d_model", "seq", "batch"), [(512, 35, 20), (16, 300, 3)])
def test_seq_first_matches_pytorch_tutorial(d_model: int, seq: int, batch: int) -> None:
    tutorial = TutorialPositionalEncoding(d_model, 0.1, 5000).eval()
    ours = SinusoidalEncoding(d_model, 0.1, 5000, batch_first=False).eval()
    x = torch.randn(seq, batch, d_model, generator=torch.Generator().manual_seed(0))
    got, want = ours(x), tutorial(x)
    assert got.shape == (seq, batch, d_model)
    assert_close(got, want, atol=textbook_tolerance(seq), backend="torch")  # torch both
    # ours is the closer one to the formula
    table = exact(seq, d_model)
    ours_error = np.abs((got - x).double().numpy() - table[:, None]).max()
    tutorial_error = np.abs(tutorial.pe[:seq, 0].double().numpy() - table).max()
    assert ours_error <= 1e-6 and ours_error < tutorial_error


@pytest.mark.parametrize(
    "textbook",
    [
        lambda: SeedPositionalEncoding(312, 0.05, 80),
        lambda: SinusoidalPositionalEncoding(312, 80, 0.05),
    ],
    ids=["seed-positional-encoding", "seed-sinusoidal-positional-encoding"],
)
def test_batch_first_matches_the_seed_modules(textbook) -> None:
    module = textbook().eval()
    ours = SinusoidalEncoding(312, 0.05, 80).eval()
    x = torch.randn(3, 80, 312, generator=torch.Generator().manual_seed(1))
    assert_close(ours(x), module(x), atol=textbook_tolerance(80), backend="torch")


def test_seq_first_dropout_draws_the_tutorials_mask() -> None:
    tutorial = TutorialPositionalEncoding(16, 0.5, 64).train()
    ours = SinusoidalEncoding(16, 0.5, 64, batch_first=False).train()
    x = torch.randn(10, 4, 16, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(3)
    want = tutorial(x)
    torch.manual_seed(3)
    got = ours(x)
    assert_equal(got == 0, want == 0)  # the same elements dropped
    assert_close(got, want, atol=1e-4, backend="torch")


def test_seq_first_is_batch_first_transposed() -> None:
    x = torch.randn(7, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    seq_first = SinusoidalEncoding(8, batch_first=False)
    batch_first = SinusoidalEncoding(8)
    assert_equal(seq_first(x), batch_first(x.transpose(0, 1)).transpose(0, 1), backend="torch")
    offsets = torch.tensor([0, 5, 1000])  # per-example offsets (batch,)
    assert_equal(
        seq_first(x, offset=offsets),
        batch_first(x.transpose(0, 1), offset=offsets).transpose(0, 1),
    )
    assert_equal(seq_first(x[:, 0]), batch_first(x[:, 0]))  # (seq, d_model)
    with pytest.raises(ValueError, match=r"batch_first=False.*\(seq, batch, d_model\)"):
        seq_first(torch.zeros(2, 3, 4, 8))
    with pytest.raises(ValueError, match=r"offset must be a scalar or hold one offset per example"):
        seq_first(x, offset=torch.tensor([0, 1]))  # 2 offsets for a batch of 3


def test_a_tutorial_model_runs_unchanged() -> None:
    class TransformerModel(nn.Module):  # the tutorial's model, small
        def __init__(self, positional: nn.Module, ntoken=50, d_model=32) -> None:
            super().__init__()
            self.pos_encoder = positional
            layer = nn.TransformerEncoderLayer(d_model, 2, 64, 0.0)
            self.transformer_encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.embedding = nn.Embedding(ntoken, d_model)
            self.d_model = d_model
            self.linear = nn.Linear(d_model, ntoken)

        def forward(self, src: torch.Tensor) -> torch.Tensor:
            src = self.embedding(src) * math.sqrt(self.d_model)
            src = self.pos_encoder(src)
            return self.linear(self.transformer_encoder(src))

    torch.manual_seed(5)
    old = TransformerModel(TutorialPositionalEncoding(32, 0.1)).eval()
    new = TransformerModel(SinusoidalEncoding(32, 0.1, batch_first=False)).eval()
    new.load_state_dict(old.state_dict())  # strict: the pe buffer is checked and dropped
    src = torch.randint(0, 50, (35, 4), generator=torch.Generator().manual_seed(6))  # (seq, batch)
    assert_close(new(src), old(src), atol=1e-4, rtol=1e-7, backend="torch")


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tutorial_checkpoint_loads_into_a_seq_first_layer(strict: bool, dtype) -> None:
    checkpoint = TutorialPositionalEncoding(512).to(dtype).state_dict()  # pe: (5000, 1, 512)
    assert checkpoint["pe"].shape == (5000, 1, 512)
    layer = SinusoidalEncoding(512, 0.1, 5000, batch_first=False)
    result = layer.load_state_dict(checkpoint, strict=strict)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dict(layer.state_dict()) == {} and "pe" in checkpoint


@pytest.mark.parametrize("strict", [True, False])
def test_checkpoint_layout_must_match_batch_first(strict: bool) -> None:
    seq_first_table = TutorialPositionalEncoding(16, max_len=100).state_dict()
    with pytest.raises(RuntimeError, match=r"\(100, 1, 16\).*batch_first=True.*batch_first=False"):
        SinusoidalEncoding(16).load_state_dict(seq_first_table, strict=strict)
    batch_first_table = SeedPositionalEncoding(16, max_len=100).state_dict()
    with pytest.raises(RuntimeError, match=r"\(1, 100, 16\).*batch_first=False.*batch_first=True"):
        SinusoidalEncoding(16, batch_first=False).load_state_dict(batch_first_table, strict=strict)
    SinusoidalEncoding(16).load_state_dict(batch_first_table, strict=strict)
    plain = {"pe": batch_first_table["pe"][0]}  # (max_len, d_model): either layout
    for batch_first in (True, False):
        SinusoidalEncoding(16, batch_first=batch_first).load_state_dict(plain, strict=strict)


@pytest.mark.parametrize("strict", [True, False])
def test_wrong_tables_are_refused_with_either_strict(strict: bool) -> None:
    layer = SinusoidalEncoding(16, batch_first=False)
    table = TutorialPositionalEncoding(16, max_len=100).state_dict()
    table["pe"][37, 0, 5] += 1e-2  # a corrupted entry
    with pytest.raises(RuntimeError, match=r"differs .* at row 37"):
        layer.load_state_dict(table, strict=strict)
    with pytest.raises(RuntimeError, match="32 features but the layer was built with d_model=16"):
        layer.load_state_dict(
            TutorialPositionalEncoding(32, max_len=10).state_dict(), strict=strict
        )
    with pytest.raises(RuntimeError, match="another spec"):
        SinusoidalEncoding(16, spec="whisper", batch_first=False).load_state_dict(
            TutorialPositionalEncoding(16, max_len=10).state_dict(), strict=strict
        )
    with pytest.raises(RuntimeError, match="expected a"):
        layer.load_state_dict({"pe": torch.zeros(2, 3, 4, 16)}, strict=strict)


def test_tolerance_accepts_the_textbook_rounding_only() -> None:
    # The textbook float32 table's own error, at the tutorial's length, is within the
    # documented tolerance, and a table one tolerance further off is refused.
    pe = TutorialPositionalEncoding(512).pe[:, 0].double().numpy()
    exact = pe_core.encode(range(5000), 512, dtype="float64")
    assert_close(pe, exact, atol=textbook_tolerance(5000))
    shifted = TutorialPositionalEncoding(512).state_dict()
    shifted["pe"][4999, 0, 0] += 2 * textbook_tolerance(5000)
    with pytest.raises(RuntimeError, match="at row 4999"):
        SinusoidalEncoding(512, batch_first=False).load_state_dict(shifted)
