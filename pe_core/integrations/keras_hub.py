"""Make a keras-hub model compute its rotary cos/sin exactly, on every Keras backend.

keras-hub's ``RotaryEmbedding`` (Llama, Mistral, Qwen, Gemma, Phi-3, GPT-NeoX, ...) forms
``positions * inverse_freq`` in float32 from float32 frequencies: at position ``1e5``
the fastest pairs are off by milliradians. :func:`patch_rotary_embeddings` gives every
rotary layer of a model, in place, a ``_compute_cos_sin_embedding`` that returns the cos
and sin of the *same formula* (the layer class's own inverse frequencies, restated in
float64: keras-hub's ``rope_type`` ``"linear"``, ``"dynamic"`` and ``"yarn"``,
``denominator_dim``, ``LlamaRotaryEmbedding``'s Llama 3.1 smoothing, which ignores
``position_scaling_factor``, Phi-3's su-scaled short/long factors and its embedding
scale, ESM's scaled frequencies), reduced exactly by pe_core's kernel
(:func:`pe_core.rope_cos_sin`'s engine) on the backend's own arrays: eager, under
``jax.jit`` and ``tf.function(jit_compile=True)``, with no host read of traced or
device positions. The layer keeps its class, config and weights;
:func:`unpatch_rotary_embeddings` removes the patch.

Model-specific rotary layers are made exact the same way, each from its own formula:
SmolLM3's cos/sin, Moonshine's angle table (given reduced to ``(-pi, pi]``: its
attention takes only their cos and sin), FLUX's N-D (per-axis) tables, RoFormer V2's
interleaved sinusoids, and the fixed 2-D tables of SAM 3's vision encoder and DINOv3
(in float64 on the host: they depend on the configuration and image size only). Those
that keep their frequencies or tables as weights are patched only while the weights
hold their own formula. Qwen 3.5's attention, which forms its M-RoPE angles from its
rotary layer's frequencies itself, gets an exact ``_apply_partial_rope``.

A model whose rotary layers include one whose formula is not reproduced here (a
layer class that overrides what it computes, or another model-specific rotary layer:
Qwen 3.5's vision rotary, or an attention deriving from Qwen 3.5's that is not its
own) is refused with an error that names each such layer: nothing is patched then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import keras
import numpy as np
from keras import ops
from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding
from keras_hub.src.models.esm.esm_attention import ESMRotaryEmbedding
from keras_hub.src.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding
from keras_hub.src.models.phi3.phi3_rotary_embedding import Phi3SuScaledRotaryEmbedding

from pe_core._rope_tables import frequency_tables
from pe_core.integrations._patching import patch, unpatch
from pe_core_backends import backend_of, get_namespace

__all__ = ["patch_rotary_embeddings", "unpatch_rotary_embeddings"]

ModelT = TypeVar("ModelT", bound=keras.layers.Layer)

#: The instance attribute a patched layer keeps its patch in (never saved: not in the
#: config, not a weight, not tracked).
_PATCH = "_pe_core_exact_rope"
_METHOD = "_compute_cos_sin_embedding"

#: Layer classes whose name says they are rotary position embeddings.
_ROTARY_NAME = re.compile(r"rotary|rope", re.IGNORECASE)


# ---------------------------------------------------------------- the classes' formulas


def _base_inverse_freq(layer: Any, rotary_dim: int) -> np.ndarray:
    """``RotaryEmbedding._get_inverse_freq``, in float64."""
    idx = np.arange(0, rotary_dim, 2, dtype=np.float64)
    denominator = layer.denominator_dim if layer.denominator_dim is not None else rotary_dim
    inv = float(layer.max_wavelength) ** (-(idx / float(denominator)))
    factor = float(layer.scaling_factor)
    if layer.rope_type == "linear":
        return inv / factor
    if layer.rope_type == "dynamic":
        return inv / factor ** (rotary_dim / max(1, rotary_dim - 2))
    if layer.rope_type == "yarn":
        return _yarn_inverse_freq(layer, rotary_dim)
    return inv


def _yarn_inverse_freq(layer: Any, rotary_dim: int) -> np.ndarray:
    """``RotaryEmbedding._get_yarn_inverse_freq``, in float64."""
    base = float(layer.max_wavelength)
    pos_freqs = base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (float(layer.scaling_factor) * pos_freqs)
    max_pos = float(layer.original_max_position_embeddings)

    def correction_dim(rotations: float) -> float:
        return rotary_dim * math.log(max_pos / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(float(layer.beta_fast)), correction_dim(float(layer.beta_slow))
    if layer.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0.0), min(high, rotary_dim - 1.0)
    ramp = np.clip((np.arange(rotary_dim // 2) - low) / max(high - low, 0.001), 0.0, 1.0)
    extrapolation_factor = 1.0 - ramp
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor


def _llama_inverse_freq(layer: Any, rotary_dim: int) -> np.ndarray:
    """``LlamaRotaryEmbedding._get_inverse_freq`` (``position_scaling_factor`` unused),
    in float64."""
    freq_range = np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim
    inv = 1.0 / (float(layer.max_wavelength) ** freq_range)
    if layer.low_freq_factor is None:
        return inv
    length = float(layer.pretraining_sequence_length)
    low, high = float(layer.low_freq_factor), float(layer.high_freq_factor)
    adjustment = float(layer.frequency_adjustment_factor)
    wavelen = 2 * math.pi / inv
    inv = np.where(wavelen > length / low, inv / adjustment, inv)
    smooth = (length / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * (inv / adjustment) + smooth * inv
    medium = (wavelen >= length / high) & (wavelen <= length / low)
    return np.where(medium, smoothed, inv)


def _yarn_factor(layer: Any) -> float:
    """The cos/sin factor of ``RotaryEmbedding._compute_cos_sin_embedding``."""
    if layer.rope_type == "yarn":
        return 0.1 * math.log(float(layer.scaling_factor)) + 1.0
    return 1.0


_INVERSE_FREQ: dict[Any, Callable[[Any, int], np.ndarray]] = {
    RotaryEmbedding._get_inverse_freq: _base_inverse_freq,
    LlamaRotaryEmbedding._get_inverse_freq: _llama_inverse_freq,
}


# ---------------------------------------------------------------- exact cos/sin


def _tables(
    positions: Any,
    inv_freq: np.ndarray,
    factor: float,
    dtype: str = "float32",
    layout: str = "half",
) -> tuple[Any, Any]:
    """``factor * cos`` and ``factor * sin`` of backend positions, one column per
    frequency laid out as ``layout`` (``cat(f, f)``, ``"interleaved"`` or
    ``"half_width"``: as is)."""
    xp = get_namespace(backend_of(positions) or "numpy")
    omegas = tuple(float(w) for w in inv_freq)
    cos, sin = frequency_tables(xp, positions, omegas, float(factor), layout, dtype)
    return cos, sin


def _positions(inputs: Any, start_index: Any) -> Any:
    """``arange(seq_len) + start_index`` as integers when ``start_index`` is one (exact
    at any position), else in float32 as keras-hub forms them."""
    seq_len = ops.shape(inputs)[1]
    if isinstance(start_index, (int, np.integer)) and not isinstance(start_index, bool):
        return ops.arange(seq_len, dtype="int32") + int(start_index)
    if not isinstance(start_index, float) and "int" in str(ops.dtype(start_index)):
        return ops.arange(seq_len, dtype="int32") + ops.cast(start_index, "int32")
    return ops.arange(seq_len, dtype="float32") + ops.cast(start_index, "float32")


def _given(positions: Any) -> Any:
    """Positions passed to the layer: integers kept, floats as keras-hub's float32."""
    positions = ops.convert_to_tensor(positions)
    if "int" in str(ops.dtype(positions)):
        return positions
    return ops.cast(positions, "float32")


