"""Layouts give the same bits: ``apply_rope`` and ``encode`` of a view equal the call on
the same values made contiguous, and the ``(q, k)`` form equals one call per array.

Views: transposed (the ``(batch, heads, seq, head_dim)`` view of transformers'
``(batch, seq, heads, head_dim)`` projections), strided and offset slices, negative
strides (NumPy, JAX, TensorFlow), broadcast views, and a slice of the sequence at its
own positions (what each rank of a sequence-sharded DTensor computes). JAX and
TensorFlow arrays have no strides of their own: there the views are the framework's
own transpose, slice and broadcast, whose results must not differ either.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import assert_equal, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import pe_core
from pe_core_backends import get_namespace


def _transpose(backend: str, x: Any) -> Any:
    """Swap axes 1 and 2 the framework's own way (a strided view where it has them)."""
    if backend == "torch":
        return x.transpose(1, 2)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.transpose(x, (0, 2, 1, 3))
    module = np if backend == "numpy" else pytest.importorskip("jax.numpy")
    return module.swapaxes(x, 1, 2)


def _broadcast(backend: str, x: Any, shape: tuple[int, ...]) -> Any:
    if backend == "torch":
        return x.expand(*shape)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.broadcast_to(x, shape)
    module = np if backend == "numpy" else pytest.importorskip("jax.numpy")
    return module.broadcast_to(x, shape)


def _view(backend: str, kind: str, base: np.ndarray, heads: int, seq: int) -> Any:
    """A view of kind ``kind`` of shape ``(batch, heads, seq, head_dim)`` made from
    ``base`` (``(batch, 2 * seq, heads + 1, head_dim)``)."""
    xp = get_namespace(backend)
    x = xp.asarray(base)
    if kind == "transposed":  # transformers' q.view(b, s, h, d).transpose(1, 2)
        return _transpose(backend, x[:, :seq])[:, :heads]
    if kind == "strided":  # every other position, an offset into the heads
        return _transpose(backend, x[:, ::2, 1:])[:, :heads]
    if kind == "reversed":  # a negative stride (torch has none: a strided slice there)
        step = 2 if backend == "torch" else -1
        return _transpose(backend, x[:, ::step][:, :seq])[:, :heads]
    # broadcast over the batch: stride 0
    one = _transpose(backend, x[:1, :seq])[:, :heads]
    return _broadcast(backend, one, (base.shape[0], *tuple(one.shape)[1:]))


def _contiguous(backend: str, x: Any) -> Any:
    """The values of ``x`` as a new contiguous array of its backend and dtype."""
    xp = get_namespace(backend)
    host = np.ascontiguousarray(xp.to_numpy(x))
    return xp.asarray(host) if backend != "torch" else xp.asarray(host).to(x.dtype)


def _positions(draw: Any, kind: str, batch: int, seq: int) -> Any:
    if kind == "range":
        start = draw(st.integers(0, 5000))
        return range(start, start + seq)
    if kind == "scattered":
        values = draw(st.lists(st.integers(0, 2**20), min_size=seq, max_size=seq))
        return np.array(values)
    if kind == "fractional":
        values = draw(st.lists(st.floats(0, 4096, width=32), min_size=seq, max_size=seq))
        return np.array(values, np.float32)
    offsets = np.array(draw(st.lists(st.integers(0, 10**6), min_size=batch, max_size=batch)))
    return offsets[:, None, None] + np.arange(seq)  # (batch, 1, seq): per example


@st.composite
def _calls(draw: Any, compiled: bool = False) -> dict[str, Any]:
    """One call; ``compiled``: a few shapes only (JAX and TensorFlow compile each shape)."""
    batch, heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    seq = draw(st.sampled_from([1, 6]) if compiled else st.integers(1, 80))
    head_dim = draw(st.sampled_from([8] if compiled else [4, 8, 16]))
    kind = draw(st.sampled_from(["range", "scattered", "fractional", "per_example"]))
    return {
        "batch": batch,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "pos": _positions(draw, kind, batch, seq),
        "view": draw(st.sampled_from(["transposed", "strided", "reversed", "broadcast"])),
        "layout": draw(st.sampled_from(["half", "interleaved"])),
        "rotary_dim": draw(st.sampled_from([None, head_dim - 2])),
        "dtype": draw(st.sampled_from(["float32", "float32", "float64", "float16"])),
        "seed": draw(st.integers(0, 2**16)),
    }


