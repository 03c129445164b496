"""transformers' rotary modules that build one table per sequence length, made exact.

``forward(hidden_states)`` of these modules takes no position ids: it builds the table
of positions ``0 .. n - 1`` (``n = hidden_states.shape[1]``) from its float32
``inv_freq = 1 / base ** (2k / dim)`` and keeps the last one
(``cached_sequence_length``, ``cached_rotary_positional_embedding``). Two kinds:

* ``"stacked"``: Wav2Vec2-Conformer's, Wav2Vec2-BERT's and SeamlessM4T's
  ``*RotaryPositionalEmbedding`` return ``stack([cos, sin])`` of ``cat(f, f)``,
  ``f = positions * inv_freq``, of shape ``(2, n, 1, 1, dim)`` in the dtype (and on the
  device) of ``hidden_states``;
* ``"angles"``: CLVP's ``ClvpRotaryPositionalEmbedding`` returns the angles
  ``cat(f, f)[None]`` themselves, in the dtype of ``inv_freq``, on the device of
  ``hidden_states``: its attention takes their ``cos()`` and ``sin()``. A float32 angle
  near ``1e5`` radians is only known to ``4e-3`` radians, so the patched module returns
  each angle reduced exactly modulo ``2 pi`` (within ``1.5 pi`` of zero): the same cos
  and sin as the exact angle, to float32 rounding, but not the same numbers.

Patched, the forward computes the same table with exactly reduced angles (pe_core's
one-word int64 reduction, :func:`~pe_core._kernel.angles.word64_constants`, of the
float64 frequencies ``base ** (-2k / dim)``), in float32 (float64 when ``inv_freq`` is
float64), and caches it as the module does (in the module's own two attributes, which
the patch sets aside and unpatching gives back). A module is patched only if its
``inv_freq`` is, bit for bit, the class's float32 formula for an integer ``base`` and
its own forward gives one of the two kinds at 16 positions; else it is refused.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from pe_core.integrations._transformers_forward import _RADIANS_PER_WORD, _word_tables
from pe_core.integrations._transformers_probe import Rope
from pe_core.rope_scaling import rope_frequencies

__all__ = ["SequenceForward", "sequence_plan"]

#: The module attributes of the cache (set aside by the patch, given back by unpatching).
CACHE = ("cached_sequence_length", "cached_rotary_positional_embedding")

#: Positions of the check at patch time.
_PROBE_POSITIONS = 16


def _float32_inv_freq(base: int, dim: int) -> torch.Tensor:
    """The classes' own formula (float32, on the host)."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _base(inv_freq: torch.Tensor) -> tuple[int | None, str]:
    """The integer ``base`` whose float32 formula gives ``inv_freq`` bit for bit."""
    theirs = inv_freq.detach().cpu().float()
    dim = 2 * theirs.shape[0]
    if theirs.ndim != 1 or theirs.shape[0] < 2 or float(theirs[1]) <= 0.0:
        return None, f"its inv_freq of shape {tuple(inv_freq.shape)} is not 1 / base ** (2k / dim)"
    guess = round(float(theirs[1]) ** (-dim / 2.0))  # inv_freq[1] = base ** (-2 / dim)
    for base in (guess, guess - 1, guess + 1):
        if base > 1 and torch.equal(_float32_inv_freq(base, dim), theirs):
            return base, ""
    return None, (
        f"its inv_freq is not 1 / base ** (2k / {dim}) in float32 for an integer base "
        f"(nearest: {guess})"
    )


def _run_own(module: Any, hidden_states: torch.Tensor) -> Any:
    """The module's own forward, its cache left as it was."""
    kept = {name: vars(module).get(name) for name in CACHE}
    raw = getattr(type(module).forward, "__wrapped__", type(module).forward)
    try:
        with torch.no_grad():
            return raw(module, hidden_states)
    finally:
        for name, value in kept.items():
            object.__setattr__(module, name, value)


