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
``get_rope_index`` does; :func:`pair_axes` tells which axis each pair follows.

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

import functools
import itertools
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, overload

import numpy as np

from pe_core import device_tables
from pe_core._kernel.angles import exact_cos_sin
from pe_core._kernel.host_tables import host_sin_cos
from pe_core._kernel.inputs import working_dtype
from pe_core._kernel.placement import Positions, prepare_positions
from pe_core._rope_call import (
    as_input,
    check_base,
    check_broadcast,
    check_head_dim,
    check_layout,
    check_rotary_dim,
    host_float64,
)
from pe_core.rope_scaling import (
    SCALING_TYPES,
    needs_seq_len,
    rope_frequencies,
    scaling_rope_type,
)
from pe_core.rope_spec import freeze, rope_constants
from pe_core.typing import (
    BackendLike,
    HostArrayLike,
    JaxArray,
    NDArray,
    RopeConfig,
    TFTensor,
    TorchTensor,
)
from pe_core.validation import positive_int
from pe_core_backends import Namespace, backend_of, get_namespace

__all__ = [
    "SECTION_LAYOUTS",
    "RopeSections",
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
    return _pair_axes(_check_sections(sections), _check_section_layout(section_layout))


@functools.lru_cache(maxsize=128)
def _pair_axes(sections: tuple[int, ...], section_layout: str) -> tuple[int, ...]:
    k, n = len(sections), sum(sections)
    if section_layout in ("contiguous", "blocks"):
        return tuple(a for a, s in enumerate(sections) for _ in range(s))
    axes = tuple(j % k if j % k and j < k * sections[j % k] else 0 for j in range(n))
    counts = tuple(axes.count(a) for a in range(k))
    if counts != sections:
        raise ValueError(
            f"sections={sections} cannot be interleaved: the rule 'pair j follows axis "
            f"j % {k} while j < {k} * s_(j % {k}), else axis 0' gives {counts} pairs per axis. "
            f"Each axis a >= 1 needs {k} * s_a <= sum(sections) + a, and axis 0 the rest."
        )
    return axes


def _check_sections(sections: object) -> tuple[int, ...]:
    items = _section_items(sections)
    values = []
    for s in items:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"sections must hold integers. Received: {items!r}")
        values.append(int(s))
    if not values or min(values) < 0 or sum(values) == 0:
        raise ValueError(
            "sections must be one or more integers >= 0 with a positive sum (rotary pairs "
            f"per axis). Received: {tuple(values)!r}"
        )
    return tuple(values)


def _section_items(sections: object) -> Sequence[Any]:
    """``sections`` as a sequence (a 1-D NumPy array as a list); a TypeError otherwise."""
    if isinstance(sections, np.ndarray) and sections.ndim == 1:
        return list(sections.tolist())
    if isinstance(sections, (str, bytes, Mapping)) or not isinstance(sections, Sequence):
        raise TypeError(
            "sections must be a sequence of integers (pairs per axis), e.g. (16, 24, 24). "
            f"Received: {sections!r}"
        )
    return sections


