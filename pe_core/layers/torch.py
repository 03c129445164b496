"""PyTorch layers: :class:`SinusoidalEncoding` and :class:`RotaryEmbedding`.

Thin ``torch.nn.Module`` wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`; their configuration, and what they compute with
pe_core, is the neutral mixins' of :mod:`pe_core.layers`.

``SinusoidalEncoding(d_model, dropout, max_len)`` is a drop-in for the textbook
``PositionalEncoding(d_model, dropout, max_len)`` modules: batch-first ones
(``x + pe[:, :x.size(1)]``) by default, PyTorch's own tutorial (seq-first,
``x + pe[:x.size(0)]``) with ``batch_first=False``. Same outputs for the same
``d_model``, and their checkpoints load; but nothing in ``state_dict``, any sequence
length, the input's device and dtype, exact angles at any position, and
``torch.compile(fullgraph=True)``.

>>> import torch
>>> from pe_core.layers.torch import SinusoidalEncoding
>>> layer = SinusoidalEncoding(8)
>>> y = layer(torch.zeros(2, 3, 8))
>>> y.shape, [round(v, 3) for v in y[0, 1, :2].tolist()]  # sin 1, cos 1
(torch.Size([2, 3, 8]), [0.841, 0.54])
>>> layer.state_dict()
OrderedDict()
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from torch import nn

from pe_core._kernel.inputs import working_dtype
from pe_core.alibi import alibi_slopes
from pe_core.encoding import encode
from pe_core.fourier import fourier_features
from pe_core.layers._checks import (
    check_argument_order,
    check_flag,
    check_offset,
    check_sequence_input,
    per_example_shape,
)
from pe_core.layers._config import (
    InitSignature,
    LayerConfig,
    RotaryEmbeddingConfig,
    SinusoidalEncodingConfig,
    TimestepsConfig,
)
from pe_core.layers._config_index import (
    AlibiHeadsConfig,
    RelativePositionBiasConfig,
    T5RelativeBiasConfig,
)
from pe_core.layers._config_nd import (
    FourierFeaturesConfig,
    PatchEncodingConfig,
    RotaryEmbeddingNDConfig,
    patch_grid,
)
from pe_core.layers._tables import nan_where_wrapped, pe_table_problem
from pe_core.nd import grid
from pe_core.spec import Spec
from pe_core_backends import any_dtensor, get_namespace, map_shards

__all__ = [
    "AlibiBias",
    "FourierFeatures",
    "RelativePositionBias",
    "RotaryEmbedding",
    "RotaryEmbeddingND",
    "SinusoidalEncoding",
    "SinusoidalPatchEncoding",
    "T5RelativeBias",
    "Timesteps",
]

_TORCH = get_namespace("torch")

#: An offset: an int (symbolic under ``torch.compile``) or a tensor of per-example offsets.
Offset = int | torch.SymInt | torch.Tensor


def _check_offset(offset: object) -> Offset:
    if not isinstance(offset, torch.Tensor):
        return cast(Offset, check_offset(offset, symbolic=(torch.SymInt,)))
    refused = offset.dtype == torch.bool or offset.is_complex()
    return cast(Offset, check_offset(offset, offset, offset.dtype if refused else None))


def _positions(offset: Offset, length: Any, x_shape: tuple[int | None, ...], device: Any) -> Any:
    """Positions ``offset + arange(length)``: ``(length,)`` for an int or scalar offset,
    ``(batch, 1, ..., length)`` for per-example offsets ``(batch,)``."""
    steps = torch.arange(length, device=device)
    if not isinstance(offset, torch.Tensor):
        return steps + offset
    shape = per_example_shape(tuple(offset.shape), tuple(x_shape))
    return offset.to(device).reshape(shape)[..., None] + steps


def _check_floating(x: torch.Tensor) -> None:
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating tensor. Received dtype: {x.dtype}")


class _Module(nn.Module):
    """What every layer here adds to ``nn.Module``: its signature and ``repr``, the
    configuration's."""

    __signature__ = InitSignature()

    def extra_repr(self) -> str:
        return cast(LayerConfig, self)._layer_repr()


