"""T5's relative position buckets and the attention bias they index, on any backend.

T5 (Raffel et al., 2020) gives each head a learned scalar per *bucket* of the relative
position ``r = key_position - query_position``. With ``B`` buckets (halved when
bidirectional, the upper half for ``r > 0``) and ``a = |r|`` (or ``max(-r, 0)`` for
causal attention), the first ``B/2`` buckets are exact (``a < max_exact``) and the
others grow logarithmically up to ``max_distance``:

    bucket(a) = max_exact + floor(log(a / max_exact) / log(max_distance / max_exact)
                                  * (B - max_exact)),   clamped to B - 1.

The codebases (Mesh TensorFlow, transformers' ``T5Attention._relative_position_bucket``,
x-transformers' ``RelativePositionBias``) evaluate that formula in float32, and float32
decides the buckets of the distances that sit on a boundary. pe_core never takes the
log on the device: the bucket is ``max_exact`` plus the number of *thresholds* the
distance reaches, integers found once on the host (:func:`bucket_thresholds`) by
replaying the float32 arithmetic of transformers' PyTorch code. The result is
transformers' bucket, bit for bit, for every integer distance, on every backend, traced
or not (integer comparisons only). ``arithmetic="exact"`` uses the real-number
boundaries instead. See ``docs/relative.md`` for where the two differ.

>>> from pe_core.t5 import t5_relative_bucket
>>> t5_relative_bucket([-200, -20, -3, 0, 3, 20, 200]).tolist()
[15, 10, 3, 0, 19, 26, 31]
"""

from __future__ import annotations

import decimal
import functools
import math
import numbers
from typing import Any, Literal, overload

import numpy as np

from pe_core.typing import (
    BackendLike,
    HostArrayLike,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core_backends import backend_of, canonical_backend, get_namespace

__all__ = [
    "ARITHMETICS",
    "bucket_thresholds",
    "t5_bucket_matrix",
    "t5_relative_bias",
    "t5_relative_bucket",
]

Arithmetic = Literal["float32", "exact"]

#: The arithmetics :func:`t5_relative_bucket` can reproduce.
ARITHMETICS: tuple[str, ...] = ("float32", "exact")


# --------------------------------------------------------------------------- validation


def _check_config(
    bidirectional: object, num_buckets: object, max_distance: object, arithmetic: object
) -> tuple[int, int]:
    """``(buckets per side, max_exact)`` after validating the T5 options."""
    if not isinstance(bidirectional, (bool, np.bool_)):
        raise TypeError(f"bidirectional must be True or False. Received: {bidirectional!r}")
    side = 2 if bidirectional else 1
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, numbers.Integral):
        raise TypeError(f"num_buckets must be an integer. Received: {num_buckets!r}")
    n = int(num_buckets) // side
    if n < 2:
        raise ValueError(
            f"num_buckets must be at least {2 * side} when bidirectional={bool(bidirectional)} "
            f"(at least one exact bucket per side). Received: {num_buckets!r}"
        )
    max_exact = n // 2
    if isinstance(max_distance, bool) or not isinstance(max_distance, numbers.Integral):
        raise TypeError(f"max_distance must be an integer. Received: {max_distance!r}")
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed max_exact = {max_exact} (the exact buckets of "
            f"num_buckets={num_buckets}). Received: {max_distance!r}"
        )
    if arithmetic not in ARITHMETICS:
        raise ValueError(
            f"Unknown arithmetic {arithmetic!r}. Expected one of: {', '.join(ARITHMETICS)}."
        )
    return n, max_exact


# --------------------------------------------------------------------------- thresholds


def _log_float32(x: np.float32) -> np.float32:
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


def _float32_steps(a: int, n: int, max_exact: int, max_distance: int) -> int:
    """transformers' ``(log(a.float() / max_exact) / math.log(max_distance / max_exact)
    * (n - max_exact)).to(long)`` for one distance ``a >= max_exact``, step by step in
    float32 as PyTorch computes it (each Python scalar rounded to float32 first)."""
    f32 = np.float32
    ratio = f32(f32(a) / f32(max_exact))
    scaled = f32(_log_float32(ratio) / f32(math.log(max_distance / max_exact)))
    return int(f32(scaled * f32(n - max_exact)))


