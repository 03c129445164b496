"""``pe-core``, the command line: print or save an encoding, or check an installation.

``pe-core encode --positions 0:8 --dim 16`` prints the table (``--out FILE.npy``,
``FILE.csv`` or ``FILE.json`` saves it; ``--format`` chooses the format otherwise).
``pe-core check`` runs the checks of :mod:`pe_core.testing` (for ``encode``: agreement
with a float64 reference, exactness at large positions, boundedness, uniqueness, the
linear relation, ``shift``, the relative dot product, and compiled code; for
``apply_rope``: agreement, relative scores, norms; and every backend against NumPy) on
every installed backend and prints a backend x property table per function; the exit
status is 1 when anything fails.
``pe-core plot heatmap|similarity|distance|spectrum --out FILE.png`` draws a figure
(:mod:`pe_core.plots`; needs matplotlib: ``pip install 'pe-core[plot]'``).

The checks run on fixed grids with a fixed seed, not Hypothesis, so they are
deterministic and need no test dependencies (``mpmath`` only for the large-position
reference; that column is skipped without it); ``--thorough`` uses larger grids.
Exit status: 0 on success, 1 when a check fails or a file cannot be written, 2 for
bad arguments (values the library refuses included), with a one-line message and no
traceback; ``python -m pe_core`` is the same command.

>>> main(["encode", "--positions", "0:2", "--dim", "4"])
# pe_core.encode(pos=range(0, 2), d=4, spec='vaswani', backend='numpy', dtype='float32') -> shape (2, 4)
pos  features
  0  [ 0.0000  1.0000  0.0000  1.0000]
  1  [ 0.8415  0.5403  0.0100  0.9999]
0
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pe_core import __version__
from pe_core._schedule import check_d
from pe_core.encoding import encode
from pe_core.frequency import frequencies
from pe_core.presets import DEFAULT_PRESET, PRESETS, resolve_spec
from pe_core.relative import shift
from pe_core.rope import apply_rope
from pe_core.spec import Spec
from pe_core.testing.checks import (
    PropertyFailure,
    check_agreement,
    check_bounded,
    check_cross_backend_agreement,
    check_linear_relation,
    check_relative_dot,
    check_rope_agreement,
    check_rope_norm,
    check_rope_relative_scores,
    check_shift,
    check_uniqueness,
)
from pe_core.testing.references import exact_encoding, uniqueness_window
from pe_core_backends import (
    FLOAT_DTYPES,
    backend_info,
    backend_of,
    canonical_backend,
    get_namespace,
    installed_backends,
    is_installed,
)

__all__ = ["main"]

#: At most this many values are computed by ``pe-core encode``.
MAX_ENCODE_VALUES = 10**8

#: The presets of 1-D positions (the N-D ones, axes > 1, encode coordinates).
_ONE_AXIS_PRESETS = [name for name in sorted(PRESETS) if PRESETS[name].axes == 1]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pe-core`` with ``argv`` (``sys.argv[1:]`` by default); return the exit status.

    0: success; 1: ``check`` found a failing property, or an output file could not be
    written; 2: bad arguments, including values the library refuses. Errors are one
    line on stderr, ``pe-core COMMAND: error: ...``, without a traceback.

    Examples
    --------
    >>> main(["encode", "--positions", "3", "--dim", "2", "--spec", "whisper"])
    # pe_core.encode(pos=3, d=2, spec='whisper', backend='numpy', dtype='float32') -> shape (1, 2)
    pos  features
      3  [ 0.1411 -0.9900]
    0
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and on bad arguments (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        return args.run(args)
    except BrokenPipeError:  # `pe-core encode ... | head`: stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except _WriteError as exc:
        print(f"pe-core {args.command}: error: {exc}", file=sys.stderr)
        return 1
    # Bad combinations and values pe_core rejects (ValueError, TypeError), a missing
    # framework (ImportError), numbers beyond what NumPy holds (OverflowError).
    except (ValueError, TypeError, ImportError, OverflowError) as exc:
        print(f"pe-core {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pe-core {args.command}: interrupted", file=sys.stderr)
        return 130


class _WriteError(Exception):
    """An output file could not be written (exit status 1)."""


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return " ".join(lines) or type(exc).__name__


# -- argument parsing -----------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pe-core",
        description="Sinusoidal positional encodings, exact on NumPy, JAX, PyTorch and TensorFlow.",
    )
    parser.add_argument("--version", action="version", version=f"pe-core {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    enc = commands.add_parser(
        "encode",
        help="print or save the encoding of some positions",
        description="Print the encoding of POSITIONS (or save it with --out).",
    )
    enc.add_argument(
        "--positions",
        required=True,
        type=_positions_arg,
        help="'a:b' or 'a:b:step' (like range/arange), a comma list '0,5,2.5', or one "
        "number; write negative ones as --positions=-4:4",
    )
    enc.add_argument(
        "--dim", "-d", required=True, type=_positive_int_arg, help="number of features d"
    )
    enc.add_argument(
        "--spec",
        default=DEFAULT_PRESET,
        type=_preset_arg,
        help=f"preset name, one of: {', '.join(_ONE_AXIS_PRESETS)} (default: {DEFAULT_PRESET})",
    )
    enc.add_argument(
        "--backend",
        default="numpy",
        type=_backend_arg,
        help="numpy (default), jax, torch or tensorflow",
    )
    enc.add_argument(
        "--dtype",
        default="float32",
        choices=FLOAT_DTYPES,
        help="output dtype (default: float32)",
    )
    enc.add_argument(
        "--out",
        "-o",
        metavar="FILE",
        help="save the table (every value) instead of printing it; the format follows "
        "the extension: .npy (numpy.save), .csv (a 'pos' column, then one per feature), "
        ".json; bfloat16 is saved as float32",
    )
    enc.add_argument(
        "--format",
        "-f",
        choices=ENCODE_FORMATS,
        default=None,
        help="table (printed, the default without --out), csv or json (printed, or "
        "saved to --out), npy (needs --out); with --out, overrides its extension",
    )
    enc.set_defaults(run=_run_encode)

    chk = commands.add_parser(
        "check",
        help="run pe_core's property checks on every installed backend",
        description="Run the property checks on each backend and print a backend x property "
        "table. Exit status 1 when a check fails.",
    )
    chk.add_argument(
        "--backends",
        type=_backends_arg,
        default=None,
        help="comma list (default: every installed backend)",
    )
    chk.add_argument(
        "--dim",
        "-d",
        type=_dims_arg,
        default=None,
        help="comma list of feature counts, also RoPE's head_dim (default: 64; with "
        "--thorough 2,63,64,512); an odd d is checked on presets that zero-pad",
    )
    chk.add_argument(
        "--spec",
        type=_presets_arg,
        default=None,
        help="comma list of preset names (default: all)",
    )
    chk.add_argument(
        "--no-compiled",
        action="store_true",
        help="skip the compiled columns (jax.jit, torch.compile, tf.function)",
    )
    chk.add_argument(
        "--thorough",
        action="store_true",
        help="larger grids, positions up to 1e300, more RoPE configurations, and every "
        "case compiled (several minutes)",
    )
    chk.set_defaults(run=_run_check)

    plot = commands.add_parser(
        "plot",
        help="draw a figure of the encoding to a PNG (needs matplotlib)",
        description="Draw KIND and save it to --out: heatmap (positions x features), "
        "similarity (the position x position matrix), distance (similarity against "
        "distance for several d and bases), spectrum (the wavelength of every sin/cos "
        "pair). Needs matplotlib: pip install 'pe-core[plot]'.",
    )
    plot.add_argument("kind", choices=PLOT_KINDS, metavar="KIND", help=", ".join(PLOT_KINDS))
    plot.add_argument(
        "--dim",
        "-d",
        type=_dims_arg,
        default=None,
        help="number of features (default: 128; spectrum 512); distance takes a comma "
        "list (default: 16,64,256)",
    )
    plot.add_argument(
        "--len",
        "-n",
        dest="length",
        type=_positive_int_arg,
        default=None,
        help="number of positions (default: 100); for distance the largest distance (default: 200)",
    )
    plot.add_argument(
        "--spec",
        default=None,
        type=_preset_arg,
        help=f"preset name, one of: {', '.join(_ONE_AXIS_PRESETS)} (default: {DEFAULT_PRESET}; "
        "spectrum compares vaswani and tensor2tensor unless given)",
    )
    plot.add_argument(
        "--metric",
        default="cosine",
        choices=("cosine", "dot", "euclidean"),
        help="similarity and distance: what to draw (default: cosine)",
    )
    plot.add_argument(
        "--base",
        type=_bases_arg,
        default=None,
        help="distance: comma list of bases (default: 100,10000)",
    )
    plot.add_argument(
        "--dpi", type=_positive_int_arg, default=120, help="resolution (default: 120)"
    )
    plot.add_argument("--out", "-o", required=True, metavar="FILE.png", help="where to save")
    plot.set_defaults(run=_run_plot)
    return parser


def _number(text: str) -> int | float:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"positions must be finite. Received: {text!r}")
    return value


@dataclass(frozen=True)
class _Positions:
    text: str
    values: np.ndarray
    call: str  # how a Python caller would write them


def _integers(values: Sequence[int]) -> np.ndarray:
    """int64, or float64 beyond int64 (the library then says what range it takes)."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array([float(v) for v in values], dtype=np.float64)


