"""``apply_rope``: rotary position embedding (RoPE) of queries and keys, on any backend.

RoPE rotates every pair of features ``(a, b)`` of a query or key at position ``p`` by
the angle ``p * w_j`` of the pair's frequency:

    a' = a cos(p w_j) - b sin(p w_j)
    b' = b cos(p w_j) + a sin(p w_j)

so that ``<rope(q, m), rope(k, n)>`` depends on ``m - n`` only. Two layouts pair the
features differently: ``"half"`` pairs ``(j, j + r/2)`` (rotate-half: GPT-NeoX, Llama,
Hugging Face) and ``"interleaved"`` pairs ``(2j, 2j + 1)`` (GPT-J, RoFormer).
:func:`~pe_core.rope_layout.rope_permutation` converts weights between them.

The angles come from the exact kernel of :mod:`pe_core.angles` (on the host in float64
when the positions are known, on the device in float32 when they are traced), and the
rotation runs in float32 (float64 for float64 inputs) whatever the dtype of ``x``.

The call classifies its positions once (:mod:`pe_core.placement`): positions the
host knows get exact cos/sin built on the host (moved to an accelerator once and
cached there); positions on an accelerator or traced get them from the exact integer
kernel on the device, with no host read. The rotation itself is the namespace's
:meth:`~pe_core_backends.Namespace.rotate_pairs` (jitted for JAX, in place for eager
PyTorch, generic elsewhere).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pe_core import device_tables
from pe_core.angles import exact_cos_sin
from pe_core.host_tables import host_sin_cos, small_call_fits
from pe_core.placement import Positions, prepare_positions
from pe_core.rope_layout import LAYOUTS
from pe_core.rope_scaling import needs_seq_len, scaling_rope_type
from pe_core.rope_small import few_positions_rope, small_cos_sin
from pe_core.rope_spec import RopeSpec, freeze, rope_constants
from pe_core.rope_spec import scaling_for_layer as _scaling_for_layer
from pe_core.validation import broadcasts_into, choice, finite_real
from pe_core_backends import (
    Namespace,
    backend_of,
    canonical_backend,
    from_dlpack,
    get_namespace,
    is_dlpack,
)

__all__ = ["LAYOUTS", "apply_rope"]


def apply_rope(
    x: Any,
    pos: Any,
    *,
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim: int | None = None,
    scaling: Mapping[str, Any] | None = None,
    layer_type: str | None = None,
    backend: str | None = None,
    check_values: bool = False,
    sections: Sequence[int] | None = None,
    section_layout: str = "contiguous",
    frequencies: str | Sequence[float] | None = None,
    spec: RopeSpec | None = None,
) -> Any:
    """Rotate queries or keys ``x`` by their positions ``pos`` (rotary embedding).

    Parameters
    ----------
    x : array
        Queries or keys of shape ``(..., seq, head_dim)`` (any number of leading
        axes, e.g. ``(batch, heads, seq, head_dim)``) from NumPy, JAX, PyTorch or
        TensorFlow, in float16, bfloat16, float32 or float64. ``head_dim`` must be even.
        A tuple or list of arrays (``(q, k)``) rotates each at the same positions and
        returns a tuple: the positions are classified and cos/sin built once (a decode
        step's queries and keys in one call; their leading axes may differ).
    pos : int, float, sequence, range or array
        Positions, broadcasting against ``x.shape[:-1]`` = ``(..., seq)``: ``(seq,)``
        for one sequence, ``(batch, 1, seq)`` for per-example positions (packed
        sequences, KV-cache decoding with per-example offsets), a scalar for one
        position everywhere. Integer or floating; negative and fractional positions
        are valid. Arrays from another framework are moved (when not traced).
    base : float
        ``rope_theta``: pair ``j`` turns ``base ** (-2j / rotary_dim)`` radians per
        position. Must be > 1. Used unless ``scaling`` sets ``rope_theta``.
    layout : {"half", "interleaved"}
        ``"half"`` rotates pairs ``(j, j + r/2)`` (GPT-NeoX, Llama, Hugging Face);
        ``"interleaved"`` rotates pairs ``(2j, 2j + 1)`` (GPT-J, RoFormer).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (partial rotary: GPT-NeoX,
        GPT-J, Phi); the others pass through unchanged. Even, at most ``head_dim``;
        ``head_dim`` by default. The frequencies use ``rotary_dim`` as their
        dimension, as transformers does.
    scaling : Mapping, optional
        Context-extension scaling, read by :func:`~pe_core.rope_scaling.rope_frequencies`.
        Either

        * a rope-parameters dict (it has a ``rope_type`` or ``type`` key), i.e. what a
          model's ``config.json`` holds under ``rope_parameters``/``rope_scaling``,
          e.g. ``{"rope_type": "yarn", "factor": 4.0,
          "original_max_position_embeddings": 4096}``. The rotary dimension is
          ``rotary_dim`` (or ``int(head_dim * partial_rotary_factor)`` if the dict has
          that key); ``rope_theta`` in the dict wins over ``base``. Types that need
          the context length (``dynamic``; ``yarn``/``longrope`` without ``factor``)
          read ``max_position_embeddings`` from the dict; or
        * a whole model config (no ``rope_type``/``type`` key at the top), e.g.
          ``json.load(open("config.json"))``: used as is, with ``head_dim`` filled in
          from ``x`` and ``rope_theta`` from ``base`` when the config lacks them. Its
          rotary dimension must agree with ``rotary_dim`` when both are given.

        cos and sin are multiplied by the type's ``attention_factor`` (yarn,
        longrope), as transformers does. ``dynamic`` and ``longrope`` choose their
        frequencies from ``seq_len = max(pos) + 1`` (transformers' rule, evaluated
        per call, without state), so they need positions whose values are known
        (not traced). A transformers ``PretrainedConfig`` (anything with
        ``to_dict()``) is read as its ``to_dict()``.
    layer_type : str, optional
        With a model config as ``scaling`` that has rope parameters per layer type
        (Gemma 3: ``"full_attention"``, ``"sliding_attention"``): the layer type whose
        rope to apply (see :func:`~pe_core.rope_scaling.rope_frequencies`); required
        for such configs.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; ``None`` follows ``x`` (a torch tensor gives a torch tensor
        on the same device).
    check_values : bool
        Positions on an accelerator are never read back by default: NaN, infinite or
        out-of-range positions there give NaN outputs instead of an error, and
        ``dynamic``/``longrope`` scaling (which needs ``max(pos)``) is refused. ``True``
        reads them (this synchronises) and raises as for host positions.
    sections : sequence of int, optional
        N-D RoPE (:mod:`pe_core.rope_nd`): ``pos`` then has a trailing axis of
        ``k = len(sections)`` coordinates (e.g. ``(t, h, w)``) and ``sections`` counts
        the rotary pairs that follow each one (``sum(sections) == rotary_dim / 2``):
        pair ``j`` keeps its 1-D frequency and turns by the coordinate of the axis whose
        section holds it (Qwen2-VL M-RoPE's ``mrope_section``). ``dynamic`` and
        ``longrope`` scaling are refused.
    section_layout : {"contiguous", "interleaved"}
        With ``sections``: axis 0 takes the first ``s_0`` pairs, axis 1 the next ``s_1``,
        ... (``"contiguous"``), or pairs cycle through the axes (``"interleaved"``,
        Qwen3-VL ``mrope_interleaved``); see :func:`~pe_core.rope_nd.pair_axes`.
    frequencies : {None, "per_axis"} or sequence of float
        With ``sections``: ``None`` keeps the 1-D schedule over ``rotary_dim``;
        ``"per_axis"`` gives axis ``a`` its own schedule over ``2 * s_a`` features (FLUX
        ``EmbedND``, axial RoPE); a sequence gives every pair's angular frequency (e.g.
        :func:`~pe_core.rope_nd.pixel_frequencies`).
    spec : RopeSpec, optional
        ``base``, ``layout``, ``rotary_dim``, ``scaling`` and ``layer_type`` as one
        frozen, validated :class:`~pe_core.rope_spec.RopeSpec` (validated once, when it
        is built; layers hold one). Those five arguments must then keep their defaults.

    Returns
    -------
    array or tuple of arrays
        Same shape, dtype, backend and device as ``x`` (a tuple for a tuple ``x``). With ``theta = pos * w_j``
        and the pair ``(a, b)`` = features ``(j, j + r/2)`` (half) or ``(2j, 2j+1)``
        (interleaved): ``a' = a cos(theta) - b sin(theta)``,
        ``b' = b cos(theta) + a sin(theta)``, exactly Hugging Face's
        ``x * cos + rotate_half(x) * sin`` for the half layout.

        Relation to :func:`~pe_core.relative_matrix`: with
        ``spec = Spec(frequencies=w, layout="interleaved")`` and ``M_p =
        relative_matrix(p, r, spec)`` (which maps ``[sin, cos]`` pairs from position
        ``q`` to ``q + p``, a rotation by ``-p w``),
        ``apply_rope(x, p, layout="interleaved") == x @ M_p == M_(-p) @ x``:
        RoPE at position ``p`` is ``M_p`` transposed.

    Raises
    ------
    ValueError
        Odd ``head_dim``; ``rotary_dim`` odd, < 2 or > ``head_dim``; positions that do
        not broadcast against ``x.shape[:-1]``; an unknown ``layout``; non-finite
        positions; ``base`` <= 1; anything :func:`~pe_core.rope_scaling.rope_frequencies`
        rejects in ``scaling``.
    TypeError
        ``x`` not a floating array, ``scaling`` not a mapping, traced positions on
        another backend.

    Notes
    -----
    Precision: the angle ``pos * w_j`` is reduced exactly (no float32 ``pos * w``
    product, so large positions keep their accuracy); cos and sin are computed in
    float64 on the host when the positions are known, in float32 on the device when
    they are traced (float64 for float64 ``x``); the rotation runs in float32 (or
    float64) and is rounded once to ``x``'s dtype. A float16/bfloat16 ``x`` in an
    eager call off an accelerator (where the backend has float64) is rotated in
    float64: within one ulp of the exact result. Traced and accelerator calls rotate
    it in float32: within the bound measured in :doc:`precision` (a few ulps where
    the two products nearly cancel). Every finite host position is exact, any size.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core.rope import apply_rope
    >>> x = np.ones((3, 4), dtype=np.float32)  # (seq, head_dim)
    >>> y = apply_rope(x, np.arange(3))
    >>> y.shape, y.dtype
    ((3, 4), dtype('float32'))
    >>> y[0].tolist()  # position 0 is the identity
    [1.0, 1.0, 1.0, 1.0]
    >>> c, s = np.cos(1.0), np.sin(1.0)  # pair (0, 2) turns 1 radian per position
    >>> bool(np.allclose(y[1, [0, 2]], [c - s, c + s]))
    True
    >>> q, k = np.random.default_rng(0).standard_normal((2, 8))
    >>> a = apply_rope(q, 7) @ apply_rope(k, 3)  # scores depend on m - n only
    >>> bool(np.isclose(a, apply_rope(q, 1004) @ apply_rope(k, 1000)))
    True
    """
    plain = _all_none(scaling, layer_type, backend, sections, frequencies)
    if plain and not check_values and section_layout == "contiguous":
        # a decode step: the few-positions lane, if it takes the call
        result = few_positions_rope(x, pos, base, layout, rotary_dim, spec)
        if result is not None:
            return result
    base, layout, rotary_dim, scaling = _configuration(
        spec, base, layout, rotary_dim, scaling, layer_type
    )
    if not _all_none(sections, frequencies) or section_layout != "contiguous":
        nd = functools.partial(
            _apply_rope_nd,
            pos=pos,
            sections=sections,
            section_layout=section_layout,
            frequencies=frequencies,
            base=base,
            layout=layout,
            rotary_dim=rotary_dim,
            scaling=scaling,
            backend=backend,
            check_values=check_values,
        )
        return tuple(nd(item) for item in x) if isinstance(x, (tuple, list)) else nd(x)
    if isinstance(x, (tuple, list)):  # (q, k): one set of factors for all of them
        return _apply_rope_each(
            tuple(x), pos, base, layout, rotary_dim, scaling, backend, check_values
        )
    xp, x, cos, sin, layout, rotary_dim, working = _rope_factors(
        x, pos, base, layout, rotary_dim, scaling, backend, check_values
    )
    return xp.rotate_pairs(x, cos, sin, layout, rotary_dim, working)


def _configuration(
    spec: RopeSpec | None,
    base: float,
    layout: str,
    rotary_dim: int | None,
    scaling: Any,
    layer_type: str | None,
) -> tuple[float, str, int | None, Any]:
    """``(base, layout, rotary_dim, scaling)`` from ``spec`` or the plain arguments, the
    scaling reduced to ``layer_type``'s rope of a model config."""
    if spec is not None:
        base, layout, rotary_dim, scaling, layer_type = _unpack_spec(
            spec, base, layout, rotary_dim, scaling, layer_type
        )
    if scaling is not None and (layer_type is not None or not isinstance(scaling, Mapping)):
        scaling = _scaling_for_layer(scaling, layer_type)
    elif layer_type is not None:
        raise ValueError(
            f"layer_type={layer_type!r} selects a layer's rope from a model config given as "
            "scaling=, but scaling is None."
        )
    return base, layout, rotary_dim, scaling


