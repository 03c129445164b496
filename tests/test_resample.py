"""pe_core.resample: PyTorch's interpolation numbers on every backend, and parity with the
model code that resizes learned position tables (timm, transformers ViT, SAM, SigLIP2,
BEiT)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core import resample
from pe_core._resample import weights
from pe_core.host_reads import forbid_host_reads
from pe_core_backends import get_namespace

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (old grid, new grid): up, down, identity, non-square, 1-wide, large factors
SIZE_PAIRS = [
    ((14, 14), (32, 32)),
    ((32, 32), (14, 14)),
    ((7, 7), (7, 7)),
    ((7, 7), (7, 12)),
    ((4, 6), (9, 3)),
    ((16, 16), (24, 10)),
    ((3, 3), (1, 5)),
    ((24, 24), (5, 5)),
    ((2, 2), (17, 17)),
]
#: eager JAX compiles a program per configuration: fewer pairs there (the weights are
#: the same code on every backend, checked against torch for many more sizes)
FEW_PAIRS = [SIZE_PAIRS[i] for i in (3, 4, 7, 1)]
MODES = [(mode, aa) for mode in ("bicubic", "bilinear") for aa in (False, True)]


def timm_resample_abs_pos_embed(
    posemb, new_size, old_size=None, num_prefix_tokens=1, interpolation="bicubic", antialias=True
):
    """timm ``timm/layers/pos_embed.py`` ``resample_abs_pos_embed``, restated line by line
    (the ``verbose`` logging left out)."""
    num_pos_tokens = posemb.shape[1]
    num_new_tokens = new_size[0] * new_size[1] + num_prefix_tokens
    if num_new_tokens == num_pos_tokens and new_size[0] == new_size[1]:
        return posemb
    if old_size is None:
        hw = int(math.sqrt(num_pos_tokens - num_prefix_tokens))
        old_size = hw, hw
    if num_prefix_tokens:
        posemb_prefix, posemb = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    else:
        posemb_prefix, posemb = None, posemb
    embed_dim = posemb.shape[-1]
    orig_dtype = posemb.dtype
    posemb = posemb.float()
    posemb = posemb.reshape(1, old_size[0], old_size[1], -1).permute(0, 3, 1, 2)
    posemb = F.interpolate(posemb, size=new_size, mode=interpolation, antialias=antialias)
    posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, embed_dim)
    posemb = posemb.to(orig_dtype)
    if posemb_prefix is not None:
        posemb = torch.cat([posemb_prefix, posemb], dim=1)
    return posemb


def timm_resize_rel_pos_bias_table_simple(rel_pos_bias, new_window_size, new_bias_shape):
    """timm ``timm/layers/pos_embed_rel.py`` ``resize_rel_pos_bias_table_simple``, restated."""
    dst_size = (new_window_size[0] * 2 - 1, new_window_size[1] * 2 - 1)
    if rel_pos_bias.ndim == 3:
        _, dst_h, dst_w = new_bias_shape
        _num_attn_heads, src_h, src_w = rel_pos_bias.shape
        assert dst_h == dst_size[0] and dst_w == dst_size[1]
        if src_h != dst_h or src_w != dst_w:
            rel_pos_bias = F.interpolate(
                rel_pos_bias.unsqueeze(0), size=dst_size, mode="bicubic", align_corners=False
            ).squeeze(0)
    else:
        assert rel_pos_bias.ndim == 2
        dst_num_pos, _ = new_bias_shape
        src_num_pos, _num_attn_heads = rel_pos_bias.shape
        num_extra_tokens = dst_num_pos - (dst_size[0] * dst_size[1])
        src_size = int((src_num_pos - num_extra_tokens) ** 0.5)
        src_size = (src_size, src_size)
        if src_size[0] != dst_size[0] or src_size[1] != dst_size[1]:
            if num_extra_tokens:
                extra_tokens = rel_pos_bias[-num_extra_tokens:, :]
                rel_pos_bias = rel_pos_bias[:-num_extra_tokens, :]
            else:
                extra_tokens = None
            rel_pos_bias = (
                F.interpolate(
                    rel_pos_bias.transpose(1, 0).reshape((1, -1, src_size[0], src_size[1])),
                    size=dst_size,
                    mode="bicubic",
                    align_corners=False,
                )
                .view(-1, dst_num_pos - num_extra_tokens)
                .transpose(0, 1)
            )
            if extra_tokens is not None:
                rel_pos_bias = torch.cat((rel_pos_bias, extra_tokens), dim=0)
    return rel_pos_bias


def torch_resize(table: np.ndarray, old, new, mode, aa) -> np.ndarray:
    """``F.interpolate`` of a ``(N, prefix + h * w, C)`` table's grid (no timm shortcut),
    in the table's dtype."""
    t = torch.from_numpy(table)
    n, rows, c = t.shape
    prefix = rows - old[0] * old[1]
    grid = t[:, prefix:].reshape(n, old[0], old[1], c).permute(0, 3, 1, 2)
    out = F.interpolate(grid, size=new, mode=mode, align_corners=False, antialias=aa)
    out = out.permute(0, 2, 3, 1).reshape(n, -1, c)
    return torch.cat([t[:, :prefix], out], dim=1).numpy()


