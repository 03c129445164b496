"""``apply_rope``: rotary position embedding (RoPE) of queries and keys, on any backend.

RoPE rotates every pair of features ``(a, b)`` of a query or key at position ``p`` by
the angle ``p * w_j`` of the pair's frequency:

    a' = a cos(p w_j) - b sin(p w_j)
    b' = b cos(p w_j) + a sin(p w_j)

so that ``<rope(q, m), rope(k, n)>`` depends on ``m - n`` only. Two layouts pair the
features differently: ``"half"`` pairs ``(j, j + r/2)`` (rotate-half: GPT-NeoX, Llama,
Hugging Face) and ``"interleaved"`` pairs ``(2j, 2j + 1)`` (GPT-J, RoFormer).
:func:`~pe_core.rope_layout.rope_permutation` converts weights between them.

The angles come from the exact kernel of :mod:`pe_core._kernel.angles` (on the host in float64
when the positions are known, on the device in float32 when they are traced), and the
rotation runs in float32 (float64 for float64 inputs) whatever the dtype of ``x``.

The call classifies its positions once (:mod:`pe_core._kernel.placement`): positions the
host knows get exact cos/sin built on the host (moved to an accelerator once and
cached there); positions on an accelerator or traced get them from the exact integer
kernel on the device, with no host read. The rotation itself is the namespace's
:meth:`~pe_core_backends.Namespace.rotate_pairs` (jitted for JAX, in place for eager
PyTorch, generic elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from pe_core._learned import framework_frequencies, rope_with_frequencies
from pe_core._rope_call import (
    all_none,
    as_input,
    check_broadcast,
    check_size,
    configuration,
    each,
    rope_factors,
)
from pe_core._rope_features import check_rotary_features, rope_last_features
from pe_core._rope_lane import few_positions_rope
from pe_core.rope_layout import LAYOUTS  # re-exported: rope_layout.LAYOUTS is canonical
from pe_core.rope_nd import apply_rope_nd
from pe_core.rope_spec import RopeSpec
from pe_core.typing import (
    ArrayT,
    BackendLike,
    HostData,
    NamedFrequencies,
    RopeConfig,
    RopeLayout,
    RotaryFeatures,
    SectionLayout,
    SupportsArray,
)
from pe_core_backends import any_dtensor, rope_on_shards

__all__ = ["LAYOUTS", "apply_rope"]


# fmt: off
@overload
def apply_rope(x: tuple[ArrayT, ...] | list[ArrayT], pos: SupportsArray | HostData,
    *, base: float = 10000.0, layout: RopeLayout = "half", rotary_dim: int | None = None,
    scaling: RopeConfig | None = None, layer_type: str | None = None,
    backend: BackendLike | None = None, check_values: bool = False,
    sections: Sequence[int] | None = None, section_layout: SectionLayout = "contiguous",
    frequencies: NamedFrequencies | Sequence[float] | SupportsArray | None = None,
    spec: RopeSpec | None = None, rotary_features: RotaryFeatures = "first",
) -> tuple[ArrayT, ...]: ...
@overload
def apply_rope(x: ArrayT, pos: SupportsArray | HostData,
    *, base: float = 10000.0, layout: RopeLayout = "half", rotary_dim: int | None = None,
    scaling: RopeConfig | None = None, layer_type: str | None = None,
    backend: BackendLike | None = None, check_values: bool = False,
    sections: Sequence[int] | None = None, section_layout: SectionLayout = "contiguous",
    frequencies: NamedFrequencies | Sequence[float] | SupportsArray | None = None,
    spec: RopeSpec | None = None, rotary_features: RotaryFeatures = "first",
) -> ArrayT: ...
# fmt: on


def apply_rope(
    x: Any,
    pos: Any,
    *,
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim: int | None = None,
    scaling: RopeConfig | None = None,
    layer_type: str | None = None,
    backend: BackendLike | None = None,
    check_values: bool = False,
    sections: Sequence[int] | None = None,
    section_layout: str = "contiguous",
    frequencies: str | Sequence[float] | Any | None = None,
    spec: RopeSpec | None = None,
    rotary_features: str = "first",
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
    section_layout : {"contiguous", "interleaved", "blocks"}
        With ``sections``: axis 0 takes the first ``s_0`` pairs, axis 1 the next ``s_1``,
        ... (``"contiguous"``), or pairs cycle through the axes (``"interleaved"``,
        Qwen3-VL ``mrope_interleaved``); see :func:`~pe_core.rope_nd.pair_axes`.
        ``"blocks"``: as ``"contiguous"``, with each axis's pairs formed inside its own
        block of ``2 * s_a`` features (a rotate-half per axis for ``layout="half"``:
        Gemma 4 vision, Allegro).
    frequencies : {None, "per_axis"} or sequence of float
        With ``sections``: ``None`` keeps the 1-D schedule over ``rotary_dim``;
        ``"per_axis"`` gives axis ``a`` its own schedule over ``2 * s_a`` features (FLUX
        ``EmbedND``, axial RoPE); a sequence gives every pair's angular frequency (e.g.
        :func:`~pe_core.rope_nd.pixel_frequencies`).

        Without ``sections``: a torch, JAX or TensorFlow array of shape ``(r/2,)`` or
        ``(heads, r/2)`` (trainable frequencies, :mod:`pe_core.trainable`): the angle
        is ``pos[..., None] * frequencies[..., None, :]`` computed on the device in the
        working dtype, differentiable in the frequencies; ``r = 2 *
        frequencies.shape[-1]`` features rotate. ``base``, ``scaling`` and
        ``layer_type`` then keep their defaults.
    spec : RopeSpec, optional
        ``base``, ``layout``, ``rotary_dim``, ``scaling`` and ``layer_type`` as one
        frozen, validated :class:`~pe_core.rope_spec.RopeSpec` (validated once, when it
        is built; layers hold one). Those five arguments must then keep their defaults.
    rotary_features : {"first", "last"}
        Which ``rotary_dim`` features of the head are rotated: the first (GPT-NeoX,
        GPT-J, Phi) or the last (DeepSeek-V4, whose heads are ``[nope | rope]``:
        transformers' ``DeepseekV4`` ``apply_rotary_pos_emb`` with ``layout=
        "interleaved"``); the others pass through unchanged. The frequencies are the
        same either way. ``"last"`` is 1-D only (``sections`` refused); a ``spec`` may
        hold it (:class:`~pe_core.rope_spec.RopeSpec` ``rotary_features``).

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
    if any_dtensor(x, pos):  # torch.distributed.tensor: on the local shard
        options = dict(locals())  # the arguments, before any other local is bound
        on_shard: Any = apply_rope  # the implementation, not the stubs
        return rope_on_shards(lambda x, pos: on_shard(**{**options, "x": x, "pos": pos}), x, pos)
    last = rotary_features != "first" or getattr(spec, "rotary_features", "first") != "first"
    if last:
        check_rotary_features(rotary_features, spec)  # "last" (the only other value)
    elif sections is None and frequencies is not None and framework_frequencies(frequencies):
        # trainable frequencies: the angle pos * f on the device, differentiable
        return rope_with_frequencies(
            x, pos, frequencies, spec, base, layout, rotary_dim, scaling, layer_type,
            backend, check_values, section_layout,
        )  # fmt: skip
    elif (
        all_none(scaling, layer_type, backend, sections, frequencies)
        and not check_values
        and section_layout == "contiguous"
    ):  # a decode step: the few-positions lane, if it takes the call
        result = few_positions_rope(x, pos, base, layout, rotary_dim, spec)
        if result is not None:
            return result
    base, layout, rotary_dim, scaling = configuration(
        spec, base, layout, rotary_dim, scaling, layer_type
    )
    config = (base, layout, rotary_dim, scaling, backend, check_values)
    if not all_none(sections, frequencies) or section_layout != "contiguous":
        if last:
            raise ValueError(
                "rotary_features='last' applies to 1-D RoPE only: sections=, section_layout= "
                f"and frequencies= must keep their defaults. Received: sections={sections!r}, "
                f"section_layout={section_layout!r}, frequencies={frequencies!r}"
            )
        nd: dict[str, Any] = dict(zip(_CALL, config, strict=True), sections=sections)
        nd |= {"section_layout": section_layout, "frequencies": frequencies}
        return each(lambda item: apply_rope_nd(item, pos, **nd), x)
    if last:
        return rope_last_features(x, pos, *config)
    if isinstance(x, (tuple, list)):  # (q, k): one set of factors for all of them
        return _apply_rope_each(tuple(x), pos, *config)
    xp, x, cos, sin, layout, rotary_dim, working = rope_factors(x, pos, *config)
    return xp.rotate_pairs(x, cos, sin, layout, rotary_dim, working)


#: The names of the configuration a 1-D call passes on (after ``pos``).
_CALL = ("base", "layout", "rotary_dim", "scaling", "backend", "check_values")


def _apply_rope_each(xs: tuple[Any, ...], pos: Any, *config: Any) -> tuple[Any, ...]:
    """``apply_rope`` of every array in ``xs`` at the same positions, sharing cos/sin.

    The positions are classified and the factors built once, from the first array;
    the others must share its backend, dtype and ``head_dim`` (their leading axes may
    differ, e.g. 32 query heads and 8 key heads), else they are rotated one by one.
    """
    if not xs:
        raise ValueError("x is an empty sequence; pass an array or a tuple of arrays.")
    xp, first, cos, sin, layout, rotary_dim, working = rope_factors(xs[0], pos, *config)
    out = [xp.rotate_pairs(first, cos, sin, layout, rotary_dim, working)]
    head_dim, dtype = xp.shape(first)[-1], xp.dtype_of(first)
    pos_shape = tuple(xp.shape(cos))[:-1]
    options = dict(zip(_CALL, config, strict=True))
    for x in xs[1:]:
        xp_x, x = as_input(x, options["backend"])
        shape = xp_x.shape(x)
        if xp_x is xp and shape and shape[-1] == head_dim and xp.dtype_of(x) == dtype:
            check_broadcast(pos_shape, shape)
            check_size(xp, x, pos, "apply_rope")
            out.append(xp.rotate_pairs(x, cos, sin, layout, rotary_dim, working))
        else:  # another backend, dtype or head_dim: its own factors
            out.append(apply_rope(x, pos, **options))
    return tuple(out)