def _apply_rope_nd(x: Any, **kwargs: Any) -> Any:
    from pe_core.rope_nd import apply_rope_nd  # N-D RoPE: its own module

    return apply_rope_nd(x, **kwargs)


def _all_none(*values: object) -> bool:
    return all(value is None for value in values)


def _apply_rope_each(
    xs: tuple[Any, ...],
    pos: Any,
    base: float,
    layout: str,
    rotary_dim: int | None,
    scaling: Any,
    backend: str | None,
    check_values: bool,
) -> tuple[Any, ...]:
    """``apply_rope`` of every array in ``xs`` at the same positions, sharing cos/sin.

    The positions are classified and the factors built once, from the first array;
    the others must share its backend, dtype and ``head_dim`` (their leading axes may
    differ, e.g. 32 query heads and 8 key heads), else they are rotated one by one.
    """
    if not xs:
        raise ValueError("x is an empty sequence; pass an array or a tuple of arrays.")
    xp, first, cos, sin, layout_, rotary_dim_, working = _rope_factors(
        xs[0], pos, base, layout, rotary_dim, scaling, backend, check_values
    )
    out = [xp.rotate_pairs(first, cos, sin, layout_, rotary_dim_, working)]
    head_dim, dtype = xp.shape(first)[-1], xp.dtype_of(first)
    pos_shape = tuple(xp.shape(cos))[:-1]
    for x in xs[1:]:
        xp_x, x = _as_input(x, backend)
        shape = xp_x.shape(x)
        if xp_x is xp and shape and shape[-1] == head_dim and xp.dtype_of(x) == dtype:
            _check_broadcast(pos_shape, shape)
            out.append(xp.rotate_pairs(x, cos, sin, layout_, rotary_dim_, working))
        else:  # another backend, dtype or head_dim: its own factors
            out.append(
                apply_rope(
                    x,
                    pos,
                    base=base,
                    layout=layout,
                    rotary_dim=rotary_dim,
                    scaling=scaling,
                    backend=backend,
                    check_values=check_values,
                )
            )
    return tuple(out)


