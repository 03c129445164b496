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

from typing import Any

import numpy as np

from pe_core._rope_call import as_input, rope_factors
from pe_core.typing import BackendArrayT, BackendLike, HostData, SupportsArray
from pe_core.validation import finite_real, positive_int
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
        Query positions >= 0, any shape. Host positions (Python, NumPy) give exact
        values: the floor is an integer division and the logarithm is taken in float64,
        rounded once to ``dtype``. An integer array of a framework is computed where it
        lives (integer division, the logarithm in ``dtype``), traced too; it is not
        read back, so negative positions there give ``-inf`` or NaN instead of an
        error.
    floor_scale : int
        Positions per step of the scale (>= 1); Llama 4 uses 8192.
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
    if source is None or (backend is not None and canonical_backend(backend) != source):
        values = _host_positions(positions, source)
        scales = np.log1p((values + 1) // floor_scale) * attn_scale + 1.0
        xp = HOST if backend is None else get_namespace(backend)
        return xp.asarray(scales.astype(dtype), dtype=xp.dtype(dtype))
    xp = get_namespace(source)
    if xp.kind(xp.dtype_of(positions)) != "int":
        raise TypeError(
            "positions must be integers (query positions). Received a "
            f"{xp.dtype_of(positions)} {source} array."
        )
    # (p + 1) // f without forming p + 1 (int32 positions near 2**31 - 1 would wrap)
    p: Any = positions
    quotient = p // floor_scale
    steps = quotient + (p - quotient * floor_scale + 1) // floor_scale
    return xp.log1p(xp.astype(steps, xp.dtype(dtype))) * attn_scale + 1.0


def _host_positions(positions: Any, source: str | None) -> np.ndarray:
    """``positions`` as a NumPy int64 array of values >= 0 (a framework array is read:
    the caller asked for another backend)."""
    if source is not None:
        values = get_namespace(source).concrete(positions)
        if values is None:
            raise TypeError(
                f"positions are a traced {source} value and cannot be moved to another "
                "backend; call with backend=None inside compiled code."
            )
        positions = values
    array = np.asarray(positions if not isinstance(positions, range) else list(positions))
    if array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind == "f"):
        raise ValueError(
            "positions must be integers (query positions). Received values of dtype "
            f"{array.dtype}: {positions!r}"
        )
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        raise ValueError(
            "positions must be >= 0 (log1p(floor((p + 1) / floor_scale)) is -inf below). "
            f"Received: min(positions) = {int(array.min())}"
        )
    return array
