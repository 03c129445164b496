"""Property tests for any positional encoding or rotary embedding: yours or pe_core's.

The public test toolkit, in three parts (``import pe_core`` never loads it):

* :mod:`pe_core.testing.checks`: one plain function per property. Each takes the code
  under test and fixed inputs, returns the largest deviation it measured and raises
  :class:`PropertyFailure` (an :class:`AssertionError`) naming the property, the
  inputs, the worst position and the error. Sinusoidal encodings ``fn(positions, d)``:
  :func:`check_bounded`, :func:`check_agreement` (float64 or mpmath),
  :func:`check_uniqueness`, :func:`check_linear_relation`, :func:`check_relative_dot`,
  :func:`check_shift`; rotary embeddings ``fn(x, positions)``:
  :func:`check_rope_agreement`, :func:`check_rope_relative_scores`,
  :func:`check_rope_norm`; any backend-parametrised computation:
  :func:`check_cross_backend_agreement`. They need NumPy only (mpmath for the exact
  reference). :func:`run_check` runs one and reports a :class:`CheckOutcome`
  (``"PASS"``, ``"FAIL"`` or ``"ERROR"``) instead of raising.
* :mod:`pe_core.testing.references`: what the checks compare with, restated from the
  definitions: :func:`reference_encoding` (float64), :func:`exact_encoding` (mpmath),
  :func:`reference_rope` (float64), :func:`uniqueness_window`.
* :mod:`pe_core.testing.strategies` and :func:`check_encoding` (Hypothesis, the
  ``test`` extra; loaded the first time one of their names is used): strategies for
  the inputs (:func:`specs`, :func:`dims`, :func:`int_positions`,
  :func:`float_positions`, :func:`position_arrays`), and every encoding property
  searched under Hypothesis against a function ``fn(positions, d)``, reporting the
  minimised counterexamples.

``pe-core check`` runs these checks on fixed grids, through :func:`run_check`. :class:`HostReadError` and
:func:`forbid_host_reads` (from :mod:`pe_core.host_reads`) are here too, for tests of
code that must not read device arrays back.

>>> import numpy as np, pe_core
>>> from pe_core.testing import check_agreement, check_encoding
>>> error = check_agreement(lambda p, d: pe_core.encode(p, d), "vaswani", 8, np.arange(100))
>>> check_encoding(lambda p, d: pe_core.encode(p, d), "vaswani", max_examples=5)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pe_core.host_reads import HostReadError, forbid_host_reads
from pe_core.testing import checks, references
from pe_core.testing.checks import *  # noqa: F403 (the names of checks.__all__)
from pe_core.testing.references import *  # noqa: F403 (the names of references.__all__)

if TYPE_CHECKING:  # loaded on first use by __getattr__ (they need Hypothesis)
    from pe_core.testing.search import check_encoding
    from pe_core.testing.strategies import (
        dims,
        float_positions,
        int_positions,
        position_arrays,
        specs,
    )

__all__ = ["HostReadError", "check_encoding", "dims", "float_positions", "forbid_host_reads"]
__all__ += ["int_positions", "position_arrays", "specs"]
__all__ += checks.__all__
__all__ += references.__all__

#: The names that need Hypothesis -> the submodule that holds them.
_NEEDS_HYPOTHESIS = {"check_encoding": "search"} | dict.fromkeys(
    ("dims", "float_positions", "int_positions", "position_arrays", "specs"), "strategies"
)


def __getattr__(name: str) -> Any:
    """Load the Hypothesis parts on first use (an actionable ImportError without it)."""
    module = _NEEDS_HYPOTHESIS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