def _broadcast(embedding: Any, rank: int, keep: tuple[int, ...]) -> Any:
    for axis in range(rank):
        if axis not in keep:
            embedding = ops.expand_dims(embedding, axis)
    return embedding


@dataclass
class _ExactBase:
    """``RotaryEmbedding._compute_cos_sin_embedding`` with exact cos/sin."""

    layer: Any
    inverse_freq: Callable[[Any, int], np.ndarray]

    def __call__(self, inputs: Any, start_index: Any = 0, positions: Any = None) -> Any:
        layer = self.layer
        rank = len(inputs.shape)
        rotary_dim = int(inputs.shape[-1])
        if positions is None:
            positions = ops.expand_dims(_positions(inputs, start_index), 0)
        else:
            positions = _given(positions)
            if len(ops.shape(positions)) == 1:
                positions = ops.expand_dims(positions, 0)
        inv_freq = self.inverse_freq(layer, rotary_dim)
        cos, sin = _tables(positions, inv_freq, _yarn_factor(layer))
        cos, sin = _broadcast(cos, rank, (0, 1, rank - 1)), _broadcast(sin, rank, (0, 1, rank - 1))
        return ops.cast(cos, layer.compute_dtype), ops.cast(sin, layer.compute_dtype)


@dataclass
class _ExactPhi3:
    """``Phi3SuScaledRotaryEmbedding._compute_cos_sin_embedding`` with exact cos/sin."""

    layer: Any

    def __call__(self, inputs: Any, start_index: Any = 0, positions: Any = None) -> Any:
        layer = self.layer
        rank = len(inputs.shape)
        rotary_dim = int(inputs.shape[-1])
        inv = _base_inverse_freq(layer, rotary_dim)
        short = inv / np.asarray(layer.inverese_freq_short_factor, np.float64)
        long = inv / np.asarray(layer.inverese_freq_long_factor, np.float64)
        seq_len = ops.shape(inputs)[1]
        use_long = start_index + seq_len > layer.pretraining_sequence_length
        positions = _positions(inputs, start_index) if positions is None else _given(positions)
        scale = float(layer.embedding_scaling_factor)
        if isinstance(use_long, (bool, np.bool_)):  # known now: one table
            cos, sin = _tables(positions, long if use_long else short, scale)
        else:  # a traced start index: both, chosen on the device
            cos_s, sin_s = _tables(positions, short, scale)
            cos_l, sin_l = _tables(positions, long, scale)
            cos, sin = ops.where(use_long, cos_l, cos_s), ops.where(use_long, sin_l, sin_s)
        cos, sin = _broadcast(cos, rank, (1, rank - 1)), _broadcast(sin, rank, (1, rank - 1))
        return ops.cast(cos, layer.compute_dtype), ops.cast(sin, layer.compute_dtype)