#: float32 parity: |ours - torch| <= REL * max|torch| (torch's own float32 kernels sit up
#: to about 4e-6 of the magnitude from the float64 result; ours within 2e-7)
REL = 1e-5


def rel_bound(reference: np.ndarray, rel: float) -> float:
    """A tolerance relative to the reference's magnitude (cancellation makes some entries
    tiny, so an elementwise relative bound alone would test rounding noise)."""
    return rel * float(np.abs(reference).max())


def on(backend: str, x: np.ndarray):
    return get_namespace(backend).asarray(x)


def some(backend: str, cases: list, few: int = 2) -> list:
    """All the cases, or the first ``few`` where every eager call compiles a program."""
    return cases[:few] if get_namespace(backend).compile_eager_kernels else cases


# -- the weights themselves -------------------------------------------------------------
@pytest.mark.parametrize(("mode", "aa"), MODES)
def test_weights_are_torchs(mode: str, aa: bool) -> None:
    """Row i of the matrix is F.interpolate of the identity along one axis (float64)."""
    for a, b in [(14, 32), (32, 14), (7, 7), (1, 4), (4, 1), (5, 3), (37, 11), (11, 37), (300, 7)]:
        eye = torch.eye(a, dtype=torch.float64)[None, None]  # resized along H only
        ref = F.interpolate(eye, size=(b, a), mode=mode, align_corners=False, antialias=aa)
        np.testing.assert_allclose(weights(a, b, mode, aa), ref[0, 0].numpy(), atol=1e-14)


@given(
    st.integers(1, 48),
    st.integers(1, 48),
    st.sampled_from(MODES),
)
def test_weights_are_torchs_for_any_sizes(a: int, b: int, mode_aa: tuple[str, bool]) -> None:
    mode, aa = mode_aa
    eye = torch.eye(a, dtype=torch.float64)[None, None]
    ref = F.interpolate(eye, size=(b, a), mode=mode, align_corners=False, antialias=aa)
    np.testing.assert_allclose(weights(a, b, mode, aa), ref[0, 0].numpy(), atol=1e-13)


def test_weights_rows_sum_to_one_and_are_cached() -> None:
    for mode, aa in MODES:
        w = weights(13, 29, mode, aa)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-14)
        assert weights(13, 29, mode, aa) is w
        assert not w.flags.writeable


