"""pe_core.position_ids: parity with transformers' own functions and modules, every
backend, the traced modes, no host reads of framework arrays, and bad input."""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest
from conftest import assert_equal, positions_on
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pe_core import position_ids as P
from pe_core.host_reads import GUARDED_BACKENDS, forbid_host_reads
from pe_core_backends import force_device_path, get_namespace, is_installed

RNG = np.random.default_rng(0)


def _wide(backend: str) -> str:
    return "int64" if get_namespace(backend).supports("int64") else "int32"


def _padded_masks() -> np.ndarray:
    """Left padding, right padding, none, all padding, holes: (6, 9) of 0/1."""
    mask = np.ones((6, 9), dtype=np.int64)
    mask[0, :4] = 0
    mask[1, 6:] = 0
    mask[3, :] = 0
    mask[4, [1, 4, 5]] = 0
    mask[5] = RNG.integers(0, 2, 9)
    return mask


def _mask_reference(mask: np.ndarray, padding_value: int) -> np.ndarray:
    """Position ids by counting, token by token."""
    out = np.empty(mask.shape, dtype=np.int64)
    for row, values in enumerate(mask):
        seen = 0
        for i, value in enumerate(values):
            out[row, i] = seen if value else padding_value
            seen += bool(value)
    return out


def _cu_reference(cu: list[int], total: int) -> np.ndarray:
    out = []
    for t in range(total):
        start = max(c for c in cu if c <= t)
        out.append(t - start)
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------------- parity


def test_attention_mask_matches_transformers_generate():
    torch = pytest.importorskip("torch")
    generation = pytest.importorskip("transformers.generation.utils")
    mask = torch.as_tensor(_padded_masks())
    ids = torch.zeros_like(mask)
    # transformers 5: GenerationMixin._prepare_position_ids_for_generation (fills 0)
    want = generation.GenerationMixin._prepare_position_ids_for_generation(
        None, ids, {"attention_mask": mask}
    )
    assert_equal(P.from_attention_mask(mask, padding_value=0), want)
    # transformers 4's prepare_inputs_for_generation, kept by IdeficsModel.forward
    # (models/idefics/modeling_idefics.py) and Qwen2.5-Omni's get_rope_index:
    want = mask.long().cumsum(-1) - 1
    want.masked_fill_(mask == 0, 1)
    assert_equal(P.from_attention_mask(mask), want)
    assert_equal(P.from_attention_mask(mask.bool()), want)


def test_input_ids_match_roberta():
    torch = pytest.importorskip("torch")
    roberta = pytest.importorskip("transformers.models.roberta.modeling_roberta")
    create = roberta.RobertaEmbeddings.create_position_ids_from_input_ids
    ids = torch.as_tensor(RNG.integers(0, 6, (4, 11)))
    ids[0, -3:] = 1  # right padding, RoBERTa's padding_idx
    for padding_idx, past in ((1, 0), (1, 5), (0, 2), (7, 0)):
        want = create(ids, padding_idx, past)
        assert_equal(P.from_input_ids(ids, padding_idx, past), want)


def test_cu_seqlens_round_trip_through_transformers_flash_attention_kwargs():
    torch = pytest.importorskip("torch")
    fa = pytest.importorskip("transformers.modeling_flash_attention_utils")
    for cu in ([0, 3, 5], [0, 1, 2, 9], [0, 7]):
        ids = P.from_cu_seqlens(torch.tensor(cu), total_length=cu[-1])
        (cu_q, _), _ = fa.prepare_fa_kwargs_from_position_ids(ids[None])
        assert_equal(cu_q, torch.tensor(cu, dtype=torch.int32))


