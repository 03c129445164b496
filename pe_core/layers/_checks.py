"""Argument checks of the framework layers, in :mod:`pe_core.validation`'s wording.

What a layer checks beyond its spec: the dropout rate, the ``max_len`` cache size, a
patch grid, and at call time the input's features, a per-example offset's shape and a
patch input's grid. Everything :class:`~pe_core.Spec`, :class:`~pe_core.RopeSpec` and
the kernels already validate is left to them. Messages read ``"<name> must be
<allowed>. Received: <value!r>"``; ``TypeError`` for a wrong type, ``ValueError`` for
a wrong value.

>>> check_dropout(1.5)
Traceback (most recent call last):
...
ValueError: dropout must be a number in [0, 1). Received: 1.5
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pe_core._schedule import check_d
from pe_core.spec import Spec
from pe_core.validation import is_integer

if TYPE_CHECKING:
    from pe_core.layers._config_nd import PatchEncodingConfig

__all__ = [
    "check_dropout",
    "check_features",
    "check_grid_shape",
    "check_max_len",
    "check_patch_spec",
    "check_scaling_type",
    "patch_grid",
    "per_example_shape",
]


# --------------------------------------------------------------------------- construction


def check_dropout(rate: object) -> float:
    """Validate a dropout rate in ``[0, 1)`` and return it as a float.

    >>> check_dropout(0.1)
    0.1
    >>> check_dropout(True)
    Traceback (most recent call last):
    ...
    TypeError: dropout must be a number in [0, 1). Received: True
    """
    message = f"dropout must be a number in [0, 1). Received: {rate!r}"
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(message)
    if not 0.0 <= float(rate) < 1.0:
        raise ValueError(message)
    return float(rate)


def check_max_len(max_len: object) -> int | None:
    """Validate ``max_len`` (``None`` or a positive int, the size of the optional cache).

    >>> check_max_len(None), check_max_len(512)
    (None, 512)
    >>> check_max_len(0)
    Traceback (most recent call last):
    ...
    ValueError: max_len must be None or a positive integer (it only bounds an optional cache). Received: 0
    """
    if max_len is None:
        return None
    message = (
        "max_len must be None or a positive integer (it only bounds an optional cache). "
        f"Received: {max_len!r}"
    )
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral):
        raise TypeError(message)
    if max_len <= 0:
        raise ValueError(message)
    return int(max_len)


def check_grid_shape(grid_shape: Any) -> tuple[int, ...] | None:
    """Validate a grid shape: ``None`` or a non-empty sequence of positive ints.

    >>> check_grid_shape([14, 14])
    (14, 14)
    >>> check_grid_shape((4, 0))
    Traceback (most recent call last):
    ...
    ValueError: grid_shape must be None or a non-empty sequence of positive integers. Received: (4, 0)
    """
    if grid_shape is None:
        return None
    message = (
        "grid_shape must be None or a non-empty sequence of positive integers. "
        f"Received: {grid_shape!r}"
    )
    if isinstance(grid_shape, (str, bytes)) or not hasattr(grid_shape, "__iter__"):
        raise TypeError(message)
    sizes = tuple(grid_shape)
    if not sizes:
        raise ValueError(message)
    if not all(is_integer(n) for n in sizes):
        raise TypeError(message)
    if any(n <= 0 for n in sizes):
        raise ValueError(message)
    return tuple(int(n) for n in sizes)


def check_patch_spec(d: int, spec: Spec, shape: tuple[int | None, ...]) -> None:
    """Raise unless ``spec`` encodes one coordinate axis per grid axis and suits ``d``.

    >>> check_patch_spec(8, Spec(axes=2), (2, 3, 4))
    Traceback (most recent call last):
    ...
    ValueError: The spec encodes 2 coordinate axes but the patch grid has 3 axes (grid_shape (2, 3, 4)). Use a spec with axes=3.
    """
    if spec.axes != len(shape):
        raise ValueError(
            f"The spec encodes {spec.axes} coordinate axes but the patch grid has "
            f"{len(shape)} axes (grid_shape {shape}). Use a spec with axes={len(shape)}."
        )
    check_d(d, spec)


def check_scaling_type(scaling: object) -> None:
    """Raise ``TypeError`` unless ``scaling`` is ``None``, a mapping or a config object.

    :class:`~pe_core.RopeSpec` refuses the same values; a layer says what it expects
    with an example, the mistake (``scaling="linear"``) being a likely one there.

    >>> check_scaling_type("linear")
    Traceback (most recent call last):
    ...
    TypeError: scaling must be None or a dict (rope parameters such as {'rope_type': 'linear', 'factor': 2.0}, or a model config). Received: 'linear'
    """
    if scaling is None or isinstance(scaling, Mapping):
        return
    if not callable(getattr(scaling, "to_dict", None)):
        raise TypeError(
            "scaling must be None or a dict (rope parameters such as "
            "{'rope_type': 'linear', 'factor': 2.0}, or a model config). "
            f"Received: {scaling!r}"
        )


# --------------------------------------------------------------------------- call time


def check_features(actual: int, expected: int, name: str) -> None:
    """Raise unless an input's last axis ``actual`` equals the layer's ``expected`` size.

    >>> check_features(32, 64, "d_model")
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 32 features but the layer was built with d_model=64.
    """
    if actual != expected:
        raise ValueError(
            f"The input's last axis has {actual} features but the layer was built with "
            f"{name}={expected}."
        )


def per_example_shape(
    offset_shape: tuple[int | None, ...], x_shape: tuple[int | None, ...]
) -> tuple[int, ...]:
    """The shape to give an offset before adding ``arange(seq)`` to it.

    An offset is a scalar (one offset for everything) or holds one offset per example
    along the first axis of ``x`` (``(batch,)``). It is reshaped to the returned shape
    (``(batch, 1, ..., 1)``, ``x.ndim - 2`` axes) and then ``offset[..., None] +
    arange(seq)`` gives positions ``(batch, 1, ..., seq)`` that broadcast against
    ``x.shape[:-1]``.

    >>> per_example_shape((), (2, 5, 8)), per_example_shape((2,), (2, 4, 5, 8))
    ((), (-1, 1))
    >>> per_example_shape((3,), (2, 5, 8))
    Traceback (most recent call last):
    ...
    ValueError: offset must be a scalar or hold one offset per example, shape (batch,) = (2,). Received: offset of shape (3,)
    """
    if len(offset_shape) == 0:
        return ()
    batch = x_shape[0] if len(x_shape) >= 3 else None
    if (
        len(offset_shape) != 1
        or len(x_shape) < 3
        or (offset_shape[0] not in (1, None) and batch is not None and offset_shape[0] != batch)
    ):
        expected = (
            f"(batch,) = ({batch},)"
            if len(x_shape) >= 3
            else "() for an input without a batch axis"
        )
        raise ValueError(
            f"offset must be a scalar or hold one offset per example, shape {expected}. "
            f"Received: offset of shape {tuple(offset_shape)}"
        )
    return (-1,) + (1,) * (len(x_shape) - 3)


def patch_grid(
    config: PatchEncodingConfig, x_shape: tuple[int, ...], grid_shape: Any
) -> tuple[tuple[int, ...], bool]:
    """``(grid shape, flattened?)`` of patch tokens of shape ``x_shape``.

    ``(batch, N, d)`` inputs are flattened grids of ``grid_shape`` (the call's, else the
    layer's), ``(batch, H, W, ..., d)`` inputs carry their grid; raises naming the
    mismatch.

    >>> from pe_core.layers import PatchEncodingConfig
    >>> patch_grid(PatchEncodingConfig(8, grid_shape=(2, 3)), (4, 6, 8), None)
    ((2, 3), True)
    >>> patch_grid(PatchEncodingConfig(8), (4, 2, 3, 8), None)
    ((2, 3), False)
    """
    if len(x_shape) < 3:
        raise ValueError(
            "x must have shape (batch, H * W, d_model) or (batch, H, W, d_model). "
            f"Received: shape {x_shape}"
        )
    check_features(x_shape[-1], config.d_model, "d_model")
    asked = check_grid_shape(grid_shape)
    shape = asked or config.grid_shape
    if len(x_shape) == 3:
        if shape is None:
            raise ValueError(
                "Flattened patch tokens (batch, H * W, d_model) need a grid_shape (the "
                f"layer's or forward's). Received: shape {x_shape}"
            )
        if math.prod(shape) != x_shape[1]:
            raise ValueError(
                f"The input has {x_shape[1]} patch tokens but the grid {shape} holds "
                f"{math.prod(shape)}."
            )
        return shape, True
    spatial = tuple(int(n) for n in x_shape[1:-1])
    if asked is not None and asked != spatial:
        raise ValueError(f"grid_shape {asked} does not match the input's grid {spatial}.")
    return spatial, False
