"""diffusers' positional helpers with pe_core's numbers, and the exact forward of
``GaussianFourierProjection``: what :mod:`pe_core.integrations.diffusers` runs a patched
module with.

``exact_get_timestep_embedding`` and ``exact_get_1d_rotary_pos_embed`` take diffusers'
signatures (the public names are :mod:`pe_core.integrations.diffusers`'s);
:func:`exact_globals` says which of them replace the names a diffusers function calls,
:func:`rebind` runs the function's own code with them.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import torch
from diffusers.models import embeddings as _embeddings

from pe_core._kernel.angles import exact_cos_sin, word64_constants
from pe_core._kernel.routes import FEW_POSITIONS
from pe_core.fourier import fourier_features
from pe_core.timestep import timestep_embedding, timestep_spec
from pe_core_backends import get_namespace

__all__ = [
    "NO_FLOAT64",
    "exact_cos_sin_table",
    "exact_get_1d_rotary_pos_embed",
    "exact_get_1d_sincos_pos_embed_from_grid",
    "exact_get_timestep_embedding",
    "exact_globals",
    "gaussian_fourier_forward",
    "inverse_frequencies",
    "rebind",
    "word_cos_sin",
]

_TORCH = get_namespace("torch")

#: Devices where diffusers itself never computes in float64.
NO_FLOAT64 = ("mps", "npu")


# -- exact helpers: diffusers' signatures, pe_core's numbers ---------------------------


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"{name} must be a real number (a Python or NumPy number, not a tensor) for "
            f"pe_core's exact rotary embedding. Received: {type(value).__name__}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite. Received: {value!r}")
    return value


def _rotary_frequencies(dim: int, theta: float, linear_factor: float) -> tuple[float, ...]:
    """diffusers' ``1 / theta ** (arange(0, dim, 2) / dim) / linear_factor`` in float64."""
    return tuple(1.0 / theta ** (i / dim) / linear_factor for i in range(0, dim, 2))


def inverse_frequencies(dim: int, theta: float, count: int | None = None) -> tuple[float, ...]:
    """``1 / theta ** (arange(0, dim, 2) / dim)`` in float64, its first ``count``."""
    return _rotary_frequencies(int(dim), _real("theta", theta), 1.0)[:count]


# -- the one-word reduction ----------------------------------------------------------
#
# Integer positions at any frequency; float ones at frequencies of at most half a turn
# per position (every rotary one): a position x is n + r with n = round(x) (an int64)
# and |r| <= 1/2: the angle is
# wrap(n F) 2pi / 2**64 + x 2pi g + r w, with F and g of
# :func:`~pe_core._kernel.angles.word64_constants` (the int64 product wraps modulo
# 2**64: the fractional turn of n f, exactly). Integer positions have no r. Within a
# turn either way: about 3e-7 rad in float32 (1e-15 in float64) for every position
# below 2**63; NaN for NaN, infinite or larger ones.

#: Radians per unit of the wrapped int64 word (``2pi / 2**64``, exact scaling).
_RADIANS_PER_WORD = 2.0 * math.pi / 2.0**64

#: The constants of the one-word reduction as tensors, per frequencies, device and
#: dtype: built on a module's first call, kept for the next (eager calls only).
_WORD_TABLES: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

_WORD_TABLES_MAX = 512

#: Integer dtypes whose values an int64 does not hold.
_WRAPPING = tuple(getattr(torch, name) for name in ("uint64",) if hasattr(torch, name))


