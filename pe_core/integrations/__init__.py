"""Integrations with other libraries' models, one module per library.

* :mod:`pe_core.integrations.transformers`: make a Hugging Face transformers model use
  pe_core's exact RoPE cos/sin (``patch_rotary_embeddings(model)``).
* :mod:`pe_core.integrations.keras_hub`: make a keras-hub model compute exact rotary
  cos/sin on every Keras backend (``patch_rotary_embeddings(model)``).
* :mod:`pe_core.integrations.diffusers`: make a diffusers model or pipeline use exact
  timestep, Fourier and rotary embeddings (``patch_positional_embeddings(model)``).
* :mod:`pe_core.integrations.torchscript`: forms of the sinusoidal table, RoPE, ALiBi and
  T5 buckets that ``torch.jit.script`` accepts, for TorchScript-era model code.

Each module imports its library (and its framework) when it is imported; ``import
pe_core`` imports none of them, and importing this package loads no framework.
"""

from __future__ import annotations

__all__: list[str] = []
