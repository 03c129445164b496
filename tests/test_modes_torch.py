"""PyTorch execution modes: autograd on every route, torch.func transforms, torch.compile.

Gradients are checked against central finite differences of float64 references
(``tests/reference.py``, independent of pe_core's kernel) and with
``torch.autograd.gradcheck`` in float64.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_close, assert_equal
from reference import schedule, table

import pe_core
from pe_core.testing import reference_rope
from pe_core_backends import force_device_path

torch = pytest.importorskip("torch")
from torch.func import grad, jacrev, vmap  # noqa: E402

from pe_core.layers.torch import RotaryEmbedding, SinusoidalEncoding  # noqa: E402

D = 8
H = 1e-3  # finite-difference step (positions)


def encode_reference(positions: np.ndarray, d: int = D) -> np.ndarray:
    """float64 encoding of the "vaswani" preset (interleaved sin/cos)."""
    return table(positions, schedule(d), "interleaved", d)


def weights(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# Integer-valued consecutive floats take the table route, fractional and scattered ones
# the other host routes, large ones the exact reduction: every one must differentiate.
POSITIONS = {
    "consecutive": np.arange(600.0),
    "fractional": np.arange(600.0) + 0.5,
    "large": np.arange(40.0) + 10**6,
    "scattered": np.array([7.0, 3.0, 123_456.0, 5.25, 0.0, 2.0**20]),
    "scalar": np.array(12.5),
}


@pytest.mark.parametrize("name", sorted(POSITIONS))
@pytest.mark.parametrize("device_path", [False, True], ids=["host", "device"])
def test_encode_gradient_wrt_positions_on_every_route(name: str, device_path: bool) -> None:
    values = POSITIONS[name]
    w = weights((*values.shape, D))
    p = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    if device_path:
        with force_device_path():
            out = pe_core.encode(p, D)
    else:
        out = pe_core.encode(p, D)
    assert out.requires_grad
    assert_close(out.detach(), encode_reference(values), atol=2e-6, backend="torch")
    (out * torch.tensor(w, dtype=torch.float32)).sum().backward()
    expected = ((encode_reference(values + H) - encode_reference(values - H)) / (2 * H) * w).sum(-1)
    assert_close(p.grad, expected, atol=2e-5, rtol=1e-5, backend="torch")


def test_encode_and_apply_rope_pass_gradcheck_in_float64() -> None:
    p = (torch.arange(5, dtype=torch.float64) * 7.3 + 10**6).requires_grad_()
    assert torch.autograd.gradcheck(lambda p: pe_core.encode(p, D, dtype=torch.float64), (p,))
    x = torch.randn(2, 5, D, dtype=torch.float64, requires_grad=True)
    for layout in ("half", "interleaved"):
        assert torch.autograd.gradcheck(
            lambda x, p, layout=layout: pe_core.apply_rope(x, p, layout=layout), (x, p)
        )
    # partial rotary and an attention factor (yarn)
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    assert torch.autograd.gradcheck(
        lambda x, p: pe_core.apply_rope(x, p, rotary_dim=4, scaling=scaling), (x, p)
    )


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_gradients_wrt_x_and_positions(layout: str) -> None:
    values = np.array([0.0, 1.0, 2.5, 10**6, 77.0])
    xv = weights((3, 5, D), seed=1)
    w = weights((3, 5, D), seed=2)
    x = torch.tensor(xv, dtype=torch.float32, requires_grad=True)
    p = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    out = pe_core.apply_rope(x, p, layout=layout)
    assert_close(out.detach(), reference_rope(xv, values, layout=layout), atol=5e-6)
    (out * torch.tensor(w, dtype=torch.float32)).sum().backward()
    # d/dx: the transposed rotation; d/dp by finite differences of the float64 formula
    rotated_back = reference_rope(w, -values, layout=layout)
    assert_close(x.grad, rotated_back, atol=5e-6)
    plus = reference_rope(xv, values + H, layout=layout)
    minus = reference_rope(xv, values - H, layout=layout)
    expected = ((plus - minus) / (2 * H) * w).sum(axis=(0, 2))
    assert_close(p.grad, expected, atol=5e-5, rtol=1e-5)


def test_layers_pass_gradients_to_inputs_offsets_and_positions() -> None:
    layer = SinusoidalEncoding(D)
    x = torch.zeros(2, 3, D, requires_grad=True)
    offset = torch.tensor([5.0, 10.0**6], requires_grad=True)
    out = layer(x, offset)
    out.sum().backward()
    assert_equal(x.grad, torch.ones_like(x))
    steps = np.arange(3.0)
    ref = [
        ((encode_reference(o + steps + H) - encode_reference(o - H + steps)) / (2 * H)).sum()
        for o in (5.0, 10.0**6)
    ]
    assert_close(offset.grad, np.array(ref), atol=5e-5, rtol=1e-5)

    rope = RotaryEmbedding(D)
    qv = weights((2, 1, 3, D), seed=3)
    q = torch.tensor(qv, dtype=torch.float32, requires_grad=True)
    positions = torch.tensor([0.0, 4.0, 9.5], requires_grad=True)
    q1, k1 = rope(q, q, positions=positions)
    (q1 * k1).sum().backward()  # depends on nothing but q: rotations cancel pairwise
    assert_close(positions.grad, np.zeros(3), atol=1e-5)
    assert_close(q.grad, 2 * qv, atol=1e-5)


def test_torch_func_transforms_over_encode_and_apply_rope() -> None:
    values = np.array([[0.0, 1.5, 2.0], [10.0**6, 3.0, -4.0]])
    p = torch.tensor(values, dtype=torch.float64)
    batched = vmap(lambda row: pe_core.encode(row, D, dtype=torch.float64))(p)
    assert_close(batched, encode_reference(values), atol=1e-9, backend="torch")

    jac = jacrev(lambda row: pe_core.encode(row, D, dtype=torch.float64))(p[0])
    fd = (encode_reference(values[0] + H) - encode_reference(values[0] - H)) / (2 * H)
    assert_close(torch.diagonal(jac, dim1=0, dim2=2).T, fd, atol=1e-6)

    g = grad(lambda q: pe_core.encode(q, D, dtype=torch.float64).sum())(p[1, 0])
    assert_close(g, fd_sum(values[1, 0]), atol=1e-6)

    xv = weights((2, 3, D), seed=4)
    x = torch.tensor(xv)
    rotated = vmap(lambda row: pe_core.apply_rope(row, range(3)))(x)
    assert_close(rotated, reference_rope(xv, np.arange(3)), atol=1e-12)
    over_positions = vmap(lambda q: pe_core.apply_rope(x[0], q))(p)
    assert_close(over_positions, reference_rope(xv[0], values), atol=1e-9)
    dx = grad(lambda x: (pe_core.apply_rope(x, p[1]) ** 3).sum())(x[0])
    assert dx.shape == (3, D) and torch.isfinite(dx).all()
    jp = jacrev(lambda q: pe_core.apply_rope(x[0], q))(p[0])
    plus = reference_rope(xv[0], values[0] + H)
    minus = reference_rope(xv[0], values[0] - H)
    assert_close(torch.diagonal(jp, dim1=0, dim2=2).T, (plus - minus) / (2 * H), atol=1e-6)


def fd_sum(p: float) -> float:
    ref = encode_reference(np.array([p + H])) - encode_reference(np.array([p - H]))
    return float(ref.sum() / (2 * H))


# --------------------------------------------------------------------------- torch.compile


class TinyModel(torch.nn.Module):
    """The layers as a model uses them: encoding added, q and k rotated, scores."""

    def __init__(self) -> None:
        super().__init__()
        self.pe = SinusoidalEncoding(16)
        self.rope = RotaryEmbedding(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pe(x)
        q = h.reshape(h.shape[0], h.shape[1], 2, 8).transpose(1, 2)
        q, k = self.rope(q, q)
        return (q @ k.transpose(-1, -2)).softmax(-1) @ q


def check_compiled(compiled, model, lengths) -> None:
    for n in lengths:
        x = torch.randn(2, n, 16, requires_grad=True)
        assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5, backend="torch")
        compiled(x).sum().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()


def test_compile_dynamic_true_and_mark_dynamic() -> None:
    """Dynamo's view (the ``eager`` backend: no code generation, seconds): dynamic sizes,
    a dynamic ``d`` argument and gradients through compiled code."""
    torch._dynamo.reset()
    model = TinyModel()
    check_compiled(torch.compile(model, backend="eager", dynamic=True), model, (5, 17))
    # d as a (dynamic) int argument: the frequencies stay host constants
    f = torch.compile(lambda p, d: pe_core.encode(p, d), backend="eager", dynamic=True)
    for d in (8, 12):
        expected = table(np.arange(5) + 10**6, schedule(d), "interleaved", d)
        assert_close(f(torch.arange(5) + 10**6, d), expected, atol=2e-6)
    g = torch.compile(lambda x, p: pe_core.apply_rope(x, p), backend="eager", dynamic=True)
    p = torch.arange(7.0, requires_grad=True)
    g(torch.ones(2, 7, D), p).sum().backward()
    assert p.grad is not None and torch.isfinite(p.grad).all()
    x = torch.randn(2, 33, 16)
    torch._dynamo.mark_dynamic(x, 1)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5, backend="torch")


@pytest.mark.slow
def test_compile_inductor_default_settings_across_lengths() -> None:
    """Default settings (inductor): a second length makes the sequence axis dynamic; the
    generated kernels must stay small enough to compile in seconds."""
    torch._dynamo.reset()
    model = TinyModel()
    check_compiled(torch.compile(model), model, (5, 17, 40))


_COMPILED_FIRST = """
import numpy as np, torch, pe_core
from pe_core.layers.torch import RotaryEmbedding
# compiled before any eager call: pe_core's caches fill during the trace
coords = torch.tensor([[0.0, 1.0], [2.0, 3.0], [5.0, 7.0]])
nd = torch.compile(lambda c: pe_core.encode(c, 16, spec="mae_2d"), fullgraph=True, backend="eager")
one = torch.compile(lambda p: pe_core.encode(p, 8), fullgraph=True, backend="eager")
q = torch.ones(1, 2, 5, 8)
rope = torch.compile(lambda q: pe_core.apply_rope(q, torch.arange(5)), fullgraph=True, backend="eager")
layer = torch.compile(RotaryEmbedding(8), fullgraph=True, backend="eager")
got = [nd(coords), one(torch.arange(6)), rope(q), layer(q, q)[0]]
want = [pe_core.encode(coords, 16, spec="mae_2d"), pe_core.encode(torch.arange(6), 8),
        pe_core.apply_rope(q, torch.arange(5)), RotaryEmbedding(8)(q, q)[0]]
for g, w in zip(got, want):
    assert torch.allclose(g, w, atol=1e-6), (g, w)
print("ok")
"""


@pytest.mark.slow  # a fresh process
def test_compiled_before_any_eager_call() -> None:
    """A first call under torch.compile(fullgraph=True) traces in one graph (a fresh
    process: in this one, earlier tests have filled pe_core's caches)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_COMPILED_FIRST)],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
