"""The properties of rotary embeddings ``fn(x, positions)``, and of any computation
across backends (see :mod:`pe_core.testing.checks`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from pe_core.testing._base import (
    RopeFunction,
    _abs_error,
    _array_kind,
    _beyond,
    _fail,
    _index_text,
    _item,
    _library_and_dtype,
    _position_at,
    _shifted,
    _shifts,
    _to_numpy,
)
from pe_core.testing.references import reference_rope
from pe_core.typing import Array, ArrayLike, RopeLayout

__all__ = ["check_cross_backend_agreement", "check_rope_agreement", "check_rope_norm"]
__all__ += ["check_rope_relative_scores"]


def check_cross_backend_agreement(
    fn: Callable[[str], Array], backends: Sequence[str], *, atol: float = 0.0
) -> float:
    """``fn(backend)`` gives the same numbers on every backend, within ``atol``.

    ``fn(name)`` computes something on backend ``name`` (``"numpy"``, ``"jax"``,
    ``"torch"``, ``"tensorflow"``) and must return an array of that backend; every
    result must have the shape and dtype of the first backend's and be within ``atol``
    of it. ``atol=0`` asks for the same bits.

    Returns
    -------
    float
        The largest difference from the first backend's result.

    Examples
    --------
    >>> import pe_core
    >>> from pe_core_backends import installed_backends
    >>> check_cross_backend_agreement(
    ...     lambda b: pe_core.encode(range(100), 16, backend=b), installed_backends())
    0.0
    """
    names = list(backends)
    if not names:
        raise ValueError("check_cross_backend_agreement needs at least one backend.")
    prop, error = "cross-backend agreement", 0.0
    first: tuple[str, str, np.ndarray] | None = None  # backend, dtype, values
    for name in names:
        out = fn(name)
        library, dtype = _library_and_dtype(out)
        if library != name:
            summary = f"fn({name!r}) returned a {_array_kind(out)} array; expected a {name} array"
            _fail(prop, summary, math.inf, atol)
        values = _to_numpy(out)
        if first is None:
            first = (name, dtype, values)
            continue
        base_name, base_dtype, base = first
        if (dtype, values.shape) != (base_dtype, base.shape):
            summary = (
                f"fn({name!r}) returned {name} {dtype} of shape {values.shape}; "
                f"fn({base_name!r}) returned {base_name} {base_dtype} of shape {base.shape}"
            )
            _fail(prop, summary, math.inf, atol)
        largest, index = _beyond(_abs_error(values, base), atol)
        error = max(error, largest)
        if index is not None:
            summary = f"fn({name!r}) differs from fn({base_name!r}) by up to {largest:.3g}"
            worst = f"index {_index_text(index)}: {base_name} gives {_item(base[index])!r}, "
            worst += f"{name} gives {_item(values[index])!r}"
            _fail(prop, f"{summary} (atol {atol:g})", error, atol, worst)
    return error


def _call_rope(fn: RopeFunction, x: np.ndarray, positions: np.ndarray, prop: str) -> np.ndarray:
    out = _to_numpy(fn(x, positions))
    if out.shape != x.shape:
        summary = f"fn(x, positions) returned shape {out.shape}; expected x's shape {x.shape}"
        _fail(prop, summary, math.inf, 0.0)
    return out


def check_rope_agreement(
    fn: RopeFunction,
    x: ArrayLike,
    positions: ArrayLike,
    *,
    base: float = 10000.0,
    layout: RopeLayout = "half",
    rotary_dim: int | None = None,
    atol: float = 1e-5,
) -> float:
    """``fn(x, positions)`` equals the rotary embedding restated in float64, within ``atol``.

    The reference is :func:`~pe_core.testing.reference_rope` with the same ``base``,
    ``layout`` and ``rotary_dim``. ``atol`` is absolute: choose it for the size of
    ``x`` (values in ``[-1, 1]`` and float32 output: 1e-6).

    Returns
    -------
    float
        The largest absolute error.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> x = np.random.default_rng(0).uniform(-1, 1, (5, 8)).astype(np.float32)
    >>> rope = lambda x, p: pe_core.apply_rope(x, p, layout="interleaved")
    >>> error = check_rope_agreement(rope, x, [0, 1, 7, 10**6, 2**24], layout="interleaved")
    >>> check_rope_agreement(rope, x, [0, 1, 7, 10**6, 2**24])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope agreement' failed: fn(x, positions) differs from the float64 reference by up to ... (atol 1e-05)
    ...
    """
    x, positions = np.asarray(x), np.asarray(positions)
    expected = reference_rope(x, positions, base=base, layout=layout, rotary_dim=rotary_dim)
    got = _call_rope(fn, x, positions, "rope agreement")
    error, index = _beyond(_abs_error(got, expected), atol)
    if index is not None:
        worst = f"{_position_at(np.broadcast_to(positions, x.shape[:-1]), index[:-1])}, feature "
        worst += f"{index[-1]}: expected {_item(expected[index])!r}, got {_item(got[index])!r}"
        summary = f"fn(x, positions) differs from the float64 reference by up to {error:.3g}"
        summary += f" (atol {atol:g})"
        context = {"rope": f"base={base!r}, layout={layout!r}, rotary_dim={rotary_dim!r}"}
        _fail("rope agreement", summary, error, atol, worst, context, positions=positions)
    return error


def check_rope_relative_scores(
    fn: RopeFunction,
    queries: ArrayLike,
    keys: ArrayLike,
    query_positions: ArrayLike,
    key_positions: ArrayLike,
    shifts: ArrayLike,
    *,
    atol: float = 1e-5,
) -> float:
    """Attention scores depend on the offset only: moving both positions by ``t`` keeps them.

    For each row ``i``, the score ``<fn(q_i, m_i), fn(k_i, n_i)>`` must not change when
    ``m_i`` and ``n_i`` both move by each shift ``t``, within ``atol * |q_i| |k_i|``
    (RoPE rotates both vectors, so the score depends on ``m - n`` alone, whatever the
    frequencies, layout or scaling).

    Parameters
    ----------
    fn : callable
        ``fn(x, positions)`` (see :class:`RopeFunction`).
    queries, keys : array-like
        Shape ``(n, head_dim)``.
    query_positions, key_positions : array-like
        Shape ``(n,)`` (or scalars): where each query and key sits.
    shifts : int or sequence of int
        The moves ``t`` to try.
    atol : float
        Allowed change of a score, relative to ``|q_i| |k_i|``.

    Returns
    -------
    float
        The largest change of a score, divided by ``|q_i| |k_i|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 4, 16)).astype(np.float32)
    >>> m, n = np.array([0, 5, 100, 2**20]), np.array([3, 5, 0, 17])
    >>> rope = lambda x, p: pe_core.apply_rope(x, p)
    >>> _ = check_rope_relative_scores(rope, q, k, m, n, [1, -9, 65536])
    >>> additive = lambda x, p: x + pe_core.encode(p, 16)  # absolute, not relative
    >>> check_rope_relative_scores(additive, q, k, m, n, [1, -9, 65536])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope relative scores' failed: ...
    ...
    """
    q, k = np.asarray(queries), np.asarray(keys)
    if q.ndim != 2 or q.shape != k.shape:
        raise ValueError(
            f"queries and keys must have the same shape (n, head_dim). Received: {q.shape} "
            f"and {k.shape}"
        )
    m = np.broadcast_to(np.asarray(query_positions), q.shape[:1])
    n = np.broadcast_to(np.asarray(key_positions), q.shape[:1])
    ts = np.concatenate([[0], _shifts(shifts)]).astype(np.result_type(m, n, _shifts(shifts)))
    prop = "rope relative scores"
    count = ts.size
    rq = _call_rope(fn, np.concatenate([q] * count), _shifted(m, ts).reshape(-1), prop)
    rk = _call_rope(fn, np.concatenate([k] * count), _shifted(n, ts).reshape(-1), prop)
    scores = np.sum(rq * rk, axis=-1).reshape(count, -1)
    q_norm, k_norm = np.linalg.norm(np.stack([q, k]).astype(np.float64), axis=-1)
    scale = np.where(q_norm * k_norm > 0, q_norm * k_norm, 1.0)
    error, worst = _beyond(_abs_error(scores[1:], scores[:1]) / scale, atol)
    if worst is not None:
        t, i = worst
        shift = f"t={_item(ts[t + 1])!r}"
        summary = f"<fn(q, m + t), fn(k, n + t)> is {scores[t + 1, i]:.6g} but <fn(q, m), fn(k, "
        summary += f"n)> is {scores[0, i]:.6g} for m={_item(m[i])!r}, n={_item(n[i])!r}, {shift}: "
        summary += f"the score changed by {error:.3g} x |q||k| (atol {atol:g})"
        _fail(prop, summary, error, atol, f"row {i}, {shift}")
    return error


def check_rope_norm(
    fn: RopeFunction, x: ArrayLike, positions: ArrayLike, *, atol: float = 1e-5
) -> float:
    """Rotations keep lengths: ``|fn(x, p)_i| == |x_i|`` for every vector, within ``atol * |x_i|``.

    Holds for plain RoPE at any base, layout or partial ``rotary_dim``; scaling types
    with an attention factor (yarn, longrope) multiply every length by that factor.

    Returns
    -------
    float
        The largest ``| |fn(x, p)_i| - |x_i| | / |x_i|``.

    Examples
    --------
    >>> import numpy as np, pe_core
    >>> x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    >>> _ = check_rope_norm(lambda x, p: pe_core.apply_rope(x, p), x, [0, 3, 10**5, 2**24])
    >>> check_rope_norm(lambda x, p: 1.01 * x, x, [0, 3, 10**5, 2**24])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.testing.checks.PropertyFailure: property 'rope norm' failed: |fn(x, p)| is ... but |x| is ... at position ...: a rotation keeps lengths (relative change 0.01; atol 1e-05)
    ...
    """
    x, positions = np.asarray(x), np.asarray(positions)
    got = _call_rope(fn, x, positions, "rope norm")
    before = np.linalg.norm(x.astype(np.float64), axis=-1)
    after = np.linalg.norm(got, axis=-1)
    error, index = _beyond(_abs_error(after, before) / np.where(before > 0, before, 1.0), atol)
    if index is not None:
        where = _position_at(np.broadcast_to(positions, x.shape[:-1]), index)
        summary = f"|fn(x, p)| is {after[index]:.6g} but |x| is {before[index]:.6g} at {where}: "
        summary += f"a rotation keeps lengths (relative change {error:.3g}; atol {atol:g})"
        _fail("rope norm", summary, error, atol, where)
    return error
