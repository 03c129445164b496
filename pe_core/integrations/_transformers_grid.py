"""transformers' rotary modules of 2-D patch grids, made exact at patch time.

Two kinds whose forward takes no position ids:

* Llama 4's vision tower (``Llama4VisionRotaryEmbedding``): ``forward(hidden_states)``
  returns a complex table ``freqs_ci`` built once from the config by the class's own
  ``_compute_freqs_ci``. Patched, that buffer is replaced by the same function run in
  float64 (:mod:`pe_core.integrations._hf_float64`), rounded once to the buffer's dtype;
  its ``forward`` is left as it is.
* DINOv3's grids (DINOv3-ViT's ``DINOv3ViTRopePositionEmbedding``, its copies in
  Sapiens2 and EoMT-DINOv3's ``EomtDinov3RotaryEmbedding``):
  ``forward(pixel_values)`` returns the cos/sin of ``2 pi c w`` for the patch centres
  ``c`` in ``[-1, 1]`` of each axis and ``w = base ** (-4k / head_dim)``. Patched, the
  forward returns the float64 cos/sin of the float64 centres and pe_core's float64
  frequencies, rounded once to ``pixel_values.dtype`` (a table per grid size, device
  and dtype, built on the host on first use); in training mode the module's own
  forward runs (its random shift, jitter and rescale of the centres).

Each is checked at patch time against the module's own buffers and forward; a module
that disagrees is refused with the reason.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from pe_core.integrations._hf_float64 import Float64Mode
from pe_core.integrations._transformers_probe import _source
from pe_core.rope_scaling import rope_frequencies

__all__ = ["GridForward", "grid_plan"]

#: Grid tables a patched DINOv3-style module keeps (grid size, device, dtype).
_MAX_TABLES = 8

#: Agreement of a module's float32 output with the float64 one, per radian of angle.
_ATOL_PER_RADIAN = 1e-6


def _forward_params(module: Any) -> list[str]:
    try:
        return list(inspect.signature(type(module).forward).parameters)[1:]
    except (TypeError, ValueError):
        return []


def _patch_sizes(config: Any) -> tuple[int, int]:
    size = config.patch_size
    return tuple(size) if isinstance(size, Iterable) else (size, size)


def grid_plan(module: Any) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """``((attributes, buffers), "")`` to patch ``module`` with, ``(None, why)`` if it is
    a grid module that fails its check, ``(None, "")`` if it is not a grid module."""
    params = _forward_params(module)
    if params == ["hidden_states"] and callable(getattr(type(module), "_compute_freqs_ci", None)):
        return _table_plan(module)
    config = getattr(module, "config", None)
    if not isinstance(getattr(module, "inv_freq", None), torch.Tensor) or config is None:
        return None, ""
    if params == ["pixel_values"] and getattr(config, "patch_size", None) is not None:
        return _grid_plan(module, "centres")
    if params == ["x"] and all(getattr(config, key, None) is not None for key in _FEATURE_KEYS):
        return _grid_plan(module, "features")
    return None, ""


def _table_plan(module: Any) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """Llama 4's vision rope: its ``freqs_ci`` buffer rebuilt in float64."""
    buffer = getattr(module, "freqs_ci", None)
    if not (isinstance(buffer, torch.Tensor) and buffer.is_complex()):
        return None, "it has no complex freqs_ci buffer"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad(), Float64Mode():
            exact = type(module)._compute_freqs_ci(module.config)
    finally:
        torch.set_default_dtype(previous)
    if not (isinstance(exact, torch.Tensor) and exact.dtype == torch.complex128):
        return None, "its _compute_freqs_ci does not give a complex128 table in float64 mode"
    if exact.shape != buffer.shape:
        return None, (
            f"its freqs_ci has shape {tuple(buffer.shape)}, its config's table {tuple(exact.shape)}"
        )
    grid = module.config.image_size // module.config.patch_size  # largest angle: grid * 1
    atol = _ATOL_PER_RADIAN * (2.0 + grid)
    theirs = torch.view_as_real(buffer.detach().cpu()).double()
    if not torch.allclose(theirs, torch.view_as_real(exact), rtol=0.0, atol=atol):
        return (
            None,
            "its freqs_ci differs from its config's table in float64 beyond float32 rounding",
        )
    return ({}, {"freqs_ci": exact.to(device=buffer.device, dtype=buffer.dtype)}), ""


