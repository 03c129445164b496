"""``apply_rope``: rotary position embedding (RoPE) of queries and keys, on any backend.

RoPE rotates every pair of features ``(a, b)`` of a query or key at position ``p`` by
the angle ``p * w_j`` of the pair's frequency:

    a' = a cos(p w_j) - b sin(p w_j)
    b' = b cos(p w_j) + a sin(p w_j)

so that ``<rope(q, m), rope(k, n)>`` depends on ``m - n`` only. Two layouts pair the
features differently: ``"half"`` pairs ``(j, j + r/2)`` (rotate-half: GPT-NeoX, Llama,
Hugging Face) and ``"interleaved"`` pairs ``(2j, 2j + 1)`` (GPT-J, RoFormer).
:func:`~pe_core.rope_layout.rope_permutation` converts weights between them.

The angles come from the exact kernel of :mod:`pe_core.angles` (on the host in float64
when the positions are known, on the device in float32 when they are traced), and the
rotation runs in float32 (float64 for float64 inputs) whatever the dtype of ``x``.

One generic kernel, :func:`_rotate`, written against the backend namespace, serves every
backend (under ``jax.jit`` for JAX, so that it is one fused pass). Eager PyTorch calls
without autograd take :func:`_torch_rotate` instead: a preallocated output, in-place
multiply-adds and, for float16/bfloat16, cache-sized float32 blocks.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from pe_core.angles import reduced_angles
from pe_core.positions import as_positions, check_finite, fits_backend
from pe_core.rope_scaling import rope_frequencies
from pe_core.tables import MIN_PAIRS, contiguous_start, table_sin_cos
from pe_core_backends import Namespace, backend_of, canonical_backend, get_namespace

__all__ = ["LAYOUTS", "apply_rope"]

#: The pair layouts :func:`apply_rope` knows.
LAYOUTS: tuple[str, ...] = ("half", "interleaved")

#: rope_types whose frequencies depend on the largest position (``seq_len``).
_SEQ_LEN_TYPES = ("dynamic", "longrope")

#: Elements per block of the blocked PyTorch CPU path for float16/bfloat16 inputs: each
#: block is widened into two float32 scratch buffers of 1 MiB that stay in cache.
_TORCH_BLOCK = 2**18
#: Most leading rows (heads) in one block: they share the block's cos/sin.
_BLOCK_GROUPS = 16


def apply_rope(
    x: Any,
    pos: Any,
    *,
    base: float = 10000.0,
    layout: str = "half",
    rotary_dim: int | None = None,
    scaling: Mapping[str, Any] | None = None,
    backend: str | None = None,
) -> Any:
    """Rotate queries or keys ``x`` by their positions ``pos`` (rotary embedding).

    Parameters
    ----------
    x : array
        Queries or keys of shape ``(..., seq, head_dim)`` (any number of leading
        axes, e.g. ``(batch, heads, seq, head_dim)``) from NumPy, JAX, PyTorch or
        TensorFlow, in float16, bfloat16, float32 or float64. ``head_dim`` must be even.
    pos : int, float, sequence, range or array
        Positions, broadcasting against ``x.shape[:-1]`` = ``(..., seq)``: ``(seq,)``
        for one sequence, ``(batch, 1, seq)`` for per-example positions (packed
        sequences, KV-cache decoding with per-example offsets), a scalar for one
        position everywhere. Integer or floating; negative and fractional positions
        are valid. Arrays from another framework are moved (when not traced).
    base : float
        ``rope_theta``: pair ``j`` turns ``base ** (-2j / rotary_dim)`` radians per
        position. Must be > 1. Used unless ``scaling`` sets ``rope_theta``.
    layout : {"half", "interleaved"}
        ``"half"`` rotates pairs ``(j, j + r/2)`` (GPT-NeoX, Llama, Hugging Face);
        ``"interleaved"`` rotates pairs ``(2j, 2j + 1)`` (GPT-J, RoFormer).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` features (partial rotary: GPT-NeoX,
        GPT-J, Phi); the others pass through unchanged. Even, at most ``head_dim``;
        ``head_dim`` by default. The frequencies use ``rotary_dim`` as their
        dimension, as transformers does.
    scaling : Mapping, optional
        Context-extension scaling, read by :func:`~pe_core.rope_scaling.rope_frequencies`.
        Either

        * a rope-parameters dict (it has a ``rope_type`` or ``type`` key), i.e. what a
          model's ``config.json`` holds under ``rope_parameters``/``rope_scaling``,
          e.g. ``{"rope_type": "yarn", "factor": 4.0,
          "original_max_position_embeddings": 4096}``. The rotary dimension is
          ``rotary_dim`` (or ``int(head_dim * partial_rotary_factor)`` if the dict has
          that key); ``rope_theta`` in the dict wins over ``base``. Types that need
          the context length (``dynamic``; ``yarn``/``longrope`` without ``factor``)
          read ``max_position_embeddings`` from the dict; or
        * a whole model config (no ``rope_type``/``type`` key at the top), e.g.
          ``json.load(open("config.json"))``: used as is, with ``head_dim`` filled in
          from ``x`` and ``rope_theta`` from ``base`` when the config lacks them. Its
          rotary dimension must agree with ``rotary_dim`` when both are given.

        cos and sin are multiplied by the type's ``attention_factor`` (yarn,
        longrope), as transformers does. ``dynamic`` and ``longrope`` choose their
        frequencies from ``seq_len = max(pos) + 1`` (transformers' rule, evaluated
        per call, without state), so they need positions whose values are known
        (not traced).
    backend : {"numpy", "jax", "torch", "tensorflow"}, optional
        Where to compute; ``None`` follows ``x`` (a torch tensor gives a torch tensor
        on the same device).

    Returns
    -------
    array
        Same shape, dtype, backend and device as ``x``. With ``theta = pos * w_j``
        and the pair ``(a, b)`` = features ``(j, j + r/2)`` (half) or ``(2j, 2j+1)``
        (interleaved): ``a' = a cos(theta) - b sin(theta)``,
        ``b' = b cos(theta) + a sin(theta)``, exactly Hugging Face's
        ``x * cos + rotate_half(x) * sin`` for the half layout.

        Relation to :func:`~pe_core.relative_matrix`: with
        ``spec = Spec(frequencies=w, layout="interleaved")`` and ``M_p =
        relative_matrix(p, r, spec)`` (which maps ``[sin, cos]`` pairs from position
        ``q`` to ``q + p``, a rotation by ``-p w``),
        ``apply_rope(x, p, layout="interleaved") == x @ M_p == M_(-p) @ x``:
        RoPE at position ``p`` is ``M_p`` transposed.

    Raises
    ------
    ValueError
        Odd ``head_dim``; ``rotary_dim`` odd, < 2 or > ``head_dim``; positions that do
        not broadcast against ``x.shape[:-1]``; an unknown ``layout``; non-finite
        positions; ``base`` <= 1; anything :func:`~pe_core.rope_scaling.rope_frequencies`
        rejects in ``scaling``.
    TypeError
        ``x`` not a floating array, ``scaling`` not a mapping, traced positions on
        another backend.

    Notes
    -----
    Precision: the angle ``pos * w_j`` is reduced exactly (no float32 ``pos * w``
    product, so large positions keep their accuracy); cos and sin are computed in
    float64 on the host when the positions are known, in float32 on the device when
    they are traced (float64 for float64 ``x``); the rotation runs in float32 (or
    float64) and is rounded once to ``x``'s dtype. A bfloat16 ``x`` is therefore
    within one bfloat16 rounding of the exact result.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core.rope import apply_rope
    >>> x = np.ones((3, 4), dtype=np.float32)  # (seq, head_dim)
    >>> y = apply_rope(x, np.arange(3))
    >>> y.shape, y.dtype
    ((3, 4), dtype('float32'))
    >>> y[0].tolist()  # position 0 is the identity
    [1.0, 1.0, 1.0, 1.0]
    >>> c, s = np.cos(1.0), np.sin(1.0)  # pair (0, 2) turns 1 radian per position
    >>> bool(np.allclose(y[1, [0, 2]], [c - s, c + s]))
    True
    >>> q, k = np.random.default_rng(0).standard_normal((2, 8))
    >>> a = apply_rope(q, 7) @ apply_rope(k, 3)  # scores depend on m - n only
    >>> bool(np.isclose(a, apply_rope(q, 1004) @ apply_rope(k, 1000)))
    True
    """
    layout = _check_layout(layout)
    xp, x = _as_input(x, backend)
    shape = xp.shape(x)
    x_dtype = xp.dtype_of(x)
    if not shape:
        raise ValueError("x must have at least one axis (head_dim); received a scalar.")
    head_dim = _check_head_dim(shape[-1])
    rotary_dim = _check_rotary_dim(rotary_dim, head_dim)
    working = "float64" if x_dtype == "float64" else "float32"
    base = _check_base(base)

    host, positions = _positions(pos, xp, x)
    pos_shape = tuple(host.shape) if host is not None else xp.shape(positions)
    _check_broadcast(pos_shape, shape)
    values = host if host is not None else xp.concrete(positions)
    if host is None:
        max_abs = check_finite(xp, positions, what="pos", values=values)
    else:
        max_abs = _host_finite(host)

    frozen = _freeze(scaling) if scaling is not None else None
    seq_len = None
    if frozen is not None and _rope_type(scaling) in _SEQ_LEN_TYPES:
        if values is None:
            raise ValueError(
                f"scaling with rope_type {_rope_type(scaling)!r} chooses its frequencies "
                "from seq_len = max(pos) + 1, which is unknown for traced positions. Pass "
                "positions whose values are known, or a rope_type that does not depend on "
                "the sequence length (e.g. 'linear', 'yarn', 'llama3')."
            )
        seq_len = max(1, math.floor(float(values.max())) + 1) if values.size else 1
    inv_freq, attention_factor = xp.host_constant(
        _rope_constants, frozen, base, head_dim, rotary_dim, seq_len
    )
    rotary_dim = 2 * len(inv_freq)

    if values is not None:
        cos, sin = _host_cos_sin(values, inv_freq, attention_factor, max_abs)
        if xp.name == "torch" and _torch_fast_ok(x):
            return _torch_rotate(x, cos, sin, pos_shape, layout, rotary_dim, working)
        wdtype = xp.dtype(working)
        cos = xp.asarray(cos.astype(working), dtype=wdtype, like=x)
        sin = xp.asarray(sin.astype(working), dtype=wdtype, like=x)
    else:
        angles = reduced_angles(xp, positions, inv_freq, working=working)
        cos, sin = xp.cos(angles), xp.sin(angles)
        if attention_factor != 1.0:
            cos, sin = cos * attention_factor, sin * attention_factor

    if xp.name == "jax":  # jitted: one fused pass (inlined under an outer jit)
        return _jax_rotator(layout, rotary_dim, working)(x, cos, sin)
    return _rotate(xp, x, cos, sin, layout, rotary_dim, working)


# --------------------------------------------------------------------------- validation


def _check_layout(layout: object) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"Unknown layout {layout!r}. Expected one of: {', '.join(LAYOUTS)}.")
    return str(layout)


def _as_input(x: Any, backend: str | None) -> tuple[Namespace, Any]:
    source = backend_of(x)
    if source is None:
        if isinstance(x, (bool, numbers.Number)):
            raise TypeError(
                f"x must be an array of shape (..., seq, head_dim). Received: {type(x).__name__}"
            )
        x = np.asarray(x)
        source = "numpy"
    name = canonical_backend(backend) if backend is not None else source
    xp = get_namespace(name)
    if name != source:
        values = get_namespace(source).concrete(x)
        if values is None:
            raise TypeError(
                f"x is a traced {source} value and cannot be moved to backend {name!r}; "
                "call with backend=None (or the same backend) inside compiled code."
            )
        x = xp.asarray(values)
    dtype_name = xp.dtype_of(x)
    if xp.kind(dtype_name) != "float":
        raise TypeError(
            "x must be a floating array (float16, bfloat16, float32 or float64). "
            f"Received dtype: {dtype_name}"
        )
    return xp, x


def _check_head_dim(head_dim: int) -> int:
    if head_dim < 2 or head_dim % 2:
        raise ValueError(
            "head_dim (the last axis of x) must be even and >= 2: RoPE rotates pairs of "
            f"features. Received: head_dim={head_dim}"
        )
    return head_dim


def _check_rotary_dim(rotary_dim: object, head_dim: int) -> int | None:
    if rotary_dim is None:
        return None
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, numbers.Integral):
        raise TypeError(f"rotary_dim must be an integer or None. Received: {rotary_dim!r}")
    value = int(rotary_dim)
    if value % 2 or not 2 <= value <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in [2, head_dim={head_dim}]. Received: {value}"
        )
    return value


def _check_base(base: object) -> float:
    if (
        isinstance(base, bool)
        or not isinstance(base, numbers.Real)
        or not (math.isfinite(base) and base > 1)
    ):
        raise ValueError(f"base (rope_theta) must be a finite number > 1. Received: {base!r}")
    return float(base)


def _check_broadcast(pos_shape: tuple[int, ...], x_shape: tuple[int, ...]) -> None:
    lead = tuple(x_shape[:-1])
    try:
        ok = np.broadcast_shapes(pos_shape, lead) == lead
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"pos of shape {pos_shape} does not broadcast against x.shape[:-1] = {lead} "
            f"(x has shape {tuple(x_shape)} = (..., seq, head_dim)). Give positions of "
            "shape (seq,), (batch, 1, seq) or any shape that broadcasts to x.shape[:-1] "
            "without adding axes."
        )


def _host_finite(values: np.ndarray) -> float:
    return check_finite(get_namespace("numpy"), values, what="pos", values=values)  # type: ignore[return-value]


# --------------------------------------------------------------------------- positions


def _positions(pos: Any, xp: Namespace, x: Any) -> tuple[np.ndarray | None, Any]:
    """``(host values, None)`` when the angles can be computed on the host now,
    else ``(None, positions on xp)`` for the traced path."""
    source = backend_of(pos)
    if source in (None, "numpy"):
        host = as_positions(pos, get_namespace("numpy"), source, what="pos")
        if xp.name == "numpy" or not fits_backend(host, xp) or not _tracing(xp, x):
            return host, None
        return None, as_positions(host, xp, "numpy", what="pos")
    return None, as_positions(pos, xp, source, what="pos")


def _tracing(xp: Namespace, x: Any) -> bool:
    """Whether ``xp`` is tracing now (jax.jit, tf.function, torch.compile): a new
    array's values are then unknown."""
    return xp.concrete(xp.zeros((), dtype=xp.dtype("float32"), like=x)) is None


def _host_cos_sin(
    values: np.ndarray, inv_freq: tuple[float, ...], attention_factor: float, max_abs: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``cos`` and ``sin`` of ``values * inv_freq``, exactly reduced."""
    numpy = get_namespace("numpy")
    n = len(inv_freq)
    start = None
    if values.size >= 64 and values.size * n >= MIN_PAIRS:
        start = contiguous_start(values)
    if start is not None:
        table = table_sin_cos(
            numpy,
            start,
            values.size,
            inv_freq,
            offset=0,
            layout="split",
            working="float64",
            like=values,
        )
        table = np.reshape(table, (*values.shape, 2 * n))
        sin, cos = table[..., :n], table[..., n:]
    else:
        angles = reduced_angles(
            numpy,
            values,
            inv_freq,
            working="float64",
            max_abs_position=None if max_abs is None else max_abs + 1.0,
        )
        cos, sin = np.cos(angles), np.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


# --------------------------------------------------------------------------- frequencies


def _freeze(obj: Any) -> Any:
    """A hashable copy of a config mapping (for caches and compiler constants)."""
    if isinstance(obj, Mapping):
        return ("__mapping__", tuple(sorted((str(k), _freeze(v)) for k, v in obj.items())))
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, (list, tuple)):
        return ("__sequence__", tuple(_freeze(v) for v in obj))
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _thaw(obj: Any) -> Any:
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__mapping__":
        return {k: _thaw(v) for k, v in obj[1]}
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__sequence__":
        return [_thaw(v) for v in obj[1]]
    return obj


def _rope_type(scaling: Mapping[str, Any]) -> str | None:
    if not isinstance(scaling, Mapping):
        return None
    if "rope_type" in scaling or "type" in scaling:
        return scaling.get("rope_type") or scaling.get("type")
    raw = scaling.get("rope_scaling") or scaling.get("rope_parameters") or {}
    if isinstance(raw, Mapping):
        return raw.get("rope_type") or raw.get("type")
    return None


def _rope_constants(
    frozen: Any, base: float, head_dim: int, rotary_dim: int | None, seq_len: int | None
) -> tuple[tuple[float, ...], float]:
    # A plain function (not the cache wrapper) so torch.compile can embed its result.
    return _cached_rope_constants(frozen, base, head_dim, rotary_dim, seq_len)


@functools.lru_cache(maxsize=256)
def _cached_rope_constants(
    frozen: Any, base: float, head_dim: int, rotary_dim: int | None, seq_len: int | None
) -> tuple[tuple[float, ...], float]:
    """``(inv_freq, attention_factor)`` as Python floats."""
    dim = head_dim if rotary_dim is None else rotary_dim
    if frozen is None:
        inv_freq, attention_factor = rope_frequencies({"head_dim": dim, "rope_theta": base})
        return tuple(float(v) for v in inv_freq), float(attention_factor)
    scaling = _thaw(frozen)
    if not isinstance(scaling, Mapping):
        raise TypeError(
            "scaling must be a mapping: a rope-parameters dict with 'rope_type', or a model "
            f"config. Received: {type(scaling).__name__}"
        )
    if "rope_type" in scaling or "type" in scaling:
        params = dict(scaling)
        config: dict[str, Any] = {"rope_theta": base, "rope_parameters": params}
        if "max_position_embeddings" in params:
            config["max_position_embeddings"] = params.pop("max_position_embeddings")
        has_partial = params.get("partial_rotary_factor") is not None
        config["head_dim"] = head_dim if has_partial else dim
    else:
        config = dict(scaling)
        if not any(
            config.get(key) is not None
            for key in ("head_dim", "qk_rope_head_dim", "hidden_size", "num_attention_heads")
        ):
            config["head_dim"] = head_dim
        if config.get("rope_theta") is None:
            config["rope_theta"] = base
    inv_freq, attention_factor = rope_frequencies(config, seq_len=seq_len)
    got = 2 * len(inv_freq)
    if rotary_dim is not None and got != rotary_dim:
        raise ValueError(
            f"scaling gives a rotary dimension of {got} (from its head_dim and "
            f"partial_rotary_factor) but rotary_dim={rotary_dim}. Drop one of them or make "
            "them agree."
        )
    if got > head_dim:
        raise ValueError(
            f"scaling gives a rotary dimension of {got}, larger than head_dim={head_dim} "
            "(the last axis of x)."
        )
    return tuple(float(v) for v in inv_freq), float(attention_factor)


# --------------------------------------------------------------------------- the generic kernel


def _rotate(
    xp: Namespace, x: Any, cos: Any, sin: Any, layout: str, rotary_dim: int, working: str
) -> Any:
    """The rotation on any backend: ``cos``/``sin`` of shape ``P + (r/2,)``, ``P``
    broadcasting against ``x.shape[:-1]``."""
    shape = xp.shape(x)
    head_dim, half = shape[-1], rotary_dim // 2
    part = x[..., :rotary_dim] if rotary_dim < head_dim else x
    cast = xp.dtype_of(x) != working
    if cast:
        part = xp.astype(part, xp.dtype(working))
    # Pairs as an axis of size 2 (before the frequencies for "half", after them for
    # "interleaved"); stacking the two results back along it compiles (XLA) to one pass,
    # where concatenating two halves costs an extra copy.
    axis = -2 if layout == "half" else -1
    split = (2, half) if layout == "half" else (half, 2)
    pairs = xp.reshape(part, (*shape[:-1], *split))
    a, b = (
        (pairs[..., 0, :], pairs[..., 1, :]) if layout == "half" else (pairs[..., 0], pairs[..., 1])
    )
    out = xp.stack([a * cos - b * sin, b * cos + a * sin], axis=axis)
    out = xp.reshape(out, (*shape[:-1], rotary_dim))
    if cast:
        out = xp.astype(out, x.dtype)
    if rotary_dim < head_dim:
        out = xp.concat([out, x[..., rotary_dim:]], axis=-1)
    return out


@functools.lru_cache(maxsize=64)
def _jax_rotator(layout: str, rotary_dim: int, working: str) -> Any:
    """:func:`_rotate` under ``jax.jit`` for one configuration.

    (TensorFlow is left eager: ``tf.function(jit_compile=True)`` would compile every
    new shape; PyTorch has :func:`_torch_rotate`.)
    """
    xp = get_namespace("jax")
    jnp = sys.modules["jax"].numpy

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        # XLA on CPU fuses cos/sin (and the angle kernel before them) into the loop over x
        # and evaluates them again for every head, which made the call 3-4x slower.
        # lax.optimization_barrier does not stop it there; writing the table with a
        # scatter (an exact copy) does, and costs least of the alternatives tried (a
        # reduction with zeros, a matmul by the identity).
        table = jnp.stack([cos, sin])
        table = jnp.zeros_like(table).at[jnp.arange(2)].set(table)
        cos, sin = table[0], table[1]
        return _rotate(xp, x, cos, sin, layout, rotary_dim, working)

    return xp.compile(rotate)


# --------------------------------------------------------------------------- PyTorch fast path


def _torch_fast_ok(x: Any) -> bool:
    """The in-place PyTorch path: eager, no autograd, a plain contiguous tensor."""
    torch = sys.modules["torch"]
    if torch.compiler.is_compiling() or type(x) is not torch.Tensor:
        return False
    if torch.is_grad_enabled() and x.requires_grad:
        return False
    return x.dim() >= 1 and x.is_contiguous() and x.device.type != "meta"


def _torch_rotate(
    x: Any,
    cos: np.ndarray,
    sin: np.ndarray,
    pos_shape: tuple[int, ...],
    layout: str,
    rotary_dim: int,
    working: str,
) -> Any:
    """:func:`_rotate` in PyTorch with a preallocated output and in-place multiply-adds.

    ``cos`` and ``sin`` (float64 NumPy, ``pos_shape + (r/2,)``) become the factors on
    the host. Half layout: ``out = x * [cos, cos]``, then ``out[:r/2] -= x[r/2:] * sin``
    and ``out[r/2:] += x[:r/2] * sin`` (``torch.addcmul``): three passes, no
    full-size temporaries. Interleaved layout: one complex multiply of ``x`` viewed as
    complex by ``cos + i sin``. float16/bfloat16 inputs are widened to float32 block by
    block into scratch buffers that stay in cache (mixed-dtype kernels are slow on
    CPU), so only the input and the output cross memory.
    """
    torch = sys.modules["torch"]
    shape = tuple(x.shape)
    half = rotary_dim // 2
    pshape = (1,) * (len(shape) - 1 - len(pos_shape)) + tuple(pos_shape)
    cos, sin = cos.reshape(*pshape, half), sin.reshape(*pshape, half)
    if layout == "half":
        factors = [np.concatenate([cos, cos], axis=-1).astype(working), sin.astype(working)]
    else:
        factors = [(cos + 1j * sin).astype("complex128" if working == "float64" else "complex64")]
    wdtype = getattr(torch, working)
    out = torch.empty_like(x)
    plan = _block_plan(x, pshape) if x.dtype != wdtype else None
    scratch: dict[str, Any] = {}
    if plan is None:  # whole tensors: a few passes, broadcasting the factors
        on_device = tuple(torch.as_tensor(f, device=x.device) for f in factors)
        _torch_rotate_block(x, out, on_device, layout, rotary_dim, wdtype, scratch)
        return out
    outer, shared, groups, group_step, seq_step = plan
    seq, dim = shape[-2], shape[-1]
    n_outer = math.prod(outer)
    per_outer = tuple(
        torch.as_tensor(
            np.require(
                np.broadcast_to(f, (*outer, *(1,) * shared, seq, f.shape[-1])).reshape(
                    n_outer, seq, f.shape[-1]
                ),
                requirements=("C", "W"),
            ),
            device=x.device,
        )
        for f in factors
    )
    xv = x.view(n_outer, groups, seq, dim)
    ov = out.view(n_outer, groups, seq, dim)
    for o in range(n_outer):
        for s in range(0, seq, seq_step):
            for g in range(0, groups, group_step):
                _torch_rotate_block(
                    xv[o, g : g + group_step, s : s + seq_step],
                    ov[o, g : g + group_step, s : s + seq_step],
                    tuple(f[o, s : s + seq_step] for f in per_outer),
                    layout,
                    rotary_dim,
                    wdtype,
                    scratch,
                )
    return out


def _block_plan(x: Any, pshape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """How to cut a large CPU tensor into blocks of about ``_TORCH_BLOCK`` elements.

    ``x`` is viewed as ``(O, G, S, D)``: ``G`` merges the trailing leading axes along
    which the positions are broadcast (its blocks share one ``(S, ...)`` slab of
    factors), ``O`` the leading axes before them. ``None``: one pass over the whole
    tensor (small tensors, GPUs, or many tiny blocks as in decoding).
    """
    shape = tuple(x.shape)
    numel = x.numel()
    if x.device.type != "cpu" or len(shape) < 2 or numel <= 2 * _TORCH_BLOCK:
        return None
    n_lead = len(shape) - 2
    seq, dim = shape[-2], shape[-1]
    shared = 0
    while shared < n_lead and pshape[n_lead - 1 - shared] == 1:
        shared += 1
    outer = shape[: n_lead - shared]
    groups = math.prod(shape[n_lead - shared : n_lead])
    # Blocks span up to _BLOCK_GROUPS heads (sharing their cos/sin rows) and as many
    # positions as fit; heads vary fastest, so each slab of cos/sin stays in cache.
    group_step = min(groups, _BLOCK_GROUPS)
    seq_step = min(seq, max(1, _TORCH_BLOCK // (group_step * dim)))
    if seq_step == seq:
        group_step = min(groups, max(1, _TORCH_BLOCK // (seq * dim)))
    n_blocks = math.prod(outer) * -(-groups // group_step) * -(-seq // seq_step)
    if n_blocks * _TORCH_BLOCK > 4 * numel:
        return None
    return outer, shared, groups, group_step, seq_step


def _scratch(scratch: dict[str, Any], key: str, like: Any, dtype: Any) -> Any:
    """A reusable contiguous buffer of ``like``'s shape (one allocation per call)."""
    torch = sys.modules["torch"]
    n = like.numel()
    buffer = scratch.get(key)
    if buffer is None or buffer.numel() < n:
        buffer = scratch[key] = torch.empty(n, dtype=dtype, device=like.device)
    return buffer[:n].view(like.shape)


def _torch_rotate_block(
    x: Any,
    out: Any,
    factors: tuple[Any, ...],
    layout: str,
    rotary_dim: int,
    working: Any,
    scratch: dict[str, Any],
) -> None:
    torch = sys.modules["torch"]
    head_dim, half = x.shape[-1], rotary_dim // 2
    if rotary_dim < head_dim:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
        x, out = x[..., :rotary_dim], out[..., :rotary_dim]
    widen = x.dtype != working
    if widen:
        x = _scratch(scratch, "x", x, working).copy_(x)
    if layout == "interleaved":
        (rotation,) = factors
        z = torch.view_as_complex(x.unflatten(-1, (half, 2)))
        if widen:
            z.mul_(rotation)
            out.copy_(x)
        else:
            torch.mul(z, rotation, out=torch.view_as_complex(out.unflatten(-1, (half, 2))))
        return
    cos2, sin = factors
    target = _scratch(scratch, "out", x, working) if widen else out
    torch.mul(x, cos2, out=target)
    target[..., :half].addcmul_(x[..., half:], sin, value=-1)
    target[..., half:].addcmul_(x[..., :half], sin)
    if widen:
        out.copy_(target)
