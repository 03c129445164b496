"""What ``pe-core check`` checks: its columns, tolerances and fixed grids, one case each.

A case is one configuration of a function under test, ``pe_core.encode`` (a spec and
``d``: :class:`EncodeCase`) or ``pe_core.apply_rope`` (a layout, head_dim and options:
:class:`RopeCase`), with its inputs drawn once from :data:`SEED`. ``case.properties(name)``
gives each column's checks on backend ``name``: calls of :mod:`pe_core.testing.checks`
with the inputs bound, nothing of their own.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pe_core.encoding import encode
from pe_core.frequency import frequencies
from pe_core.relative import shift
from pe_core.rope import apply_rope
from pe_core.spec import Spec
from pe_core.testing.checks import (
    check_agreement,
    check_bounded,
    check_linear_relation,
    check_relative_dot,
    check_rope_agreement,
    check_rope_norm,
    check_rope_relative_scores,
    check_shift,
    check_uniqueness,
)
from pe_core.testing.references import exact_encoding, uniqueness_window
from pe_core_backends import backend_of, get_namespace

#: Allowed error per value (float32 output); each check scales it as documented.
ATOL = 1e-6
#: Allowed difference between backends: a few float32 ulps (values up to sqrt(2)).
ACROSS_ATOL = 5e-7
#: One seed for every grid: every run checks the same values.
SEED = 20240607

#: Column of the encode table -> what its number is (and the tolerance).
COLUMNS: dict[str, str] = {
    "agreement": "check_agreement: max |error| vs the float64 reference; positions 0..255 "
    "and fractional |p| < 1000 (tol 1e-06)",
    "large": "check_agreement vs mpmath: positions up to 2**24, negative and fractional "
    "too; --thorough: to 2**63 and 1e300 (tol 1e-06)",
    "bounded": "check_bounded: how far any value leaves [-1, 1] (tol 0)",
    "unique": "check_uniqueness: how far the closest pair of integer positions in [0, N) "
    "falls short of 2*sin(w_min/2), N = floor(2*pi/w_min) (tol 1e-06)",
    "linear": "check_linear_relation: max |PE(p+k) - relative_matrix(k) @ PE(p)|, "
    "|k| < 2**22, integer and fractional p (tol 3e-06)",
    "shift": "check_shift: max |shift(PE(p), k) - PE(p+k)|, same backend and dtype (tol 3e-06)",
    "rel-dot": "check_relative_dot(exact=True): max |PE(p)·PE(p+k) - sum_i cos(k*w_i)| "
    "(tol 2e-06*sqrt(d))",
    "compiled": "check_agreement under jax.jit / torch.compile / tf.function (also XLA), "
    "float64 reference; first spec and d, --thorough: more (tol 1e-06)",
}

#: Column of the apply_rope table -> what its number is (and the tolerance).
ROPE_COLUMNS: dict[str, str] = {
    "agreement": "check_rope_agreement: max |error| vs the float64 reference, x in [-1, 1), "
    "integer positions up to 2**24 and fractional ones (tol 1e-06)",
    "relative": "check_rope_relative_scores: change of <rope(q, m), rope(k, n)> when m and "
    "n move together, / |q||k| (tol 1e-06)",
    "norm": "check_rope_norm: relative change of |x| under the rotation (tol 1e-06)",
    "compiled": "check_rope_agreement under the compilers, --thorough only (tol 1e-06)",
}

NEEDS_MPMATH = "needs mpmath: pip install 'pe-core[test]'"


#: The backend every other one is compared with across backends.
REFERENCE_BACKEND = "numpy"


def typed(out: Any, name: str, what: str) -> Any:
    """``out`` if it is a float32 array of backend ``name``; a TypeError otherwise."""
    if backend_of(out) != name:
        raise TypeError(f"{what} returned a {type(out).__name__}, not a {name} array")
    dtype = get_namespace(name).dtype_of(out)
    if dtype != "float32":
        raise TypeError(f"{what} returned {name} {dtype}, not float32")
    return out


@dataclass(frozen=True)
class EncodeCase:
    """One (spec, d) of ``encode``, its fixed grids and their mpmath tables."""

    spec: Spec
    d: int
    small: tuple[np.ndarray, ...]  # against the float64 reference
    large: tuple[np.ndarray, ...]  # against mpmath (and, joined to small, compiled)
    huge: tuple[np.ndarray, ...]  # --thorough: beyond 2**24, against mpmath
    exact: tuple[np.ndarray, ...] | None  # mpmath tables of large + huge; None: no mpmath
    unique: np.ndarray | None  # None: check_uniqueness's own choice
    p: tuple[np.ndarray, ...]
    k: np.ndarray

    @property
    def label(self) -> str:
        return f"spec={self.spec.name} d={self.d}"

    @property
    def variant(self) -> tuple[Any, int]:
        return self.spec.name, self.d

    def properties(self, name: str) -> dict[str, Callable[[], float] | None]:
        """Column -> the checks of that column on backend ``name`` (``None``: skipped)."""
        spec, d = self.spec, self.d

        def fn(positions: np.ndarray, d: int) -> Any:
            return typed(encode(positions, d, spec=spec, backend=name), name, "encode")

        def exact() -> float:
            pairs = zip(self.large + self.huge, self.exact or (), strict=True)
            return max(check_agreement(fn, spec, d, g, ATOL, reference=e) for g, e in pairs)

        ps, moved = self.p, functools.partial(shift, spec=spec)
        return {
            "agreement": lambda: max(check_agreement(fn, spec, d, g, ATOL) for g in self.small),
            "large": None if self.exact is None else exact,
            "bounded": lambda: max(
                check_bounded(fn, spec, d, g, 0) for g in self.small + self.large + self.huge
            ),
            "unique": lambda: check_uniqueness(fn, spec, d, self.unique, atol=ATOL),
            "linear": lambda: max(check_linear_relation(fn, spec, d, p, self.k, ATOL) for p in ps),
            "shift": lambda: max(check_shift(fn, moved, spec, d, p, self.k, ATOL) for p in ps),
            "rel-dot": lambda: max(
                check_relative_dot(fn, spec, d, p, p[::-1], self.k, ATOL, exact=True) for p in ps
            ),
        }

    def target(self, positions: Any, backend: str | None = None) -> Any:
        """What the compilers compile, and what is compared across backends."""
        return encode(positions, self.d, spec=self.spec, backend=backend)

    def check_compiled(self, compiled: Callable[..., Any]) -> float:
        """Both grids joined (one compilation per dtype), against the float64 reference."""
        grids = (np.concatenate(pair) for pair in zip(self.small, self.large, strict=True))

        def fn(positions: np.ndarray, d: int) -> Any:
            return compiled(positions)

        return max(check_agreement(fn, self.spec, self.d, g, ATOL) for g in grids)


@dataclass(frozen=True)
class RopeCase:
    """One configuration of ``apply_rope`` and its inputs: ``(x, positions)`` pairs."""

    head_dim: int
    options: dict[str, Any]  # base, layout, rotary_dim
    inputs: tuple[tuple[np.ndarray, np.ndarray], ...]
    shifts: np.ndarray

    @property
    def label(self) -> str:
        defaults = {"layout": self.options["layout"], "base": 10000.0}
        extra = "".join(
            f" {key}={value:g}" for key, value in self.options.items() if defaults.get(key) != value
        )
        return f"rope layout={self.options['layout']} head_dim={self.head_dim}{extra}"

    @property
    def variant(self) -> tuple[Any, int]:
        return tuple(self.options.items()), self.head_dim

    def properties(self, name: str) -> dict[str, Callable[[], float] | None]:
        """Column -> the checks of that column on backend ``name``."""

        def fn(x: np.ndarray, positions: np.ndarray) -> Any:
            return typed(self.target(x, positions, name), name, "apply_rope")

        q, m = self.inputs[0]  # the keys: the same vectors and positions, reversed
        return {
            "agreement": lambda: self.agreement(fn),
            "relative": lambda: check_rope_relative_scores(
                fn, q, q[::-1], m, m[::-1], self.shifts, atol=ATOL
            ),
            "norm": lambda: max(check_rope_norm(fn, x, p, atol=ATOL) for x, p in self.inputs),
        }

    def target(self, x: Any, positions: Any, backend: str | None = None) -> Any:
        """What the compilers compile, and what is compared across backends."""
        return apply_rope(x, positions, backend=backend, **self.options)

    def agreement(self, fn: Callable[..., Any]) -> float:
        return max(
            check_rope_agreement(fn, x, p, atol=ATOL, **self.options) for x, p in self.inputs
        )

    check_compiled = agreement  # the same inputs, compiled


def encode_case(spec: Spec, d: int, thorough: bool) -> EncodeCase:
    """The case of ``(spec, d)``: its grids drawn from :data:`SEED`, and their mpmath tables."""
    rng = np.random.default_rng(SEED)
    n = 4 if thorough else 1  # --thorough: larger grids
    # Fractional positions are float32 values, which every backend holds exactly (JAX
    # without x64 rounds float64 ones to float32 before pe_core sees them).
    fractions = np.concatenate([np.arange(-64, 64, 0.125 / n), rng.uniform(-1000, 1000, 64 * n)])
    small = (np.arange(256 * n, dtype=np.int64), fractions.astype(np.float32))
    edges = [2**24, 2**24 - 1, 2**23 + 1, 10**6, 10**7, 12345678, 9999991, -(2**24), -7654321]
    large_fractions = [2**23 - 0.5, 1e6 + 0.0625, -(3e6 + 0.25), 5e6 + 0.5]
    large = (
        np.concatenate([edges, rng.integers(2**20, 2**24, 23 * n)]).astype(np.int64),
        np.concatenate([large_fractions, rng.uniform(-(2**24), 2**24, 28 * n)]).astype(np.float32),
    )
    huge = huge_positions(rng) if thorough else ()
    exact = None
    if has_mpmath():  # beyond 2**24, the library's own float64 frequencies (exact_encoding)
        exact = tuple(exact_encoding(g, d, spec) for g in large) + tuple(
            exact_encoding(g, d, spec, frequencies=frequencies(d, spec)) for g in huge
        )
    window, _ = uniqueness_window(d, spec)
    unique = None
    if thorough and window > 1024:
        unique = np.unique(np.concatenate([np.arange(256), rng.integers(0, window, 768)]))
    p = (
        np.array([0, 1, 2, 100, 12345, 2**21, 2**22], dtype=np.int64),
        np.array([0.5, 1000.5, 123456.5, -777.5], dtype=np.float32),
    )
    k = np.array([1, -1, 17, -1000, 65537, -(2**20) - 3, 2**22 - 1], dtype=np.int64)
    if thorough:
        p = (np.concatenate([p[0], rng.integers(0, 2**22, 57)]), p[1])
        k = np.concatenate([k, rng.integers(-(2**22), 2**22, 9)])
    return EncodeCase(spec, d, small, large, huge, exact, unique, p, k)


def huge_positions(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Host positions far beyond 2**24: int64 to 2**63, float64 to 1e300."""
    ints = [2**31, 2**31 - 1, -(2**31) - 5, 2**40 + 7, -(2**53) + 1, 2**62 + 3, -(2**63)]
    floats = [2.0**40 + 0.5, -(2.0**45) - 0.25, 2.0**52 + 1, 1e18, -3.5e30, 1e300]
    return (
        np.concatenate([ints, rng.integers(-(2**62), 2**62, 57)]).astype(np.int64),
        np.concatenate([floats, rng.uniform(-(2**52), 2**52, 26)]).astype(np.float64),
    )


