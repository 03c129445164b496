"""Angles, cos/sin and rotations from frequencies that are framework arrays.

The engine of :mod:`pe_core.trainable`. Frequencies held as constants (Python
numbers, NumPy arrays) go through the exact kernel (:mod:`pe_core._kernel.angles`);
frequencies that are a framework's arrays (a ``torch.nn.Parameter``, a JAX array or
tracer, a ``tf.Variable``) are values the model learns, so the angle is the plain
product ``pos * f`` computed where they live, in the working dtype, by the
framework's own differentiable operations: gradients reach the frequencies, nothing
is read back to the host, and compilers trace it like any other elementwise work.

Shapes. One-axis frequencies have shape ``L + (n,)`` and the angle of position ``p``
is ``p * f``, with a sequence axis inserted before the pairs:
``angle = pos[..., None] * f[..., None, :]``, so ``(n,)`` is one vector for every
head and ``(heads, n)`` broadcasts against ``x``'s ``(..., heads, seq, head_dim)``.
Mixed-axis frequencies have shape ``(k,) + L + (n,)`` with positions ``(..., k)``:
``angle = sum_a pos[..., a, None] * f[a][..., None, :]`` (RoPE-Mixed, Mochi).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pe_core._kernel.features import assemble
from pe_core._kernel.inputs import working_dtype
from pe_core._rope_call import as_input, check_head_dim, check_layout, classify, each
from pe_core.spec import Spec
from pe_core.validation import broadcasts_into, is_integer
from pe_core_backends import Namespace, backend_of, canonical_backend, get_namespace

__all__ = [
    "encode_frequencies",
    "framework_angles",
    "framework_frequencies",
    "learned_angles",
    "learned_rope",
    "mixed_axes",
    "rope_with_frequencies",
]


def framework_frequencies(frequencies: object) -> bool:
    """Whether ``frequencies`` is an array of a framework other than NumPy (a tensor,
    a ``Parameter``, a JAX array or tracer, a ``tf.Variable``): then it takes this
    engine's route, else the exact one.

    >>> framework_frequencies((1.0, 0.5)), framework_frequencies(np.ones(2))
    (False, False)
    """
    name = backend_of(frequencies)
    return name is not None and not get_namespace(name).numpy_arrays


def _namespace(frequencies: object) -> Namespace:
    """The namespace of framework-array ``frequencies``, else ``TypeError``."""
    if not framework_frequencies(frequencies):
        raise TypeError(
            "frequencies must be a framework array here (torch, jax, tensorflow). "
            f"Received: {type(frequencies).__name__}"
        )
    return get_namespace(backend_of(frequencies))  # type: ignore[arg-type]


def _check_framework(frequencies: Any, backend: Any, like: Any = None) -> None:
    """``TypeError`` unless ``backend=`` and ``like=`` (where given) are the frequencies'
    framework: framework frequencies are computed where they live."""
    name = backend_of(frequencies)
    for what, other, read in (("backend", backend, canonical_backend), ("like", like, backend_of)):
        if other is not None and read(other) != name:
            raise TypeError(
                f"{what}={other!r} differs from the framework of frequencies ({name!r}); "
                "framework frequencies are computed where they live."
            )


def _check_frequencies(xp: Namespace, frequencies: Any, axes: int | None) -> tuple[int, ...]:
    """The static shape of ``frequencies`` on ``xp``, checked (no value is read)."""
    dtype_name = xp.dtype_of(frequencies)
    if xp.kind(dtype_name) != "float":
        raise TypeError(
            "frequencies must be a floating array (angular frequencies, radians per "
            f"position). Received dtype: {dtype_name}"
        )
    shape = tuple(xp.shape(frequencies))
    if any(size is None for size in shape):
        raise ValueError(f"frequencies must have a static shape. Received shape: {tuple(shape)}")
    minimum = 1 if axes is None else 2
    if len(shape) < minimum or shape[-1] < 1:
        expected = "(..., n) with n >= 1" if axes is None else "(k, ..., n) with n >= 1"
        raise ValueError(f"frequencies must have shape {expected}. Received shape: {shape}")
    if axes is not None and shape[0] != axes:
        raise ValueError(
            f"frequencies has {shape[0]} rows on its first axis but pos has {axes} "
            f"coordinates on its last axis; they must agree. Received frequencies of "
            f"shape {shape}."
        )
    return shape


def _positions(
    xp: Namespace,
    pos: Any,
    like: Any,
    working: str,
    check_values: bool,
    tracing: bool,
    offset: int | float = 0,
) -> Any:
    """``pos + offset`` as an array of ``working`` dtype on ``like``'s backend and device
    (host values: the sum in float64, rounded once)."""
    positions = classify(pos, xp, check_values, tracing, like)
    wdtype = xp.dtype(working)
    if positions.array is not None:
        array = xp.astype(positions.array, wdtype)
        return array + offset if offset else array
    assert positions.host is not None
    values = np.asarray(positions.host, dtype=np.float64)
    if offset:
        values = values + offset
    return xp.asarray(values.astype(working), dtype=wdtype, like=like)


def _angle_shape(pos_shape: tuple[Any, ...], freq_shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The shape of ``pos[..., None] * f[..., None, :]`` (``None`` sizes stay unknown)."""
    a = (*pos_shape, 1)
    b = (*freq_shape[:-1], 1, freq_shape[-1])
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    out = []
    for p, f in zip(a, b, strict=True):
        if p is None or f is None:
            out.append(None if f in (None, 1) else f)
        elif p == 1 or f == 1 or p == f:
            out.append(max(p, f))
        else:
            raise ValueError(
                f"pos of shape {pos_shape} and frequencies of shape {freq_shape} do not "
                "broadcast: the angle is pos[..., None] * frequencies[..., None, :] "
                "(frequencies' leading axes, e.g. (heads,), broadcast against the axes "
                "before pos's sequence axis)."
            )
    return tuple(out)