def _positions_arg(text: str) -> _Positions:
    """Parse ``a:b``, ``a:b:step``, ``p0,p1,...`` or a single number."""
    try:
        return _parse_positions(text)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"the range {text!r} is too large") from None


def _parse_positions(text: str) -> _Positions:
    return _parse_range(text) if ":" in text else _parse_list(text)


def _parse_range(text: str) -> _Positions:
    """``a:b`` or ``a:b:step``: integers as ``range``, else float64 as ``np.arange``."""
    start, stop, step = _range_bounds(text)
    count = _range_count(text, start, stop, step)
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        values, call = _integer_range(start, stop, step)
    else:
        values = start + step * np.arange(count, dtype=np.float64)
        call = f"np.arange({start!r}, {stop!r}, {step!r})"
    return _Positions(text, values, call)


def _range_bounds(text: str) -> tuple[int | float, int | float, int | float]:
    """``(start, stop, step)`` of ``a:b`` or ``a:b:step`` (step 1 unless given, never 0)."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"a range must be 'a:b' or 'a:b:step'. Received: {text!r}")
    start, stop, *rest = (_number(p) for p in parts)
    step = rest[0] if rest else 1
    if step == 0:
        raise argparse.ArgumentTypeError(f"the step of {text!r} must not be 0")
    return start, stop, step


def _range_count(text: str, start: float, stop: float, step: float) -> int:
    """How many positions the range holds, checked to be 1 to ``MAX_ENCODE_VALUES``."""
    count = math.ceil((stop - start) / step)
    if count <= 0:
        raise argparse.ArgumentTypeError(f"the range {text!r} holds no positions")
    if count > MAX_ENCODE_VALUES:
        raise argparse.ArgumentTypeError(f"the range {text!r} holds {count} positions; too many")
    return count


def _integer_range(start: int, stop: int, step: int) -> tuple[np.ndarray, str]:
    """``range(start, stop, step)`` as int64 (float64 beyond int64), and how to write it."""
    try:
        values = np.arange(start, stop, step, dtype=np.int64)
    except OverflowError:
        values = _integers(range(start, stop, step))
    bounds = f"{start}, {stop}" + (f", {step}" if step != 1 else "")
    return values, f"range({bounds})"


def _parse_list(text: str) -> _Positions:
    """``p0,p1,...`` or a single number: int64 if all are integers, else float64."""
    items = [p for p in text.split(",")]
    if not all(p.strip() for p in items):
        raise argparse.ArgumentTypeError(
            f"positions must be numbers separated by commas. Received: {text!r}"
        )
    numbers = [_number(p) for p in items]
    ints = [v for v in numbers if isinstance(v, int)]
    values = _integers(ints) if len(ints) == len(numbers) else np.array(numbers, np.float64)
    call = repr(numbers[0]) if len(numbers) == 1 else f"[{', '.join(map(repr, numbers))}]"
    return _Positions(text, values, call)


def _positive_int_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer. Received: {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer. Received: {text!r}")
    return value


def _dims_arg(text: str) -> tuple[int, ...]:
    return tuple(_positive_int_arg(p) for p in text.split(","))


def _preset_arg(text: str) -> Spec:
    try:
        spec = resolve_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if spec.axes > 1:
        raise argparse.ArgumentTypeError(
            f"preset {text!r} encodes {spec.axes}-D coordinates; the command line encodes "
            f"1-D positions. Expected one of: {', '.join(_ONE_AXIS_PRESETS)}."
        )
    return spec


def _presets_arg(text: str) -> tuple[Spec, ...]:
    return tuple(_preset_arg(p.strip()) for p in text.split(","))


def _bases_arg(text: str) -> tuple[float, ...]:
    values = []
    for part in text.split(","):
        value = _number(part)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"a base must be a number > 0. Received: {part!r}")
        values.append(float(value))
    return tuple(values)


def _backend_arg(text: str) -> str:
    try:
        return canonical_backend(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _backends_arg(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(_backend_arg(p.strip()) for p in text.split(",")))
    missing = [name for name in names if not is_installed(name)]
    if missing:
        raise argparse.ArgumentTypeError(
            f"backend {missing[0]!r} is not installed: pip install 'pe-core[{missing[0]}]'. "
            f"Installed: {', '.join(installed_backends())}."
        )
    return names


# -- pe-core encode ---------------------------------------------------------------


#: What ``pe-core encode --format`` writes; ``table`` is the printed summary.
ENCODE_FORMATS: tuple[str, ...] = ("table", "csv", "json", "npy")

#: ``--out`` extension -> format.
_EXTENSIONS = {".npy": "npy", ".csv": "csv", ".json": "json"}


def _output_format(out: str | None, chosen: str | None) -> str:
    """The format of ``pe-core encode``: ``--format``, else ``--out``'s extension."""
    if out is None:
        if chosen == "npy":
            raise ValueError("--format npy writes a binary file: give --out FILE.npy.")
        return chosen or "table"
    if chosen == "table":
        raise ValueError(
            "--format table prints the summary; to save every value use csv, json or npy."
        )
    if chosen is not None:
        return chosen
    suffix = Path(out).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of --out {out!r} from its extension {suffix or '(none)'!r}. "
            f"Expected one of: {', '.join(_EXTENSIONS)}, or give --format csv|json|npy."
        )
    return _EXTENSIONS[suffix]


