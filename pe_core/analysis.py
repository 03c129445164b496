"""Measuring what an encoding can tell apart: similarity matrices and resolution reports.

* :func:`similarity` and :func:`similarity_matrix`: the position x position matrix of
  cosine similarities, dot products or Euclidean distances (brute force, any encoding).
* :func:`similarity_by_distance`: the same as a function of the distance ``k`` alone.
  For the sinusoidal code each pair of features contributes

      sin(p w) sin((p+k) w) + cos(p w) cos((p+k) w) = cos(k w)

  so ``PE(p) . PE(p+k) = sum_i cos(k w_i)``, every ``|PE(p)|^2 = d/2`` (``d // 2`` pairs),
  and the cosine similarity is ``sum_i cos(k w_i) / (d/2)``. The squared distance is
  ``|PE(p+k) - PE(p)|^2 = sum_i (2 - 2 cos(k w_i)) = 4 sum_i sin^2(k w_i / 2)``, which is
  how it is computed here: a sum of squares, with no cancellation when ``k w_i`` is
  near a multiple of ``2 pi`` (a near-collision), and from the exact angle kernel.
* :func:`resolution_report`: the closest pair of positions below ``max_len``, the
  most similar pair at least ``min_separation`` apart (the long-distance
  near-collisions), and the length up to which every encoding stays distinguishable,
  for the sinusoidal code and, for comparison, the binary and normalized codes of
  :mod:`pe_core.codes`.

Matrices are computed on the backend of the positions (or ``backend=``), in float64
where the backend has it (float32 on JAX without x64). A report's scalars are reduced
on the host from arrays computed on that backend.

>>> from pe_core.analysis import resolution_report
>>> r = resolution_report(8, max_len=100_000, min_separation=1000)
>>> r.min_distance_pair, round(r.min_distance, 4)  # 69115 apart, yet nearly the same vector
((0, 69115), 0.0386)
>>> round(r.max_far_cosine, 4)  # all four cos(69115 w_i) are close to 1
0.9998
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from pe_core._kernel.features import disassemble
from pe_core._kernel.inputs import choose_backend, working_dtype
from pe_core._schedule import check_d, omegas
from pe_core.codes import binary_encode, normalized_positions
from pe_core.encoding import encode
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import (
    ArrayT,
    BackendArrayT,
    BackendLike,
    DTypeLike,
    HostData,
    Metric,
    PositionCode,
    PresetLike,
)
from pe_core.validation import positive_int
from pe_core_backends import Namespace, backend_of, get_namespace

__all__ = [
    "CODES",
    "METRICS",
    "ResolutionReport",
    "resolution_report",
    "similarity",
    "similarity_by_distance",
    "similarity_matrix",
]

#: The metrics the similarity functions accept (:data:`pe_core.typing.Metric`).
METRICS: tuple[Metric, ...] = ("cosine", "dot", "euclidean")

#: The position codes :func:`resolution_report` measures
#: (:data:`pe_core.typing.PositionCode`).
CODES: tuple[PositionCode, ...] = ("sinusoidal", "binary", "normalized")

#: Brute-force blocks hold about this many pair values at a time.
_BLOCK_VALUES = 1 << 22


# -- validation ---------------------------------------------------------------------


def _check_metric(metric: object) -> Metric:
    if metric not in METRICS:
        raise ValueError(f"Unknown metric {metric!r}. Expected one of: {', '.join(METRICS)}.")
    return cast("Metric", str(metric))


def _check_int(name: str, value: object, minimum: int) -> int:
    """:func:`~pe_core.validation.positive_int`, the name first (:mod:`pe_core.plots`)."""
    return positive_int(value, name, minimum=minimum)


def _check_tolerance(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and float(value) > 0)
    ):
        raise ValueError(f"tolerance must be a finite number > 0. Received: {value!r}")
    return float(value)


def _work_dtype(xp: Namespace, dtype: Any) -> str:
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


def _host(x: Any) -> np.ndarray:
    """A float64 NumPy copy of an array from any backend."""
    name = backend_of(x)
    values = get_namespace(name).to_numpy(x) if name is not None else np.asarray(x)
    return np.asarray(values, dtype=np.float64)


def _tiny(dtype_name: str) -> float:
    return float(np.finfo(np.dtype(dtype_name)).tiny)


# -- similarity matrices --------------------------------------------------------------


def similarity_matrix(encodings: ArrayT | HostData, *, metric: Metric = "cosine") -> ArrayT:
    """The ``(n, n)`` similarity matrix of ``n`` encodings (rows), by brute force.

    Parameters
    ----------
    encodings : array
        Shape ``(n, d)``, from any backend; floating (integer codes are converted).
    metric : {"cosine", "dot", "euclidean"}
        Cosine similarity (a zero vector has cosine 0 with everything), dot product,
        or Euclidean distance (computed from differences, not from the dot products,
        so small distances keep their digits).

    Returns
    -------
    array
        Same backend as ``encodings``; float64 for float64 input, else float32.

    Examples
    --------
    >>> import numpy as np
    >>> similarity_matrix(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])).round(3).tolist()
    [[1.0, 0.707, 0.0], [0.707, 1.0, 0.0], [0.0, 0.0, 0.0]]
    >>> similarity_matrix(np.array([[0.0, 3.0], [4.0, 0.0]]), metric="euclidean").tolist()
    [[0.0, 5.0], [5.0, 0.0]]
    """
    metric = _check_metric(metric)
    source = backend_of(encodings)
    if source is None:
        encodings, source = np.asarray(encodings), "numpy"  # type: ignore[assignment]
    xp = get_namespace(source)
    shape = xp.shape(encodings)
    if len(shape) != 2:
        raise ValueError(f"encodings must have shape (n, d). Received shape: {shape}")
    name = xp.dtype_of(encodings)
    working = working_dtype(name)
    if name != working:
        encodings = xp.astype(encodings, xp.dtype(working))
    return _similarity(xp, encodings, metric, working)


def _similarity(xp: Namespace, table: Any, metric: str, working: str) -> Any:
    if metric == "euclidean":
        return _euclidean(xp, table)
    n = xp.shape(table)[0]
    gram = table @ _transpose(xp, table)
    if metric == "dot":
        return gram
    norms = xp.reshape(_row_sums(xp, table * table), (n, 1)) ** 0.5
    denominator = norms @ _transpose(xp, norms)
    # A zero row has zero dot products: nudging the denominator off zero gives 0 there
    # and changes every other entry by a relative 1e-308 (1e-38 in float32).
    return gram / (denominator + _tiny(working))


def _euclidean(xp: Namespace, table: Any) -> Any:
    n, d = xp.shape(table)
    if n == 0:
        return xp.zeros((0, 0), table.dtype, like=table)
    ones = _ones_column(xp, max(d, 1), table)
    rows_per_block = max(1, _BLOCK_VALUES // max(n * d, 1))
    blocks = []
    for start in range(0, n, rows_per_block):
        stop = min(n, start + rows_per_block)
        diff = table[start:stop, None, :] - table[None, :, :]
        flat = xp.reshape(diff * diff, ((stop - start) * n, d))
        squared = flat @ ones if d else xp.zeros(((stop - start) * n, 1), table.dtype, like=table)
        blocks.append(xp.reshape(squared, (stop - start, n)) ** 0.5)
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def similarity(
    positions: BackendArrayT | HostData,
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    metric: Metric = "cosine",
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """The position x position similarity matrix of the sinusoidal encoding.

    Parameters
    ----------
    positions : sequence, range or 1-D array
        ``n`` positions, from any backend.
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.
    metric : {"cosine", "dot", "euclidean"}
        See :func:`similarity_matrix`.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; ``None`` follows ``positions`` (NumPy for Python values).
    dtype : {"float64", "float32"}, optional
        float64 by default where the backend has it (float32 on JAX without x64).

    Returns
    -------
    array
        Shape ``(n, n)`` on the chosen backend. For the sinusoidal code entry
        ``(a, b)`` depends on ``positions[b] - positions[a]`` alone
        (:func:`similarity_by_distance`).

    Examples
    --------
    >>> S = similarity(range(4), 8)
    >>> S.shape, S.dtype
    ((4, 4), dtype('float64'))
    >>> bool(abs(S[0, 2] - S[1, 3]) < 1e-12)  # depends on the distance alone
    True
    >>> round(float(similarity([0, 5], 64, metric="dot")[0, 0]), 6)  # |PE(p)|^2 = d/2
    32.0
    """
    metric = _check_metric(metric)
    xp, _ = choose_backend(positions, backend)
    working = _work_dtype(xp, dtype)
    table = encode(cast(Any, positions), d, spec=spec, backend=xp.name, dtype=working)
    shape = xp.shape(table)
    if len(shape) != 2:
        raise ValueError(
            f"positions must be one-dimensional. Received shape: {shape[:-1]} "
            f"(encodings of shape {shape})"
        )
    return _similarity(xp, table, metric, working)


# -- the k-only path ------------------------------------------------------------------


def _half_angle_spec(d: int, spec: Spec) -> Spec:
    """The spec with every frequency halved, no offset, interleaved (the cheapest
    layout): its sin slots at integer ``k`` are ``sin(k w_i / 2)``, and runs of
    integers take the fast table path of :mod:`pe_core._kernel.tables`."""
    half = tuple(w / 2.0 for w in omegas(d, spec))
    return Spec(frequencies=half, odd_d=spec.odd_d)


def _squared_distance_by_k(xp: Namespace, d: int, spec: Spec, count: int, working: str) -> Any:
    """``|PE(p+k) - PE(p)|^2 = 4 sum_i sin^2(k w_i / 2)`` for ``k = 0 .. count-1``."""
    n_pairs = d // 2
    if n_pairs == 0:  # d = 1, zero-padded: every encoding is the zero vector
        return xp.asarray(np.zeros(count), dtype=xp.dtype(working))
    half = _half_angle_spec(d, spec)
    rows = max(256, min(8192, (1 << 19) // d))  # blocks that stay in cache
    sums = []
    for start in range(0, count, rows):
        k = np.arange(start, min(count, start + rows))
        table = encode(k, d, spec=half, backend=xp.name, dtype=working)
        sines, _ = disassemble(xp, table, "interleaved", n_pairs)
        sums.append(_row_sums(xp, sines * sines))
    total = sums[0] if len(sums) == 1 else xp.concat(sums, axis=0)
    return 4 * total


def similarity_by_distance(
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    max_distance: int,
    metric: Metric = "cosine",
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> Any:  # sizes alone: the backend chosen when the code runs decides
    """Similarity of ``PE(p)`` and ``PE(p + k)`` for ``k = 0 .. max_distance``.

    It does not depend on ``p`` (nor on the spec's offset), so one value per ``k``
    describes every pair:

    * ``"dot"``: ``sum_i cos(k w_i)``;
    * ``"cosine"``: ``sum_i cos(k w_i) / (d/2)`` (``d // 2`` pairs; a zero-padded
      feature adds nothing);
    * ``"euclidean"``: ``2 * sqrt(sum_i sin^2(k w_i / 2))``.

    All three are computed from the last (the sines of the half angles, a sum of
    squares without cancellation), through the exact angle kernel and its fast table
    path for consecutive integers: about ``max_distance * d / 2`` sines' worth of
    work, no ``(n, n)`` matrix.

    Parameters
    ----------
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name; ``"vaswani"`` by default.
    max_distance : int
        The largest ``k`` (>= 0).
    metric : {"cosine", "dot", "euclidean"}
        What to return.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        NumPy by default.
    dtype : {"float64", "float32"}, optional
        float64 by default where the backend has it.

    Returns
    -------
    array
        Shape ``(max_distance + 1,)``; entry ``k`` is the similarity at distance ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> s = similarity_by_distance(64, max_distance=3)
    >>> [round(float(v), 4) for v in s]
    [1.0, 0.9662, 0.8845, 0.7996]
    >>> w = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    >>> bool(np.allclose(s, [np.cos(k * w).sum() / 32 for k in range(4)]))
    True
    """
    metric = _check_metric(metric)
    max_distance = positive_int(max_distance, "max_distance", minimum=0)
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    xp = get_namespace(backend or "numpy")
    working = _work_dtype(xp, dtype)
    squared = _squared_distance_by_k(xp, d, spec, max_distance + 1, working)
    n_pairs = d // 2
    if metric == "euclidean":
        return squared**0.5
    if metric == "dot":
        return n_pairs - squared / 2
    if n_pairs == 0:  # every encoding is the zero vector
        return squared * 0
    return 1 - squared / (2 * n_pairs)


# -- resolution reports ---------------------------------------------------------------


@dataclass(frozen=True)
class ResolutionReport:
    """How well an encoding tells positions ``0 .. max_len - 1`` apart.

    Attributes
    ----------
    code : {"sinusoidal", "binary", "normalized"}
        The position code measured.
    d : int
        Number of features (1 for the normalized code).
    spec : Spec or None
        The sinusoidal spec (``None`` for the other codes).
    max_len : int
        Positions ``0 .. max_len - 1`` were compared (for the normalized code, a
        sequence of ``max_len`` tokens).
    min_separation : int
        Pairs at least this far apart count as "far" for :attr:`max_far_cosine`.
    tolerance : float
        Two encodings closer than this (Euclidean) count as indistinguishable.
    min_distance : float
        The smallest Euclidean distance between the encodings of two different
        positions below ``max_len``.
    min_distance_pair : tuple of int
        A pair ``(p, q)``, ``p < q``, at that distance. For the sinusoidal code the
        distance depends on ``q - p`` alone, and the pair is given as ``(0, q - p)``.
    max_far_cosine : float or None
        The largest cosine similarity between two positions at least
        ``min_separation`` apart (``None`` when ``min_separation >= max_len``).
    max_far_cosine_pair : tuple of int or None
        A pair at that similarity (``(0, k)`` for the sinusoidal code).
    distinguishable_length : int
        The largest ``n <= max_len`` such that the encodings of positions ``0 .. n-1``
        (of a sequence of ``n`` tokens) are pairwise at least ``tolerance`` apart.
        Equal to ``max_len`` when every pair measured is distinguishable: the true
        length may be longer.
    """

    code: str
    d: int
    spec: Spec | None
    max_len: int
    min_separation: int
    tolerance: float
    min_distance: float
    min_distance_pair: tuple[int, int]
    max_far_cosine: float | None
    max_far_cosine_pair: tuple[int, int] | None
    distinguishable_length: int

    def summary(self) -> str:
        """One line of text with every measurement.

        >>> print(resolution_report(16, max_len=100, min_separation=10).summary())
        sinusoidal (vaswani) d=16, positions 0..99: closest pair (0, 1) at distance 1.0147; most similar pair >= 10 apart (0, 19) at cosine 0.8041; all distinguishable (tolerance 0.001) up to length 100
        """
        label = self.code if self.spec is None else f"{self.code} ({self.spec.name or 'custom'})"
        far = (
            "no pair that far apart"
            if self.max_far_cosine is None
            else f"{self.max_far_cosine_pair} at cosine {self.max_far_cosine:.4f}"
        )
        return (
            f"{label} d={self.d}, positions 0..{self.max_len - 1}: closest pair "
            f"{self.min_distance_pair} at distance {self.min_distance:.5g}; most similar "
            f"pair >= {self.min_separation} apart {far}; all distinguishable (tolerance "
            f"{self.tolerance:g}) up to length {self.distinguishable_length}"
        )


def resolution_report(
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    max_len: int,
    min_separation: int = 100,
    tolerance: float = 1e-3,
    code: PositionCode = "sinusoidal",
    backend: BackendLike | None = None,
) -> ResolutionReport:
    """Measure how well a position code tells positions ``0 .. max_len - 1`` apart.

    Parameters
    ----------
    d : int
        Number of features (bits for ``code="binary"``; ignored by ``"normalized"``,
        whose encoding is one number).
    spec : Spec or str, optional
        For the sinusoidal code: a spec or preset name, ``"vaswani"`` by default.
        Must be ``None`` for the other codes.
    max_len : int
        Number of positions compared (>= 2).
    min_separation : int
        :attr:`~ResolutionReport.max_far_cosine` looks at pairs at least this far
        apart (>= 1).
    tolerance : float
        Encodings closer than this (Euclidean distance) count as indistinguishable.
        1e-3 is about 100 float16 ulps at 1 and 8000 float32 ulps.
    code : {"sinusoidal", "binary", "normalized"}
        The sinusoidal encoding; the bits of the position
        (:func:`pe_core.codes.binary_encode`, ``d`` bits, so ``max_len <= 2**d``); or
        ``pos / (max_len - 1)`` (:func:`pe_core.codes.normalized_positions`).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where the encodings are computed (NumPy by default).

    Returns
    -------
    ResolutionReport

    Notes
    -----
    The sinusoidal report uses the distance-only dependence
    (:func:`similarity_by_distance`): one value per distance ``k < max_len``, so
    ``max_len = 10**5`` at ``d = 512`` costs a few hundredths of a second instead of
    ``10**10`` pairs. The binary code is compared pair by pair (``O(max_len**2 * d)``,
    seconds at ``max_len = 2**14``); the normalized code, a single sorted number, in
    ``O(max_len log max_len)``.

    Examples
    --------
    >>> r = resolution_report(16, max_len=100_000)
    >>> r.min_distance_pair, round(r.min_distance, 4)  # neighbours are the closest pair
    ((0, 1), 1.0147)
    >>> resolution_report(8, max_len=256, min_separation=64, code="binary").max_far_cosine_pair
    (127, 255)
    >>> resolution_report(1, max_len=2000, code="normalized").distinguishable_length
    1001
    """
    if code not in CODES:
        raise ValueError(f"Unknown code {code!r}. Expected one of: {', '.join(CODES)}.")
    max_len = positive_int(max_len, "max_len", minimum=2)
    min_separation = positive_int(min_separation, "min_separation")
    tolerance = _check_tolerance(tolerance)
    if code != "sinusoidal" and spec is not None:
        raise ValueError(
            f"spec applies to the sinusoidal code only. Received: code={code!r}, spec={spec!r}"
        )
    args = (max_len, min_separation, tolerance)
    if code == "sinusoidal":
        resolved = resolve_spec(spec)
        return _sinusoidal_report(check_d(d, resolved), resolved, *args, backend)
    if code == "binary":
        return _binary_report(positive_int(d, "d"), *args, backend)
    return _normalized_report(*args, backend)


def _sinusoidal_report(
    d: int, spec: Spec, max_len: int, min_separation: int, tolerance: float, backend: str | None
) -> ResolutionReport:
    xp = get_namespace(backend or "numpy")
    squared = _squared_distance_by_k(xp, d, spec, max_len, _work_dtype(xp, None))
    squared = xp.to_numpy(squared).astype(np.float64)
    distance = np.sqrt(squared)
    k_min = 1 + int(np.argmin(distance[1:]))
    n_pairs = d // 2
    far_cosine, far_pair = None, None
    if min_separation < max_len:
        cosine = (
            1 - squared[min_separation:] / (2 * n_pairs)
            if n_pairs
            else 0 * squared[min_separation:]
        )
        k_far = min_separation + int(np.argmax(cosine))
        far_cosine, far_pair = float(cosine[k_far - min_separation]), (0, k_far)
    close = np.flatnonzero(distance[1:] < tolerance)
    return ResolutionReport(
        code="sinusoidal",
        d=d,
        spec=spec,
        max_len=max_len,
        min_separation=min_separation,
        tolerance=tolerance,
        min_distance=float(distance[k_min]),
        min_distance_pair=(0, k_min),
        max_far_cosine=far_cosine,
        max_far_cosine_pair=far_pair,
        distinguishable_length=int(close[0]) + 1 if close.size else max_len,
    )


def _binary_report(
    d: int, max_len: int, min_separation: int, tolerance: float, backend: str | None
) -> ResolutionReport:
    if d < 63 and max_len > 2**d:
        raise ValueError(
            f"max_len must be <= 2**d = {2**d}: a {d}-bit binary code has no code for "
            f"position {2**d} and beyond. Received: max_len={max_len}. Use a larger d."
        )
    xp = get_namespace(backend or "numpy")
    table = _host(binary_encode(xp.asarray(np.arange(max_len)), d)).reshape(max_len, -1)
    closest, far, first_close = _pairwise_extremes(table, min_separation, tolerance)
    return ResolutionReport(
        code="binary",
        d=d,
        spec=None,
        max_len=max_len,
        min_separation=min_separation,
        tolerance=tolerance,
        min_distance=closest[0],
        min_distance_pair=closest[1],
        max_far_cosine=None if far is None else far[0],
        max_far_cosine_pair=None if far is None else far[1],
        distinguishable_length=first_close,
    )


def _pairwise_extremes(
    table: np.ndarray, min_separation: int, tolerance: float
) -> tuple[tuple[float, tuple[int, int]], tuple[float, tuple[int, int]] | None, int]:
    """Brute force over every pair ``i < j`` of rows, in blocks of rows (float64).

    Returns the closest pair, the most cosine-similar pair with ``j - i >=
    min_separation`` (or None), and the smallest ``j`` with some ``i < j`` closer
    than ``tolerance`` (``len(table)`` when there is none).
    """
    n = len(table)
    squares = np.einsum("ij,ij->i", table, table)
    inverse_norms = np.zeros(n)
    np.divide(1.0, np.sqrt(squares), out=inverse_norms, where=squares > 0)  # 0 for zero rows
    best_distance, best_pair = math.inf, (0, 1)
    best_cosine, cosine_pair = -math.inf, None
    first_close = n
    rows_per_block = max(1, _BLOCK_VALUES // n)
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
    return (best_distance, best_pair), far, first_close


def _normalized_report(
    max_len: int, min_separation: int, tolerance: float, backend: str | None
) -> ResolutionReport:
    xp = get_namespace(backend or "numpy")
    working = _work_dtype(xp, None)

    def values(length: int) -> np.ndarray:
        table = normalized_positions(length, backend=xp.name, dtype=working)
        return _host(table).reshape(length)

    def closest(v: np.ndarray) -> tuple[float, tuple[int, int]]:
        order = np.argsort(v, kind="stable")
        gaps = np.diff(v[order])
        at = int(np.argmin(gaps))
        p, q = sorted((int(order[at]), int(order[at + 1])))
        return float(gaps[at]), (p, q)

    v = values(max_len)
    min_distance, min_pair = closest(v)
    far = _scalar_max_cosine(v, min_separation) if min_separation < max_len else None
    # The code changes with the sequence length: find the longest sequence whose
    # neighbours stay `tolerance` apart (the closest gap shrinks as the length grows).
    # The values, in [0, 1], sit on the grid 1/(n-1) up to rounding: a gap of exactly
    # `tolerance` counts as one (a slack of 4 ulps of 1 in the working precision).
    threshold = tolerance - 4 * float(np.finfo(np.dtype(working)).eps)
    low, high = 1, max_len  # a sequence of `low` tokens is distinguishable
    if min_distance >= threshold:
        low = max_len
    while low < high:
        middle = (low + high + 1) // 2
        if middle < 2 or closest(values(middle))[0] >= threshold:
            low = middle
        else:
            high = middle - 1
    return ResolutionReport(
        code="normalized",
        d=1,
        spec=None,
        max_len=max_len,
        min_separation=min_separation,
        tolerance=tolerance,
        min_distance=min_distance,
        min_distance_pair=min_pair,
        max_far_cosine=None if far is None else far[0],
        max_far_cosine_pair=None if far is None else far[1],
        distinguishable_length=low,
    )


def _scalar_max_cosine(v: np.ndarray, min_separation: int) -> tuple[float, tuple[int, int]]:
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