def _exact_reaches(a: int, k: int, n: int, max_exact: int, max_distance: int) -> bool:
    """Whether ``floor(log(a / me) / log(md / me) * (n - me)) >= k`` in real numbers:
    ``(a / me) ** (n - me) >= (md / me) ** k``, in integers."""
    m = n - max_exact
    return a**m * max_exact**k >= max_distance**k * max_exact**m


#: Thresholds are searched up to this distance: beyond every distance of the domain
#: (relative positions of any int64/uint64 array, offsets with ``|offset| <= 2**64``).
_SEARCHED = 2**66

#: ``|offset|`` of an integer offset may be at most this (see :func:`t5_bucket_matrix`).
MAX_OFFSET = 2**64


@functools.lru_cache(maxsize=64)
def bucket_thresholds(
    num_buckets: int, max_distance: int, arithmetic: Arithmetic = "float32"
) -> tuple[int, ...]:
    """The distances at which the logarithmic buckets start, for one side.

    Parameters
    ----------
    num_buckets : int
        Buckets of one side: T5's ``num_buckets`` after halving when bidirectional.
    max_distance : int
        T5's ``max_distance``.
    arithmetic : {"float32", "exact"}
        ``"float32"``: the boundaries of transformers' PyTorch code, whose float32
        arithmetic this replays (``float32(a) / max_exact``, a correctly rounded float32
        log, division by ``float32(math.log(max_distance / max_exact))``, product with
        ``num_buckets - max_exact``, truncation). ``"exact"``: the real-number
        boundaries ``max_exact * (max_distance / max_exact) ** (k / (num_buckets -
        max_exact))``, rounded up, found in integer arithmetic.

    Returns
    -------
    tuple of int
        ``t_1 < t_2 < ...``: a distance ``a >= max_exact`` falls in bucket
        ``max_exact + #{k : a >= t_k}``, which never exceeds ``num_buckets - 1``.
        Thresholds beyond ``2**66`` (reached by no distance pe_core accepts) are left
        out.

    Examples
    --------
    >>> bucket_thresholds(16, 128)  # T5's defaults: 32 buckets, bidirectional
    (12, 16, 23, 32, 46, 64, 91)
    """
    max_exact = num_buckets // 2
    thresholds: list[int] = []
    ratio = max_distance / max_exact
    steps = num_buckets - max_exact
    for k in range(1, steps):  # buckets max_exact + 1 .. num_buckets - 1

        def reaches(a: int, k: int = k) -> bool:
            if arithmetic == "exact":
                return _exact_reaches(a, k, num_buckets, max_exact, max_distance)
            return _float32_steps(a, num_buckets, max_exact, max_distance) >= k

        estimate = max_exact * ratio ** (k / steps)
        lo = max(max_exact, min(math.floor(estimate * (1 - 1e-6)) - 2, _SEARCHED // 2))
        if reaches(lo):
            lo = max_exact  # never in practice; the search below stays correct
        hi = max(lo + 1, min(math.ceil(estimate * (1 + 1e-6)) + 2, _SEARCHED // 2))
        while not reaches(hi):
            lo, hi = hi, 2 * hi
            if hi > _SEARCHED:
                break
        if hi > _SEARCHED:
            break  # unreachable by any distance of the domain: neither are the next ones
        while hi - lo > 1:  # reaches(hi) and not reaches(lo)
            mid = (lo + hi) // 2
            if reaches(mid):
                hi = mid
            else:
                lo = mid
        thresholds.append(hi)
    return tuple(thresholds)


def _thresholds(num_buckets: int, max_distance: int, arithmetic: str) -> tuple[int, ...]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return bucket_thresholds(num_buckets, max_distance, arithmetic)


# --------------------------------------------------------------------------- kernel


def _kernel(
    xp: Any,
    rel: Any,
    n: int,
    max_exact: int,
    thresholds: tuple[int, ...],
    bidirectional: bool,
    carry: Any = None,
) -> Any:
    """Buckets of the integer array ``rel`` on namespace ``xp``: comparisons only.

    ``rel`` is int32 or int64 (``W`` bits). With ``carry`` (an array of -1, 0, 1 of the
    same dtype) the relative position is ``rel + carry * 2**W``: uint64 values, and
    differences that left the signed range. Nothing is negated or subtracted here, so
    no value wraps: every threshold is a comparison with a constant found on the host
    (``-2**63`` included, whose absolute value int64 cannot hold).
    """
    name = xp.dtype_of(rel)
    dtype = xp.dtype(name)
    info = np.iinfo(name)
    span = 1 << info.bits
    if carry is None and -int(info.min) not in thresholds:
        # the common case: -2**(W-1) shares the bucket of -2**(W-1) + 1 (no threshold
        # lies between their distances), whose absolute value does not wrap
        rel = xp.where(rel == int(info.min), rel + 1, rel)
        return _signed_kernel(xp, rel, n, max_exact, thresholds, bidirectional, dtype)

    def split(c: int) -> tuple[int, int]:
        """``c = low + c_carry * 2**W`` with ``low`` in the signed range."""
        c_carry = (c - int(info.min)) // span
        return c_carry, c - c_carry * span

    def at_least(c: int) -> Any:
        """``true rel >= c``: a bool array, or a Python bool where it is known."""
        c_carry, low = split(c)
        if carry is None:
            return c_carry < 0 or (c_carry == 0 and rel >= low)
        return xp.where(carry == c_carry, rel >= low, carry > c_carry)

    def at_most(c: int) -> Any:
        """``true rel <= c``: a bool array, or a Python bool where it is known."""
        c_carry, low = split(c)
        if carry is None:
            return c_carry > 0 or (c_carry == 0 and rel <= low)
        return xp.where(carry == c_carry, rel <= low, carry < c_carry)

    def as_array(value: Any) -> Any:
        if isinstance(value, (bool, int)):
            return xp.zeros_like(rel) + int(value)
        return value

    def count(flags: list[Any]) -> Any:
        total: Any = sum(1 for f in flags if f is True)
        for f in flags:
            if not isinstance(f, bool):
                total = total + xp.astype(f, dtype)
        return total

    def select(flag: Any, x: Any, y: Any) -> Any:
        if isinstance(flag, bool):
            return x if flag else y
        return xp.where(flag, as_array(x), as_array(y))

    def both(a: Any, b: Any) -> Any:
        if isinstance(a, bool):
            return b if a else False
        if isinstance(b, bool):
            return a if b else False
        return xp.where(a, b, a)

    # thresholds reached: r <= -t (keys before the query), r >= t (keys after it)
    large = max_exact + count([at_most(-t) for t in thresholds])
    small = at_least(1 - max_exact)  # r > -max_exact
    if bidirectional:
        large = large + count([at_least(t) for t in thresholds])
        small = both(small, at_most(max_exact - 1))  # and r < max_exact
        value = xp.where(rel < 0, -rel, rel)  # |r| where r is small (no carry there)
    else:
        # max(-r, 0) where small (r > 0 may carry: its value is not read)
        value = select(at_most(-1), -rel, 0)
    bucket = as_array(select(small, value, large))
    if bidirectional:
        bucket = bucket + as_array(count([at_least(1)])) * n
    return bucket


def _signed_kernel(
    xp: Any,
    rel: Any,
    n: int,
    max_exact: int,
    thresholds: tuple[int, ...],
    bidirectional: bool,
    dtype: Any,
) -> Any:
    """:func:`_kernel` for ``rel`` above the dtype's minimum: ``|rel|`` does not wrap."""
    if bidirectional:
        distance = xp.abs(rel)
    else:
        distance = xp.where(rel < 0, -rel, xp.zeros_like(rel))
    large = xp.zeros_like(distance) + max_exact
    limit = np.iinfo(xp.dtype_of(rel)).max
    for t in thresholds:
        if t <= limit:
            large = large + xp.astype(distance >= t, dtype)
    bucket = xp.where(distance < max_exact, distance, large)
    if bidirectional:
        bucket = bucket + xp.astype(rel > 0, dtype) * n
    return bucket


def _as_relative(obj: Any, xp: Any, source: str | None, what: str) -> tuple[Any, Any]:
    """``obj`` as a signed integer array of namespace ``xp`` (int64, int32 on JAX without
    x64) and its carry (see :func:`_kernel`): ``None``, or where unsigned values beyond
    the signed range wrapped, the array of 1s and 0s that restores them."""
    if source is None:
        if isinstance(obj, (bool, np.bool_)):
            raise TypeError(f"{what} must be integers. Received: {obj!r}")
        if isinstance(obj, numbers.Integral) and not -(2**63) <= int(obj) < 2**64:
            raise ValueError(
                f"{what} must be integers in [-2**63, 2**64) (int64 or uint64). Received: {obj!r}"
            )
        try:
            array = np.asarray(obj)
        except OverflowError as exc:
            raise ValueError(
                f"{what} must be integers in [-2**63, 2**64) (int64 or uint64). Received: {obj!r}"
            ) from exc
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            if array.dtype.kind in "fO" and _all_python_ints(obj):
                raise ValueError(
                    f"{what} must be integers of one NumPy dtype, int64 or uint64: "
                    "in [-2**63, 2**63) or in [0, 2**64). Received Python ints from "
                    f"{min(_flat_ints(obj))} to {max(_flat_ints(obj))}"
                )
            raise TypeError(f"{what} must be integers. Received dtype: {array.dtype}")
        source, obj = "numpy", array
    if source != xp.name:
        values = get_namespace(source).concrete(obj)
        if values is None:
            raise TypeError(
                f"{what} is a traced {source} value and cannot be moved to another backend; "
                "call with backend=None (or the same backend) inside compiled code."
            )
        obj = values
        if obj.dtype.kind in "iu":
            obj = _fit_int(obj, xp, what)
        obj = xp.asarray(obj)
    name = xp.dtype_of(obj)
    if xp.kind(name) != "int":
        raise TypeError(f"{what} must be integers. Received dtype: {name}")
    wide = "int64" if xp.supports("int64") else "int32"
    if name in ("int32", "int64"):
        return obj, None
    if name == "uint64" or (name == "uint32" and wide == "int32"):
        signed = xp.dtype("int64" if name == "uint64" else "int32")
        wrapped = xp.astype(obj, signed)  # two's complement: values >= 2**(W-1) wrap
        return wrapped, xp.astype(wrapped < 0, signed)
    return xp.astype(obj, xp.dtype(wide)), None


def _flat_ints(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return [v for item in obj for v in _flat_ints(item)]
    return [obj]


def _all_python_ints(obj: Any) -> bool:
    items = _flat_ints(obj)
    return bool(items) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in items
    )


def _fit_int(values: np.ndarray, xp: Any, what: str) -> np.ndarray:
    """Host integers for ``xp``: int64 (uint64 kept where values reach ``2**63``), or
    int32 where ``xp`` has no int64 (JAX without x64)."""
    if xp.supports("int64"):
        if values.dtype == np.uint64 and values.size and int(values.max()) >= 2**63:
            return values
        return values.astype(np.int64, copy=False)
    if values.dtype == np.uint32:
        return values  # held as it is; wrapped with a carry on the backend
    info = np.iinfo(np.int32)
    if values.size and not (info.min <= int(values.min()) and int(values.max()) <= info.max):
        raise ValueError(
            f"{what} do not fit in int32, the widest integer of backend {xp.name!r} now "
            f"(enable jax_enable_x64 for int64). Received values from {values.min()} to "
            f"{values.max()}"
        )
    return values.astype(np.int32)


# --------------------------------------------------------------------------- front doors


@overload
def t5_relative_bucket(
    relative_position: HostArrayLike,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: NumpyBackend | None = None,
    arithmetic: Arithmetic = "float32",
) -> NDArray: ...


@overload
def t5_relative_bucket(
    relative_position: TorchTensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: None = None,
    arithmetic: Arithmetic = "float32",
) -> TorchTensor: ...


@overload
def t5_relative_bucket(
    relative_position: JaxArray,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: None = None,
    arithmetic: Arithmetic = "float32",
) -> JaxArray: ...


@overload
def t5_relative_bucket(
    relative_position: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: TorchBackend,
    arithmetic: Arithmetic = "float32",
) -> TorchTensor: ...


@overload
def t5_relative_bucket(
    relative_position: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: JaxBackend,
    arithmetic: Arithmetic = "float32",
) -> JaxArray: ...


@overload
def t5_relative_bucket(
    relative_position: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: TensorFlowBackend,
    arithmetic: Arithmetic = "float32",
) -> TFTensor: ...


@overload
def t5_relative_bucket(
    relative_position: TFTensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: None = None,
    arithmetic: Arithmetic = "float32",
) -> TFTensor: ...


@overload
def t5_relative_bucket(
    relative_position: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    arithmetic: Arithmetic = "float32",
) -> Any: ...


def t5_relative_bucket(
    relative_position: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    arithmetic: Arithmetic = "float32",
) -> Any:
    """T5's bucket of each relative position (``key_position - query_position``).

    Equal to transformers' ``T5Attention._relative_position_bucket`` for every integer
    relative position, on every backend.

    Parameters
    ----------
    relative_position : int, sequence or integer array
        Relative positions ``memory_position - context_position`` of any shape, from
        NumPy, JAX, PyTorch or TensorFlow (traced values included).
    bidirectional : bool
        ``True`` (encoders): half the buckets for keys before the query, half for keys
        after it (``r > 0``). ``False`` (decoders): keys after the query (``r > 0``)
        share bucket 0 with ``r = 0``.
    num_buckets : int
        Buckets in all (T5: 32): at least 4 when bidirectional, 2 otherwise.
    max_distance : int
        Distances at or beyond it share the last bucket of their side (T5: 128); must
        exceed ``max_exact``, a quarter of ``num_buckets`` when bidirectional (half
        otherwise).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; the backend of ``relative_position`` by default (NumPy for
        Python values).
    arithmetic : {"float32", "exact"}
        ``"float32"`` (default): transformers' buckets, whose float32 log decides the
        distances on a boundary. ``"exact"``: the real-number boundaries.

    Returns
    -------
    array
        Integer buckets in ``[0, num_buckets)``, the shape of ``relative_position``
        (int64; int32 on JAX without x64).

    Raises
    ------
    TypeError
        Non-integer relative positions or options.
    ValueError
        Too few buckets, ``max_distance <= max_exact``, an unknown arithmetic.

    Examples
    --------
    >>> t5_relative_bucket(range(-2, 3)).tolist()  # exact buckets near 0
    [2, 1, 0, 17, 18]
    >>> t5_relative_bucket([5, -5, -200], bidirectional=False).tolist()
    [0, 5, 31]
    """
    n, max_exact = _check_config(bidirectional, num_buckets, max_distance, arithmetic)
    source = backend_of(relative_position)
    name = canonical_backend(backend) if backend is not None else (source or "numpy")
    xp = get_namespace(name)
    rel, carry = _as_relative(relative_position, xp, source, "relative_position")
    # Host work, embedded as constants by tracing compilers (torch.compile).
    thresholds = xp.host_constant(_thresholds, n, int(max_distance), arithmetic)
    if xp.compile_eager_kernels and not xp.is_tracing() and not xp.is_traced(rel):
        # eager JAX: one compiled program, not one compilation per operation
        program = _compiled_kernel(
            xp.name, n, max_exact, thresholds, bool(bidirectional), carry is not None
        )
        return program(rel) if carry is None else program(rel, carry)
    return _kernel(xp, rel, n, max_exact, thresholds, bool(bidirectional), carry)


@functools.lru_cache(maxsize=32)
def _compiled_kernel(
    backend: str,
    n: int,
    max_exact: int,
    thresholds: tuple[int, ...],
    bidirectional: bool,
    with_carry: bool,
) -> Any:
    xp = get_namespace(backend)
    if with_carry:
        return xp.compile(
            lambda rel, carry: _kernel(xp, rel, n, max_exact, thresholds, bidirectional, carry)
        )
    return xp.compile(lambda rel: _kernel(xp, rel, n, max_exact, thresholds, bidirectional))


@overload
def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: HostArrayLike = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: NumpyBackend | None = None,
    like: None = None,
    arithmetic: Arithmetic = "float32",
) -> NDArray: ...


@overload
def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: TorchBackend,
    like: None = None,
    arithmetic: Arithmetic = "float32",
) -> TorchTensor: ...


@overload
def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: JaxBackend,
    like: None = None,
    arithmetic: Arithmetic = "float32",
) -> JaxArray: ...


@overload
def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: TensorFlowBackend,
    like: None = None,
    arithmetic: Arithmetic = "float32",
) -> TFTensor: ...


