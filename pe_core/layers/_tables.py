"""Tables the framework layers place on devices or check in checkpoints.

* :func:`placed_rows` and :func:`placed_patch_table`: an encoding of host-known
  positions (a Python ``int`` offset, a patch grid) as the input's array, built on the
  host by the layer's configuration and placed on the input's device once, then reused
  from :mod:`pe_core.device_tables` (keyed by backend, device, dtype and the rows);
* :func:`pe_table_problem`: why a checkpoint's ``pe`` table (a textbook
  ``PositionalEncoding``'s buffer) is not a layer's encoding.

The ``max_len`` cache itself, :func:`~pe_core.layers._config.cached_table`, belongs to
the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core.encoding import encode
from pe_core.layers._config import SinusoidalEncodingConfig
from pe_core.layers._config_nd import PatchEncodingConfig
from pe_core.resample import resample_pos_embed
from pe_core.spec import Spec
from pe_core.validation import positive_int
from pe_core_backends import Namespace


def nan_where_wrapped(xp: Namespace, positions: Any, values: Any) -> Any:
    """``values`` with NaN rows where ``offset + arange`` wrapped past the largest integer
    of its dtype (an offset near ``2**63``, or ``2**31`` for int32): those positions are
    not the ones asked for, and the documented answer for them is NaN."""
    wrapped = positions < positions[..., :1]  # the steps are >= 0: a wrap makes them fall
    return xp.where(wrapped[..., None], float("nan"), values)


def resized_for(want: tuple[int, ...], table: Any, new_size: Any, **options: Any) -> Any:
    """``table`` resized by :func:`pe_core.resample_pos_embed` (with ``options``) for a
    weight of shape ``want`` ``(N, prefix + h * w, C)``; ``new_size`` ``None``: the square
    grid its rows fill. Raises naming the mismatch."""
    if len(want) != 3:
        raise ValueError(f"variable must have 3 axes (N, L, C). Received: shape {want}")
    if new_size is None:
        prefix = options.get("num_prefix_tokens", 1)
        rows = want[1] - positive_int(prefix, "num_prefix_tokens", minimum=0)
        side = math.isqrt(max(rows, 0))
        if rows < 1 or side * side != rows:
            raise ValueError(
                f"new_size is needed: the variable's {want[1]} rows minus num_prefix_tokens="
                f"{prefix!r} are not a square grid. Received: new_size=None"
            )
        new_size = side
    resized = resample_pos_embed(table, new_size, **options)
    have = tuple(int(n) for n in resized.shape)
    if have != want:
        raise ValueError(
            f"the resized table has shape {have}, the variable {want}. "
            f"Received: table shape {tuple(int(n) for n in table.shape)}, new_size={new_size!r}"
        )
    return resized


def placed_rows(
    xp: Namespace,
    config: SinusoidalEncodingConfig,
    offset: int,
    length: int,
    like: Any,
    dtype_name: str,
    *,
    private: bool = True,
) -> Any:
    """Rows ``offset .. offset + length - 1`` of ``config``'s encoding on ``like``'s
    device as ``dtype_name``, built on the host and placed once.

    The rows come from the ``max_len`` cache when they fit in it (not for float64),
    else from :func:`pe_core.encode`. The placed table is kept in
    :mod:`pe_core.device_tables` under ``(backend, device, dtype, rows)``: a second call
    with the same length and offset builds and moves nothing. ``private=False`` hands
    out a copy on mutable backends (torch), so writing into it cannot reach the cache.
    ``like`` must be a concrete (not traced) array.
    """
    from_cache = dtype_name != "float64" and config.cache_rows(offset, length) is not None
    source = config.max_len if from_cache else None  # the rows of that table, or encode's
    key = ("layer rows", config.d_model, config.spec, offset, length, source)
    build = partial(config._host_rows, offset, length, dtype_name)
    return device_tables.cached(xp, key, like, dtype_name, build, private=private)


def placed_patch_table(
    xp: Namespace,
    config: PatchEncodingConfig,
    spec: Spec,
    shape: tuple[int, ...],
    like: Any,
    dtype_name: str,
    *,
    flat: bool = False,
) -> Any:
    """The encoding ``(*shape, d_model)`` of the patch grid ``shape`` (``(prod(shape),
    d_model)``, row-major, with ``flat=True``) on ``like``'s device as ``dtype_name``,
    built on the host and placed once (as :func:`placed_rows`).
    """
    key = ("layer patch grid", config.d_model, spec, shape, flat)
    build = partial(config._host_table, spec, shape, dtype_name, flat)
    return device_tables.cached(xp, key, like, dtype_name, build, private=True)


def pe_table_problem(
    config: SinusoidalEncodingConfig,
    shape: tuple[int, ...],
    values: Callable[[int, int], np.ndarray],
    eps: float,
    *,
    batch_first: bool,
) -> str | None:
    """Why a checkpoint's ``pe`` table of ``shape`` is not ``config``'s encoding, or ``None``.

    Its shape names the layout it was used with: ``(1, max_len, d_model)`` batch-first,
    ``(max_len, 1, d_model)`` seq-first, ``(max_len, d_model)`` either. ``values(rows,
    features)`` gives the table as float64 ``(rows, features)`` (read only once the
    shape is right); ``eps`` is the machine epsilon of its dtype (0 for integers).

    >>> config = SinusoidalEncodingConfig(4)
    >>> table = lambda rows, features: np.asarray(encode(range(rows), 4, dtype="float64"))
    >>> pe_table_problem(config, (1, 3, 4), table, 1e-7, batch_first=True) is None
    True
    >>> pe_table_problem(config, (3, 1, 4), table, 1e-7, batch_first=True)[:60]
    "the checkpoint's table has shape (3, 1, 4), the (max_len, 1,"
    """
    if len(shape) == 2:
        rows = shape[0]
    elif len(shape) == 3 and 1 in shape[:2]:
        batch_first_table = shape[0] == 1  # (1, L, d): used as x + pe[:, :seq]
        rows = shape[1] if batch_first_table else shape[0]
        if rows > 1 and batch_first_table != batch_first:
            layout = "(1, max_len, d_model)" if batch_first_table else "(max_len, 1, d_model)"
            used = "(batch, seq, d_model)" if batch_first_table else "(seq, batch, d_model)"
            return (
                f"the checkpoint's table has shape {shape}, the {layout} layout of a "
                f"module fed {used} inputs, but the layer was built with "
                f"batch_first={batch_first}. Build it with "
                f"batch_first={batch_first_table} (or drop the entry from the checkpoint)."
            )
    else:
        return (
            "expected a (1, max_len, d_model), (max_len, 1, d_model) or (max_len, d_model) "
            f"table, got shape {shape}."
        )
    features = shape[-1]
    if features != config.d_model:
        return (
            f"the checkpoint's table has {features} features but the layer was built "
            f"with d_model={config.d_model}."
        )
    table = values(rows, features)
    expected = encode(range(rows), config.d_model, spec=config.spec, dtype="float64")
    error = np.abs(table - expected)
    tolerance = 1e-5 + 2e-7 * rows + eps  # float32 rounding of a textbook table
    if error.size and not float(error.max()) <= tolerance:
        row = int(np.argmax(np.nan_to_num(error, nan=np.inf).max(axis=-1)))
        return (
            f"the checkpoint's table differs from this layer's encoding (spec "
            f"{config.sinusoidal_config()['spec']!r}) by {float(error.max()):.3g} at row "
            f"{row} (allowed: {tolerance:.3g}); was it made with another spec?"
        )
    return None
