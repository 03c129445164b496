"""Framework layers: the framework-neutral configuration they share.

The layers themselves live in one module per framework, each imported only when
asked for:

* :mod:`pe_core.layers.torch`: ``torch.nn.Module`` layers;
* :mod:`pe_core.layers.flax`: ``flax.nnx.Module`` and ``flax.linen.Module`` layers;
* :mod:`pe_core.layers.keras`: Keras 3 layers (JAX, TensorFlow and PyTorch backends).

Each offers the same two layers, thin wrappers around :func:`pe_core.encode` and
:func:`pe_core.rope.apply_rope`, so a model gives the same numbers in every framework:

* ``SinusoidalEncoding(d_model, *, spec=None, dropout=0.0, max_len=None)`` adds the
  encoding of positions ``offset, offset + 1, ...`` to ``(batch, seq, d_model)`` inputs
  (PyTorch: ``SinusoidalEncoding(d_model, dropout, max_len, *, spec=None,
  batch_first=True)``, the textbook module's argument order, and seq-first inputs with
  ``batch_first=False``);
* ``RotaryEmbedding(head_dim, *, base=10000.0, layout="half", rotary_dim=None,
  scaling=None, layer_type=None)`` rotates queries and keys ``(..., seq, head_dim)``.

This package holds what does not depend on a framework (einops' layer design): the
mixins :class:`SinusoidalEncodingConfig`, :class:`RotaryEmbeddingConfig` (and those of
the relative-bias and N-D layers) validate and store the configuration; the argument
checks, the ``max_len`` cache table and the placed tables live in private modules next
to them. Importing it loads no framework.

The ``max_len`` policy, identical in every framework: positions are computed on the fly
by default, exactly, whatever their size. ``max_len`` only bounds an optional cache of
the rows ``0 .. max_len - 1``; positions at or past ``max_len`` are computed on the fly
and get the same values (up to float32 rounding). A sequence longer than ``max_len`` is
never an error.

>>> from pe_core.layers import SinusoidalEncodingConfig
>>> config = SinusoidalEncodingConfig(64, spec="fairseq", max_len=128)
>>> config.d_model, config.spec.name, config.max_len
(64, 'fairseq', 128)
>>> SinusoidalEncodingConfig(64, dropout=1.5)
Traceback (most recent call last):
...
ValueError: dropout must be a number in [0, 1). Received: 1.5
"""

from __future__ import annotations

from pe_core.layers._config import RotaryEmbeddingConfig, SinusoidalEncodingConfig
from pe_core.layers._config_index import AlibiBiasConfig, T5RelativeBiasConfig
from pe_core.layers._config_nd import (
    FourierFeaturesConfig,
    PatchEncodingConfig,
    RotaryEmbeddingNDConfig,
)

__all__ = [
    "AlibiBiasConfig",
    "FourierFeaturesConfig",
    "PatchEncodingConfig",
    "RotaryEmbeddingConfig",
    "RotaryEmbeddingNDConfig",
    "SinusoidalEncodingConfig",
    "T5RelativeBiasConfig",
]
