"""N-D rotary position embedding: pairs of features that follow different coordinates.

Vision, video and multimodal models give a token several coordinates (time, row,
column) and split RoPE's rotary pairs among them. ``apply_rope(x, pos, sections=...)``
(:func:`pe_core.rope.apply_rope`) delegates here. ``pos`` has a trailing axis of ``k``
coordinates and ``sections = (s_0, ..., s_{k-1})`` counts the rotary pairs that follow
each coordinate (``sum(sections) == rotary_dim / 2``). Pair ``j`` is rotated by
``pos[..., a] * w_j``, where ``a`` is the axis whose section holds ``j``:

* ``section_layout="contiguous"``: axis 0 takes pairs ``0 .. s_0 - 1``, axis 1 the next
  ``s_1``, and so on (Qwen2-VL and Qwen2.5-VL M-RoPE, ``mrope_section``; FLUX's
  ``EmbedND``; rotary-embedding-torch's axial frequencies).
* ``section_layout="interleaved"``: pair ``j`` follows axis ``r = j % k`` when ``r >= 1``
  and ``j < k * s_r``, else axis 0 (Qwen3-VL ``mrope_interleaved``:
  ``t h w t h w ... t t``), so that every axis sees high and low frequencies.
* ``section_layout="blocks"``: the pairs follow the axes as for ``"contiguous"``, and
  each axis owns a block of ``2 * s_a`` consecutive features in which ``layout`` pairs
  them: with ``layout="half"`` axis ``a``'s block starting at feature ``o_a`` pairs
  ``(o_a + i, o_a + s_a + i)`` (a rotate-half per axis: transformers' Gemma 4 vision
  ``apply_multidimensional_rope``, diffusers' ``apply_rotary_emb_allegro``); with
  ``layout="interleaved"`` the blocks pair ``(2j, 2j + 1)``, the same features as
  ``"contiguous"``.

The frequency ``w_j`` of every pair is, by ``frequencies=``:

* ``None``: the usual 1-D schedule over ``rotary_dim`` (``base ** (-2j / rotary_dim)``,
  or what ``scaling`` makes of it): M-RoPE, where only the coordinate changes per pair;
* ``"per_axis"``: each axis its own 1-D schedule over ``2 * s_a`` features,
  ``base ** (-2i / (2 s_a))`` for its ``i``-th pair (FLUX ``EmbedND`` with
  ``axes_dim = 2 * sections``; rotary-embedding-torch ``freqs_for="lang"`` axial);
* a sequence of ``rotary_dim / 2`` angular frequencies in pair order, e.g.
  :func:`pixel_frequencies` (rotary-embedding-torch ``freqs_for="pixel"``).

The angles ``pos * w_j`` come from the exact kernel of :mod:`pe_core._kernel.angles`, axis by
axis, exactly as for 1-D RoPE; the rotation is the same
:meth:`~pe_core_backends.Namespace.rotate_pairs` on either pair layout (``"half"`` or
``"interleaved"``).

Helpers: :func:`rope_sections` reads ``mrope_section`` and ``mrope_interleaved`` from a
Qwen2-VL / Qwen2.5-VL / Qwen3-VL config; :func:`mrope_position_ids` builds the
``(t, h, w)`` position ids of a text + image + video prompt as transformers'
``get_rope_index`` does; :func:`pair_axes` tells which axis each pair follows;
:func:`allegro_frequencies` folds Allegro's interpolation scales into the per-axis
frequencies.

>>> import numpy as np
>>> from pe_core.rope import apply_rope
>>> pair_axes((1, 2, 1))
(0, 1, 1, 2)
>>> x = np.ones((2, 8), dtype=np.float32)            # (seq, head_dim)
>>> pos = np.array([[0, 0, 0], [5, 0, 0]])           # (seq, 3): t, h, w
>>> y = apply_rope(x, pos, sections=(1, 2, 1))       # pair 0 follows t, 1-2 h, 3 w
>>> bool(np.allclose(y[1, [0, 4]], apply_rope(x[1], 5)[[0, 4]]))  # 1-D RoPE at t = 5
True
>>> bool(np.allclose(y[1, [1, 2, 3, 5, 6, 7]], 1.0))  # h = w = 0: not rotated
True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from pe_core import _rope_call as call
from pe_core._kernel.inputs import check_request_size
from pe_core._position_ids import mrope
from pe_core._rope_nd import plan as plans
from pe_core._rope_nd.rotation import rotate
from pe_core.rope_scaling import SCALING_TYPES, needs_seq_len, scaling_rope_type
from pe_core.typing import ArrayT, BackendArrayT, BackendLike, HostData, RopeConfig
from pe_core.validation import choice, finite_real, is_integer, known_size, positive_int
from pe_core_backends import backend_of

__all__ = [
    "ALLEGRO_INTERPOLATION_SCALE",
    "SECTION_LAYOUTS",
    "RopeSections",
    "allegro_frequencies",
    "apply_rope_nd",
    "mrope_position_ids",
    "pair_axes",
    "pixel_frequencies",
    "rope_sections",
]

#: The orders in which sections can share out the rotary pairs.
SECTION_LAYOUTS: tuple[str, ...] = ("contiguous", "interleaved", "blocks")

#: The frequency schedules ``frequencies=`` names.
_NAMED_FREQUENCIES = ("per_axis",)

#: diffusers' ``AllegroTransformer3DModel`` defaults ``(interpolation_scale_t,
#: interpolation_scale_h, interpolation_scale_w)``, the scales its pipeline divides the
#: grid indices by.
ALLEGRO_INTERPOLATION_SCALE: tuple[float, float, float] = (2.2, 2.0, 2.0)

#: Qwen2-VL's token ids of image and video placeholders (also Qwen2.5-VL, Qwen3-VL).
QWEN2_VL_IMAGE_TOKEN_ID = 151655
QWEN2_VL_VIDEO_TOKEN_ID = 151656


# --------------------------------------------------------------------------- sections


def pair_axes(sections: Sequence[int], section_layout: str = "contiguous") -> tuple[int, ...]:
    """The axis (index into ``pos``'s trailing axis) each rotary pair follows.

    Parameters
    ----------
    sections : sequence of int
        Pairs per axis, ``(s_0, ..., s_{k-1})``, each >= 0, at least one > 0.
    section_layout : {"contiguous", "interleaved", "blocks"}
        ``"contiguous"`` (and ``"blocks"``, which orders the pairs the same way and
        differs in the features that form them): axis 0 holds the first ``s_0`` pairs,
        axis 1 the next ``s_1``, ... (Qwen2-VL ``mrope_section``, FLUX, axial RoPE). ``"interleaved"``: pair ``j``
        follows axis ``r = j % k`` if ``r >= 1`` and ``j < k * s_r``, and axis 0 otherwise
        (transformers' Qwen3-VL ``recomposition_frequencies`` for ``k = 3``).

    Returns
    -------
    tuple of int
        ``sum(sections)`` axis indices, one per pair in pair order.

    Raises
    ------
    ValueError
        Negative or all-zero sections; an unknown ``section_layout``; interleaved
        sections whose rule does not give each axis exactly ``s_a`` pairs (an axis
        ``r >= 1`` needs ``k * s_r <= sum(sections) + r``).
    TypeError
        Sections that are not integers.

    Examples
    --------
    >>> pair_axes((2, 1, 1))
    (0, 0, 1, 2)
    >>> pair_axes((4, 2, 2), "interleaved")  # t h w t h w t t
    (0, 1, 2, 0, 1, 2, 0, 0)
    """
    sections = _check_sections(sections, "pair_axes")
    return plans.pair_axes(sections, choice(section_layout, "section_layout", SECTION_LAYOUTS))


def _check_sections(sections: object, what: str | None = None) -> tuple[int, ...]:
    """``sections`` as a tuple of ints (a 1-D NumPy array as its values); with ``what``
    (the public name), refused when a tuple of their pairs cannot fit in memory."""
    if isinstance(sections, np.ndarray) and sections.ndim == 1:
        sections = list(sections.tolist())
    elif isinstance(sections, (str, bytes, Mapping)) or not isinstance(sections, Sequence):
        raise TypeError(
            "sections must be a sequence of integers (pairs per axis), e.g. (16, 24, 24). "
            f"Received: {sections!r}"
        )
    if not all(is_integer(s) for s in sections):
        raise TypeError(f"sections must hold integers. Received: {sections!r}")
    values = tuple(int(s) for s in sections)
    if not values or min(values) < 0 or sum(values) == 0:
        raise ValueError(
            "sections must be one or more integers >= 0 with a positive sum (rotary pairs "
            f"per axis). Received: {tuple(values)!r}"
        )
    if what is not None:  # a tuple of Python objects (up to 32 bytes each) per pair
        check_request_size(sum(values), "float64", what=what, extra_bytes=32 * sum(values))
    return tuple(values)


def pixel_frequencies(
    sections: Sequence[int], max_freq: float = 10.0, section_layout: str = "contiguous"
) -> tuple[float, ...]:
    """rotary-embedding-torch's ``freqs_for="pixel"`` frequencies for every pair.

    Axis ``a``'s pairs get ``linspace(1, max_freq / 2, s_a) * pi`` in order
    (``RotaryEmbedding(dim=2 * s_a, freqs_for="pixel", max_freq=max_freq)``), for
    positions in ``[-1, 1]`` (``get_axial_freqs`` uses ``linspace(-1, 1, n)`` along each
    axis). Pass the result as ``frequencies=`` with the same ``sections`` and
    ``section_layout``.

    Parameters
    ----------
    sections : sequence of int
        Pairs per axis.
    max_freq : float
        rotary-embedding-torch's ``max_freq`` (> 0): the fastest pair turns
        ``max_freq / 2`` half-turns over a unit distance.
    section_layout : {"contiguous", "interleaved"}
        The order of the pairs (:func:`pair_axes`); rotary-embedding-torch's is
        contiguous.

    Returns
    -------
    tuple of float
        ``sum(sections)`` angular frequencies in pair order.

    Examples
    --------
    >>> [round(w / math.pi, 3) for w in pixel_frequencies((3, 2), max_freq=10.0)]
    [1.0, 3.0, 5.0, 1.0, 5.0]
    """
    sections = _check_sections(sections, "pixel_frequencies")
    axes = plans.pair_axes(sections, choice(section_layout, "section_layout", SECTION_LAYOUTS))
    try:
        finite_real(max_freq, "max_freq", greater_than=0)
    except TypeError as exc:  # a ValueError, as for any other max_freq it refuses
        raise ValueError(str(exc)) from None
    per_axis = [iter(np.linspace(1.0, max_freq / 2, s) * math.pi) for s in sections]
    return tuple(float(next(per_axis[a])) for a in axes)


def allegro_frequencies(
    head_dim: int,
    interpolation_scale: Sequence[float] = ALLEGRO_INTERPOLATION_SCALE,
    base: float = 10000.0,
) -> tuple[float, ...]:
    """Allegro's rotary frequencies, with its interpolation scales folded in.

    diffusers' ``AllegroPipeline`` builds its cos/sin tables at ``grid / scale`` per axis
    (``get_3d_rotary_pos_embed_allegro`` with the transformer's ``interpolation_scale_t,
    _h, _w``, ``(2.2, 2.0, 2.0)`` by default) and gathers them at the integer grid
    indices ``(t, h, w)``. Pair ``i`` of axis ``a`` thus turns by
    ``(index_a / scale_a) * base ** (-i / s)`` with ``s = head_dim // 6`` pairs per axis;
    this returns ``base ** (-i / s) / scale_a`` for every pair in pair order, so that
    ``apply_rope(x, pos, sections=(head_dim // 6,) * 3, section_layout="blocks",
    frequencies=allegro_frequencies(head_dim))`` at the integer grid indices ``pos``
    (diffusers' own position ids, stacked on a last axis) gives diffusers' rotation.

    Parameters
    ----------
    head_dim : int
        The attention head dimension (diffusers' ``attention_head_dim``), a multiple of 6:
        each of ``t``, ``h``, ``w`` rotates a block of ``head_dim / 3`` features.
    interpolation_scale : sequence of 3 floats
        ``(interpolation_scale_t, interpolation_scale_h, interpolation_scale_w)`` of the
        transformer's config, each finite and > 0; ``(1, 1, 1)`` gives the plain
        ``frequencies="per_axis"`` schedule.
    base : float
        ``theta`` (10000 in Allegro).

    Returns
    -------
    tuple of float
        ``head_dim / 2`` angular frequencies in pair order (``t``'s, then ``h``'s, then
        ``w``'s).

    Raises
    ------
    ValueError
        ``head_dim`` not a positive multiple of 6; ``interpolation_scale`` not three
        finite numbers > 0; ``base`` not finite and > 1.
    TypeError
        ``head_dim`` not an integer; ``interpolation_scale`` or ``base`` not numbers.

    Examples
    --------
    >>> w = allegro_frequencies(12)              # 2 pairs per axis
    >>> [round(v, 4) for v in w]
    [0.4545, 0.0045, 0.5, 0.005, 0.5, 0.005]
    >>> allegro_frequencies(12, (1, 1, 1))[:2]   # the per-axis schedule
    (1.0, 0.01)
    """
    head_dim = positive_int(head_dim, "head_dim")
    n = head_dim // 2  # a tuple of Python floats and per-axis lists
    check_request_size(n, "float64", what="allegro_frequencies", extra_bytes=64 * n)
    if head_dim % 6:
        raise ValueError(
            "head_dim must be a multiple of 6 (three blocks of head_dim / 3 features, each "
            f"an even number). Received: {head_dim}"
        )
    if isinstance(interpolation_scale, (str, bytes)) or not isinstance(
        interpolation_scale, Sequence
    ):
        raise TypeError(
            "interpolation_scale must be a sequence of three numbers (t, h, w). "
            f"Received: {interpolation_scale!r}"
        )
    if len(interpolation_scale) != 3:
        raise ValueError(
            "interpolation_scale must hold three numbers (t, h, w). "
            f"Received: {tuple(interpolation_scale)!r}"
        )
    scales = [finite_real(v, "interpolation_scale", greater_than=0) for v in interpolation_scale]
    base = call.check_base(base)
    per_axis, _ = plans.per_axis_frequencies(None, base, (head_dim // 6,) * 3)
    return tuple(w / scale for values, scale in zip(per_axis, scales, strict=True) for w in values)


# --------------------------------------------------------------------------- config


class RopeSections(NamedTuple):
    """What :func:`rope_sections` reads: ``apply_rope(..., sections=s.sections,
    section_layout=s.section_layout)``."""

    sections: tuple[int, ...]
    section_layout: str

    @property
    def interleaved(self) -> bool:
        """Whether the config asks for interleaved sections (``mrope_interleaved``)."""
        return self.section_layout == "interleaved"


def rope_sections(config: Mapping[str, Any]) -> RopeSections:
    """``mrope_section`` and the interleaved flag of a Qwen2-VL / Qwen2.5-VL / Qwen3-VL
    config.

    Looks in ``rope_scaling`` or ``rope_parameters`` of the config, or of its
    ``text_config`` (Qwen2.5-VL and Qwen3-VL nest the language model's config).
    ``mrope_interleaved: true`` (Qwen3-VL; ``interleaved`` in Qwen3-Omni) selects
    ``section_layout="interleaved"``.

    The frequencies themselves are read by
    :func:`~pe_core.rope_scaling.rope_frequencies`, which treats ``type: "mrope"`` as
    ``"default"`` (as transformers' Qwen2-VL config does): pass the same config (or its
    ``text_config``) as ``scaling=``.

    Parameters
    ----------
    config : Mapping
        A parsed ``config.json``.

    Returns
    -------
    RopeSections
        ``(sections, section_layout)``.

    Raises
    ------
    TypeError
        ``config`` or its rope dict is not a mapping.
    ValueError
        No ``mrope_section`` in the config, or one that is not non-negative integers.

    Examples
    --------
    >>> cfg = {"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    >>> rope_sections(cfg)
    RopeSections(sections=(16, 24, 24), section_layout='contiguous')
    >>> qwen3 = {"text_config": {"rope_scaling": {"rope_type": "default",
    ...          "mrope_section": [24, 20, 20], "mrope_interleaved": True}}}
    >>> rope_sections(qwen3).interleaved
    True
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping (a parsed config.json). Received: {type(config).__name__}"
        )
    for where in (config, config.get("text_config")):
        if not isinstance(where, Mapping):
            continue
        for key in ("rope_scaling", "rope_parameters"):
            params = where.get(key)
            if params is None:
                continue
            if not isinstance(params, Mapping):
                raise TypeError(f"{key} must be a mapping. Received: {type(params).__name__}")
            if params.get("mrope_section") is None:
                continue
            try:
                sections = _check_sections(list(params["mrope_section"]))
            except TypeError as exc:
                raise ValueError(str(exc)) from exc
            interleaved = bool(params.get("mrope_interleaved") or params.get("interleaved"))
            return RopeSections(sections, "interleaved" if interleaved else "contiguous")
    raise ValueError(
        "config has no 'mrope_section' in rope_scaling/rope_parameters (nor in its "
        f"text_config). Top-level keys: {sorted(config)}."
    )


# --------------------------------------------------------------------------- apply


def apply_rope_nd(
    x: BackendArrayT,
    pos: BackendArrayT | HostData,
    *,
    sections: Sequence[int] | None,
    section_layout: str = "contiguous",
    frequencies: str | Sequence[float] | None = None,
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim: int | None = None,
    scaling: RopeConfig | None = None,
    backend: BackendLike | None = None,
    check_values: bool = False,
) -> BackendArrayT:
    """N-D RoPE: what ``apply_rope(x, pos, sections=...)`` runs.

    The arguments are those of :func:`pe_core.rope.apply_rope`, whose docstring
    describes them; ``pos`` has shape ``P + (k,)`` with ``P`` broadcasting against
    ``x.shape[:-1]`` and ``k = len(sections)``.

    Raises
    ------
    ValueError
        No ``sections`` (while ``section_layout`` or ``frequencies`` was given); pos
        without a trailing axis of ``len(sections)`` coordinates; ``sum(sections)`` not
        ``rotary_dim / 2``; explicit ``frequencies`` of the wrong length, or together
        with ``scaling``; ``scaling`` whose frequencies depend on the sequence length
        (``dynamic``, ``longrope``), or a whole model config with
        ``frequencies="per_axis"``; anything :func:`pe_core.rope.apply_rope` rejects.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((4, 8), dtype=np.float32)
    >>> pos = np.stack(np.meshgrid(np.arange(2), np.arange(2), indexing="ij"), -1)
    >>> apply_rope_nd(x, pos.reshape(4, 2), sections=(2, 2), layout="interleaved",
    ...               frequencies="per_axis").shape
    (4, 8)
    """
    if sections is None:
        raise ValueError(
            "section_layout= and frequencies= apply to N-D RoPE only: pass sections= "
            "(rotary pairs per coordinate axis) as well."
        )
    sections = _check_sections(sections)
    section_layout = choice(section_layout, "section_layout", SECTION_LAYOUTS)
    frequencies = _check_frequencies(frequencies)
    xp, x, positions, layout, head_dim, rotary_dim, base = call.check_call(
        x, pos, "apply_rope_nd", 1, base, layout, rotary_dim, scaling, backend, check_values
    )
    k = len(sections)
    if not positions.shape or positions.shape[-1] != k:
        raise ValueError(
            f"pos must have a trailing axis of {k} coordinates (one per section of "
            f"sections={sections}); received pos of shape {tuple(positions.shape)}. For "
            "transformers' position ids of shape (3, batch, seq), pass "
            "moveaxis(position_ids, 0, -1)[:, None] for x of shape (batch, heads, seq, "
            "head_dim)."
        )
    call.check_broadcast(tuple(positions.shape[:-1]), xp.shape(x))

    if needs_seq_len(scaling):
        fit = ", ".join(t for t, entry in sorted(SCALING_TYPES.items()) if not entry.needs_seq_len)
        raise ValueError(
            f"scaling with rope_type {scaling_rope_type(scaling)!r} chooses its frequencies from the "
            "sequence length max(pos) + 1, which N-D positions do not define. Expected a "
            f"rope_type that does not depend on it: {fit} ('mrope' is read as 'default')."
        )
    plan = xp.host_constant(
        plans.plan, scaling, base, head_dim, rotary_dim, sections, section_layout, frequencies
    )
    working = call.rotation_dtype(xp, x, positions)
    return rotate(xp, x, positions, plan, working, layout, section_layout, sections)


def _check_frequencies(frequencies: object) -> Any:
    if frequencies is None:
        return frequencies
    if isinstance(frequencies, str):
        if frequencies in _NAMED_FREQUENCIES:
            return frequencies
        raise ValueError(
            f"Unknown frequencies {frequencies!r}. Expected None, 'per_axis' or a sequence "
            "of angular frequencies (one per rotary pair)."
        )
    if isinstance(frequencies, np.ndarray):
        frequencies = frequencies.reshape(-1).tolist()
    if not isinstance(frequencies, Sequence):
        raise TypeError(
            "frequencies must be None, 'per_axis' or a sequence of floats. Received: "
            f"{type(frequencies).__name__}"
        )
    for w in frequencies:
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w):
            raise ValueError(f"frequencies must be finite real numbers. Received: {w!r}")
    return tuple(float(w) for w in frequencies)


# --------------------------------------------------------------------------- position ids


def mrope_position_ids(
    input_ids: ArrayT | HostData,
    image_grid_thw: Any = None,
    video_grid_thw: Any = None,
    attention_mask: Any = None,
    *,
    spatial_merge_size: int = 2,
    image_token_id: int = QWEN2_VL_IMAGE_TOKEN_ID,
    video_token_id: int = QWEN2_VL_VIDEO_TOKEN_ID,
    token_types: Any = None,
    video_time_scale: Sequence[float] | float | None = None,
    split_video_frames: bool = False,
    text_after_vision: str = "spatial",
) -> tuple[ArrayT, ArrayT]:
    """M-RoPE position ids ``(t, h, w)`` of a text + image + video prompt, as
    transformers' Qwen2-VL ``get_rope_index`` builds them.

    Text tokens get ``(p, p, p)`` with ``p`` counting on from the previous segment.
    An image or video with grid ``(T, H, W)`` (patches, before merging) starting at
    ``p`` gets, token by token in ``(t, h, w)`` row-major order,
    ``(p + floor(t * scale), p + h, p + w)`` for ``t < T``, ``h < H / m``,
    ``w < W / m`` (``m = spatial_merge_size``; ``scale`` is 1, or
    ``video_time_scale`` for videos). Padding (``attention_mask == 0``) is skipped
    and gets ``(0, 0, 0)``.

    Parameters
    ----------
    input_ids : array of int, shape (batch, seq)
        Token ids (any backend; read on the host).
    image_grid_thw, video_grid_thw : array of int, shape (n, 3), optional
        ``(T, H, W)`` of every image / video in prompt order, all examples together.
    attention_mask : array, shape (batch, seq), optional
        1 for tokens, 0 for padding.
    spatial_merge_size : int
        The vision encoder's ``spatial_merge_size`` (2 for Qwen2-VL and its successors).
    image_token_id, video_token_id : int
        Placeholder token ids (Qwen2-VL's by default). Ignored with ``token_types``.
    token_types : array of int, shape (batch, seq), optional
        transformers' ``mm_token_type_ids``: 0 text, 1 image, 2 video. Default: from
        ``input_ids`` and the two placeholder ids.
    video_time_scale : float or sequence of float, optional
        Qwen2.5-VL's temporal spacing per video, ``second_per_grid_t *
        tokens_per_second`` (one number for all videos, or one per video).
    split_video_frames : bool
        Qwen3-VL: each video frame is its own segment (``video_grid_thw`` rows are
        repeated ``T`` times with ``T = 1``; timestamps in text separate them).
    text_after_vision : {"spatial", "max"}
        Where the text after an image or video resumes: ``"spatial"`` at
        ``p + max(H, W) / m`` (transformers 5.3 and later), ``"max"`` one past the
        largest position of the segment, ``p + max(T * scale, H / m, W / m)``
        (the original Qwen2-VL / Qwen2.5-VL code and transformers before 5.3). The two
        agree for images; they differ for videos whose time extent exceeds their
        spatial one.

    Returns
    -------
    positions : array of int, shape (batch, seq, 3)
        ``(t, h, w)`` of every token: ``pos`` of ``apply_rope(q, pos[:, None],
        sections=...)`` for ``q`` of shape ``(batch, heads, seq, head_dim)``.
        transformers' ``position_ids`` of shape ``(3, batch, seq)`` are
        ``moveaxis(positions, -1, 0)``.
    deltas : array of int, shape (batch, 1)
        ``max(position) + 1 - number of tokens`` per example (transformers'
        ``mrope_position_deltas``): decoding step ``i`` after the prompt has position
        ``i + deltas`` on every axis.

    Both on the backend of ``input_ids`` (NumPy for Python lists), int64 (int32 on
    JAX without x64).

    Raises
    ------
    ValueError
        Shapes that do not match; more image or video segments than grids; a vision
        segment whose length is not ``T * H * W / m**2``; an unknown
        ``text_after_vision``.

    Examples
    --------
    >>> ids = [[1, 2, 151655, 151655, 151655, 151655, 3]]  # text, a 2x2 image, text
    >>> pos, deltas = mrope_position_ids(ids, image_grid_thw=[[1, 4, 4]])
    >>> pos[0].T.tolist()
    [[0, 1, 2, 2, 2, 2, 4], [0, 1, 2, 2, 3, 3, 4], [0, 1, 2, 3, 2, 3, 4]]
    >>> deltas.tolist()
    [[-2]]
    """
    source = backend_of(input_ids)
    n = known_size(input_ids) or 0  # (3, batch, seq) positions, per-token temporaries
    check_request_size(3 * n, "int64", what="mrope_position_ids", extra_bytes=40 * n)
    ids = mrope.host_ints(input_ids, "input_ids")
    if ids.ndim != 2:
        raise ValueError(f"input_ids must have shape (batch, seq). Received shape: {ids.shape}")
    merge = positive_int(spatial_merge_size, "spatial_merge_size")
    choice(text_after_vision, "text_after_vision", ("spatial", "max"))
    types = mrope.token_types(ids, token_types, image_token_id, video_token_id)
    keep = mrope.kept_tokens(ids, attention_mask)
    grids = mrope.vision_grids(image_grid_thw, video_grid_thw, video_time_scale, split_video_frames)
    out, deltas = mrope.positions(types, keep, grids, merge, text_after_vision)
    return mrope.on_backend(source, out), mrope.on_backend(source, deltas)