def _table_token_types(batch: int, seq: int) -> np.ndarray:
    """TAPAS-like token types (batch, seq, 7): a question (column 0, row 0), then table
    cells of 1-4 tokens in row-major order, then padding (0, 0)."""
    types = np.zeros((batch, seq, 7), dtype=np.int64)
    for b in range(batch):
        t = 3 + b
        row, column = 0, 1
        while t < seq - 2:
            width = int(RNG.integers(1, 5))
            types[b, t : t + width, 1] = column
            types[b, t : t + width, 2] = row
            t += width
            column += 1
            if column > 3:
                row, column = row + 1, 1
    return types


def test_table_cells_match_tapas_embeddings():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tapas = pytest.importorskip("transformers.models.tapas.modeling_tapas")
    types = torch.as_tensor(_table_token_types(3, 40))
    for max_positions in (64, 12):
        config = transformers.TapasConfig(
            vocab_size=10,
            hidden_size=4,
            max_position_embeddings=max_positions,
            type_vocab_sizes=[3, 4, 20, 2, 2, 2, 2],
            reset_position_index_per_cell=True,
        )
        module = tapas.TapasEmbeddings(config)
        seen = []
        module.position_embeddings.register_forward_pre_hook(
            lambda m, args, seen=seen: seen.append(args[0])
        )
        with torch.no_grad():
            module(input_ids=torch.zeros(types.shape[:2], dtype=torch.long), token_type_ids=types)
        got = P.from_table_cells(types, max_position_embeddings=max_positions)
        assert_equal(got, seen[0])


def _table_cells_reference(types: np.ndarray, cap: int | None) -> np.ndarray:
    """TAPAS's rule token by token: ``t`` minus the first token with its (column, row)."""
    seq = types.shape[-2]
    out = np.zeros(types.shape[:-1], np.int64)
    for index in np.ndindex(*types.shape[:-2]):
        cells = [(int(c), int(r)) for c, r in types[index][:, 1:3]]
        for t in range(seq):
            out[index + (t,)] = t - cells.index(cells[t])
    return out if cap is None else np.minimum(out, cap - 1)


_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@given(data=st.data())
def test_table_cells_match_the_token_by_token_rule(backend, data):
    """Any ids of any integer dtype (its extremes included), any batch axes and length,
    capped or not: the ids are TAPAS's, exactly."""
    xp = get_namespace(backend)
    dtype = data.draw(st.sampled_from([d for d in _INT_DTYPES if xp.supports(d)]))
    info = np.iinfo(dtype)
    pool = np.array([info.min, info.max, 0, 1, info.max - 1], dtype)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    shape = (*lead, data.draw(st.integers(0, 24)), data.draw(st.integers(3, 5)))
    kinds = data.draw(st.integers(0, 4))  # ids drawn from the first kinds + 1 of the pool
    types = pool[data.draw(arrays(np.int64, shape, elements=st.integers(0, kinds)))]
    cap = data.draw(st.none() | st.integers(1, 30))
    got = P.from_table_cells(xp.asarray(types), max_position_embeddings=cap)
    wide = _wide(backend)
    assert_equal(got, _table_cells_reference(types, cap).astype(wide), backend=backend, dtype=wide)