def _check_section_layout(section_layout: object) -> str:
    if section_layout not in SECTION_LAYOUTS:
        raise ValueError(
            f"Unknown section_layout {section_layout!r}. Expected one of: "
            f"{', '.join(SECTION_LAYOUTS)}."
        )
    return str(section_layout)


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
    sections = _check_sections(sections)
    axes = _pair_axes(sections, _check_section_layout(section_layout))
    if (
        isinstance(max_freq, bool)
        or not isinstance(max_freq, numbers.Real)
        or not (math.isfinite(max_freq) and max_freq > 0)
    ):
        raise ValueError(f"max_freq must be a finite number > 0. Received: {max_freq!r}")
    per_axis = [iter(np.linspace(1.0, max_freq / 2, s) * math.pi) for s in sections]
    return tuple(float(next(per_axis[a])) for a in axes)


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
    x: Any,
    pos: Any,
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
) -> Any:
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
    section_layout = _check_section_layout(section_layout)
    frequencies = _check_frequencies(frequencies)
    layout = check_layout(layout)
    xp, x = as_input(x, backend)
    shape = xp.shape(x)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = check_head_dim(shape[-1])
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    base = check_base(base)
    working = working_dtype(xp.dtype_of(x))

    positions = prepare_positions(
        pos,
        xp,
        backend_of(pos),
        what="pos",
        check_values=check_values,
        tracing=xp.is_traced(x),
        like=x,
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
    check_broadcast(tuple(positions.shape[:-1]), shape)

    if needs_seq_len(scaling):
        rope_type = scaling_rope_type(scaling)
        fit = ", ".join(t for t, entry in sorted(SCALING_TYPES.items()) if not entry.needs_seq_len)
        raise ValueError(
            f"scaling with rope_type {rope_type!r} chooses its frequencies from the "
            "sequence length max(pos) + 1, which N-D positions do not define. Expected a "
            f"rope_type that does not depend on it: {fit} ('mrope' is read as 'default')."
        )
    plan = xp.host_constant(
        _plan, scaling, base, head_dim, rotary_dim, sections, section_layout, frequencies
    )
    if positions.placement == "host":  # float16/bfloat16 x: float64 rotation, rounded once
        working = working_dtype(xp.dtype_of(x), xp, round_once=host_float64(xp, x))
        cos, sin = _host_factors(xp, positions, plan, working, x)
    else:
        cos, sin = _device_factors(xp, positions, plan, working)
    if section_layout == "blocks" and layout == "half":
        return _rotate_blocks(xp, x, cos, sin, sections, working)
    return xp.rotate_pairs(x, cos, sin, layout, 2 * len(plan[0]), working)


def _rotate_blocks(
    xp: Namespace, x: Any, cos: Any, sin: Any, sections: tuple[int, ...], working: str
) -> Any:
    """``section_layout="blocks"`` with the half layout: each axis's block of ``2 * s_a``
    features rotated by its own rotate-half; the features after them pass through."""
    parts, start, pair = [], 0, 0
    for s in sections:
        if s:
            block = x[..., start : start + 2 * s]
            factors = cos[..., pair : pair + s], sin[..., pair : pair + s]
            parts.append(xp.rotate_pairs(block, *factors, "half", 2 * s, working))
            start, pair = start + 2 * s, pair + s
    head_dim = xp.shape(x)[-1]
    if start < head_dim:
        parts.append(x[..., start:])
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=-1)


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
    values = []
    for w in frequencies:
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w):
            raise ValueError(f"frequencies must be finite real numbers. Received: {w!r}")
        values.append(float(w))
    return tuple(values)


def _plan(scaling: Any, *args: Any) -> tuple:
    # A plain function (not the cache wrapper) so torch.compile can embed its result;
    # it freezes scaling on the host (a hashable cache key), never traced.
    return _cached_plan(freeze(scaling) if scaling is not None else None, *args)


@functools.lru_cache(maxsize=256)
def _cached_plan(
    frozen: Any,
    base: float,
    head_dim: int,
    rotary_dim: int | None,
    sections: tuple[int, ...],
    section_layout: str,
    frequencies: Any,
) -> tuple:
    """``(omegas, axes, axis_omegas, runs, attention_factor)`` as plain Python data.

    ``omegas[j]`` and ``axes[j]`` are pair ``j``'s frequency and axis; ``axis_omegas[a]``
    are axis ``a``'s frequencies in pair order; ``runs`` are ``(axis, start, stop)``
    slices of those per-axis tables that, concatenated, give the pairs in order.
    """
    axes = _pair_axes(sections, section_layout)
    omegas, attention_factor = _pair_frequencies(
        frozen, base, head_dim, rotary_dim, sections, axes, frequencies
    )
    axis_omegas = tuple(
        tuple(w for w, b in zip(omegas, axes, strict=True) if b == a) for a in range(len(sections))
    )
    return tuple(omegas), axes, axis_omegas, _runs(axes, len(sections)), float(attention_factor)