class SinusoidalEncoding(SinusoidalEncodingConfig, _Module):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` to its input.

    Parameters
    ----------
    d_model : int
        Features of the input (its last axis).
    dropout : float
        Dropout rate after the addition (``nn.Dropout``), 0 by default (the textbook
        modules default to 0.1 or 0.05: pass it).
    max_len : int, optional
        Size of an optional eager-mode cache of rows ``0 .. max_len - 1``, kept per
        device and dtype, never saved in ``state_dict``. It never limits the sequence
        length: positions at or past ``max_len`` are computed on the fly, with the same
        values.
    spec : Spec or str, optional
        Keyword only. A :class:`~pe_core.Spec` or preset name; ``"vaswani"`` (the
        textbook module's numbers) by default.
    batch_first : bool
        Keyword only. ``True`` (default): inputs ``(batch, seq, d_model)``, or any
        ``(..., seq, d_model)``. ``False``: inputs ``(seq, batch, d_model)`` or
        ``(seq, d_model)``, as ``torch.nn.Transformer``'s default and PyTorch's own
        tutorial module take them.

    Notes
    -----
    *Devices and dtypes.* The encoding is made on the input's device; its angles are
    exact (float32 work, float64 for float64 inputs) and only the result is cast to the
    input's dtype (float16 and bfloat16 inputs get correctly rounded values).

    *Checkpoints with a ``pe`` buffer* (from a textbook module) load with
    ``load_state_dict``: the ``pe`` entry is checked against this layer's encoding and
    dropped; the layer keeps computing its exact values. Its shape names the layout it
    was used with: ``(1, max_len, d_model)`` batch-first, ``(max_len, 1, d_model)``
    seq-first (PyTorch's tutorial), ``(max_len, d_model)`` either. Another
    ``d_model``, a layout that contradicts ``batch_first``, or values further than
    ``1e-5 + 2e-7 * max_len + eps`` (``eps`` of the table's dtype) from the exact
    encoding are errors naming the difference, with ``strict=True`` or ``strict=False``
    alike (as PyTorch's own size checks); drop the entry to skip the check.

    *Compilation.* Under ``torch.compile(fullgraph=True)`` the encoding is computed in
    the graph for the sequence length it is given, a symbolic one included: with a
    dynamic sequence axis (``torch._dynamo.mark_dynamic(x, 1)``, ``dynamic=True``, or
    automatically from the second length PyTorch sees) every length reuses one graph.
    A tensor ``offset`` never recompiles; a Python ``int`` offset is specialised by
    PyTorch on its first value, as every int argument is, and made dynamic when it
    changes (one recompile). ``torch.export`` (and ONNX export) encodes the symbolic
    length too: one exported program serves every length (see :doc:`deploying`).

    Examples
    --------
    >>> import torch
    >>> layer = SinusoidalEncoding(4, 0.0, 16)  # (d_model, dropout, max_len)
    >>> layer
    SinusoidalEncoding(d_model=4, spec='vaswani' (base=10000, layout='interleaved'), max_len=16)
    >>> seq_first = SinusoidalEncoding(4, batch_first=False)  # x: (seq, batch, d_model)
    >>> y = seq_first(torch.zeros(3, 2, 4))
    >>> y[:, 0, 0].tolist() == y[:, 1, 0].tolist() == layer(torch.zeros(1, 3, 4))[0, :, 0].tolist()
    True
    >>> x = torch.zeros(2, 1, 4, dtype=torch.float64)
    >>> layer(x, offset=torch.tensor([0, 10**6]))[:, 0, 0].tolist()  # sin 0, sin 1e6
    [0.0, -0.34999350217129294]
    >>> layer(torch.zeros(1, 3, 6))
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 6 features but the layer was built with d_model=4.
    """

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        max_len: int | None = None,
        *,
        spec: Spec | str | None = None,
        batch_first: bool = True,
    ) -> None:
        check_argument_order(dropout, max_len)
        self.batch_first = check_flag(batch_first, "batch_first")
        super().__init__(d_model, spec=spec, dropout=dropout, max_len=max_len)

    def _setup(self) -> None:
        self.dropout_layer = nn.Dropout(self.dropout) if self.dropout else None
        self._cache: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def extra_repr(self) -> str:
        return self._layer_repr() + ("" if self.batch_first else ", batch_first=False")

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        """``dropout(x + encoding)`` along the sequence axis of ``x``.

        Parameters
        ----------
        x : torch.Tensor
            Floating input ``(batch, seq, d_model)`` (any leading axes) with
            ``batch_first=True``; ``(seq, batch, d_model)`` or ``(seq, d_model)`` with
            ``batch_first=False``.
        offset : int or torch.Tensor
            Position of the first row: an int, or a tensor of per-example offsets
            ``(batch,)`` for decoding with a cache.
        """
        if not self.batch_first and x.ndim not in (2, 3):
            raise ValueError(
                "With batch_first=False, x must have shape (seq, batch, d_model) or "
                f"(seq, d_model). Received: shape {tuple(x.shape)}"
            )
        if not self.batch_first and x.ndim == 3:  # (seq, batch, d) -> (batch, seq, d) and back
            x = self._add_encoding(x.transpose(0, 1), offset).transpose(0, 1)
        else:
            x = self._add_encoding(x, offset)
        return x if self.dropout_layer is None else self.dropout_layer(x)

    def _add_encoding(self, x: torch.Tensor, offset: Offset) -> torch.Tensor:
        """``x + encoding`` for ``x`` of shape ``(..., seq, d_model)``."""
        check_sequence_input(tuple(x.shape))
        self.check_input_features(x.shape[-1])
        _check_floating(x)
        if any_dtensor(x):  # each rank adds the rows and features of its own shard
            return map_shards(lambda local, ranges: self._add_local(local, offset, ranges), x)
        return x + self.encoding(x.shape[-2], offset, device=x.device, dtype=x.dtype, like=x)

    def _add_local(
        self, local: torch.Tensor, offset: Offset, ranges: tuple[tuple[int, int], ...]
    ) -> torch.Tensor:
        """A DTensor's local shard plus its encoding: ``ranges`` are the shard's global
        ``(start, length)`` per axis (sequence rows from ``offset + start``)."""
        offset = _check_offset(offset)
        if isinstance(offset, torch.Tensor) and offset.ndim == 1 and offset.shape[0] != 1:
            offset = offset[ranges[0][0] : ranges[0][0] + ranges[0][1]]  # per example
        offset = offset + ranges[-2][0]
        table = self.encoding(
            local.shape[-2], offset, device=local.device, dtype=local.dtype, like=local
        )
        features = ranges[-1]
        return local + table[..., features[0] : features[0] + features[1]]

    def encoding(
        self,
        length: int,
        offset: Offset = 0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        like: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The encoding of ``length`` positions from ``offset``: ``(length, d_model)``, or
        ``(batch, 1, ..., length, d_model)`` for per-example offsets ``(batch,)`` (``like``,
        the input, gives the number of axes).

        >>> SinusoidalEncoding(4).encoding(2, 1).shape
        torch.Size([2, 4])
        """
        offset = _check_offset(offset)
        device = torch.device("cpu") if device is None else torch.device(device)
        # A symbolic length stays so, and a tensor offset is on the device.
        if _TORCH.is_exporting() or torch.compiler.is_compiling() or not isinstance(offset, int):
            x_shape = (None, length, self.d_model) if like is None else tuple(like.shape)
            positions = _positions(offset, length, x_shape, device)
            return nan_where_wrapped(_TORCH, positions, self._encode(positions, dtype))
        if dtype != torch.float64 and self.cache_rows(offset, length) is not None:
            key = (device, dtype)
            table = self._cache.get(key)
            if table is None:
                assert self.max_len is not None
                host = torch.from_numpy(np.array(self.cache_rows(0, self.max_len)))
                table = self._cache[key] = host.to(device=device, dtype=dtype)
            return table[offset : offset + length]
        # Host-known positions: built on the host; on an accelerator, moved there once
        # and reused from pe_core's device cache.
        anchor = (
            like if like is not None and like.device == device else torch.empty(0, device=device)
        )
        return self._encode(range(offset, offset + length), dtype, backend="torch", like=anchor)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        key = prefix + "pe"
        if key in state_dict:
            pe = torch.as_tensor(state_dict[key]).detach()
            eps = torch.finfo(pe.dtype).eps if pe.is_floating_point() else 0.0

            def values(rows: int, features: int) -> np.ndarray:
                return pe.to("cpu", torch.float64).reshape(rows, features).numpy()

            shape = tuple(pe.shape)
            problem = pe_table_problem(self, shape, values, eps, batch_first=self.batch_first)
            if problem:
                args[-1].append(f"{key}: {problem}")  # error_msgs
            state_dict = {k: v for k, v in state_dict.items() if k != key}
        super()._load_from_state_dict(state_dict, prefix, *args)


class RotaryEmbedding(RotaryEmbeddingConfig, _Module):
    """Rotates queries and keys by their positions (RoPE), with :func:`~pe_core.rope.apply_rope`.

    Parameters
    ----------
    head_dim, base, layout, rotary_dim, scaling, layer_type, trainable_frequencies, frequency_heads
        As for :class:`~pe_core.layers.RotaryEmbeddingConfig`.

    Notes
    -----
    ``forward(q, k, positions=None, offset=0)`` returns the rotated ``(q, k)``; shapes,
    dtypes and positions as for the configuration. The layer holds no state: nothing in
    ``state_dict``, no cache (the cos/sin of known positions are computed exactly on the
    host per call; traced positions on the device). With ``trainable_frequencies=True``
    it holds one ``nn.Parameter``, ``frequencies``, and the angles are ``pos *
    frequencies`` on its device (:mod:`pe_core.trainable`).

    Examples
    --------
    >>> import torch
    >>> rope = RotaryEmbedding(8)
    >>> q, k = torch.randn(2, 2, 4, 3, 8).unbind(0)  # (batch, heads, seq, head_dim)
    >>> q1, k1 = rope(q, k)
    >>> q2, k2 = rope(q, k, offset=100)
    >>> bool(torch.allclose(q1 @ k1.mT, q2 @ k2.mT, atol=1e-5))  # relative positions only
    True
    >>> rope(q[..., :6], k)
    Traceback (most recent call last):
    ...
    ValueError: The input's last axis has 6 features but the layer was built with head_dim=8.
    """

    def _setup(self) -> None:
        if self.trainable_frequencies:
            self.frequencies = nn.Parameter(torch.from_numpy(self.initial_frequencies()))

    def _frequencies(self) -> torch.Tensor:
        return self.frequencies

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: Any = None, offset: Offset = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rope(q), rope(k))``; see the class notes for ``positions`` and ``offset``."""
        self._check_query_key(tuple(q.shape), tuple(k.shape))
        offset = _check_offset(offset)
        if positions is not None:
            if isinstance(offset, torch.Tensor) or offset != 0:
                raise ValueError("Pass either positions or offset, not both.")
            return self.rotate(q, positions), self.rotate(k, positions)
        return self._rotate_from(q, offset), self._rotate_from(k, offset)

    def _rotate_from(self, x: torch.Tensor, offset: Offset) -> torch.Tensor:
        if isinstance(offset, int) and not torch.compiler.is_compiling():
            return self.rotate(x, range(offset, offset + x.shape[-2]))  # exact cos/sin on the host
        positions = _positions(offset, x.shape[-2], tuple(x.shape), x.device)
        return nan_where_wrapped(_TORCH, positions, self.rotate(x, positions))

    def rotate(self, x: torch.Tensor, positions: Any) -> torch.Tensor:
        """:func:`~pe_core.rope.apply_rope` of ``x`` with this layer's configuration."""
        return cast(torch.Tensor, self._rotate(x, positions))


# --------------------------------------------------------------------------- relative bias


class T5RelativeBias(T5RelativeBiasConfig, _Module):
    """T5's learned relative position bias, with :func:`pe_core.t5.t5_relative_bias`.

    Parameters
    ----------
    n_heads, num_buckets, max_distance, bidirectional
        As for :class:`~pe_core.layers.T5RelativeBiasConfig`.

    Notes
    -----
    ``forward(query_length, key_length, offset=0)`` returns the bias ``(1, n_heads,
    query_length, key_length)``, as for the configuration. The table is ``relative_attention_bias``, an ``nn.Embedding(num_buckets, n_heads)``
    named as in T5, so ``load_state_dict`` takes a T5 layer's
    ``relative_attention_bias.weight``.

    Examples
    --------
    >>> import torch
    >>> layer = T5RelativeBias(4)
    >>> layer(3, 5).shape
    torch.Size([1, 4, 3, 5])
    >>> layer(1, 5, offset=torch.tensor([4, 2])).shape  # per-example cache lengths
    torch.Size([2, 4, 1, 5])
    """

    def _setup(self) -> None:
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)

    def forward(self, query_length: int, key_length: int, offset: Offset = 0) -> torch.Tensor:
        """The bias ``(1, n_heads, query_length, key_length)``."""
        table = self.relative_attention_bias.weight
        return cast(torch.Tensor, self._bias(table, query_length, key_length, offset, "torch"))


class AlibiBias(AlibiHeadsConfig, _Module):
    """The ALiBi bias of :func:`pe_core.alibi_bias`, with keras-hub's ``alibi_bias_max``.

    Parameters
    ----------
    n_heads, alibi_bias_max, causal
        As for :class:`~pe_core.layers.AlibiBiasConfig`.

    Notes
    -----
    ``forward(query_length, key_length, like=None)`` returns ``(1, n_heads,
    query_length, key_length)``; queries are the last ``query_length`` of the keys.
    The bias follows ``like``'s device and dtype (e.g. the scores), float32 on the CPU
    otherwise. No parameters.

    Examples
    --------
    >>> bias = AlibiBias(2)(2, 3)
    >>> bias.shape, bias[0, 0].tolist()  # slope 1/16; query 0 sits at position 1
    (torch.Size([1, 2, 2, 3]), [[-0.0625, 0.0, -inf], [-0.125, -0.0625, 0.0]])
    """

    def _setup(self) -> None:
        # Python floats: the constants of compiled code
        slopes = alibi_slopes(self.n_heads, alibi_bias_max=self.alibi_bias_max)
        self._slopes = tuple(slopes.tolist())

    def forward(
        self, query_length: int, key_length: int, like: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The bias ``(1, n_heads, query_length, key_length)``."""
        if not torch.compiler.is_compiling():
            dtype = None if like is None else like.dtype
            bias = self._bias(query_length, key_length, backend="torch", dtype=dtype, like=like)
            return cast(torch.Tensor, bias)
        # compiled code: pe_core.alibi_bias's formula in torch operations (the same
        # float32 product of the float64 slopes and the integer distances)
        device = like.device if isinstance(like, torch.Tensor) else None
        dtype = like.dtype if isinstance(like, torch.Tensor) else torch.float32
        working = getattr(torch, working_dtype(str(dtype).removeprefix("torch.")))
        keys = torch.arange(key_length, device=device)
        queries = torch.arange(query_length, device=device) + (key_length - query_length)
        offset = (keys[None, :] - queries[:, None]).to(working)
        offset = torch.where(offset > 0, float("-inf"), offset) if self.causal else -offset.abs()
        bias = torch.tensor(self._slopes, dtype=working, device=device)[:, None, None] * offset
        return bias.to(dtype)[None]


class FourierFeatures(FourierFeaturesConfig, _Module):
    """Random Fourier features of :func:`pe_core.fourier_features` with a Gaussian matrix.

    Parameters
    ----------
    in_features, num_frequencies, scale, trainable, order, seed
        As for :class:`~pe_core.layers.FourierFeaturesConfig`.

    Notes
    -----
    ``forward(coords)`` maps ``(..., in_features)`` to ``(..., 2 * num_frequencies)``:
    ``fourier_features(coords, self.frequencies, order=order)``, so the layer's numbers are
    the function's with the layer's float32 matrix. ``frequencies`` is a
    ``torch.nn.Parameter`` when ``trainable`` (gradients reach it) and a buffer
    otherwise; both are in ``state_dict`` and follow ``.to(device)``. SAM's positional
    embedding is ``FourierFeatures(2, num_pos_feats, scale=scale)`` applied to
    ``2 * coords - 1`` (with SAM's matrix loaded as ``frequencies``).

    Examples
    --------
    >>> layer = FourierFeatures(2, 4, scale=3.0, trainable=True)
    >>> y = layer(torch.zeros(5, 2))
    >>> y.shape, y[0].tolist()  # sin 0 = 0, cos 0 = 1
    (torch.Size([5, 8]), [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    >>> sorted(layer.state_dict())
    ['frequencies']
    """

    frequencies: torch.Tensor

    def _setup(self) -> None:
        initial = torch.from_numpy(self.initial_frequencies().astype(np.float32))
        if self.trainable:
            self.frequencies = nn.Parameter(initial)
        else:
            self.register_buffer("frequencies", initial)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        """The features ``(..., 2 * num_frequencies)`` of ``coords`` ``(..., in_features)``."""
        _check_floating(coords)
        return cast(torch.Tensor, fourier_features(coords, self.frequencies, order=self.order))


# --------------------------------------------------------------------------- N-D layers


class SinusoidalPatchEncoding(PatchEncodingConfig, _Module):
    """Adds the N-D sinusoidal encoding of a patch grid to patch tokens.

    Parameters
    ----------
    d_model, grid_shape, spec
        As for :class:`~pe_core.layers.PatchEncodingConfig`.
    dropout : float
        Dropout rate after the addition (``nn.Dropout``).

    Notes
    -----
    ``forward(x, grid_shape=None)`` adds ``pe_core.encode(pe_core.grid(shape), d_model,
    spec=spec)``, flattened row-major for ``(batch, H * W, d_model)`` inputs; a
    ``grid_shape`` passed to ``forward`` wins over the constructor's. The table is built
    exactly on the host and, on an accelerator, placed once and cached. Add it before
    prepending a class token (MAE gives that token a zero encoding). No parameters.

    Examples
    --------
    >>> import torch
    >>> layer = SinusoidalPatchEncoding(8, grid_shape=(2, 3), spec="mae_2d")
    >>> layer(torch.zeros(1, 6, 8)).shape
    torch.Size([1, 6, 8])
    >>> SinusoidalPatchEncoding(8)(torch.zeros(1, 2, 3, 8)).shape  # grid from the shape
    torch.Size([1, 2, 3, 8])
    """

    def _setup(self) -> None:
        self.dropout_layer = nn.Dropout(self.dropout) if self.dropout else None

    def forward(self, x: torch.Tensor, grid_shape: Any = None) -> torch.Tensor:
        """``dropout(x + encoding)`` for ``x`` ``(batch, H * W, d)`` or ``(batch, H, W, d)``."""
        shape, flat = patch_grid(self, tuple(x.shape), grid_shape)
        _check_floating(x)
        pe = self.encoding(shape, dtype=x.dtype, like=x)
        x = x + (pe.reshape(-1, self.d_model) if flat else pe)
        return x if self.dropout_layer is None else self.dropout_layer(x)

    def encoding(
        self, grid_shape: Any, *, dtype: torch.dtype = torch.float32, like: Any = None
    ) -> torch.Tensor:
        """The encoding ``(*grid_shape, d_model)`` on ``like``'s device (CPU by default)."""
        shape = tuple(int(n) for n in grid_shape)
        spec = self.spec_for(len(shape), shape)
        if torch.compiler.is_compiling():
            coords = grid(shape, backend="torch", like=like)
            return encode(coords, self.d_model, spec=spec, dtype=dtype)
        anchor = like if isinstance(like, torch.Tensor) else torch.empty(0)
        return encode(
            grid(shape), self.d_model, spec=spec, backend="torch", dtype=dtype, like=anchor
        )


class RotaryEmbeddingND(RotaryEmbeddingNDConfig, _Module):
    """N-D rotary embedding: rotary pairs split among coordinate axes (``sections``).

    Parameters
    ----------
    head_dim, sections, base, layout, section_layout, frequencies, rotary_dim, grid_shape
        As for :class:`~pe_core.layers.RotaryEmbeddingNDConfig`.

    Notes
    -----
    ``forward(q, k, positions=None)``: q and k ``(..., seq, head_dim)``; ``positions``
    ``(..., seq, len(sections))`` coordinates broadcasting against them (``(seq, k)``,
    or ``(batch, 1, seq, k)`` per example), or ``None`` for the layer's grid. Returns
    the rotated ``(q, k)``. No parameters.

    Examples
    --------
    >>> import torch
    >>> rope = RotaryEmbeddingND(8, (2, 2), grid_shape=(2, 3))
    >>> q, k = torch.randn(2, 1, 2, 6, 8).unbind(0)  # (batch, heads, H * W, head_dim)
    >>> q1, k1 = rope(q, k)
    >>> shifted = torch.as_tensor(rope.grid_positions(6)) + torch.tensor([5, 7])
    >>> q2, k2 = rope(q, k, positions=shifted)  # the whole grid moved by (5, 7)
    >>> bool(torch.allclose(q1 @ k1.mT, q2 @ k2.mT, atol=1e-5))  # relative positions only
    True
    """

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rope(q), rope(k))`` at ``positions`` (or the layer's grid)."""
        self._check_query_key(tuple(q.shape), tuple(k.shape))
        return self.rotate(q, positions), self.rotate(k, positions)

    def rotate(self, x: torch.Tensor, positions: Any = None) -> torch.Tensor:
        """:func:`~pe_core.rope.apply_rope` of one tensor with this layer's sections."""
        if positions is None and torch.compiler.is_compiling():
            positions = torch.as_tensor(self.grid_positions(x.shape[-2]), device=x.device)
        return self._rotate(x, positions)


class RelativePositionBias(RelativePositionBiasConfig, _Module):
    """Swin's (and BEiT's) learned relative position bias of a window, with
    :func:`pe_core.relative_index.relative_position_bias`.

    Parameters
    ----------
    window_size, n_heads, prefix_tokens
        As for :class:`~pe_core.layers._config_index.RelativePositionBiasConfig`.

    Notes
    -----
    ``forward()`` returns the bias ``(n_heads, N, N)``, ``N = Wh * Ww +
    prefix_tokens``, to add to the scores ``(batch, n_heads, N, N)``. The table is the
    parameter ``relative_position_bias_table`` ``(num_relative_distance, n_heads)``,
    named as in Swin and BEiT, so ``load_state_dict`` takes theirs; it starts at zeros.

    Examples
    --------
    >>> layer = RelativePositionBias(7, 3)
    >>> layer.relative_position_bias_table.shape, layer().shape
    (torch.Size([169, 3]), torch.Size([3, 49, 49]))
    """

    def _setup(self) -> None:
        self.relative_position_bias_table = nn.Parameter(torch.zeros(self.table_shape()))

    def forward(self) -> torch.Tensor:
        """The bias ``(n_heads, N, N)``."""
        return cast(torch.Tensor, self._bias(self.relative_position_bias_table, "torch"))


# ------------------------------------------------------------------ timestep embeddings


class Timesteps(TimestepsConfig, _Module):
    """diffusers' ``Timesteps`` module: :func:`pe_core.timestep_embedding` of the timesteps.

    Parameters
    ----------
    num_channels, flip_sin_to_cos, downscale_freq_shift, scale
        As for :class:`~pe_core.layers._config.TimestepsConfig`.

    Notes
    -----
    Same constructor and attributes as ``diffusers.models.embeddings.Timesteps``;
    ``forward(timesteps)`` takes timesteps of any shape ``S`` (diffusers: 1-D) and
    returns the float32 ``S + (num_channels,)`` embedding on their device, exact at
    any timestep and scale (the angles are reduced exactly). No parameters; runs
    under ``torch.compile(fullgraph=True)``. Invalid configurations fail at
    construction.

    Examples
    --------
    >>> layer = Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0)
    >>> e = layer(torch.tensor([0, 999]))
    >>> e.shape, e.dtype, e[0, :2].tolist()
    (torch.Size([2, 320]), torch.float32, [1.0, 1.0])
    """

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        """The embedding ``timesteps.shape + (num_channels,)``, float32."""
        return cast(torch.Tensor, self._timesteps(timesteps))
