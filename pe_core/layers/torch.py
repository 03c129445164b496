"""PyTorch layers: :class:`SinusoidalEncoding` and :class:`RotaryEmbedding`.

Thin ``torch.nn.Module`` wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`; their configuration is validated by the neutral mixins
of :mod:`pe_core.layers`.

``SinusoidalEncoding(d_model)`` is a drop-in for the textbook ``PositionalEncoding``
module (``register_buffer('pe', ...)`` and ``x + pe[:, :x.size(1)]``): same outputs for
the same ``d_model``, but nothing in ``state_dict``, any sequence length, the input's
device and dtype, exact angles at any position, and ``torch.compile(fullgraph=True)``.

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

import numbers
from typing import Any

import numpy as np
import torch
from torch import nn

from pe_core.encoding import encode
from pe_core.layers import (
    RotaryEmbeddingConfig,
    SinusoidalEncodingConfig,
    per_example_shape,
    sequence_bucket,
)
from pe_core.rope import apply_rope
from pe_core.spec import Spec

__all__ = ["RotaryEmbedding", "SinusoidalEncoding"]

Offset = int | torch.Tensor


def _check_offset(offset: object) -> Offset:
    if isinstance(offset, torch.Tensor):
        if offset.dtype == torch.bool or offset.is_complex():
            raise TypeError(
                f"offset must be an int or an integer/float tensor. Received dtype: {offset.dtype}"
            )
        return offset
    if isinstance(offset, bool) or not isinstance(offset, (numbers.Integral, torch.SymInt)):
        raise TypeError(
            "offset must be an int or a tensor of per-example offsets (batch,). "
            f"Received: {offset!r}"
        )
    return offset if isinstance(offset, torch.SymInt) else int(offset)


def _positions(offset: Offset, length: Any, x_shape: tuple[int, ...], device: Any) -> Any:
    """Positions ``offset + arange(length)``: ``(length,)`` for an int or scalar offset,
    ``(batch, 1, ..., length)`` for per-example offsets ``(batch,)``."""
    steps = torch.arange(length, device=device)
    if not isinstance(offset, torch.Tensor):
        return steps + offset
    shape = per_example_shape(tuple(offset.shape), tuple(x_shape))
    return offset.to(device).reshape(shape)[..., None] + steps


class SinusoidalEncoding(SinusoidalEncodingConfig, nn.Module):
    """Adds the sinusoidal encoding of positions ``offset, offset + 1, ...`` to its input.

    Parameters
    ----------
    d_model : int
        Features of the input (its last axis).
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or preset name; ``"vaswani"`` (the textbook module's
        numbers) by default.
    dropout : float
        Dropout rate after the addition (``nn.Dropout``), 0 by default.
    max_len : int, optional
        Size of an optional eager-mode cache of rows ``0 .. max_len - 1``, kept per
        device and dtype, never saved in ``state_dict``. It never limits the sequence
        length: positions at or past ``max_len`` are computed on the fly, with the same
        values.

    Notes
    -----
    *Devices and dtypes.* The encoding is made on the input's device; its angles are
    exact (float32 work, float64 for float64 inputs) and only the result is cast to the
    input's dtype (float16 and bfloat16 inputs get correctly rounded values).

    *Checkpoints with a ``pe`` buffer* (from the textbook module) load with
    ``load_state_dict(..., strict=True)``: the ``pe`` entry is checked against this
    layer's encoding (shape and values, to float32 rounding) and dropped; a mismatch
    (another ``d_model`` or spec) is an error naming it.

    *Compilation.* Under ``torch.compile(fullgraph=True)`` the encoding is computed in
    the graph for the whole *bucket* of the sequence length (a power of two >= 16, see
    :func:`pe_core.layers.sequence_bucket`) and sliced. With a dynamic sequence axis
    (``torch._dynamo.mark_dynamic(x, 1)``, or automatically from the second length
    PyTorch sees) every length within a bucket reuses one graph. A tensor ``offset``
    never recompiles; a Python ``int`` offset is specialised by PyTorch on its first
    value, as every int argument is, and made dynamic when it changes (one recompile).

    Examples
    --------
    >>> import torch
    >>> layer = SinusoidalEncoding(4, max_len=16)
    >>> layer
    SinusoidalEncoding(d_model=4, spec='vaswani', max_len=16)
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
        *,
        spec: Spec | str | None = None,
        dropout: float = 0.0,
        max_len: int | None = None,
    ) -> None:
        super().__init__(d_model, spec=spec, dropout=dropout, max_len=max_len)
        self.dropout_layer = nn.Dropout(self.dropout) if self.dropout else None
        self._cache: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}

    def extra_repr(self) -> str:
        return self.sinusoidal_repr()

    def forward(self, x: torch.Tensor, offset: Offset = 0) -> torch.Tensor:
        """``dropout(x + encoding)`` for ``x`` of shape ``(..., seq, d_model)``.

        Parameters
        ----------
        x : torch.Tensor
            Floating input ``(batch, seq, d_model)`` (any leading axes).
        offset : int or torch.Tensor
            Position of the first row: an int, or a tensor of per-example offsets
            ``(batch,)`` for decoding with a cache.
        """
        if x.ndim < 2:
            raise ValueError(
                f"x must have shape (..., seq, d_model). Received: shape {tuple(x.shape)}"
            )
        self.check_input_features(x.shape[-1])
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating tensor. Received dtype: {x.dtype}")
        pe = self.encoding(x.shape[-2], offset, device=x.device, dtype=x.dtype, like=x)
        x = x + pe
        return x if self.dropout_layer is None else self.dropout_layer(x)

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
        x_shape = tuple(like.shape) if like is not None else (None, length, self.d_model)
        if torch.compiler.is_compiling():
            positions = _positions(offset, sequence_bucket(length), x_shape, device)
            pe = encode(positions, self.d_model, spec=self.spec, dtype=dtype)
            return pe[..., :length, :]
        if isinstance(offset, torch.Tensor):
            positions = _positions(offset, length, x_shape, device)
            return encode(positions, self.d_model, spec=self.spec, dtype=dtype)
        cached = self._cached_rows(offset, length, device, dtype)
        if cached is not None:
            return cached
        # Host-known positions: built on the host; on an accelerator, moved there once
        # and reused from pe_core's device cache.
        anchor = like if like is not None and like.device == device else None
        if anchor is None:
            anchor = torch.empty(0, device=device)
        return encode(
            range(offset, offset + length),
            self.d_model,
            spec=self.spec,
            backend="torch",
            dtype=dtype,
            like=anchor,
        )

    def _cached_rows(
        self, offset: int, length: int, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor | None:
        if dtype == torch.float64 or self.cache_rows(offset, length) is None:
            return None
        key = (device, dtype)
        table = self._cache.get(key)
        if table is None:
            assert self.max_len is not None
            host = torch.from_numpy(np.array(self.cache_rows(0, self.max_len)))
            table = self._cache[key] = host.to(device=device, dtype=dtype)
        return table[offset : offset + length]

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        key = prefix + "pe"
        if key in state_dict:
            problem = self._check_pe_buffer(state_dict[key])
            if problem:
                error_msgs.append(f"{key}: {problem}")
            state_dict = {k: v for k, v in state_dict.items() if k != key}
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def _check_pe_buffer(self, pe: Any) -> str | None:
        """Why a checkpoint's ``pe`` table is not this layer's encoding, or ``None``."""
        table = torch.as_tensor(pe).detach().to("cpu", torch.float64)
        if table.ndim < 2 or any(n != 1 for n in table.shape[:-2]):
            return f"expected a (1, max_len, d_model) table, got shape {tuple(table.shape)}."
        rows, features = table.shape[-2:]
        if features != self.d_model:
            return (
                f"the checkpoint's table has {features} features but the layer was built "
                f"with d_model={self.d_model}."
            )
        expected = encode(range(rows), self.d_model, spec=self.spec, dtype="float64")
        error = np.abs(table.reshape(rows, features).numpy() - expected)
        tolerance = 1e-5 + 2e-7 * rows  # the float32 rounding of a textbook table
        if error.size and float(error.max()) > tolerance:
            row = int(np.argmax(error.max(axis=-1)))
            return (
                f"the checkpoint's table differs from this layer's encoding (spec "
                f"{self.sinusoidal_config()['spec']!r}) by {float(error.max()):.3g} at row "
                f"{row} (allowed: {tolerance:.3g}); was it made with another spec?"
            )
        return None


class RotaryEmbedding(RotaryEmbeddingConfig, nn.Module):
    """Rotates queries and keys by their positions (RoPE), with :func:`~pe_core.rope.apply_rope`.

    Parameters
    ----------
    head_dim : int
        Features per head (the last axis of q and k), even.
    base : float
        ``rope_theta``, > 1 (10000 by default).
    layout : {"half", "interleaved"}
        ``"half"`` (rotate-half: GPT-NeoX, Llama, Hugging Face) or ``"interleaved"``
        (GPT-J, RoFormer).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (even, <= head_dim).
    scaling : dict, optional
        Context-extension rope parameters (e.g. ``{"rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 4096}``) or a model config; see
        :func:`~pe_core.rope.apply_rope`.

    Notes
    -----
    ``forward(q, k, positions=None, offset=0)`` takes q and k of shape
    ``(..., seq, head_dim)`` (e.g. ``(batch, heads, seq, head_dim)``; k may have another
    seq) and returns the rotated ``(q, k)`` in their own dtypes (angles and rotation in
    float32). Positions are ``offset + arange(seq)`` for each, with ``offset`` an int or
    per-example offsets ``(batch,)``; or pass ``positions`` explicitly (broadcasting
    against ``(..., seq)``, the same for q and k). The layer holds no state: nothing in
    ``state_dict``, no cache (the cos/sin of known positions are computed exactly on the
    host per call; traced positions on the device).

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

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        rotary_dim: int | None = None,
        scaling: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(head_dim, base=base, layout=layout, rotary_dim=rotary_dim, scaling=scaling)

    def extra_repr(self) -> str:
        return self.rotary_repr()

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: Any = None,
        offset: Offset = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rope(q), rope(k))``; see the class notes for ``positions`` and ``offset``."""
        for x in (q, k):
            if x.ndim < 2:
                raise ValueError(
                    f"q and k must have shape (..., seq, head_dim). Received: {tuple(x.shape)}"
                )
            self.check_input_features(x.shape[-1])
        offset = _check_offset(offset)
        if positions is not None:
            if isinstance(offset, torch.Tensor) or offset != 0:
                raise ValueError("Pass either positions or offset, not both.")
            return self.rotate(q, positions), self.rotate(k, positions)
        return self.rotate(q, self._default_positions(q, offset)), self.rotate(
            k, self._default_positions(k, offset)
        )

    def rotate(self, x: torch.Tensor, positions: Any) -> torch.Tensor:
        """:func:`~pe_core.rope.apply_rope` of ``x`` with this layer's configuration."""
        return apply_rope(
            x,
            positions,
            base=self.base,
            layout=self.layout,
            rotary_dim=self.rotary_dim,
            scaling=self.scaling,
        )

    def _default_positions(self, x: torch.Tensor, offset: Offset) -> Any:
        length = x.shape[-2]
        if isinstance(offset, int) and not torch.compiler.is_compiling():
            return range(offset, offset + length)  # known: exact cos/sin on the host
        return _positions(offset, length, tuple(x.shape), x.device)
