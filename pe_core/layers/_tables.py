"""Tables the framework layers build on the host, and where they keep them.

* :func:`cached_table`: the ``max_len`` cache, rows ``0 .. max_len - 1`` as a
  read-only NumPy table (one per ``(d_model, spec, max_len)``);
* :func:`placed_rows` and :func:`placed_patch_table`: an encoding of host-known
  positions (a Python ``int`` offset, a patch grid) as the input's array, built on the
  host and placed on the input's device once, then reused from
  :mod:`pe_core.device_tables` (keyed by backend, device, dtype and the rows);
* :func:`sequence_bucket`: the length buckets of compiled PyTorch code.

>>> cached_table(8, Spec(), 4).shape
(4, 8)
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from pe_core import device_tables
from pe_core.spec import Spec
from pe_core_backends import Namespace

if TYPE_CHECKING:
    from pe_core.layers._config import SinusoidalEncodingConfig

__all__ = ["MIN_BUCKET", "cached_table", "placed_patch_table", "placed_rows", "sequence_bucket"]

#: The smallest bucket of :func:`sequence_bucket`.
MIN_BUCKET = 16


@functools.lru_cache(maxsize=32)
def cached_table(d_model: int, spec: Spec, max_len: int, dtype: str = "float32") -> np.ndarray:
    """The read-only NumPy table of positions ``0 .. max_len - 1`` (the ``max_len`` cache).

    >>> cached_table(8, Spec(), 4).flags.writeable
    False
    """
    from pe_core.encoding import encode

    table = encode(range(max_len), d_model, spec=spec, dtype=dtype)
    table.setflags(write=False)
    return table


def _host_dtype(dtype_name: str) -> str:
    """The dtype of the host table for ``dtype_name`` output: float64 for float64, else
    float32 (float16/bfloat16 inputs get the float32 encoding rounded once, as in
    traced code)."""
    return "float64" if dtype_name == "float64" else "float32"


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

    def build() -> np.ndarray:
        if from_cache:
            rows = config.cache_rows(offset, length)
            assert rows is not None
            return rows
        from pe_core.encoding import encode

        host = _host_dtype(dtype_name)
        return encode(range(offset, offset + length), config.d_model, spec=config.spec, dtype=host)

    return device_tables.cached(xp, key, like, dtype_name, build, private=private)


def placed_patch_table(
    xp: Namespace,
    d_model: int,
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
    key = ("layer patch grid", d_model, spec, shape, flat)

    def build() -> np.ndarray:
        from pe_core.encoding import encode
        from pe_core.nd import grid

        host = _host_dtype(dtype_name)
        table = np.asarray(encode(grid(shape), d_model, spec=spec, dtype=host))
        return table.reshape(-1, d_model) if flat else table

    return device_tables.cached(xp, key, like, dtype_name, build, private=True)


def sequence_bucket(length: Any, minimum: int = MIN_BUCKET) -> int:
    """The bucket of a sequence length: the smallest power of two ``> length``, at least 16.

    Compiled layers (``torch.compile``) encode positions for the whole bucket and slice
    the first ``length`` rows, so the shapes they trace depend on the bucket only: any
    length within a bucket (1 to 15, 16 to 31, 32 to 63, ...) reuses one compiled graph.
    Written with comparisons only, so a symbolic length (a ``torch.SymInt``) yields the
    range guards ``bucket / 2 <= length < bucket`` rather than a specialisation (the
    bucket is strictly larger than the length, so slicing it never equates the two).

    >>> [sequence_bucket(n) for n in (1, 15, 16, 31, 32, 100)]
    [16, 16, 32, 32, 64, 128]
    """
    bucket = minimum
    while length >= bucket:
        bucket *= 2
    return bucket