@overload
def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    like: Any = None,
    arithmetic: Arithmetic = "float32",
) -> Any: ...


def t5_bucket_matrix(
    query_length: int,
    key_length: int,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    backend: BackendLike | None = None,
    like: Any = None,
    arithmetic: Arithmetic = "float32",
) -> Any:
    """The buckets of ``key_position - query_position`` for every query and key.

    Query ``i`` sits at position ``offset + i`` and key ``j`` at ``j``, as in
    transformers' ``T5Attention.compute_bias(query_length, key_length,
    past_seen_tokens=offset)``: ``offset`` is the number of cached tokens when decoding.

    Parameters
    ----------
    query_length, key_length : int
        Numbers of queries and keys, >= 1.
    offset : int or integer array
        Position of the first query: an int, or an integer array (any backend, traced
        included) that is a scalar or holds one offset per example ``(batch,)``.
    bidirectional, num_buckets, max_distance, arithmetic
        As for :func:`t5_relative_bucket`.
    backend : str, optional
        Where to build the matrix; that of ``like``, else of an array ``offset``, else
        NumPy.
    like : array, optional
        An array whose backend and device the matrix follows (e.g. the bias table).

    Returns
    -------
    array
        Integer buckets ``(query_length, key_length)``, or ``(batch, query_length,
        key_length)`` for per-example offsets ``(batch,)``.

    Examples
    --------
    >>> t5_bucket_matrix(2, 3).tolist()
    [[0, 17, 18], [1, 0, 17]]
    >>> t5_bucket_matrix(1, 3, offset=2, bidirectional=False).tolist()  # one decode step
    [[2, 1, 0]]
    """
    xp, buckets, geometry = _diagonal_buckets(
        query_length,
        key_length,
        offset,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
        backend=backend,
        like=like,
        arithmetic=arithmetic,
    )
    return _expand_diagonals(xp, buckets, geometry)