def _kind(module: Any, out: Any, inv_freq: torch.Tensor) -> str | None:
    """Which kind the module's output at the probe positions is (None: neither)."""
    if not isinstance(out, torch.Tensor):
        return None
    f = torch.arange(_PROBE_POSITIONS, dtype=torch.float64)[:, None] * inv_freq.double().cpu()
    angles = torch.cat((f, f), -1)
    got = out.detach().double().cpu()
    if got.shape == (2, _PROBE_POSITIONS, 1, 1, angles.shape[-1]):
        want = torch.stack((angles.cos(), angles.sin()))[:, :, None, None, :]
        return "stacked" if torch.allclose(got, want, rtol=0.0, atol=1e-6) else None
    if got.shape == (1, *angles.shape) and out.dtype == inv_freq.dtype:
        return "angles" if torch.allclose(got[0], angles, rtol=1e-6, atol=1e-6) else None
    return None


def sequence_plan(module: Any) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str]:
    """``((attributes, buffers), "")`` to patch ``module`` with, ``(None, why)`` if it is
    a sequence-table module that fails its check, ``(None, "")`` if it is not one."""
    try:
        params = list(inspect.signature(type(module).forward).parameters)[1:]
    except (TypeError, ValueError):
        return None, ""
    if params != ["hidden_states"] or not all(name in vars(module) for name in CACHE):
        return None, ""
    inv_freq = getattr(module, "inv_freq", None)
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.device.type == "meta":
        return None, "it has no inv_freq buffer with values"
    base, why = _base(inv_freq)
    if base is None:
        return None, why
    x = torch.zeros(1, _PROBE_POSITIONS, 1, dtype=torch.float64, device=inv_freq.device)
    try:
        out = _run_own(module, x)
    except Exception as error:
        return None, f"its forward fails on 16 positions: {type(error).__name__}: {error}"
    kind = _kind(module, out, inv_freq)
    if kind is None:
        return None, (
            "its forward gives neither stack([cos, sin]) of cat(f, f) of shape "
            "(2, n, 1, 1, dim) nor the angles cat(f, f)[None], f = positions * inv_freq"
        )
    omegas, _ = rope_frequencies({"rope_theta": float(base), "head_dim": 2 * inv_freq.shape[0]})
    forward = SequenceForward(module, tuple(float(w) for w in omegas), kind)
    return ({"forward": forward, **dict.fromkeys(CACHE)}, {}), ""


class SequenceForward:
    """The ``forward(hidden_states)`` of a patched sequence-table module: a plain object
    (copied and pickled with the module), which refers to the module for its cache and
    ``inv_freq``'s device and dtype."""

    def __init__(self, module: Any, omegas: tuple[float, ...], kind: str) -> None:
        self.module = module
        self.kind = kind
        self.rope = Rope(None, None, "default", omegas, 1.0)  # its int64 constants per device

    def angles(self, n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The ``(n, dim / 2)`` angles of positions ``0 .. n - 1``, reduced exactly."""
        words, radians = _word_tables(self.rope, 0, device, dtype, "pairs")
        p = torch.arange(n, device=device)[:, None]
        angles = (p * words).to(dtype).mul_(_RADIANS_PER_WORD)
        return angles.addcmul_(p.to(dtype), radians)

    def __call__(self, hidden_states: torch.Tensor) -> torch.Tensor:
        module = self.module
        n = hidden_states.shape[1]
        cached = module.cached_rotary_positional_embedding
        if n == module.cached_sequence_length and cached is not None:
            return cached
        inv_freq = module.inv_freq
        work = torch.float64 if inv_freq.dtype == torch.float64 else torch.float32
        if self.kind == "angles":
            a = self.angles(n, hidden_states.device, work)
            out = torch.cat((a, a), -1)[None].to(inv_freq.dtype)
        else:
            a = self.angles(n, inv_freq.device, work)
            cos, sin = a.cos(), a.sin()
            out = torch.stack((torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)))
            out = out[:, :, None, None, :].to(
                device=hidden_states.device, dtype=hidden_states.dtype
            )
        module.cached_sequence_length = n
        module.cached_rotary_positional_embedding = out
        return out
