"""The engine of Fourier features: ``2pi * coords @ frequencies`` reduced in turns.

The angle ``2pi * sum_j x_j f_j`` is worked out in *turns* (``sum_j x_j f_j``), where only
the fractional part matters, and each product is split so that its large part is exact:

1. ``x_j = xh + xl`` and ``f_j = fh + fl`` with ``xh`` and ``fh`` of at most half the
   working precision's bits (12 of float32's 24, 26 of float64's 53): Veltkamp's split
   on the device for arrays, rounding of the float64 value on the host for host
   frequencies. ``xh * fh`` is then an exact float, and so is its distance to the
   nearest integer, ``xh * fh - round(xh * fh)``.
2. The rest ``xh * fl + xl * f`` is at most about ``2**-11 |x f|`` (float32), so its
   rounding error is ``2**-11`` times that of the plain product.
3. The pieces are summed over ``j``, reduced to ``[-1/2, 1/2]`` once more and multiplied
   by ``2pi``; sin and cos are the backend's own.

With unit roundoff ``u`` of the working dtype (``2**-24`` float32, ``2**-53`` float64) and
``S = sum_j |x_j f_j|`` the features are within ``u * (8 (k**2 + 2) + 2**-8 (k + 5) S)`` of
the exact ones, before the final rounding to the output dtype (see
:func:`error_bound`); the plain float32 formula's error grows as ``2pi (k + 1) u S``.

The bound needs IEEE arithmetic without contraction of a multiply and an add into one
rounding (FMA). NumPy, eager PyTorch, JAX and TensorFlow on CPU, ``jax.jit`` and
``tf.function`` on CPU and ``torch.compile`` on CPU (Inductor keeps ``-ffp-contract=off``)
have it. A compiler that contracts (GPU code generators may) keeps the split exact in
sum but not its products: the error is then about the plain formula's.

Everything here is differentiable: the split passes gradients through unchanged
(``d xh/dx = 1``, ``d xl/dx = 0``), ``round`` has gradient 0, so the gradients are
those of the plain formula.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pe_core._kernel.inputs import check_finite, working_dtype
from pe_core_backends import HOST, Namespace, backend_of

__all__ = ["error_bound", "host_constants", "host_split", "reduced_turns", "sin_cos"]

#: Largest host frequency magnitude (float32's range, with room for the split).
_MAX_FREQUENCY = 1e34

#: Bits kept in the high part of a split, per working dtype.
_HIGH_BITS = {"float32": 12, "float64": 26}

#: Veltkamp's constant ``2**s + 1`` per working dtype (``s = p - high bits``).
_VELTKAMP = {"float32": float(2**12 + 1), "float64": float(2**27 + 1)}

#: Unit roundoff per working dtype.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float64": 2.0**-53}


def error_bound(k: int, s: Any, working: str) -> Any:
    """The bound on ``|features - exact|`` before rounding to the output dtype.

    ``k`` coordinates per point, ``s = sum_j |x_j f_j|`` (per feature; scalar or array).

    >>> float(error_bound(2, 10.0, "float32")) < 1e-5
    True
    """
    return UNIT_ROUNDOFF[working] * (8.0 * (k * k + 2) + 2.0**-8 * (k + 5) * s)


def host_split(frequencies: np.ndarray, working: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fh, fl, f)`` in ``working`` dtype for float64 host ``frequencies``.

    ``fh`` is ``f`` rounded to :data:`_HIGH_BITS` significant bits (exact in float32),
    ``fl = f - fh`` (exact in float64, then rounded to ``working``).

    >>> fh, fl, f = host_split(np.array([0.1]), "float32")
    >>> bool(abs(float(fh[0]) + float(fl[0]) - 0.1) < 1e-9)
    True
    """
    bits = _HIGH_BITS[working]
    mantissa, exponent = np.frexp(frequencies)
    high = np.ldexp(np.round(mantissa * 2.0**bits), exponent - bits)
    low = frequencies - high
    return high.astype(working), low.astype(working), frequencies.astype(working)


def _split(xp: Namespace, a: Any, working: str) -> tuple[Any, Any]:
    """Veltkamp's split ``a = hi + lo``, ``hi`` of at most half of the bits."""
    t = a * _VELTKAMP[working]
    hi = t - (t - a)
    return hi, a - hi


def host_constants(frequencies: np.ndarray, working: str) -> tuple:
    """:func:`host_split` of float64 ``(k, m)`` frequencies as plain nested tuples (so
    that tracing compilers embed them as constants)."""
    return _as_tuples(host_split(frequencies, working))


