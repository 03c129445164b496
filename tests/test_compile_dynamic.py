"""torch.compile with symbolic sequence lengths: one graph for every length.

``dynamic=True`` and ``torch._dynamo.mark_dynamic`` make the sequence axis a symbolic
size; ``encode``, ``apply_rope`` and the torch layers must trace it (one whole graph,
``fullgraph=True``) and never recompile for another length. The feature width is
static configuration: a symbolic one is specialised (a guard, not an error). The
graphs run on a counting backend that executes the traced graph as it is (no inductor:
the numbers are the traced operations' own).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import pe_core

torch = pytest.importorskip("torch")
layers = pytest.importorskip("pe_core.layers.torch")

D = 16
HEADS = 2
BIG = 2**40  # int64 positions beyond int32: the two-word reduction, symbolic too


def counting_compile(fn, **kwargs):
    torch._dynamo.reset()
    compiles: list[int] = []

    def backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    return torch.compile(fn, backend=backend, fullgraph=True, **kwargs), compiles


def make_model():
    sinusoidal = layers.SinusoidalEncoding(D)
    rotary = layers.RotaryEmbedding(D // HEADS)
    alibi = layers.AlibiBias(HEADS)
    t5 = layers.T5RelativeBias(HEADS)
    with torch.no_grad():
        t5.relative_attention_bias.weight.copy_(torch.randn(32, HEADS))

    def model(x):
        """Every call takes its sequence length from ``x`` (batch, seq, D)."""
        n = x.shape[-2]
        positions = torch.arange(n)
        q = x.reshape(x.shape[0], n, HEADS, D // HEADS).transpose(1, 2)
        return {
            "encode": pe_core.encode(positions, D),
            "encode_far": pe_core.encode(positions + BIG, D),
            "apply_rope": pe_core.apply_rope(q, positions),
            "sinusoidal": sinusoidal(x),
            "rotary": rotary(q, q)[1],
            "alibi": alibi(n, n, like=x),
            "t5": t5(n, n),
        }

    return model


def expected(model, x):
    n = x.shape[-2]
    want = {k: v.detach().double().numpy() for k, v in model(x).items()}  # eager
    grid = np.arange(n)
    want["encode"] = pe_core.encode(grid, D, dtype="float64")
    want["encode_far"] = pe_core.encode(grid + BIG, D, dtype="float64")
    q = x.double().reshape(x.shape[0], n, HEADS, D // HEADS).transpose(1, 2)
    want["apply_rope"] = pe_core.apply_rope(q, grid).numpy()  # float64 rotation
    return want


@pytest.mark.parametrize("mode", ["dynamic=True", "mark_dynamic"])
def test_symbolic_sequence_length_one_graph(mode: str) -> None:
    torch.manual_seed(0)
    model = make_model()
    compiled, compiles = counting_compile(model, **({"dynamic": True} if mode[0] == "d" else {}))
    for n in (5, 37):
        x = torch.randn(2, n, D)
        if mode == "mark_dynamic":
            torch._dynamo.mark_dynamic(x, 1)
        want = expected(model, x)  # eager first: it fills pe_core's lookup caches
        got = compiled(x)
        assert set(got) == set(want)
        for key, value in got.items():
            assert value.shape == want[key].shape, key
            assert_close(value, want[key], atol=1e-6, backend="torch", err_msg=f"{key}, n={n}")
    assert len(compiles) == 1


def test_symbolic_width_specialises() -> None:
    """``dynamic=True`` makes the width symbolic too: it becomes a guard on its value,
    so another width recompiles and computes the right table."""
    compiled, compiles = counting_compile(
        lambda x: pe_core.encode(torch.arange(x.shape[0]), x.shape[1]), dynamic=True
    )
    for n, d in ((6, 8), (9, 8), (6, 12)):
        got = compiled(torch.zeros(n, d))
        assert_close(got, pe_core.encode(np.arange(n), d, dtype="float64"), atol=1e-6)
    assert len(compiles) == 2