def has_mpmath() -> bool:
    return importlib.util.find_spec("mpmath") is not None


def rope_cases(head_dim: int, thorough: bool) -> list[RopeCase]:
    """Both layouts; --thorough adds rope_theta 500000 and a partial rotary_dim."""
    rng = np.random.default_rng(SEED)
    n = 8 if thorough else 1
    ints = [*range(24), 2**24, 2**24 - 1, 10**6, 12345678, -(2**20)]
    fractions = [0.5, -3.25, 1000.125, 123456.5, *rng.uniform(-1000, 1000, 28 * n)]
    positions = (
        np.concatenate([ints, rng.integers(0, 2**24, 35 * n)]).astype(np.int64),
        np.array(fractions, dtype=np.float32),
    )
    inputs = tuple(
        (rng.uniform(-1, 1, (len(p), head_dim)).astype(np.float32), p) for p in positions
    )
    options: list[dict[str, Any]] = [{"base": 10000.0}]
    if thorough:
        options.append({"base": 500000.0})
        if head_dim % 4 == 0:
            options.append({"base": 10000.0, "rotary_dim": head_dim // 2})
    shifts = np.array([1, -1, 17, -1000, 65537, 2**22 - 1], dtype=np.int64)
    return [
        RopeCase(head_dim, {"layout": layout, **option}, inputs, shifts)
        for layout in ("half", "interleaved")
        for option in options
    ]