def reduced_turns(
    xp: Namespace, coords: Any, frequencies: Any, working: str, *, host: bool, contract: bool = True
) -> Any:
    """Turns ``coords @ frequencies`` reduced to ``[-1/2, 1/2]``, in ``working`` dtype.

    ``coords`` is a ``working`` array ``(..., k)``; ``frequencies`` ``(k, m)``: the
    :func:`host_constants` (or :func:`host_split` arrays) of host frequencies
    (``host=True``: placed like ``coords``; a single row broadcasts against every
    coordinate) or an array of ``xp`` in ``working`` dtype (split where it lives).
    ``contract=False`` skips the sum over ``k``: the result is ``(..., k, m)``, one row
    per coordinate.
    """
    if host:
        wdtype = xp.dtype(working)
        fh, fl, f = (xp.asarray(part, dtype=wdtype, like=coords) for part in frequencies)
    else:
        f = frequencies
        fh, fl = _split(xp, f, working)
    x = xp.expand_dims(coords, -1)  # (..., k, 1) against (k, m)
    xh, xl = _split(xp, x, working)
    p = xh * fh  # exact
    frac = p - xp.round(p)  # exact, in [-1/2, 1/2]
    rest = xh * fl + xl * f
    if contract:
        k = xp.shape(fh)[0]
        frac_sum, rest_sum = frac[..., 0, :], rest[..., 0, :]
        for j in range(1, k):
            frac_sum = frac_sum + frac[..., j, :]
            rest_sum = rest_sum + rest[..., j, :]
        frac, rest = frac_sum, rest_sum
    turns = frac + rest
    return turns - xp.round(turns)


def sin_cos(xp: Namespace, turns: Any) -> tuple[Any, Any]:
    """``sin`` and ``cos`` of ``2pi * turns`` (turns already reduced)."""
    angle = turns * (2.0 * math.pi)
    return xp.sin(angle), xp.cos(angle)


# -- the calls of pe_core.fourier: one validated call, its constants and its result ------


@dataclass
class Call:
    """One validated call: where it computes, on what, and what it returns."""

    xp: Namespace  # the namespace the features are computed in
    target: Namespace | None  # host computations: the backend the result goes to
    x: Any  # the coordinates, working dtype, (..., k) or (...)
    freqs: Any  # (k, m): host constants (host_freqs) or an array of xp in working dtype
    host_freqs: bool
    working: str
    out_name: str
    out_dtype: Any
    vector: bool  # 1-D frequencies: one number per point


def features(call: Call, order: str) -> Any:
    """:func:`pe_core.fourier.fourier_features` of a validated call."""
    xp, x = call.xp, call.x
    if call.vector:
        x = xp.expand_dims(x, -1)
    if call.target is not None:  # on the host: in blocks, straight into the output
        parts = tuple(np.asarray(part, dtype=np.float64) for part in call.freqs)
        m = parts[0].shape[1]
        out, rows = _host_output(call, x, 2 * m)
        first = 0 if order == "sin_cos" else m
        for r, j, sines, cosines in _host_blocks(rows, parts, m, contract=True):
            out[r, first + j.start : first + j.stop] = sines
            out[r, m - first + j.start : m - first + j.stop] = cosines
        return finish(call, out.reshape((*x.shape[:-1], 2 * m)))
    s, c = sin_cos(xp, reduced_turns(xp, x, call.freqs, call.working, host=call.host_freqs))
    return finish(call, xp.concat([s, c] if order == "sin_cos" else [c, s], axis=-1))


def perceiver(
    call: Call, bands: int, resolution: tuple[int, ...], concat_pos: bool, sine_only: bool
) -> Any:
    """Perceiver's bands of a validated call (frequencies ``linspace(1, r / 2) / 2``)."""
    xp, x = call.xp, call.x
    parts = _constants(xp, perceiver_constants, _perceiver_arrays, bands, resolution, call.working)
    if call.target is not None:  # on the host: in blocks, straight into the output
        d = len(resolution)
        pos = d if concat_pos else 0  # the raw positions first
        width = pos + d * bands * (1 if sine_only else 2)
        out, rows = _host_output(call, x, width)
        if concat_pos:
            out[:, :d] = rows
        for r, j, *halves in _host_blocks(rows, parts, bands):  # each (rows, d, block)
            for h, half in enumerate(halves[:1] if sine_only else halves):
                for a in range(d):
                    at = pos + (h * d + a) * bands
                    out[r, at + j.start : at + j.stop] = half[:, a]
        return finish(call, out.reshape((*x.shape[:-1], width)))
    turns = reduced_turns(xp, x, parts, call.working, host=True, contract=False)  # (..., d, K)
    s, c = sin_cos(xp, xp.merge_last_two(turns))
    pieces = [s] if sine_only else [s, c]
    return finish(call, xp.concat([x, *pieces] if concat_pos else pieces, axis=-1))