def learned_angles(
    xp: Namespace, positions: Any, frequencies: Any, axes: int | None, working: str
) -> Any:
    """``pos * f`` (one axis, ``axes=None``) or ``sum_a pos[..., a] * f[a]`` (mixed), in
    ``working`` dtype: plain products, differentiable in every framework."""
    freqs = xp.astype(frequencies, xp.dtype(working))
    if axes is None:
        return xp.expand_dims(positions, -1) * xp.expand_dims(freqs, -2)
    total = xp.expand_dims(positions[..., 0], -1) * xp.expand_dims(freqs[0], -2)
    for a in range(1, axes):
        total = total + xp.expand_dims(positions[..., a], -1) * xp.expand_dims(freqs[a], -2)
    return total


def framework_angles(
    pos: Any,
    frequencies: Any,
    *,
    axes: int | None,
    working: str | None = None,
    like: Any = None,
    check_values: bool = False,
) -> tuple[Namespace, Any, tuple[Any, ...]]:
    """``(xp, angles, their shape)`` of ``pos`` at framework-array ``frequencies``
    (``working`` by default: float64 for float64 frequencies, else float32)."""
    xp = _namespace(frequencies)
    freq_shape = _check_frequencies(xp, frequencies, axes)
    if working is None:
        working = working_dtype(xp.dtype_of(frequencies))
    tracing = xp.is_traced(frequencies) or (like is not None and xp.is_traced(like))
    positions = _positions(
        xp, pos, frequencies if like is None else like, working, check_values, tracing
    )
    pos_shape = tuple(xp.shape(positions))
    if axes is not None:
        if not pos_shape or pos_shape[-1] != axes:
            raise ValueError(
                f"pos must have a last axis of {axes} coordinates (one per row of "
                f"frequencies). Received pos of shape {pos_shape}."
            )
        pos_shape = pos_shape[:-1]
    shape = _angle_shape(pos_shape, freq_shape[1:] if axes is not None else freq_shape)
    return xp, learned_angles(xp, positions, frequencies, axes, working), shape


def mixed_axes(frequencies: Any) -> int:
    """``k``, the first axis of mixed-axis framework ``frequencies`` ``(k, ..., n)``."""
    shape = _namespace(frequencies).shape(frequencies)
    if len(shape) < 2 or not isinstance(shape[0], int) or shape[0] < 1:
        raise ValueError(
            f"mixed-axis frequencies must have shape (k, ..., n) with k >= 1. "
            f"Received shape: {tuple(shape)}"
        )
    return shape[0]


