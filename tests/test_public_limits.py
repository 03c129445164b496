"""Every public function of pe_core's public modules, at sizes no memory holds: refused at
once with a ValueError that names the size, never a MemoryError, a hang or a result.

The registry lists each public function (from the modules' ``__all__``) once: a case
that asks for about 2**40 elements (as sizes, or as zero-copy broadcast views), or an
exemption with its reason. A new public function without an entry fails
:func:`test_every_public_function_has_an_entry`. Integer extremes (int64's largest,
uint64 near 2**64) are exact or refused in the tests named in :data:`EXTREMES`.
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pe_core
from pe_core import (
    analysis,
    fourier,
    frequency,
    position_ids,
    resample,
    rope_nd,
    rope_spec,
    t5,
    timestep,
    transformer_xl,
)

BIG = 2**40
MODULES = (
    "alibi analysis codes fourier frequency funnel nd position_ids relative_index resample "
    "rope rope_layout rope_nd rope_scaling rope_spec rope_tables rope_variants t5 timestep "
    "trainable transformer_xl"
).split()


#: the framework whose broadcast views the cases build ("numpy" or "torch").
FRAMEWORK = {"name": "numpy"}


def view(*shape: int, dtype: Any = np.float32) -> Any:
    """A read-only array of ``shape`` that holds one element (a broadcast view), of
    :data:`FRAMEWORK`'s kind."""
    if FRAMEWORK["name"] == "torch":
        return torch.zeros((), dtype=getattr(torch, np.dtype(dtype).name)).expand(*shape)
    return np.broadcast_to(np.zeros((), dtype), shape)


def ids(*shape: int) -> np.ndarray:
    return view(*shape, dtype=np.int64)


try:  # imported here, not in the timed call
    import torch
except ImportError:
    torch = None


def tview(*shape: int) -> Any:
    """Trainable (torch) frequencies of ``shape`` as a broadcast view; skips without torch."""
    if torch is None:
        pytest.skip("needs torch (frequencies of a framework)")
    return torch.zeros(()).expand(*shape)


FREQS = np.ones((1, 4), np.float32)

