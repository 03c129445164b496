"""What a RoPE scaling type is and what it reads: the classes of :mod:`pe_core.rope_scaling`.

Defined here, below the type modules that use them; :mod:`pe_core.rope_scaling`
re-exports them, and they name that module as theirs (their documented home).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

__all__ = ["SCALING_TYPES", "MissingRopeKeyError", "RopeScalingType", "ScalingInputs"]


class MissingRopeKeyError(KeyError, ValueError):
    """A key the config needs is missing.

    Both a :class:`KeyError` (what transformers raises for a missing rope key) and a
    :class:`ValueError` (what pe_core raises for a bad config), so either ``except``
    catches it.

    >>> try:
    ...     rope_frequencies({"head_dim": 8, "rope_scaling": {"rope_type": "linear"}})
    ... except KeyError as error:
    ...     print(error)
    rope_type 'linear' requires the key 'factor' in rope_parameters/rope_scaling, but it is missing. Present keys: ['rope_type'].
    """

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class ScalingInputs(NamedTuple):
    """What a scaling type's function reads (see :data:`SCALING_TYPES`)."""

    #: The whole config mapping (for ``max_position_embeddings`` and the like).
    config: Mapping[str, Any]
    #: The rope dict of the type (``rope_parameters``/``rope_scaling``).
    params: Mapping[str, Any]
    #: ``rope_theta``, a finite float > 1.
    theta: float
    #: Features per head.
    head_dim: int
    #: Rotated pairs: ``rotary_dim // 2``.
    pairs: int
    #: Current sequence length, or ``None`` (only types with ``needs_seq_len`` get one).
    seq_len: int | None
    #: Whether the rope dict came from a per-layer-type nesting.
    nested: bool

    @property
    def rotary_dim(self) -> int:
        """Rotated features: ``2 * pairs``."""
        return 2 * self.pairs


@dataclasses.dataclass(frozen=True)
class RopeScalingType:
    """One ``rope_type``: how it computes its frequencies and which keys it reads.

    Parameters
    ----------
    compute : callable
        ``compute(inputs: ScalingInputs) -> (inv_freq, attention_factor)``: float64
        ``inv_freq`` of ``inputs.pairs`` entries (radians per position) and the factor
        cos/sin are multiplied by.
    required : tuple of str
        Keys the rope dict must hold (a missing one raises :class:`MissingRopeKeyError`).
    optional : tuple of str
        Other keys it may hold (besides the common ones: ``rope_theta``,
        ``partial_rotary_factor``, ...). Any key outside both is an error.
    needs_seq_len : bool
        The frequencies depend on the sequence length: :func:`pe_core.apply_rope` passes
        ``seq_len = max(pos) + 1`` (known positions only) and N-D RoPE refuses the type.

    Examples
    --------
    >>> SCALING_TYPES["linear"].required, SCALING_TYPES["dynamic"].needs_seq_len
    (('factor',), True)
    """

    compute: Callable[[ScalingInputs], tuple[np.ndarray, float]]
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    needs_seq_len: bool = False


#: The table of :data:`pe_core.rope_scaling.SCALING_TYPES` (filled there, in place).
SCALING_TYPES: dict[str, RopeScalingType] = {}

# Their documented home (the API reference, reprs, tracebacks and pickles name it).
for _cls in (MissingRopeKeyError, ScalingInputs, RopeScalingType):
    _cls.__module__ = "pe_core.rope_scaling"
del _cls