def _check_out_path(out: str) -> Path:
    """Refuse an ``--out`` that cannot be a file before computing anything."""
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out {out!r} is a folder. Expected a file name.")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"--out {out!r}: the folder {str(folder)!r} does not exist.")
    return path


def _run_encode(args: argparse.Namespace) -> int:
    spec: Spec = args.spec
    d = check_d(args.dim, spec)
    path = None if args.out is None else _check_out_path(args.out)
    fmt = _output_format(args.out, args.format)
    positions: np.ndarray = args.positions.values
    if positions.size * d > MAX_ENCODE_VALUES:
        raise ValueError(
            f"{positions.size} positions x d={d} is {positions.size * d} values; "
            f"the limit is {MAX_ENCODE_VALUES}."
        )
    xp = get_namespace(args.backend)
    table = xp.to_numpy(encode(positions, d, spec=spec, backend=args.backend, dtype=args.dtype))
    call = (
        f"pe_core.encode(pos={args.positions.call}, d={d}, spec={spec.name!r}, "
        f"backend={args.backend!r}, dtype={args.dtype!r})"
    )
    if fmt == "table":
        print(f"# {call} -> shape {table.shape}")
        _print_table(positions, table)
        return 0
    if table.dtype.name == "bfloat16":  # NumPy cannot read bfloat16 back: save float32
        table = table.astype(np.float32)
    if path is None:  # csv or json to stdout
        sys.stdout.write(_serialise(fmt, positions, table, call))
        return 0
    try:
        if fmt == "npy":
            with path.open("wb") as file:  # exactly this name (numpy.save would add .npy)
                np.save(file, table)
        else:
            path.write_text(_serialise(fmt, positions, table, call))
    except OSError as exc:
        raise _WriteError(f"could not write {str(path)!r}: {exc.strerror or exc}") from None
    print(f"saved {call}: shape {table.shape}, {table.dtype} -> {path} ({fmt})")
    return 0