def _rope_factors(
    x: Any,
    pos: Any,
    base: float,
    layout: str,
    rotary_dim: int | None,
    scaling: Any,
    backend: str | None,
    check_values: bool,
) -> tuple[Namespace, Any, Any, Any, str, int, str]:
    """Validate one 1-D call and build its ``cos``/``sin`` (prepare → plan)."""
    layout = _check_layout(layout)
    xp, x = _as_input(x, backend)
    shape = xp.shape(x)
    x_dtype = xp.dtype_of(x)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = _check_head_dim(shape[-1])
    rotary_dim = _check_rotary_dim(rotary_dim, head_dim)
    working = "float64" if x_dtype == "float64" else "float32"
    base = _check_base(base)

    positions = prepare_positions(
        pos,
        xp,
        backend_of(pos),
        what="pos",
        check_values=check_values,
        tracing=xp.is_traced(x),
    )
    _check_broadcast(positions.shape, shape)

    seq_len = None
    if needs_seq_len(scaling):
        seq_len = _seq_len(xp, positions, str(scaling_rope_type(scaling)), check_values)
    inv_freq, attention_factor = xp.host_constant(
        _scaling_constants, scaling, base, head_dim, rotary_dim, seq_len
    )
    rotary_dim = 2 * len(inv_freq)

    if positions.placement == "host":
        if working == "float32" and x_dtype != "float32" and _host_float64(xp, x):
            working = "float64"  # float16/bfloat16 x: float64 rotation, rounded once
        cos, sin = _host_factors(xp, positions, inv_freq, attention_factor, working, x)
    else:
        cos, sin = exact_cos_sin(
            xp, positions.array, inv_freq, working=working, scale=attention_factor
        )
    return xp, x, cos, sin, layout, rotary_dim, working