def _diagonal_buckets(
    query_length: int,
    key_length: int,
    offset: Any,
    *,
    bidirectional: bool,
    num_buckets: int,
    max_distance: int,
    backend: str | None,
    like: Any,
    arithmetic: Arithmetic,
    like_backend: str | None = None,
) -> tuple[Any, Any, Any]:
    """The buckets of the ``q + k - 1`` diagonals and the diagonal of each (query, key).

    ``key - query`` is constant along diagonals, so the buckets are computed once per
    diagonal, ``(q + k - 1,)`` (``(batch, q + k - 1)`` for per-example offsets), and
    expanded by :func:`_expand_diagonals` (the diagonal of query ``i`` and key ``j`` is
    ``j - i + q - 1`` whatever the offset).
    Returns ``(xp, buckets, geometry)`` for :func:`_expand_diagonals`; everything is
    built where the result lives.
    """
    q_len = _length(query_length, "query_length")
    k_len = _length(key_length, "key_length")
    n, max_exact = _check_config(bidirectional, num_buckets, max_distance, arithmetic)
    offset, offset_source = _offset_and_source(offset)
    if like is not None and like_backend is None:
        like_backend = backend_of(like)
    xp = _result_namespace(backend, like_backend, offset_source)
    thresholds = xp.host_constant(_thresholds, n, int(max_distance), arithmetic)
    anchor = like if like_backend == xp.name else None
    wide = "int64" if xp.supports("int64") else "int32"
    diagonals = xp.arange(q_len + k_len - 1, xp.dtype(wide), like=anchor) - (q_len - 1)
    if isinstance(offset, numbers.Integral):
        reach = max(thresholds, default=max_exact)
        relative, carry = _relative_for_int_offset(xp, diagonals, int(offset), q_len, k_len, reach)
    else:
        relative, carry = _relative_for_array_offset(xp, diagonals, offset, offset_source, wide)
    buckets = _kernel(xp, relative, n, max_exact, thresholds, bool(bidirectional), carry)
    return xp, buckets, (q_len, k_len, anchor)


