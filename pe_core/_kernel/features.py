"""Placing sin/cos pairs into feature vectors, and taking them back out.

Two layouts exist in the field: ``interleaved`` ``[s0, c0, s1, c1, ...]`` and ``split``
``[s0, s1, ... | c0, c1, ...]``; odd ``d`` may carry a final constant column.
"""

from __future__ import annotations

from typing import Any

from pe_core_backends import Namespace


def assemble(xp: Namespace, first: Any, second: Any, layout: str, pad: float | None = None) -> Any:
    """Lay out ``first`` (sin slots) and ``second`` (cos slots), each ``(..., n)``.

    With ``pad`` not None a final column of that constant is appended.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> xp = get_namespace("numpy")
    >>> assemble(xp, np.array([1, 2]), np.array([3, 4]), "interleaved").tolist()
    [1, 3, 2, 4]
    >>> assemble(xp, np.array([1, 2]), np.array([3, 4]), "split", pad=0).tolist()
    [1, 2, 3, 4, 0]
    """
    if layout == "interleaved":
        out = xp.merge_last_two(xp.stack([first, second], axis=-1))
    else:
        out = xp.concat([first, second], axis=-1)
    if pad is not None:
        if xp.shape(out)[-1] == 0:  # d = 1: no pair to take the shape from
            column = xp.zeros((*xp.shape(out)[:-1], 1), dtype=out.dtype, like=out)
        else:
            column = xp.zeros_like(out[..., :1])
        if pad:
            column = column + pad
        out = xp.concat([out, column], axis=-1)
    return out


def disassemble(xp: Namespace, features: Any, layout: str, n_pairs: int) -> tuple[Any, Any]:
    """Inverse of :func:`assemble`: the ``(sin slots, cos slots)`` of ``features``.

    >>> import numpy as np
    >>> from pe_core_backends import get_namespace
    >>> s, c = disassemble(get_namespace("numpy"), np.array([1, 3, 2, 4]), "interleaved", 2)
    >>> s.tolist(), c.tolist()
    ([1, 2], [3, 4])
    """
    if layout == "interleaved":
        pairs = xp.split_last(features[..., : 2 * n_pairs], 2)
        return pairs[..., 0], pairs[..., 1]
    return features[..., :n_pairs], features[..., n_pairs : 2 * n_pairs]
