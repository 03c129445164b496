"""The argument types of ``pe-core``: positions, sizes, presets, bases and backends.

Each turns one command-line string into a value or raises
:class:`argparse.ArgumentTypeError` naming the bad text and what is allowed (argparse
prints it as a usage error, exit status 2).

>>> positions_arg("0:8:3").call, positions_arg("0:8:3").values.tolist()
('range(0, 8, 3)', [0, 3, 6])
>>> positions_arg("2.5,1e6").values.tolist()
[2.5, 1000000.0]
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pe_core.presets import PRESETS, resolve_spec
from pe_core.spec import Spec
from pe_core_backends import canonical_backend, installed_backends, is_installed

#: At most this many values are computed by ``pe-core encode``.
MAX_ENCODE_VALUES = 10**8

#: The presets of 1-D positions (the N-D ones, axes > 1, encode coordinates).
ONE_AXIS_PRESETS = [name for name in sorted(PRESETS) if PRESETS[name].axes == 1]


# -- positions ------------------------------------------------------------------------


def number(text: str) -> int | float:
    """``text`` as an ``int`` if it is one, else as a finite ``float``."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"positions must be finite. Received: {text!r}")
    return value


@dataclass(frozen=True)
class Positions:
    """Parsed ``--positions``: the array ``encode`` gets, and the call that gives it."""

    values: np.ndarray
    call: str  # how a Python caller would write them


def integers(values: Sequence[int]) -> np.ndarray:
    """int64, else uint64, else the Python ints themselves (an object array), which the
    library takes exactly or refuses saying what it takes: never float64, which would
    be other numbers."""
    for dtype in (np.int64, np.uint64):
        try:
            return np.array(values, dtype=dtype)
        except OverflowError:
            pass
    return np.array(list(values), dtype=object)


def positions_arg(text: str) -> Positions:
    """Parse ``a:b``, ``a:b:step``, ``p0,p1,...`` or a single number."""
    try:
        return parse_range(text) if ":" in text else parse_list(text)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"the range {text!r} is too large") from None


def parse_range(text: str) -> Positions:
    """``a:b`` or ``a:b:step``: integers as ``range``, else float64 as ``np.arange``."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"a range must be 'a:b' or 'a:b:step'. Received: {text!r}")
    start, stop, *rest = (number(p) for p in parts)
    step = rest[0] if rest else 1  # never 0
    if step == 0:
        raise argparse.ArgumentTypeError(f"the step of {text!r} must not be 0")
    count = math.ceil((stop - start) / step)  # checked to be 1 to MAX_ENCODE_VALUES
    if count <= 0:
        raise argparse.ArgumentTypeError(f"the range {text!r} holds no positions")
    if count > MAX_ENCODE_VALUES:
        raise argparse.ArgumentTypeError(f"the range {text!r} holds {count} positions; too many")
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        span = range(start, stop, step)  # int64 where it fits, else as integers() gives it
        if -(2**63) <= min(span[0], span[-1]) and max(span[0], span[-1]) < 2**63:
            # np.arange(..., dtype=np.int64) with a stop past int64 would wrap
            values: np.ndarray = np.arange(start, stop, step, dtype=np.int64)
        else:
            values = integers(span)
        bounds = f"{start}, {stop}" + (f", {step}" if step != 1 else "")
        call = f"range({bounds})"
    else:
        values = start + step * np.arange(count, dtype=np.float64)
        call = f"np.arange({start!r}, {stop!r}, {step!r})"
    return Positions(values, call)


def parse_list(text: str) -> Positions:
    """``p0,p1,...`` or a single number: int64 if all are integers, else float64."""
    items = text.split(",")
    if not all(p.strip() for p in items):
        raise argparse.ArgumentTypeError(
            f"positions must be numbers separated by commas. Received: {text!r}"
        )
    numbers = [number(p) for p in items]
    ints = [v for v in numbers if isinstance(v, int)]
    values = integers(ints) if len(ints) == len(numbers) else np.array(numbers, np.float64)
    call = repr(numbers[0]) if len(numbers) == 1 else f"[{', '.join(map(repr, numbers))}]"
    return Positions(values, call)


# -- sizes, presets, bases and backends ---------------------------------------------


def positive_int_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer. Received: {text!r}")
    return value


def dims_arg(text: str) -> tuple[int, ...]:
    return tuple(positive_int_arg(p) for p in text.split(","))


def preset_arg(text: str) -> Spec:
    try:
        spec = resolve_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if spec.axes > 1:
        raise argparse.ArgumentTypeError(
            f"preset {text!r} encodes {spec.axes}-D coordinates; the command line encodes "
            f"1-D positions. Expected one of: {', '.join(ONE_AXIS_PRESETS)}."
        )
    return spec


def presets_arg(text: str) -> tuple[Spec, ...]:
    return tuple(preset_arg(p.strip()) for p in text.split(","))


def bases_arg(text: str) -> tuple[float, ...]:
    values = []
    for part in text.split(","):
        value = number(part)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"a base must be a number > 0. Received: {part!r}")
        values.append(float(value))
    return tuple(values)


def backend_arg(text: str) -> str:
    try:
        return canonical_backend(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def backends_arg(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(backend_arg(p.strip()) for p in text.split(",")))
    missing = [name for name in names if not is_installed(name)]
    if missing:
        raise argparse.ArgumentTypeError(
            f"backend {missing[0]!r} is not installed: pip install 'pe-core[{missing[0]}]'. "
            f"Installed: {', '.join(installed_backends())}."
        )
    return names