def learned_rope(
    x: Any,
    pos: Any,
    frequencies: Any,
    *,
    axes: int | None,
    layout: str,
    check_values: bool,
    rotary_dim: int | None = None,
) -> Any:
    """RoPE of ``x`` at framework-array ``frequencies`` (see the module docstring)."""
    layout = check_layout(layout)
    source = backend_of(x)
    host = source is None or get_namespace(source).numpy_arrays
    # host data (NumPy, lists) is uploaded to the frequencies' framework
    xp, x = as_input(x, backend_of(frequencies) if host else None)
    shape = xp.shape(x)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = check_head_dim(shape[-1])
    working = working_dtype(xp.dtype_of(x))
    xp_f, angles, angle_shape = framework_angles(
        pos, frequencies, axes=axes, working=working, like=x, check_values=check_values
    )
    if xp_f is not xp:
        raise TypeError(
            f"frequencies ({xp_f.name}) and x ({xp.name}) must be arrays of one framework."
        )
    n = angle_shape[-1]
    if rotary_dim is not None and (not is_integer(rotary_dim) or rotary_dim != 2 * n):
        raise ValueError(
            f"rotary_dim must be 2 * frequencies.shape[-1] = {2 * n} (or None). "
            f"Received: {rotary_dim!r}"
        )
    if 2 * n > head_dim:
        raise ValueError(
            f"frequencies has {n} entries on its last axis, more than head_dim / 2 = "
            f"{head_dim // 2} rotary pairs of x (shape {tuple(shape)})."
        )
    if not broadcasts_into(angle_shape[:-1], tuple(shape[:-1])):
        raise ValueError(
            f"The angles pos[..., None] * frequencies[..., None, :] have shape "
            f"{angle_shape}, which does not broadcast against x.shape[:-1] = "
            f"{tuple(shape[:-1])} without adding axes (x has shape {tuple(shape)} = "
            "(..., heads, seq, head_dim); per-head frequencies are (heads, n))."
        )
    return xp.rotate_pairs(x, xp.cos(angles), xp.sin(angles), layout, 2 * n, working)


def encode_frequencies(pos: Any, d: int, frequencies: Any, spec: Spec, *call: Any) -> Any:
    """:func:`pe_core.encode` with framework ``frequencies``: the sinusoidal table
    ``[sin(p f), cos(p f)]`` of ``pos + offset`` (``pos[..., None] * frequencies``, NumPy
    broadcasting). ``spec`` gives the layout and the offset; its own frequency schedule
    does not apply. ``call``: ``(backend, dtype, out, like, check_values)``."""
    backend, dtype, out, like, check_values = call
    if spec.axes != 1 or spec.frequencies is not None:
        raise ValueError(
            "frequencies= given as a framework array replaces the spec's schedule: use a "
            f"1-D spec without frequencies of its own. Received: {spec!r}"
        )
    if out is not None:
        raise ValueError(
            "out= is not supported with framework frequencies (the result is a "
            "differentiable array of the frequencies' framework)."
        )
    _check_framework(frequencies, backend, like)
    xp = _namespace(frequencies)
    freq_shape = _check_frequencies(xp, frequencies, None)
    if not is_integer(d) or d != 2 * freq_shape[-1]:
        raise ValueError(
            f"d must be 2 * frequencies.shape[-1] = {2 * freq_shape[-1]} with framework "
            f"frequencies (one sin/cos pair each). Received: {d!r}"
        )
    out_dtype = "float32" if dtype is None else xp.dtype_name(dtype)
    if xp.kind(out_dtype) != "float":
        raise ValueError(f"dtype must be a floating dtype. Received: {dtype!r}")
    working = working_dtype(out_dtype)
    tracing = xp.is_traced(frequencies)
    positions = _positions(xp, pos, frequencies, working, check_values, tracing, spec.offset)
    freqs = xp.astype(frequencies, xp.dtype(working))
    angles = xp.expand_dims(positions, -1) * freqs
    table = assemble(xp, xp.sin(angles), xp.cos(angles), spec.layout)
    return xp.astype(table, xp.dtype(out_dtype)) if out_dtype != working else table


def rope_with_frequencies(x: Any, pos: Any, frequencies: Any, spec: Any, *config: Any) -> Any:
    """:func:`pe_core.apply_rope` with framework ``frequencies`` and no ``sections`` (``x``
    an array or a tuple of them): the arguments that choose frequencies must keep their
    defaults (the frequencies are given), ``layout``/``rotary_dim`` may come from ``spec``.
    ``config``: ``(base, layout, rotary_dim, scaling, layer_type, backend, check_values,
    section_layout)``."""
    base, layout, rotary_dim, scaling, layer_type, backend, check_values, section_layout = config
    if spec is not None:
        if scaling is not None or layer_type is not None or base != 10000.0:
            raise ValueError(
                "Pass the rope configuration either as spec= or as plain arguments, not both."
            )
        base, layout, rotary_dim, scaling = spec.base, spec.layout, spec.rotary_dim, spec.scaling
    given = {"base": base != 10000.0, "scaling": scaling is not None}
    given.update(layer_type=layer_type is not None, section_layout=section_layout != "contiguous")
    names = [name for name, is_given in given.items() if is_given]
    if names:
        raise ValueError(
            f"{', '.join(names)} cannot be combined with frequencies given as a framework "
            "array: such frequencies are used as given (scale them in the model)."
        )
    _check_framework(frequencies, backend)
    options = {"layout": layout, "rotary_dim": rotary_dim, "check_values": check_values}
    return each(lambda item: learned_rope(item, pos, frequencies, axes=None, **options), x)
