"""``rope_cos_sin``: the exact RoPE cos/sin tables, in the shapes model code takes.

Model code that keeps its own ``apply_rotary_pos_emb`` (or calls a fused kernel) needs
the tables, not the rotation: :func:`rope_cos_sin` returns ``(cos, sin)`` of
``positions * inv_freq`` for any rope configuration (:class:`~pe_core.RopeSpec`, or a
model config: scaling, partial rotary, attention factor folded in as transformers
does), reduced exactly (no float32 ``positions * inv_freq`` product), on any backend,
eager or traced, in three layouts:

* ``"half"``: full width ``cat(f, f)``, what transformers' rotary modules return
  (``LlamaRotaryEmbedding``; rotate-half pairing);
* ``"interleaved"``: each frequency twice in a row, ``[f0, f0, f1, f1, ...]`` (GPT-J,
  Cohere: pairs ``(2j, 2j + 1)``);
* ``"half_width"``: one column per frequency, what flash-attn's ``apply_rotary_emb``,
  vLLM's cos/sin cache and diffusers' ``get_1d_rotary_pos_embed`` (``use_real=False``
  halves) take.

The tables come from the engines :func:`~pe_core.apply_rope` builds its own factors
with (:mod:`pe_core._rope_tables`): the same numbers, laid out.

>>> import numpy as np
>>> from pe_core import rope_cos_sin
>>> cos, sin = rope_cos_sin(np.arange(4), 8)
>>> cos.shape, cos.dtype
((4, 8), dtype('float32'))
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from pe_core._kernel.inputs import check_request_size, choose_backend
from pe_core._rope_tables import TableRope, cos_sin_tables
from pe_core.rope_scaling import config_mapping, rope_summary, scaling_rope_type
from pe_core.rope_spec import RopeSpec, freeze
from pe_core.typing import BackendArrayT, BackendLike, DTypeLike, HostData, RopeConfig
from pe_core.validation import choice, even_int, flag, is_integer, known_size

__all__ = ["ROPE_TABLE_LAYOUTS", "RopeTableLayout", "rope_cos_sin"]

#: The layouts of :func:`rope_cos_sin`'s tables.
ROPE_TABLE_LAYOUTS: tuple[str, ...] = ("half", "interleaved", "half_width")

#: One of :data:`ROPE_TABLE_LAYOUTS`.
RopeTableLayout: TypeAlias = Literal["half", "interleaved", "half_width"]


def rope_cos_sin(
    positions: BackendArrayT | HostData,
    head_dim_or_config: int | RopeConfig,
    *,
    spec: RopeSpec | None = None,
    layout: RopeTableLayout | None = None,
    dtype: DTypeLike = None,
    backend: BackendLike | None = None,
    layer_type: str | None = None,
    check_values: bool = False,
) -> tuple[BackendArrayT, BackendArrayT]:
    """The exact RoPE tables ``(cos, sin)`` of ``positions``.

    Parameters
    ----------
    positions : int, sequence, range or array
        Positions of any shape, e.g. ``(seq,)`` or ``(batch, seq)`` (transformers'
        ``position_ids``); integer or floating. Arrays from NumPy, JAX, PyTorch or
        TensorFlow, eager or traced (``jax.jit``, ``torch.compile``, ``tf.function``).
    head_dim_or_config : int or Mapping or config object
        The head size ``head_dim`` (even): the rope is then ``spec``'s (``RopeSpec()``,
        base 10000, by default). Or a model config (a parsed ``config.json``, a
        transformers ``PretrainedConfig``): its rope (``rope_theta``, ``rope_scaling``
        / ``rope_parameters``, ``partial_rotary_factor``, ``head_dim`` or
        ``hidden_size // num_attention_heads``), read by
        :func:`~pe_core.rope_scaling.rope_frequencies`; ``spec`` must then be None.
    spec : RopeSpec, optional
        With an integer ``head_dim``: the rope (``base``, ``rotary_dim``, ``scaling``,
        ``layer_type``, ``layout``).
    layout : {"half", "interleaved", "half_width"}, optional
        ``"half"``: width ``r`` (the rotary dimension), ``cat(f, f)``; ``"interleaved"``:
        width ``r``, ``[f0, f0, f1, f1, ...]``; ``"half_width"``: width ``r / 2``, one
        column per frequency. By default the pairing of ``spec`` (``"half"`` or
        ``"interleaved"``), ``"half"`` without one. A ``"half"`` table for a spec that
        pairs ``"interleaved"`` (or the reverse) is refused: a rotation with it would
        be wrong. (A model config says nothing of the pairing: its model's code does.)
    dtype : str or dtype, optional
        float32 by default; float64, float16, bfloat16 where the backend has them. Host
        positions give float64 values rounded once to a float64/float16/bfloat16 result;
        device and traced positions are computed in float32 (float64 for float64) and
        rounded.
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; ``None`` follows ``positions`` (a torch tensor gives torch
        tensors on its device; Python values give NumPy).
    layer_type : str, optional
        With a model config that has rope parameters per layer type (Gemma 3:
        ``"full_attention"``, ``"sliding_attention"``): the layer type whose rope to
        build (a spec holds its own ``layer_type``).
    check_values : bool
        Positions on an accelerator are never read back by default (invalid ones give
        NaN rows, and ``dynamic``/``longrope``, which need ``max(positions)``, are
        refused); ``True`` reads them (synchronises), as in :func:`~pe_core.apply_rope`.

    Returns
    -------
    (array, array)
        ``cos`` and ``sin`` of shape ``positions.shape + (width,)``, times the rope's
        attention factor (yarn, longrope), as transformers' modules return them.
        ``dynamic`` and ``longrope`` choose their frequencies from ``seq_len =
        max(positions) + 1`` (transformers' rule, per call, without state).

    Raises
    ------
    ValueError
        An odd or too small ``head_dim``; an unknown ``layout``; a ``"half"`` /
        ``"interleaved"`` table against the spec's pairing; a config with ``spec``;
        NaN or infinite host positions; anything :class:`~pe_core.RopeSpec` or
        :func:`~pe_core.rope_scaling.rope_frequencies` rejects.
    TypeError
        ``head_dim_or_config`` neither an integer nor a config; ``spec`` not a
        RopeSpec; non-numeric positions.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import RopeSpec, rope_cos_sin
    >>> cos, sin = rope_cos_sin(np.arange(3), 4)  # frequencies 1 and 0.01
    >>> [round(float(v), 3) for v in cos[1]]  # cat(f, f)
    [0.54, 1.0, 0.54, 1.0]
    >>> cos, sin = rope_cos_sin(np.arange(3), 4, layout="interleaved")
    >>> [round(float(v), 3) for v in sin[1]]  # each frequency twice
    [0.841, 0.841, 0.01, 0.01]
    >>> rope_cos_sin([[0, 1], [7, 8]], 4, layout="half_width")[0].shape  # (batch, seq)
    (2, 2, 2)

    Exact at any position (float32 ``p * w`` is off by milliradians at ``1e5``):

    >>> cos, sin = rope_cos_sin(10**5, 128, dtype="float64", layout="half_width")
    >>> bool(abs(sin[0] - np.sin(1e5)) < 1e-12)
    True

    A model config (partial rotary, yarn's attention factor folded in):

    >>> config = {"hidden_size": 64, "num_attention_heads": 4, "partial_rotary_factor": 0.5,
    ...           "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
    ...                               "original_max_position_embeddings": 2048}}
    >>> cos, sin = rope_cos_sin(np.arange(5), config)
    >>> cos.shape, round(float(cos[0, 0]), 4)  # rotary_dim 8; 0.1 ln(4) + 1
    ((5, 8), 1.1386)
    >>> spec = RopeSpec(base=5e5, scaling={"rope_type": "linear", "factor": 2.0})
    >>> rope_cos_sin(range(6), 16, spec=spec)[0].shape
    (6, 16)
    """
    xp, source = choose_backend(positions, backend, what="positions")
    # plain Python on the host: compilers embed the result (no tracing of the checks)
    rope = xp.host_constant(_rope_of, head_dim_or_config, spec, layer_type, layout)
    check_values = flag(check_values, "check_values")
    # refuse, from the positions' shape alone (before they are read), cos and sin tables
    # that cannot fit in memory (float64 for a requested dtype: an upper bound)
    on_device = source is not None and (xp.is_traced(positions) or xp.on_accelerator(positions))
    n = (known_size(positions) or 1) * 2 * rope.head_dim  # cos and sin
    name = "float32" if dtype is None else "float64"
    extra = 0 if on_device else 8 * n  # the float64 host tables
    check_request_size(n, name, what="rope_cos_sin", extra_bytes=extra, host_output=not on_device)
    tables: tuple[Any, Any] = cos_sin_tables(xp, source, positions, rope, dtype, check_values)
    return tables


def _rope_of(
    head_dim_or_config: object, spec: object, layer_type: object, layout: object
) -> TableRope:
    """The call's rope arguments, validated (:class:`~pe_core._rope_tables.TableRope`)."""
    given = spec
    head_dim, spec = _head_dim_and_spec(head_dim_or_config, spec, layer_type)
    # (for a rope that needs the sequence length: what can be checked without it)
    constants: tuple[tuple[float, ...], float] | None = spec.constants(head_dim)
    seq_len_type: str | None = None
    if spec.needs_seq_len:
        seq_len_type, constants = scaling_rope_type(spec.resolved_scaling), None
    layout = spec.layout if layout is None else choice(layout, "layout", ROPE_TABLE_LAYOUTS)
    if given is not None and layout not in ("half_width", spec.layout):
        raise ValueError(
            f"layout={layout!r} lays the table out for {layout!r} pairs, but the rope "
            f"pairs features {spec.layout!r} (spec.layout): pass layout="
            f"{spec.layout!r} or 'half_width', or a spec with layout={layout!r}."
        )
    return TableRope(head_dim, spec, str(layout), seq_len_type, constants)


def _head_dim_and_spec(
    head_dim_or_config: object, spec: object, layer_type: object
) -> tuple[int, RopeSpec]:
    if spec is not None and not isinstance(spec, RopeSpec):
        raise TypeError(f"spec must be a RopeSpec or None. Received: {spec!r}")
    if is_integer(head_dim_or_config):
        head_dim = even_int(head_dim_or_config, "head_dim", minimum=2)
        if layer_type is None:
            return head_dim, RopeSpec() if spec is None else spec
        if spec is None:
            raise ValueError(
                f"layer_type={layer_type!r} selects a layer's rope from a model config, but "
                "head_dim_or_config is a head size: pass the model config instead."
            )
        raise ValueError(
            "Pass layer_type either in spec (RopeSpec(layer_type=...)) or as "
            f"layer_type=, not both. Received: layer_type={layer_type!r}"
        )
    if isinstance(head_dim_or_config, RopeSpec):
        raise TypeError(
            "head_dim_or_config is a RopeSpec: pass the head size and the spec as "
            "rope_cos_sin(positions, head_dim, spec=spec)."
        )
    if not isinstance(head_dim_or_config, Mapping) and not callable(
        getattr(head_dim_or_config, "to_dict", None)
    ):
        raise TypeError(
            "head_dim_or_config must be the head size (an even integer) or a model config "
            "(a mapping or an object with to_dict()). Received: "
            f"{type(head_dim_or_config).__name__}"
        )
    if spec is not None:
        raise ValueError(
            "Pass the rope either as a model config (head_dim_or_config) or as spec= with "
            "the head size, not both."
        )
    config = config_mapping(head_dim_or_config, "head_dim_or_config")
    return _config_rope(freeze(config), layer_type)


@functools.lru_cache(maxsize=64)
def _config_rope(config: Any, layer_type: Any) -> tuple[int, RopeSpec]:
    spec = RopeSpec(scaling=config, layer_type=layer_type)
    return int(rope_summary(config, layer_type=layer_type)["head_dim"]), spec