def _pair_frequencies(
    frozen: Any,
    base: float,
    head_dim: int,
    rotary_dim: int | None,
    sections: tuple[int, ...],
    axes: tuple[int, ...],
    frequencies: Any,
) -> tuple[tuple[float, ...], float]:
    """``(frequency of every pair in pair order, attention factor)`` for ``frequencies=``
    ``None`` (the 1-D schedule), ``"per_axis"`` or explicit values."""
    if frequencies is None:
        return _schedule_frequencies(frozen, base, head_dim, rotary_dim, sections)
    _check_pair_count(sections, head_dim if rotary_dim is None else rotary_dim)
    if frequencies == "per_axis":
        per_axis, attention_factor = _per_axis_frequencies(frozen, base, sections)
        # per_axis[a] is axis a's schedule: hand its entries out in pair order
        counters = [iter(values) for values in per_axis]
        return tuple(next(counters[a]) for a in axes), attention_factor
    return _explicit_frequencies(frozen, frequencies, sum(sections)), 1.0


def _schedule_frequencies(
    frozen: Any, base: float, head_dim: int, rotary_dim: int | None, sections: tuple[int, ...]
) -> tuple[tuple[float, ...], float]:
    """The 1-D schedule over ``rotary_dim`` (scaled by ``frozen``), one per pair."""
    n = sum(sections)
    omegas, attention_factor = rope_constants(frozen, base, head_dim, rotary_dim, None)
    if len(omegas) != n:
        raise ValueError(
            f"sections={sections} hold {n} rotary pairs, but the rotary dimension is "
            f"{2 * len(omegas)} ({len(omegas)} pairs): sum(sections) must be "
            "rotary_dim / 2 (rotary_dim is head_dim unless given)."
        )
    return omegas, attention_factor


def _check_pair_count(sections: tuple[int, ...], dim: int) -> None:
    n = sum(sections)
    if 2 * n != dim:
        raise ValueError(
            f"sections={sections} hold {n} rotary pairs, but rotary_dim is {dim}: "
            "sum(sections) must be rotary_dim / 2 (rotary_dim is head_dim unless given)."
        )


def _explicit_frequencies(frozen: Any, frequencies: tuple[float, ...], n: int) -> tuple[float, ...]:
    if frozen is not None:
        raise ValueError(
            "scaling does not apply to explicit frequencies: scale them yourself, "
            "or use frequencies=None or 'per_axis'."
        )
    if len(frequencies) != n:
        raise ValueError(
            f"frequencies has {len(frequencies)} entries; expected one per rotary pair: "
            f"sum(sections) = {n}."
        )
    return frequencies


def _runs(axes: tuple[int, ...], k: int) -> tuple[tuple[int, int, int], ...]:
    """``(axis, start, stop)`` slices of the per-axis tables that, concatenated, give the
    pairs in order."""
    runs, taken = [], [0] * k
    for a, group in itertools.groupby(axes):
        size = len(list(group))
        runs.append((a, taken[a], taken[a] + size))
        taken[a] += size
    return tuple(runs)


def _per_axis_frequencies(
    frozen: Any, base: float, sections: tuple[int, ...]
) -> tuple[list[tuple[float, ...]], float]:
    """Each axis's own 1-D schedule over ``2 * s_a`` features, and the attention factor."""
    params = None if frozen is None else _per_axis_scaling(frozen)
    out: list[tuple[float, ...]] = []
    attention = 1.0
    for s in sections:
        if s == 0:
            out.append(())
            continue
        inv_freq, attention = rope_frequencies(_axis_config(2 * s, base, params))
        out.append(tuple(float(v) for v in inv_freq))
    return out, float(attention)