@dataclass
class _ExactESM:
    """``ESMRotaryEmbedding._compute_cos_sin_embedding`` with exact cos/sin."""

    layer: Any

    def __call__(self, x: Any, position: int = 1) -> Any:
        layer = self.layer
        dim = int(x.shape[-1])
        idx = np.arange(0, dim, 2, dtype=np.float64) / dim
        inv_freq = float(layer.scaling_factor) / float(layer.max_wavelength) ** idx
        t = ops.arange(ops.shape(x)[position], dtype="int32")
        cos, sin = _tables(t, inv_freq, 1.0, str(ops.dtype(x)))
        return cos[None, :, None, :], sin[None, :, None, :]


# ------------------------------------------------- model-specific rotary layers


def _check_weight(layer: Any, weight: Any, restated: np.ndarray) -> str | None:
    """Why ``layer``'s frequency weight is not the restated formula (None: it is)."""
    held = np.asarray(ops.convert_to_numpy(weight), np.float64)
    if held.shape == restated.shape and np.allclose(held, restated, rtol=2e-6, atol=0.0):
        return None
    return (
        f"its inv_freq weight is not {type(layer).__name__}'s own formula (changed or "
        "loaded): pe_core.integrations.keras_hub restates the formula, not the weight"
    )


def _power_inverse_freq(base: float, dim: int) -> np.ndarray:
    """``1 / base ** (arange(0, dim, 2) / dim)``, in float64."""
    return 1.0 / float(base) ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def _real(positions: Any) -> Any:
    """Positions as integers when they are, else float32 (as these layers form them)."""
    positions = ops.convert_to_tensor(positions)
    return positions if "int" in str(ops.dtype(positions)) else ops.cast(positions, "float32")


@dataclass
class _ExactSmolLM3:
    """``SmolLM3RotaryEmbedding.call`` with exact cos/sin (its ``(batch, seq, dim)``
    tables times ``attention_scaling``, in the input's dtype)."""

    layer: Any
    inv_freq: np.ndarray

    def __call__(self, x: Any, start_index: Any = 0) -> Any:
        positions = _positions(x, start_index)
        cos, sin = _tables(positions, self.inv_freq, float(self.layer.attention_scaling))
        shape = (ops.shape(x)[0], ops.shape(x)[1], 2 * len(self.inv_freq))
        return (
            ops.cast(ops.broadcast_to(cos, shape), x.dtype),
            ops.cast(ops.broadcast_to(sin, shape), x.dtype),
        )