def _offset_and_source(offset: Any) -> tuple[Any, str | None]:
    """``(offset, its backend)``: a Python or NumPy integer as it is (backend ``None``),
    an array of its own backend, anything else as a NumPy array."""
    if isinstance(offset, bool):
        raise TypeError(f"offset must be an int or an integer array. Received: {offset!r}")
    if isinstance(offset, numbers.Integral):
        return offset, None
    source = backend_of(offset)
    return (np.asarray(offset), "numpy") if source is None else (offset, source)


def _result_namespace(
    backend: str | None, like_backend: str | None, offset_source: str | None
) -> Any:
    """The namespace of ``backend``, else of ``like``, else of the offsets (NumPy)."""
    if backend is None:
        backend = like_backend if like_backend is not None else offset_source
    return get_namespace(canonical_backend(backend) if backend is not None else "numpy")


def _relative_for_int_offset(
    xp: Any,
    diagonals: Any,
    offset: int,
    q_len: int,
    k_len: int,
    reach: int,
) -> tuple[Any, Any]:
    """``key - query`` per diagonal for one integer offset, and its carry (``None``
    where every difference stays in the signed range of ``diagonals``).

    ``reach`` is the largest threshold (or ``max_exact``): every distance from it on
    shares one bucket per side, so an offset whose differences all lie beyond it is
    replaced by the nearest one that puts them there too (same buckets, small carry).
    """
    if abs(offset) > MAX_OFFSET:
        raise ValueError(f"offset must be an integer in [-2**64, 2**64]. Received: {offset!r}")
    if k_len - 1 - offset <= -reach:  # every key far before its query
        offset = k_len - 1 + reach
    elif 1 - q_len - offset >= reach:  # every key far after its query
        offset = 1 - q_len - reach
    info = np.iinfo(xp.dtype_of(diagonals))
    span = 1 << info.bits
    o_carry = (offset - int(info.min)) // span
    if not info.min <= o_carry <= info.max:
        raise ValueError(
            f"offset {offset} with thresholds up to {reach} needs more than {info.bits}-bit "
            f"integers on backend {xp.name!r} (enable jax_enable_x64 for int64)."
        )
    low = offset - o_carry * span  # offset = low + o_carry * 2**W, low in range
    relative = diagonals - low
    if o_carry == 0 and info.min <= 1 - q_len - low and k_len - 1 - low <= info.max:
        return relative, None
    # the subtraction wrapped where the result moved the wrong way
    if low > 0:
        wrapped = -xp.astype(relative > diagonals, relative.dtype)
    elif low < 0:
        wrapped = xp.astype(relative < diagonals, relative.dtype)
    else:
        wrapped = xp.zeros_like(relative)
    return relative, wrapped - o_carry


