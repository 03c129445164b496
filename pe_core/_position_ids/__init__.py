"""The position-id rules engine behind :mod:`pe_core.position_ids` and
:func:`pe_core.rope_nd.mrope_position_ids`: :mod:`.inputs` (each input on its
backend, the output dtype, host checks), :mod:`.rules` (masks, padded ids, packed
sequences, table cells), :mod:`.navit` (NaViT's buckets) and :mod:`.mrope` (M-RoPE's
``(t, h, w)`` ids of a prompt)."""