@dataclass
class _ExactMoonshine:
    """``MoonshineRotaryEmbedding.call`` with exact angles: its attention takes only
    their cos and sin, so each angle is given reduced to ``(-pi, pi]``
    (``atan2`` of the exact sin and cos), whose float32 cos/sin are exact."""

    layer: Any
    inv_freq: np.ndarray

    def __call__(self, t: Any) -> Any:
        cos, sin = _tables(_real(t), self.inv_freq, 1.0, layout="interleaved")
        return ops.cast(ops.arctan2(sin, cos), ops.dtype(self.layer.inv_freq))


@dataclass
class _ExactFlux:
    """Flux's ``RotaryPositionalEmbedding.call``: ``stack([cos, sin], -1)`` of
    ``pos * omega``, exact, in float32."""

    def __call__(self, pos: Any, dim: int, theta: Any) -> Any:
        inv_freq = _power_inverse_freq(float(theta), int(dim))
        cos, sin = _tables(_real(pos), inv_freq, 1.0, layout="half_width")
        return ops.stack([cos, sin], axis=-1)


@dataclass
class _ExactRoformer:
    """RoFormer V2's ``RoformrPositionalEmbedding.sinusoidal_embeddings``: ``sin`` and
    ``cos`` of ``pos * base ** (-2i / dim)`` interleaved, exact, in float32."""

    def __call__(self, pos: Any, dim: int, base: Any = 10000) -> Any:
        inv_freq = _power_inverse_freq(float(base), int(dim))
        cos, sin = _tables(_real(pos), inv_freq, 1.0, layout="half_width")
        pairs = ops.stack([sin, cos], axis=-1)
        return ops.reshape(pairs, (*ops.shape(pairs)[:-2], -1))


@dataclass
class _ExactSAM3:
    """``SAM3ViTRotaryEmbedding.call``: its fixed 2-D axial tables (keras-hub rounds
    each angle to float32 before its cosine), computed in float64 once."""

    layer: Any
    cos: np.ndarray
    sin: np.ndarray

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        dtype = self.layer.variable_dtype
        return ops.convert_to_tensor(self.cos, dtype), ops.convert_to_tensor(self.sin, dtype)