#: public name -> a call asking for about 2**40 elements (or more).
HUGE: dict[str, Callable[[], Any]] = {
    "alibi_bias": lambda **kw: pe_core.alibi_bias(BIG, BIG, 8, **kw),
    "alibi_slopes": lambda: pe_core.alibi_slopes(BIG),
    "apply_rope": lambda: pe_core.apply_rope(view(1, 8), ids(2**20, 2**20)),
    "apply_rope_mixed": lambda: pe_core.apply_rope_mixed(view(BIG, 8), ids(BIG, 2), tview(2, 4)),
    "binary_encode": lambda: pe_core.binary_encode(ids(BIG), 8),
    "box_fourier_embedding": lambda: pe_core.box_fourier_embedding(view(BIG, 4)),
    "clipped_relative_position": lambda **kw: pe_core.clipped_relative_position(
        BIG, BIG, max_left=3, **kw
    ),
    "deberta_log_bucket": lambda: pe_core.deberta_log_bucket(ids(2**20, 2**20), 256, 512),
    "deberta_relative_position": lambda **kw: pe_core.deberta_relative_position(BIG, BIG, **kw),
    "encode": lambda: pe_core.encode(ids(BIG), 512),
    "esmfold_relative_bins": lambda: pe_core.esmfold_relative_bins(np.zeros(2**21, np.int64), 4),
    "fourier_features": lambda: pe_core.fourier_features(view(BIG, 1), FREQS),
    "frequencies": lambda: pe_core.frequencies(BIG),
    "funnel_block_positions": lambda **kw: pe_core.funnel_block_positions(BIG, 0, **kw),
    "funnel_pooled_positions": lambda: pe_core.funnel_pooled_positions(range(4), BIG),
    "funnel_position_embeds": lambda **kw: pe_core.funnel_position_embeds(BIG, 8, **kw),
    "funnel_relative_positions": lambda: pe_core.funnel_relative_positions(
        list(range(4)), stride=1, shift=BIG
    ),
    "grid": lambda **kw: pe_core.grid((2**20, 2**20), **kw),
    "grid_encoding": lambda **kw: pe_core.grid_encoding(8, (2**20, 2**20), **kw),
    "learned_table_init": lambda **kw: pe_core.learned_table_init(BIG, 8, **kw),
    "levit_attention_offsets": lambda **kw: pe_core.levit_attention_offsets(BIG, **kw),
    "llama4_attention_scales": lambda: pe_core.llama4_attention_scales(ids(2**20, 2**20)),
    "mrope_position_ids": lambda: pe_core.mrope_position_ids(ids(2**20, 2**20)),
    "normalized_positions": lambda **kw: pe_core.normalized_positions(BIG, **kw),
    "perceiver_fourier_features": lambda: pe_core.perceiver_fourier_features(view(BIG, 2), 8),
    "perceiver_positions": lambda **kw: pe_core.perceiver_positions((2**20, 2**20), **kw),
    "relative_matrix": lambda: pe_core.relative_matrix(ids(BIG), 8),
    "relative_position_bias": lambda: pe_core.relative_position_bias(view(4, 2), (2**20, 2**20)),
    "relative_position_index": lambda **kw: pe_core.relative_position_index(BIG, **kw),
    "resample_pos_embed": lambda: pe_core.resample_pos_embed(view(1, 5, 8), 2**20),
    "rope_angles": lambda: pe_core.rope_angles(ids(BIG), tview(4)),
    "rope_cos_sin": lambda: pe_core.rope_cos_sin(ids(2**20, 2**20), 64),
    "rope_frequencies": lambda: pe_core.rope_frequencies(
        {"head_dim": 2 * BIG, "rope_theta": 10000.0}
    ),
    "rope_mixed_angles": lambda: pe_core.rope_mixed_angles(ids(BIG, 2), tview(2, 4)),
    "rope_permutation": lambda: pe_core.rope_permutation(2 * BIG, "half", "interleaved"),
    "shift": lambda: pe_core.shift(view(BIG, 8), ids(BIG)),
    "swinv2_coords_table": lambda **kw: pe_core.swinv2_coords_table((2**20, 2**20), **kw),
    "t5_bucket_matrix": lambda **kw: pe_core.t5_bucket_matrix(BIG, BIG, **kw),
    "t5_relative_bias": lambda: pe_core.t5_relative_bias(BIG, BIG, view(32, 4)),
    "t5_relative_bucket": lambda: pe_core.t5_relative_bucket(ids(2**20, 2**20)),
    "timestep_embedding": lambda: pe_core.timestep_embedding(ids(BIG), 8),
    "transformer_xl_embedding": lambda **kw: pe_core.transformer_xl_embedding(BIG, 8, **kw),
    "vjepa2_rope": lambda: pe_core.vjepa2_rope(view(1, 6), ids(2**20, 2**20, 3)),
    "xpos_scale": lambda: pe_core.xpos_scale(ids(BIG), 8),
    "resolution_report": lambda: analysis.resolution_report(8, max_len=BIG),
    "similarity": lambda: analysis.similarity(ids(2**20, 2**20), 8),
    "similarity_by_distance": lambda: analysis.similarity_by_distance(8, max_distance=BIG),
    "similarity_matrix": lambda: analysis.similarity_matrix(view(2**20, 8)),
    "feature_error_bound": lambda: fourier.feature_error_bound(view(2**20, 2**20, 2), view(2, 4)),
    "omegas": lambda: frequency.omegas(BIG, pe_core.Spec()),
    "from_attention_mask": lambda: position_ids.from_attention_mask(view(2**20, 2**20, dtype=bool)),
    "from_cu_seqlens": lambda **kw: position_ids.from_cu_seqlens([0, 3], total_length=BIG, **kw),
    "from_input_ids": lambda: position_ids.from_input_ids(ids(2**20, 2**20), 1),
    "from_patch_attention_mask": lambda: position_ids.from_patch_attention_mask(
        view(1, 2, 2, dtype=bool), BIG
    ),
    "from_table_cells": lambda: position_ids.from_table_cells(ids(2**20, 2**20, 3)),
    "navit_bucket_table": lambda: position_ids.navit_bucket_table(70, BIG),
    "add_decomposed_rel_pos": lambda: resample.add_decomposed_rel_pos(
        view(2**30, 16, 16), view(2**30, 16, 8), view(7, 8), view(7, 8), (4, 4), (4, 4)
    ),
    "decomposed_rel_pos": lambda: resample.decomposed_rel_pos(
        view(2**30, 16, 8), view(7, 8), view(7, 8), (4, 4), (4, 4)
    ),
    "get_rel_pos": lambda: resample.get_rel_pos(2**20, 2**20, view(7, 8)),
    "interpolate_pos_encoding": lambda: resample.interpolate_pos_encoding(
        view(1, 5, 8), 2**24, 2**24, 16
    ),
    "resample_pos_embed_in_tree": lambda: resample.resample_pos_embed_in_tree(
        {"pos": view(1, 5, 8)}, "pos", 2**20
    ),
    "resize_naflex_pos_embed": lambda: resample.resize_naflex_pos_embed(
        view(4, 4, 8), [[2**20, 2**20]], 2**40
    ),
    "resize_rel_pos_bias_table": lambda: resample.resize_rel_pos_bias_table(view(9, 4), 2**20),
    "allegro_frequencies": lambda: rope_nd.allegro_frequencies(3 * BIG),
    "apply_rope_nd": lambda: rope_nd.apply_rope_nd(
        view(1, 8), ids(2**20, 2**20, 2), sections=(2, 2)
    ),
    "pair_axes": lambda: rope_nd.pair_axes((BIG, BIG)),
    "pixel_frequencies": lambda: rope_nd.pixel_frequencies((BIG, BIG)),
    "bucket_thresholds": lambda: t5.bucket_thresholds(BIG, 2 * BIG),
    "timestep_spec": lambda: timestep.timestep_spec(BIG),
    "transformer_xl_positions": lambda: transformer_xl.transformer_xl_positions(BIG),
    "rope_constants": lambda: rope_spec.rope_constants(None, 10000.0, 2 * BIG, None, None),
}

