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

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from pe_core import _analysis
from pe_core._kernel.inputs import check_request_size, choose_backend, working_dtype
from pe_core._schedule import check_d
from pe_core.codes import binary_encode, normalized_positions
from pe_core.encoding import encode
from pe_core.nd import _check_scale
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
from pe_core.validation import choice, is_integer, known_size, positive_int
from pe_core_backends import backend_of, get_namespace

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

# -- validation ---------------------------------------------------------------------


def _check_metric(metric: object) -> Metric:
    return cast("Metric", choice(metric, "metric", METRICS))


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
    if is_integer(shape[0]):  # the (n, n) matrix and as much again of temporaries
        n_pairs = int(shape[0]) ** 2
        check_request_size(
            n_pairs, working, what="similarity_matrix", extra_bytes=16 * n_pairs, like=encodings
        )
    if name != working:
        encodings = xp.astype(encodings, xp.dtype(working))
    return _analysis.similarity(xp, encodings, metric, working)


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
    working = _analysis.work_dtype(xp, dtype)
    n = known_size(positions)
    if n is not None:  # the (n, n) similarities, the (n, d) encodings and temporaries
        on_host = not xp.on_accelerator(positions)
        extra = 16 * n * n + 8 * n * d if on_host and is_integer(d) else 0
        check_request_size(
            n * n, working, what="similarity", extra_bytes=extra, host_output=on_host
        )
    table = encode(cast(Any, positions), d, spec=spec, backend=xp.name, dtype=working)
    shape = xp.shape(table)
    if len(shape) != 2:
        raise ValueError(
            f"positions must be one-dimensional. Received shape: {shape[:-1]} "
            f"(encodings of shape {shape})"
        )
    return _analysis.similarity(xp, table, metric, working)


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
    working = _analysis.work_dtype(xp, dtype)
    check_request_size(  # the result, and its blocks before they are joined
        max_distance + 1, working, what="similarity_by_distance", extra_bytes=8 * max_distance
    )
    squared = _analysis.squared_distance_by_k(xp, d, spec, max_distance + 1, working)
    return _analysis.by_distance(squared, d, metric)


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
    choice(code, "code", CODES)
    max_len = positive_int(max_len, "max_len", minimum=2)
    min_separation = positive_int(min_separation, "min_separation")
    tolerance = _check_scale("tolerance", tolerance)
    if code != "sinusoidal" and spec is not None:
        raise ValueError(
            f"spec applies to the sinusoidal code only. Received: code={code!r}, spec={spec!r}"
        )
    args = (max_len, min_separation, tolerance)
    # a measure per distance (sinusoidal), a value per position (normalized), a code
    # per position (binary): the largest of them and a few float64 temporaries each
    check_request_size(max_len, "float64", what="resolution_report", extra_bytes=32 * max_len)
    resolved, xp = None, get_namespace(backend or "numpy")
    if code == "sinusoidal":
        resolved = resolve_spec(spec)
        d = check_d(d, resolved)
        found = _analysis.sinusoidal_measures(d, resolved, *args, xp)
    elif code == "binary":
        d = positive_int(d, "d")
        if d < 63 and max_len > 2**d:
            raise ValueError(
                f"max_len must be <= 2**d = {2**d}: a {d}-bit binary code has no code for "
                f"position {2**d} and beyond. Received: max_len={max_len}. Use a larger d."
            )
        table = _analysis.host(binary_encode(xp.asarray(np.arange(max_len)), d))
        found = _analysis.pairwise_measures(table.reshape(max_len, -1), min_separation, tolerance)
    else:
        d = 1
        working = _analysis.work_dtype(xp, None)

        def values(length: int) -> np.ndarray:
            table = normalized_positions(length, backend=xp.name, dtype=working)
            return _analysis.host(table).reshape(length)

        found = _analysis.scalar_measures(values, *args, working)
    return ResolutionReport(code, d, resolved, max_len, min_separation, tolerance, **found)