def _host_float64(xp: Namespace, x: Any) -> bool:
    """Whether a float16/bfloat16 ``x`` is rotated in float64 (eager, off accelerators,
    where the backend has float64): then within one ulp of the exact result. Traced
    and accelerator calls rotate in float32 (see :doc:`precision`)."""
    return xp.supports("float64") and not xp.on_accelerator(x) and not xp.is_traced(x)


def _seq_len(xp: Namespace, positions: Positions, rope_type: str, check_values: bool) -> int:
    """``max(pos) + 1``, transformers' context length for ``dynamic``/``longrope``."""
    values = positions.host
    if values is None and positions.placement == "device" and check_values:
        values = xp.to_numpy(positions.array)  # the caller accepted a synchronisation
    if values is None:
        raise ValueError(
            f"scaling with rope_type {rope_type!r} chooses its frequencies from "
            "seq_len = max(pos) + 1, which is unknown for traced positions and is not "
            "read back from positions on an accelerator. Pass positions the host knows "
            "(a range, a NumPy array), check_values=True (reads them: synchronises), "
            "or a rope_type that does not depend on the sequence length (e.g. "
            "'linear', 'yarn', 'llama3')."
        )
    return max(1, math.floor(float(values.max())) + 1) if values.size else 1


def _host_factors(
    xp: Namespace,
    positions: Positions,
    inv_freq: tuple[float, ...],
    attention_factor: float,
    working: str,
    x: Any,
) -> tuple[Any, Any]:
    """``cos`` and ``sin`` of host positions, on ``x``'s backend and device.

    Built exactly on the host (:func:`~pe_core.host_tables.host_sin_cos`, split
    layout: ``[sin | cos]``) and placed through :mod:`pe_core.device_tables`: kept on
    an accelerator, and for small position arrays everywhere (the query and the key
    of a decode step share them).
    """
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    n = len(inv_freq)
    rounded_once = xp.dtype_of(x) in ("float16", "bfloat16")
    if (
        working == "float32"
        and not rounded_once
        and not xp.on_accelerator(x)
        and small_call_fits(
            values.size, n, max_abs, 0, inv_freq, integral=values.dtype.kind in "iu"
        )
    ):
        # a few positions off an accelerator (decode steps): one float64 pass, no cache
        cos, sin = small_cos_sin(values, inv_freq, attention_factor)
        return xp.from_host(cos, like=x), xp.from_host(sin, like=x)

    def build() -> tuple[np.ndarray, np.ndarray]:
        table = host_sin_cos(
            values,
            inv_freq,
            offset=0.0,
            layout="split",
            working=working,
            max_abs=max_abs,
            # small calls for float16/bfloat16 x: float64 cos/sin, rounded once (the
            # rotation nearly cancels in places, where float32's error would show)
            rounded_once=rounded_once,
        )
        table = np.asarray(table).reshape(*values.shape, 2, n)
        if attention_factor != 1.0:
            table = table * attention_factor
        table = table.astype(working, copy=False)
        return np.ascontiguousarray(table[..., 1, :]), np.ascontiguousarray(table[..., 0, :])

    values_key = device_tables.values_key(values)
    keep = xp.on_accelerator(x) or values.size <= device_tables.MAX_KEYED_VALUES
    key = ("rope", values_key, inv_freq, attention_factor, rounded_once)
    return device_tables.cached(
        xp, key if keep and values_key else None, x, working, build, private=True
    )


