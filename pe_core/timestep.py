"""Diffusion timestep embeddings: diffusers' ``get_timestep_embedding``, exactly.

A diffusion model embeds its noise level (the timestep ``t``, an integer step or a
float) as ``sin`` and ``cos`` of ``scale * t * w_i``, with ``half = embedding_dim // 2``
frequencies

    ``w_i = exp(-ln(max_period) * i / (half - downscale_freq_shift))``,  ``i = 0 .. half - 1``,

laid out ``[sin | cos]`` (``[cos | sin]`` with ``flip_sin_to_cos=True``) and, for an
odd ``embedding_dim``, a zero column appended. :func:`timestep_embedding` gives these
numbers with the arguments of ``diffusers.models.embeddings.get_timestep_embedding``
(guided-diffusion's and DiT's ``timestep_embedding(t, dim, max_period)`` is
``flip_sin_to_cos=True, downscale_freq_shift=0``), on every backend, eager or traced.

**Exact** means: within 1e-6 (float32 output; about 1e-15 for float64) of
``sin(scale * t * w_i)`` and ``cos(scale * t * w_i)`` evaluated in real arithmetic,
with ``t`` the exact value of the given timestep (the float32 or float64 number it
is, any int64/uint64) and ``w_i`` the real number of the formula, ``scale`` applied
exactly. The usual implementation forms ``scale * (float32(t) * float32(w_i))`` in
float32: at ``scale=1000`` (QwenImage, AuraFlow) and timesteps up to 1000 its angles
are off by up to about 0.08.
"""

from __future__ import annotations

from typing import Any, overload

from pe_core import _timestep
from pe_core.typing import (
    Array,
    BackendLike,
    DTypeLike,
    HostArrayLike,
    JaxArray,
    JaxBackend,
    NDArray,
    NumpyBackend,
    TensorFlowBackend,
    TFTensor,
    TorchBackend,
    TorchTensor,
)

__all__ = ["timestep_embedding"]


@overload
def timestep_embedding(
    timesteps: HostArrayLike,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: NumpyBackend | None = None,
    dtype: DTypeLike = None,
) -> NDArray: ...


@overload
def timestep_embedding(
    timesteps: TorchTensor,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: None = None,
    dtype: DTypeLike = None,
) -> TorchTensor: ...


@overload
def timestep_embedding(
    timesteps: JaxArray,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: None = None,
    dtype: DTypeLike = None,
) -> JaxArray: ...


@overload
def timestep_embedding(
    timesteps: Any,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: TorchBackend,
    dtype: DTypeLike = None,
) -> TorchTensor: ...


@overload
def timestep_embedding(
    timesteps: Any,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: JaxBackend,
    dtype: DTypeLike = None,
) -> JaxArray: ...


@overload
def timestep_embedding(
    timesteps: Any,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: TensorFlowBackend,
    dtype: DTypeLike = None,
) -> TFTensor: ...


@overload
def timestep_embedding(
    timesteps: TFTensor,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: None = None,
    dtype: DTypeLike = None,
) -> TFTensor: ...


@overload
def timestep_embedding(
    timesteps: Any,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
) -> Array: ...


def timestep_embedding(
    timesteps: Any,
    embedding_dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
    backend: BackendLike | None = None,
    dtype: DTypeLike = None,
) -> Array:
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
        NaN or infinite one, or a float beyond ``2**63 / 2**K`` (``K`` as in the
        module's notes, 0 at ``scale=1``, 9 at ``scale=1000``), gives a NaN row.

    Examples
    --------
    >>> import numpy as np
    >>> e = timestep_embedding(np.array([0, 500, 999]), 320, flip_sin_to_cos=True,
    ...                        downscale_freq_shift=0)
    >>> e.shape, e.dtype, e[0, :2].tolist(), e[0, -2:].tolist()
    ((3, 320), dtype('float32'), [1.0, 1.0], [0.0, 0.0])
    >>> timestep_embedding(0.5, 5).shape  # odd: a zero column at the end
    (5,)
    >>> timestep_embedding([1], 4, downscale_freq_shift=2)
    Traceback (most recent call last):
    ...
    ValueError: embedding_dim // 2 must differ from downscale_freq_shift: the frequency exponents divide by their difference (diffusers gives NaN). Received: embedding_dim=4 (// 2 = 2), downscale_freq_shift=2
    """
    if backend is None and dtype is None:
        plan = _timestep.cached_plan(
            embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period
        )
        if plan is not None:
            out = _timestep.few_timesteps(timesteps, plan)
            if out is not None:
                return out
    plan = _timestep.make_plan(
        embedding_dim,
        flip_sin_to_cos,
        downscale_freq_shift,
        scale,
        max_period,
        _timestep.namespace_for(timesteps, backend),
    )
    return _timestep.embed(timesteps, plan, backend, dtype)
