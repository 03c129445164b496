"""Partial RoPE on the last features of a head: ``apply_rope(..., rotary_features="last")``.

DeepSeek-V4 lays each head out as ``[nope | rope]``: the rotated features are the last
``rotary_dim`` of the head and the leading ``head_dim - rotary_dim`` pass through.
The call is validated and its cos/sin built exactly as for the first features
(:func:`~pe_core._rope_call.rope_factors`: the frequencies use ``rotary_dim`` as their
dimension, a model config's ``partial_rotary_factor`` is read against the whole
``head_dim``); the namespace's
:meth:`~pe_core_backends.Namespace.rotate_pairs` then rotates the tail, which is
concatenated behind the untouched head.
"""

from __future__ import annotations

from typing import Any

from pe_core._rope_call import each, rope_factors
from pe_core.rope_layout import ROTARY_FEATURES
from pe_core.rope_spec import RopeSpec
from pe_core.validation import choice

__all__ = ["check_rotary_features", "rope_last_features"]


def check_rotary_features(rotary_features: object, spec: RopeSpec | None) -> str:
    """The validated ``rotary_features`` of a call: the argument's, or ``spec``'s when the
    argument keeps its default ``"first"``."""
    value = choice(rotary_features, "rotary_features", ROTARY_FEATURES)
    if spec is None or not isinstance(spec, RopeSpec):
        return value  # a wrong spec type is refused by the general route
    if value != "first" and spec.rotary_features != value:
        raise ValueError(
            "Pass rotary_features either as spec= or as rotary_features=, not both (spec "
            f"holds rotary_features={spec.rotary_features!r}). Received: "
            f"rotary_features={value!r}"
        )
    return spec.rotary_features


def rope_last_features(x: Any, pos: Any, *config: Any) -> Any:
    """``apply_rope`` rotating the last ``rotary_dim`` features of ``x`` (a tuple of
    arrays: each at the same positions, cos/sin built for each); ``config`` as for
    :func:`~pe_core._rope_call.rope_factors`."""
    if isinstance(x, (tuple, list)) and not x:
        raise ValueError("x is an empty sequence; pass an array or a tuple of arrays.")

    def rotate(item: Any) -> Any:
        xp, item, cos, sin, layout, rotary_dim, working = rope_factors(item, pos, *config)
        start = xp.shape(item)[-1] - rotary_dim
        tail = item[..., start:] if start else item
        tail = xp.rotate_pairs(tail, cos, sin, layout, rotary_dim, working)
        return xp.concat([item[..., :start], tail], axis=-1) if start else tail

    return each(rotate, x)