def box(call: Call, n: int, c: int) -> Any:
    """GLIGEN's box features of a validated call, frequency by frequency."""
    xp = call.xp
    parts = _constants(xp, box_constants, _box_arrays, n, call.working)
    if call.target is not None:  # on the host: in blocks, straight into the output
        out, rows = _host_output(call, call.x, 2 * c * n)
        grouped = out.reshape(rows.shape[0], n, 2, c)  # a view: [e][sin, cos][coordinate]
        for r, j, sines, cosines in _host_blocks(rows, parts, n):  # (rows, c, block)
            grouped[r, j, 0] = sines.transpose(0, 2, 1)
            grouped[r, j, 1] = cosines.transpose(0, 2, 1)
        return finish(call, out.reshape((*call.x.shape[:-1], 2 * c * n)))
    # (..., c, 1) against the (1, n) frequencies: every coordinate at every frequency
    turns = reduced_turns(xp, call.x, parts, call.working, host=True, contract=False)
    s, co = sin_cos(xp, xp.matrix_transpose(turns))  # (..., E, c)
    return finish(call, xp.merge_last_two(xp.merge_last_two(xp.stack([s, co], axis=-2))))


#: Host computations work on blocks of about this many products (float64 temporaries of
#: a few MiB), so their memory is the output's and a bounded working set.
_BLOCK_PRODUCTS = 2**17

#: Bytes of the float64 temporaries of one block (about ten arrays of its products).
BLOCK = 10 * 8 * _BLOCK_PRODUCTS


