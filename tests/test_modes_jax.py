"""JAX execution modes: ``jax.grad``, ``jax.jacrev``, ``jax.vmap`` and ``jax.jit`` over
encode, apply_rope and the Flax layers (float32, x64 left as it is).

Gradients are checked against central finite differences of float64 references
(``tests/reference.py``, independent of pe_core's kernel).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from reference import schedule, table

import pe_core
from pe_core.testing import reference_rope

jax = pytest.importorskip("jax")
jnp = jax.numpy

D = 8
H = 1e-3


def encode_reference(positions: np.ndarray, d: int = D) -> np.ndarray:
    return table(positions, schedule(d), "interleaved", d)


def finite_difference(f, values: np.ndarray) -> np.ndarray:
    return (f(values + H) - f(values - H)) / (2 * H)


VALUES = np.array([0.0, 1.5, 7.0, 123_456.0, 10.0**6, -3.25], dtype=np.float32)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_of_encode_wrt_positions(jit: bool) -> None:
    w = np.random.default_rng(0).standard_normal((VALUES.size, D))

    def loss(p):
        return (pe_core.encode(p, D) * w).sum()

    g = jax.grad(loss)
    g = jax.jit(g) if jit else g
    expected = (finite_difference(encode_reference, VALUES.astype(np.float64)) * w).sum(-1)
    assert_close(g(jnp.asarray(VALUES)), expected, atol=5e-5, rtol=1e-5, backend="jax")


def test_jacrev_and_vmap_of_encode() -> None:
    p = jnp.asarray(VALUES)
    jac = jax.jacrev(lambda q: pe_core.encode(q, D))(p)
    fd = finite_difference(encode_reference, VALUES.astype(np.float64))
    assert_close(jnp.diagonal(jac, axis1=0, axis2=2).T, fd, atol=5e-5, rtol=1e-5)
    batched = jax.vmap(lambda q: pe_core.encode(q, D))(p.reshape(2, 3))
    assert_close(batched, encode_reference(VALUES.reshape(2, 3)), atol=2e-6)


def test_grad_of_apply_rope_wrt_x_and_positions() -> None:
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, VALUES.size, D)).astype(np.float32)
    w = rng.standard_normal(xv.shape)

    def loss(x, p):
        return (pe_core.apply_rope(x, p) * w).sum()

    gx, gp = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(xv), jnp.asarray(VALUES))
    assert_close(gx, reference_rope(w, -VALUES), atol=5e-6)  # the transposed rotation
    fd = finite_difference(lambda v: reference_rope(xv, v), VALUES.astype(np.float64))
    assert_close(gp, (fd * w).sum(axis=(0, 2)), atol=1e-4, rtol=1e-5)
    per_example = jax.vmap(pe_core.apply_rope)(jnp.asarray(xv), jnp.stack([VALUES, VALUES + 1]))
    assert_close(
        per_example,
        np.stack([reference_rope(xv[0], VALUES), reference_rope(xv[1], VALUES + 1)]),
        atol=5e-6,
    )


def test_flax_layers_differentiate_through_offsets_and_positions() -> None:
    flax_layers = pytest.importorskip("pe_core.layers.flax")
    layer = flax_layers.SinusoidalEncoding(D)
    offsets = jnp.asarray([5.0, 10.0**6])
    g = jax.grad(lambda o: layer(jnp.zeros((2, 3, D)), o).sum())(offsets)
    steps = np.arange(3.0)
    expected = [finite_difference(encode_reference, o + steps).sum() for o in (5.0, 10.0**6)]
    assert_close(g, np.array(expected), atol=5e-5, rtol=1e-5)
    rope = flax_layers.RotaryEmbedding(D)
    q = jnp.asarray(np.random.default_rng(2).standard_normal((1, 3, D)), jnp.float32)

    def scores(p):
        q1, k1 = rope(q, q, positions=p)
        return (q1 * k1).sum()  # rotations cancel: no dependence on the positions

    assert_close(jax.grad(scores)(jnp.asarray([0.0, 4.0, 9.5])), np.zeros(3), atol=1e-4)
