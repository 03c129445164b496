"""Diffusion timestep embeddings: diffusers' ``get_timestep_embedding``, exactly.

A diffusion model embeds its noise level (the timestep ``t``, an integer step or a
float) as ``sin`` and ``cos`` of ``t * W_i``, with ``half = embedding_dim // 2``
frequencies ``W_i = scale * w_i``,

    ``w_i = exp(-ln(max_period) * i / (half - downscale_freq_shift))``,  ``i = 0 .. half - 1``,

laid out ``[sin | cos]`` (``[cos | sin]`` with ``flip_sin_to_cos=True``) and, for an
odd ``embedding_dim``, a zero column appended. :func:`timestep_embedding` gives these
numbers with the arguments of ``diffusers.models.embeddings.get_timestep_embedding``
(guided-diffusion's and DiT's ``timestep_embedding(t, dim, max_period)`` is
``flip_sin_to_cos=True, downscale_freq_shift=0``), on every backend, eager or traced.

It is :func:`pe_core.encode` with the matching spec (:func:`timestep_spec`: the
frequencies ``W_i`` rounded once to float64, ``layout="split"``, ``odd_d="zero_pad"``,
``order="cos_sin"`` for ``flip_sin_to_cos``), bit for bit: ``flip_sin_to_cos=True,
downscale_freq_shift=0`` is the ``diffusers_flip_sin_to_cos`` preset, ``True, 1`` the
``musicgen`` preset (``max_period`` their ``base``). A negative ``scale`` negates the
sines of ``-scale``'s embedding.

**Exact** means, as for :func:`~pe_core.encode`: within 1e-6 (float32 output;
1e-12 for float64) of ``sin(t * W_i)`` and ``cos(t * W_i)`` evaluated in real
arithmetic, with ``t`` the exact value of the given timestep (the float32 or float64
number it is, any int64/uint64) and ``W_i`` the float64 frequency. The usual
implementation forms ``scale * (float32(t) * float32(w_i))`` in float32: at
``scale=1000`` (QwenImage, AuraFlow) and timesteps up to 1000 its angles are off by up
to about 0.08.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core._kernel.inputs import check_request_size
from pe_core._sinusoidal import encode_1d
from pe_core.spec import Spec
from pe_core.typing import BackendArrayT, BackendLike, DTypeLike, HostData, SinCosOrder
from pe_core.validation import finite_real, positive_int
from pe_core_backends import backend_of, get_namespace

__all__ = ["timestep_embedding", "timestep_spec"]

#: Largest ``|scale| * w_i`` accepted, in radians per timestep unit: beyond it the
#: frequencies alias at every integer timestep and are a configuration error
#: (diffusers' float32 turns them into inf and NaN).
MAX_FREQUENCY = 2.0**40

#: Specs of plain arguments (``int``, ``bool``, ``float``) by their argument tuple: a
#: plain dict, so that a compiler tracing a call (torch.compile) reads it as a global.
_SPECS: dict[tuple[Any, ...], Spec] = {}


def timestep_embedding(
    timesteps: BackendArrayT | HostData,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
) -> BackendArrayT:
    """Sinusoidal timestep embeddings, diffusers' numbers computed exactly.

    Parameters
    ----------
    timesteps : array-like
        Integer or float timesteps of any shape ``S`` (a Python number, a sequence, or a
        NumPy, JAX, PyTorch or TensorFlow array; fractional values allowed).
    embedding_dim : int
        Features per timestep, ``>= 2``; an odd value gets a zero last column.
    flip_sin_to_cos : bool
        ``[cos | sin]`` instead of ``[sin | cos]``.
    downscale_freq_shift : float
        ``s`` of the exponent ``-ln(max_period) * i / (half - s)``: 1 (the diffusers
        default, DDPM) makes the slowest frequency ``1 / max_period``; 0 (SD, SDXL,
        SD3, Flux, DiT) stops one step short of it. ``half - s`` must not be 0.
    scale : float
        Multiplies every angle (1000 in QwenImage's and AuraFlow's time embedders, which take
        timesteps in ``[0, 1]``).
    max_period : float
        The ``10000`` of the schedule, ``> 0``.
    backend : str, optional
        Compute on this backend; by default the timesteps' own (NumPy for Python
        values).
    dtype : optional
        Output dtype, float32 by default (diffusers'); float64, float16 and bfloat16
        too (rounded once from float64 where the backend has it).

    Returns
    -------
    array
        Shape ``S + (embedding_dim,)``, on the timesteps' backend and device.

    Raises
    ------
    TypeError
        A non-integer ``embedding_dim``, a non-bool ``flip_sin_to_cos``, non-numeric
        arguments or timesteps (booleans, complex).
    ValueError
        ``embedding_dim < 2``; ``embedding_dim // 2 == downscale_freq_shift``;
        ``max_period <= 0``; non-finite ``downscale_freq_shift`` or ``scale``;
        frequencies beyond ``2**40`` rad per timestep; NaN or infinite timesteps
        known on the host. Timesteps on an accelerator or traced are never read: a
        NaN or infinite one, or a float beyond ``2**63``, gives a NaN row.

    Examples
    --------
    >>> import numpy as np
    >>> import pe_core
    >>> e = timestep_embedding(np.array([0, 500, 999]), 320, flip_sin_to_cos=True,
    ...                        downscale_freq_shift=0)
    >>> e.shape, e.dtype, e[0, :2].tolist(), e[0, -2:].tolist()
    ((3, 320), dtype('float32'), [1.0, 1.0], [0.0, 0.0])
    >>> timestep_embedding(0.5, 5).shape  # odd: a zero column at the end
    (5,)
    >>> t = np.arange(1000)
    >>> np.array_equal(timestep_embedding(t, 64, flip_sin_to_cos=True, downscale_freq_shift=0),
    ...                pe_core.encode(t, 64, spec="diffusers_flip_sin_to_cos"))
    True
    >>> timestep_embedding([1], 4, downscale_freq_shift=2)
    Traceback (most recent call last):
    ...
    ValueError: embedding_dim // 2 must differ from downscale_freq_shift: the frequency exponents divide by their difference (diffusers gives NaN). Received: embedding_dim=4 (// 2 = 2), downscale_freq_shift=2
    """
    spec = timestep_spec(embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period)
    table = encode_1d(timesteps, embedding_dim, spec, backend, dtype, what="timesteps")
    if scale >= 0:
        return table
    xp, half = get_namespace(backend_of(table) or "numpy"), embedding_dim // 2
    start = half if flip_sin_to_cos else 0  # the sines of -scale, negated
    end = start + half
    return xp.concat([table[..., :start], -table[..., start:end], table[..., end:]], -1)


def timestep_spec(
    embedding_dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
) -> Spec:
    """The :class:`~pe_core.Spec` :func:`timestep_embedding` encodes with (of
    ``|scale|``: a negative scale negates the sines), its arguments validated.

    >>> spec = timestep_spec(8, True, 0)
    >>> spec.layout, spec.order, spec.odd_d, spec.frequencies[:2]
    ('split', 'cos_sin', 'zero_pad', (1.0, 0.09999999999999998))
    """
    key = (embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period)
    plain = type(embedding_dim) is int and type(flip_sin_to_cos) is bool
    plain = plain and all(type(v) in (int, float) for v in key[2:])
    found = _SPECS.get(key) if plain else None
    if found is None:
        found = _new_spec(*key)
        if plain and len(_SPECS) < 256:
            _SPECS[key] = found
    return found


def _new_spec(dim: Any, flip: Any, shift: Any, scale: Any, max_period: Any) -> Spec:
    """Validate the configuration (every degenerate one refused by name); its spec."""
    d = positive_int(dim, "embedding_dim", minimum=2, what="at least one sin/cos pair")
    if not isinstance(flip, (bool, np.bool_)):
        raise TypeError(f"flip_sin_to_cos must be a bool. Received: {flip!r}")
    shift_f = finite_real(shift, "downscale_freq_shift")
    scale_f = abs(finite_real(scale, "scale"))
    period = finite_real(max_period, "max_period", greater_than=0)
    half = d // 2
    # the frequencies are built below, one Python float each: refuse what cannot fit first
    check_request_size(None, "float64", what="timestep_embedding", n_pairs=half)
    if half == shift_f:
        raise ValueError(
            f"embedding_dim // 2 must differ from downscale_freq_shift: the frequency "
            f"exponents divide by their difference (diffusers gives NaN). Received: "
            f"embedding_dim={d} (// 2 = {half}), downscale_freq_shift={shift!r}"
        )
    log_period = math.log(period)
    rate = -log_period / (half - shift_f)  # ln w_i = rate * i
    log_max = math.log(scale_f) + max(0.0, rate * (half - 1)) if scale_f else -math.inf
    if log_max > math.log(MAX_FREQUENCY):
        raise ValueError(
            "the fastest frequency |scale| * exp(-ln(max_period) * i / (embedding_dim // 2 "
            f"- downscale_freq_shift)) must be at most 2**40 rad per timestep; these "
            f"arguments give about exp({log_max:.4g}) (embedding_dim={d}, "
            f"downscale_freq_shift={shift!r}, scale={scale!r}, max_period={max_period!r})."
        )
    # the spec schedule's own arithmetic (pe_core._schedule): for a shift of 0 or 1 the
    # frequencies of the "d" and "half_minus_one" denominators, bit for bit
    freqs = tuple(scale_f * math.exp(-(i / (half - shift_f)) * log_period) for i in range(half))
    order: SinCosOrder = "cos_sin" if flip else "sin_cos"
    return Spec(frequencies=freqs, layout="split", order=order, odd_d="zero_pad")