def _omegas(module: Any, kind: str) -> tuple[tuple[float, ...] | None, str]:
    """The float64 frequencies of a grid rope, checked against its ``inv_freq``."""
    config = module.config
    if kind == "features":  # EfficientLoFTR: its rope type's frequencies, as text modules
        source, why = _source(module, None, str(getattr(module, "rope_type", "default")))
        return (None, why) if source is None else (source()[0], "")
    base = getattr(module, "base", None)
    if base is None:
        base = (getattr(config, "rope_parameters", None) or {}).get("rope_theta")
    head_dim = config.hidden_size // config.num_attention_heads
    if not isinstance(base, (int, float)) or head_dim % 4:
        return None, f"it has no rope_theta, or head_dim {head_dim} is not a multiple of 4"
    omegas, _ = rope_frequencies({"rope_theta": float(base), "head_dim": head_dim // 2})
    theirs = module.inv_freq.detach().double().cpu().numpy()
    if theirs.shape != omegas.shape or not np.allclose(theirs, omegas, rtol=1e-5, atol=0.0):
        return None, (
            f"its inv_freq differs from base ** (-4k / head_dim) (base {base}, head_dim "
            f"{head_dim}) beyond float32 rounding"
        )
    return tuple(float(w) for w in omegas), ""


def _grid_plan(module: Any, kind: str) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """A grid rope (``"centres"``: DINOv3's, ``"features"``: EfficientLoFTR's): its
    forward replaced by :class:`GridForward`, after its own forward gave the same on a
    3 x 5 grid."""
    config = module.config
    omegas, why = _omegas(module, kind)
    if omegas is None:
        return None, why
    forward = GridForward(module, omegas, kind)
    if kind == "centres":
        ph, pw = _patch_sizes(config)
        shape = (1, 1, 3 * ph, 5 * pw)
    else:
        k, stride = config.q_aggregation_kernel_size, config.q_aggregation_stride
        shape = (1, 1, k + 2 * stride, k + 4 * stride)
    x = torch.zeros(shape, device=module.inv_freq.device)
    raw = getattr(type(module).forward, "__wrapped__", type(module).forward)
    training = module.training
    module.training = False
    try:
        with torch.no_grad():
            got = raw(module, x)
    except Exception as error:
        return None, f"its forward fails on a 3 x 5 grid: {type(error).__name__}: {error}"
    finally:
        module.training = training
    want = forward.table(3, 5, x.device, x.dtype)
    radians = (2.0 * math.pi if kind == "centres" else 5.0) * max(omegas)
    atol = _ATOL_PER_RADIAN * (1.0 + radians)
    if not (
        isinstance(got, tuple)
        and len(got) == 2
        and all(
            isinstance(g, torch.Tensor)
            and g.shape == w.shape
            and torch.allclose(g.double(), w.double(), rtol=0.0, atol=atol)
            for g, w in zip(got, want, strict=True)
        )
    ):
        return None, f"its forward does not compute {_GRIDS[kind]} on a 3 x 5 grid"
    return ({"forward": forward}, {}), ""


#: What each grid kind's forward computes (for the refusal).
_GRIDS = {
    "centres": "the cos/sin of 2 pi * patch centres * inv_freq (DINOv3's 2-D grid)",
    "features": (
        "the cos/sin of (row, column) * inv_freq of the aggregated feature grid, each "
        "twice in a row (EfficientLoFTR's 2-D grid)"
    ),
}

#: The config keys of EfficientLoFTR's feature grid.
_FEATURE_KEYS = ("q_aggregation_kernel_size", "q_aggregation_stride", "hidden_size")


class GridForward:
    """The ``forward`` of a patched grid rope (``forward(pixel_values)``: DINOv3's patch
    centres; ``forward(x)`` of a feature map: EfficientLoFTR's rows and columns): a plain
    object, copied and pickled with the module, which it refers to for its config and
    training mode."""

    def __init__(self, module: Any, omegas: tuple[float, ...], kind: str) -> None:
        self.module = module
        self.omegas = omegas
        self.kind = kind
        self.tables: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}

    def __getstate__(self) -> dict[str, Any]:  # copies and pickles rebuild the tables
        return {**vars(self), "tables": {}}

    def _angles(self, n_h: int, n_w: int) -> np.ndarray:
        """float64 angles of the grid, laid out as the module's forward lays them."""
        w = np.asarray(self.omegas)
        if self.kind == "centres":  # (n_h * n_w, head_dim): rows' then columns' pairs, twice
            axes = [(np.arange(n, dtype=np.float64) + 0.5) / n * 2.0 - 1.0 for n in (n_h, n_w)]
            coords = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
            angles = 2.0 * math.pi * coords[:, :, None] * w[None, None, :]
            return np.tile(angles.reshape(angles.shape[0], -1), 2)
        # (1, n_h, n_w, hidden_size): rows' and columns' angles alternating, each twice
        emb = np.zeros((1, n_h, n_w, self.module.config.hidden_size // 2))
        emb[:, :, :, 0::2] = np.arange(1.0, n_h + 1)[:, None, None] * w
        emb[:, :, :, 1::2] = np.arange(1.0, n_w + 1)[None, :, None] * w
        return emb.repeat(2, axis=-1)

    def table(
        self, n_h: int, n_w: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin of the ``n_h x n_w`` grid in ``dtype`` (float64 values rounded once)."""
        key = (n_h, n_w, device, dtype)
        found = self.tables.get(key)
        if found is not None:
            return found
        angles = self._angles(n_h, n_w)
        out = (
            torch.from_numpy(np.cos(angles)).to(device=device, dtype=dtype),
            torch.from_numpy(np.sin(angles)).to(device=device, dtype=dtype),
        )
        if len(self.tables) >= _MAX_TABLES:
            self.tables.clear()
        self.tables[key] = out
        return out

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        module, config = self.module, self.module.config
        if module.training and self.kind == "centres":  # its random shift, jitter, rescale
            return type(module).forward(module, x)
        height, width = x.shape[-2:]
        if self.kind == "centres":
            ph, pw = _patch_sizes(config)
            n_h, n_w = height // ph, width // pw
        else:
            k, stride = config.q_aggregation_kernel_size, config.q_aggregation_stride
            n_h, n_w = (height - k) // stride + 1, (width - k) // stride + 1
        return self.table(n_h, n_w, x.device, x.dtype)