#: public name -> why it has no size to refuse.
EXEMPT = {
    "check_d": "validates d and returns it (an int)",
    "table_layout": "maps a layout name to a name",
    "framework_frequencies": "says whether an object is a framework array (a bool)",
    "pos_embed_load_hook": "returns a hook; the loads it makes go through resample_pos_embed",
    "allowed_keys": "a config key set per rope_type",
    "check_config_keys": "checks a config's keys",
    "check_config_rope": "checks a config's rope fields",
    "config_mapping": "reads a config as a mapping",
    "needs_seq_len": "a bool from a scaling config",
    "rope_config_for_layer": "a config dict per layer",
    "rope_summary": "a summary dict of a config",
    "scaling_rope_type": "a name from a scaling config",
    "freeze": "makes a config hashable",
    "thaw": "undoes freeze",
    "axis_widths": "a tuple of one width per axis (ints)",
    "axis_pairs": "an int",
    "ntk_aware_base": "a float",
    "num_relative_distance": "an int",
    "rope_sections": "the sections a config names (ints)",
}

#: integer extremes: where each kind of position input is shown exact or refused.
EXTREMES = {
    "tests/test_domain_edges.py": (
        "test_integer_extremes_of_every_dtype",
        "test_integer_extremes_under_jit_and_tf_function",
        "test_python_ints_numpy_cannot_hold_are_refused",
        "test_relative_matrix_uint64_k_on_the_host",
        "test_torch_unsigned_positions_beyond_2_31",
    ),
    "tests/test_index_edges.py": (
        "test_deberta_uint64_is_exact",
        "test_deberta_device_arrays_at_the_extremes",
        "test_esmfold_bins_at_the_extremes",
        "test_esmfold_refuses_uint64_beyond_int64",
        "test_padding_value_beyond_the_output_dtype_is_named",
    ),
    "tests/test_position_ids.py": ("test_table_cells_match_the_token_by_token_rule",),
}


def _public_functions() -> dict[str, Any]:
    found = {n: getattr(pe_core, n) for n in pe_core.__all__}
    for name in MODULES:
        module = importlib.import_module(f"pe_core.{name}")
        found.update({n: getattr(module, n) for n in module.__all__})
    return {n: f for n, f in found.items() if inspect.isfunction(f)}


def test_every_public_function_has_an_entry() -> None:
    public = _public_functions()
    missing = sorted(set(public) - set(HUGE) - set(EXEMPT))
    assert not missing, f"public functions without a size case or an exemption: {missing}"
    assert not (set(HUGE) | set(EXEMPT)) - set(public), "entries for names no longer public"


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_requests_are_refused_at_once_with_their_size(name: str) -> None:
    _refused_at_once(HUGE[name])


#: the cases that take ``backend=`` and ask by sizes alone: refused on every backend.
BY_SIZES = sorted(n for n in HUGE if "**kw" in inspect.getsource(HUGE[n]))
#: the cases whose inputs are broadcast views: also built as PyTorch views.
BY_VIEWS = sorted(n for n in HUGE if re.search(r"\b(view|ids)\(", inspect.getsource(HUGE[n])))


def _refused_at_once(call: Callable[[], Any]) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError) as info:
        call()
    assert time.perf_counter() - start < 2
    message = str(info.value)  # the size, or the value beyond what fits, is named
    numbers = [int(n) for n in re.findall(r"\d+", message)]
    assert "memory" in message or max(numbers, default=0) >= 2**20, message


@pytest.mark.parametrize("backend", ["torch", "jax", "tensorflow"])
@pytest.mark.parametrize("name", BY_SIZES)
def test_huge_sizes_are_refused_on_every_backend(name: str, backend: str) -> None:
    pytest.importorskip({"tensorflow": "tensorflow"}.get(backend, backend))
    _refused_at_once(lambda: HUGE[name](backend=backend))


@pytest.mark.parametrize("name", BY_VIEWS)
def test_huge_torch_views_are_refused_at_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if torch is None:
        pytest.skip("needs torch")
    monkeypatch.setitem(FRAMEWORK, "name", "torch")
    _refused_at_once(HUGE[name])


def test_the_integer_extremes_tests_exist() -> None:
    for path, names in EXTREMES.items():
        module = importlib.import_module(path.removeprefix("tests/").removesuffix(".py"))
        for name in names:
            assert callable(getattr(module, name, None)), f"{path}::{name}"
