"""TorchScript forms of pe_core's PyTorch calls: ``torch.jit.script`` compiles them.

pe_core's public functions (:func:`~pe_core.encode`, :func:`~pe_core.apply_rope`,
:func:`~pe_core.rope_cos_sin`, :func:`~pe_core.timestep_embedding`,
:func:`~pe_core.alibi_bias`, :func:`~pe_core.t5_relative_bucket`) and the layers of
:mod:`pe_core.layers.torch` are not scriptable: they take keyword-only arguments, any
backend's arrays, specs, presets and model configs, and choose a route in Python. This
module is the form TorchScript-era model code can hold instead:

* :class:`Sinusoidal` (the sinusoidal table of any 1-D spec; timestep embeddings with
  :func:`~pe_core.timestep.timestep_spec`), :class:`RopeCosSin` and :class:`Rope` (RoPE's
  tables and rotation), :class:`AlibiBias`, :class:`T5Buckets`: ``torch.nn.Module``
  subclasses whose constructor (plain Python, not scripted) validates the arguments
  and works out the constants on the host with pe_core, and whose ``forward`` is
  scriptable. ``torch.jit.script(module)`` works, and ``torch.jit.save`` keeps the
  constants as buffers.
* the functions those forwards call, scriptable on their own, tensor in and tensor
  out: :func:`exact_turns`, :func:`sin_cos_features`, :func:`rotate`,
  :func:`alibi_from_slopes`, :func:`t5_buckets`.

The numbers are pe_core's: the forwards restate, operation by operation, the exact
integer kernel pe_core runs for positions on a device (:mod:`pe_core._kernel.angles`:
int32 words that wrap modulo ``2**32`` do the angle reduction, no float64 on the
device), so on the CPU a scripted module gives the bits of the eager call on device
positions, and, like it, the angle within about ``3e-7`` rad at any int64 position.
Invalid positions (NaN, inf, ``|x| >= 2**63``) give NaN rows, as on a device; the
eager functions on host positions raise instead.

``import pe_core.integrations.torchscript`` imports torch (``import pe_core`` does not). TorchScript
itself is deprecated in recent PyTorch (``torch.jit.script`` warns); for new code
``torch.compile`` and ``torch.export`` take pe_core's eager functions and layers
directly.

>>> import torch
>>> from pe_core.integrations.torchscript import Sinusoidal
>>> scripted = torch.jit.script(Sinusoidal(8))  # warns: TorchScript is deprecated
>>> scripted(torch.tensor([1]))[0, :2]  # sin 1, cos 1
tensor([0.8415, 0.5403])
>>> torch.equal(scripted(torch.tensor([10**7])), Sinusoidal(8)(torch.tensor([10**7])))
True
"""

import math
from typing import Any

import torch
from torch import Tensor, nn

from pe_core._index.log_buckets import t5_thresholds_plain
from pe_core._kernel.angles import FRACTION_MAX_TURNS, turn_constant_fields
from pe_core._schedule import check_d, computed_width, omegas
from pe_core._sinusoidal import _MAX_FRACTION_SHIFT
from pe_core.alibi import alibi_slopes
from pe_core.presets import resolve_spec
from pe_core.rope_tables import _rope_of
from pe_core.spec import Spec
from pe_core.t5 import _config as _t5_config

__all__ = [
    "AlibiBias",
    "Rope",
    "RopeCosSin",
    "Sinusoidal",
    "T5Buckets",
    "alibi_from_slopes",
    "exact_turns",
    "rotate",
    "sin_cos_features",
    "t5_buckets",
]

# -- the scriptable functions -------------------------------------------------------