def _relative_for_array_offset(
    xp: Any, diagonals: Any, offset: Any, source: str | None, wide: str
) -> tuple[Any, Any]:
    """``key - query`` per diagonal for an array offset: a scalar, or one per example
    (``(batch,)`` -> ``(batch, q + k - 1)``), and its carry."""
    shift, shift_carry = _as_relative(offset, xp, source, "offset")
    if xp.dtype_of(shift) != wide:
        shift = xp.astype(shift, xp.dtype(wide))
        if shift_carry is not None:
            shift_carry = xp.astype(shift_carry, xp.dtype(wide))
    rank = len(shift.shape)
    if rank > 1:
        raise ValueError(
            "offset must be a scalar or hold one offset per example, shape (batch,). "
            f"Received: offset of shape {tuple(shift.shape)}"
        )
    if rank == 1:
        diagonals = xp.expand_dims(diagonals, 0)
        shift = xp.reshape(shift, (-1, 1))
        if shift_carry is not None:
            shift_carry = xp.reshape(shift_carry, (-1, 1))
    relative = diagonals - shift  # wraps where the difference leaves the signed range
    dtype = xp.dtype(wide)
    wrapped = xp.where(
        shift < 0,
        xp.astype(relative < diagonals, dtype),
        -xp.astype(relative > diagonals, dtype),
    )
    carry = wrapped if shift_carry is None else wrapped - shift_carry
    return relative, carry