def _per_axis_scaling(scaling: Any) -> dict[str, Any]:
    """The rope-parameters dict of ``frequencies="per_axis"`` (not a model config)."""
    if not isinstance(scaling, Mapping):  # a FrozenMapping: read as a mapping
        raise TypeError(f"scaling must be a mapping. Received: {type(scaling).__name__}")
    if "rope_type" not in scaling and "type" not in scaling:
        raise ValueError(
            "frequencies='per_axis' takes scaling as a rope-parameters dict (with "
            "'rope_type'), e.g. {'rope_type': 'linear', 'factor': 2.0}, not a whole "
            "model config: each axis gets its own rotary dimension 2 * s_a."
        )
    params = dict(scaling)
    if "partial_rotary_factor" in params:
        raise ValueError(
            "frequencies='per_axis' does not take partial_rotary_factor: give rotary_dim= instead."
        )
    return params


def _axis_config(dim: int, base: float, params: dict[str, Any] | None) -> dict[str, Any]:
    """The model config of one axis's schedule, for :func:`rope_frequencies`."""
    config: dict[str, Any] = {"head_dim": dim, "rope_theta": base}
    if params is not None:
        config["rope_parameters"] = dict(params)
        if "max_position_embeddings" in params:
            config["max_position_embeddings"] = config["rope_parameters"].pop(
                "max_position_embeddings"
            )
    return config


def _device_factors(xp: Namespace, positions: Positions, plan: tuple, working: str) -> tuple:
    """cos and sin of device or traced positions, by the exact kernel, axis by axis."""
    _, _, axis_omegas, runs, attention_factor = plan
    tables = {}
    for a, omegas in enumerate(axis_omegas):
        if omegas:
            tables[a] = exact_cos_sin(
                xp, positions.array[..., a], omegas, working=working, scale=attention_factor
            )
    if len(runs) == 1:
        return tables[runs[0][0]]
    cos = xp.concat(
        [_part(tables[a][0], start, stop, len(axis_omegas[a])) for a, start, stop in runs], axis=-1
    )
    sin = xp.concat(
        [_part(tables[a][1], start, stop, len(axis_omegas[a])) for a, start, stop in runs], axis=-1
    )
    return cos, sin


def _part(table: Any, start: int, stop: int, size: int) -> Any:
    return table if (start, stop) == (0, size) else table[..., start:stop]


def _host_factors(
    xp: Namespace, positions: Positions, plan: tuple, working: str, x: Any
) -> tuple[Any, Any]:
    """cos and sin of host positions, built exactly on the host axis by axis and placed
    on ``x``'s device (through :mod:`pe_core.device_tables`, as for 1-D RoPE)."""
    values, max_abs = positions.host, positions.max_abs
    assert values is not None and max_abs is not None
    omegas, axes, axis_omegas, _, attention_factor = plan
    rounded_once = xp.dtype_of(x) in ("float16", "bfloat16")
    lead = values.shape[:-1]

    def build() -> tuple[np.ndarray, np.ndarray]:
        cos = np.empty((*lead, len(omegas)), dtype=np.float64)
        sin = np.empty_like(cos)
        where = np.asarray(axes)
        for a, axis_w in enumerate(axis_omegas):
            if not axis_w:
                continue
            table = host_sin_cos(
                np.ascontiguousarray(values[..., a]),
                axis_w,
                offset=0.0,
                layout="split",
                working=working,
                max_abs=max_abs,
                rounded_once=rounded_once,
            )
            table = np.asarray(table).reshape(*lead, 2, len(axis_w))
            sin[..., where == a] = table[..., 0, :]
            cos[..., where == a] = table[..., 1, :]
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor
        return cos.astype(working), sin.astype(working)

    values_key = device_tables.values_key(values)
    keep = xp.on_accelerator(x) or values.size <= device_tables.MAX_KEYED_VALUES
    key = ("rope_nd", values_key, omegas, axes, attention_factor, rounded_once)
    return device_tables.cached(
        xp, key if keep and values_key else None, x, working, build, private=True
    )


# --------------------------------------------------------------------------- position ids


@overload
def mrope_position_ids(
    input_ids: HostArrayLike,
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
) -> tuple[NDArray, NDArray]: ...


@overload
def mrope_position_ids(
    input_ids: TorchTensor,
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
) -> tuple[TorchTensor, TorchTensor]: ...


@overload
def mrope_position_ids(
    input_ids: JaxArray,
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
) -> tuple[JaxArray, JaxArray]: ...