def _shortest(values: np.ndarray) -> list[str]:
    """Each value as the shortest decimal that reads back to it in its own dtype."""
    return [np.format_float_positional(v, unique=True, trim="-") for v in values.reshape(-1)]


def _serialise(fmt: str, positions: np.ndarray, table: np.ndarray, call: str) -> str:
    labels = [_format_position(p) for p in positions]
    if fmt == "csv":
        header = ",".join(["pos"] + [f"f{i}" for i in range(table.shape[-1])])
        rows = [
            ",".join([label, *_shortest(row)]) for label, row in zip(labels, table, strict=True)
        ]
        return "\n".join([header, *rows]) + "\n"
    document = {
        "call": call,
        "dtype": table.dtype.name,
        "shape": list(table.shape),
        "pos": [p.item() for p in positions],
        "values": [[float(v) for v in _shortest(row)] for row in table],
    }
    return json.dumps(document) + "\n"


def _print_table(positions: np.ndarray, table: np.ndarray, max_rows: int = 50) -> None:
    labels = [_format_position(p) for p in positions]
    width = max(3, *(len(label) for label in labels))
    d = table.shape[-1]
    summarise = d > 16
    rows = list(range(len(labels)))
    if len(rows) > max_rows:
        rows = rows[:10] + [-1] + rows[-10:]
    print(f"{'pos':>{width}}  features")
    for i in rows:
        if i < 0:
            print(f"{'...':>{width}}")
            continue
        text = np.array2string(
            table[i].astype(np.float64),
            precision=4,
            floatmode="fixed",
            suppress_small=True,
            sign=" ",
            max_line_width=10**6,
            threshold=16 if summarise else 10**6,
            edgeitems=4,
        )
        print(f"{labels[i]:>{width}}  {text}")
    notes = []
    if summarise:
        notes.append(f"the first and last 4 of {d} features")
    if len(rows) < len(labels):
        notes.append(f"the first and last 10 of {len(labels)} positions")
    if notes:
        print(f"# showing {' and '.join(notes)}; --out FILE.npy saves everything")


def _format_position(value: Any) -> str:
    return str(value.item())


# -- pe-core plot -----------------------------------------------------------------