def _sam3(layer: Any) -> tuple[dict[str, Any] | None, str | None]:
    dim = int(layer.head_dim)
    freqs = 1.0 / float(layer.rope_theta) ** (np.arange(0, dim, 4)[: dim // 4] / dim)
    flat = np.arange(int(layer.end_x) * int(layer.end_y))
    x = (flat % int(layer.end_x)) * float(layer.scale)
    y = (flat // int(layer.end_x)) * float(layer.scale)
    angles = np.repeat(np.concatenate([np.outer(x, freqs), np.outer(y, freqs)], -1), 2, -1)
    cos, sin = np.cos(angles), np.sin(angles)
    if not hasattr(layer, "rope_embeddings_cos"):
        return None, "SAM3ViTRotaryEmbedding is not built: call the model once first"
    for held, want in ((layer.rope_embeddings_cos, cos), (layer.rope_embeddings_sin, sin)):
        held = np.asarray(ops.convert_to_numpy(held), np.float64)
        # keras-hub's float32 angles (at most end_x * scale) are this far apart at most
        if held.shape != want.shape or not np.allclose(held, want, rtol=0.0, atol=1e-5):
            return None, (
                "its rope_embeddings weights are not SAM3ViTRotaryEmbedding's own formula "
                "(changed or loaded): pe_core.integrations.keras_hub restates the formula"
            )
    return {"call": _ExactSAM3(layer, cos.astype(np.float32), sin.astype(np.float32))}, None


@dataclass
class _ExactDINOV3:
    """``DINOV3RopePositionEmbedding.call``: ``2 pi`` times the patch centres'
    coordinates in ``[-1, 1]`` times its frequencies, in float64 on the host when the
    image size is known when traced (always on JAX and torch); an image size unknown
    then (a TensorFlow graph with free height or width) gets keras-hub's own float32
    tables (angles within ``2 pi``: about 1e-6 off)."""

    layer: Any
    inv_freq: np.ndarray

    def __call__(self, inputs: Any) -> Any:
        layer = self.layer
        shape = tuple(inputs.shape)
        height, width = shape[1:3] if layer.data_format == "channels_last" else shape[2:4]
        if not (isinstance(height, int) and isinstance(width, int)):
            return type(layer).call(layer, inputs)
        n_h, n_w = height // layer.patch_size, width // layer.patch_size
        coords_h = np.repeat(((np.arange(n_h) + 0.5) / n_h)[:, None], n_w, axis=1)
        coords_w = np.repeat(((np.arange(n_w) + 0.5) / n_w)[None, :], n_h, axis=0)
        coords = 2.0 * np.stack([coords_h, coords_w], -1).reshape(-1, 2) - 1.0
        angles = 2 * math.pi * coords[:, :, None] * self.inv_freq[None, None, :]
        angles = np.tile(angles.reshape(angles.shape[0], -1), (1, 2))
        cos = ops.convert_to_tensor(np.cos(angles).astype(np.float32))
        sin = ops.convert_to_tensor(np.sin(angles).astype(np.float32))
        return ops.cast(cos, inputs.dtype), ops.cast(sin, inputs.dtype)


def _dinov3(layer: Any) -> tuple[dict[str, Any] | None, str | None]:
    dim = int(layer.head_dim)
    inv = 1.0 / float(layer.rope_theta) ** (np.arange(dim // 4) * 4.0 / dim)
    reason = _check_weight(layer, layer.inv_freq, inv)
    return (None, reason) if reason else ({"call": _ExactDINOV3(layer, inv)}, None)


def _smollm3(layer: Any) -> tuple[dict[str, Any] | None, str | None]:
    dim = int(layer.head_dim * layer.partial_rotary_factor)
    inv = _power_inverse_freq(float(layer.rope_theta), dim)
    reason = _check_weight(layer, layer.inv_freq, inv)
    return (None, reason) if reason else ({"call": _ExactSmolLM3(layer, inv)}, None)


def _moonshine(layer: Any) -> tuple[dict[str, Any] | None, str | None]:
    if layer.inv_freq is None:
        return None, "MoonshineRotaryEmbedding is not built: call the model once first"
    half = int(layer.rotary_dim) // 2
    inv = float(layer.base_value) ** -(np.arange(half, dtype=np.float64) / half)
    reason = _check_weight(layer, layer.inv_freq, inv)
    return (None, reason) if reason else ({"call": _ExactMoonshine(layer, inv)}, None)


#: Model-specific rotary layers reproduced here, by their exact class (module, name):
#: what to set on the instance, or why not.
_SPECIFIC: dict[tuple[str, str], Callable[[Any], tuple[dict[str, Any] | None, str | None]]] = {
    ("keras_hub.src.models.smollm3.smollm3_layers", "SmolLM3RotaryEmbedding"): _smollm3,
    ("keras_hub.src.models.moonshine.moonshine_layers", "MoonshineRotaryEmbedding"): _moonshine,
    ("keras_hub.src.models.sam3.sam3_vision_encoder", "SAM3ViTRotaryEmbedding"): _sam3,
    ("keras_hub.src.models.dinov3.dinov3_layers", "DINOV3RopePositionEmbedding"): _dinov3,
    ("keras_hub.src.models.flux.flux_maths", "RotaryPositionalEmbedding"): (
        lambda layer: ({"call": _ExactFlux()}, None)
    ),
    ("keras_hub.src.models.roformer_v2.roformer_v2_attention", "RoformrPositionalEmbedding"): (
        lambda layer: ({"sinusoidal_embeddings": _ExactRoformer()}, None)
    ),
}


#: Layers named for RoPE that only apply the tables their rotary layer gives them.
_APPLIERS = {
    ("keras_hub.src.models.flux.flux_maths", "FluxRoPEAttention"),
    ("keras_hub.src.models.flux.flux_maths", "ApplyRoPE"),
    ("keras_hub.src.models.sam3.sam3_layers", "SAM3RoPEAttention"),
}


def _key(layer: Any) -> tuple[str, str]:
    return type(layer).__module__, type(layer).__name__


# ---------------------------------------------------------------- which layers


def _own(layer: Any, name: str) -> Any:
    return getattr(type(layer), name)


def _exact_method(layer: Any) -> tuple[dict[str, Any] | None, str | None]:
    """What to set on ``layer`` (its exact cos/sin method), or ``None`` and why not."""
    name = type(layer).__name__
    specific = _SPECIFIC.get(_key(layer))
    if specific is not None:
        return specific(layer)
    if not isinstance(layer, RotaryEmbedding):
        return None, (
            f"{name} does not derive from keras_hub's RotaryEmbedding: its formula is not "
            "reproduced by pe_core.integrations.keras_hub"
        )
    compute = _own(layer, _METHOD)
    if compute is ESMRotaryEmbedding._compute_cos_sin_embedding:
        if _own(layer, "call") is ESMRotaryEmbedding.call:
            return {_METHOD: _ExactESM(layer)}, None
    elif compute is Phi3SuScaledRotaryEmbedding._compute_cos_sin_embedding:
        if _own(layer, "_get_inverse_freq") is RotaryEmbedding._get_inverse_freq:
            if _own(layer, "_compute_positions") is RotaryEmbedding._compute_positions:
                return {_METHOD: _ExactPhi3(layer)}, None
    elif compute is RotaryEmbedding._compute_cos_sin_embedding:
        inverse_freq = _INVERSE_FREQ.get(_own(layer, "_get_inverse_freq"))
        positions_ok = _own(layer, "_compute_positions") is RotaryEmbedding._compute_positions
        if inverse_freq is not None and positions_ok:
            if _own(layer, "call") is RotaryEmbedding.call:
                return {_METHOD: _ExactBase(layer, inverse_freq)}, None
    return None, (
        f"{name} overrides what keras_hub's RotaryEmbedding computes (its call, "
        "positions, inverse frequencies or cos/sin): its formula is not reproduced by "
        "pe_core.integrations.keras_hub"
    )


def _rotary_layers(model: Any) -> list[tuple[str, Any]]:
    found = []
    for layer in model._flatten_layers(include_self=True, recursive=True):
        rotary = isinstance(layer, RotaryEmbedding) or _key(layer) in _SPECIFIC
        named = _ROTARY_NAME.search(type(layer).__name__) and _key(layer) not in _APPLIERS
        if rotary or named:
            found.append((layer.path if hasattr(layer, "path") else layer.name, layer))
    return found


@dataclass
class _ExactQwen3_5MRoPE:
    """``Qwen3_5Attention._apply_partial_rope`` with exact M-RoPE angles: ``_apply_mrope``
    takes each rotary pair's angle from the temporal, height or width position channel
    (interleaved at stride 3 by ``mrope_section``) times its rotary layer's frequencies;
    here each channel's tables are exact, for its own pairs. Without M-RoPE (no
    ``mrope_section`` or no ``position_ids``) it is the attention's own, whose rotary
    layer is patched."""

    layer: Any
    inverse_freq: Callable[[Any, int], np.ndarray]

    def __call__(self, x: Any, start_index: Any, position_ids: Any = None) -> Any:
        layer = self.layer
        if layer.mrope_section is None or position_ids is None:
            return type(layer)._apply_partial_rope(layer, x, start_index, position_ids)
        dim = int(layer.rotary_dim)
        inv = self.inverse_freq(layer.rotary_embedding_layer, dim)
        pair = np.arange(dim // 2)
        height = (pair < 3 * layer.mrope_section[1]) & (pair % 3 == 1)
        width = (pair < 3 * layer.mrope_section[2]) & (pair % 3 == 2) & ~height
        cos_parts, sin_parts, order = [], [], []
        for channel, mask in ((1, ~height & ~width), (2, height), (3, width)):
            if mask.any():
                positions = _given(position_ids[:, channel, :])
                cos, sin = _tables(positions, inv[mask], 1.0, layout="half_width")
                cos_parts.append(cos)
                sin_parts.append(sin)
                order.extend(pair[mask].tolist())
        back = np.argsort(np.asarray(order))  # the pairs in their own order again
        cos = ops.take(ops.concatenate(cos_parts, axis=-1), back, axis=-1)
        sin = ops.take(ops.concatenate(sin_parts, axis=-1), back, axis=-1)
        cos = ops.expand_dims(ops.concatenate([cos, cos], axis=-1), 2)
        sin = ops.expand_dims(ops.concatenate([sin, sin], axis=-1), 2)
        x_rope = x[..., :dim]
        rotated = ops.concatenate([-x_rope[..., dim // 2 :], x_rope[..., : dim // 2]], axis=-1)
        x_rope = ops.cast(
            ops.cast(x_rope, "float32") * cos + ops.cast(rotated, "float32") * sin, x.dtype
        )
        if dim == layer.head_dim:
            return x_rope
        return ops.concatenate([x_rope, x[..., dim:]], axis=-1)


def _qwen3_5_owners(model: Any) -> tuple[list[tuple[Any, dict[str, Any]]], list[str]]:
    """Qwen 3.5's attentions, which form their M-RoPE angles from their rotary layer's
    frequencies themselves: what to set on each (its exact ``_apply_partial_rope``), and
    refusals for those whose code or rotary layer is not Qwen 3.5's own."""
    patches, refused = [], []
    for owner in model._flatten_layers(include_self=True, recursive=True):
        qwen = any("qwen3_5" in cls.__module__ for cls in type(owner).__mro__)
        if not (qwen and hasattr(owner, "rotary_embedding_layer")):
            continue
        rope = owner.rotary_embedding_layer
        inverse_freq = None
        if _key(owner) == _QWEN3_5_ATTENTION and isinstance(rope, RotaryEmbedding):
            inverse_freq = _INVERSE_FREQ.get(_own(rope, "_get_inverse_freq"))
        if inverse_freq is None:
            refused.append(
                f"{owner.path} ({type(owner).__name__} forms its M-RoPE angles from "
                "rotary_embedding_layer's frequencies itself, in float32: not reproduced by "
                "pe_core.integrations.keras_hub)"
            )
        else:
            patches.append(
                (owner, {"_apply_partial_rope": _ExactQwen3_5MRoPE(owner, inverse_freq)})
            )
    return patches, refused


_QWEN3_5_ATTENTION = ("keras_hub.src.models.qwen3_5.qwen3_5_attention", "Qwen3_5Attention")


def patch_rotary_embeddings(model: ModelT) -> ModelT:
    """Make every rotary layer of a keras-hub model compute exact cos/sin, in place.

    Parameters
    ----------
    model : keras.layers.Layer
        A keras-hub ``Backbone`` or task model (or any Keras layer holding keras-hub
        rotary layers).

    Returns
    -------
    keras.layers.Layer
        ``model`` itself. Layers patched already stay patched (once).

    Raises
    ------
    ValueError
        ``model`` has no rotary layer (the error names its class), or one of its
        rotary layers computes a formula reproduced nowhere here (the error names each
        such layer and why; nothing is patched).

    Examples
    --------
    >>> import keras_hub  # doctest: +SKIP
    >>> backbone = keras_hub.models.LlamaBackbone(vocabulary_size=64, num_layers=1,
    ...     num_query_heads=2, num_key_value_heads=1, hidden_dim=16,
    ...     intermediate_dim=32)  # doctest: +SKIP
    >>> patch_rotary_embeddings(backbone) is backbone  # doctest: +SKIP
    True
    """
    layers = _rotary_layers(model)
    if not layers:
        raise ValueError(
            f"{type(model).__name__} has no rotary embedding layer: nothing to patch "
            "(pe_core.integrations.keras_hub patches keras_hub RotaryEmbedding layers)."
        )
    patches, refused = _qwen3_5_owners(model)
    for path, layer in layers:
        exact, reason = _exact_method(layer)
        if exact is None:
            refused.append(f"{path} ({reason})")
        else:
            patches.append((layer, exact))
    if refused:
        raise ValueError(
            f"{type(model).__name__} has rotary layers pe_core cannot make exact; nothing "
            "was patched: " + "; ".join(refused)
        )
    for layer, exact in patches:
        if _PATCH not in vars(layer):
            patch(layer, _PATCH, exact)
    return model


def unpatch_rotary_embeddings(model: ModelT) -> ModelT:
    """Give every patched rotary layer of ``model`` its own cos/sin back; returns ``model``.

    Layers that were never patched are left alone.

    >>> unpatch_rotary_embeddings(backbone) is backbone  # doctest: +SKIP
    True
    """
    for layer in model._flatten_layers(include_self=True, recursive=True):
        unpatch(layer, _PATCH)
    return model