@overload
def mrope_position_ids(
    input_ids: TFTensor,
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
) -> tuple[TFTensor, TFTensor]: ...


# Any input: mypy reads tensorflow as Any (it has no type information), so to it the
# TFTensor overload above already takes everything.
@overload
def mrope_position_ids(  # type: ignore[overload-cannot-match]
    input_ids: Any,
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
) -> tuple[Any, Any]: ...


def mrope_position_ids(
    input_ids: Any,
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
) -> tuple[Any, Any]:
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
    ids = _host_ints(input_ids, "input_ids")
    if ids.ndim != 2:
        raise ValueError(f"input_ids must have shape (batch, seq). Received shape: {ids.shape}")
    merge = _rope_int(spatial_merge_size, "spatial_merge_size")
    if text_after_vision not in ("spatial", "max"):
        raise ValueError(
            f"Unknown text_after_vision {text_after_vision!r}. Expected one of: spatial, max."
        )
    types = _token_types(ids, token_types, image_token_id, video_token_id)
    keep = _kept_tokens(ids, attention_mask)
    grids = _vision_grids(image_grid_thw, video_grid_thw, video_time_scale, split_video_frames)
    batch, seq = ids.shape
    out = np.zeros((batch, seq, 3), dtype=np.int64)
    deltas = np.zeros((batch, 1), dtype=np.int64)
    for b in range(batch):
        row = _example_positions(b, types[b][keep[b]], grids, merge, text_after_vision)
        out[b, keep[b]] = row
        deltas[b, 0] = (int(row.max()) + 1 if row.size else 0) - int(keep[b].sum())
    return _on_backend(source, out), _on_backend(source, deltas)


#: Token types of ``token_types`` (transformers' ``mm_token_type_ids``) -> their names.
_VISION_KINDS = {1: "image", 2: "video"}

#: Vision kind -> the iterator of its segments' ``((T, H, W), time scale)`` in order.
_Grids = dict[int, Iterator[tuple[tuple[int, int, int], float]]]


def _token_types(
    ids: np.ndarray, token_types: Any, image_token_id: int, video_token_id: int
) -> np.ndarray:
    """0 (text), 1 (image) or 2 (video) per token: given, or from the placeholder ids."""
    if token_types is None:
        return np.where(ids == image_token_id, 1, np.where(ids == video_token_id, 2, 0))
    types = _host_ints(token_types, "token_types")
    if types.shape != ids.shape or not np.isin(types, (0, 1, 2)).all():
        raise ValueError(
            f"token_types must have input_ids' shape {ids.shape} and values in 0 (text), "
            f"1 (image), 2 (video). Received shape {types.shape}."
        )
    return types


def _kept_tokens(ids: np.ndarray, attention_mask: Any) -> np.ndarray:
    """Which tokens are not padding (all of them without ``attention_mask``)."""
    if attention_mask is None:
        return np.ones(ids.shape, dtype=bool)
    mask = _host_ints(attention_mask, "attention_mask").astype(bool)
    if mask.shape != ids.shape:
        raise ValueError(
            f"attention_mask must have input_ids' shape {ids.shape}. Received: {mask.shape}"
        )
    return mask


def _vision_grids(
    image_grid_thw: Any, video_grid_thw: Any, video_time_scale: Any, split_video_frames: bool
) -> _Grids:
    """The grids of the image and video segments, in prompt order, each with its time
    scale (1 for images); with ``split_video_frames`` one segment per video frame."""
    images = _grids(image_grid_thw, "image_grid_thw")
    videos = _grids(video_grid_thw, "video_grid_thw")
    scales = _time_scales(video_time_scale, len(videos))
    if split_video_frames:
        scales = [s for s, (t, _, _) in zip(scales, videos, strict=True) for _ in range(t)]
        videos = [(1, h, w) for t, h, w in videos for _ in range(t)]
    return {
        1: iter([(grid, 1.0) for grid in images]),
        2: iter(list(zip(videos, scales, strict=True))),
    }