def _draw_heatmap(plots: Any, args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    d, length = dims[0], args.length or 100
    return plots.plot_heatmap(d, length, args.spec), f"d={d}, len={length}"


def _draw_similarity(
    plots: Any, args: argparse.Namespace, dims: tuple[int, ...]
) -> tuple[Any, str]:
    d, length = dims[0], args.length or 100
    fig = plots.plot_similarity(d, length, args.spec, metric=args.metric)
    return fig, f"d={d}, len={length}, metric={args.metric}"


def _draw_distance(plots: Any, args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    bases = args.base or (100.0, 10000.0)
    length = args.length or 200
    fig = plots.plot_similarity_by_distance(
        dims, bases, max_distance=length, spec=args.spec, metric=args.metric
    )
    what = (
        f"d={','.join(map(str, dims))}, base={','.join(f'{b:g}' for b in bases)}, "
        f"max distance={length}, metric={args.metric}"
    )
    return fig, what


def _draw_spectrum(plots: Any, args: argparse.Namespace, dims: tuple[int, ...]) -> tuple[Any, str]:
    d = dims[0]
    return plots.plot_spectrum(d, None if args.spec is None else [args.spec]), f"d={d}"


@dataclass(frozen=True)
class _PlotKind:
    """One figure of ``pe-core plot``: how to draw it and which options it takes."""

    #: ``draw(pe_core.plots, args, dims) -> (figure, what was drawn)``.
    draw: Callable[[Any, argparse.Namespace, tuple[int, ...]], tuple[Any, str]]
    dims: tuple[int, ...]  # --dim when not given
    spec: str  # what the figure shows without --spec
    several_dims: bool = False  # --dim may list several
    bases: bool = False  # takes --base
    positions: bool = True  # takes --len


#: The figures ``pe-core plot`` draws, by name.
_PLOTS: dict[str, _PlotKind] = {
    "heatmap": _PlotKind(_draw_heatmap, (128,), DEFAULT_PRESET),
    "similarity": _PlotKind(_draw_similarity, (128,), DEFAULT_PRESET),
    "distance": _PlotKind(
        _draw_distance, (16, 64, 256), DEFAULT_PRESET, several_dims=True, bases=True
    ),
    "spectrum": _PlotKind(_draw_spectrum, (512,), "vaswani, tensor2tensor", positions=False),
}

#: The figures ``pe-core plot`` draws.
PLOT_KINDS: tuple[str, ...] = tuple(_PLOTS)


def _run_plot(args: argparse.Namespace) -> int:
    from pe_core import plots  # matplotlib itself is imported when a figure is made

    kind: str = args.kind
    plot = _PLOTS[kind]
    _check_out_path(args.out)
    _check_plot_options(kind, plot, args)
    fig, what = plot.draw(plots, args, args.dim or plot.dims)
    spec_name = args.spec.name if args.spec is not None else plot.spec
    try:
        fig.savefig(args.out, dpi=args.dpi)
    except OSError as exc:
        raise _WriteError(f"could not write {args.out!r}: {exc.strerror or exc}") from None
    print(f"saved {kind} ({what}, spec={spec_name}) -> {args.out}")
    return 0


def _check_plot_options(kind: str, plot: _PlotKind, args: argparse.Namespace) -> None:
    """Refuse the options figure ``kind`` does not take."""
    dims: tuple[int, ...] | None = args.dim
    if args.base is not None and not plot.bases:
        raise ValueError(f"--base applies to the distance plot only. Received: {kind}")
    if args.length is not None and not plot.positions:
        raise ValueError(f"--len does not apply to the {kind} plot (it has no positions).")
    if not plot.several_dims and dims is not None and len(dims) != 1:
        raise ValueError(f"{kind} takes one --dim. Received: {','.join(map(str, dims))}")


# -- pe-core check ----------------------------------------------------------------
#
# The properties are pe_core.testing's checks; this section only chooses fixed grids,
# runs each check on each backend and prints the outcome.

#: Allowed error per value (float32 output); each check scales it as documented.
ATOL = 1e-6
#: Allowed difference between backends: a few float32 ulps (values up to sqrt(2)).
ACROSS_ATOL = 5e-7
#: One seed for every grid: every run checks the same values.
_SEED = 20240607

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

_NEEDS_MPMATH = "needs mpmath: pip install 'pe-core[test]'"


@dataclass
class _Cell:
    """The outcome of one property on one backend, over all its cases."""

    status: str = "PASS"  # PASS, FAIL, ERROR, SKIP or n/a
    error: float = 0.0
    notes: list[str] = field(default_factory=list)

    def run(self, where: str, body: Callable[[], float]) -> None:
        """Run one check: a PropertyFailure fails the cell, another exception is an ERROR."""
        try:
            self.error = max(self.error, body())
        except PropertyFailure as failure:
            self.error = max(self.error, failure.error)
            self.status = "FAIL" if self.status != "ERROR" else self.status
            worst = f"; worst: {failure.worst}" if failure.worst else ""
            self.notes.append(
                f"{where}: error {failure.error:.3g} > tolerance {failure.tolerance:g}{worst}"
            )
        except Exception as exc:
            self.status = "ERROR"
            self.notes.append(f"{where}: {type(exc).__name__}: {_one_line(exc)}")

    def text(self) -> str:
        if self.status in ("SKIP", "n/a", "ERROR"):
            return self.status
        if self.error == 0 or not math.isfinite(self.error):
            return f"{self.status} {'0' if self.error == 0 else 'inf'}"
        return f"{self.status} {self.error:.1e}"


@dataclass(frozen=True)
class _EncodeCase:
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
            return _typed(encode(positions, d, spec=spec, backend=name), name, "encode")

        def moved(encoding: Any, k: Any) -> Any:
            return shift(encoding, k, spec)

        def exact() -> float:
            pairs = zip(self.large + self.huge, self.exact or (), strict=True)
            return max(check_agreement(fn, spec, d, g, ATOL, reference=e) for g, e in pairs)

        ps = self.p
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

    def target(self, positions: Any) -> Any:
        """What the compilers compile."""
        return encode(positions, self.d, spec=self.spec)

    def check_compiled(self, compiled: Callable[..., Any]) -> float:
        """Both grids joined (one compilation per dtype), against the float64 reference."""
        grids = (np.concatenate(pair) for pair in zip(self.small, self.large, strict=True))

        def fn(positions: np.ndarray, d: int) -> Any:
            return compiled(positions)

        return max(check_agreement(fn, self.spec, self.d, g, ATOL) for g in grids)


@dataclass(frozen=True)
class _RopeCase:
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
        def fn(x: np.ndarray, positions: np.ndarray) -> Any:
            out = apply_rope(x, positions, backend=name, **self.options)
            return _typed(out, name, "apply_rope")

        q, m = self.inputs[0]  # the keys: the same vectors and positions, reversed
        return {
            "agreement": lambda: self.agreement(fn),
            "relative": lambda: check_rope_relative_scores(
                fn, q, q[::-1], m, m[::-1], self.shifts, atol=ATOL
            ),
            "norm": lambda: max(check_rope_norm(fn, x, p, atol=ATOL) for x, p in self.inputs),
        }

    def target(self, x: Any, positions: Any) -> Any:
        return apply_rope(x, positions, **self.options)

    def agreement(self, fn: Callable[..., Any]) -> float:
        return max(
            check_rope_agreement(fn, x, p, atol=ATOL, **self.options) for x, p in self.inputs
        )

    check_compiled = agreement  # the same inputs, compiled


@contextlib.contextmanager
def _quiet_frameworks() -> Iterator[None]:
    """Keep the frameworks' log lines out of ``pe-core check``'s output, for its run only.

    TensorFlow's C++ logging reads ``TF_CPP_MIN_LOG_LEVEL`` when it first logs, so the
    variable is set before the check imports TensorFlow (a value the caller set is
    kept); its Python logger and JAX's drop below ERROR, and the frameworks' Python
    warnings are ignored. Everything is restored afterwards.
    """
    saved_env = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    loggers = [logging.getLogger(name) for name in ("tensorflow", "jax", "absl")]
    saved_levels = [logger.level for logger in loggers]
    if saved_env is None:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"  # errors only
    for logger in loggers:
        logger.setLevel(max(logger.level, logging.ERROR))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"(tensorflow|keras|jax|flax|torch)\b")
            yield
    finally:
        if saved_env is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        for logger, level in zip(loggers, saved_levels, strict=True):
            logger.setLevel(level)


class _Progress:
    """``pe-core check``'s progress on stderr: a line per backend and case, each
    property's name as it is done, and the seconds the line took."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def begin(self, text: str) -> None:
        sys.stdout.flush()
        self._start = time.perf_counter()
        print(text, end="", file=sys.stderr, flush=True)

    def step(self, name: str) -> None:
        print(f" {name}", end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        print(f" ({time.perf_counter() - self._start:.1f} s)", file=sys.stderr, flush=True)


def _run_check(args: argparse.Namespace) -> int:
    with _quiet_frameworks():
        return _check(args)


def _check(args: argparse.Namespace) -> int:
    backends = args.backends or installed_backends()
    cases, rope_cases = _plan(args, backends)
    rope_compiled = _compiled_cases(rope_cases, args) if args.thorough else []
    work: dict[str, tuple[dict[str, str], Sequence[Any], Sequence[Any]]] = {
        "encode": (COLUMNS, cases, _compiled_cases(cases, args)),
        "apply_rope": (ROPE_COLUMNS, rope_cases, rope_compiled),
    }
    tables: dict[str, dict[str, dict[str, _Cell]]] = {title: {} for title in work}
    progress = _Progress()
    for name in backends:
        _import_backend(name, progress)
        for title, (columns, todo, compiled) in work.items():
            tables[title][name] = _check_row(name, columns, todo, compiled, progress)
    across = _check_across(backends, cases, rope_cases, progress)
    return _report(backends, tables, across)


# -- what to check --------------------------------------------------------------------


def _plan(
    args: argparse.Namespace, backends: Sequence[str]
) -> tuple[list[_EncodeCase], list[_RopeCase]]:
    """The cases of ``args`` (printed, with what is skipped)."""
    specs = args.spec or tuple(PRESETS[name] for name in _ONE_AXIS_PRESETS)
    dims = args.dim or ((64, 2, 63, 512) if args.thorough else (64,))
    cases, skipped = _encode_plan(specs, dims, args.thorough)
    rope_cases, rope_skipped = _rope_plan(dims, args.thorough)
    skipped += rope_skipped
    if not cases and not rope_cases:
        raise ValueError(f"nothing to check: every combination was skipped: {', '.join(skipped)}")
    _print_plan(cases, rope_cases, skipped, backends, args.thorough)
    return cases, rope_cases


def _encode_plan(
    specs: Sequence[Spec], dims: Sequence[int], thorough: bool
) -> tuple[list[_EncodeCase], list[str]]:
    """The ``encode`` case of every (spec, d), and those skipped (odd d the spec refuses)."""
    cases, skipped = [], []
    for spec in specs:
        for d in dims:
            if d % 2 and spec.odd_d == "raise":
                skipped.append(f"{spec.name} d={d} (odd d needs odd_d='zero_pad')")
            else:
                cases.append(_encode_case(spec, check_d(d, spec), thorough))
    return cases, skipped


def _rope_plan(dims: Sequence[int], thorough: bool) -> tuple[list[_RopeCase], list[str]]:
    """The ``apply_rope`` cases of every even head_dim, and the odd ones skipped."""
    cases: list[_RopeCase] = []
    skipped = []
    for d in dims:
        if d % 2:
            skipped.append(f"rope head_dim={d} (RoPE rotates pairs: head_dim must be even)")
        else:
            cases += _rope_cases(d, thorough)
    return cases, skipped


def _print_plan(
    cases: list[_EncodeCase],
    rope_cases: list[_RopeCase],
    skipped: list[str],
    backends: Sequence[str],
    thorough: bool,
) -> None:
    names = ", ".join(sorted({c.spec.name or "?" for c in cases}))
    print(
        f"pe-core check: {len(cases)} case(s) ({names}; d in {_distinct(c.d for c in cases)}), "
        f"float32 output, backends: {', '.join(backends)}"
    )
    layouts = _distinct(c.options["layout"] for c in rope_cases)
    head_dims = _distinct(c.head_dim for c in rope_cases)
    print(f"apply_rope: {len(rope_cases)} case(s) (layouts {layouts}; head_dim in {head_dims})")
    if thorough:
        print("thorough: larger grids, positions to 1e300, more cases compiled")
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")


def _distinct(values: Iterable[Any]) -> str:
    return ", ".join(str(value) for value in dict.fromkeys(values))


def _encode_case(spec: Spec, d: int, thorough: bool) -> _EncodeCase:
    rng = np.random.default_rng(_SEED)
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
    huge = _huge_positions(rng) if thorough else ()
    exact = None
    if _has_mpmath():  # beyond 2**24, the library's own float64 frequencies (exact_encoding)
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
    return _EncodeCase(spec, d, small, large, huge, exact, unique, p, k)


def _huge_positions(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Host positions far beyond 2**24: int64 to 2**63, float64 to 1e300."""
    ints = [2**31, 2**31 - 1, -(2**31) - 5, 2**40 + 7, -(2**53) + 1, 2**62 + 3, -(2**63)]
    floats = [2.0**40 + 0.5, -(2.0**45) - 0.25, 2.0**52 + 1, 1e18, -3.5e30, 1e300]
    return (
        np.concatenate([ints, rng.integers(-(2**62), 2**62, 57)]).astype(np.int64),
        np.concatenate([floats, rng.uniform(-(2**52), 2**52, 26)]).astype(np.float64),
    )


def _has_mpmath() -> bool:
    return importlib.util.find_spec("mpmath") is not None


def _rope_cases(head_dim: int, thorough: bool) -> list[_RopeCase]:
    """Both layouts; --thorough adds rope_theta 500000 and a partial rotary_dim."""
    rng = np.random.default_rng(_SEED)
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
        _RopeCase(head_dim, {"layout": layout, **option}, inputs, shifts)
        for layout in ("half", "interleaved")
        for option in options
    ]