# -- resample_pos_embed ---------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "aa"), MODES)
def test_resample_pos_embed_is_timms(backend: str, mode: str, aa: bool) -> None:
    rng = np.random.default_rng(0)
    prefixes = dict(zip(SIZE_PAIRS, [1, 0, 1, 2, 1, 0, 4, 1, 1], strict=True))
    pairs = SIZE_PAIRS
    if get_namespace(backend).compile_eager_kernels:  # one pair per mode, each a new shape
        pairs = [FEW_PAIRS[MODES.index((mode, aa)) % len(FEW_PAIRS)]]
    for old, new in pairs:
        prefix = prefixes[old, new]
        table = rng.normal(size=(1, prefix + old[0] * old[1], 6)).astype(np.float32)
        got = resample.resample_pos_embed(
            on(backend, table),
            new,
            old_size=old,
            num_prefix_tokens=prefix,
            interpolation=mode,
            antialias=aa,
        )
        if old[0] * old[1] == new[0] * new[1] and new[0] == new[1]:
            want = torch_resize(table, old, new, mode, aa)  # timm's shortcut: same grid only
        else:
            want = timm_resample_abs_pos_embed(
                torch.from_numpy(table), new, old, prefix, mode, aa
            ).numpy()
        assert_close(
            got,
            want,
            atol=rel_bound(want, REL),
            backend=backend,
            dtype="float32",
            err_msg=f"{old} -> {new}, {mode}, antialias={aa}",
        )
        exact = torch_resize(table.astype(np.float64), old, new, mode, aa)
        assert_close(got, exact, atol=rel_bound(exact, 1e-6), err_msg="float64 truth")


@pytest.mark.parametrize(("mode", "aa"), MODES)
def test_float64_is_torchs_float64(backend: str, mode: str, aa: bool) -> None:
    xp = get_namespace(backend)
    if not xp.supports("float64"):
        pytest.skip(f"{backend} has no float64 now")
    rng = np.random.default_rng(1)
    for old, new in SIZE_PAIRS:
        table = rng.normal(size=(2, 1 + old[0] * old[1], 3))
        got = resample.resample_pos_embed(
            xp.asarray(table), new, old_size=old, interpolation=mode, antialias=aa
        )
        want = torch_resize(table, old, new, mode, aa)
        assert_close(got, want, atol=1e-13, rtol=1e-12, backend=backend, dtype="float64")


def test_real_size_table_on_every_backend(backend: str) -> None:
    """14 x 14 -> 32 x 32 with 768 channels, up and back down."""
    rng = np.random.default_rng(2)
    table = (0.02 * rng.normal(size=(1, 1 + 14 * 14, 768))).astype(np.float32)
    with forbid_host_reads():
        up = pe_core.resample_pos_embed(on(backend, table), (32, 32))
    want = timm_resample_abs_pos_embed(torch.from_numpy(table), (32, 32), antialias=False)
    assert_close(up, want.numpy(), atol=rel_bound(want.numpy(), REL), backend=backend)
    big = want.numpy()
    down = pe_core.resample_pos_embed(on(backend, big), 14, antialias=True)
    want = timm_resample_abs_pos_embed(torch.from_numpy(big), (14, 14), antialias=True).numpy()
    assert_close(down, want, atol=rel_bound(want, REL), backend=backend)


def test_low_precision_tables_round_once(backend: str) -> None:
    xp = get_namespace(backend)
    table = np.random.default_rng(3).normal(size=(1, 1 + 36, 4)).astype(np.float32)
    for name in some(backend, ["bfloat16", "float16"], few=1):
        if name not in xp.float_dtypes:
            continue
        low = xp.astype(xp.asarray(table), xp.dtype(name))
        got = resample.resample_pos_embed(low, 9)
        assert xp.dtype_of(got) == name
        exact = torch_resize(to_numpy(low).astype(np.float32), (6, 6), (9, 9), "bicubic", False)
        eps = 2.0**-8 if name == "bfloat16" else 2.0**-11
        assert_close(got, exact, atol=eps * np.abs(exact) + 1e-6)


def test_same_grid_is_the_table_itself(backend: str) -> None:
    table = on(backend, np.ones((1, 50, 3), np.float32))
    assert resample.resample_pos_embed(table, 7) is table