def _expand_diagonals(xp: Any, values: Any, geometry: tuple[int, int, Any]) -> Any:
    """``(..., q + k - 1)`` per-diagonal values -> ``(..., q, k)`` with
    ``out[..., i, j] = values[..., j - i + q - 1]`` (a Toeplitz expansion)."""
    q_len, k_len, anchor = geometry
    return xp.expand_diagonals(values, q_len, k_len, like=anchor)


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: HostArrayLike,
    *,
    offset: HostArrayLike = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: NumpyBackend | None = None,
) -> NDArray: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: TorchTensor,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: None = None,
) -> TorchTensor: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: JaxArray,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: None = None,
) -> JaxArray: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: Any,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: TorchBackend,
) -> TorchTensor: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: Any,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: JaxBackend,
) -> JaxArray: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: Any,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: TensorFlowBackend,
) -> TFTensor: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: TFTensor,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: None = None,
) -> TFTensor: ...


@overload
def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: Any,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: BackendLike | None = None,
) -> Any: ...


def t5_relative_bias(
    query_length: int,
    key_length: int,
    table: Any,
    *,
    offset: Any = 0,
    bidirectional: bool = True,
    max_distance: int = 128,
    arithmetic: Arithmetic = "float32",
    backend: BackendLike | None = None,
) -> Any:
    """T5's position bias: the ``(num_buckets, n_heads)`` table indexed by the buckets.

    The result of transformers' ``T5Attention.compute_bias(query_length, key_length,
    past_seen_tokens=offset)`` with ``relative_attention_bias.weight = table``.

    Parameters
    ----------
    query_length, key_length : int
        Numbers of queries and keys, >= 1.
    table : array
        The learned bias table ``(num_buckets, n_heads)`` (``nn.Embedding.weight``):
        NumPy, JAX, PyTorch or TensorFlow. Gradients flow to it (the bias is a gather).
        ``num_buckets`` is its first axis.
    offset : int or integer array
        Position of the first query (cached tokens); an int, or per-example offsets
        ``(batch,)``.
    bidirectional, max_distance, arithmetic
        As for :func:`t5_relative_bucket` (T5: encoders bidirectional, decoders not).
    backend : str, optional
        The table's backend, when the caller knows it (found from the table otherwise).

    Returns
    -------
    array
        ``(1, n_heads, query_length, key_length)`` (``(batch, ...)`` for per-example
        offsets) on the table's backend and device, in its dtype: add it to the scores
        ``(batch, n_heads, query_length, key_length)``.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.arange(64.0).reshape(32, 2)   # bucket b, head h -> 2 b + h
    >>> t5_relative_bias(2, 3, table)[0, 1].tolist()  # head 1
    [[1.0, 35.0, 37.0], [3.0, 1.0, 35.0]]
    """
    source = canonical_backend(backend) if backend is not None else backend_of(table)
    if source is None:
        table = np.asarray(table)
        source = "numpy"
    shape = tuple(table.shape)
    if len(shape) != 2:
        raise ValueError(f"table must have shape (num_buckets, n_heads). Received: shape {shape}")
    xp = get_namespace(source)
    if (
        xp.compile_eager_kernels
        and not _tracing(xp, table, offset)
        and not (isinstance(offset, numbers.Integral) and not _fits_wide(int(offset), xp))
    ):
        # Eager JAX: one compiled program per shape and configuration (the offset is
        # an argument: decode steps reuse it), not one compilation per operation.
        _length(query_length, "query_length")
        _length(key_length, "key_length")
        _check_config(bidirectional, int(shape[0]), max_distance, arithmetic)
        program = _bias_program(
            xp.name,
            int(query_length),
            int(key_length),
            bool(bidirectional),
            int(max_distance),
            arithmetic,
            isinstance(offset, numbers.Integral),
        )
        if isinstance(offset, numbers.Integral):
            if isinstance(offset, bool):
                raise TypeError(f"offset must be an int or an integer array. Received: {offset!r}")
            offset = _fit_int(np.array(int(offset)), xp, "offset")
        return program(table, offset)
    xp, buckets, geometry = _diagonal_buckets(
        query_length,
        key_length,
        offset,
        bidirectional=bidirectional,
        num_buckets=int(shape[0]),
        max_distance=max_distance,
        backend=source,
        like=table,
        arithmetic=arithmetic,
        like_backend=source,
    )
    # One small gather per diagonal, then one expansion to (..., heads, q, k).
    per_diagonal = xp.matrix_transpose(xp.take(table, buckets, axis=0))
    bias = _expand_diagonals(xp, per_diagonal, geometry)
    return bias[None] if len(bias.shape) == 3 else bias


def _fits_wide(value: int, xp: Any) -> bool:
    """Whether ``value`` is an int64 (int32 on JAX without x64)."""
    bits = 64 if xp.supports("int64") else 32
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def _tracing(xp: Any, *arrays: Any) -> bool:
    return xp.is_tracing() or any(xp.is_traced(a) for a in arrays)


@functools.lru_cache(maxsize=32)
def _bias_program(
    backend: str,
    q_len: int,
    k_len: int,
    bidirectional: bool,
    max_distance: int,
    arithmetic: Arithmetic,
    scalar_offset: bool,
) -> Any:
    def run(table: Any, offset: Any) -> Any:
        return t5_relative_bias(
            q_len,
            k_len,
            table,
            offset=offset,
            bidirectional=bidirectional,
            max_distance=max_distance,
            arithmetic=arithmetic,
            backend=backend,
        )

    return get_namespace(backend).jit(run)


def _length(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= 1. Received: {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1. Received: {value}")
    return int(value)
