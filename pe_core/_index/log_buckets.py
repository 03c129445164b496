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


def _float32_steps(values: np.ndarray, divisor: int, denominator: Any, factor: int) -> Any:
    """``log(values / divisor) / denominator * factor``, each step in float32 as PyTorch
    computes it, for float32 ``values`` (a correctly rounded float32 log): the replay of
    transformers' T5 and DeBERTa buckets."""
    f32 = np.float32
    return (log_float32_array(values / f32(divisor)) / f32(denominator)) * f32(factor)


def _t5_float32_steps(a: int, n: int, max_exact: int, max_distance: int) -> int:
    """transformers' ``(log(a.float() / max_exact) / math.log(max_distance / max_exact)
    * (n - max_exact)).to(long)`` for one distance ``a >= max_exact`` (each Python
    scalar rounded to float32 first)."""
    a32 = np.array([a], np.float32)
    return int(_float32_steps(a32, max_exact, math.log(max_distance / max_exact), n - max_exact)[0])


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


def deberta_float32_steps(values: np.ndarray, mid: int, max_position: int) -> np.ndarray:
    """transformers' ``ceil(log(abs_pos / mid) / log(tensor((max_position - 1) / mid))
    * (mid - 1))`` in float32, as int64, of the distances ``values > mid`` (uint64, or
    float32 already)."""
    denominator = log_float32(np.float32((max_position - 1) / mid))
    f32 = values.astype(np.float32, copy=False)
    return np.ceil(_float32_steps(f32, mid, denominator, mid - 1)).astype(np.int64)


