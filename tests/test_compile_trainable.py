"""Trainable frequencies under ``torch.compile(fullgraph=True)``: parameters are tensors
too.

A ``torch.nn.Parameter`` is a subclass of ``torch.Tensor``: finding its backend must
not ask Dynamo for something it cannot trace (iterating ``type(p).__mro__``). Dynamo's
view (``backend="eager"``: the graph is traced in one piece, no code is generated)
is what a graph break would show; the results are the eager call's, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import pe_core
from pe_core import trainable
from pe_core_backends import backend_of

torch = pytest.importorskip("torch")
from pe_core.layers.torch import FourierFeatures, RotaryEmbedding  # noqa: E402


@pytest.mark.slow  # eight traces
def test_every_trainable_path_traces_in_one_graph() -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 2, 6, 8)
    k = torch.randn(2, 1, 6, 8)
    coords = torch.rand(6, 2)

    def parameter(*shape: int) -> torch.nn.Parameter:
        return torch.nn.Parameter(torch.rand(*shape))

    f, f_heads, f_mixed = parameter(4), parameter(2, 4), parameter(2, 2, 4)
    calls = {
        "layer": (RotaryEmbedding(8, trainable_frequencies=True), (q, k)),
        "layer per head": (
            RotaryEmbedding(8, trainable_frequencies=True, frequency_heads=2),
            (q, q),
        ),
        "apply_rope": (lambda x: pe_core.apply_rope(x, torch.arange(6), frequencies=f), (q,)),
        "apply_rope pair": (
            lambda x, y: pe_core.apply_rope((x, y), torch.arange(6), frequencies=f_heads[:1]),
            (q, k),
        ),
        "rope_angles": (lambda p: trainable.rope_angles(p, f_heads), (torch.arange(6),)),
        "apply_rope_mixed": (lambda x, c: trainable.apply_rope_mixed(x, c, f_mixed), (q, coords)),
        "encode": (lambda p: pe_core.encode(p, 8, frequencies=f), (torch.arange(6),)),
        "FourierFeatures": (FourierFeatures(2, 4, scale=3.0, trainable=True), (coords,)),
    }
    for name, (fn, args) in calls.items():
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="eager", fullgraph=True)
        got, want = compiled(*args), fn(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w), name
        sum(g.sum() for g in got).backward()  # gradients reach the parameters
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in (f, f_heads, f_mixed))
    torch._dynamo.reset()


def test_backend_of_a_parameter_compiles() -> None:
    p = torch.nn.Parameter(torch.ones(3))
    compiled = torch.compile(lambda x: (x * 2, backend_of(x)), backend="eager", fullgraph=True)
    doubled, name = compiled(p)
    assert name == "torch" and np.array_equal(doubled.detach().numpy(), [2.0, 2.0, 2.0])
    torch._dynamo.reset()
