"""The backend-neutral description of a sinusoidal encoding.

A :class:`Spec` is plain, frozen, hashable data: it can key caches and be a static
argument under ``jax.jit``. It never holds arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Literal

Denominator = Literal["d", "half_minus_one"]
Layout = Literal["interleaved", "split"]
OddDPolicy = Literal["raise", "zero_pad"]

_DENOMINATORS = ("d", "half_minus_one")
_LAYOUTS = ("interleaved", "split")
_ODD_D = ("raise", "zero_pad")


@dataclass(frozen=True)
class Spec:
    """How positions become sin/cos features.

    Parameters
    ----------
    base : float
        The maximum timescale (10000 in "Attention Is All You Need"). The slowest
        feature pair has a wavelength of about ``2*pi*base`` positions.
    min_timescale : float
        The minimum timescale (1.0 everywhere in practice): the fastest pair
        turns ``1/min_timescale`` radians per position.
    denominator : {"d", "half_minus_one"}
        Spacing of the geometric schedule. With ``n = d // 2`` pairs, pair ``i`` has
        angular frequency ``(1/min_timescale) * (min_timescale/base) ** e_i`` where
        ``e_i = 2*i/d`` for ``"d"`` (the paper, PyTorch tutorials, keras-hub) and
        ``e_i = i/max(n - 1, 1)`` for ``"half_minus_one"`` (tensor2tensor, fairseq,
        whisper, flax), which makes the slowest pair exactly ``1/base``.
    frequencies : tuple of float, optional
        Explicit angular frequencies (radians per position), one per sin/cos pair.
        Overrides the geometric schedule; ``d // 2`` must equal its length.
    layout : {"interleaved", "split"}
        ``"interleaved"`` gives ``[sin w0, cos w0, sin w1, cos w1, ...]``;
        ``"split"`` gives ``[sin w0, sin w1, ... | cos w0, cos w1, ...]``.
    offset : float
        Added to every position before encoding (fairseq with ``padding_idx=1``
        starts at 2). Integers keep integer positions exact.
    odd_d : {"raise", "zero_pad"}
        What an odd ``d`` does: raise, or encode ``d - 1`` features and append a
        zero column (tensor2tensor, fairseq, flax).

    Examples
    --------
    >>> spec = Spec(layout="split", denominator="half_minus_one")
    >>> spec.layout
    'split'
    >>> hash(spec) == hash(Spec(layout="split", denominator="half_minus_one"))
    True
    >>> Spec(base=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: Spec.base must be a finite number > 0 (a timescale). Received: -1.0
    """

    base: float = 10000.0
    min_timescale: float = 1.0
    denominator: Denominator = "d"
    frequencies: tuple[float, ...] | None = None
    layout: Layout = "interleaved"
    offset: float = 0
    odd_d: OddDPolicy = "raise"
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for attr in ("base", "min_timescale"):
            value = getattr(self, attr)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(
                    f"Spec.{attr} must be a finite number > 0 (a timescale). Received: {value!r}"
                )
        if self.min_timescale > self.base:
            raise ValueError(
                "Spec.min_timescale must not exceed Spec.base. "
                f"Received: min_timescale={self.min_timescale!r}, base={self.base!r}"
            )
        _check_choice("denominator", self.denominator, _DENOMINATORS)
        _check_choice("layout", self.layout, _LAYOUTS)
        _check_choice("odd_d", self.odd_d, _ODD_D)
        if (
            isinstance(self.offset, bool)
            or not isinstance(self.offset, (int, float))
            or not math.isfinite(self.offset)
        ):
            raise ValueError(f"Spec.offset must be a finite number. Received: {self.offset!r}")
        if self.frequencies is not None:
            freqs = self.frequencies
            if isinstance(freqs, (str, bytes)) or not hasattr(freqs, "__iter__"):
                raise TypeError(
                    f"Spec.frequencies must be a sequence of floats or None. Received: {freqs!r}"
                )
            freqs = tuple(float(w) for w in freqs)
            if not freqs:
                raise ValueError("Spec.frequencies must not be empty.")
            bad = [w for w in freqs if not (math.isfinite(w) and w >= 0)]
            if bad:
                raise ValueError(
                    "Spec.frequencies must be finite and >= 0 (radians per position). "
                    f"Received: {bad[0]!r}"
                )
            object.__setattr__(self, "frequencies", freqs)
        object.__setattr__(self, "base", float(self.base))
        object.__setattr__(self, "min_timescale", float(self.min_timescale))

    def replace(self, **changes: object) -> Spec:
        """A copy with some fields changed (validated again).

        >>> Spec().replace(offset=2).offset
        2
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        if "name" not in changes:
            values["name"] = None
        return Spec(**values)  # type: ignore[arg-type]


def _check_choice(attr: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"Spec.{attr} must be one of: {', '.join(allowed)}. Received: {value!r}")