def exact_turns(
    positions: Tensor,
    words: Tensor,
    rests: Tensor,
    fraction_f: Tensor,
    fast: Tensor,
    offset_turns: Tensor | None,
) -> Tensor:
    """Turns ``positions * w / 2pi`` reduced to ``[-1/2, 1/2]``, exactly (scriptable).

    The device kernel of :func:`pe_core._kernel.angles.reduced_turns`, restated in
    TorchScript: an integer position ``p`` (int64 split into two int32 words) times the
    32-bit word ``F`` of each frequency wraps modulo ``2**32``, which is the fractional
    part of ``p * F / 2**32`` exactly; the small rest ``p * g`` is a float product.

    Parameters
    ----------
    positions : Tensor
        Integer (int64, int32, int16, int8, uint8) or floating positions, any shape ``S``.
        Float positions ``|x| >= 2**63``, NaN and inf give NaN.
    words : Tensor
        int32, ``(2, n)``: the words of ``frac(f)`` and ``frac(2**32 f)`` per frequency.
    rests : Tensor
        ``(2, n)`` in the working dtype (float32, or float64): their float rests.
    fraction_f : Tensor
        ``(n,)``: the turns per position ``f`` that fractional parts multiply (0 where a
        frequency is too fast for the float step, see ``fast``).
    fast : Tensor
        bool ``(n,)``: frequencies whose columns are NaN for a fractional position.
    offset_turns : Tensor or None
        ``(n,)``: ``frac(offset * f)``, a constant offset's turns, or None.

    Returns
    -------
    Tensor
        ``S + (n,)`` in ``rests``' dtype.

    Examples
    --------
    >>> import math, torch
    >>> c = Sinusoidal(2).constants_of(torch.tensor([0]))
    >>> t = exact_turns(torch.tensor([10**7]), c[0], c[1], c[2], c[3], None)
    >>> abs(float(t[0, 0]) - math.remainder(10**7, 2 * math.pi) / (2 * math.pi)) < 1e-7
    True
    """
    wdtype = rests.dtype
    bad: Tensor | None = None
    fraction: Tensor | None = None
    if positions.dtype == torch.bool or positions.is_complex():
        raise ValueError("positions must be an integer or floating tensor (not bool or complex)")
    if positions.is_floating_point():
        integer = torch.floor(positions)
        fraction = (positions - integer).to(wdtype)
        bad = torch.logical_not(torch.abs(positions) < 2.0**63)  # NaN compares False
        integer = torch.where(bad, torch.zeros_like(integer), integer)
        wide: Tensor | None = integer.to(torch.int64)
    elif positions.dtype == torch.int64:
        wide = positions
    elif positions.dtype in [torch.int32, torch.int16, torch.int8, torch.uint8]:
        wide = None
    else:
        raise ValueError(
            "positions must be int64, int32, int16, int8, uint8 or floating; wider unsigned "
            "integers are taken by pe_core.encode"
        )
    if wide is not None:  # two int32 words: the signed low 32 bits, floor(p / 2**32) + carry
        low = wide.to(torch.int32)
        upper = torch.bitwise_right_shift(wide, 32).to(torch.int32)
        carry = (low < 0).to(torch.int32)
        wrapped = low.unsqueeze(-1) * words[0]
        fine = low.to(wdtype).unsqueeze(-1) * rests[0]
        high_scale = (upper.to(wdtype) + carry.to(wdtype)).unsqueeze(-1)
        if bad is not None:  # NaN enters through the last word's multiplier
            high_scale = torch.where(bad.unsqueeze(-1), high_scale * math.nan, high_scale)
        wrapped = wrapped + (upper + carry).unsqueeze(-1) * words[1]
        fine = fine + high_scale * rests[1]
    else:
        p32 = positions.to(torch.int32)
        wrapped = p32.unsqueeze(-1) * words[0]
        fine = p32.to(wdtype).unsqueeze(-1) * rests[0]
    # int32 -> float keeps 24 bits: the wrapped word in two halves, each exact
    top = torch.bitwise_right_shift(wrapped, 16)
    bottom = torch.bitwise_and(wrapped, 0xFFFF)
    turns = top.to(wdtype) * 2.0**-16 + (bottom.to(wdtype) * 2.0**-32 + fine)
    if fraction is not None:
        turns = turns + fraction.unsqueeze(-1) * fraction_f
        inexact = torch.logical_and((fraction != 0).unsqueeze(-1), fast)
        turns = torch.where(inexact, turns * math.nan, turns)
    if offset_turns is not None:
        turns = turns + offset_turns
    return turns - torch.round(turns)


