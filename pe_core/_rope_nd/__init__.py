"""The N-D RoPE engine behind :func:`pe_core.rope_nd.apply_rope_nd`: :mod:`.plan` (the
axis and frequency of every rotary pair, cached per configuration) and
:mod:`.rotation` (cos and sin per pair, and the rotation)."""