def _blocks(n_rows: int, k: int, m: int) -> Any:
    """``(rows, columns)`` slices covering ``n_rows x m``, about :data:`_BLOCK_PRODUCTS`
    products ``row x coordinate x column`` each."""
    cols = max(1, min(m, _BLOCK_PRODUCTS // max(k, 1)))
    step = max(1, _BLOCK_PRODUCTS // (max(k, 1) * cols))
    for r0 in range(0, n_rows, step):
        for j0 in range(0, m, cols):
            yield slice(r0, min(n_rows, r0 + step)), slice(j0, min(m, j0 + cols))


def _host_blocks(rows: np.ndarray, parts: tuple, m: int, contract: bool = False) -> Any:
    """``(rows, columns, sines, cosines)`` of the host computation, block by block
    (:func:`_blocks` of ``rows`` ``(points, k)`` against ``m`` frequency columns)."""
    for r, j in _blocks(rows.shape[0], rows.shape[1], m):
        cols = tuple(part[:, j] for part in parts)
        turns = reduced_turns(HOST, rows[r], cols, "float64", host=True, contract=contract)
        yield (r, j, *sin_cos(HOST, turns))


def _constants(xp: Namespace, tuples: Any, arrays: Any, *args: Any) -> Any:
    """The split frequencies: plain tuples while tracing (compilers embed them as
    constants), else NumPy arrays (a few bytes per frequency, not a Python float each)."""
    return xp.host_constant(tuples, *args) if xp.is_tracing() else arrays(*args)


def _host_output(call: Call, x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The host output ``(points, width)`` in the dtype :func:`finish` expects (each
    value rounded once when written), and the coordinates as ``(points, k)``."""
    target = call.target
    if target is not None and (target.numpy_arrays or call.out_name != "bfloat16"):
        dtype: Any = call.out_dtype if target.numpy_arrays else np.dtype(call.out_name)
    else:  # bfloat16 for a framework: rounded there, from float64 (see finish)
        dtype = np.float64
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    return np.empty((rows.shape[0], width), dtype=dtype), rows


def finish(call: Call, out: Any) -> Any:
    """Round once to the output dtype, on the backend asked for."""
    target = call.target
    if target is None:
        return out if call.out_name == call.working else call.xp.astype(out, call.out_dtype)
    if target.numpy_arrays:
        return out.astype(call.out_dtype, copy=False)
    if call.out_name != "bfloat16":  # float64, float32, float16: NumPy rounds, once
        return target.from_host(out.astype(call.out_name, copy=False))
    if target.supports("float64"):  # the backend rounds float64 to bfloat16, once
        return target.astype(target.from_host(out), call.out_dtype)
    # no float64 (JAX without x64): round on the host, then move the exact bfloat16 values
    rounded = out.astype(HOST.dtype("bfloat16")).astype(np.float32)
    return target.astype(target.from_host(rounded), call.out_dtype)


def feature_bound(coords: Any, frequencies: Any, name: str) -> np.ndarray:
    """:func:`pe_core.fourier.feature_error_bound` for an output dtype named ``name``."""
    x = np.asarray(coords, dtype=np.float64)
    f = np.asarray(frequencies, dtype=np.float64)
    if f.ndim == 1:
        x, f = x[..., None], f[None, :]
    s = (np.abs(x)[..., :, None] * np.abs(f)).sum(axis=-2)
    half_ulp = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11}.get(name, 2.0**-8)
    bound = error_bound(f.shape[0], s, working_dtype(name)) + half_ulp
    return np.concatenate([bound, bound], axis=-1)


def positions(
    xp: Namespace, dims: tuple[int, ...], low: float, high: float, out: tuple[str, Any], like: Any
) -> Any:
    """Perceiver's grid ``(*dims, len(dims))`` in float64 on the host, rounded once."""
    axes = [np.linspace(low, high, n) for n in dims]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    if xp.numpy_arrays:
        return grid.astype(out[1])
    staged = "float64" if xp.supports("float64") else "float32"
    placed = xp.from_host(grid.astype(staged), like=like if backend_of(like) == xp.name else None)
    return placed if out[0] == staged else xp.astype(placed, out[1])


# Plain functions (not the cache wrappers) so torch.compile can embed their results.
def frequency_constants(key: tuple, working: str) -> tuple:
    """``(shape, host_constants)`` of host frequencies given as a nested tuple ``key``."""
    return _frequency_constants(key, working)


def perceiver_constants(bands: int, resolution: tuple[int, ...], working: str) -> tuple:
    """:func:`host_constants` of Perceiver's frequencies, ``(d, bands)``."""
    return _as_tuples(_perceiver_arrays(bands, resolution, working))


def box_constants(n: int, working: str) -> tuple:
    """:func:`host_constants` of GLIGEN's frequencies, ``(1, n)`` (the same for every
    coordinate of a box)."""
    return _as_tuples(_box_arrays(n, working))


#: Constants of at most this many frequencies are cached (larger ones are built per call,
#: so a huge request holds no memory after it returns).
_CACHED_FREQUENCIES = 2**16


def _as_tuples(parts: tuple[np.ndarray, ...]) -> tuple:
    return tuple(tuple(map(tuple, part.tolist())) for part in parts)


@functools.lru_cache(maxsize=64)
def _frequency_constants(key: Any, working: str) -> tuple:
    try:
        f = np.asarray(key, dtype=np.float64)
    except (ValueError, OverflowError) as exc:
        raise TypeError(
            f"frequencies must be real numbers of one shape. Received: {key!r}"
        ) from exc
    if f.ndim not in (1, 2) or f.size == 0:
        raise ValueError(
            f"frequencies must have shape (m,) or (k, m) with k, m >= 1. Received: shape {f.shape}"
        )
    check_finite(HOST, f, what="frequencies", values=f)
    if np.abs(f).max() > _MAX_FREQUENCY:
        raise ValueError(
            "frequencies must be at most 1e34 in magnitude (the float32 working range). "
            f"Received a frequency of magnitude {float(np.abs(f).max())!r}"
        )
    return f.shape, host_constants(f[None, :] if f.ndim == 1 else f, working)


def _perceiver_arrays(
    bands: int, resolution: tuple[int, ...], working: str
) -> tuple[np.ndarray, ...]:
    """:func:`host_split` of Perceiver's frequencies, ``(d, bands)`` NumPy arrays."""
    if bands * len(resolution) <= _CACHED_FREQUENCIES:
        return _perceiver_cached(bands, resolution, working)
    return _perceiver_split(bands, resolution, working)


def _perceiver_split(bands: int, resolution: tuple[int, ...], working: str) -> tuple:
    # pi * f * pos = 2pi * (f / 2) * pos, f = linspace(1, r / 2, bands) per axis
    freqs = np.stack([np.linspace(1.0, r / 2.0, bands) for r in resolution]) / 2.0
    return _read_only(host_split(freqs, working))


_perceiver_cached = functools.lru_cache(maxsize=32)(_perceiver_split)


def _box_arrays(n: int, working: str) -> tuple[np.ndarray, ...]:
    """:func:`host_split` of GLIGEN's frequencies, ``(1, n)`` NumPy arrays."""
    return _box_cached(n, working) if n <= _CACHED_FREQUENCIES else _box_split(n, working)


def _box_split(n: int, working: str) -> tuple[np.ndarray, ...]:
    # w_e = 100 ** (e / n) radians per unit: w_e / 2pi turns
    turns = 100.0 ** (np.arange(n, dtype=np.float64) / n) / (2.0 * np.pi)
    return _read_only(host_split(turns[None, :], working))


_box_cached = functools.lru_cache(maxsize=32)(_box_split)


def _read_only(parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    for part in parts:
        part.flags.writeable = False
    return parts