def test_jax_jit_and_grad() -> None:
    jax = pytest.importorskip("jax")
    table = np.random.default_rng(4).normal(size=(1, 1 + 49, 5)).astype(np.float32)
    traces = []

    @jax.jit
    def f(t):
        traces.append(1)
        return resample.resample_pos_embed(t, (10, 12), antialias=True)

    want = torch_resize(table, (7, 7), (10, 12), "bicubic", True)
    for _ in range(2):
        assert_close(f(jax.numpy.asarray(table)), want, atol=rel_bound(want, REL), backend="jax")
    assert len(traces) == 1
    # the gradient of sum(out * g) is W^T g W: the torch autograd numbers
    g = np.random.default_rng(5).normal(size=want.shape).astype(np.float32)
    grad = jax.grad(lambda t: (f(t) * g).sum())(jax.numpy.asarray(table))
    t = torch.from_numpy(table).requires_grad_(True)
    ref = torch_resize_autograd(t, (7, 7), (10, 12), "bicubic", True)
    (ref * torch.from_numpy(g)).sum().backward()
    assert_close(grad, t.grad.numpy(), atol=rel_bound(t.grad.numpy(), REL))


def torch_resize_autograd(t, old, new, mode, aa):
    n, rows, c = t.shape
    prefix = rows - old[0] * old[1]
    grid = t[:, prefix:].reshape(n, old[0], old[1], c).permute(0, 3, 1, 2)
    out = F.interpolate(grid, size=new, mode=mode, align_corners=False, antialias=aa)
    return torch.cat([t[:, :prefix], out.permute(0, 2, 3, 1).reshape(n, -1, c)], dim=1)


def test_torch_compile_and_autograd() -> None:
    table = np.random.default_rng(6).normal(size=(1, 1 + 64, 4)).astype(np.float32)
    f = torch.compile(
        lambda t: resample.resample_pos_embed(t, (5, 11), interpolation="bilinear"),
        backend="eager",
        fullgraph=True,
    )
    t = torch.from_numpy(table).requires_grad_(True)
    out = f(t)
    ref_t = torch.from_numpy(table).requires_grad_(True)
    ref = torch_resize_autograd(ref_t, (8, 8), (5, 11), "bilinear", False)
    assert_close(
        out.detach(), ref.detach(), atol=rel_bound(ref.detach().numpy(), REL), backend="torch"
    )
    g = torch.from_numpy(np.random.default_rng(7).normal(size=ref.shape).astype(np.float32))
    (out * g).sum().backward()
    (ref * g).sum().backward()
    assert_close(t.grad, ref_t.grad, atol=rel_bound(ref_t.grad.numpy(), REL))


def test_tf_function() -> None:
    tf = pytest.importorskip("tensorflow")
    table = np.random.default_rng(8).normal(size=(1, 1 + 25, 4)).astype(np.float32)
    f = tf.function(lambda t: resample.resample_pos_embed(t, (12, 8), antialias=True))
    want = torch_resize(table, (5, 5), (12, 8), "bicubic", True)
    assert_close(f(tf.constant(table)), want, atol=rel_bound(want, REL), backend="tensorflow")