def _compiled_cases(cases: Sequence[Any], args: argparse.Namespace) -> Sequence[Any]:
    """The first case; --thorough: every variant at the first size and the first variant
    at every size (every spec at the first d, the first spec at every d)."""
    if not cases or args.no_compiled:
        return []
    if not args.thorough:
        return cases[:1]
    variant, size = cases[0].variant
    return [c for c in cases if c.variant[0] == variant or c.variant[1] == size]


# -- running the checks ---------------------------------------------------------------


def _import_backend(name: str, progress: _Progress) -> None:
    progress.begin(f"checking {name}: importing")
    try:
        get_namespace(name)
    finally:
        progress.end()


def _typed(out: Any, name: str, what: str) -> Any:
    """``out`` if it is a float32 array of backend ``name``; a TypeError otherwise."""
    if backend_of(out) != name:
        raise TypeError(f"{what} returned a {type(out).__name__}, not a {name} array")
    dtype = get_namespace(name).dtype_of(out)
    if dtype != "float32":
        raise TypeError(f"{what} returned {name} {dtype}, not float32")
    return out


def _check_row(
    name: str,
    columns: dict[str, str],
    cases: Sequence[Any],
    compiled: Sequence[Any],
    progress: _Progress,
) -> dict[str, _Cell]:
    """One backend's row of a table: every case, then the compiled ones."""
    row = {column: _Cell() for column in columns}
    for case in cases:
        _check_case(name, case, row, progress)
    if name == "numpy":
        row["compiled"].status = "n/a"
    elif not compiled:
        row["compiled"].status = "SKIP"
    for case in compiled if name != "numpy" else ():
        _check_compiled(name, case, row["compiled"], progress)
    return row


