"""Trainable frequencies (:mod:`pe_core.trainable`): values, gradients, placement, modes.

Frequencies given as framework arrays take the plain ``pos * f`` route on the device.
Checked here: values within the documented bound of a float64 reference (computed
from the very float32 frequencies), gradients equal to the analytic gradient (torch
and TensorFlow in float64) and to those of the straightforward framework formula
(``jax.grad``), no host read under the guard, eager and traced (``torch.compile``,
``jax.jit``), parity with timm's RoPE-Mixed (restated from its source) and diffusers'
``MochiRoPE``, and the errors. Frequencies held as constants keep their exact routes
(``tests/corpus.py`` checks those bit for bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pe_core
from pe_core.host_reads import forbid_host_reads
from pe_core.spec import Spec
from pe_core_backends import force_device_path, get_namespace, is_installed
from tests.conftest import assert_close, assert_equal, to_numpy

FRAMEWORKS = [name for name in ("jax", "torch", "tensorflow") if is_installed(name)]
EPS32 = 2.0**-24


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _on(backend: str, values: np.ndarray, dtype: str = "float32") -> Any:
    xp = get_namespace(backend)
    return xp.asarray(values.astype(dtype), dtype=xp.dtype(dtype))


def _reference_rope(
    x: np.ndarray, angles: np.ndarray, layout: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 RoPE of ``x`` by ``angles`` (broadcast to ``x.shape[:-1] + (n,)``): the
    result, and the pairs ``(a, b)``."""
    n = angles.shape[-1]
    x = x.astype(np.float64)
    angles = np.broadcast_to(angles, (*x.shape[:-1], n))
    if layout == "half":
        a, b = x[..., :n], x[..., n : 2 * n]
    else:
        a, b = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
    c, s = np.cos(angles), np.sin(angles)
    ya, yb = a * c - b * s, b * c + a * s
    out = x.copy()
    if layout == "half":
        out[..., :n], out[..., n : 2 * n] = ya, yb
    else:
        out[..., 0 : 2 * n : 2], out[..., 1 : 2 * n : 2] = ya, yb
    return out, a, b


