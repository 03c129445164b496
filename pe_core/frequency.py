"""The frequency schedule: from ``(d, spec)`` to angular frequencies in float64.

:func:`frequencies` is the public face; the schedule itself (and the checks of ``d``)
lives in :mod:`pe_core._schedule`, which the engines read. RoPE's frequencies of a
model config are :func:`pe_core.rope_scaling.rope_frequencies` (as float64 arrays; as
cached Python floats for a RoPE call: :func:`pe_core.rope_spec.rope_constants`), and
frequencies a model learns are framework arrays (:mod:`pe_core.trainable`).
"""

from __future__ import annotations

import numpy as np

from pe_core import _schedule
from pe_core._kernel.inputs import check_request_size
from pe_core._schedule import axis_pairs, check_d, computed_width, one_axis_spec
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import PresetLike
from pe_core_backends import Namespace

__all__ = ["check_d", "frequencies", "omegas"]


def frequencies(d: int, spec: Spec | PresetLike | None = None) -> np.ndarray:
    """Angular frequencies (radians per position) of the ``d // 2`` sin/cos pairs.

    Parameters
    ----------
    d : int
        Number of features of the encoding.
    spec : Spec or str, optional
        A :class:`~pe_core.Spec` or a preset name; the ``"vaswani"`` preset by default.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d // 2,)``; pair ``i`` is ``sin/cos(pos * w[i])``.
        For an N-D spec (``axes > 1``), the frequencies every axis shares, one per
        pair of an axis (see :func:`pe_core.nd.axis_pairs`).

    Examples
    --------
    >>> import numpy as np
    >>> w = frequencies(8)
    >>> bool(np.allclose(w, 10000.0 ** (-np.arange(0, 8, 2) / 8)))
    True
    >>> round(float(frequencies(8, "tensor2tensor")[-1]), 12)  # i/(d/2-1): the slowest is 1/base
    0.0001
    """
    spec = resolve_spec(spec)
    d = check_d(d, spec)
    _check_pairs(d if spec.axes == 1 else 2 * axis_pairs(d, spec), spec, "frequencies")
    if spec.axes > 1:
        return np.array(omegas(2 * axis_pairs(d, spec), one_axis_spec(spec)), np.float64)
    return np.array(omegas(d, spec), dtype=np.float64)


def omegas(d: int, spec: Spec, xp: Namespace | None = None) -> tuple[float, ...]:
    """The frequencies of a validated ``(d, spec)`` as a tuple of Python floats.

    With a backend namespace ``xp`` the schedule is evaluated through
    :meth:`~pe_core_backends.Namespace.host_constant`, so compiled callers see a constant.
    A schedule too long for memory is refused before it is built.

    >>> len(omegas(8, Spec())), omegas(8, Spec())[0]
    (4, 1.0)
    """
    _check_pairs(d, spec, "omegas")
    return _schedule.omegas(d, spec, xp)


def _check_pairs(d: int, spec: Spec, what: str) -> None:
    """Refuse a schedule of more pairs than memory holds before its Python loop."""
    if spec.frequencies is None:
        check_request_size(None, "float64", what=what, n_pairs=computed_width(d, spec) // 2)
