"""T5's bucket kernel (integer comparisons only), its integer domain and its diagonals.

The bucket of a relative position is ``max_exact`` plus the number of thresholds
(:func:`pe_core._index.log_buckets.t5_thresholds`) its distance reaches. Relative
positions are int32 or int64 arrays with an optional *carry* (``rel + carry * 2**W``)
for uint64 values and differences that leave the signed range, so nothing wraps.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from pe_core._index.log_buckets import t5_thresholds_plain
from pe_core._kernel.compiled import compiled
from pe_core._kernel.inputs import _host_numpy, flat_items, python_ints
from pe_core.validation import int32_values
from pe_core_backends import backend_of


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
        if bidirectional:
            distance = xp.abs(rel)
        else:
            distance = xp.where(rel < 0, -rel, xp.zeros_like(rel))
        large = xp.zeros_like(distance) + max_exact
        for t in thresholds:
            if t <= info.max:
                large = large + xp.astype(distance >= t, dtype)
        bucket = xp.where(distance < max_exact, distance, large)
        if bidirectional:
            bucket = bucket + xp.astype(rel > 0, dtype) * n
        return bucket

    def compare(c: int, above: bool) -> Any:
        """``true rel >= c`` (``<= c`` unless ``above``): a bool array, or a Python bool
        where it is known. ``c = low + c_carry * 2**W`` with ``low`` in the signed range."""
        c_carry = (c - int(info.min)) // span
        low = c - c_carry * span
        if carry is None:
            beyond = c_carry < 0 if above else c_carry > 0
            return beyond or (c_carry == 0 and (rel >= low if above else rel <= low))
        same = rel >= low if above else rel <= low
        return xp.where(carry == c_carry, same, carry > c_carry if above else carry < c_carry)

    def as_array(value: Any) -> Any:
        return xp.zeros_like(rel) + int(value) if isinstance(value, (bool, int)) else value

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
    large = max_exact + count([compare(-t, False) for t in thresholds])
    small = compare(1 - max_exact, True)  # r > -max_exact
    if bidirectional:
        large = large + count([compare(t, True) for t in thresholds])
        small = both(small, compare(max_exact - 1, False))  # and r < max_exact
        value = xp.where(rel < 0, -rel, rel)  # |r| where r is small (no carry there)
    else:
        # max(-r, 0) where small (r > 0 may carry: its value is not read)
        value = select(compare(-1, False), -rel, 0)
    bucket = as_array(select(small, value, large))
    if bidirectional:
        bucket = bucket + as_array(count([compare(1, True)])) * n
    return bucket


def _carry_kernel(
    xp: Any, rel: Any, carry: Any, n: int, max_exact: int, found: tuple[int, ...], bidi: bool
) -> Any:
    return _kernel(xp, rel, n, max_exact, found, bidi, carry)


def buckets(
    xp: Any, rel: Any, carry: Any, n: int, max_exact: int, found: tuple[int, ...], bidi: bool
) -> Any:
    """:func:`_kernel`; eager JAX runs one compiled program, not one compilation per
    operation."""
    if xp.compile_eager_kernels and not xp.is_tracing() and not xp.is_traced(rel):
        if carry is None:
            return compiled(xp.name, _kernel, n, max_exact, found, bidi)(rel)
        return compiled(xp.name, _carry_kernel, n, max_exact, found, bidi)(rel, carry)
    return _kernel(xp, rel, n, max_exact, found, bidi, carry)


def thresholds(xp: Any, n: int, max_distance: int, arithmetic: str) -> tuple[int, ...]:
    """The thresholds, host work embedded as constants by tracing compilers."""
    return xp.host_constant(t5_thresholds_plain, n, max_distance, arithmetic)


# --------------------------------------------------------------------------- inputs


def _out_of_range(what: str, obj: Any) -> ValueError:
    return ValueError(
        f"{what} must be integers in [-2**63, 2**64) (int64 or uint64). Received: {obj!r}"
    )


def as_relative(obj: Any, xp: Any, source: str | None, what: str) -> tuple[Any, Any]:
    """``obj`` as a signed integer array of namespace ``xp`` (int64, int32 on JAX without
    x64) and its carry (see :func:`_kernel`): ``None``, or where unsigned values beyond
    the signed range wrapped, the array of 1s and 0s that restores them."""
    if source is None:
        if isinstance(obj, (bool, np.bool_)):
            raise TypeError(f"{what} must be integers. Received: {obj!r}")
        if isinstance(obj, numbers.Integral) and not -(2**63) <= int(obj) < 2**64:
            raise _out_of_range(what, obj)
        try:
            array = np.asarray(obj)
        except OverflowError as exc:
            raise _out_of_range(what, obj) from exc
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            items = flat_items(obj)
            if array.dtype.kind in "fO" and python_ints(items):
                raise ValueError(
                    f"{what} must be integers of one NumPy dtype, int64 or uint64: "
                    "in [-2**63, 2**63) or in [0, 2**64). Received Python ints from "
                    f"{min(items)} to {max(items)}"
                )
            raise TypeError(f"{what} must be integers. Received dtype: {array.dtype}")
        source, obj = "numpy", array
    if source != xp.name:
        obj = _host_numpy(obj, source, what)
        if obj.dtype.kind in "iu":
            obj = fit_int(obj, xp, what)
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


def fit_int(values: np.ndarray, xp: Any, what: str) -> np.ndarray:
    """Host integers for ``xp``: int64 (uint64 kept where values reach ``2**63``), or
    int32 where ``xp`` has no int64 (JAX without x64)."""
    if xp.supports("int64"):
        if values.dtype == np.uint64 and values.size and int(values.max()) >= 2**63:
            return values
        return values.astype(np.int64, copy=False)
    if values.dtype == np.uint32:
        return values  # held as it is; wrapped with a carry on the backend
    return int32_values(values, xp.name, what)


def fits_wide(value: int, xp: Any) -> bool:
    """Whether ``value`` is an int64 (int32 on JAX without x64)."""
    bits = 64 if xp.supports("int64") else 32
    return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


# --------------------------------------------------------------------------- diagonals

#: ``|offset|`` of an integer offset may be at most this (see ``t5_bucket_matrix``).
MAX_OFFSET = 2**64


def diagonal_buckets(
    xp: Any,
    q_len: int,
    k_len: int,
    offset: Any,
    offset_source: str | None,
    anchor: Any,
    config: tuple[int, int, int, str, bool],
) -> Any:
    """The buckets of the ``q + k - 1`` diagonals, ``(q + k - 1,)`` (``(batch, q + k -
    1)`` for per-example offsets), built where the result lives (beside ``anchor``).

    ``key - query`` is constant along diagonals, so the buckets are computed once per
    diagonal and expanded by ``xp.expand_diagonals`` (the diagonal of query ``i`` and
    key ``j`` is ``j - i + q - 1`` whatever the offset). ``config`` is ``(n, max_exact,
    max_distance, arithmetic, bidirectional)``.
    """
    n, max_exact, max_distance, arithmetic, bidirectional = config
    found = thresholds(xp, n, max_distance, arithmetic)
    wide = "int64" if xp.supports("int64") else "int32"
    diagonals = xp.arange(q_len + k_len - 1, xp.dtype(wide), like=anchor) - (q_len - 1)
    if isinstance(offset, numbers.Integral):
        reach = max(found, default=max_exact)
        relative, carry = _relative_for_int_offset(xp, diagonals, int(offset), q_len, k_len, reach)
    else:
        relative, carry = _relative_for_array_offset(xp, diagonals, offset, offset_source, wide)
    return _kernel(xp, relative, n, max_exact, found, bidirectional, carry)


def offset_and_source(offset: Any) -> tuple[Any, str | None]:
    """``(offset, its backend)``: a Python or NumPy integer as it is (backend ``None``),
    an array of its own backend, anything else as a NumPy array."""
    if isinstance(offset, bool):
        raise TypeError(f"offset must be an int or an integer array. Received: {offset!r}")
    if isinstance(offset, numbers.Integral):
        return offset, None
    source = backend_of(offset)
    return (np.asarray(offset), "numpy") if source is None else (offset, source)


def _relative_for_int_offset(
    xp: Any, diagonals: Any, offset: int, q_len: int, k_len: int, reach: int
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
    shift, shift_carry = as_relative(offset, xp, source, "offset")
    dtype = xp.dtype(wide)
    if xp.dtype_of(shift) != wide:  # (never with a carry: as_relative's carry is wide)
        shift = xp.astype(shift, dtype)
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
    wrapped = xp.where(
        shift < 0, xp.astype(relative < diagonals, dtype), -xp.astype(relative > diagonals, dtype)
    )
    carry = wrapped if shift_carry is None else wrapped - shift_carry
    return relative, carry


def bias(xp: Any, table: Any, q_len: int, k_len: int, offset: Any, *config: Any) -> Any:
    """T5's bias ``(1 or batch, heads, q, k)``: one small gather per diagonal, then one
    expansion (``config`` as for :func:`diagonal_buckets`)."""
    offset, offset_source = offset_and_source(offset)
    buckets = diagonal_buckets(xp, q_len, k_len, offset, offset_source, table, tuple(config))
    per_diagonal = xp.matrix_transpose(xp.take(table, buckets, axis=0))
    out = xp.expand_diagonals(per_diagonal, q_len, k_len, like=table)
    return out[None] if len(out.shape) == 3 else out


def bias_program(xp: Any, *static: Any) -> Any:
    """:func:`bias` compiled once per shape and configuration (``static`` is ``(q_len,
    k_len, *config)``); the table and the offset are its arguments, so decode steps
    reuse it."""
    return compiled(xp.name, _bias_kernel, *static)


def _bias_kernel(xp: Any, table: Any, offset: Any, q_len: int, k_len: int, *config: Any) -> Any:
    return bias(xp, table, q_len, k_len, offset, *config)