def _on(backend: str, pos: Any) -> Any:
    """Array positions on the backend (int32/float32 for JAX without x64)."""
    if not isinstance(pos, np.ndarray):
        return pos
    if backend == "jax":
        pos = pos.astype(np.int32 if pos.dtype.kind == "i" else np.float32)
    return get_namespace(backend).asarray(pos)


@given(call=_calls())
def test_views_tuples_and_sequence_slices_give_the_contiguous_bits(
    backend: str, call: dict[str, Any]
) -> None:
    if backend in ("jax", "tensorflow"):
        pytest.skip("a few shapes only: test_views_on_compiling_backends")
    check_views(backend, call)


@pytest.mark.slow  # a compile per shape
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
@settings(max_examples=6)
@given(call=_calls(compiled=True))
def test_views_on_compiling_backends(backend: str, call: dict[str, Any]) -> None:
    pytest.importorskip(backend)
    check_views(backend, call)


def check_views(backend: str, call: dict[str, Any]) -> None:
    """The view, the ``(q, k)`` form and a slice of the sequence against contiguous calls."""
    b, h, s, d = call["batch"], call["heads"], call["seq"], call["head_dim"]
    dtype = "float32" if call["dtype"] == "float64" and backend == "jax" else call["dtype"]
    rng = np.random.default_rng(call["seed"])
    shape = (b, 2 * s, h + 1, d)
    q = _view(backend, call["view"], rng.standard_normal(shape).astype(dtype), h, s)
    k = _view(backend, call["view"], rng.standard_normal(shape).astype(dtype), 1, s)
    assert tuple(q.shape) == (b, h, s, d)
    pos = _on(backend, call["pos"])
    options = {"layout": call["layout"], "rotary_dim": call["rotary_dim"]}

    want_q = pe_core.apply_rope(_contiguous(backend, q), pos, **options)
    want_k = pe_core.apply_rope(_contiguous(backend, k), pos, **options)
    assert_equal(pe_core.apply_rope(q, pos, **options), to_numpy(want_q))
    got_q, got_k = pe_core.apply_rope((q, k), pos, **options)
    assert_equal(got_q, to_numpy(want_q))
    assert_equal(got_k, to_numpy(want_k))
    # a slice of the sequence at its own positions: a sequence-sharded rank's call
    lo = s // 3
    part_pos = call["pos"][..., lo:] if isinstance(call["pos"], np.ndarray) else call["pos"][lo:]
    part = pe_core.apply_rope(q[:, :, lo:], _on(backend, part_pos), **options)
    assert_equal(part, to_numpy(want_q)[:, :, lo:])


@given(
    seq=st.sampled_from([1, 7, 64, 300]),
    start=st.integers(-(2**31), 2**31),
    step=st.sampled_from([1, 2, 3, -1]),
    d=st.sampled_from([2, 6, 64]),
)
def test_encode_of_position_views_gives_the_contiguous_bits(
    backend: str, seq: int, start: int, step: int, d: int
) -> None:
    if backend == "torch" and step < 0:
        step = 2  # torch has no negative strides
    host = np.arange(start, start + 2 * seq * abs(step), dtype=np.int64)
    if backend == "jax":
        host = np.arange(seq * 2 * abs(step), dtype=np.int64) + (start % 2**20)
        host = host.astype(np.int32)
    whole = get_namespace(backend).asarray(host)
    view = whole[1::step] if step > 0 else whole[::-1]
    view = view[:seq]
    want = pe_core.encode(_contiguous(backend, view), d)
    assert_equal(pe_core.encode(view, d), to_numpy(want))
    # broadcast positions: (2, seq) of one row (stride 0)
    rows = _broadcast(backend, view[None], (2, seq))
    assert_equal(pe_core.encode(rows, d), to_numpy(pe_core.encode(_contiguous(backend, rows), d)))