# --------------------------------------------------------------------------- validation


_SPEC_CONFLICT = (
    "Pass the rope configuration either as spec= or as {name}=, not both (spec already "
    "holds base, layout, rotary_dim, scaling and layer_type)."
)


def _unpack_spec(
    spec: object,
    base: float,
    layout: str,
    rotary_dim: int | None,
    scaling: Any,
    layer_type: str | None,
) -> tuple[float, str, int | None, Any, None]:
    """``(base, layout, rotary_dim, scaling, None)`` of ``spec`` (scaling reduced to its
    layer type); the plain arguments must keep their defaults."""
    if not isinstance(spec, RopeSpec):
        raise TypeError(f"spec must be a RopeSpec or None. Received: {spec!r}")
    given = {"base": base != 10000.0, "layout": layout != "half"}
    given |= {"rotary_dim": rotary_dim is not None, "scaling": scaling is not None}
    given["layer_type"] = layer_type is not None
    for name, is_given in given.items():
        if is_given:
            raise ValueError(_SPEC_CONFLICT.format(name=name))
    return spec.base, spec.layout, spec.rotary_dim, spec.resolved_scaling, None


def _check_layout(layout: object) -> str:
    return choice(layout, "layout", LAYOUTS)


def _as_input(x: Any, backend: str | None) -> tuple[Namespace, Any]:
    source = backend_of(x)
    if source is None and is_dlpack(x):  # e.g. CuPy: imported by the backend computed on
        source = canonical_backend(backend) if backend is not None else "numpy"
        x = from_dlpack(x, source, what="x")
    if source is None:
        if isinstance(x, (bool, numbers.Number)):
            raise TypeError(
                f"x must be an array of shape (..., seq, head_dim). Received: {type(x).__name__}"
            )
        x = np.asarray(x)
        source = "numpy"
    name = canonical_backend(backend) if backend is not None else source
    xp = get_namespace(name)
    if name != source:
        values = get_namespace(source).concrete(x)
        if values is None:
            raise TypeError(
                f"x is a traced {source} value and cannot be moved to backend {name!r}; "
                "call with backend=None (or the same backend) inside compiled code."
            )
        x = xp.asarray(values)
    dtype_name = xp.dtype_of(x)
    if xp.kind(dtype_name) != "float":
        raise TypeError(
            "x must be a floating array (float16, bfloat16, float32 or float64). "
            f"Received dtype: {dtype_name}"
        )
    return xp, x


