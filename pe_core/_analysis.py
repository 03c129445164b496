"""The engine of :mod:`pe_core.analysis`: similarity matrices, the distance-only sums of
the sinusoidal code, and the measurements of a resolution report.

The public module validates its arguments, chooses the encodings (through the public
:func:`~pe_core.encode` and :mod:`pe_core.codes`) and hands them here; the sinusoidal
sums encode their half-angle spec with the 1-D engine directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core._kernel.features import disassemble
from pe_core._schedule import omegas
from pe_core._sinusoidal import encode_1d
from pe_core.spec import Spec
from pe_core_backends import Namespace, backend_of, get_namespace

#: Brute-force blocks hold about this many pair values at a time.
BLOCK_VALUES = 1 << 22


def work_dtype(xp: Namespace, dtype: Any) -> str:
    """float64 where the backend has it now, else float32; or the caller's choice."""
    if dtype is not None:
        name = xp.dtype_name(dtype)
        if name not in ("float32", "float64"):
            raise ValueError(f"dtype must be float32 or float64. Received: {dtype!r}")
        return name
    return "float64" if "float64" in xp.float_dtypes and xp.supports("float64") else "float32"


# -- array helpers written against the small namespace ------------------------------


def _transpose(xp: Namespace, x: Any) -> Any:
    """``x.T`` of a 2-D array, built from slices (the namespace has no transpose)."""
    rows, cols = xp.shape(x)
    if rows == 0 or cols == 0:
        return xp.reshape(x, (cols, rows))
    if cols <= rows:
        return xp.stack([x[:, j] for j in range(cols)], axis=0)
    return xp.stack([x[i] for i in range(rows)], axis=1)


def _ones_column(xp: Namespace, n: int, like: Any) -> Any:
    return xp.zeros((n, 1), like.dtype, like=like) + 1


def _row_sums(xp: Namespace, x: Any) -> Any:
    """Sum over the last axis of a 2-D array, as a matrix product with ones."""
    rows, cols = xp.shape(x)
    if cols == 0:
        return xp.zeros((rows,), x.dtype, like=x)
    return xp.reshape(x @ _ones_column(xp, cols, x), (rows,))


def host(x: Any) -> np.ndarray:
    """A float64 NumPy copy of an array from any backend."""
    name = backend_of(x)
    values = get_namespace(name).to_numpy(x) if name is not None else np.asarray(x)
    return np.asarray(values, dtype=np.float64)


# -- similarity matrices --------------------------------------------------------------


def similarity(xp: Namespace, table: Any, metric: str, working: str) -> Any:
    """The ``(n, n)`` matrix of ``metric`` between the rows of ``table`` (2-D, ``working``)."""
    if metric == "euclidean":
        return _euclidean(xp, table)
    gram = table @ _transpose(xp, table)
    if metric == "dot":
        return gram
    norms = xp.reshape(_row_sums(xp, table * table), (xp.shape(table)[0], 1)) ** 0.5
    denominator = norms @ _transpose(xp, norms)
    # A zero row has zero dot products: nudging the denominator off zero gives 0 there
    # and changes every other entry by a relative 1e-308 (1e-38 in float32).
    return gram / (denominator + float(np.finfo(np.dtype(working)).tiny))


