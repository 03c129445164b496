"""The framework-neutral configuration of the N-D layers (patch grids, N-D RoPE, Fourier
features of points).

The mixins of ``SinusoidalPatchEncoding``, ``RotaryEmbeddingND`` and
``FourierFeatures``, as :mod:`pe_core.layers._config` holds those of the 1-D layers:
validation, the shape logic of patch grids, and the host table of a grid.

>>> PatchEncodingConfig(64, grid_shape=(14, 14), spec="mae_2d").patch_config()["grid_shape"]
[14, 14]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core._kernel.inputs import working_dtype
from pe_core._schedule import check_d
from pe_core.encoding import encode
from pe_core.fourier import ORDERS
from pe_core.layers._checks import (
    check_dropout,
    check_features,
    check_flag,
    check_grid_shape,
    check_patch_spec,
)
from pe_core.layers._config import (
    LayerConfig,
    QueryKeyConfig,
    short_repr,
    spec_from_config,
    spec_repr,
    spec_to_config,
)
from pe_core.nd import grid
from pe_core.rope import apply_rope
from pe_core.spec import Spec
from pe_core.typing import RopeLayout, SectionLayout, SinCosOrder
from pe_core.validation import choice, finite_real, positive_int


def patch_grid(
    config: PatchEncodingConfig, x_shape: tuple[int, ...], grid_shape: Any
) -> tuple[tuple[int, ...], bool]:
    """``(grid shape, flattened?)`` of patch tokens of shape ``x_shape``.

    ``(batch, N, d)`` inputs are flattened grids of ``grid_shape`` (the call's, else the
    layer's), ``(batch, H, W, ..., d)`` inputs carry their grid; raises naming the
    mismatch.

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


class PatchEncodingConfig(LayerConfig):
    """Configuration of the ``SinusoidalPatchEncoding`` layers (a framework-neutral mixin).

    Parameters
    ----------
    d_model : int
        Features of the patch tokens.
    grid_shape : sequence of int, optional
        The patch grid ``(H, W)`` (or ``(T, H, W)``, ...) for inputs whose tokens are
        flattened, ``(batch, H * W, d_model)``. Inputs ``(batch, H, W, d_model)`` carry
        their grid in their shape.
    spec : Spec or str, optional
        An N-D :class:`~pe_core.Spec` or preset (``"mae_2d"``, ``"tensor2tensor_2d"``,
        ...) whose ``axes`` is the number of grid axes; ``Spec(axes=k)`` (the paper's
        frequencies per axis) for a ``k``-axis grid by default.
    dropout : float
        Dropout rate after the addition, in ``[0, 1)``.

    Examples
    --------
    >>> config = PatchEncodingConfig(64, grid_shape=(14, 14), spec="mae_2d")
    >>> config.spec_for(2).name, config.grid_shape
    ('mae_2d', (14, 14))
    >>> PatchEncodingConfig(64, grid_shape=(2, 3, 4), spec="mae_2d")
    Traceback (most recent call last):
    ...
    ValueError: The spec encodes 2 coordinate axes but the patch grid has 3 axes (grid_shape (2, 3, 4)). Use a spec with axes=3.
    """

    d_model: int
    grid_shape: tuple[int, ...] | None
    spec: Spec | None
    dropout: float

    def __init__(
        self,
        d_model: int,
        *,
        grid_shape: Any = None,
        spec: Spec | str | dict[str, Any] | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(d_model: Any, grid_shape: Any, spec: Any, dropout: Any) -> dict[str, Any]:
        """The validated arguments (``spec`` ``None`` = the default of the grid's axes)."""
        d = positive_int(d_model, "d_model", what="the number of features")
        shape = check_grid_shape(grid_shape)
        resolved = None if spec is None else spec_from_config(spec)
        if shape is not None:
            check_patch_spec(d, resolved or Spec(axes=len(shape)), shape)
        elif resolved is not None:
            check_d(d, resolved)
        return {
            "d_model": d,
            "grid_shape": shape,
            "spec": resolved,
            "dropout": check_dropout(dropout),
        }

    def spec_for(self, axes: int, shape: tuple[int, ...] | None = None) -> Spec:
        """The spec of a ``axes``-axis grid (raises if the layer's spec has other axes)."""
        spec = self.spec if self.spec is not None else Spec(axes=axes)
        if spec.axes != axes:
            check_patch_spec(self.d_model, spec, shape or (None,) * axes)
        return spec

    def _host_table(
        self, spec: Spec, shape: tuple[int, ...], dtype_name: str, flat: bool = False
    ) -> np.ndarray:
        """The encoding of the grid ``shape`` built on the host for ``dtype_name`` output:
        ``(*shape, d_model)``, or ``(prod(shape), d_model)`` row-major with ``flat``."""
        table = np.asarray(
            encode(grid(shape), self.d_model, spec=spec, dtype=working_dtype(dtype_name))
        )
        return table.reshape(-1, self.d_model) if flat else table

    def _layer_config(self) -> dict[str, Any]:
        config = super()._layer_config()
        if self.grid_shape is not None:
            config["grid_shape"] = list(self.grid_shape)
        if self.spec is not None:
            config["spec"] = spec_to_config(self.spec)
        return config

    patch_config = _layer_config

    def _layer_repr(self) -> str:
        parts = [f"d_model={self.d_model}", *self._set_parts("grid_shape")]
        if self.spec is not None:
            parts.append(spec_repr(self.spec))
        elif self.grid_shape is not None:  # the default of a grid with these axes
            parts.append(spec_repr(self.spec_for(len(self.grid_shape), self.grid_shape)))
        return ", ".join(parts + self._set_parts("dropout"))


#: The arguments of :func:`pe_core.rope.apply_rope` an N-D rotary layer passes on.
_ROPE_ND_KWARGS = ("base", "layout", "rotary_dim", "sections", "section_layout", "frequencies")


class RotaryEmbeddingNDConfig(QueryKeyConfig):
    """Configuration of the ``RotaryEmbeddingND`` layers (a framework-neutral mixin).

    Parameters
    ----------
    head_dim : int
        Features per head of the queries and keys.
    sections : sequence of int
        Rotary pairs per coordinate axis (``sum(sections) == head_dim / 2``, or
        ``rotary_dim / 2``), as for ``pe_core.apply_rope(..., sections=...)``: e.g.
        ``(16, 24, 24)`` for Qwen2-VL's ``(t, h, w)``.
    base : float
        RoPE base, > 1.
    layout : {"half", "interleaved"}
        Pair layout (see :mod:`pe_core.rope_layout`).
    section_layout : {"contiguous", "interleaved", "blocks"}
        Which pairs follow which axis (M-RoPE contiguous, Qwen3-VL interleaved; blocks:
        a rotate-half per axis, Gemma 4 vision and Allegro).
    frequencies : None, "per_axis" or sequence of float
        The pair frequencies: the 1-D schedule, one schedule per axis, or explicit.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features.
    grid_shape : sequence of int, optional
        A default grid: without explicit positions, token ``t`` of a sequence of
        ``prod(grid_shape)`` tokens gets the coordinates of ``pe_core.grid(grid_shape)``
        in row-major order.

    Examples
    --------
    >>> RotaryEmbeddingNDConfig(8, (2, 2), grid_shape=(4, 4)).sections
    (2, 2)
    >>> RotaryEmbeddingNDConfig(8, (2, 1))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ...
    """

    sections: tuple[int, ...]
    base: float
    layout: str
    section_layout: str
    frequencies: str | tuple[float, ...] | None
    rotary_dim: int | None
    grid_shape: tuple[int, ...] | None

    def __init__(
        self,
        head_dim: int,
        sections: Any,
        *,
        base: float = 10000.0,
        layout: RopeLayout = "half",
        section_layout: SectionLayout = "contiguous",
        frequencies: Any = None,
        rotary_dim: int | None = None,
        grid_shape: Any = None,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(head_dim: Any, sections: Any, grid_shape: Any, **rope: Any) -> dict[str, Any]:
        """The validated arguments (checked by rotating one row)."""
        d = positive_int(head_dim, "head_dim", what="features per head")
        if isinstance(sections, (str, bytes)) or not hasattr(sections, "__iter__"):
            raise TypeError(
                f"sections must be a sequence of pair counts, one per axis. Received: {sections!r}"
            )
        parts = tuple(sections)
        if rope["frequencies"] is not None and not isinstance(rope["frequencies"], str):
            rope["frequencies"] = tuple(float(w) for w in rope["frequencies"])
        shape = check_grid_shape(grid_shape)
        if shape is not None and len(shape) != len(parts):
            raise ValueError(
                f"grid_shape has {len(shape)} axes but sections has {len(parts)} "
                f"(one per axis). Received: grid_shape={shape}, sections={parts}"
            )
        row, positions = np.zeros((1, d), np.float32), np.zeros((1, len(parts)), np.int64)
        apply_rope(row, positions, sections=parts, **rope)
        return {
            "head_dim": d,
            "sections": tuple(int(s) for s in parts),
            "base": float(rope["base"]),
            "layout": str(rope["layout"]),
            "section_layout": str(rope["section_layout"]),
            "frequencies": rope["frequencies"],
            "rotary_dim": None if rope["rotary_dim"] is None else int(rope["rotary_dim"]),
            "grid_shape": shape,
        }

    def rope_nd_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pe_core.rope.apply_rope` for this layer."""
        return {name: getattr(self, name) for name in _ROPE_ND_KWARGS}

    def grid_positions(self, length: int) -> np.ndarray:
        """``pe_core.grid(grid_shape)`` flattened to ``(length, axes)`` (host integers)."""
        if self.grid_shape is None:
            raise ValueError(
                "Pass positions (..., seq, axes), or build the layer with grid_shape=."
            )
        if math.prod(self.grid_shape) != length:
            raise ValueError(
                f"The sequence has {length} tokens but grid_shape {self.grid_shape} holds "
                f"{math.prod(self.grid_shape)}."
            )
        return np.asarray(grid(self.grid_shape)).reshape(length, len(self.grid_shape))

    def _rotate(self, x: Any, positions: Any = None) -> Any:
        """:func:`~pe_core.rope.apply_rope` of ``x`` at ``positions`` (``None``: the
        layer's grid) with this layer's sections."""
        if positions is None:
            positions = self.grid_positions(x.shape[-2])
        return apply_rope(x, positions, **self.rope_nd_kwargs())

    def _layer_config(self) -> dict[str, Any]:
        config = super()._layer_config()
        for key in ("sections", "frequencies", "grid_shape"):
            if isinstance(config[key], tuple):
                config[key] = list(config[key])
        return config

    rope_nd_config = _layer_config

    def _layer_repr(self) -> str:
        """The base (unless explicit frequencies replace it) and the layout always, the
        other arguments when set."""
        parts = [f"head_dim={self.head_dim}", f"sections={self.sections}"]
        if not isinstance(self.frequencies, tuple):  # explicit frequencies: no base
            parts.append(f"base={self.base:.12g}")
        parts.append(f"layout={self.layout!r}")
        if self.section_layout != "contiguous":
            parts.append(f"section_layout={self.section_layout!r}")
        if self.frequencies is not None:
            parts.append(f"frequencies={short_repr(self.frequencies)}")
        return ", ".join(parts + self._set_parts("rotary_dim", "grid_shape"))


class FourierFeaturesConfig(LayerConfig):
    """Configuration of the ``FourierFeatures`` layers (a framework-neutral mixin).

    Random Fourier features (:func:`pe_core.fourier_features`) of points with
    ``in_features`` coordinates through a Gaussian ``(in_features, num_frequencies)``
    matrix ``B ~ N(0, scale**2)`` (cycles per unit), drawn with ``seed``.

    Parameters
    ----------
    in_features : int
        Coordinates per point ``k`` (SAM: 2), >= 1.
    num_frequencies : int
        Frequencies ``m`` (the output has ``2m`` features), >= 1.
    scale : float
        The standard deviation of ``B`` (SAM's ``scale``; diffusers'
        ``GaussianFourierProjection(scale)``), a finite number > 0.
    trainable : bool
        ``B`` a trainable parameter (``True``) or a fixed buffer (``False``).
    order : {"sin_cos", "cos_sin"}
        Which half comes first, as for :func:`pe_core.fourier_features`.
    seed : int
        Seed of NumPy's ``default_rng`` that draws ``B`` (the same matrix in every
        framework).

    Examples
    --------
    >>> c = FourierFeaturesConfig(2, 4, scale=10.0)
    >>> c.initial_frequencies().shape, c.fourier_config()["order"]
    ((2, 4), 'sin_cos')
    """

    in_features: int
    num_frequencies: int
    scale: float
    trainable: bool
    order: SinCosOrder
    seed: int

    def __init__(
        self,
        in_features: int,
        num_frequencies: int,
        *,
        scale: float = 1.0,
        trainable: bool = False,
        order: SinCosOrder = "sin_cos",
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        self._configure(locals())

    @staticmethod
    def _validate(
        in_features: Any, num_frequencies: Any, scale: Any, trainable: Any, order: Any, seed: Any
    ) -> dict[str, Any]:
        return {
            "in_features": positive_int(in_features, "in_features"),
            "num_frequencies": positive_int(num_frequencies, "num_frequencies"),
            "scale": finite_real(scale, "scale", greater_than=0),
            "trainable": check_flag(trainable, "trainable"),
            "order": choice(order, "order", ORDERS),
            "seed": positive_int(seed, "seed", minimum=0),
        }

    def initial_frequencies(self) -> np.ndarray:
        """The float64 ``(in_features, num_frequencies)`` Gaussian matrix ``B``."""
        rng = np.random.default_rng(self.seed)
        return rng.normal(size=(self.in_features, self.num_frequencies)) * self.scale

    fourier_config = LayerConfig._layer_config