def sin_cos_features(sin: Tensor, cos: Tensor, layout: str, cos_first: bool, d: int) -> Tensor:
    """Lay out ``sin`` and ``cos`` (each ``(..., n)``) as ``d`` features (scriptable).

    ``layout`` ``"interleaved"`` gives ``[s0, c0, s1, c1, ...]``, ``"split"`` ``[s0, s1,
    ... | c0, c1, ...]``; ``cos_first`` swaps the slots; ``d = 2n + 1`` appends a zero
    column, ``d < 2n`` keeps the first ``d``.

    >>> import torch
    >>> sin_cos_features(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), "split", False, 5)
    tensor([1., 2., 3., 4., 0.])
    """
    first, second = (cos, sin) if cos_first else (sin, cos)
    if layout == "interleaved":
        out = torch.stack([first, second], -1).flatten(-2)
    else:
        out = torch.cat([first, second], -1)
    width = out.shape[-1]
    if d > width:
        out = torch.cat([out, torch.zeros_like(out[..., :1])], -1)
    elif d < width:
        out = out[..., :d]
    return out


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """Rotate feature pairs of ``x`` by angles with ``cos``/``sin`` (scriptable).

    ``cos`` and ``sin`` have shape ``P + (r/2,)`` broadcasting against ``x.shape[:-1]``
    (``r`` the rotary dimension, at most ``x.shape[-1]``; features past it pass
    through). Pairs are ``(j, j + r/2)`` for ``layout="half"`` and ``(2j, 2j + 1)`` for
    ``"interleaved"``; each product and sum is rounded on its own (the formula of
    :meth:`pe_core_backends.Namespace.rotate_pairs`), in ``cos``' dtype, and the result
    rounded once to ``x``'s.

    >>> import torch
    >>> rotate(torch.tensor([1.0, 0.0]), torch.tensor([0.0]), torch.tensor([1.0]), "half")
    tensor([0., 1.])
    """
    half = cos.shape[-1]
    rotary_dim = 2 * half
    head_dim = x.shape[-1]
    part = x[..., :rotary_dim] if rotary_dim < head_dim else x
    cast = x.dtype != cos.dtype
    if cast:
        part = part.to(cos.dtype)
    if layout == "half":
        pairs = part.unflatten(-1, [2, half])
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        axis = -2
    elif layout == "interleaved":
        pairs = part.unflatten(-1, [half, 2])
        a, b = pairs[..., 0], pairs[..., 1]
        axis = -1
    else:
        raise ValueError("layout must be 'half' or 'interleaved'")
    both = torch.stack([a * cos - b * sin, b * cos + a * sin], axis)
    out = both.flatten(-2)
    if cast:
        out = out.to(x.dtype)
    if rotary_dim < head_dim:
        out = torch.cat([out, x[..., rotary_dim:]], -1)
    return out


def alibi_from_slopes(slopes: Tensor, q_len: int, k_len: int, causal: bool) -> Tensor:
    """The ALiBi bias ``(n_heads, q_len, k_len)`` of per-head ``slopes`` (scriptable).

    :func:`pe_core.alibi_bias`'s values: ``-slope_h * (i + k_len - q_len - j)`` for keys
    at or before query ``i`` and ``-inf`` after it (``causal``), else ``-slope_h *
    |i + k_len - q_len - j|``; one product in ``slopes``' dtype, as there.

    >>> import torch
    >>> alibi_from_slopes(torch.tensor([0.5]), 2, 2, True)[0].tolist()
    [[0.0, -inf], [-0.5, 0.0]]
    """
    if q_len < 1 or q_len > k_len:
        raise ValueError("alibi_from_slopes needs 1 <= q_len <= k_len")
    keys = torch.arange(k_len, device=slopes.device)
    queries = torch.arange(q_len, device=slopes.device) + (k_len - q_len)
    offset = keys.unsqueeze(0) - queries.unsqueeze(1)  # key - query, exact integers
    if causal:
        value = torch.where(
            offset > 0,
            torch.full_like(offset, 0, dtype=slopes.dtype) - math.inf,
            offset.to(slopes.dtype),
        )
    else:
        value = (-torch.abs(offset)).to(slopes.dtype)
    return slopes.reshape(-1, 1, 1) * value


def t5_buckets(
    relative_position: Tensor,
    thresholds: Tensor,
    n: int,
    max_exact: int,
    bidirectional: bool,
    min_extra: int,
) -> Tensor:
    """T5's bucket of each relative position, by integer comparisons (scriptable).

    ``thresholds`` (int64, ascending) are the distances from which each log bucket
    starts (:func:`pe_core.t5.bucket_thresholds`), ``n`` the buckets per side,
    ``max_exact = n // 2``; ``min_extra`` is 1 when ``2**63`` is a threshold (the
    distance of int64's least value, which int64 cannot hold). int32 or int64 in, the
    same dtype out.

    >>> import torch
    >>> t = torch.tensor([8, 12, 16, 23, 32, 46, 64, 91])  # num_buckets=32, max_distance=128
    >>> t5_buckets(torch.tensor([-2, -1, 0, 1, 2]), t, 16, 8, True, 0).tolist()
    [2, 1, 0, 17, 18]
    """
    if relative_position.dtype not in [torch.int32, torch.int64]:
        raise ValueError("relative_position must be int32 or int64")
    rel = relative_position.to(torch.int64)
    least = rel == -9223372036854775807 - 1
    rel = torch.where(least, rel + 1, rel)
    if bidirectional:
        distance = torch.abs(rel)
    else:
        distance = torch.where(rel < 0, -rel, torch.zeros_like(rel))
    large = torch.bucketize(distance, thresholds, right=True) + max_exact
    if min_extra:
        large = large + least.to(torch.int64)
    bucket = torch.where(distance < max_exact, distance, large)
    if bidirectional:
        bucket = bucket + (rel > 0).to(torch.int64) * n
    return bucket.to(relative_position.dtype)


