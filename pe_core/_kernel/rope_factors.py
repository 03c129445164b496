"""RoPE's cos/sin of a few host positions, and the shapes rotations ask for.

:func:`small_cos_sin` is the one float64 pass both the decode-step lane and the
general route's small calls use (so they give the same numbers);
:class:`HostFactors` keeps its result in the shapes the backends' small rotations
read (:meth:`~pe_core_backends.Namespace.rotate_small`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pe_core._kernel.host_tables import small_angles

__all__ = ["HostFactors", "small_cos_sin"]


class HostFactors:
    """cos and sin of a few positions (NumPy float32, shape ``P + (r/2,)``), in the
    shapes a rotation asks for: broadcast against an ``ndim``-dimensional ``x``,
    doubled for the half layout or as ``cos + i sin`` for the interleaved one.

    >>> f = HostFactors(np.ones((3, 2), np.float32), np.zeros((3, 2), np.float32))
    >>> f.doubled_cos(4).shape, f.sin(4).shape, f.signed_sin(3).shape, f.rotation(2).dtype
    ((1, 1, 3, 4), (1, 1, 3, 2), (1, 3, 4), dtype('complex64'))
    """

    __slots__ = ("_cos", "_lock", "_shaped", "_sin")

    def __init__(self, cos: np.ndarray, sin: np.ndarray) -> None:
        self._cos, self._sin = cos, sin
        self._shaped: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()

    def _get(self, kind: str, ndim: int) -> np.ndarray:
        def build() -> np.ndarray:
            value = _SHAPES[kind](self._cos, self._sin)
            pos_shape = self._cos.shape[:-1]
            return value.reshape(*(1,) * (ndim - 1 - len(pos_shape)), *pos_shape, value.shape[-1])

        value: np.ndarray = self.converted((kind, ndim), build)
        return value

    def converted(self, key: Any, build: Any) -> Any:
        """``build()`` once per ``key``: the shapes above, and a backend's own arrays of
        the factors (e.g. tensors sharing their memory), kept for the next array of the
        same call."""
        hit = self._shaped.get(key)
        if hit is None:
            hit = build()
            with self._lock:
                self._shaped[key] = hit
        return hit

    def half_layout(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """``(doubled_cos(ndim), signed_sin(ndim))`` in one lookup."""
        pair: tuple[np.ndarray, np.ndarray] = self.converted(
            ("half", ndim), lambda: (self.doubled_cos(ndim), self.signed_sin(ndim))
        )
        return pair

    def doubled_cos(self, ndim: int) -> np.ndarray:
        """``[cos, cos]`` (``P' + (r,)``) for the half layout."""
        return self._get("doubled_cos", ndim)

    def cos(self, ndim: int) -> np.ndarray:
        """``cos`` (``P' + (r/2,)``)."""
        return self._get("cos", ndim)

    def sin(self, ndim: int) -> np.ndarray:
        """``sin`` (``P' + (r/2,)``)."""
        return self._get("sin", ndim)

    def signed_sin(self, ndim: int) -> np.ndarray:
        """``[-sin, sin]`` (``P' + (r,)``): the half layout as ``x * [cos, cos] +
        roll(x, r/2) * [-sin, sin]``."""
        return self._get("signed_sin", ndim)

    def rotation(self, ndim: int) -> np.ndarray:
        """``cos + i sin`` (complex64, ``P' + (r/2,)``) for the interleaved layout."""
        return self._get("rotation", ndim)


def _rotation(cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    value = np.empty(cos.shape, np.complex64)
    value.real, value.imag = cos, sin
    return value


#: How each shape of :class:`HostFactors` is made from ``(cos, sin)``.
_SHAPES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "cos": lambda cos, sin: cos,
    "sin": lambda cos, sin: sin,
    "doubled_cos": lambda cos, sin: np.concatenate([cos, cos], axis=-1),
    "signed_sin": lambda cos, sin: np.concatenate([-sin, sin], axis=-1),
    "rotation": _rotation,
}


def small_cos_sin(
    values: np.ndarray, inv_freq: tuple[float, ...], attention_factor: float
) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``cos`` and ``sin`` (shape ``values.shape + (len(inv_freq),)``) of a few
    positions, scaled by ``attention_factor``: one float64 pass
    (:func:`~pe_core._kernel.host_tables.small_angles`), for the inputs
    :func:`~pe_core._kernel.host_tables.small_call_fits` accepts. The lane and the general
    route's small calls both use it, so they give the same numbers.

    >>> c, s = small_cos_sin(np.array([0, 1]), (1.0,), 1.0)
    >>> c.dtype, bool(np.allclose(s[:, 0], [0.0, np.sin(1.0)]))
    (dtype('float32'), True)
    """
    angles = small_angles(values, inv_freq).reshape(*values.shape, len(inv_freq))
    cos, sin = np.cos(angles), np.sin(angles)
    if attention_factor != 1.0:
        cos *= np.float32(attention_factor)
        sin *= np.float32(attention_factor)
    return cos, sin
