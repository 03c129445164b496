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

import math
from typing import Any

import numpy as np

from pe_core_backends import Namespace

__all__ = ["error_bound", "host_constants", "host_split", "reduced_turns", "sin_cos"]

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
    return tuple(tuple(map(tuple, part.tolist())) for part in host_split(frequencies, working))


def reduced_turns(
    xp: Namespace,
    coords: Any,
    frequencies: Any,
    working: str,
    *,
    host: bool,
    contract: bool = True,
) -> Any:
    """Turns ``coords @ frequencies`` reduced to ``[-1/2, 1/2]``, in ``working`` dtype.

    ``coords`` is a ``working`` array ``(..., k)``; ``frequencies`` ``(k, m)``: the
    :func:`host_constants` of host frequencies (``host=True``: placed like ``coords``)
    or an array of ``xp`` in ``working`` dtype (split where it lives).
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
