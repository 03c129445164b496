"""M-RoPE's ``(t, h, w)`` position ids of a text + image + video prompt, as
transformers' Qwen2-VL ``get_rope_index`` builds them: computed on the host from the
token types, the vision grids and the attention mask, then placed on the input's
backend (:func:`pe_core.rope_nd.mrope_position_ids` checks the arguments).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from pe_core._position_ids.inputs import wide_dtype
from pe_core_backends import HOST, backend_of, get_namespace

#: Token types of ``token_types`` (transformers' ``mm_token_type_ids``) -> their names.
_VISION_KINDS = {1: "image", 2: "video"}

#: Vision kind -> the iterator of its segments' ``((T, H, W), time scale)`` in order.
_Grids = dict[int, Iterator[tuple[tuple[int, int, int], float]]]


def token_types(
    ids: np.ndarray, token_types: Any, image_token_id: int, video_token_id: int
) -> np.ndarray:
    """0 (text), 1 (image) or 2 (video) per token: given, or from the placeholder ids."""
    if token_types is None:
        return np.where(ids == image_token_id, 1, np.where(ids == video_token_id, 2, 0))
    types = host_ints(token_types, "token_types")
    if types.shape != ids.shape or not np.isin(types, (0, 1, 2)).all():
        raise ValueError(
            f"token_types must have input_ids' shape {ids.shape} and values in 0 (text), "
            f"1 (image), 2 (video). Received shape {types.shape}."
        )
    return types


def kept_tokens(ids: np.ndarray, attention_mask: Any) -> np.ndarray:
    """Which tokens are not padding (all of them without ``attention_mask``)."""
    if attention_mask is None:
        return np.ones(ids.shape, dtype=bool)
    mask = host_ints(attention_mask, "attention_mask").astype(bool)
    if mask.shape != ids.shape:
        raise ValueError(
            f"attention_mask must have input_ids' shape {ids.shape}. Received: {mask.shape}"
        )
    return mask


def vision_grids(
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


def positions(
    types: np.ndarray, keep: np.ndarray, grids: _Grids, merge: int, text_after_vision: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, deltas)`` as host int64: ``(batch, seq, 3)`` and ``(batch, 1)``."""
    batch, seq = types.shape
    out = np.zeros((batch, seq, 3), dtype=np.int64)
    deltas = np.zeros((batch, 1), dtype=np.int64)
    for b in range(batch):
        row = _example_positions(b, types[b][keep[b]], grids, merge, text_after_vision)
        out[b, keep[b]] = row
        deltas[b, 0] = (int(row.max()) + 1 if row.size else 0) - int(keep[b].sum())
    return out, deltas


def _example_positions(
    b: int, row_types: np.ndarray, grids: _Grids, merge: int, text_after_vision: str
) -> np.ndarray:
    """The ``(t, h, w)`` positions of example ``b``'s tokens (padding removed), segment
    by segment: text counts on by one, a vision segment spans its grid, and the text
    after it resumes by ``text_after_vision``."""
    pieces, current, end = [], 0, 0
    for kind, group in itertools.groupby(row_types.tolist()):
        length = len(list(group))
        start, end = end, end + length
        if kind == 0:
            pieces.append(np.repeat(np.arange(current, current + length)[:, None], 3, 1))
            current += length
            continue
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
        pieces.append(block)
        spatial = text_after_vision == "spatial"
        current = current + max(gh, gw) if spatial else int(block.max()) + 1
    return np.concatenate(pieces, 0) if pieces else np.zeros((0, 3), np.int64)


def on_backend(source: str | None, values: np.ndarray) -> Any:
    """Host int64 ``values`` on ``source``'s backend (NumPy for Python values), int64
    (int32 where the backend has no int64)."""
    xp = HOST if source is None else get_namespace(source)
    return values if xp.numpy_arrays else xp.asarray(values, dtype=wide_dtype(xp)[1])


def host_ints(obj: Any, what: str) -> np.ndarray:
    source = backend_of(obj)
    values = np.asarray(obj) if source is None else get_namespace(source).to_numpy(obj)
    if values.dtype.kind not in "biu":
        raise TypeError(f"{what} must hold integers. Received dtype: {values.dtype}")
    return values.astype(np.int64)


def _grids(grid_thw: Any, what: str) -> list[tuple[int, int, int]]:
    if grid_thw is None:
        return []
    grids = host_ints(grid_thw, what)
    if grids.ndim != 2 or grids.shape[1] != 3 or (grids < 1).any():
        raise ValueError(
            f"{what} must have shape (n, 3) with (T, H, W) >= 1 per row. Received shape "
            f"{grids.shape}."
        )
    return [(int(t), int(h), int(w)) for t, h, w in grids]


def _time_scales(scale: Any, n: int) -> list[float]:
    if scale is None:
        return [1.0] * n
    values = np.asarray(scale, dtype=np.float64).reshape(-1)
    if values.size == 1:
        values = np.broadcast_to(values, (n,))
    if values.shape != (n,) or not np.isfinite(values).all() or (values < 0).any():
        raise ValueError(
            f"video_time_scale must be one number >= 0 or one per video ({n}). Received: {scale!r}"
        )
    return [float(v) for v in values]