# -- model code: transformers ViT, SAM, SigLIP2, BEiT; timm's bias tables --------------------
def test_vit_interpolate_pos_encoding_is_transformers(backend: str) -> None:
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTEmbeddings

    torch.manual_seed(0)
    config = ViTConfig(image_size=56, patch_size=8, hidden_size=12, num_channels=3)
    emb = ViTEmbeddings(config).eval()
    table = emb.position_embeddings.detach().numpy()  # (1, 1 + 7 * 7, 12)
    for height, width in some(backend, [(96, 64), (33, 17), (56, 56), (40, 120)]):
        tokens = torch.zeros(1, 1 + (height // 8) * (width // 8), 12)
        with torch.no_grad():
            want = emb.interpolate_pos_encoding(tokens, height, width).numpy()
        got = resample.interpolate_pos_encoding(on(backend, table), height, width, 8)
        assert_close(got, want, atol=rel_bound(want, REL), backend=backend)


def sam_attention():
    from transformers import SamVisionConfig
    from transformers.models.sam.modeling_sam import SamVisionAttention

    config = SamVisionConfig(hidden_size=16, num_attention_heads=2, use_rel_pos=True)
    return SamVisionAttention(config, window_size=0)


def test_sam_get_rel_pos_is_transformers(backend: str) -> None:
    attn = sam_attention()
    rng = np.random.default_rng(9)
    cases = [(6, 3, 9), (4, 4, 11), (14, 14, 27), (4, 4, 7), (3, 6, 5), (5, 8, 15)]
    for q, k, length in some(backend, cases):
        rel = rng.normal(size=(length, 8)).astype(np.float32)
        want = attn.get_rel_pos(q, k, torch.from_numpy(rel)).numpy()
        got = resample.get_rel_pos(q, k, on(backend, rel))
        assert_close(got, want, atol=rel_bound(want, REL), backend=backend)


def test_sam_decomposed_rel_pos_is_transformers(backend: str) -> None:
    attn = sam_attention()
    rng = np.random.default_rng(10)
    for q_size, k_size in some(backend, [((3, 5), (6, 2)), ((4, 4), (4, 4))], few=1):
        query = rng.normal(size=(2, q_size[0] * q_size[1], 8)).astype(np.float32)
        rel_h = rng.normal(size=(9, 8)).astype(np.float32)
        rel_w = rng.normal(size=(5, 8)).astype(np.float32)
        args = [torch.from_numpy(a) for a in (query, rel_h, rel_w)]
        want = attn.get_decomposed_rel_pos(*args, q_size, k_size).numpy()
        got = resample.decomposed_rel_pos(
            on(backend, query), on(backend, rel_h), on(backend, rel_w), q_size, k_size
        )
        assert_close(got, want, atol=rel_bound(want, REL), backend=backend)
        logits = rng.normal(size=(2, q_size[0] * q_size[1], k_size[0] * k_size[1]))
        logits = logits.astype(np.float32)
        added = resample.add_decomposed_rel_pos(
            on(backend, logits),
            on(backend, query),
            on(backend, rel_h),
            on(backend, rel_w),
            q_size,
            k_size,
        )
        assert_close(added, logits + want.reshape(logits.shape), atol=rel_bound(want, 1e-6))


def test_siglip2_naflex_is_transformers(backend: str) -> None:
    from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings

    table = np.random.default_rng(11).normal(size=(16, 16, 8)).astype(np.float32)
    shapes = [(8, 12), (16, 16), (20, 5), (3, 30), (1, 1)]
    want = Siglip2VisionEmbeddings.resize_positional_embeddings(
        torch.from_numpy(table), torch.tensor(shapes), 256
    ).numpy()
    got = resample.resize_naflex_pos_embed(on(backend, table), shapes, 256)
    assert_close(got, want, atol=rel_bound(want, REL), backend=backend)
    # also the F.interpolate reading of it, antialias on, each image on its own
    for i, (h, w) in enumerate(shapes):
        grid = torch.from_numpy(table).permute(2, 0, 1)[None]
        ref = F.interpolate(grid, size=(h, w), mode="bilinear", antialias=True)
        ref = ref[0].reshape(8, h * w).T.numpy()
        assert_close(to_numpy(got)[i, : h * w], ref, atol=rel_bound(ref, REL))


def test_beit_bias_table_is_transformers(backend: str) -> None:
    from transformers import BeitConfig
    from transformers.models.beit.modeling_beit import BeitRelativePositionBias

    torch.manual_seed(0)
    config = BeitConfig(image_size=28, patch_size=4, num_attention_heads=3)  # window 7 x 7
    bias = BeitRelativePositionBias(config)
    with torch.no_grad():
        bias.relative_position_bias_table.normal_()
    table = bias.relative_position_bias_table.detach().numpy()
    for window in some(backend, [(10, 10), (4, 4), (7, 7)], few=1):
        with torch.no_grad():
            want = bias(window, interpolate_pos_encoding=False)[0].numpy()  # (heads, n, n)
        new = resample.resize_rel_pos_bias_table(
            on(backend, table), window, num_extra_tokens=3, interpolation="bilinear"
        )
        index = bias.generate_relative_position_index(window).view(-1).numpy()
        n = window[0] * window[1] + 1
        got = to_numpy(new)[index].reshape(n, n, 3).transpose(2, 0, 1)
        assert_close(got, want, atol=rel_bound(want, REL))


def test_rel_pos_bias_table_is_timms(backend: str) -> None:
    rng = np.random.default_rng(12)
    flat = rng.normal(size=(13 * 13 + 3, 4)).astype(np.float32)
    for window in some(backend, [(5, 9), (12, 12), (4, 4)], few=1):
        dst = (2 * window[0] - 1) * (2 * window[1] - 1)
        want = timm_resize_rel_pos_bias_table_simple(
            torch.from_numpy(flat), window, (dst + 3, 4)
        ).numpy()
        got = resample.resize_rel_pos_bias_table(on(backend, flat), window, num_extra_tokens=3)
        assert_close(got, want, atol=rel_bound(want, REL), backend=backend)
    cube = rng.normal(size=(4, 13, 13)).astype(np.float32)
    for window in some(backend, [(12, 6), (7, 7)], few=1):
        shape = (4, 2 * window[0] - 1, 2 * window[1] - 1)
        want = timm_resize_rel_pos_bias_table_simple(torch.from_numpy(cube), window, shape)
        got = resample.resize_rel_pos_bias_table(on(backend, cube), window)
        assert_close(got, want.numpy(), atol=rel_bound(want.numpy(), REL))


# -- loading a checkpoint with another grid -------------------------------------------------
def test_torch_load_state_dict_pre_hook() -> None:
    class Tiny(torch.nn.Module):
        def __init__(self, side: int) -> None:
            super().__init__()
            self.pos_embed = torch.nn.Parameter(torch.zeros(1, 1 + side * side, 6))

    small = Tiny(7)
    with torch.no_grad():
        small.pos_embed.normal_()
    big = Tiny(12)
    big.register_load_state_dict_pre_hook(resample.pos_embed_load_hook("pos_embed"))
    big.load_state_dict(small.state_dict())
    # timm's loading defaults: bicubic, antialias=True
    want = timm_resample_abs_pos_embed(small.pos_embed.detach(), (12, 12))
    assert_close(
        big.pos_embed.detach(),
        want.detach(),
        atol=rel_bound(want.detach().numpy(), REL),
        backend="torch",
    )
    off = Tiny(12)
    off.register_load_state_dict_pre_hook(resample.pos_embed_load_hook(antialias=False))
    off.load_state_dict(small.state_dict())
    plain = timm_resample_abs_pos_embed(small.pos_embed.detach(), (12, 12), antialias=False)
    assert_close(off.pos_embed.detach(), plain, atol=rel_bound(plain.numpy(), REL))
    outer = torch.nn.Sequential(Tiny(5))  # a prefix in the key: "0.pos_embed"
    outer[0].register_load_state_dict_pre_hook(resample.pos_embed_load_hook())
    outer.load_state_dict({"0.pos_embed": small.pos_embed.detach()})
    assert outer[0].pos_embed.shape == (1, 26, 6)


def _installed_timm_function(module: str, name: str):
    """``name`` from the installed timm's ``module`` source, compiled on its own (timm's
    package imports torchvision, which the tests do not need): the peer's own lines."""
    import ast
    import importlib.util
    import logging
    import typing
    from pathlib import Path

    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("timm is not installed")
    path = Path(spec.submodule_search_locations[0], *module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    scope = {"torch": torch, "F": F, "math": math, "_logger": logging.getLogger("timm")}
    scope.update({k: getattr(typing, k) for k in ("List", "Optional", "Tuple", "Union", "Dict")})
    scope["is_exporting"] = lambda: False
    exec(compile(ast.Module([node], []), str(path), "exec"), scope)
    return scope[name], node


def test_load_hook_defaults_are_installed_timms() -> None:
    """The hook resizes as the installed timm's own ``resample_abs_pos_embed`` does with
    the defaults timm loads checkpoints with (``checkpoint_filter_fn``)."""
    timm_resample, _ = _installed_timm_function("layers.pos_embed", "resample_abs_pos_embed")
    _, filter_fn = _installed_timm_function("models.vision_transformer", "checkpoint_filter_fn")
    defaults = dict(
        zip(
            [a.arg for a in filter_fn.args.args][-len(filter_fn.args.defaults) :],
            [getattr(d, "value", None) for d in filter_fn.args.defaults],
            strict=True,
        )
    )
    assert (defaults["interpolation"], defaults["antialias"]) == ("bicubic", True)
    checkpoint = torch.randn(1, 1 + 14 * 14, 8, generator=torch.Generator().manual_seed(3))
    model = torch.nn.Module()
    model.pos_embed = torch.nn.Parameter(torch.zeros(1, 1 + 24 * 24, 8))
    model.register_load_state_dict_pre_hook(resample.pos_embed_load_hook())
    model.load_state_dict({"pos_embed": checkpoint})
    want = timm_resample(checkpoint, [24, 24])
    assert_close(model.pos_embed.detach(), want, atol=rel_bound(want.numpy(), REL))
    assert float((want - timm_resample(checkpoint, [24, 24], antialias=False)).abs().max()) > 0.1


def test_flax_linen_and_nnx_load_a_checkpoint_with_another_grid() -> None:
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    import flax.linen as nn
    from flax import nnx
    from flax.core import FrozenDict

    jnp = jax.numpy
    rng = np.random.default_rng(11)
    ckpt = rng.standard_normal((1, 1 + 5 * 5, 6)).astype(np.float32)
    torch_want = timm_resample_abs_pos_embed(torch.from_numpy(ckpt), (8, 8), antialias=False)
    want = resample.resample_pos_embed(ckpt, 8)
    assert_close(want, torch_want.numpy(), atol=rel_bound(want, REL))

    class Linen(nn.Module):
        side: int

        @nn.compact
        def __call__(self, x):
            shape = (1, 1 + self.side * self.side, 6)
            return x + self.param("pos_embed", nn.initializers.zeros, shape)

    x = jnp.zeros((2, 65, 6), jnp.float32)
    model = Linen(8)
    head = {"kernel": np.ones((6, 2), np.float32)}
    tree = {"params": {"pos_embed": jnp.asarray(ckpt), "head": head}}
    loaded = resample.resample_pos_embed_in_tree(tree, "params/pos_embed", 8)
    assert loaded["params"]["head"] is head and tree["params"]["pos_embed"].shape == (1, 26, 6)
    assert isinstance(loaded["params"]["pos_embed"], jax.Array)  # stays a JAX array
    y = model.apply({"params": {"pos_embed": loaded["params"]["pos_embed"]}}, x)
    assert_close(y[0], want[0], atol=1e-6, backend="jax")
    frozen = resample.resample_pos_embed_in_tree(FrozenDict(tree), ("params", "pos_embed"), 8)
    assert isinstance(frozen, FrozenDict) and frozen["params"]["pos_embed"].shape == (1, 65, 6)

    class Nnx(nnx.Module):
        def __init__(self, side: int) -> None:
            self.blocks = nnx.List([nnx.Linear(6, 6, rngs=nnx.Rngs(0))])
            self.pos_embed = nnx.Param(jnp.zeros((1, 1 + side * side, 6)))

    big = Nnx(8)
    state = nnx.state(big)
    small = nnx.to_pure_dict(nnx.state(Nnx(5)))
    small["pos_embed"] = jnp.asarray(ckpt)
    nnx.replace_by_pure_dict(state, resample.resample_pos_embed_in_tree(small, "pos_embed", 8))
    nnx.update(big, state)
    assert_close(big.pos_embed[...], want, atol=1e-6, backend="jax")
    with pytest.raises(TypeError, match="table must be an array"):  # Variable leaves
        resample.resample_pos_embed_in_tree(nnx.state(Nnx(5)), "pos_embed", 8)


@pytest.mark.parametrize(
    ("tree", "path", "error", "words"),
    [
        ({"a": {"b": 1}}, "a/c", KeyError, "'c' is not in a"),
        ({"a": 1}, "a/b", TypeError, "a must be a mapping"),
        ({"a": 1}, "", ValueError, "path must name"),
        ({"a": 1}, 3, TypeError, "path must be"),
        ([], "a", TypeError, "tree must be a mapping"),
    ],
)
def test_tree_paths_are_checked(tree, path, error, words: str) -> None:
    with pytest.raises(error, match=__import__("re").escape(words)):
        resample.resample_pos_embed_in_tree(tree, path, 4)


# -- bad input, refused by name -------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda t: resample.resample_pos_embed(t, 0), ValueError, "new_size"),
        (lambda t: resample.resample_pos_embed(t, 4.0), TypeError, "new_size"),
        (lambda t: resample.resample_pos_embed(t, (4, 4, 4)), TypeError, "new_size"),
        (
            lambda t: resample.resample_pos_embed(t, 4, interpolation="nearest"),
            ValueError,
            "interpolation 'nearest'",
        ),
        (lambda t: resample.resample_pos_embed(t, 4, antialias=1), TypeError, "antialias"),
        (
            lambda t: resample.resample_pos_embed(t, 4, num_prefix_tokens=-1),
            ValueError,
            "num_prefix_tokens",
        ),
        (
            lambda t: resample.resample_pos_embed(t, 4, num_prefix_tokens=0),
            ValueError,
            "old_size is needed",
        ),
        (lambda t: resample.resample_pos_embed(t, 4, old_size=(5, 4)), ValueError, "old_size"),
        (lambda t: resample.resample_pos_embed(t[0], 4), ValueError, "3 axes"),
        (lambda t: resample.resample_pos_embed(t.tolist(), 4), TypeError, "table must be an array"),
        (lambda t: resample.resample_pos_embed(t.astype(np.int32), 4), TypeError, "floating"),
        (lambda t: resample.interpolate_pos_encoding(t, 4, 64, 8), ValueError, "height"),
        (lambda t: resample.resize_naflex_pos_embed(t, [(4, 4)], 4), ValueError, "max_length"),
        (
            lambda t: resample.resize_naflex_pos_embed(t, [(4, 0)], 16),
            ValueError,
            "spatial_shapes[0][1]",
        ),
        (lambda t: resample.get_rel_pos(0, 4, t[0]), ValueError, "q_size"),
        (
            lambda t: resample.resize_rel_pos_bias_table(t[0], 3, num_extra_tokens=5),
            ValueError,
            "old_window_size is needed",
        ),
        (lambda t: resample.pos_embed_load_hook(""), TypeError, "name"),
    ],
)
def test_bad_input_is_refused_by_name(call, error, words: str) -> None:
    table = np.zeros((1, 1 + 36, 4), np.float32)
    with pytest.raises(error, match=f"(?i){__import__('re').escape(words)}"):
        call(table)


def test_framework_spatial_shapes_are_read_on_the_host() -> None:
    """transformers passes a torch LongTensor: the same result as the pairs."""
    table = torch.randn(4, 4, 2)
    got = resample.resize_naflex_pos_embed(table, torch.tensor([[2, 2], [3, 1]]), 4)
    want = resample.resize_naflex_pos_embed(table, [(2, 2), (3, 1)], 4)
    assert_close(got, want, atol=0.0, backend="torch")
    with pytest.raises(TypeError, match="spatial_shapes must hold integers"):
        resample.resize_naflex_pos_embed(table, torch.tensor([[2.0, 2.0]]), 4)


# -- the numbers of the resampling page -----------------------------------------------------
def test_resample_gaps_measure_what_the_page_says() -> None:
    """tf.image.resize's bicubic (Keys, A = -0.5) is far from torch's; bilinear is not;
    pe_core is within float32 rounding everywhere."""
    pytest.importorskip("tensorflow")
    from pe_core import plots

    gaps, patch_gap = plots.resample_gaps(6, 9, 8, backends=("torch", "tensorflow"))
    assert patch_gap is None
    for setting, _, _ in plots.RESAMPLE_SETTINGS:
        for method in ("pe_core, NumPy float32", "pe_core on tensorflow"):
            assert gaps[method][setting] < 1e-6, (method, setting)
        assert gaps["F.interpolate float32"][setting] < 1e-5
    assert gaps["tf.image.resize"]["bicubic, up"] > 1e-3
    assert gaps["tf.image.resize"]["bilinear, up"] < 1e-5
