"""Log-bucket thresholds (T5, DeBERTa), found once on the host, and DeBERTa's kernel.

Both families place a distance with integer comparisons against thresholds: the
smallest distances at which the bucket grows. The float32 arithmetic of transformers'
code is replayed here with a correctly rounded float32 log (:func:`log_float32`),
written once for both; the real-number boundaries come from integer arithmetic.
"""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any

import numpy as np

from pe_core._index.place import host_table
from pe_core._kernel.compiled import compiled

# --------------------------------------------------------------------------- float32 log


def log_float32(x: Any) -> np.float32:
    """``log(x)`` correctly rounded to float32 (Decimal's ``ln`` at 40 digits)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        exact = decimal.Decimal(float(x)).ln()
    guess = np.float32(float(exact))
    candidates = (
        np.nextafter(guess, np.float32(-np.inf)),
        guess,
        np.nextafter(guess, np.float32(np.inf)),
    )
    return min(candidates, key=lambda c: abs(decimal.Decimal(float(c)) - exact))


def log_float32_array(x: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 ``log`` of positive float32 values: float64's log
    rounded once, and :func:`log_float32` where a float32 rounding boundary is too close."""
    wide = np.log(x.astype(np.float64))
    out = wide.astype(np.float32)
    centre = out.astype(np.float64)
    below = np.nextafter(out, np.float32(-np.inf)).astype(np.float64)
    above = np.nextafter(out, np.float32(np.inf)).astype(np.float64)
    tolerance = 4 * np.spacing(np.abs(wide)) + 1e-300
    unsure = (np.abs(wide - (centre + below) / 2) <= tolerance) | (
        np.abs(wide - (centre + above) / 2) <= tolerance
    )
    for i in np.flatnonzero(unsure):
        out[i] = log_float32(x[i])
    return out


def round_float32(a: int) -> int:
    """``a >= 0`` rounded to the nearest float32 (ties to even), as an int."""
    shift = a.bit_length() - 24
    if shift <= 0:
        return a
    q, r = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return q << shift


# --------------------------------------------------------------------------- T5

#: T5 thresholds are searched up to this distance: beyond every distance of the domain
#: (relative positions of any int64/uint64 array, offsets with ``|offset| <= 2**64``).
SEARCHED = 2**66


def _t5_float32_steps(a: int, n: int, max_exact: int, max_distance: int) -> int:
    """transformers' ``(log(a.float() / max_exact) / math.log(max_distance / max_exact)
    * (n - max_exact)).to(long)`` for one distance ``a >= max_exact``, step by step in
    float32 as PyTorch computes it (each Python scalar rounded to float32 first)."""
    f32 = np.float32
    ratio = f32(f32(a) / f32(max_exact))
    scaled = f32(log_float32(ratio) / f32(math.log(max_distance / max_exact)))
    return int(f32(scaled * f32(n - max_exact)))


def _t5_reaches(a: int, k: int, n: int, max_distance: int, arithmetic: str) -> bool:
    """Whether distance ``a`` reaches the ``k``-th logarithmic step. ``"exact"``:
    ``(a / me) ** (n - me) >= (md / me) ** k``, in integers."""
    max_exact = n // 2
    if arithmetic != "exact":
        return _t5_float32_steps(a, n, max_exact, max_distance) >= k
    m = n - max_exact
    return a**m * max_exact**k >= max_distance**k * max_exact**m