def _euclidean(xp: Namespace, table: Any) -> Any:
    n, d = xp.shape(table)
    if n == 0:
        return xp.zeros((0, 0), table.dtype, like=table)
    ones = _ones_column(xp, max(d, 1), table)
    rows_per_block = max(1, BLOCK_VALUES // max(n * d, 1))
    blocks = []
    for start in range(0, n, rows_per_block):
        stop = min(n, start + rows_per_block)
        diff = table[start:stop, None, :] - table[None, :, :]
        flat = xp.reshape(diff * diff, ((stop - start) * n, d))
        squared = flat @ ones if d else xp.zeros(((stop - start) * n, 1), table.dtype, like=table)
        blocks.append(xp.reshape(squared, (stop - start, n)) ** 0.5)
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


# -- the k-only path ------------------------------------------------------------------


def squared_distance_by_k(xp: Namespace, d: int, spec: Spec, count: int, working: str) -> Any:
    """``|PE(p+k) - PE(p)|^2 = 4 sum_i sin^2(k w_i / 2)`` for ``k = 0 .. count-1``.

    The sines come from the spec with every frequency halved, no offset, interleaved
    (the cheapest layout): its sin slots at integer ``k`` are ``sin(k w_i / 2)``, and
    runs of integers take the fast table path of :mod:`pe_core._kernel.tables`."""
    n_pairs = d // 2
    if n_pairs == 0:  # d = 1, zero-padded: every encoding is the zero vector
        return xp.asarray(np.zeros(count), dtype=xp.dtype(working))
    half = Spec(frequencies=tuple(w / 2.0 for w in omegas(d, spec)), odd_d=spec.odd_d)
    rows = max(256, min(8192, (1 << 19) // d))  # blocks that stay in cache
    sums = []
    for start in range(0, count, rows):
        k = np.arange(start, min(count, start + rows))
        table = encode_1d(k, d, half, xp.name, working)
        sines, _ = disassemble(xp, table, "interleaved", n_pairs)
        sums.append(_row_sums(xp, sines * sines))
    return 4 * (sums[0] if len(sums) == 1 else xp.concat(sums, axis=0))


def by_distance(squared: Any, d: int, metric: str) -> Any:
    """``metric`` at each distance ``k`` from the squared distances of
    :func:`squared_distance_by_k`."""
    n_pairs = d // 2
    if metric == "euclidean":
        return squared**0.5
    if metric == "dot":
        return n_pairs - squared / 2
    if n_pairs == 0:  # every encoding is the zero vector
        return squared * 0
    return 1 - squared / (2 * n_pairs)


# -- resolution reports: the measured fields of a ResolutionReport --------------------


def _measures(
    closest: tuple[float, tuple[int, int]], far: tuple[float, tuple[int, int]] | None, length: int
) -> dict[str, Any]:
    return {
        "min_distance": closest[0],
        "min_distance_pair": closest[1],
        "max_far_cosine": None if far is None else far[0],
        "max_far_cosine_pair": None if far is None else far[1],
        "distinguishable_length": length,
    }


def sinusoidal_measures(
    d: int, spec: Spec, max_len: int, min_separation: int, tolerance: float, xp: Namespace
) -> dict[str, Any]:
    """The sinusoidal code's, from the distance-only sums (pairs ``(0, k)``) on ``xp``."""
    squared = squared_distance_by_k(xp, d, spec, max_len, work_dtype(xp, None))
    squared = xp.to_numpy(squared).astype(np.float64)
    distance = np.sqrt(squared)
    k_min = 1 + int(np.argmin(distance[1:]))
    far = None
    if min_separation < max_len:
        cosine = by_distance(squared[min_separation:], d, "cosine")
        k_far = min_separation + int(np.argmax(cosine))
        far = float(cosine[k_far - min_separation]), (0, k_far)
    close = np.flatnonzero(distance[1:] < tolerance)
    length = int(close[0]) + 1 if close.size else max_len
    return _measures((float(distance[k_min]), (0, k_min)), far, length)


def pairwise_measures(table: np.ndarray, min_separation: int, tolerance: float) -> dict[str, Any]:
    """Brute force over every pair ``i < j`` of rows, in blocks of rows (float64).

    The closest pair, the most cosine-similar pair with ``j - i >= min_separation``
    (or None), and the smallest ``j`` with some ``i < j`` closer than ``tolerance``
    (``len(table)`` when there is none).
    """
    n = len(table)
    squares = np.einsum("ij,ij->i", table, table)
    inverse_norms = np.zeros(n)
    np.divide(1.0, np.sqrt(squares), out=inverse_norms, where=squares > 0)  # 0 for zero rows
    best_distance, best_pair = math.inf, (0, 1)
    best_cosine, cosine_pair = -math.inf, None
    first_close = n
    rows_per_block = max(1, BLOCK_VALUES // n)
    for start in range(0, n - 1, rows_per_block):
        stop = min(n - 1, start + rows_per_block)
        # only the columns j > i matter: j from start + 1 on, and a triangle below that
        lead = start + 1
        separation = np.arange(lead, n)[None, :] - np.arange(start, stop)[:, None]
        gram = table[start:stop] @ table[lead:].T
        squared = squares[start:stop, None] + squares[None, lead:] - 2 * gram
        np.maximum(squared, 0.0, out=squared)
        squared[separation < 1] = np.inf
        i, j = np.unravel_index(np.argmin(squared), squared.shape)
        if math.sqrt(squared[i, j]) < best_distance:
            best_distance, best_pair = math.sqrt(squared[i, j]), (start + int(i), lead + int(j))
        close_columns = np.flatnonzero((squared < tolerance**2).any(axis=0))
        if close_columns.size:
            first_close = min(first_close, lead + int(close_columns[0]))
        if min_separation < n:
            cosine = gram
            cosine *= inverse_norms[start:stop, None]
            cosine *= inverse_norms[None, lead:]
            cosine[separation < min_separation] = -np.inf
            i, j = np.unravel_index(np.argmax(cosine), cosine.shape)
            if cosine[i, j] > best_cosine:
                best_cosine, cosine_pair = float(cosine[i, j]), (start + int(i), lead + int(j))
    far = None if cosine_pair is None else (best_cosine, cosine_pair)
    return _measures((best_distance, best_pair), far, first_close)


def scalar_measures(
    values: Callable[[int], np.ndarray],
    max_len: int,
    min_separation: int,
    tolerance: float,
    working: str,
) -> dict[str, Any]:
    """One-number codes that change with the sequence length: ``values(n)`` is the
    ``n`` encodings of a sequence of ``n`` tokens, in ``working``."""

    def closest(v: np.ndarray) -> tuple[float, tuple[int, int]]:
        order = np.argsort(v, kind="stable")
        gaps = np.diff(v[order])
        at = int(np.argmin(gaps))
        p, q = sorted((int(order[at]), int(order[at + 1])))
        return float(gaps[at]), (p, q)

    v = values(max_len)
    nearest = closest(v)
    far = scalar_max_cosine(v, min_separation) if min_separation < max_len else None
    # The code changes with the sequence length: find the longest sequence whose
    # neighbours stay `tolerance` apart (the closest gap shrinks as the length grows).
    # The values, in [0, 1], sit on the grid 1/(n-1) up to rounding: a gap of exactly
    # `tolerance` counts as one (a slack of 4 ulps of 1 in the working precision).
    threshold = tolerance - 4 * float(np.finfo(np.dtype(working)).eps)
    low, high = 1, max_len  # a sequence of `low` tokens is distinguishable
    if nearest[0] >= threshold:
        low = max_len
    while low < high:
        middle = (low + high + 1) // 2
        if middle < 2 or closest(values(middle))[0] >= threshold:
            low = middle
        else:
            high = middle - 1
    return _measures(nearest, far, low)


def scalar_max_cosine(v: np.ndarray, min_separation: int) -> tuple[float, tuple[int, int]]:
    """The largest cosine over pairs ``i < j`` with ``j - i >= min_separation`` (which
    must be ``< len(v)``) of one-number encodings: the product of the signs, 0 with a
    zero."""
    n = len(v)
    sign = np.sign(v)
    for value in (1.0, -1.0):  # cosine 1: two nonzero numbers of one sign
        same = np.flatnonzero(sign == value)
        if same.size and same[-1] - same[0] >= min_separation:
            first = int(same[0])
            return 1.0, (first, int(same[np.searchsorted(same, first + min_separation)]))
    for z in np.flatnonzero(sign == 0):  # cosine 0: a zero and anything far enough
        if z >= min_separation:
            return 0.0, (0, int(z))
        if n - 1 - z >= min_separation:
            return 0.0, (int(z), n - 1)
    return -1.0, (0, n - 1)