def _example_positions(
    b: int, row_types: np.ndarray, grids: _Grids, merge: int, text_after_vision: str
) -> np.ndarray:
    """The ``(t, h, w)`` positions of example ``b``'s tokens (padding removed), segment
    by segment: text counts on by one, a vision segment spans its grid."""
    pieces, current, start = [], 0, 0
    for kind, group in itertools.groupby(row_types.tolist()):
        length = len(list(group))
        if kind == 0:
            block = np.repeat(np.arange(current, current + length)[:, None], 3, 1)
            current += length
        else:
            block, current = _vision_block(
                b, kind, start, length, current, grids, merge, text_after_vision
            )
        pieces.append(block)
        start += length
    return np.concatenate(pieces, 0) if pieces else np.zeros((0, 3), np.int64)


def _vision_block(
    b: int,
    kind: int,
    start: int,
    length: int,
    current: int,
    grids: _Grids,
    merge: int,
    text_after_vision: str,
) -> tuple[np.ndarray, int]:
    """The positions of one image or video segment of ``length`` tokens starting at
    position ``current``, and where the text after it resumes."""
    name = _VISION_KINDS[kind]
    try:
        (t, h, w), scale = next(grids[kind])
    except StopIteration:
        raise ValueError(
            f"example {b} has more {name} segments than {name}_grid_thw has rows."
        ) from None
    gh, gw = h // merge, w // merge
    if t * gh * gw != length:
        raise ValueError(
            f"example {b}: a {name} segment of {length} tokens at index "
            f"{start} does not match its grid (T, H, W) = ({t}, {h}, {w}) with "
            f"spatial_merge_size={merge}: expected T * H * W / {merge}**2 = "
            f"{t * gh * gw} tokens."
        )
    tt = np.floor(np.arange(t) * scale).astype(np.int64)
    grid_t, grid_h, grid_w = np.meshgrid(tt, np.arange(gh), np.arange(gw), indexing="ij")
    block = np.stack([grid_t, grid_h, grid_w], -1).reshape(-1, 3) + current
    if text_after_vision == "spatial":
        return block, current + max(gh, gw)
    return block, int(block.max()) + 1


def _on_backend(source: str | None, values: np.ndarray) -> Any:
    """Host int64 ``values`` on ``source``'s backend (NumPy for Python values), int64
    (int32 where the backend has no int64)."""
    xp = get_namespace(source or "numpy")
    if xp.numpy_arrays:
        return values
    dtype = xp.dtype("int64") if xp.supports("int64") else xp.dtype("int32")
    return xp.asarray(values, dtype=dtype)


def _host_ints(obj: Any, what: str) -> np.ndarray:
    source = backend_of(obj)
    values = np.asarray(obj) if source is None else get_namespace(source).to_numpy(obj)
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    if values.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers. Received dtype: {values.dtype}")
    return values.astype(np.int64)


def _rope_int(value: object, what: str) -> int:
    return positive_int(value, what)


def _grids(grid_thw: Any, what: str) -> list[tuple[int, int, int]]:
    if grid_thw is None:
        return []
    grids = _host_ints(grid_thw, what)
    if grids.ndim != 2 or grids.shape[1] != 3 or (grids < 1).any():
        raise ValueError(
            f"{what} must have shape (n, 3) with (T, H, W) >= 1 per row. Received shape "
            f"{grids.shape}."
        )
    return [(int(t), int(h), int(w)) for t, h, w in grids]


def _time_scales(scale: Any, n: int) -> list[float]:
    if scale is None:
        return [1.0] * n
    values = (
        np.broadcast_to(np.asarray(scale, dtype=np.float64).reshape(-1), (n,))
        if np.size(scale) == 1
        else np.asarray(scale, dtype=np.float64).reshape(-1)
    )
    if values.shape != (n,) or not np.isfinite(values).all() or (values < 0).any():
        raise ValueError(
            f"video_time_scale must be one number >= 0 or one per video ({n}). Received: {scale!r}"
        )
    return [float(v) for v in values]