def _check_head_dim(head_dim: int) -> int:
    if head_dim is None:  # unknown in a traced graph (tf.function signatures)
        raise ValueError(
            "head_dim (the last axis of x) must be known when tracing (other axes may be "
            f"unknown or symbolic). Received: head_dim={head_dim!r}"
        )
    if head_dim < 2 or head_dim % 2:
        raise ValueError(
            "head_dim (the last axis of x) must be even and >= 2: RoPE rotates pairs of "
            f"features. Received: head_dim={head_dim}"
        )
    return head_dim


def _check_rotary_dim(rotary_dim: object, head_dim: int) -> int | None:
    if rotary_dim is None:
        return None
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, numbers.Integral):
        raise TypeError(f"rotary_dim must be an integer or None. Received: {rotary_dim!r}")
    value = int(rotary_dim)
    if value % 2 or not 2 <= value <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in [2, head_dim={head_dim}]. Received: {value}"
        )
    return value


def _check_base(base: object) -> float:
    if type(base) is float and 1.0 < base < math.inf:  # the common case, checked cheaply
        return base
    return finite_real(base, "base (rope_theta)", greater_than=1)


def _check_broadcast(pos_shape: tuple[int, ...], x_shape: tuple[int, ...]) -> None:
    lead = tuple(x_shape[:-1])
    if broadcasts_into(pos_shape, lead):
        return
    try:
        ok = np.broadcast_shapes(pos_shape, lead) == lead
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"pos of shape {pos_shape} does not broadcast against x.shape[:-1] = {lead} "
            f"(x has shape {tuple(x_shape)} = (..., seq, head_dim)). Give positions of "
            "shape (seq,), (batch, 1, seq) or any shape that broadcasts to x.shape[:-1] "
            "without adding axes."
        )


def _scaling_constants(
    scaling: Any, base: float, head_dim: int, rotary_dim: int | None, seq_len: int | None
) -> tuple[tuple[float, ...], float]:
    """:func:`~pe_core.rope_spec.rope_constants` of ``scaling`` as given (frozen here, on
    the host: compilers embed the result and never trace the freezing)."""
    frozen = freeze(scaling) if scaling is not None else None
    return rope_constants(frozen, base, head_dim, rotary_dim, seq_len)
