"""Float64 and mpmath references for the property suite (independent of pe_core's kernel)."""

from __future__ import annotations

import math

import mpmath
import numpy as np


def schedule(d: int, *, base: float = 10000.0, denominator: str = "d") -> np.ndarray:
    """Angular frequencies restated directly from the papers' formulas."""
    n = d // 2
    i = np.arange(n, dtype=np.float64)
    if denominator == "d":
        return base ** (-2.0 * i / (2 * n))
    return base ** (-i / max(n - 1, 1))


def table(positions: np.ndarray, omegas: np.ndarray, layout: str, d: int) -> np.ndarray:
    """float64 sin/cos table (exact enough while |pos * w| stays below ~1e5)."""
    angles = np.asarray(positions, dtype=np.float64)[..., None] * omegas
    s, c = np.sin(angles), np.cos(angles)
    if layout == "interleaved":
        out = np.stack([s, c], axis=-1).reshape(*angles.shape[:-1], 2 * len(omegas))
    else:
        out = np.concatenate([s, c], axis=-1)
    if d % 2:
        out = np.concatenate([out, np.zeros((*out.shape[:-1], 1))], axis=-1)
    return out


def exact_sin_cos(
    positions: np.ndarray, omegas: np.ndarray, dps: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """mpmath sin/cos of pos * w with pos and w taken as exact binary numbers."""
    with mpmath.workdps(dps):
        flat = np.asarray(positions, dtype=np.float64).ravel()
        s = np.empty((flat.size, len(omegas)))
        c = np.empty_like(s)
        for r, p in enumerate(flat):
            for j, w in enumerate(omegas):
                a = mpmath.mpf(float(p)) * mpmath.mpf(float(w))
                s[r, j] = float(mpmath.sin(a))
                c[r, j] = float(mpmath.cos(a))
    shape = np.shape(positions) + (len(omegas),)
    return s.reshape(shape), c.reshape(shape)


def exact_table(positions: np.ndarray, omegas: np.ndarray, layout: str, d: int) -> np.ndarray:
    s, c = exact_sin_cos(positions, omegas)
    if layout == "interleaved":
        out = np.stack([s, c], axis=-1).reshape(*s.shape[:-1], 2 * len(omegas))
    else:
        out = np.concatenate([s, c], axis=-1)
    if d % 2:
        out = np.concatenate([out, np.zeros((*out.shape[:-1], 1))], axis=-1)
    return out


TWO_PI = 2 * math.pi


def hf_t5_compute_bias(
    table: np.ndarray, q_len: int, k_len: int, offset: int, is_decoder: bool
) -> np.ndarray:
    """transformers' ``T5Attention.compute_bias`` with ``table`` as its bias weights
    (skips the test without torch or transformers)."""
    import pytest

    torch = pytest.importorskip("torch")
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    from transformers import T5Config

    config = T5Config(
        d_model=16,
        d_kv=4,
        num_heads=table.shape[1],
        relative_attention_num_buckets=table.shape[0],
        relative_attention_max_distance=128,
        is_decoder=is_decoder,
    )
    attention = t5.T5Attention(config, has_relative_attention_bias=True)
    with torch.no_grad():
        attention.relative_attention_bias.weight.copy_(torch.as_tensor(table))
        return attention.compute_bias(q_len, k_len, past_seen_tokens=offset).numpy()


def _log_float32(x: np.float32) -> np.float32:
    """A float32 log, correctly rounded (mpmath), as PyTorch's CPU log gives it."""
    with mpmath.workdps(40):
        return np.float32(float(mpmath.log(mpmath.mpf(float(x)))))


def t5_bucket_reference(
    r: int, bidirectional: bool, num_buckets: int, max_distance: int, arithmetic: str
) -> int:
    """transformers' ``T5Attention._relative_position_bucket`` for one Python int ``r``,
    line by line (modeling_t5.py); the distance is a Python int, so nothing overflows.
    ``arithmetic="exact"`` takes the real-number floor of the log instead (in integers:
    ``floor(log(a/e) / log(m/e) * (n - e)) >= k`` iff ``a**(n-e) * e**k >= m**k * e**(n-e)``).
    """
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += num_buckets if r > 0 else 0
        a = abs(r)
    else:
        a = -min(r, 0)
    max_exact = num_buckets // 2
    if a < max_exact:
        return buckets + a
    m = num_buckets - max_exact
    if arithmetic == "float32":
        f32 = np.float32
        ratio = f32(f32(a) / f32(max_exact))
        scaled = f32(_log_float32(ratio) / f32(math.log(max_distance / max_exact)))
        steps = int(f32(scaled * f32(m)))
    else:
        steps = 0
        while steps < m and a**m * max_exact ** (steps + 1) >= max_distance ** (steps + 1) * (
            max_exact**m
        ):
            steps += 1
    return buckets + min(max_exact + steps, num_buckets - 1)
