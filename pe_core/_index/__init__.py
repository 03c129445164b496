"""The engines of the relative index tables and the T5 and DeBERTa buckets.

The faces :mod:`pe_core.relative_index` and :mod:`pe_core.t5` validate, choose and
delegate; the computing code lives here, one module per family:

* :mod:`._index.place`: integer inputs and host tables as arrays of a backend;
* :mod:`._index.window`: Swin/BEiT, SwinV2, clipped (Shaw), LeViT and ESMFold tables;
* :mod:`._index.funnel`: Funnel Transformer's positions and relative distances;
* :mod:`._index.log_buckets`: the float32 log replay and the log-bucket thresholds of
  T5 and DeBERTa, and DeBERTa's bucket kernel;
* :mod:`._index.t5`: T5's bucket kernel, its integer domain and its diagonals.
"""