@functools.lru_cache(maxsize=64)
def t5_thresholds(num_buckets: int, max_distance: int, arithmetic: str) -> tuple[int, ...]:
    """:func:`pe_core.t5.bucket_thresholds` (documented there)."""
    max_exact = num_buckets // 2
    thresholds: list[int] = []
    ratio = max_distance / max_exact
    steps = num_buckets - max_exact
    for k in range(1, steps):  # buckets max_exact + 1 .. num_buckets - 1

        def reaches(a: int, k: int = k) -> bool:
            return _t5_reaches(a, k, num_buckets, max_distance, arithmetic)

        estimate = max_exact * ratio ** (k / steps)
        lo = max(max_exact, min(math.floor(estimate * (1 - 1e-6)) - 2, SEARCHED // 2))
        if reaches(lo):
            lo = max_exact  # never in practice; the search below stays correct
        hi = max(lo + 1, min(math.ceil(estimate * (1 + 1e-6)) + 2, SEARCHED // 2))
        while not reaches(hi):
            lo, hi = hi, 2 * hi
            if hi > SEARCHED:
                break
        if hi > SEARCHED:
            break  # unreachable by any distance of the domain: neither are the next ones
        while hi - lo > 1:  # reaches(hi) and not reaches(lo)
            mid = (lo + hi) // 2
            if reaches(mid):
                hi = mid
            else:
                lo = mid
        thresholds.append(hi)
    return tuple(thresholds)


def t5_thresholds_plain(num_buckets: int, max_distance: int, arithmetic: str) -> tuple[int, ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return t5_thresholds(num_buckets, max_distance, arithmetic)


# --------------------------------------------------------------------------- DeBERTa


def _deberta_float32_steps(values: np.ndarray, mid: int, max_position: int) -> np.ndarray:
    """transformers' ``ceil(log(abs_pos / mid) / log(tensor((max_position - 1) / mid))
    * (mid - 1))`` in float32, for float32 values of ``abs_pos`` (a correctly rounded
    float32 log)."""
    f32 = np.float32
    denominator = log_float32(f32((max_position - 1) / mid))
    scaled = (log_float32_array(values / f32(mid)) / denominator) * f32(mid - 1)
    return np.ceil(scaled).astype(np.int64)


def _deberta_float32_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` of each float32 step count ``1, 2, ...`` (``a <= limit``)."""
    top = np.array([round_float32(limit)], dtype=np.float32)
    count = int(_deberta_float32_steps(top, mid, max_position)[0])
    if count <= 0:
        return ()
    steps = np.arange(1, count + 1)
    # Positive float32 values are ordered as their bit patterns: search those.
    lo = np.full(count, np.array(np.float32(mid)).view(np.uint32))  # 0 steps
    hi = np.full(count, top.view(np.uint32)[0])  # >= every step
    while (live := hi - lo > 1).any():
        middle = lo + (hi - lo) // 2
        reached = _deberta_float32_steps(middle.view(np.float32), mid, max_position) >= steps
        hi = np.where(live & reached, middle, hi)
        lo = np.where(live & ~reached, middle, lo)
    thresholds = []
    for value in hi.view(np.float32).tolist():  # the smallest float32 of each step count
        if value <= 2**24:
            first = math.ceil(value)
        else:  # the smallest integer that rounds up to it
            below = int(np.nextafter(np.float32(value), np.float32(0)))
            first = (below + int(value)) // 2
            if round_float32(first) < value:
                first += 1
        thresholds.append(first)
    return tuple(thresholds)


def _deberta_exact_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` with ``ceil(x(a)) >= n + 1`` for ``n = 0, 1, ...`` (``a <= limit``),
    ``x(a) = (mid - 1) log(a / mid) / log((max_position - 1) / mid)``: the real
    threshold ``mid r ** (n / (mid - 1))`` from 45-digit Decimals, exact checks when it
    is within 1e-20 of an integer (``x(a) > n`` is ``a ** (mid - 1) * mid ** n >
    (max_position - 1) ** n * mid ** (mid - 1)`` in integers)."""
    k = mid - 1
    if k == 0:
        return ()
    thresholds = []
    with decimal.localcontext() as ctx:
        ctx.prec = 45
        log_ratio = (decimal.Decimal(max_position - 1) / decimal.Decimal(mid)).ln()
        near = decimal.Decimal("1e-20")
        steps = 0
        while True:
            real = decimal.Decimal(mid) * (log_ratio * steps / k).exp()
            whole = int(real)
            if real - whole < near or whole + 1 - real < near:
                first = max(whole - 1, mid)
                while not first**k * mid**steps > (max_position - 1) ** steps * mid**k:
                    first += 1
            else:
                first = whole + 1
            if first > limit:
                break
            thresholds.append(first)
            steps += 1
    return tuple(thresholds)


@functools.lru_cache(maxsize=32)
def _deberta_thresholds(
    mid: int, max_position: int, arithmetic: str, limit: int
) -> tuple[int, ...]:
    if arithmetic == "exact":
        return _deberta_exact_thresholds(mid, max_position, limit)
    return _deberta_float32_thresholds(mid, max_position, limit)


def deberta_negated(mid: int, max_position: int, arithmetic: str, limit: int) -> tuple[int, ...]:
    """The thresholds negated (descending), one placeholder when there are none (a
    plain function, not the cache wrapper, so torch.compile can embed its result)."""
    return tuple(-t for t in _deberta_thresholds(mid, max_position, arithmetic, limit)) or (0,)


def deberta_count(mid: int, max_position: int, arithmetic: str, limit: int) -> int:
    return len(_deberta_thresholds(mid, max_position, arithmetic, limit))


@functools.lru_cache(maxsize=32)
def _negated_array(
    mid: int, max_position: int, arithmetic: str, limit: int, dtype: str
) -> np.ndarray:
    return np.array(deberta_negated(mid, max_position, arithmetic, limit), dtype=dtype)


def _deberta_kernel(xp: Any, rel: Any, negated: Any, mid: int, count: int) -> Any:
    """DeBERTa's buckets of the integer array ``rel``: a binary search of ``-|rel|``
    among the negated thresholds (descending), integer operations only."""
    dtype = xp.dtype(xp.dtype_of(rel))
    neg = xp.where(rel < 0, rel, -rel)  # -|rel|, exact at the most negative integer too
    steps = xp.zeros_like(rel)
    size = 1 << max(count.bit_length() - 1, 0)
    while count and size:
        candidate = steps + size
        index = xp.where(candidate > count, xp.zeros_like(candidate) + count, candidate) - 1
        reached = (candidate <= count) & (neg <= xp.take(negated, index, axis=0))
        steps = xp.where(reached, candidate, steps)
        size //= 2
    sign = xp.astype(rel > 0, dtype) - xp.astype(rel < 0, dtype)
    return xp.where(neg >= -mid, rel, sign * (steps + mid))


def deberta_buckets(xp: Any, rel: Any, mid: int, max_position: int, arithmetic: str) -> Any:
    """DeBERTa's buckets of the int32 or int64 array ``rel`` of namespace ``xp``."""
    name = xp.dtype_of(rel)
    config = (mid, max_position, arithmetic, 2**63 if name == "int64" else 2**31)
    if xp.is_tracing():  # torch.compile: the thresholds are built outside the trace
        values = xp.host_constant(deberta_negated, *config)
        negated = xp.asarray(values, dtype=xp.dtype(name), like=rel)
        count = xp.host_constant(deberta_count, *config)
    else:
        negated = xp.asarray(_negated_array(*config, name), like=rel)
        count = deberta_count(*config)
    if xp.compile_eager_kernels and not xp.is_tracing() and not xp.is_traced(rel):
        return compiled(xp.name, _deberta_kernel, mid, count)(rel, negated)
    return _deberta_kernel(xp, rel, negated, mid, count)


@host_table("deberta")
def deberta_host(
    q_len: int, k_len: int, mid: int, max_position: int, arithmetic: str, limit: int
) -> np.ndarray:
    """DeBERTa's ``query - key`` table, log-bucketed when ``mid``."""
    distance = np.arange(q_len)[:, None] - np.arange(k_len)[None, :]
    if mid:  # log buckets
        thresholds = _deberta_thresholds(mid, max_position, arithmetic, limit)
        size = np.abs(distance)
        steps = np.searchsorted(np.array(thresholds, np.int64), size, side="right")
        distance = np.where(size <= mid, distance, np.sign(distance) * (mid + steps))
    return distance