def test_table_cells_at_2_17_tokens_are_proportional_to_the_output(backend):
    """2**17 tokens in one sequence: (seq, seq) pairs would be 16 GiB (refused once);
    the sort takes a small multiple of the output (NumPy's peak is traced)."""
    seq = 2**17
    types = np.zeros((1, seq, 3), np.int64)
    types[0, 100:, 1] = np.arange(seq - 100) // 7 + 1
    types[0, -50:, 1:] = 0  # padding: the question's cell again
    array = positions_on(backend, types)
    if backend == "numpy":
        tracemalloc.start()
    got = P.from_table_cells(array)
    if backend == "numpy":
        assert tracemalloc.get_traced_memory()[1] < 16 * got.nbytes
        tracemalloc.stop()
    want = np.arange(seq) - np.where(types[0, :, 1] > 0, 100 + (np.arange(seq) - 100) // 7 * 7, 0)
    wide = _wide(backend)
    assert_equal(got, want[None].astype(wide), backend=backend, dtype=wide)


def _vision_modules():
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    idefics2 = pytest.importorskip("transformers.models.idefics2.modeling_idefics2")
    idefics3 = pytest.importorskip("transformers.models.idefics3.modeling_idefics3")
    smolvlm = pytest.importorskip("transformers.models.smolvlm.modeling_smolvlm")
    return (
        (idefics2.Idefics2VisionEmbeddings, transformers.Idefics2VisionConfig),
        (idefics3.Idefics3VisionEmbeddings, transformers.Idefics3VisionConfig),
        (smolvlm.SmolVLMVisionEmbeddings, transformers.SmolVLMVisionConfig),
    )


def _module_position_ids(embeddings_cls, config_cls, n: int, mask):
    """The position ids the module adds: patch embedding 0, position embedding k -> k."""
    torch = pytest.importorskip("torch")
    config = config_cls(hidden_size=1, image_size=n, patch_size=1, num_channels=1)
    module = embeddings_cls(config)
    with torch.no_grad():
        module.patch_embedding.weight.zero_()
        module.patch_embedding.bias.zero_()
        module.position_embedding.weight.copy_(torch.arange(n * n, dtype=torch.float32)[:, None])
        pixels = torch.zeros((mask.shape[0], 1, mask.shape[1], mask.shape[2]))
        out = module(pixels, mask)
    return out[..., 0].round().long()


def _image_masks(max_h: int, max_w: int, sizes) -> np.ndarray:
    mask = np.zeros((len(sizes), max_h, max_w), dtype=bool)
    for b, (h, w) in enumerate(sizes):
        mask[b, :h, :w] = True
    return mask


def _vector_width() -> int:
    torch = pytest.importorskip("torch")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512", "DEFAULT"):
        pytest.skip(f"no vector width known for PyTorch's {capability} build")
    return 16 if capability == "AVX512" else 8


def test_navit_matches_idefics_and_smolvlm_modules():
    torch = pytest.importorskip("torch")
    modules = _vision_modules()
    width = _vector_width()
    # heights 1..96 against n = 2 and 3 (the sizes where float32 rounding decides:
    # 82 / 2, 75 / 3 ...), widths of a few kinds, and an empty image
    sizes = [(h, 1 + (7 * h) % 13) for h in range(1, 97)] + [(0, 0)]
    mask = torch.as_tensor(_image_masks(96, 13, sizes))
    for n in (2, 3, 26):
        ours = P.from_patch_attention_mask(mask, n, vector_width=width)
        for embeddings_cls, config_cls in modules if n == 2 else modules[:1]:
            want = _module_position_ids(embeddings_cls, config_cls, n, mask)
            assert_equal(ours, want, err_msg=f"{embeddings_cls.__name__}, n={n}")


def _transformers4_position_ids(num_patches_per_side: int, patch_attention_mask):
    """transformers 4's Idefics2VisionEmbeddings.forward (models/idefics2/
    modeling_idefics2.py before the vectorised rewrite), restated line by line."""
    torch = pytest.importorskip("torch")
    batch_size, max_nb_patches_h, max_nb_patches_w = patch_attention_mask.shape
    boundaries = torch.arange(1 / num_patches_per_side, 1.0, 1 / num_patches_per_side)
    position_ids = torch.full(size=(batch_size, max_nb_patches_h * max_nb_patches_w), fill_value=0)
    for batch_idx, p_attn_mask in enumerate(patch_attention_mask):
        nb_patches_h = p_attn_mask[:, 0].sum()
        nb_patches_w = p_attn_mask[0].sum()
        fractional_coords_h = torch.arange(0, 1 - 1e-6, 1 / nb_patches_h)
        fractional_coords_w = torch.arange(0, 1 - 1e-6, 1 / nb_patches_w)
        bucket_coords_h = torch.bucketize(fractional_coords_h, boundaries, right=True)
        bucket_coords_w = torch.bucketize(fractional_coords_w, boundaries, right=True)
        pos_ids = (bucket_coords_h[:, None] * num_patches_per_side + bucket_coords_w).flatten()
        position_ids[batch_idx][p_attn_mask.view(-1).cpu()] = pos_ids
    return position_ids


def test_navit_transformers4_rule_and_where_the_rules_differ():
    torch = pytest.importorskip("torch")
    width = _vector_width()
    sizes = [(h, 1 + (5 * h) % 11) for h in range(1, 97)]
    mask = torch.as_tensor(_image_masks(96, 11, sizes))
    for n in (2, 3, 70):
        want = _transformers4_position_ids(n, mask)
        got = P.from_patch_attention_mask(mask, n, rule="transformers4", vector_width=width)
        assert_equal(got, want, err_msg=f"n={n}")
    # where the rules differ (PyTorch's AVX2 boundaries): n = 2, h = 58, patch 29
    # (29 / 58 = 1 / 2, transformers 4 rounds below) and h = 110, patch 55 (transformers 5)
    tables = [P.navit_bucket_table(2, 110, rule=r) for r in ("transformers4", "transformers")]
    exact = P.navit_bucket_table(2, 110, rule="exact")
    assert [t[58, 29] for t in (*tables, exact)] == [0, 1, 1]
    assert [t[110, 55] for t in (*tables, exact)] == [1, 0, 1]


def test_navit_exact_rule_is_the_rational_floor():
    for n in (1, 2, 5, 32):
        table = P.navit_bucket_table(n, 40, rule="exact")
        for count in range(1, 41):
            i = np.arange(40)
            expect = np.where(i < count, i * n // count, n - 1)
            # past the image (i >= count) the coordinate is clamped below 1: bucket n-1
            np.testing.assert_array_equal(table[count], np.minimum(expect, n - 1))


# --------------------------------------------------------------------------- every backend


def test_every_function_on_every_backend(backend):
    xp = get_namespace(backend)
    wide = _wide(backend)
    mask = _padded_masks()
    got = P.from_attention_mask(xp.asarray(mask.astype(bool)))
    assert_equal(got, _mask_reference(mask, 1).astype(wide), backend=backend, dtype=wide)
    got = P.from_attention_mask(positions_on(backend, mask), padding_value=-3)
    assert_equal(got, _mask_reference(mask, -3).astype(wide), backend=backend, dtype=wide)

    ids = np.where(mask == 1, RNG.integers(2, 50, mask.shape), 1)
    want = np.where(mask == 1, _mask_reference(mask, 0) + 2 + 4, 1)
    got = P.from_input_ids(positions_on(backend, ids), 1, 4)
    assert_equal(got, want.astype(wide), backend=backend, dtype=wide)

    cases = (([0, 3, 5], 5), ([0, 2, 2, 3], 6), ([0, 4, 9], 7), ([0], 3), ([0, 3], 0))
    # the edge cases on NumPy; two shapes elsewhere (eager JAX compiles every shape)
    for cu, total in cases if backend == "numpy" else cases[1:3]:
        got = P.from_cu_seqlens(positions_on(backend, np.array(cu)), total_length=total)
        assert_equal(got, _cu_reference(cu, total).astype(wide), backend=backend, dtype=wide)

    types = _table_token_types(2, 12)
    want = P.from_table_cells(types, max_position_embeddings=3)
    got = P.from_table_cells(positions_on(backend, types), max_position_embeddings=3)
    assert_equal(got, want.astype(wide), backend=backend, dtype=wide)

    masks = _image_masks(9, 7, [(9, 7), (3, 5), (1, 1), (0, 0), (6, 2)])
    for n, rule in ((4, "transformers"), (3, "transformers4"), (5, "exact")):
        want = P.from_patch_attention_mask(masks, n, rule=rule)
        got = P.from_patch_attention_mask(xp.asarray(masks), n, rule=rule)
        assert_equal(got, want.astype(wide), backend=backend, dtype=wide)


def test_numpy_input_to_another_backend(backend):
    wide = _wide(backend)
    got = P.from_attention_mask([[0, 1, 1]], backend=backend)
    assert_equal(got, np.array([[1, 0, 1]], dtype=wide), backend=backend, dtype=wide)
    got = P.from_cu_seqlens(np.array([0, 2, 3]), backend=backend)
    assert_equal(got, np.array([0, 1, 0], dtype=wide), backend=backend, dtype=wide)


def test_patch_ids_index_the_embedding_table():
    for n in (2, 7, 70):
        masks = _image_masks(80, 80, [(80, 80), (13, 71), (1, 2)])
        ids = P.from_patch_attention_mask(masks, n)
        assert ids.min() >= 0 and ids.max() == n * n - 1  # the full image reaches the corner


@pytest.mark.parametrize("name", GUARDED_BACKENDS)
def test_framework_arrays_are_not_read_on_the_host(name):
    if not is_installed(name):
        pytest.skip(f"{name} not installed")
    xp = get_namespace(name)
    mask = positions_on(name, _padded_masks())
    cu = positions_on(name, np.array([0, 3, 5]))
    patches = xp.asarray(_image_masks(5, 4, [(5, 4), (2, 3)]))
    types = positions_on(name, _table_token_types(1, 8))
    P.from_patch_attention_mask(patches, 4)  # tables placed before the guard
    with force_device_path(), forbid_host_reads(name):
        P.from_attention_mask(mask)
        P.from_input_ids(mask, 0)
        P.from_cu_seqlens(cu, total_length=5)
        P.from_patch_attention_mask(patches, 4)
        P.from_table_cells(types, max_position_embeddings=3)


def test_invalid_cu_seqlens_on_a_framework_become_minus_one(backend):
    if backend == "numpy":
        pytest.skip("NumPy input is checked on the host (test_bad_input)")
    wide = _wide(backend)
    for cu in ([1, 3, 5], [0, 4, 2]):
        got = P.from_cu_seqlens(positions_on(backend, np.array(cu)), total_length=5)
        assert_equal(got, np.full(5, -1, dtype=wide), backend=backend, dtype=wide)


# --------------------------------------------------------------------------- traced modes


def _all_five(mask, ids, cu, patches, types):
    return (
        P.from_attention_mask(mask),
        P.from_input_ids(ids, 1, 2),
        P.from_cu_seqlens(cu, total_length=7),
        P.from_patch_attention_mask(patches, 3),
        P.from_table_cells(types, max_position_embeddings=4),
    )


def _inputs(backend: str):
    xp = get_namespace(backend)
    mask = _padded_masks()
    ids = np.where(mask == 1, 5, 1)
    cu = np.array([0, 3, 5])
    patches = _image_masks(6, 5, [(6, 5), (2, 4), (5, 1)])
    types = _table_token_types(2, 10)
    arrays = (
        positions_on(backend, mask),
        positions_on(backend, ids),
        positions_on(backend, cu),
        xp.asarray(patches),
        positions_on(backend, types),
    )
    return arrays, _all_five(mask, ids, cu, patches, types)


@pytest.mark.parametrize(
    "backend, compiler",
    [
        ("jax", "jax.jit"),
        ("torch", "torch.compile"),
        ("tensorflow", "tf.function"),
        ("tensorflow", "tf.function(jit_compile=True)"),
    ],
)
def test_traced(backend, compiler):
    if not is_installed(backend):
        pytest.skip(f"{backend} not installed")
    xp = get_namespace(backend)
    arrays, want = _inputs(backend)
    got = xp.under_compiler(compiler, _all_five)(*arrays)
    for g, w in zip(got, want, strict=True):
        assert_equal(g, w.astype(_wide(backend)), backend=backend, dtype=_wide(backend))


# --------------------------------------------------------------------------- bad input


BAD_INPUT = [
    (ValueError, "k >= 3 (column ids", P.from_table_cells, (np.zeros((1, 4, 2), np.int64),), {}),
    (
        ValueError,
        "(..., seq, k) with k >= 3. Received: shape (4,)",
        P.from_table_cells,
        ([1, 2, 3, 4],),
        {},
    ),
    (
        ValueError,
        "max_position_embeddings must be an integer >= 1. Received: 0",
        P.from_table_cells,
        (np.zeros((1, 4, 3), np.int64),),
        {"max_position_embeddings": 0},
    ),
    (TypeError, "Received dtype: float64", P.from_attention_mask, ([[1.0, 0.0]],), {}),
    (TypeError, "attention_mask must be an array. Received: 1", P.from_attention_mask, (1,), {}),
    (
        ValueError,
        "(tokens) only. Received: 2 at index (0, 1)",
        P.from_attention_mask,
        ([[1, 2]],),
        {},
    ),
    (
        TypeError,
        "padding_value must be an integer. Received: 1.0",
        P.from_attention_mask,
        ([[1]],),
        {"padding_value": 1.0},
    ),
    (TypeError, "input_ids must be an array of integers", P.from_input_ids, ([[True]], 1), {}),
    (
        ValueError,
        "past_length must be an integer >= 0. Received: -1",
        P.from_input_ids,
        ([[3]], 1, -1),
        {},
    ),
    (ValueError, "must start at 0. Received: 2 at index 0", P.from_cu_seqlens, ([2, 3],), {}),
    (ValueError, "Received: 3 at index 2 after 5", P.from_cu_seqlens, ([0, 5, 3],), {}),
    (ValueError, "(n + 1,). Received: shape (1, 2)", P.from_cu_seqlens, ([[0, 2]],), {}),
    (ValueError, "at least one value", P.from_cu_seqlens, (np.zeros(0, dtype=np.int64),), {}),
    (
        ValueError,
        "total_length must be an integer >= 0. Received: -2",
        P.from_cu_seqlens,
        ([0, 2],),
        {"total_length": -2},
    ),
    (
        ValueError,
        "(batch, max_h, max_w). Received: shape (2, 2)",
        P.from_patch_attention_mask,
        ([[1, 1], [1, 0]], 4),
        {},
    ),
    (
        ValueError,
        "Unknown rule 'torch'. Expected one of: transformers, transformers4, exact",
        P.from_patch_attention_mask,
        ([[[1]]], 4),
        {"rule": "torch"},
    ),
    (
        ValueError,
        "vector_width must be 0 or a power of two (floats per CPU vector). Received: 3",
        P.from_patch_attention_mask,
        ([[[1]]], 4),
        {"vector_width": 3},
    ),
    (
        ValueError,
        "num_patches_per_side must be an integer >= 1. Received: 0",
        P.from_patch_attention_mask,
        ([[[1]]], 0),
        {},
    ),
]


@pytest.mark.parametrize("error, message, fn, args, kwargs", BAD_INPUT)
def test_bad_input(error, message, fn, args, kwargs):
    with pytest.raises(error, match=re.escape(message)):
        fn(*args, **kwargs)


def test_framework_arrays_need_total_length_and_stay_in_their_framework():
    torch = pytest.importorskip("torch")
    # eager: cu_seqlens[-1] read back once (repeat_interleave's convention); traced: refused
    assert P.from_cu_seqlens(torch.tensor([0, 3])).tolist() == [0, 1, 2]
    # (Dynamo reports the TypeError inside its own error under fullgraph=True)
    with pytest.raises(Exception, match="needs total_length= for a traced torch array"):
        torch.compile(P.from_cu_seqlens, fullgraph=True, backend="eager")(torch.tensor([0, 3]))
    with pytest.raises(TypeError, match=re.escape("torch array and backend='numpy' was asked")):
        P.from_attention_mask(torch.ones(1, 2, dtype=torch.long), backend="numpy")
    with pytest.raises(TypeError, match=re.escape("integers. Received dtype: float32")):
        P.from_attention_mask(torch.ones(1, 2))
