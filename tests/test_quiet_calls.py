"""No third-party warning escapes from inside pe_core, and no result writes through to a cache.

torch shares a NumPy array's memory where it can and warns ("The given NumPy array is not
writable") when the array is read-only. pe_core's cached tables are read-only and callers'
arrays may be: each mixed NumPy/torch call below runs with every warning turned into an
error, and writing into a result must not change the next call's numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import assert_equal

import pe_core

torch = pytest.importorskip("torch")


def _read_only(values: Any) -> np.ndarray:
    array = np.array(values)
    array.setflags(write=False)
    return array


POSITIONS = _read_only(np.arange(8))
QUERIES = _read_only(np.linspace(-1, 1, 2 * 8 * 8, dtype=np.float32).reshape(2, 8, 8))

MIXED_CALLS: dict[str, Callable[[], Any]] = {
    "apply_rope, read-only NumPy x, backend torch": lambda: pe_core.apply_rope(
        QUERIES, POSITIONS, backend="torch"
    ),
    "apply_rope, torch x, read-only NumPy positions": lambda: pe_core.apply_rope(
        torch.ones(2, 8, 8), POSITIONS
    ),
    "encode, read-only NumPy positions, backend torch": lambda: pe_core.encode(
        POSITIONS, 8, backend="torch"
    ),
    "encode, read-only float positions, backend torch": lambda: pe_core.encode(
        POSITIONS.astype(np.float32), 8, backend="torch"
    ),
    "timestep_embedding, read-only NumPy timesteps, backend torch": lambda: (
        pe_core.timestep_embedding(POSITIONS, 8, backend="torch")
    ),
    "relative_position_index, backend torch": lambda: pe_core.relative_position_index(
        (3, 3), backend="torch"
    ),
    "swinv2_coords_table, backend torch": lambda: pe_core.swinv2_coords_table(
        (3, 3), backend="torch"
    ),
    "alibi_bias, backend torch": lambda: pe_core.alibi_bias(8, 8, 4, backend="torch"),
    "resample_pos_embed, torch table": lambda: pe_core.resample_pos_embed(
        torch.ones(1, 17, 4), (3, 3)
    ),
}


@pytest.mark.parametrize("call", list(MIXED_CALLS.values()), ids=list(MIXED_CALLS))
def test_mixed_numpy_and_torch_calls_warn_nothing(call: Callable[[], Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = call()
    assert isinstance(result, torch.Tensor)


def test_torch_layers_warn_nothing() -> None:
    from pe_core.layers.torch import RotaryEmbedding, SinusoidalEncoding

    x = torch.ones(1, 2, 5, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SinusoidalEncoding(8, max_len=16)(torch.ones(1, 5, 8))
        RotaryEmbedding(8)(x, x)


@pytest.mark.parametrize(
    "call",
    [
        lambda: pe_core.encode(range(8), 8, backend="torch"),
        lambda: pe_core.relative_position_index((3, 3), backend="torch"),
        lambda: pe_core.swinv2_coords_table((3, 3), backend="torch"),
    ],
    ids=["encode", "relative_position_index", "swinv2_coords_table"],
)
def test_writing_into_a_result_leaves_the_next_call_alone(call: Callable[[], Any]) -> None:
    first = call()
    expected = first.clone()
    first.add_(1)
    assert_equal(call(), expected)