def _bound(a: np.ndarray, b: np.ndarray, angle_mag: np.ndarray, layout: str, x: np.ndarray):
    """The documented float32 bound per output element: the angle's error
    ``2 eps |pos f|`` (per axis) times ``|a| + |b|``, plus a few ulps of the rotation."""
    n = a.shape[-1]
    per_pair = (np.abs(a) + np.abs(b)) * (2 * EPS32 * angle_mag + 8 * EPS32)
    bound = np.full(x.shape, 4 * EPS32) * np.abs(x)
    if layout == "half":
        bound[..., :n] = bound[..., n : 2 * n] = per_pair
    else:
        bound[..., 0 : 2 * n : 2] = bound[..., 1 : 2 * n : 2] = per_pair
    return bound


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("backend", FRAMEWORKS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rope_per_head_within_bound_of_float64(backend: str, layout: str) -> None:
    heads, seq, head_dim, n = 3, 5, 10, 4  # 2n < head_dim: the last 2 features pass
    rng = _rng(1)
    x = rng.standard_normal((2, heads, seq, head_dim)).astype(np.float32)
    freqs = (rng.standard_normal((heads, n)) * 0.3).astype(np.float32)
    pos = np.array([0, 3, 700, 90_000, -5])
    got = pe_core.apply_rope(_on(backend, x), pos, frequencies=_on(backend, freqs), layout=layout)
    angles = pos[:, None].astype(np.float64) * freqs[:, None, :].astype(np.float64)
    want, a, b = _reference_rope(x, angles, layout)
    bound = _bound(a, b, np.abs(np.broadcast_to(angles, a.shape)), layout, x)
    assert_close(got, want, atol=bound, backend=backend, dtype="float32")
    assert_equal(to_numpy(got)[..., 2 * n :], x[..., 2 * n :])  # partial rotary: unchanged


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_vector_frequencies_and_framework_positions(backend: str) -> None:
    rng = _rng(2)
    x = rng.standard_normal((4, 6, 8)).astype(np.float32)  # (heads, seq, head_dim)
    freqs = (1.0 / 10000 ** (np.arange(4) / 4)).astype(np.float32)
    pos = np.arange(6) * 37 + 11
    ints = "int32" if backend == "jax" else "int64"
    xp = get_namespace(backend)
    pos_fw = xp.asarray(pos.astype(ints))
    got = pe_core.apply_rope(_on(backend, x), pos_fw, frequencies=_on(backend, freqs))
    angles = pos[:, None].astype(np.float64) * freqs.astype(np.float64)
    want, a, b = _reference_rope(x, angles, "half")
    assert_close(got, want, atol=_bound(a, b, np.abs(angles), "half", x), backend=backend)
    # the same frequencies as host constants take the exact route: equal within the bound
    exact = pe_core.apply_rope(x, pos, base=10000.0)
    assert_close(
        to_numpy(got), exact.astype(np.float64), atol=_bound(a, b, np.abs(angles), "half", x)
    )


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_float64_route_and_tuple_input(backend: str) -> None:
    xp = get_namespace(backend)
    if not xp.supports("float64"):
        pytest.skip("no float64 (JAX without x64)")
    rng = _rng(3)
    q = rng.standard_normal((3, 2, 5, 6))
    k = rng.standard_normal((1, 2, 5, 6))  # leading axes may differ
    freqs = rng.standard_normal((2, 3)) * 0.2  # (heads, n)
    pos = np.arange(5) * 1000.0 + 0.5
    gq, gk = pe_core.apply_rope(
        (_on(backend, q, "float64"), _on(backend, k, "float64")),
        pos,
        frequencies=_on(backend, freqs, "float64"),
        layout="interleaved",
    )
    for got, x in ((gq, q), (gk, k)):
        angles = pos[:, None] * freqs[:, None, :]
        want, a, b = _reference_rope(x, angles, "interleaved")
        bound = (np.abs(a) + np.abs(b)) * (
            2 * 2.0**-53 * np.abs(np.broadcast_to(angles, a.shape)) + 1e-15
        )
        err = np.abs(to_numpy(got) - want)
        assert (err[..., 0::2] <= bound + 1e-15).all() and (err[..., 1::2] <= bound + 1e-15).all()


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_encode_with_framework_frequencies(backend: str) -> None:
    freqs = np.array([1.0, 0.1, 0.001], np.float32)
    pos = np.arange(7) * 13
    for layout in ("interleaved", "split"):
        spec = Spec(layout=layout, offset=3)
        got = pe_core.encode(pos, 6, frequencies=_on(backend, freqs), spec=spec)
        angles = (pos[:, None] + 3) * freqs.astype(np.float64)
        s, c = np.sin(angles), np.cos(angles)
        if layout == "interleaved":
            want = np.stack([s, c], -1).reshape(7, 6)
        else:
            want = np.concatenate([s, c], -1)
        mag = np.abs(angles)
        if layout == "interleaved":
            mag = np.repeat(mag, 2, -1)
        else:
            mag = np.concatenate([mag, mag], -1)
        bound = 2 * EPS32 * mag + 4 * EPS32
        assert_close(got, want, atol=bound, backend=backend, dtype="float32")


def test_encode_host_frequencies_stay_exact() -> None:
    freqs = (1.0, 0.1, 0.001)
    pos = np.array([0, 5, 10**7])
    assert_equal(
        pe_core.encode(pos, 6, frequencies=freqs),
        pe_core.encode(pos, 6, spec=Spec(frequencies=freqs)),
    )
    assert_equal(
        pe_core.encode(pos, 6, frequencies=np.array(freqs)),
        pe_core.encode(pos, 6, spec=Spec(frequencies=freqs)),
    )


# --------------------------------------------------------------------------- gradients


def _analytic_frequency_gradient(
    x: np.ndarray, w: np.ndarray, pos: np.ndarray, freqs: np.ndarray, layout: str
) -> np.ndarray:
    """d/df of sum(w * rope(x)) for per-head freqs (heads, n), x (heads, seq, d)."""
    n = freqs.shape[-1]
    angles = pos[:, None] * freqs[:, None, :]  # (heads, seq, n)
    _, a, b = _reference_rope(x, angles, layout)
    _, wa, wb = _reference_rope(w, np.zeros_like(angles), layout)
    c, s = np.cos(angles), np.sin(angles)
    # d ya / d theta = -a s - b c ; d yb / d theta = a c - b s ; d theta / d f = pos
    d_theta = wa * (-a * s - b * c) + wb * (a * c - b * s)
    assert d_theta.shape[-1] == n
    return (d_theta * pos[:, None]).sum(axis=-2)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_torch_gradients_are_analytic(layout: str) -> None:
    torch = pytest.importorskip("torch")
    rng = _rng(4)
    x, w = rng.standard_normal((2, 3, 4, 8))
    freqs = rng.standard_normal((3, 4)) * 0.5
    pos = np.array([0.0, 1.0, 7.0, 30.0])
    f = torch.nn.Parameter(torch.tensor(freqs))
    xt = torch.tensor(x, requires_grad=True)
    y = pe_core.apply_rope(xt, pos, frequencies=f, layout=layout)
    (y * torch.tensor(w)).sum().backward()
    want = _analytic_frequency_gradient(x, w, pos, freqs, layout)
    assert_close(f.grad, want, atol=1e-11, backend="torch", dtype="float64")
    # d/dx of sum(w * R x) = R^T w = rope(w, -pos)
    back = pe_core.apply_rope(torch.tensor(w), -pos, frequencies=f.detach(), layout=layout)
    assert_close(xt.grad, to_numpy(back), atol=1e-12, backend="torch", dtype="float64")


def test_tensorflow_gradients_are_analytic() -> None:
    tf = pytest.importorskip("tensorflow")
    rng = _rng(5)
    x, w = rng.standard_normal((2, 2, 3, 6))
    freqs = rng.standard_normal((2, 3)) * 0.5
    pos = np.array([0.0, 2.0, 9.0])
    f = tf.Variable(freqs)
    with tf.GradientTape() as tape:
        y = pe_core.apply_rope(tf.constant(x), pos, frequencies=f)
        loss = tf.reduce_sum(y * w)
    grad = tape.gradient(loss, f)
    want = _analytic_frequency_gradient(x, w, pos, freqs, "half")
    assert_close(grad, want, atol=1e-11, backend="tensorflow", dtype="float64")

    @tf.function
    def traced(p: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(pe_core.apply_rope(tf.constant(x), p, frequencies=f) * w)
        return tape.gradient(loss, f)

    assert_close(traced(tf.constant(pos)), want, atol=1e-11, backend="tensorflow")


def _jax_formula(x: Any, pos: Any, freqs: Any) -> Any:
    """The straightforward rotate-half formula in jax.numpy (Hugging Face's, per head)."""
    import jax.numpy as jnp

    angles = pos[:, None] * freqs[:, None, :]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, -1)
    sin = jnp.concatenate([jnp.sin(angles)] * 2, -1)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def test_jax_grad_and_jit_equal_the_plain_formula() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = _rng(6)
    x = jnp.asarray(rng.standard_normal((2, 3, 5, 8)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((2, 3, 5, 8)), jnp.float32)
    freqs = jnp.asarray(rng.standard_normal((3, 4)) * 0.5, jnp.float32)
    pos = jnp.arange(5, dtype=jnp.float32) * 3.0

    def ours(f: Any, x: Any, p: Any) -> Any:
        return jnp.sum(w * pe_core.apply_rope(x, p, frequencies=f))

    def plain(f: Any, x: Any, p: Any) -> Any:
        return jnp.sum(w * _jax_formula(x, p, f))

    # eager jax.grad runs in test_no_host_read_jax; here both sides under jax.jit
    want = jax.jit(jax.grad(plain, argnums=(0, 1)))(freqs, x, pos)
    got = jax.jit(jax.grad(ours, argnums=(0, 1)))(freqs, x, pos)
    for g, e in zip(got, want, strict=True):
        assert_close(g, np.asarray(e), atol=2e-5, rtol=1e-5, backend="jax", dtype="float32")
    # host positions inside jit (constants) and traced positions give the same numbers
    jitted = jax.jit(lambda f, x: pe_core.apply_rope(x, range(5), frequencies=f * 3.0))
    assert_close(jitted(freqs, x), np.asarray(_jax_formula(x, pos / 3.0, freqs * 3.0)), atol=2e-6)


def test_torch_compile_forward_and_backward() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng(7)
    x = torch.tensor(rng.standard_normal((2, 3, 6, 8)), dtype=torch.float32)
    freqs = torch.tensor(rng.standard_normal((3, 4)) * 0.3, dtype=torch.float32)

    def step(f: Any, x: Any, p: Any) -> Any:
        return pe_core.apply_rope(x, p, frequencies=f, layout="interleaved")

    # the whole call as one traced graph (dynamo, fullgraph); autograd runs through it
    compiled = torch.compile(step, backend="eager", fullgraph=True)
    pos = torch.arange(6)
    f_eager = freqs.clone().requires_grad_()
    f_compiled = freqs.clone().requires_grad_()
    eager_out = step(f_eager, x, pos)
    compiled_out = compiled(f_compiled, x, pos)
    assert_equal(compiled_out.detach(), eager_out.detach().numpy())
    eager_out.square().sum().backward()
    compiled_out.square().sum().backward()
    assert_close(f_compiled.grad, f_eager.grad.numpy(), atol=1e-5, rtol=1e-6)


# --------------------------------------------------------------------------- placement


def test_no_host_read_torch() -> None:
    torch = pytest.importorskip("torch")
    f = torch.nn.Parameter(torch.rand(2, 4))
    mixed = torch.nn.Parameter(torch.rand(2, 2, 4))
    x = torch.randn(1, 2, 5, 8)
    pos = torch.arange(5)
    coords = torch.rand(5, 2) * 10
    with force_device_path(), forbid_host_reads("torch"):
        for p in (pos, range(5)):
            y = pe_core.apply_rope(x, p, frequencies=f)
            y.sum().backward()
        z = pe_core.apply_rope_mixed(x, coords, mixed, layout="interleaved")
        z.sum().backward()
        t = pe_core.encode(pos, 8, frequencies=f[0])
        t.sum().backward()
    assert f.grad is not None and mixed.grad is not None


def test_no_host_read_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    f = jnp.ones((2, 4)) * 0.1
    mixed = jnp.ones((2, 2, 4)) * 0.1
    x = jnp.ones((1, 2, 5, 8))
    coords = jnp.ones((5, 2))

    def loss(f: Any, m: Any) -> Any:
        y = pe_core.apply_rope(x, jnp.arange(5), frequencies=f)
        z = pe_core.apply_rope_mixed(x, coords, m)
        t = pe_core.encode(jnp.arange(5), 8, frequencies=f[0])
        return jnp.sum(y) + jnp.sum(z) + jnp.sum(t)

    with force_device_path(), forbid_host_reads("jax"):
        grads = jax.grad(loss, argnums=(0, 1))(f, mixed)
        y = pe_core.apply_rope(x, range(5), frequencies=f)
    assert grads[0].shape == (2, 4) and y.shape == x.shape


# --------------------------------------------------------------------------- parity


def _timm_rot(x: Any) -> Any:
    """timm ``rot`` (timm/layers/pos_embed_sincos.py)."""
    import torch

    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def _timm_apply_rot_embed_cat(x: Any, emb: Any) -> Any:
    """timm ``apply_rot_embed_cat`` (timm/layers/pos_embed_sincos.py)."""
    sin_emb, cos_emb = emb.tensor_split(2, -1)
    return x * cos_emb + _timm_rot(x) * sin_emb


def _timm_get_mixed_grid(shape: list[int]) -> tuple[Any, Any]:
    """timm ``get_mixed_grid`` with ``grid_indexing='xy'`` (RotaryEmbeddingMixed's default)."""
    import torch

    shape = [shape[1], shape[0]] + list(shape[2:])  # swap_shape_xy
    x_pos, y_pos = torch.meshgrid(
        torch.arange(shape[0], dtype=torch.float32),
        torch.arange(shape[1], dtype=torch.float32),
        indexing="xy",
    )
    return x_pos.flatten(), y_pos.flatten()


def _timm_get_mixed_freqs(freqs: Any, t_x: Any, t_y: Any) -> Any:
    """timm ``get_mixed_freqs``: freqs (2, depth, heads, head_dim // 2)."""
    import torch

    dtype = freqs.dtype
    freqs = freqs.float()
    freqs_x = t_x.unsqueeze(-1) @ freqs[0].unsqueeze(-2)
    freqs_y = t_y.unsqueeze(-1) @ freqs[1].unsqueeze(-2)
    combined = freqs_x + freqs_y
    sin_emb = torch.sin(combined).repeat_interleave(2, -1)
    cos_emb = torch.cos(combined).repeat_interleave(2, -1)
    return torch.cat([sin_emb, cos_emb], dim=-1).to(dtype)


def test_parity_timm_rope_mixed() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng(8)
    depth, heads, head_dim, grid = 2, 3, 8, [3, 4]
    freqs = torch.tensor(rng.standard_normal((2, depth, heads, head_dim // 2)), dtype=torch.float32)
    x = torch.tensor(rng.standard_normal((2, heads, 12, head_dim)), dtype=torch.float32)
    t_x, t_y = _timm_get_mixed_grid(grid)
    theirs_f = freqs.clone().requires_grad_()
    ours_f = freqs.clone().requires_grad_()
    block = 1
    theirs = _timm_apply_rot_embed_cat(x, _timm_get_mixed_freqs(theirs_f, t_x, t_y)[block])
    ours = pe_core.apply_rope_mixed(
        x, torch.stack([t_x, t_y], -1), ours_f[:, block], layout="interleaved"
    )
    assert_close(ours.detach(), theirs.detach().numpy(), atol=1e-6, backend="torch")
    theirs.square().sum().backward()
    ours.square().sum().backward()
    assert_close(ours_f.grad, theirs_f.grad.numpy(), atol=1e-4, rtol=1e-5, backend="torch")


def _mochi_apply_rotary_emb(x: Any, freqs_cos: Any, freqs_sin: Any) -> Any:
    """diffusers ``MochiAttnProcessor2_0``'s ``apply_rotary_emb`` (attention_processor.py)."""
    import torch

    x_even = x[..., 0::2].float()
    x_odd = x[..., 1::2].float()
    cos = (x_even * freqs_cos - x_odd * freqs_sin).to(x.dtype)
    sin = (x_even * freqs_sin + x_odd * freqs_cos).to(x.dtype)
    return torch.stack([cos, sin], dim=-1).flatten(-2)


def test_parity_diffusers_mochi() -> None:
    torch = pytest.importorskip("torch")
    mochi = pytest.importorskip("diffusers.models.transformers.transformer_mochi")
    rng = _rng(9)
    heads, head_dim = 2, 8
    rope = mochi.MochiRoPE(base_height=8, base_width=8)
    freqs = torch.tensor(rng.standard_normal((3, heads, head_dim // 2)) * 0.5, dtype=torch.float32)
    theirs_f = freqs.clone().requires_grad_()
    ours_f = freqs.clone().requires_grad_()
    cos, sin = rope(theirs_f, 2, 3, 4, device=torch.device("cpu"), dtype=torch.float32)
    pos = rope._get_positions(2, 3, 4, dtype=torch.float32)  # (N, 3)
    n_tokens = pos.shape[0]
    query = torch.tensor(rng.standard_normal((1, n_tokens, heads, head_dim)), dtype=torch.float32)
    theirs = _mochi_apply_rotary_emb(query, cos, sin)  # (B, N, H, D)
    ours = pe_core.apply_rope_mixed(query.transpose(1, 2), pos, ours_f, layout="interleaved")
    ours = ours.transpose(1, 2)
    assert_close(ours.detach(), theirs.detach().numpy(), atol=1e-5, backend="torch")
    theirs.square().sum().backward()
    ours.square().sum().backward()
    assert_close(ours_f.grad, theirs_f.grad.numpy(), atol=1e-3, rtol=1e-4, backend="torch")


def test_parity_transformers_lightglue() -> None:
    """LightGlue's learned Fourier rotary: ``nn.Linear(2, n)`` of the keypoints is the
    angle, i.e. mixed-axis frequencies ``weight.T`` of shape ``(2, n)``."""
    torch = pytest.importorskip("torch")
    lightglue = pytest.importorskip("transformers.models.lightglue.modeling_lightglue")
    from types import SimpleNamespace

    torch.manual_seed(0)
    heads, head_dim, batch, n_points = 2, 8, 2, 5
    config = SimpleNamespace(descriptor_dim=heads * head_dim, num_attention_heads=heads)
    encoder = lightglue.LightGluePositionalEncoder(config)
    keypoints = torch.rand(batch, n_points, 2) * 2 - 1
    q = torch.randn(batch, heads, n_points, head_dim)
    ((cos, sin),) = encoder(keypoints)
    theirs, _ = lightglue.apply_rotary_pos_emb(q, q, cos, sin)
    weight = encoder.projector.weight  # (n, 2): the learned frequencies
    ours = pe_core.apply_rope_mixed(q, keypoints[:, None], weight.T, layout="interleaved")
    assert_close(ours.detach(), theirs.detach().numpy(), atol=1e-6, backend="torch")
    ours.sum().backward()
    ours_grad = weight.grad.clone()
    weight.grad = None
    theirs.sum().backward()
    assert_close(ours_grad, weight.grad.numpy(), atol=1e-5, rtol=1e-5, backend="torch")


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_rope_mixed_angles_values(backend: str) -> None:
    rng = _rng(10)
    freqs = rng.standard_normal((3, 2, 4)).astype(np.float32)
    pos = (rng.standard_normal((6, 3)) * 50).astype(np.float32)
    got = pe_core.rope_mixed_angles(_on(backend, pos), _on(backend, freqs))
    terms = pos.T[:, None, :, None].astype(np.float64) * freqs[:, :, None, :]
    want = terms.sum(0)  # (heads, seq, n)
    bound = (3 + 1) * EPS32 * np.abs(terms).sum(0)  # (k + 1) eps sum |pos_a f_a|
    assert_close(got, want, atol=bound, backend=backend, dtype="float32")
    one = pe_core.rope_angles(_on(backend, pos[:, 0]), _on(backend, freqs[0]))
    assert_close(one, terms[0], atol=2 * EPS32 * np.abs(terms[0]), backend=backend)


# --------------------------------------------------------------------------- errors


def test_errors() -> None:
    torch = pytest.importorskip("torch")
    x = torch.zeros(2, 5, 8)
    f = torch.ones(2, 4)
    with pytest.raises(TypeError, match="floating array"):
        pe_core.apply_rope(x, range(5), frequencies=torch.ones(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="rotary_dim must be 2"):
        pe_core.apply_rope(x, range(5), frequencies=f, rotary_dim=4)
    with pytest.raises(ValueError, match="more than head_dim / 2"):
        pe_core.apply_rope(x, range(5), frequencies=torch.ones(5))
    with pytest.raises(ValueError, match="does not broadcast"):
        pe_core.apply_rope(x, range(5), frequencies=torch.ones(3, 4))
    with pytest.raises(ValueError, match="scaling cannot be combined"):
        pe_core.apply_rope(
            x, range(5), frequencies=f, scaling={"rope_type": "linear", "factor": 2.0}
        )
    with pytest.raises(ValueError, match="base cannot be combined"):
        pe_core.apply_rope(x, range(5), frequencies=f, base=500.0)
    with pytest.raises(ValueError, match="last axis of 2 coordinates"):
        pe_core.apply_rope_mixed(x, torch.zeros(5, 3), torch.ones(2, 2, 4))
    with pytest.raises(ValueError, match=r"shape \(k, \.\.\., n\)"):
        pe_core.apply_rope_mixed(x, torch.zeros(5, 1), torch.ones(4))
    with pytest.raises(ValueError, match="d must be 2"):
        pe_core.encode(range(3), 6, frequencies=torch.ones(2))
    with pytest.raises(ValueError, match="out= is not supported"):
        pe_core.encode(range(3), 4, frequencies=torch.ones(2), out=np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="framework array"):
        pe_core.rope_angles(range(3), np.ones(2))
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError, match="must be arrays of one framework"):
        pe_core.apply_rope(x, range(5), frequencies=jax.numpy.ones(4))
    with pytest.raises(TypeError, match="differs from the framework"):
        pe_core.encode(range(3), 4, frequencies=torch.ones(2), backend="jax")