# -- the scriptable modules ------------------------------------------------------------


def _working(dtype: Any) -> torch.dtype:
    if dtype in (None, torch.float32, "float32"):
        return torch.float32
    if dtype in (torch.float64, "float64"):
        return torch.float64
    raise ValueError(
        "dtype must be float32 or float64 (cast the result for float16/bfloat16). "
        f"Received: {dtype!r}"
    )


def _turn_buffers(
    freqs: tuple[float, ...], offset: float, working: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(words, rests, fraction_f, fast, offset_turns)`` of :func:`exact_turns`."""
    words, rests, f, _, offset_turns = turn_constant_fields(freqs, offset)
    name = "float64" if working == torch.float64 else "float32"
    fast = tuple(abs(v) > FRACTION_MAX_TURNS[name] for v in f)
    kept = tuple(0.0 if is_fast else v for v, is_fast in zip(f, fast, strict=True))
    n = len(freqs)
    return (
        torch.tensor(list(words), dtype=torch.int32).reshape(2, n),
        torch.tensor(list(rests), dtype=working).reshape(2, n),
        torch.tensor(kept, dtype=working),
        torch.tensor(fast, dtype=torch.bool),
        torch.tensor(offset_turns if offset_turns is not None else (0.0,) * n, dtype=working),
    )


class _TurnsModule(nn.Module):
    """The constants of :func:`exact_turns` for integer and for float positions, as
    buffers (a float position at frequencies beyond the float step is scaled by
    ``2**k`` against ``f / 2**k``, both exact, as pe_core's kernel does)."""

    float_scale: float
    has_offset: bool
    # the buffers (for type checkers; TorchScript reads them from the module)
    int_words: Tensor
    int_rests: Tensor
    int_fraction_f: Tensor
    int_fast: Tensor
    int_offset: Tensor
    float_words: Tensor
    float_rests: Tensor
    float_fraction_f: Tensor
    float_fast: Tensor
    float_offset: Tensor

    def _setup_turns(self, freqs: tuple[float, ...], offset: float, working: torch.dtype) -> None:
        name = "float64" if working == torch.float64 else "float32"
        fastest = max(freqs, default=0.0) / (2.0 * math.pi) * (1 + 2.0**-40)
        k = max(0, math.ceil(math.log2(fastest / FRACTION_MAX_TURNS[name]))) if fastest else 0
        k = k if 0 < k <= _MAX_FRACTION_SHIFT else 0
        self.float_scale = float(2**k)
        self.has_offset = offset != 0
        for prefix, fs, off in (
            ("int", freqs, offset),
            ("float", tuple(f / 2**k for f in freqs), offset * 2**k),
        ):
            for name_, value in zip(
                ("words", "rests", "fraction_f", "fast", "offset"),
                _turn_buffers(fs, off, working),
                strict=True,
            ):
                self.register_buffer(f"{prefix}_{name_}", value, persistent=False)

    def turns(self, positions: Tensor) -> Tensor:
        """:func:`exact_turns` of ``positions`` with this module's constants."""
        if positions.is_floating_point():
            if self.float_scale != 1.0:
                positions = positions * self.float_scale
            offset = self.float_offset if self.has_offset else None
            return exact_turns(
                positions,
                self.float_words,
                self.float_rests,
                self.float_fraction_f,
                self.float_fast,
                offset,
            )
        offset = self.int_offset if self.has_offset else None
        return exact_turns(
            positions, self.int_words, self.int_rests, self.int_fraction_f, self.int_fast, offset
        )

    def constants_of(self, positions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(words, rests, fraction_f, fast)`` for positions of ``positions``' kind."""
        if positions.is_floating_point():
            return self.float_words, self.float_rests, self.float_fraction_f, self.float_fast
        return self.int_words, self.int_rests, self.int_fraction_f, self.int_fast


class Sinusoidal(_TurnsModule):
    """The sinusoidal table of positions, :func:`pe_core.encode`'s values; scriptable.

    ``forward(positions)`` takes integer or float positions of any shape ``S`` and
    returns ``S + (d,)`` on their device.

    Parameters
    ----------
    d : int
        Features per position (odd ``d`` as the spec's ``odd_d`` says).
    spec : Spec or str, optional
        Any 1-D spec or preset (``"vaswani"`` by default): base, layout, order, offset,
        explicit frequencies. Timestep embeddings:
        ``Sinusoidal(dim, spec=pe_core.timestep.timestep_spec(dim, flip_sin_to_cos, shift))``
        (a negative ``scale`` negates the sines: do that on the result).
    dtype : torch.dtype, optional
        ``torch.float32`` (default) or ``torch.float64``: the working and output dtype.

    Examples
    --------
    >>> import torch
    >>> layer = Sinusoidal(4, spec="whisper")
    >>> layer(torch.tensor([1])).shape
    torch.Size([1, 4])
    """

    layout: str
    cos_first: bool
    d: int

    def __init__(self, d: int, spec: Spec | str | None = None, dtype: Any = None) -> None:
        super().__init__()
        resolved = resolve_spec(spec)
        if resolved.axes != 1:
            raise ValueError(
                f"Sinusoidal takes 1-D specs; this one has axes={resolved.axes} "
                "(pe_core.encode and the N-D layers take it)."
            )
        d = check_d(d, resolved)
        freqs = omegas(computed_width(d, resolved), resolved)
        self.layout, self.cos_first, self.d = resolved.layout, resolved.order == "cos_sin", d
        self._setup_turns(freqs, resolved.offset, _working(dtype))

    def forward(self, positions: Tensor) -> Tensor:
        angles = self.turns(positions) * (2.0 * math.pi)
        return sin_cos_features(
            torch.sin(angles), torch.cos(angles), self.layout, self.cos_first, self.d
        )


class RopeCosSin(_TurnsModule):
    """RoPE's ``(cos, sin)`` of positions, :func:`pe_core.rope_cos_sin`'s values;
    scriptable.

    ``forward(positions)`` returns ``cos`` and ``sin`` of shape ``positions.shape +
    (width,)``, times the rope's attention factor.

    Parameters
    ----------
    head_dim_or_config : int or Mapping or config object
        As for :func:`pe_core.rope_cos_sin`: a head size (with ``spec``), or a model
        config. Ropes whose frequencies depend on the sequence length (``dynamic``,
        ``longrope``) are refused: their forward would read ``max(positions)``.
    spec : RopeSpec, optional
        With an integer ``head_dim``.
    layout : {"half", "interleaved", "half_width"}, optional
        The table's layout (the spec's pairing by default).
    dtype : torch.dtype, optional
        ``torch.float32`` (default) or ``torch.float64``.
    layer_type : str, optional
        With a model config that has rope parameters per layer type, as for
        :func:`pe_core.rope_cos_sin`.

    Examples
    --------
    >>> import torch
    >>> cos, sin = RopeCosSin(4)(torch.tensor([0, 1]))
    >>> [round(v, 3) for v in cos[1].tolist()]
    [0.54, 1.0, 0.54, 1.0]
    """

    layout: str
    factor: float
    pairing: str

    def __init__(
        self,
        head_dim_or_config: Any,
        spec: Any = None,
        layout: str | None = None,
        dtype: Any = None,
        layer_type: str | None = None,
    ) -> None:
        super().__init__()
        rope = _rope_of(head_dim_or_config, spec, layer_type, layout)
        if rope.constants is None:
            raise ValueError(
                f"rope_type {rope.seq_len_type!r} chooses its frequencies from max(positions) "
                "+ 1, a read of the positions' values that a scripted forward would make "
                "on every call; torch.compile or torch.export take pe_core.rope_cos_sin "
                "and pe_core.apply_rope with it."
            )
        inv_freq, factor = rope.constants
        self.layout, self.factor, self.pairing = rope.layout, float(factor), rope.spec.layout
        self._setup_turns(tuple(inv_freq), 0, _working(dtype))

    def half_width(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` with one column per frequency (``positions.shape + (r/2,)``)."""
        angles = self.turns(positions) * (2.0 * math.pi)
        cos, sin = torch.cos(angles), torch.sin(angles)
        if self.factor != 1.0:
            cos, sin = cos * self.factor, sin * self.factor
        return cos, sin

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        cos, sin = self.half_width(positions)
        if self.layout == "half":
            return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        if self.layout == "interleaved":
            c, s = torch.stack([cos, cos], -1), torch.stack([sin, sin], -1)
            return c.flatten(-2), s.flatten(-2)
        return cos, sin


class Rope(RopeCosSin):
    """RoPE applied to ``x``, :func:`pe_core.apply_rope`'s values; scriptable.

    The arguments of :class:`RopeCosSin` (its ``layout`` aside: the rotation pairs
    features as the spec says). ``forward(x, positions)`` rotates ``x`` (``(...,
    head_dim)``, float32 for a float32 module, float16/bfloat16 computed in float32)
    by ``positions`` (shape broadcasting against ``x.shape[:-1]``, aligned to its
    end: ``(seq,)`` for ``(batch, heads, seq, head_dim)``).

    Examples
    --------
    >>> import torch
    >>> q = torch.ones(1, 2, 3, 8)
    >>> Rope(8)(q, torch.arange(3)).shape
    torch.Size([1, 2, 3, 8])
    """

    def __init__(
        self,
        head_dim_or_config: Any,
        spec: Any = None,
        dtype: Any = None,
        layer_type: str | None = None,
    ) -> None:
        super().__init__(head_dim_or_config, spec, "half_width", dtype, layer_type)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:  # type: ignore[override]
        if x.dtype == torch.float64 and self.int_rests.dtype != torch.float64:
            raise ValueError("float64 x needs a module built with dtype=torch.float64")
        cos, sin = self.half_width(positions)
        return rotate(x, cos, sin, self.pairing)


class AlibiBias(nn.Module):
    """The ALiBi bias, :func:`pe_core.alibi_bias`'s values; scriptable.

    ``AlibiBias(n_heads, causal=True, alibi_bias_max=8.0, dtype=None)``;
    ``forward(q_len, k_len)`` returns ``(n_heads, q_len, k_len)`` float32 (float64 with
    ``dtype=torch.float64``), on the device the module is on.

    >>> AlibiBias(2)(3, 3)[0].tolist()
    [[0.0, -inf, -inf], [-0.0625, 0.0, -inf], [-0.125, -0.0625, 0.0]]
    """

    causal: bool
    slopes: Tensor

    def __init__(
        self, n_heads: int, causal: bool = True, alibi_bias_max: float = 8.0, dtype: Any = None
    ) -> None:
        super().__init__()
        slopes = alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max)
        self.causal = bool(causal)
        self.register_buffer(
            "slopes", torch.tensor(slopes.tolist(), dtype=_working(dtype)), persistent=False
        )

    def forward(self, q_len: int, k_len: int) -> Tensor:
        return alibi_from_slopes(self.slopes, q_len, k_len, self.causal)


class T5Buckets(nn.Module):
    """T5's relative position buckets, :func:`pe_core.t5_relative_bucket`'s values;
    scriptable.

    ``T5Buckets(bidirectional=True, num_buckets=32, max_distance=128,
    arithmetic="float32")``; ``forward(relative_position)`` takes int32 or int64
    ``key - query`` positions and returns their buckets in the same dtype.

    >>> import torch
    >>> T5Buckets()(torch.tensor([-2, -1, 0, 1, 2])).tolist()
    [2, 1, 0, 17, 18]
    """

    n: int
    max_exact: int
    bidirectional: bool
    min_extra: int
    thresholds: Tensor

    def __init__(
        self,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
        arithmetic: str = "float32",
    ) -> None:
        super().__init__()
        n, max_exact, most, mode, bidi = _t5_config(
            bidirectional, num_buckets, max_distance, arithmetic
        )
        found = t5_thresholds_plain(n, most, mode)
        self.n, self.max_exact, self.bidirectional = n, max_exact, bidi
        self.min_extra = int(2**63 in found)
        kept = [t for t in found if t < 2**63]
        self.register_buffer("thresholds", torch.tensor(kept, dtype=torch.int64), persistent=False)

    def forward(self, relative_position: Tensor) -> Tensor:
        return t5_buckets(
            relative_position,
            self.thresholds,
            self.n,
            self.max_exact,
            self.bidirectional,
            self.min_extra,
        )
