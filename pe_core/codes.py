"""Simpler position codes, for teaching and comparison with the sinusoidal encoding.

Each one answers "how do we tell the model where a token is?" and each has a defect
that the sinusoidal encoding (and RoPE) was designed around (``docs/position_codes.md``
shows them in numbers):

* :func:`binary_encode`: the bits of the position. Column ``j`` jumps between 0 and 1
  every ``2**j`` positions and is flat in between, so neighbouring positions can be
  far apart (7 -> 8 flips four bits) and most columns say nothing about small moves.
* :func:`normalized_positions`: ``pos / (length - 1)`` in ``[0, 1]``. Bounded, but the
  step between neighbours is ``1 / (length - 1)``: it depends on the sequence length.
* :func:`learned_table_init`: the initial value of a learned table of absolute
  positions (BERT, GPT-2). It has no row beyond ``n_positions``, and at initialization
  neighbouring rows are unrelated random vectors.

All three return arrays of any backend; the values are computed on the host (NumPy)
and are identical on every backend.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from pe_core._kernel.inputs import (
    as_positions,
    check_request_size,
    choose_backend,
    known_size,
    resolve_dtype,
    working_dtype,
)
from pe_core.typing import (
    Array,
    BackendArrayT,
    BackendLike,
    DTypeLike,
    HostData,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)
from pe_core.validation import finite_real, is_integer, positive_int
from pe_core_backends import HOST, Namespace

__all__ = ["binary_encode", "learned_table_init", "normalized_positions"]


def binary_encode(
    pos: BackendArrayT | HostData,
    d: int,
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """The binary code of positions: column ``j`` holds bit ``j`` of ``pos``.

    Parameters
    ----------
    pos : int, sequence, range or array
        Non-negative integer positions (integer dtype, or floats with integral
        values), any shape, each ``< 2**d``. Arrays may come from any backend but
        their values must be known (not traced).
    d : int
        Number of bits (columns), >= 1.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to put the result; ``None`` follows ``pos`` (Python values give NumPy).
    dtype : str or dtype, optional
        Output dtype, float32 by default (so the code can be added to embeddings).

    Returns
    -------
    array
        Shape ``shape(pos) + (d,)`` of 0.0 and 1.0. Column 0 is the lowest bit, which
        changes at every position; column ``j`` changes every ``2**j`` positions.
        (Tables that print the number the usual way, highest bit first, show the
        columns in the reverse order.)

    Raises
    ------
    ValueError
        Negative, fractional or non-finite positions, or a position ``>= 2**d``
        (it would wrap around and collide with a smaller one); ``d`` < 1.
    TypeError
        Non-integer ``d``; boolean positions; traced positions.

    Examples
    --------
    >>> binary_encode([0, 1, 2, 3, 4, 5], 3).tolist()
    [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    >>> binary_encode(8, 3)
    Traceback (most recent call last):
    ...
    ValueError: pos must be < 2**d = 8 (d=3 bits); found 8 at index (). Use a larger d.
    """
    d = positive_int(d, "d")
    xp, source = choose_backend(pos, backend)
    n = known_size(pos)
    if n is not None:  # the int64 bits, their working copies: before reading pos
        check_request_size(n * d, "int64", what="binary_encode", extra_bytes=16 * n * d)
    values = np.asarray(as_positions(pos, HOST, source, what="pos"))
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values) | (values != np.floor(values))
        _raise_at(bad, values, "pos must be finite integers (whole numbers)")
    _raise_at(values < 0, values, "pos must be >= 0")
    bound = min(d, 63)  # the columns from 63 on are zero for every int64
    limit = f"2**d = {2**d} (d={d} bits)" if d < 63 else "2**63 (positions are int64)"
    too_big = values >= (2.0**bound if values.dtype.kind == "f" else 1 << bound)
    _raise_at(too_big, values, f"pos must be < {limit}", "Use a larger d." if d < 63 else "")
    columns = np.arange(d)
    bits = (values.astype(np.int64)[..., None] >> np.minimum(columns, 62)) & 1
    bits = np.where(columns < 63, bits, 0)
    return _to_backend(xp, bits, dtype)


# fmt: off
@overload
def normalized_positions(length: int, *, backend: NumpyBackend | None = None,
    dtype: DTypeLike | None = None) -> NDArray: ...
@overload
def normalized_positions(length: int, *, backend: TorchBackend, dtype: DTypeLike | None = None
) -> TorchTensor: ...
@overload
def normalized_positions(length: int, *, backend: JaxBackend, dtype: DTypeLike | None = None
) -> JaxArray: ...
@overload
def normalized_positions(length: int, *, backend: TensorFlowBackend, dtype: DTypeLike | None = None
) -> TFTensor: ...
@overload
def normalized_positions(length: int, *, backend: BackendLike | None = None,
    dtype: DTypeLike | None = None) -> Array: ...
# fmt: on


def normalized_positions(
    length: int, *, backend: BackendLike | None = None, dtype: DTypeLike | None = None
) -> Array:
    """Positions scaled to ``[0, 1]``: ``pos / (length - 1)`` for ``pos = 0 .. length-1``.

    Parameters
    ----------
    length : int
        Sequence length, >= 1. ``length == 1`` gives ``[0.0]``.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to put the result; NumPy by default.
    dtype : str or dtype, optional
        Output dtype, float32 by default. Values are computed in float64 and rounded
        once.

    Returns
    -------
    array
        Shape ``(length,)``, from 0 to 1 in steps of ``1 / (length - 1)``, which is
        the defect: the same two neighbouring tokens are 0.5 apart in a sequence of
        3 and 0.001 apart in a sequence of 1001.

    Examples
    --------
    >>> normalized_positions(3).tolist()
    [0.0, 0.5, 1.0]
    >>> [round(v, 4) for v in normalized_positions(4).tolist()]
    [0.0, 0.3333, 0.6667, 1.0]
    >>> normalized_positions(1).tolist()
    [0.0]
    """
    length = positive_int(length, "length")
    check_request_size(length, "float64", what="normalized_positions", extra_bytes=8 * length)
    xp, _ = choose_backend(None, backend)
    values = np.arange(length, dtype=np.float64) / max(length - 1, 1)
    return _to_backend(xp, values, dtype)


def learned_table_init(
    n_positions: int,
    d: int,
    *,
    seed: int = 0,
    std: float = 0.02,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> Any:  # sizes alone: the backend chosen when the code runs decides
    """Initial values of a learned absolute-position table, as BERT initializes it.

    A truncated normal: draws from ``N(0, std**2)`` and redraws every value outside
    ``[-2 std, 2 std]``, as TensorFlow's ``truncated_normal_initializer(stddev=std)``
    that the original BERT code uses for its ``position_embeddings`` with
    ``initializer_range = 0.02``. (The standard deviation of the result is about
    ``0.88 std``. GPT-2 and transformers' BERT port draw a plain, untruncated
    ``N(0, 0.02**2)``; ``jax.nn.initializers.truncated_normal`` rescales so the result
    has standard deviation ``std``; ``torch.nn.init.trunc_normal_`` takes absolute
    bounds ``a=-2, b=2``, which for ``std=0.02`` truncate nothing.)

    Parameters
    ----------
    n_positions : int
        Rows: the longest sequence the model will ever see (512 in BERT, 1024 in
        GPT-2). There is no row for any later position: that is the defect.
    d : int
        Columns (the model width), >= 1.
    seed : int
        Seed of NumPy's ``default_rng`` (PCG64). The same seed gives the same table
        on every backend.
    std : float
        Standard deviation of the normal before truncation, > 0.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to put the table; NumPy by default.
    dtype : str or dtype, optional
        float32 by default.

    Returns
    -------
    array
        Shape ``(n_positions, d)``, every value in ``[-2 std, 2 std]``.

    Examples
    --------
    >>> t = learned_table_init(512, 768)
    >>> t.shape, t.dtype
    ((512, 768), dtype('float32'))
    >>> bool(abs(t).max() <= 0.04), round(float(t.std()), 3)
    (True, 0.018)
    >>> bool((learned_table_init(512, 768) == t).all())  # deterministic
    True
    """
    n_positions = positive_int(n_positions, "n_positions")
    d = positive_int(d, "d")
    if not is_integer(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer. Received: {seed!r}")
    std = finite_real(std, "std", greater_than=0)
    n = n_positions * d  # the float64 draws, the mask and the scaled copy
    check_request_size(n, "float64", what="learned_table_init", extra_bytes=9 * n)
    xp, _ = choose_backend(None, backend)
    rng = np.random.default_rng(int(seed))
    values = rng.standard_normal((n_positions, d))
    outside = np.abs(values) > 2.0
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > 2.0
    return _to_backend(xp, values * float(std), dtype)


# --------------------------------------------------------------------------- helpers


def _raise_at(bad: np.ndarray, values: np.ndarray, message: str, hint: str = "") -> None:
    if not np.any(bad):
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if np.ndim(bad) else ()
    value = values[index].item()
    raise ValueError(f"{message}; found {value!r} at index {index}. {hint}".rstrip())


def _to_backend(xp: Namespace, values: np.ndarray, dtype: Any) -> Any:
    name, out_dtype = resolve_dtype(xp, dtype)
    working = working_dtype(name)
    array = xp.asarray(values.astype(working))
    return array if working == name else xp.astype(array, out_dtype)