def _check_case(name: str, case: Any, row: dict[str, _Cell], progress: _Progress) -> None:
    progress.begin(f"checking {name} {case.label}:")
    for column, body in case.properties(name).items():
        if body is None:
            row[column].status = "SKIP"
            row[column].notes.append(_NEEDS_MPMATH)
            continue
        row[column].run(case.label, body)
        progress.step(column)
    progress.end()


def _check_compiled(name: str, case: Any, cell: _Cell, progress: _Progress) -> None:
    """The case's agreement check on its function compiled by each of the backend's compilers."""
    progress.begin(f"checking {name} {case.label}: compiled with")
    for label, compiled in _compilers(name, _own_code(case.target)):

        def on_device(*arrays: np.ndarray, compiled: Any = compiled) -> Any:
            return compiled(*(_native(name, a) for a in arrays))

        cell.run(f"{case.label} {label}", functools.partial(case.check_compiled, on_device))
        progress.step(label)
    progress.end()


def _own_code(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target`` behind a function with a code object of its own: torch.compile caches
    compilations per code object and, after a few, falls back to running eagerly."""

    def fn(*arrays: Any) -> Any:
        return target(*arrays)

    fn.__code__ = fn.__code__.replace()
    return fn


def _native(name: str, values: np.ndarray) -> Any:
    """``values`` as the backend's own array (int32/float32: what every backend holds)."""
    kind = np.int32 if values.dtype.kind in "iu" else np.float32
    return get_namespace(name).asarray(values.astype(kind))


def _compilers(name: str, fn: Callable[..., Any]) -> list[tuple[str, Callable[..., Any]]]:
    """``fn`` under each compiler the registry lists for backend ``name``, in its order
    (none for NumPy); an unknown ``name`` is a ValueError naming the known backends."""
    compiled: list[tuple[str, Callable[..., Any]]] = []
    for label in backend_info(name).compilers:
        if label == "jax.jit":
            import jax

            compiled.append((label, jax.jit(fn)))
        elif label == "torch.compile":
            import torch

            compiled.append((label, torch.compile(fn, fullgraph=True, dynamic=False)))
        elif label == "tf.function":
            import tensorflow as tf

            compiled.append((label, tf.function(fn, jit_compile=False, reduce_retracing=True)))
        elif label == "tf.function(jit_compile=True)":
            import tensorflow as tf

            compiled.append((label, tf.function(fn, jit_compile=True)))
        else:
            raise ValueError(
                f"pe-core check cannot build compiler {label!r} of backend {name!r}. "
                "Expected one of: jax.jit, torch.compile, tf.function, "
                "tf.function(jit_compile=True)."
            )
    return compiled


def _check_across(
    backends: Sequence[str],
    cases: list[_EncodeCase],
    rope_cases: list[_RopeCase],
    progress: _Progress,
) -> dict[str, _Cell]:
    """check_cross_backend_agreement: each backend against NumPy, on the first grids."""
    if len(backends) < 2:
        return {}
    names = ["numpy", *(b for b in backends if b != "numpy")]
    jobs = [
        ("encode", case.label, functools.partial(_encode_on, grid, case))
        for case in cases
        for grid in case.small
    ]
    jobs += [
        ("apply_rope", case.label, functools.partial(_rope_on, x, p, case))
        for case in rope_cases
        for x, p in case.inputs
    ]
    cells = {"encode": _Cell(), "apply_rope": _Cell()}
    progress.begin(f"checking across backends ({', '.join(names)}):")
    for what, where, fn in jobs:
        check = functools.partial(check_cross_backend_agreement, fn, names, atol=ACROSS_ATOL)
        cells[what].run(where, check)
    progress.step("encode apply_rope")
    progress.end()
    return cells


def _encode_on(grid: np.ndarray, case: _EncodeCase, backend: str) -> Any:
    return encode(grid, case.d, spec=case.spec, backend=backend)


def _rope_on(x: np.ndarray, positions: np.ndarray, case: _RopeCase, backend: str) -> Any:
    return apply_rope(x, positions, backend=backend, **case.options)


# -- the report -----------------------------------------------------------------------


def _print_check_table(
    title: str, rows: dict[str, dict[str, _Cell]], columns: dict[str, str]
) -> None:
    width = max(len("backend"), *(len(name) for name in rows)) + 2
    cells = {b: {c: row[c].text() for c in columns} for b, row in rows.items()}
    col_width = {c: max(len(c), *(len(cells[b][c]) for b in cells)) + 2 for c in columns}
    print(f"\n{title}")
    print("backend".ljust(width) + "".join(c.ljust(col_width[c]) for c in columns).rstrip())
    for backend, row in cells.items():
        print(
            (backend.ljust(width) + "".join(row[c].ljust(col_width[c]) for c in columns)).rstrip()
        )
    print()
    for column, meaning in columns.items():
        print(f"  {column:<10} {meaning}")


def _report(
    backends: Sequence[str],
    tables: dict[str, dict[str, dict[str, _Cell]]],
    across: dict[str, _Cell],
) -> int:
    """Print the tables, the line across backends and the failures; the exit status."""
    _print_check_table("pe_core.encode", tables["encode"], COLUMNS)
    _print_check_table("pe_core.apply_rope", tables["apply_rope"], ROPE_COLUMNS)
    _print_across(backends, across)
    named = _named_cells(tables, across)
    return _print_failures(
        {where: c for where, c in named.items() if c.status in ("FAIL", "ERROR")}
    )


def _print_across(backends: Sequence[str], across: dict[str, _Cell]) -> None:
    if not across:
        print("\nacross backends: n/a (one backend checked)")
        return
    others = ", ".join(b for b in backends if b != "numpy")
    cells = ", ".join(f"{what} {cell.text()}" for what, cell in across.items())
    what = f"check_cross_backend_agreement, {others} vs numpy, tol {ACROSS_ATOL:g}"
    print(f"\nacross backends ({what}): {cells}")


def _named_cells(
    tables: dict[str, dict[str, dict[str, _Cell]]], across: dict[str, _Cell]
) -> dict[str, _Cell]:
    """Every cell under the name a failure is reported by: ``"torch rope norm"``."""
    named: dict[str, _Cell] = {}
    for title, rows in tables.items():
        prefix = " rope" if title == "apply_rope" else ""
        named |= {f"{b}{prefix} {c}": cell for b, row in rows.items() for c, cell in row.items()}
    named |= {f"across backends {what}": cell for what, cell in across.items()}
    return named


def _print_failures(failures: dict[str, _Cell]) -> int:
    if not failures:
        print("\nall checks passed")
        return 0
    print(f"\n{len(failures)} check(s) failed:")
    for where, cell in failures.items():
        for note in cell.notes[:5]:
            print(f"  {where}: {note}")
        if len(cell.notes) > 5:
            print(f"  {where}: ... and {len(cell.notes) - 5} more")
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
