"""The few-positions lane of :func:`~pe_core.apply_rope`: a decode step without dispatch.

A decode step rotates one new query and key per example: a few positions, and
tensors of a few thousand elements, where the general route's classification,
validation and dispatch cost more than the arithmetic. This lane takes the calls
whose every property it can check in a few attribute reads:

* ``x`` (or every array of a ``(q, k)`` tuple) is an eager float32 array in host
  memory that nothing records (no autograd, tracing or function transform): see
  :meth:`~pe_core_backends.Namespace.rotate_small`;
* ``pos`` is a Python int, a NumPy integer array, or an integer array of ``x``'s
  backend readable without a copy or synchronisation
  (:meth:`~pe_core_backends.Namespace.host_view`), with at most :data:`~pe_core._kernel.routes.FEW_POSITIONS`
  values of magnitude below :data:`~pe_core._kernel.routes.SMALL_MAX_INTEGER`;
* the rope configuration needs no sequence length (validated once per
  configuration and head size, then cached).

cos and sin come from the same float64 pass as the general route's small calls
(:func:`~pe_core._kernel.host_tables.small_angles`), so both routes give the same numbers;
the factors of the last positions are kept, so the key of a decode step reuses the
query's. Everything else returns ``None`` and takes the general route, which also
raises the errors.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from pe_core import _rope_call as call
from pe_core._kernel.inputs import check_request_size
from pe_core._kernel.placement import host_view, namespace_of
from pe_core._kernel.rope_factors import HostFactors, small_cos_sin
from pe_core._kernel.routes import FEW_POSITIONS, SMALL_MAX_INTEGER, SMALL_MAX_PAIRS
from pe_core.rope_scaling import needs_seq_len
from pe_core.rope_spec import rope_constants
from pe_core.validation import broadcasts_into
from pe_core_backends import Namespace

__all__ = ["few_positions_rope"]


class _Constants(NamedTuple):
    inv_freq: tuple[float, ...]
    attention_factor: float
    layout: str
    rotary_dim: int


def few_positions_rope(
    x: Any, pos: Any, base: Any, layout: Any, rotary_dim: Any, spec: Any
) -> Any | None:
    """``apply_rope(x, pos, ...)`` for the calls of the lane, else ``None``.

    >>> q = np.ones((2, 1, 4), np.float32)  # (batch, seq, head_dim)
    >>> y = few_positions_rope(q, np.array([[3], [5]]), 10000.0, "half", None, None)
    >>> y.shape, bool(np.allclose(y[0, 0, [0, 2]], [np.cos(3) - np.sin(3), np.cos(3) + np.sin(3)]))
    ((2, 1, 4), True)
    >>> few_positions_rope(q.astype(np.float64), 3, 10000.0, "half", None, None) is None
    True
    """
    single = not isinstance(x, (tuple, list))
    xs = (x,) if single else tuple(x)
    xp = namespace_of(xs[0]) if xs else None
    if xp is None or type(xp).rotate_small is Namespace.rotate_small:  # no small rotations
        return None
    values = _few_values(pos, xp)
    if values is None:
        return None
    constants = _lane_constants(xs, values, spec, base, layout, rotary_dim)
    if constants is None:
        return None
    factors = _factors(values, constants)
    out = []
    for item in xs:
        rotated = xp.rotate_small(item, factors, constants.layout, constants.rotary_dim)
        if rotated is None:
            return None
        out.append(rotated)
    return out[0] if single else tuple(out)


def _few_values(pos: Any, xp: Namespace) -> np.ndarray | None:
    """The positions as a NumPy integer array the lane takes, else ``None``."""
    if type(pos) is int:
        values: np.ndarray | None = np.array(pos)  # beyond int64: dtype object, refused below
    else:
        values, source = host_view(pos)
        if source is not None and source is not xp:  # another framework's positions
            return None
    if values is None or values.dtype.kind not in "iu" or not 0 < values.size <= FEW_POSITIONS:
        return None
    listed = values.ravel().tolist()
    if max(listed) >= SMALL_MAX_INTEGER or min(listed) <= -SMALL_MAX_INTEGER:
        return None
    return values


def _lane_constants(
    xs: tuple[Any, ...], values: np.ndarray, spec: Any, base: Any, layout: Any, rotary_dim: Any
) -> _Constants | None:
    """The configuration's constants if every array shares the first's type and head
    size and the positions broadcast against each, else ``None``."""
    first = xs[0]
    head_dim = first.shape[-1] if first.ndim else None
    if not isinstance(head_dim, int):
        return None
    try:
        constants = _constants(spec, base, layout, rotary_dim, head_dim)
    except TypeError:  # unhashable arguments: the general route
        return None
    if constants is None or values.size * len(constants.inv_freq) > SMALL_MAX_PAIRS:
        return None
    kind = type(first)
    for item in xs:  # the same array type as the first (so the same backend)
        shape = item.shape
        if type(item) is not kind or not shape or shape[-1] != head_dim:
            return None
        if not broadcasts_into(values.shape, shape[:-1]):
            return None
        # the output in host memory (float32 at least): O(1), refused before any work
        check_request_size(math.prod(shape), "float32", what="apply_rope")
    return constants


# typed: rotary_dim=4.0 or True must not hit the entry of 4 or 1 (the general route
# refuses them)
@functools.lru_cache(maxsize=256, typed=True)
def _constants(
    spec: Any, base: Any, layout: Any, rotary_dim: Any, head_dim: int
) -> _Constants | None:
    """Validated frequencies of one configuration and head size; ``None`` when the lane
    cannot take it (the sequence length is needed, or the general route should say
    what is wrong)."""
    try:
        base, layout, rotary_dim, scaling = call.configuration(
            spec, base, layout, rotary_dim, None, None
        )
        if needs_seq_len(scaling):
            return None
        layout = call.check_layout(layout)
        call.check_head_dim(head_dim)
        rotary_dim = call.check_rotary_dim(rotary_dim, head_dim)
        base = call.check_base(base)
        inv_freq, attention_factor = rope_constants(scaling, base, head_dim, rotary_dim, None)
    except (TypeError, ValueError):
        return None
    return _Constants(tuple(inv_freq), float(attention_factor), layout, 2 * len(inv_freq))


#: The factors of the last positions: (key, factors), reused by the next call with
#: the same positions and configuration (a decode step's query, then its key).
_last: tuple[Any, HostFactors] | None = None


def _factors(values: np.ndarray, constants: _Constants) -> HostFactors:
    global _last
    key = (constants, values.shape, values.dtype.str, values.tobytes())
    last = _last
    if last is not None and last[0] == key:
        return last[1]
    factors = HostFactors(*small_cos_sin(values, constants.inv_freq, constants.attention_factor))
    _last = (key, factors)
    return factors
