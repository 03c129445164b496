"""Running ``pe-core check``: each case on each backend, and each backend against NumPy.

Every check runs through :func:`pe_core.testing.run_check`, whose outcome (``PASS``,
``FAIL`` or ``ERROR``, the error measured, a one-line message) a :class:`Cell` of the
backend x property table collects over the cases. The compiled column runs under the
compilers the registry lists for the backend, each built by the backend itself
(:func:`compilers`). Progress goes to stderr (:class:`Progress`).
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pe_core._cli.check_cases import (
    ACROSS_ATOL,
    NEEDS_MPMATH,
    REFERENCE_BACKEND,
    EncodeCase,
    RopeCase,
)
from pe_core.testing.checks import CheckOutcome, check_cross_backend_agreement, run_check
from pe_core_backends import backend_info, get_namespace


@dataclass
class Cell:
    """The outcome of one property on one backend, over all its cases."""

    status: str = "PASS"  # PASS, FAIL, ERROR, SKIP or n/a
    error: float = 0.0
    notes: list[str] = field(default_factory=list)

    def run(self, where: str, body: Callable[[], float]) -> None:
        """Run one check (:func:`pe_core.testing.run_check`) and add its outcome."""
        self.add(where, run_check(body))

    def add(self, where: str, outcome: CheckOutcome) -> None:
        """A failure fails the cell, an error makes it an ERROR; either adds a note."""
        if outcome.status == "ERROR":
            self.status = "ERROR"
        else:
            self.error = max(self.error, outcome.error)
        if outcome.status == "FAIL" and self.status != "ERROR":
            self.status = "FAIL"
        if outcome.message:
            self.notes.append(f"{where}: {outcome.message}")

    def text(self) -> str:
        """What the table shows: ``PASS 3.0e-08``, ``FAIL 0.5``, ``ERROR``, ``SKIP``."""
        if self.status in ("SKIP", "n/a", "ERROR"):
            return self.status
        if self.error == 0 or not math.isfinite(self.error):
            return f"{self.status} {'0' if self.error == 0 else 'inf'}"
        return f"{self.status} {self.error:.1e}"


class Progress:
    """``pe-core check``'s progress on stderr: a line per backend and case, each
    property's name as it is done, and the seconds the line took."""

    def begin(self, text: str) -> None:
        sys.stdout.flush()
        self._start = time.perf_counter()
        print(text, end="", file=sys.stderr, flush=True)

    def step(self, name: str) -> None:
        print(f" {name}", end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        print(f" ({time.perf_counter() - self._start:.1f} s)", file=sys.stderr, flush=True)


def check_row(
    name: str,
    columns: dict[str, str],
    cases: Sequence[Any],
    compiled: Sequence[Any],
    progress: Progress,
) -> dict[str, Cell]:
    """One backend's row of a table: every case, then the compiled ones (``n/a`` for a
    backend the registry lists no compilers for)."""
    row = {column: Cell() for column in columns}
    for case in cases:  # every column's checks of the case
        progress.begin(f"checking {name} {case.label}:")
        for column, body in case.properties(name).items():
            if body is None:
                row[column].status = "SKIP"
                row[column].notes.append(NEEDS_MPMATH)
                continue
            row[column].run(case.label, body)
            progress.step(column)
        progress.end()
    compiles = bool(backend_info(name).compilers)
    if not compiles:
        row["compiled"].status = "n/a"
    elif not compiled:
        row["compiled"].status = "SKIP"
    for case in compiled if compiles else ():
        check_compiled_case(name, case, row["compiled"], progress)
    return row


def check_compiled_case(name: str, case: Any, cell: Cell, progress: Progress) -> None:
    """The case's agreement check on its function compiled by each of the backend's compilers."""
    progress.begin(f"checking {name} {case.label}: compiled with")
    for label, compiled in compilers(name, own_code(case.target)):

        def on_device(*arrays: np.ndarray, compiled: Any = compiled) -> Any:
            return compiled(*(native(name, a) for a in arrays))

        cell.run(f"{case.label} {label}", functools.partial(case.check_compiled, on_device))
        progress.step(label)
    progress.end()


def compilers(name: str, fn: Callable[..., Any]) -> list[tuple[str, Callable[..., Any]]]:
    """``fn`` under each compiler the registry lists for backend ``name``, in its order,
    each built by the backend (:meth:`pe_core_backends.Namespace.under_compiler`); none
    for NumPy. An unknown ``name`` is a ValueError naming the known backends."""
    labels = backend_info(name).compilers
    return [(label, get_namespace(name).under_compiler(label, fn)) for label in labels]


def own_code(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target`` behind a function with a code object of its own: torch.compile caches
    compilations per code object and, after a few, falls back to running eagerly."""

    def fn(*arrays: Any) -> Any:
        return target(*arrays)

    fn.__code__ = fn.__code__.replace()
    return fn


def native(name: str, values: np.ndarray) -> Any:
    """``values`` as the backend's own array (int32/float32: what every backend holds)."""
    kind = np.int32 if values.dtype.kind in "iu" else np.float32
    return get_namespace(name).asarray(values.astype(kind))


def check_across(
    backends: Sequence[str], cases: list[EncodeCase], rope_cases: list[RopeCase], progress: Progress
) -> dict[str, Cell]:
    """check_cross_backend_agreement: each backend against NumPy, on the first grids."""
    if len(backends) < 2:
        return {}
    names = [REFERENCE_BACKEND, *(b for b in backends if b != REFERENCE_BACKEND)]
    jobs: list[tuple[str, Any, tuple[np.ndarray, ...]]] = [
        ("encode", case, (grid,)) for case in cases for grid in case.small
    ]
    jobs += [("apply_rope", case, inputs) for case in rope_cases for inputs in case.inputs]
    cells = {"encode": Cell(), "apply_rope": Cell()}
    progress.begin(f"checking across backends ({', '.join(names)}):")
    for what, case, inputs in jobs:  # the case's target on each backend (its last argument)
        fn = functools.partial(case.target, *inputs)
        check = functools.partial(check_cross_backend_agreement, fn, names, atol=ACROSS_ATOL)
        cells[what].run(case.label, check)
    progress.step("encode apply_rope")
    progress.end()
    return cells
