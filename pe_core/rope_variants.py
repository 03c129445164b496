"""Rotary schemes of published models that are not one of ``apply_rope``'s rotations.

* :func:`vjepa2_rope`: V-JEPA 2's video rotary embedding (transformers' ``vjepa2``
  ``rotate_queries_or_keys`` on a block of features per axis), whose cos/sin are laid
  out for the half layout while its features pair as interleaved: feature ``i`` is
  scaled by the angle of pair ``i mod (D / 2)``, so a pair's two features turn by
  different angles and the map is not a rotation.
* :func:`llama4_attention_scales`: Llama 4's attention temperature tuning, the
  per-position query scale of its NoPE layers.

Both compute where their inputs live (no host read of a framework array) and run
eagerly and traced; see :doc:`rope` for the conventions they reproduce.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core._kernel.inputs import as_positions, check_request_size
from pe_core._rope_call import as_input, rope_factors
from pe_core.typing import BackendArrayT, BackendLike, HostData, SupportsArray
from pe_core.validation import check_elements, finite_real, known_size, positive_int
from pe_core_backends import HOST, backend_of, canonical_backend, get_namespace

__all__ = ["llama4_attention_scales", "vjepa2_rope"]


def vjepa2_rope(
    x: BackendArrayT | HostData,
    pos: SupportsArray | HostData,
    *,
    axes: int = 3,
    base: float = 10000.0,
    backend: BackendLike | None = None,
    check_values: bool = False,
) -> BackendArrayT:
    """V-JEPA 2's rotary embedding of queries or keys ``x`` at ``axes``-D positions.

    transformers' ``VJEPA2RopeAttention.apply_rotary_embeddings``: the head is cut
    into ``axes`` blocks of ``D = 2 * ((head_dim // axes) // 2)`` features (frame,
    height, width for ``axes=3``); the features after them pass through. Block ``a``
    is transformed by ``rotate_queries_or_keys`` at ``t = pos[..., a]``: with
    ``w_j = base ** (-2j / D)`` and ``c_i = cos(t w_(i mod D/2))``,
    ``s_i = sin(t w_(i mod D/2))`` (cos and sin tiled twice over the block),

        out[2m]     = x[2m] c_(2m) - x[2m+1] s_(2m)
        out[2m + 1] = x[2m+1] c_(2m+1) + x[2m] s_(2m+1)

    Features pair as ``(2m, 2m + 1)`` but take the angles of pairs ``2m`` and
    ``2m + 1`` (mod ``D/2``): not :func:`~pe_core.rope.apply_rope` in either layout.

    Parameters
    ----------
    x : array
        Queries or keys ``(..., seq, head_dim)`` of any backend, floating.
    pos : int, sequence or array
        Coordinates of shape ``P + (axes,)``, ``P`` broadcasting against
        ``x.shape[:-1]`` (V-JEPA 2's ``(frame, height, width)`` ids stacked on the last
        axis). Integer or floating; traced and accelerator positions stay there.
    axes : int
        Coordinate axes (>= 1); V-JEPA 2 uses 3.
    base : float
        The frequency base (> 1); V-JEPA 2 uses 10000.
    backend : str, optional
        Where to compute; ``None`` follows ``x``.
    check_values : bool
        Read accelerator positions back to refuse non-finite ones (synchronises).

    Returns
    -------
    array
        Same shape, dtype, backend and device as ``x``. The angles are exact (as in
        :func:`~pe_core.rope.apply_rope`), the arithmetic in float32 (float64 for
        float64 ``x``).

    Raises
    ------
    ValueError
        ``head_dim // axes < 2``; ``pos`` without a trailing axis of ``axes``
        coordinates or not broadcasting; anything ``apply_rope`` refuses in ``x``,
        ``pos`` or ``base``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((2, 6), np.float32)  # (seq, head_dim): blocks of 2
    >>> y = vjepa2_rope(x, [[0, 0, 0], [1, 0, 0]])
    >>> y[0].tolist()  # position 0: unchanged
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    >>> c, s = np.cos(1.0), np.sin(1.0)  # D = 2: one frequency, w_0 = 1
    >>> bool(np.allclose(y[1, :2], [c - s, c + s])), y[1, 2:].tolist()
    (True, [1.0, 1.0, 1.0, 1.0])
    """
    axes = positive_int(axes, "axes")
    xp, array = as_input(x, backend)
    shape = xp.shape(array)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = shape[-1]
    block = 2 * ((head_dim // axes) // 2) if head_dim is not None else 0
    if block < 2:
        raise ValueError(
            f"vjepa2_rope cuts head_dim into {axes} blocks of 2 * ((head_dim // {axes}) // 2) "
            f"features, which needs head_dim >= {2 * axes}. Received: head_dim={head_dim}"
        )
    source = backend_of(pos)
    coords: Any = np.asarray(pos) if source is None else pos
    pos_shape = tuple((HOST if source is None else get_namespace(source)).shape(coords))
    if not pos_shape or pos_shape[-1] != axes:
        raise ValueError(
            f"pos must have a trailing axis of axes={axes} coordinates (V-JEPA 2: frame, "
            f"height, width). Received: pos of shape {pos_shape}"
        )
    if not xp.is_tracing():  # (sizes may be symbolic or unknown while tracing)
        sides = list(shape[:-1]), list(pos_shape[:-1])
        rank = max(len(sides[0]), len(sides[1]))
        padded = [[1] * (rank - len(side)) + side for side in sides]
        n = head_dim * math.prod([max(a, b) for a, b in zip(*padded, strict=True)])
        check_request_size(  # the output and ~4 temporaries per block
            n, xp.dtype_of(array), what="vjepa2_rope", extra_bytes=32 * n, like=array
        )
    parts = []
    for a in range(axes):
        part = array[..., a * block : (a + 1) * block]
        xp_, part, cos, sin, _, _, working = rope_factors(
            part, coords[..., a], base, "half", None, None, None, check_values
        )
        parts.append(_vjepa2_block(xp_, part, cos, sin, working))
    if axes * block < head_dim:
        parts.append(array[..., axes * block :])
    return xp.concat(parts, axis=-1)


def _vjepa2_block(xp: Any, x: Any, cos: Any, sin: Any, working: str) -> Any:
    """``rotate_queries_or_keys`` of one block: ``x * [c, c] + rot(x) * [s, s]`` with
    ``rot`` the interleaved ``(-x[2m+1], x[2m])``."""
    cast = xp.dtype_of(x) != working
    w = xp.astype(x, xp.dtype(working)) if cast else x
    c, s = xp.concat([cos, cos], axis=-1), xp.concat([sin, sin], axis=-1)
    pairs = xp.split_last(w, 2)
    turned = xp.merge_last_two(xp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1))
    out = w * c + turned * s
    return xp.astype(out, x.dtype) if cast else out


def llama4_attention_scales(
    positions: BackendArrayT | HostData,
    *,
    floor_scale: int = 8192,
    attn_scale: float = 0.1,
    backend: BackendLike | None = None,
    dtype: str = "float32",
) -> BackendArrayT:
    """Llama 4's attention temperature tuning: the query scale of each position.

    transformers' ``Llama4TextAttention`` multiplies the queries of its NoPE layers
    (``attn_temperature_tuning``) by

        scale(p) = log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1

    for the absolute position ``p`` of each query (``arange(seq) +
    past_seen_tokens``). Multiply the queries by ``scales[..., None]``.

    Parameters
    ----------
    positions : int, range, sequence or integer array
        Query positions >= 0, any shape, any integer dtype (int8 to uint64). The
        floor is exact for every value: ``q = p // floor_scale`` plus ``(p - q *
        floor_scale + 1) // floor_scale``, so ``p + 1`` never wraps (integers narrower
        than 32 bits are widened to int32 first; uint64 values from ``2**63`` on are
        worked out in int64). Host positions (Python, NumPy) give the logarithm in
        float64, rounded once to ``dtype``. An integer array of a framework is
        computed where it lives (the logarithm in ``dtype``), traced too; it is not
        read back, so negative positions there give ``-inf``, NaN or 1 instead of an
        error.
    floor_scale : int
        Positions per step of the scale (>= 1, any Python integer); Llama 4 uses 8192.
    attn_scale : float
        The slope of the logarithm (finite); Llama 4 uses 0.1.
    backend : str, optional
        The backend of the result for host positions (NumPy by default); a framework
        array's own backend otherwise.
    dtype : {"float32", "float64"}
        The dtype of the result.

    Returns
    -------
    array
        ``positions``' shape, in ``dtype``.

    Raises
    ------
    ValueError
        Negative or non-integer host positions, ``floor_scale`` < 1, a non-finite
        ``attn_scale``, an unknown ``dtype``.
    TypeError
        Floating framework positions, non-integer ``floor_scale``.

    Examples
    --------
    >>> s = llama4_attention_scales([0, 8190, 8191, 3 * 8192 - 1], dtype="float64")
    >>> s.tolist()[:3], bool(np.isclose(s[3], np.log(4) * 0.1 + 1))
    ([1.0, 1.0, 1.0693147180559945], True)
    """
    floor_scale = positive_int(floor_scale, "floor_scale")
    attn_scale = finite_real(attn_scale, "attn_scale")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'. Received: {dtype!r}")
    source = backend_of(positions)
    on_host = source is None or get_namespace(source).numpy_arrays
    n = known_size(positions)
    check_elements(n, "llama4_attention_scales", dtype=dtype, per_element=40, like=positions)
    if on_host or (backend is not None and canonical_backend(backend) != source):
        values = _host_positions(positions, None if on_host else source)
        steps = _steps(HOST, values, floor_scale, np.dtype(np.float64))  # exact, rounded once
        scales = np.log1p(steps) * attn_scale + 1.0
        xp = HOST if backend is None else get_namespace(backend)
        return xp.asarray(scales.astype(dtype), dtype=xp.dtype(dtype))
    xp = get_namespace(str(source))
    name = xp.dtype_of(positions)
    if xp.kind(name) != "int":
        raise TypeError(
            f"positions must be integers (query positions). Received a {name} {source} array."
        )
    return xp.log1p(_framework_steps(xp, positions, name, floor_scale, dtype)) * attn_scale + 1.0


def _framework_steps(xp: Any, positions: Any, name: str, floor_scale: int, dtype: str) -> Any:
    """``floor((p + 1) / floor_scale)`` of a framework's integer positions, exactly in
    integers (no ``p + 1`` that could wrap), as ``dtype``.

    Integers narrower than 32 bits are widened to int32 first (``p // 8192`` of an int8
    array would wrap the divisor); uint32 to int64 where the backend has it; uint64 is
    read as int64 (two's complement) and its values from ``2**63`` on are worked out
    from ``2**64 = q f + r``.
    """
    out = xp.dtype(dtype)
    p = positions
    if name in ("int8", "int16", "uint8", "uint16"):
        p, name = xp.astype(p, xp.dtype("int32")), "int32"
    elif name == "uint32" and xp.supports("int64"):
        p, name = xp.astype(p, xp.dtype("int64")), "int64"
    if name != "uint64":
        return _steps(xp, p, floor_scale, out)
    p = xp.astype(p, xp.dtype("int64"))  # values from 2**63 on wrap to p - 2**64
    low = _steps(xp, p, floor_scale, out)
    if floor_scale > 2**64:
        high = xp.zeros_like(low)
    elif floor_scale > 2**63:  # (2**64 + p + 1) // f is 1 from p = f - 1 - 2**64 on
        start = xp.asarray(np.asarray(floor_scale - 1 - 2**64, dtype=np.int64), like=p)
        high = xp.astype(p >= start, out)
    else:  # 2**64 + p = q f + (r + p), with r + p in int64's range for p < 0
        q, r = divmod(2**64, floor_scale)
        shifted = p + xp.asarray(np.asarray(r, dtype=np.int64), like=p)
        high = _steps(xp, shifted, floor_scale, out) + float(q)
    return xp.where(p < xp.asarray(np.asarray(0, dtype=np.int64), like=p), high, low)


def _steps(xp: Any, p: Any, floor_scale: int, out: Any) -> Any:
    """``floor((p + 1) / floor_scale)`` of integers ``p`` (up to their dtype's largest
    value, ``maximum``), without forming ``p + 1``: ``q = p // f`` and the remainder
    ``r = p - q f`` in ``[0, f - 1]``, so ``(r + 1) // f`` is 0 or 1 and nothing wraps.
    Exact for negative ``p`` too (the uint64 path needs them). Returned as the float
    dtype ``out`` (``q`` rounded once where it is that large)."""
    name = xp.dtype_of(p)
    maximum = int(np.iinfo(name).max)
    signed = not name.startswith("u")

    def const(value: int) -> Any:  # in p's dtype (JAX would read a Python int as int32)
        return xp.asarray(np.asarray(value, dtype=name), like=p)

    below = xp.astype(p < const(-1), out) if signed else None  # p + 1 < 0: floor is -1
    if floor_scale - 1 >= maximum:  # p + 1 <= maximum + 1 <= floor_scale
        hit = p == const(maximum) if floor_scale - 1 == maximum else xp.zeros_like(p)
        steps = xp.astype(hit, out)
        return steps - below if signed else steps
    f = const(floor_scale)
    q = p // f
    carry = (p - q * f + const(1)) // f
    return xp.astype(q, out) + xp.astype(carry, out)


def _host_positions(positions: Any, source: str | None) -> np.ndarray:
    """``positions`` as a NumPy int64 or uint64 array of values >= 0 (a framework array
    is read: the caller asked for another backend)."""
    if source is not None:
        values = get_namespace(source).concrete(positions)
        if values is None:
            raise TypeError(
                f"positions are a traced {source} value and cannot be moved to another "
                "backend; call with backend=None inside compiled code."
            )
        positions = values
    array = as_positions(positions, HOST, backend_of(positions))
    if array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind == "f"):
        raise ValueError(
            "positions must be integers (query positions). Received values of dtype "
            f"{array.dtype}: {positions!r}"
        )
    if array.dtype.kind != "u":
        array = array.astype(np.int64)
        if array.size and array.min() < 0:
            raise ValueError(
                "positions must be >= 0 (log1p(floor((p + 1) / floor_scale)) is -inf "
                f"below). Received: min(positions) = {int(array.min())}"
            )
    elif array.dtype != np.uint64:
        array = array.astype(np.uint64)
    return array