def _deberta_float32_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` of each float32 step count ``1, 2, ...`` (``a <= limit``)."""
    top = np.array([round_float32(limit)], dtype=np.float32)
    count = int(deberta_float32_steps(top, mid, max_position)[0])
    if count <= 0:
        return ()
    steps = np.arange(1, count + 1)
    # Positive float32 values are ordered as their bit patterns: search those, from a
    # window around the real-number threshold (the whole range where it misses).
    floor_bits = np.array(np.float32(mid)).view(np.uint32)  # 0 steps
    top_bits = top.view(np.uint32)[0]  # >= every step
    real = mid * np.exp((steps - 1) * (math.log((max_position - 1) / mid) / (mid - 1)))
    lo, hi = (
        np.clip((real * factor).astype(np.float32).view(np.uint32), floor_bits, top_bits)
        for factor in (1 - 1e-4, 1 + 1e-4)
    )
    reached = deberta_float32_steps(hi.view(np.float32), mid, max_position) >= steps
    hi = np.where(reached, hi, top_bits)
    early = deberta_float32_steps(lo.view(np.float32), mid, max_position) >= steps
    lo = np.where(early & (lo > floor_bits), floor_bits, lo)
    while (live := hi - lo > 1).any():
        middle = lo + (hi - lo) // 2
        reached = deberta_float32_steps(middle.view(np.float32), mid, max_position) >= steps
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


# Exact arithmetic: ``x(a) = k log(a / mid) / log(top / mid)`` with ``k = mid - 1`` and
# ``top = max_position - 1``; DeBERTa's step count of a distance ``a > mid`` is
# ``ceil(x(a))``.


def _powers_equal(p: int, e1: int, u: int, e2: int) -> bool:
    """``p ** e1 == u ** e2`` for integers ``p, u >= 1`` and ``e1, e2 >= 0``, without
    forming the powers (the exponents may be ~2**50)."""
    if e1 == 0 or p == 1:
        return e2 == 0 or u == 1
    if e2 == 0 or u == 1:
        return False
    g = math.gcd(e1, e2)
    e1, e2 = e1 // g, e2 // g  # coprime: p = c ** e2, u = c ** e1 for an integer c >= 2
    if e2 >= p.bit_length() or e1 >= u.bit_length():
        return False  # c >= 2 would make c ** e2 > p (or c ** e1 > u)
    c = round(p ** (1.0 / e2))
    return any(r >= 2 and r**e2 == p and r**e1 == u for r in (c - 1, c, c + 1))


def _tie(a: int, m: int, mid: int, top: int) -> bool:
    """``x(a) == m`` exactly: ``(a / mid) ** k == (top / mid) ** m`` in reduced fractions."""
    k = mid - 1
    g1, g2 = math.gcd(a, mid), math.gcd(top, mid)
    p, q, u, v = a // g1, mid // g1, top // g2, mid // g2
    return _powers_equal(p, k, u, m) and _powers_equal(q, k, v, m)


def _sign(a: int, m: int, mid: int, top: int) -> int:
    """The sign of ``x(a) - m``, exactly (Decimals of growing precision; ties in
    integers, so the loop ends)."""
    if _tie(a, m, mid, top):
        return 0
    prec = 40 + len(str(m))
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            d_mid = decimal.Decimal(mid)
            first = (mid - 1) * (decimal.Decimal(a) / d_mid).ln()
            second = m * (decimal.Decimal(top) / d_mid).ln()
            diff = first - second
            bound = (abs(first) + abs(second) + 1) * decimal.Decimal(10) ** (4 - prec)
        if abs(diff) > bound:
            return 1 if diff > 0 else -1
        prec *= 2


def _steps_one(a: int, mid: int, top: int) -> int:
    """``ceil(x(a))`` of one distance ``a > mid``, exactly."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        d_mid = decimal.Decimal(mid)
        x = (mid - 1) * (decimal.Decimal(a) / d_mid).ln() / (decimal.Decimal(top) / d_mid).ln()
        m = int(x.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
        if abs(x - m) > decimal.Decimal("1e-20"):  # x is within ~1e-40 of its Decimal
            return int(x.to_integral_value(rounding=decimal.ROUND_CEILING))
    return m if _sign(a, m, mid, top) <= 0 else m + 1


#: The float type of the vectorised estimate: x87's 64-bit significand where NumPy has it.
_WIDE_FLOAT = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else np.float64


@functools.lru_cache(maxsize=64)
def _scale(mid: int, top: int) -> Any:
    """``k / log(top / mid)``, correctly rounded to :data:`_WIDE_FLOAT`."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        value = (mid - 1) / (decimal.Decimal(top) / decimal.Decimal(mid)).ln()
    return _WIDE_FLOAT(str(value))


def deberta_exact_steps(a: np.ndarray, mid: int, max_position: int) -> np.ndarray:
    """``ceil(x(a))`` of the distances ``a > mid`` (uint64), exactly, as int64.

    A vectorised estimate in :data:`_WIDE_FLOAT` (relative error below ``8 eps``)
    decides every distance whose ``x`` is not within ``64 eps |x|`` of an integer; the
    others (rare: where the real value nearly meets an integer) are decided one by one
    in Decimals and integers. Time and memory are proportional to ``a.size``.
    """
    top = max_position - 1
    if mid == 1 or a.size == 0:  # k = 0: x = 0
        return np.zeros(a.shape, np.int64)
    wf: Any = _WIDE_FLOAT
    ratio = (a - np.uint64(mid)).astype(wf) / np.array(mid, wf)
    x = _scale(mid, top) * np.log1p(ratio)
    nearest = np.rint(x)
    unsure = np.abs(x - nearest) <= 64 * np.finfo(wf).eps * x + np.finfo(wf).tiny
    steps = np.ceil(x).astype(np.int64)
    flat_a, flat_steps = a.reshape(-1), steps.reshape(-1)
    for i in np.flatnonzero(unsure.reshape(-1)).tolist():
        flat_steps[i] = _steps_one(int(flat_a[i]), mid, top)
    return flat_steps.reshape(a.shape)


def deberta_host_buckets(
    rel: np.ndarray, mid: int, max_position: int, arithmetic: str
) -> np.ndarray:
    """DeBERTa's buckets of host integers (any integer dtype, uint64 included), int64,
    each computed directly: time and memory proportional to ``rel.size``."""
    rel = np.asarray(rel)
    if rel.dtype.kind == "u":
        size, negative = rel.astype(np.uint64), np.zeros(rel.shape, bool)
    else:
        wide = rel.astype(np.int64)
        negative = wide < 0
        size = np.where(negative, -(wide + 1), wide).astype(np.uint64)  # |r| - 1 if r < 0
        size = size + negative.astype(np.uint64)  # |r|, 2**63 included
    out = np.zeros(rel.shape, np.int64)
    small = size <= np.uint64(mid)
    out[small] = size[small].astype(np.int64)
    large = ~small
    steps = (deberta_exact_steps if arithmetic == "exact" else deberta_float32_steps)(
        size[large], mid, max_position
    )
    out[large] = steps + mid
    return np.where(negative, -out, out)


#: The most thresholds built for a framework array (whose values pe_core does not read):
#: 2**18 (2 MiB of int64; at most a few seconds to build, once per configuration).
MAX_THRESHOLDS = 2**18


def deberta_threshold_count(mid: int, max_position: int, arithmetic: str, limit: int) -> int:
    """How many thresholds lie at or below ``limit`` (the step count of ``limit``)."""
    if limit <= mid:
        return 0
    a = np.array([limit], np.uint64)
    if arithmetic == "exact":
        return int(deberta_exact_steps(a, mid, max_position)[0])
    return max(int(deberta_float32_steps(a, mid, max_position)[0]), 0)


def _deberta_exact_thresholds(mid: int, max_position: int, limit: int) -> tuple[int, ...]:
    """Smallest ``a`` with ``ceil(x(a)) >= s + 1`` for ``s = 0, 1, ...`` (``a <= limit``):
    ``floor(y_s) + 1`` with ``y_s = mid (top / mid) ** (s / k)``, walked in 256-bit
    fixed point (``y_{s+1} = y_s rho``), exact decisions where ``y_s`` nearly meets an
    integer. One big-integer product per threshold."""
    k, top = mid - 1, max_position - 1
    if k == 0:
        return ()
    bits = 256
    with decimal.localcontext() as ctx:
        ctx.prec = 120
        rho = ((decimal.Decimal(top) / decimal.Decimal(mid)).ln() / k).exp()
        rho_fp = int(rho * (decimal.Decimal(2) ** bits))
    one = 1 << bits
    y = mid << bits
    thresholds = []
    s = 0
    while True:
        whole = y >> bits
        frac = y - (whole << bits)
        error = (s + 2) << 140  # accumulated rounding, far above the true error
        if error < frac < one - error:
            floor = whole
        else:  # y_s is next to the integer c: floor is c where y_s >= c, i.e. x(c) <= s
            c = whole + 1 if frac >= one - error else whole
            floor = c if _sign(c, s, mid, top) <= 0 else c - 1
        first = floor + 1
        if first > limit:
            break
        thresholds.append(first)
        s += 1
        y = (y * rho_fp) >> bits
    return tuple(thresholds)


@functools.lru_cache(maxsize=32)
def _deberta_thresholds(
    mid: int, max_position: int, arithmetic: str, limit: int
) -> tuple[int, ...]:
    count = deberta_threshold_count(mid, max_position, arithmetic, limit)
    if count > MAX_THRESHOLDS:  # deberta_buckets refuses first, with the whole story
        raise ValueError(f"{count} thresholds asked for, at most {MAX_THRESHOLDS}")
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
    """DeBERTa's buckets of the int32 or int64 array ``rel`` of namespace ``xp``: each
    computed directly for NumPy, a binary search among the thresholds otherwise."""
    name = xp.dtype_of(rel)
    if xp.numpy_arrays and not xp.is_tracing():
        out = deberta_host_buckets(rel, mid, max_position, arithmetic)
        return out if name == "uint64" else out.astype(name)
    limit = 2**63 if name == "int64" else 2**31
    config = (mid, max_position, arithmetic, limit)
    needed = xp.host_constant(deberta_threshold_count, *config)
    if needed > MAX_THRESHOLDS:
        raise ValueError(
            f"deberta_log_bucket of a {xp.name} {name} array with bucket_size={2 * mid} (or "
            f"{2 * mid + 1}), max_position={max_position} needs {needed} thresholds for the "
            f"{name} range (at most {MAX_THRESHOLDS}: pe_core does not read the positions "
            "back from the device to compute each bucket directly). Pass the positions as "
            "a NumPy array, or choose a larger max_position."
        )
    if name == "int32" and mid + needed >= 2**31:  # the largest bucket must fit in int32
        raise ValueError(
            f"deberta_log_bucket of int32 positions with bucket_size={2 * mid} (or "
            f"{2 * mid + 1}), max_position={max_position} reaches bucket {mid + needed}, "
            "beyond int32: pass int64 positions."
        )
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
    q_len: int, k_len: int, mid: int, max_position: int, arithmetic: str
) -> np.ndarray:
    """DeBERTa's ``query - key`` table, log-bucketed when ``mid``: the buckets of the
    ``q_len + k_len - 1`` distances, each computed directly, then gathered."""
    distances = np.arange(-(k_len - 1), q_len)  # query - key, ascending
    if mid:  # log buckets
        distances = deberta_host_buckets(distances, mid, max_position, arithmetic)
    return distances[np.arange(q_len)[:, None] - np.arange(k_len)[None, :] + (k_len - 1)]
