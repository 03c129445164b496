"""Argument checks of the framework layers, in :mod:`pe_core.validation`'s wording.

What a layer checks beyond its spec: the dropout rate, the ``max_len`` cache size, a
patch grid, flags, and at call time the inputs' ranks and features and a per-example
offset's shape. Everything :class:`~pe_core.Spec`, :class:`~pe_core.RopeSpec` and
the kernels already validate is left to them. Messages read ``"<name> must be
<allowed>. Received: <value!r>"``; ``TypeError`` for a wrong type, ``ValueError`` for
a wrong value.

>>> check_dropout(1.5)
Traceback (most recent call last):
...
ValueError: dropout must be a number in [0, 1). Received: 1.5
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, cast

from pe_core._schedule import check_d
from pe_core.spec import Spec
from pe_core.validation import flag, is_integer
from pe_core_backends import get_namespace

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


#: A ``True``/``False`` argument (NumPy booleans too) as a bool: the one check of
#: :mod:`pe_core.validation`.
check_flag = flag


def check_argument_order(dropout: object, max_len: object) -> None:
    """Name the likely mistake of the ``(d_model, max_len, dropout)`` argument order.

    >>> check_argument_order(5000, 0.1)
    Traceback (most recent call last):
    ...
    ValueError: dropout=5000 and max_len=0.1: the arguments look swapped. SinusoidalEncoding takes (d_model, dropout, max_len), in the order of the textbook PositionalEncoding(d_model, dropout, max_len); pass them by name.
    """
    if (
        isinstance(dropout, numbers.Integral)
        and not isinstance(dropout, bool)
        and int(dropout) >= 1
        and isinstance(max_len, numbers.Real)
        and not isinstance(max_len, numbers.Integral)
    ):
        raise ValueError(
            f"dropout={dropout!r} and max_len={max_len!r}: the arguments look swapped. "
            "SinusoidalEncoding takes (d_model, dropout, max_len), in the order of the "
            "textbook PositionalEncoding(d_model, dropout, max_len); pass them by name."
        )


# --------------------------------------------------------------------------- call time


def check_features(actual: int | None, expected: int, name: str) -> None:
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


def check_offset(
    offset: Any,
    array: Any = None,
    refused: Any = None,
    noun: str = "a tensor",
    symbolic: tuple[type, ...] = (),
) -> Any:
    """``offset`` validated: a Python int (or one of a framework's ``symbolic`` ints, kept
    as it is), or per-example offsets ``(batch,)``: ``array``, the framework's array of
    ``offset`` (given when ``offset`` is one), refused when ``refused`` names its dtype
    (one neither integer nor floating). ``noun`` names such arrays in the messages.

    >>> import numpy as np
    >>> check_offset(np.int64(3))
    3
    >>> check_offset(2.5, noun="an array")
    Traceback (most recent call last):
    ...
    TypeError: offset must be an int or an array of per-example offsets (batch,). Received: 2.5
    """
    if array is not None:
        if refused is not None:
            raise TypeError(
                f"offset must be an int or an integer/float {noun.split()[-1]}. "
                f"Received dtype: {refused}"
            )
        return array
    if isinstance(offset, bool) or not isinstance(offset, (numbers.Integral, *symbolic)):
        raise TypeError(
            f"offset must be an int or {noun} of per-example offsets (batch,). Received: {offset!r}"
        )
    return offset if isinstance(offset, symbolic) else int(cast(numbers.Integral, offset))


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


def check_sequence_input(shape: tuple[int | None, ...], name: str = "x") -> None:
    """Raise unless an input of shape ``shape`` has a sequence axis and a feature axis.

    >>> check_sequence_input((8,), "inputs")
    Traceback (most recent call last):
    ...
    ValueError: inputs must have shape (..., seq, d_model). Received: shape (8,)
    """
    if len(shape) < 2:
        raise ValueError(f"{name} must have shape (..., seq, d_model). Received: shape {shape}")


def check_query_key(
    shape: tuple[int | None, ...], head_dim: int, names: str = "q and k", *, known_seq: bool = False
) -> None:
    """Raise unless a query or key of shape ``shape`` is ``(..., seq, head_dim)`` (with a
    known ``seq`` when ``known_seq``).

    >>> check_query_key((8,), 8)
    Traceback (most recent call last):
    ...
    ValueError: q and k must have shape (..., seq, head_dim). Received: (8,)
    >>> check_query_key((2, 6), 8)
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 6 features but the layer was built with head_dim=8.
    """
    if len(shape) < 2 or (known_seq and shape[-2] is None):
        known = " with a known seq" if known_seq else ""
        raise ValueError(f"{names} must have shape (..., seq, head_dim){known}. Received: {shape}")
    check_features(shape[-1], head_dim, "head_dim")


def scores_shape(shape: tuple[int | None, ...]) -> tuple[int, int, int]:
    """``(n_heads, query_length, key_length)`` of attention scores ``(batch, heads, q, k)``.

    >>> scores_shape((2, 8, 3, 5))
    (8, 3, 5)
    >>> scores_shape((8, 3, 5))
    Traceback (most recent call last):
    ...
    ValueError: attention_scores must have shape (batch, n_heads, query_length, key_length) with known heads and lengths. Received: shape (8, 3, 5)
    """
    if len(shape) != 4 or any(n is None for n in shape[1:]):
        raise ValueError(
            "attention_scores must have shape (batch, n_heads, query_length, key_length) "
            f"with known heads and lengths. Received: shape {shape}"
        )
    return int(shape[1]), int(shape[2]), int(shape[3])  # type: ignore[arg-type]


#: An int offset below this (in magnitude) takes int32 positions when the sequence
#: length is unknown (room for 2**30 steps); int64 positions up to ``2**62``.
_INT32_OFFSETS = 2**30
_INT64_OFFSETS = 2**62


def offset_dtype(offset: int, backend: str) -> str:
    """The integer dtype of ``offset + arange(seq)`` on the Keras ``backend`` for a
    sequence length unknown on the host (a traced graph's ``None`` axis): int32 where it
    cannot overflow, else int64.

    >>> offset_dtype(5, "numpy"), offset_dtype(2**40, "numpy")
    ('int32', 'int64')
    """
    if abs(offset) < _INT32_OFFSETS:
        return "int32"
    if abs(offset) >= _INT64_OFFSETS or not get_namespace(backend).supports("int64"):
        limit = "2**62" if get_namespace(backend).supports("int64") else "2**30 (no int64)"
        raise ValueError(
            f"offset must be below {limit} in magnitude when the sequence length is "
            f"unknown (a traced graph with a None sequence axis) on Keras backend "
            f"{backend!r}: offset + arange(seq) is computed there in integers. "
            f"Received: offset={offset}. Give the sequence length statically, or pass "
            "the positions themselves."
        )
    return "int64"