def _word_tables(
    omegas: tuple[float, ...], device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``F`` (int64), ``2pi g`` and ``w`` (``dtype``) on ``device``."""
    key = (omegas, device, dtype)
    found = _WORD_TABLES.get(key)
    if found is not None:
        return found
    words, rests = word64_constants(omegas)
    tables = (
        torch.tensor(words, dtype=torch.int64, device=device),
        torch.tensor([2.0 * math.pi * g for g in rests], dtype=dtype, device=device),
        torch.tensor(omegas, dtype=dtype, device=device),
    )
    if not torch.compiler.is_compiling() and len(_WORD_TABLES) < _WORD_TABLES_MAX:
        _WORD_TABLES[key] = tables
    return tables


def word_cos_sin(
    pos: torch.Tensor, omegas: tuple[float, ...], dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` (``dtype``) of ``pos[..., None] * omegas`` by the one-word
    reduction: integer positions at any frequency, float positions at frequencies of at
    most ``pi`` rad per position (checked by the caller; NaN rows for NaN, infinite or
    float positions beyond ``2**63``).

    >>> c, s = word_cos_sin(torch.tensor([1e4, 2.5]), (1.0, 0.5))
    >>> bool(abs(float(s[0, 0]) - math.sin(1e4)) < 1e-6), c.dtype
    (True, torch.float32)
    """
    if pos.dtype in _WRAPPING:  # beyond int64: the general kernel
        cos, sin = exact_cos_sin(
            _TORCH, pos, omegas, working="float64" if dtype == torch.float64 else "float32"
        )
        return cos.to(dtype), sin.to(dtype)
    words, radians, rates = _word_tables(omegas, pos.device, dtype)
    if not pos.is_floating_point():
        p = pos.unsqueeze(-1)
        if p.dtype != torch.int64:
            p = p.to(torch.int64)
        angles = (p * words).to(dtype).mul_(_RADIANS_PER_WORD)
        angles = angles.addcmul_(p.to(dtype), radians)
    else:
        whole = torch.round(pos)
        rest = torch.where(pos.abs() < 2.0**63, pos - whole, float("nan"))  # exact
        n = whole.to(torch.int64).unsqueeze(-1)
        angles = (n * words).to(dtype).mul_(_RADIANS_PER_WORD)
        angles = angles.addcmul_(pos.unsqueeze(-1).to(dtype), radians)
        angles = angles.addcmul_(rest.unsqueeze(-1).to(dtype), rates)
    return angles.cos(), angles.sin()


def exact_cos_sin_table(
    pos: torch.Tensor, omegas: tuple[float, ...], wide: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``cos`` and ``sin`` of ``pos[..., None] * omegas``, the angles reduced
    exactly (float64 arithmetic where ``wide`` and the device has it, else float32:
    within 1e-6 of float64 either way), fractional positions at any frequency."""
    if wide is None:
        wide = pos.device.type not in NO_FLOAT64
    working = "float64" if wide and pos.device.type not in NO_FLOAT64 else "float32"
    omegas = tuple(omegas)
    fastest = max([0.0] + [abs(w) for w in omegas])
    if fastest <= math.pi or not pos.is_floating_point():
        cos, sin = word_cos_sin(
            pos, omegas, torch.float64 if working == "float64" else torch.float32
        )
        return cos.float(), sin.float()
    if not pos.is_floating_point():
        cos, sin = exact_cos_sin(_TORCH, pos, omegas, working=working)
        return cos.float(), sin.float()
    # A fraction of a position meets a frequency above half a turn: x = (n + r) / S with
    # n = round(x S) and r in [-1/2, 1/2] (exact: S is a power of two), each times
    # omega / S <= pi reduced exactly, and the two angles added.
    scale = 2.0 ** math.ceil(math.log2(fastest / math.pi))
    scaled = pos * scale
    whole = torch.round(scaled)
    slow = tuple(w / scale for w in omegas)
    cw, sw = exact_cos_sin(_TORCH, whole, slow, working=working)
    cr, sr = exact_cos_sin(_TORCH, scaled - whole, slow, working=working)
    return (cw * cr - sw * sr).float(), (sw * cr + cw * sr).float()


def exact_get_1d_sincos_pos_embed_from_grid(
    embed_dim: int,
    pos: torch.Tensor,
    output_type: str = "pt",
    flip_sin_to_cos: bool = False,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """diffusers' ``get_1d_sincos_pos_embed_from_grid`` (``[sin, cos]`` of
    ``pos * 10000 ** (-i / (D/2))``, its result dtype), the angles reduced exactly."""
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    if dtype is None:
        dtype = torch.float32 if pos.device.type in NO_FLOAT64 else torch.float64
    half = embed_dim // 2
    omegas = _TORCH.host_constant(_sincos_frequencies, half)
    cos, sin = exact_cos_sin_table(pos.reshape(-1), omegas, dtype == torch.float64)
    parts = (cos, sin) if flip_sin_to_cos else (sin, cos)
    return torch.cat(parts, dim=1).to(torch.promote_types(pos.dtype, dtype))


def _sincos_frequencies(half: int) -> tuple[float, ...]:
    return tuple(1.0 / 10000.0 ** (i / half) for i in range(half))


def exact_get_timestep_embedding(
    timesteps: torch.Tensor,
    embedding_dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1,
    scale: float = 1,
    max_period: int = 10000,
) -> torch.Tensor:
    """diffusers' ``get_timestep_embedding`` (same arguments, same defaults, float32
    result on the timesteps' device), computed by :func:`pe_core.timestep_embedding`.

    >>> import torch
    >>> exact_get_timestep_embedding(torch.tensor([0.5, 999.0]), 8, scale=1000).shape
    torch.Size([2, 8])
    """
    if getattr(timesteps, "ndim", None) != 1:
        raise ValueError(
            "timesteps must be a 1-D tensor (as diffusers' get_timestep_embedding "
            f"requires). Received shape: {tuple(getattr(timesteps, 'shape', ()))}"
        )
    # a few timesteps already on the host: pe_core's host lane (quicker there); the
    # others (on a device, or many) the one-word reduction
    if (
        isinstance(timesteps, torch.Tensor)
        and timesteps.dtype in _TIMESTEP_DTYPES
        and not (timesteps.device.type == "cpu" and timesteps.numel() <= FEW_POSITIONS)
    ):
        try:
            key = (embedding_dim, bool(flip_sin_to_cos), downscale_freq_shift, scale, max_period)
            omegas, slowed, step = _timestep_omegas(*key)
        except TypeError:  # unhashable arguments: validated (and refused) below
            pass
        else:
            if timesteps.is_floating_point():  # x step exact: a power of two
                timesteps, omegas = timesteps.float() * step, slowed
            cos, sin = word_cos_sin(timesteps, omegas)
            out = torch.cat((cos, sin) if flip_sin_to_cos else (sin, cos), dim=-1)
            if embedding_dim % 2:
                out = torch.nn.functional.pad(out, (0, 1))
            return out
    return timestep_embedding(
        timesteps,
        embedding_dim,
        flip_sin_to_cos=bool(flip_sin_to_cos),
        downscale_freq_shift=downscale_freq_shift,
        scale=scale,
        max_period=max_period,
    )


#: Timestep dtypes of the one-word route (the others go through
#: :func:`pe_core.timestep_embedding`, which refuses what it cannot take).
_TIMESTEP_DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
)


@functools.lru_cache(maxsize=256)
def _timestep_omegas(
    dim: int, flip: bool, shift: float, scale: float, max_period: float
) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """The signed frequencies of :func:`pe_core.timestep_spec` (validated there, for
    integer timesteps), the same over ``step`` and ``step``: the power of two that
    brings the fastest to at most ``pi`` rad per unit (float timesteps are multiplied
    by it, exactly, so that ``x step = n + r`` with ``|r| <= 1/2``)."""
    spec = timestep_spec(dim, flip, shift, scale, max_period)
    sign = -1.0 if scale < 0 else 1.0  # a negative scale negates the sines
    omegas = tuple(sign * w for w in spec.frequencies or ())  # always set here
    fastest = max(abs(w) for w in omegas)
    step = 2.0 ** max(0, math.ceil(math.log2(fastest / math.pi))) if fastest else 1.0
    return omegas, tuple(w / step for w in omegas), step


def exact_get_1d_rotary_pos_embed(
    dim: int,
    pos: Any,
    theta: float = 10000.0,
    use_real: bool = False,
    linear_factor: float = 1.0,
    ntk_factor: float = 1.0,
    repeat_interleave_real: bool = True,
    freqs_dtype: torch.dtype = torch.float32,
) -> Any:
    """diffusers' ``get_1d_rotary_pos_embed`` (same arguments and outputs), with the
    angles ``pos * w`` reduced exactly by pe_core's kernel.

    The frequencies are diffusers' formula in float64; the positions are taken as given
    (the float32 values diffusers' modules pass are exact). With ``freqs_dtype=float64``
    (what diffusers asks for on CPU and CUDA) the angles are formed in float64, else in
    float32 (MPS, NPU, and the modules that ask for float32): within 1e-6 of float64 either
    way. Real outputs are float32; complex ones complex128 for float64, else complex64,
    as diffusers returns.

    >>> import torch
    >>> cos, sin = exact_get_1d_rotary_pos_embed(8, torch.tensor([0.0, 1e4]), use_real=True)
    >>> cos.shape, cos.dtype
    (torch.Size([2, 8]), torch.float32)
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2 or dim % 2:
        raise ValueError(f"dim must be an even integer >= 2. Received: {dim!r}")
    if isinstance(pos, (int, np.integer)) and not isinstance(pos, bool):
        pos = torch.arange(int(pos))
    if isinstance(pos, np.ndarray):
        pos = torch.from_numpy(pos)
    if not isinstance(pos, torch.Tensor) or pos.ndim != 1:
        raise ValueError(
            "pos must be an int, a 1-D NumPy array or a 1-D tensor (as diffusers' "
            f"get_1d_rotary_pos_embed requires). Received: {type(pos).__name__} of shape "
            f"{tuple(getattr(pos, 'shape', ()))}"
        )
    base = _real("theta", theta) * _real("ntk_factor", ntk_factor)
    omegas = _TORCH.host_constant(
        _rotary_frequencies, int(dim), base, _real("linear_factor", linear_factor)
    )
    # float64 only for complex128 results: real ones are float32 within 1e-6 either way
    wide = freqs_dtype == torch.float64 and pos.device.type not in NO_FLOAT64 and not use_real
    if not pos.is_floating_point() or max(abs(w) for w in omegas) <= math.pi:
        cos, sin = word_cos_sin(pos, omegas, torch.float64 if wide else torch.float32)
    elif wide:
        cos, sin = exact_cos_sin(_TORCH, pos, omegas, working="float64")
    else:  # fractions of a position at frequencies above half a turn, in float32
        cos, sin = exact_cos_sin_table(pos, omegas, wide=False)
    if not use_real:
        return torch.complex(cos, sin)
    cos, sin = cos.float(), sin.float()
    if repeat_interleave_real:
        return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def rebind(function: Callable[..., Any], replacements: dict[str, Any]) -> Any:
    """``function`` with the names of ``replacements`` in its globals swapped: the same
    code, defaults and closure, run with the exact helpers."""
    namespace = dict(function.__globals__)
    namespace.update(replacements)
    rebound = types.FunctionType(
        function.__code__,
        namespace,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    rebound.__kwdefaults__ = function.__kwdefaults__
    rebound.__qualname__ = function.__qualname__
    rebound.__doc__ = function.__doc__
    return rebound


#: diffusers' helpers and pe_core's exact ones: a name is replaced in a function's
#: globals only where it is diffusers' own object.
_EXACT: dict[str, tuple[Any, Any]] = {
    "get_timestep_embedding": (
        _embeddings.get_timestep_embedding,
        exact_get_timestep_embedding,
    ),
    "get_1d_rotary_pos_embed": (
        _embeddings.get_1d_rotary_pos_embed,
        exact_get_1d_rotary_pos_embed,
    ),
}
_EXACT["get_1d_sincos_pos_embed_from_grid"] = (
    _embeddings.get_1d_sincos_pos_embed_from_grid,
    exact_get_1d_sincos_pos_embed_from_grid,
)
# diffusers' own 3-D helper, calling the exact 1-D one (its grids are its own)
_EXACT["get_3d_rotary_pos_embed"] = (
    _embeddings.get_3d_rotary_pos_embed,
    rebind(
        _embeddings.get_3d_rotary_pos_embed,
        {"get_1d_rotary_pos_embed": exact_get_1d_rotary_pos_embed},
    ),
)


def exact_globals(function: Callable[..., Any]) -> dict[str, Any]:
    found = function.__globals__
    return {name: exact for name, (theirs, exact) in _EXACT.items() if found.get(name) is theirs}


# -- GaussianFourierProjection ---------------------------------------------------------
#
# With ``log=True`` its angle is ``2pi w log(x)``: in turns ``w log(x)``. log(x) is
# formed as a 64-bit fixed-point number ``L = log(x) 2**56`` (int64): ``x = m 2^e`` with
# ``m`` in [1/2, 1) (frexp), ``log m = log c + log(1 + v)`` with ``c`` the centre of
# ``m``'s 1/4096-wide cell (a table, ``log c`` worked out once) and ``v = (m - c) / c``
# (``|v| < 2**-12``: three terms of the series, float32, within 1e-15 of it). Each
# float32 weight is ``M 2^k`` (``M`` a 24-bit integer): ``w L`` in int64 arithmetic,
# after shifting ``L`` right by ``16 - k`` bits, wraps modulo ``2**64`` to the
# fractional turn of ``w log(x)``, within ``2**-40`` turns. float32 only, and about
# twenty elementwise operations per call.

_LOG_CELLS = 4096
_LN2_FIXED = round(math.log(2.0) * 2.0**56)
_RADIANS_PER_WORD_F = 2.0 * math.pi / 2.0**64

#: The cells' centres, their reciprocals (float32) and ``round(log(c) 2**56)`` (int64),
#: per device: built on the first call there.
_LOG_TABLES: dict[Any, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _log_tables(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    found = _LOG_TABLES.get(device)
    if found is not None:
        return found
    half = _LOG_CELLS // 2
    # cells below half are never read by positive finite inputs (NaN rows there)
    centres = [(max(i, half) + 0.5) / _LOG_CELLS for i in range(_LOG_CELLS)]
    tables = (
        torch.tensor(centres, dtype=torch.float32, device=device),
        torch.tensor([1.0 / c for c in centres], dtype=torch.float32, device=device),
        torch.tensor([round(math.log(c) * 2.0**56) for c in centres], device=device),
    )
    if not torch.compiler.is_compiling():
        _LOG_TABLES[device] = tables
    return tables


def _log_fixed(x: torch.Tensor) -> torch.Tensor:
    """``round(log(x) 2**56)`` (int64, within a few units) of float32 ``x``; rows of
    ``x`` that are not positive and finite give numbers the caller turns into NaN."""
    centres, inverses, logs = _log_tables(x.device)
    m, e = torch.frexp(x)
    cell = (m * _LOG_CELLS).long().clamp_(0, _LOG_CELLS - 1)
    # m - c exact; v = (m - c) / c within 2**-35, |v| < 2**-12
    v = (m - centres.index_select(0, cell)).mul_(inverses.index_select(0, cell))
    series = v.addcmul(v * v, v.mul(1.0 / 3.0).sub_(0.5))  # v - v^2/2 + v^3/3
    fixed = series.mul_(2.0**56).long().add_(logs.index_select(0, cell))
    return fixed.add_(e.long() * _LN2_FIXED)


def _gaussian_log_angles(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """float32 angles ``2pi w log(x)`` of float32 weights, reduced to within a turn
    and a quarter: NaN rows where ``x`` is not positive and finite (diffusers' features
    are NaN there too), NaN columns for weights of ``2**22`` or more (or NaN).

    ``L = Lh 2**32 + Ll`` (``Ll`` the low 32 bits) and ``W = round(w 2**40)`` (int64):
    ``w L / 2**56 = wrap(W Lh) / 2**64 + w Ll / 2**56`` within ``2**-34`` turns, the
    first term exact in int64 arithmetic, the second below a quarter turn.
    """
    fixed = _log_fixed(x.float())
    high = (fixed >> 32).unsqueeze(-1)
    low = (fixed & 0xFFFFFFFF).float().unsqueeze(-1)
    words = (weight * 2.0**40).long()
    unit = torch.where(weight.abs() < 2.0**22, _RADIANS_PER_WORD_F, float("nan"))
    angles = (high * words).float().mul_(unit)
    angles = angles.addcmul_(low, weight * (2.0 * math.pi * 2.0**-56))
    rows = torch.log(x).mul_(0.0).add_(1.0)  # NaN where x <= 0, NaN or infinite
    return angles.mul_(rows.unsqueeze(-1))


def gaussian_fourier_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """``GaussianFourierProjection.forward`` with exactly reduced angles."""
    weight = self.weight
    dtype = torch.promote_types(x.dtype, weight.dtype)
    order: Literal["sin_cos", "cos_sin"] = "cos_sin" if self.flip_sin_to_cos else "sin_cos"
    if self.log and x.dtype == torch.float64:
        coords, freqs = torch.log(x), weight.double()
    elif self.log and weight.dtype != torch.float64:
        angles = _gaussian_log_angles(
            x, weight if weight.dtype == torch.float32 else weight.float()
        )
        sin, cos = angles.sin(), angles.cos()
        return torch.cat((cos, sin) if self.flip_sin_to_cos else (sin, cos), dim=-1).to(dtype)
    elif self.log:  # float64 weights (the module's device has float64)
        coords, freqs = torch.log(x.double()), weight
    else:
        coords, freqs = x, weight
        if coords.dtype in (torch.float16, torch.bfloat16):
            coords = coords.float()
        if freqs.dtype in (torch.float16, torch.bfloat16):
            freqs = freqs.float()
    return fourier_features(coords, freqs, order=order, dtype=dtype)
