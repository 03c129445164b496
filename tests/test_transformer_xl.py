"""Transformer-XL's relative sinusoidal embedding against the original code.

``_original_pos_emb`` restates, line by line, kimiyoung/transformer-xl
``pytorch/mem_transformer.py`` (``PositionalEmbedding`` and the ``pos_seq`` of
``MemTransformerLM._forward``, also transformers' deprecated ``TransfoXLModel``), and
``_rel_shift`` its ``RelMultiHeadAttn._rel_shift``.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, assert_equal, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import pe_core
from pe_core.transformer_xl import (
    TRANSFORMER_XL,
    transformer_xl_embedding,
    transformer_xl_positions,
)


def _original_pos_emb(qlen: int, mlen: int, demb: int, clamp_len: int, dtype: str) -> np.ndarray:
    """The original's ``pos_emb`` for ``klen = mlen + qlen``, without its batch axis."""
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    # PositionalEmbedding.__init__
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=dt) / demb))
    # MemTransformerLM._forward, attn_type == 0
    klen = mlen + qlen
    pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=dt)
    if clamp_len > 0:
        pos_seq.clamp_(max=clamp_len)
    # PositionalEmbedding.forward
    sinusoid_inp = torch.outer(pos_seq, inv_freq)
    pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)
    return pos_emb[:, None, :][:, 0].numpy()


def _rel_shift(x: np.ndarray) -> np.ndarray:
    """``RelMultiHeadAttn._rel_shift`` (zero_triu=False) on ``(qlen, klen, ...)``."""
    zero_pad = np.zeros((x.shape[0], 1, *x.shape[2:]), dtype=x.dtype)
    x_padded = np.concatenate([zero_pad, x], axis=1)
    x_padded = x_padded.reshape(x.shape[1] + 1, x.shape[0], *x.shape[2:])
    return x_padded[1:].reshape(x.shape)


@given(
    qlen=st.integers(1, 64),
    mlen=st.integers(0, 64),
    half=st.integers(1, 32),
    clamp_len=st.integers(-1, 80),
)
def test_matches_the_original_in_float64(
    backend: str, qlen: int, mlen: int, half: int, clamp_len: int
) -> None:
    d = 2 * half
    expected = _original_pos_emb(qlen, mlen, d, clamp_len, "float64")
    got = transformer_xl_embedding(qlen, d, mem_len=mlen, clamp_len=clamp_len, backend=backend)
    assert_close(got, expected, atol=1e-6, backend=backend, dtype="float32")


def test_matches_the_original_float32_within_its_rounding() -> None:
    """The original forms ``p * w`` in float32: its error grows with the angle."""
    qlen, mlen, d = 1600, 1600, 512  # Transformer-XL's wt103 evaluation lengths
    codebase = _original_pos_emb(qlen, mlen, d, 0, "float32").astype(np.float64)
    ours = transformer_xl_embedding(qlen, d, mem_len=mlen, dtype="float64")
    angles = transformer_xl_positions(qlen, mem_len=mlen)[:, None] * 1.0
    bound = 4 * 2.0**-23 * np.maximum(1.0, angles) + 1e-6
    assert_close(ours, codebase, atol=bound)
    assert np.abs(ours - codebase).max() > 1e-5  # the original's float32 error is visible


@given(
    qlen=st.integers(1, 50),
    mlen=st.integers(0, 50),
    half=st.integers(1, 24),
    clamp=st.one_of(st.none(), st.integers(-3, 60)),
)
def test_is_encode_at_the_descending_distances(
    backend: str, qlen: int, mlen: int, half: int, clamp: int | None
) -> None:
    d = 2 * half
    klen = qlen + mlen
    distances = np.arange(klen - 1, -1, -1)
    if clamp is not None and clamp > 0:
        distances = np.minimum(distances, clamp)
    expected = pe_core.encode(distances, d, spec=pe_core.Spec(layout="split"), dtype="float64")
    got = transformer_xl_embedding(qlen, d, mem_len=mlen, clamp_len=clamp, backend=backend)
    assert_close(got, expected, atol=1e-6, backend=backend)
    # memory only prepends rows: the same table as a longer query
    assert_equal(got, to_numpy(transformer_xl_embedding(klen, d, clamp_len=clamp)))


@given(qlen=st.integers(1, 24), mlen=st.integers(0, 24), half=st.integers(1, 16))
def test_rel_shift_reads_the_embedding_of_each_distance(qlen: int, mlen: int, half: int) -> None:
    """After ``_rel_shift``, score ``(i, j)`` uses the embedding of distance
    ``mlen + i - j``: relative attention (for the keys a query may attend to)."""
    d = 2 * half
    rng = np.random.default_rng(qlen * 100 + mlen)
    q = rng.standard_normal((qlen, d))
    R = transformer_xl_embedding(qlen, d, mem_len=mlen, dtype="float64")
    BD = _rel_shift(np.einsum("id,jd->ij", q, R)[:, :, None, None])[:, :, 0, 0]
    for i in range(qlen):
        keys = np.arange(mlen + i + 1)  # the keys query i may attend to
        table = pe_core.encode(mlen + i - keys, d, spec=TRANSFORMER_XL, dtype="float64")
        assert_close(BD[i, keys], table @ q[i], atol=1e-9, rtol=1e-7)


@given(shift=st.integers(1, 10**6), half=st.integers(1, 16))
def test_shifting_every_distance_is_one_rotation(shift: int, half: int) -> None:
    """R(p + t) = M_t R(p) with the split layout's rotation, at any distance."""
    d = 2 * half
    R = transformer_xl_embedding(8, d, dtype="float64")
    moved = pe_core.encode(transformer_xl_positions(8) + shift, d, spec=TRANSFORMER_XL)
    M = pe_core.relative_matrix(shift, d, TRANSFORMER_XL, dtype="float64")
    assert_close(R @ M.T, moved, atol=2e-6, rtol=1e-7)


def test_layer_device_and_dtype_follow_like(backend: str) -> None:
    from pe_core_backends import get_namespace

    like = get_namespace(backend).asarray(np.zeros(2, np.float32))
    got = transformer_xl_embedding(3, 8, mem_len=2, like=like)
    assert_close(got, transformer_xl_embedding(3, 8, mem_len=2), atol=0, backend=backend)


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="q_len must be an integer >= 1"):
        transformer_xl_embedding(0, 8)
    with pytest.raises(ValueError, match="mem_len must be an integer >= 0"):
        transformer_xl_embedding(2, 8, mem_len=-1)
    with pytest.raises(TypeError, match="clamp_len must be None or an integer"):
        transformer_xl_embedding(2, 8, clamp_len=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d must be even"):
        transformer_xl_embedding(2, 7)
    assert_equal(transformer_xl_positions(3, clamp_len=0), [2, 1, 0])  # <= 0: no clamp
