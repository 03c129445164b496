"""Every threshold that chooses a route, written once, and the route table they make.

A call's positions are classified once (:mod:`pe_core._kernel.placement`); then one
function per family reads these thresholds and names the route:

* sinusoidal tables of host positions: :func:`~pe_core._kernel.host_tables.host_route`;
* sinusoidal tables of device or traced positions:
  :func:`~pe_core._sinusoidal.device_route`;
* rotary cos/sin: :func:`~pe_core._rope_call.factors_route`.

Timestep embeddings are ``encode`` with a spec (:mod:`pe_core.timestep`): its routes.

The decode-step lanes (:func:`~pe_core._sinusoidal.few_integer_positions`,
:func:`~pe_core._rope_lane.few_positions_rope`) are the first rows of their family:
they take the calls whose every property a few attribute reads establish, and hand
everything else to the general route, which validates once.

:data:`ROUTES` is the table the Architecture page shows (rendered from it while the
site builds: :func:`route_table_markdown`).

>>> FEW_POSITIONS, SMALL_MAX_PAIRS, TABLE_MIN_PAIRS
(64, 16384, 16384)
>>> sorted({route.family for route in ROUTES})  # doctest: +NORMALIZE_WHITESPACE
['encode (device or traced positions)', 'encode (host positions)', 'rope cos/sin']
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = [
    "BUILDS_MIN_PAIRS",
    "CHECK_IN_PYTHON",
    "FEW_POSITIONS",
    "GATHER_MAX_ABS",
    "GATHER_MIN_PAIRS",
    "GATHER_MIN_ROWS",
    "GATHER_TABLE_FRACTION",
    "MAX_KERNEL_FLOAT",
    "MAX_KERNEL_FLOAT_INT32",
    "ROUTES",
    "ROWS_MAX",
    "ROWS_MAX_BYTES",
    "ROWS_MIN_PAIRS",
    "RUN_MIN_PAIRS",
    "RUN_MIN_ROWS",
    "SMALL_MAX_INTEGER",
    "SMALL_MAX_PAIRS",
    "SMALL_MAX_TURNS",
    "SMALL_MAX_TURNS_ROUNDED",
    "SMALL_RUN_ROWS",
    "TABLE_MIN_PAIRS",
    "TABLE_MIN_ROWS",
    "Route",
    "route_table_markdown",
]

# -- the decode-step lanes -------------------------------------------------------------

#: Most positions the decode-step lanes of ``encode`` and ``apply_rope`` take (a decode
#: step of a batch of 64 sequences), and the most integer positions whose bound is
#: found in Python rather than by NumPy reductions.
FEW_POSITIONS = 64
CHECK_IN_PYTHON = FEW_POSITIONS

# -- small calls: one float64 pass -----------------------------------------------------

#: Largest ``|position + offset|`` of the small-call route for integer positions: the
#: turns are ``p * frac(f)`` with ``frac(f)`` split in two, the first product exact.
SMALL_MAX_INTEGER = 2.0**26

#: Largest ``|(position + offset) * w / 2pi|`` (turns) of the small-call route for
#: fractional positions, float32 work: ``2**24 / 2pi`` (error below 2e-9 rad).
SMALL_MAX_TURNS = 2.0**24 / (2.0 * math.pi)

#: The same bound where the result is rounded once to float16/bfloat16 (float64 sin
#: and cos, error below 6e-12: within one ulp of those dtypes down to about 1e-9).
SMALL_MAX_TURNS_ROUNDED = 2.0**12

#: Most sin/cos pairs in one call of the small-call route for integer positions (and
#: of the lanes): beyond it the lookup route is cheaper. Fractional positions take the
#: one float64 pass at any size (3 to 6 times cheaper than the exact kernel).
SMALL_MAX_PAIRS = 16_384

# -- small integer positions that repeat: a cached table ---------------------------

#: Integer positions (with the offset) in ``[0, ROWS_MAX)``, at least
#: ``ROWS_MIN_PAIRS`` pairs in the call, take rows of a cached float32 table of the
#: positions ``0 .. N - 1`` (``N`` a power of two from 1024) of at most
#: ``ROWS_MAX_BYTES``: integer diffusion timesteps, class and bucket ids.
ROWS_MAX = 4096
ROWS_MIN_PAIRS = 2048
ROWS_MAX_BYTES = 8 * 2**20

# -- runs of consecutive positions: angle addition -------------------------------------

#: Runs with at least this many rows and pairs take the angle-addition tables even
#: when small (float32 results): from about there they are cheaper than one sin and
#: one cos per pair.
RUN_MIN_ROWS = 16
RUN_MIN_PAIRS = 2048
#: Runs of at most this many rows take a single exactly reduced start row times the
#: cached offset rotations.
SMALL_RUN_ROWS = 64
#: Runs this large take the blocked tables whatever the dtype.
TABLE_MIN_ROWS = 64
TABLE_MIN_PAIRS = 16_384

# -- other integer positions: angle addition by lookup ---------------------------------

#: Fewest rows and pairs of the lookup route.
GATHER_MIN_ROWS = 64
GATHER_MIN_PAIRS = 16_384
#: The two lookup tables together have at most ``n_rows / GATHER_TABLE_FRACTION`` rows.
GATHER_TABLE_FRACTION = 4
#: Largest ``|position|`` of the lookup route (integers exact in float64).
GATHER_MAX_ABS = 2**53

# -- capabilities ----------------------------------------------------------------------

#: Fewest pairs from which a backend that builds tables itself (torch:
#: ``Namespace.builds_tables``) builds a host run's table with its own threaded kernels
#: (every other host table is NumPy's, so it has the same bits on every backend).
BUILDS_MIN_PAIRS = 16_384

#: Float positions from this size on are beyond the array kernel (floor to int64): on
#: the device they give NaN, on the host they are redone with Python integers (every
#: integer position of every dtype is within; see :mod:`pe_core._kernel.angles`).
MAX_KERNEL_FLOAT = 2.0**63
#: The same where the backend has no int64 (JAX without x64).
MAX_KERNEL_FLOAT_INT32 = 2.0**31


class Route(NamedTuple):
    """One row of the route table: a family, a route's name, when it is taken, and
    where it lives."""

    family: str
    name: str
    when: str
    where: str


_HOST = "encode (host positions)"
_DEVICE = "encode (device or traced positions)"
_ROPE = "rope cos/sin"

#: The route table, in the order each family's function tries its rows.
ROUTES: tuple[Route, ...] = (
    Route(
        _HOST,
        "lane",
        f"default spec, float32, at most {FEW_POSITIONS} integer positions below "
        f"2**{int(math.log2(SMALL_MAX_INTEGER))} in host memory, no other argument",
        "_sinusoidal.few_integer_positions",
    ),
    Route(
        _HOST,
        "run_start_row",
        f"a run of {RUN_MIN_ROWS} to {SMALL_RUN_ROWS} consecutive positions with at least "
        f"{RUN_MIN_PAIRS} pairs, interleaved float32, no offset",
        "host_tables.run_sin_cos",
    ),
    Route(
        _HOST,
        "run_tables",
        f"a run with at least {RUN_MIN_ROWS} rows and {RUN_MIN_PAIRS} pairs (float32), or "
        f"{TABLE_MIN_ROWS} rows and {TABLE_MIN_PAIRS} pairs (any dtype)",
        "tables.table_sin_cos",
    ),
    Route(
        _HOST,
        "rows",
        f"integers in [0, {ROWS_MAX}) with the offset, at least {ROWS_MIN_PAIRS} pairs, "
        f"float32 results, a cached table of at most {ROWS_MAX_BYTES // 2**20} MiB",
        "host_tables.rows_sin_cos",
    ),
    Route(
        _HOST,
        "small",
        f"integers below 2**{int(math.log2(SMALL_MAX_INTEGER))}, at most {SMALL_MAX_PAIRS} "
        f"pairs; other positions of any count below 2**24 / 2pi turns (float32 results)",
        "host_tables.small_sin_cos",
    ),
    Route(
        _HOST,
        "gather",
        f"integer positions, at least {GATHER_MIN_ROWS} rows and {GATHER_MIN_PAIRS} pairs, "
        f"spread narrowly enough for two small tables (built by NumPy for every backend)",
        "gather.gathered_unit_complex",
    ),
    Route(_HOST, "exact_kernel", "everything else", "host_tables.host_turns"),
    Route(
        _DEVICE,
        "compiled_traced",
        "traced by a compiler that runs the kernel as one call (tf.function)",
        "_sinusoidal._traced_kernel",
    ),
    Route(
        _DEVICE,
        "compiled_eager",
        "eager positions on an accelerator of a compiling backend (JAX, TensorFlow)",
        "_sinusoidal._traced_kernel",
    ),
    Route(_DEVICE, "kernel", "everything else", "_sinusoidal._kernel"),
    Route(
        _ROPE,
        "lane",
        f"float32 x in host memory, nothing recording, at most {FEW_POSITIONS} integer "
        f"positions below 2**{int(math.log2(SMALL_MAX_INTEGER))}, a configuration without "
        "sequence length",
        "_rope_lane.few_positions_rope",
    ),
    Route(
        _ROPE,
        "small",
        "float32 x off accelerators, host positions inside the small-call bounds",
        "rope_factors.small_cos_sin",
    ),
    Route(
        _ROPE,
        "host_table",
        "other host positions: the host routes above, placed through the device cache",
        "_rope_call.host_factors",
    ),
    Route(_ROPE, "kernel", "positions on an accelerator or traced", "angles.exact_cos_sin"),
)


def route_table_markdown() -> str:
    """The route table as Markdown, as the Architecture page shows it.

    >>> print(route_table_markdown().splitlines()[0])
    | family | route | taken when | where |
    """
    lines = ["| family | route | taken when | where |", "|---|---|---|---|"]
    lines += [f"| {r.family} | `{r.name}` | {r.when} | `{r.where}` |" for r in ROUTES]
    return "\n".join(lines)
