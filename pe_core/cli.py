"""``pe-core``, the command line: print or save an encoding, or check an installation.

``pe-core encode --positions 0:8 --dim 16`` prints the table (``--out FILE.npy``,
``FILE.csv`` or ``FILE.json`` saves it; ``--format`` chooses the format otherwise).
``pe-core check`` runs the properties pe_core promises (agreement with a float64
reference, exactness at large positions, boundedness, uniqueness, the linear relation,
``shift``, the relative dot product, and compiled code) on every installed backend and
prints a backend x property table; the exit status is 1 when anything fails.
``pe-core plot heatmap|similarity|distance|spectrum --out FILE.png`` draws a figure
(:mod:`pe_core.plots`; needs matplotlib: ``pip install 'pe-core[plot]'``).

The checks use fixed grids and a fixed seed, not Hypothesis, so they are
deterministic and need no test dependencies (``mpmath`` only for the large-position
reference; that column is skipped without it). Exit status: 0 on success, 1 when a
check fails or a file cannot be written, 2 for bad arguments (values the library
refuses included), with a one-line message and no traceback; ``python -m pe_core``
is the same command.

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
import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pe_core import __version__
from pe_core.encoding import encode
from pe_core.frequency import check_d, frequencies
from pe_core.presets import DEFAULT_PRESET, PRESETS, resolve_spec
from pe_core.relative import relative_matrix, shift
from pe_core.spec import Spec
from pe_core_backends import (
    FLOAT_DTYPES,
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
        default=(64,),
        help="comma list of feature counts (default: 64); an odd d is checked on presets "
        "that zero-pad",
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
        help="skip the compiled column (jax.jit, torch.compile, tf.function)",
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
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
            raise argparse.ArgumentTypeError(
                f"a range must be 'a:b' or 'a:b:step'. Received: {text!r}"
            )
        start, stop, *rest = (_number(p) for p in parts)
        step = rest[0] if rest else 1
        if step == 0:
            raise argparse.ArgumentTypeError(f"the step of {text!r} must not be 0")
        count = math.ceil((stop - start) / step)
        if count <= 0:
            raise argparse.ArgumentTypeError(f"the range {text!r} holds no positions")
        if count > MAX_ENCODE_VALUES:
            raise argparse.ArgumentTypeError(
                f"the range {text!r} holds {count} positions; too many"
            )
        if all(isinstance(v, int) for v in (start, stop, step)):
            try:
                values = np.arange(start, stop, step, dtype=np.int64)
            except OverflowError:
                values = _integers(range(start, stop, step))
            bounds = f"{start}, {stop}" + (f", {step}" if step != 1 else "")
            call = f"range({bounds})"
        else:
            values = start + step * np.arange(count, dtype=np.float64)
            call = f"np.arange({start!r}, {stop!r}, {step!r})"
        return _Positions(text, values, call)
    else:
        items = [p for p in text.split(",")]
        if not all(p.strip() for p in items):
            raise argparse.ArgumentTypeError(
                f"positions must be numbers separated by commas. Received: {text!r}"
            )
        numbers = [_number(p) for p in items]
        if all(isinstance(v, int) for v in numbers):
            values = _integers(numbers)
        else:
            values = np.array(numbers, dtype=np.float64)
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

#: The figures ``pe-core plot`` draws.
PLOT_KINDS: tuple[str, ...] = ("heatmap", "similarity", "distance", "spectrum")


def _run_plot(args: argparse.Namespace) -> int:
    from pe_core import plots  # matplotlib itself is imported when a figure is made

    kind: str = args.kind
    dims: tuple[int, ...] | None = args.dim
    spec: Spec | None = args.spec
    _check_out_path(args.out)
    if args.base is not None and kind != "distance":
        raise ValueError(f"--base applies to the distance plot only. Received: {kind}")
    if args.length is not None and kind == "spectrum":
        raise ValueError("--len does not apply to the spectrum plot (it has no positions).")
    if kind != "distance" and dims is not None and len(dims) != 1:
        raise ValueError(f"{kind} takes one --dim. Received: {','.join(map(str, dims))}")
    if kind == "heatmap":
        d, length = (dims or (128,))[0], args.length or 100
        fig = plots.plot_heatmap(d, length, spec)
        what = f"d={d}, len={length}"
    elif kind == "similarity":
        d, length = (dims or (128,))[0], args.length or 100
        fig = plots.plot_similarity(d, length, spec, metric=args.metric)
        what = f"d={d}, len={length}, metric={args.metric}"
    elif kind == "distance":
        dims = dims or (16, 64, 256)
        bases = args.base or (100.0, 10000.0)
        length = args.length or 200
        fig = plots.plot_similarity_by_distance(
            dims, bases, max_distance=length, spec=spec, metric=args.metric
        )
        what = (
            f"d={','.join(map(str, dims))}, base={','.join(f'{b:g}' for b in bases)}, "
            f"max distance={length}, metric={args.metric}"
        )
    else:
        d = (dims or (512,))[0]
        fig = plots.plot_spectrum(d, None if spec is None else [spec])
        what = f"d={d}"
    spec_name = (
        spec.name
        if spec is not None
        else ("vaswani, tensor2tensor" if kind == "spectrum" else DEFAULT_PRESET)
    )
    try:
        fig.savefig(args.out, dpi=args.dpi)
    except OSError as exc:
        raise _WriteError(f"could not write {args.out!r}: {exc.strerror or exc}") from None
    print(f"saved {kind} ({what}, spec={spec_name}) -> {args.out}")
    return 0


# -- pe-core check ----------------------------------------------------------------

#: Column name -> what its number is, and the tolerance (float32 output). The dot
#: product sums d products, so its tolerance is multiplied by sqrt(d).
COLUMNS: dict[str, tuple[str, float]] = {
    "agreement": (
        "max |error| vs a float64 NumPy reference; positions 0..255 and fractional |p| < 1000",
        1e-6,
    ),
    "large": (
        "max |error| vs mpmath; positions up to 2**24, negative and fractional ones too",
        1e-6,
    ),
    "bounded": ("how far any value of the first two columns leaves [-1, 1]", 0.0),
    "unique": (
        "how far the closest pair of 256 integer positions in [0, N) falls short of "
        "2*sin(w_min/2), N = floor(2*pi/w_min)",
        1e-6,
    ),
    "linear": (
        "max |PE(p+k) - relative_matrix(k) @ PE(p)|, |k| < 2**22, integer and fractional p",
        2e-6,
    ),
    "shift": ("max |shift(PE(p), k) - PE(p+k)|, same grid (same backend and dtype too)", 2e-6),
    "rel-dot": ("max |PE(p)·PE(p+k) - sum_i cos(k*w_i)|, same grid", 2e-6),
    "compiled": (
        "max |error| vs mpmath under jax.jit / torch.compile / tf.function (also XLA), "
        "first spec and d only",
        1e-6,
    ),
}


@dataclass
class _Cell:
    """The outcome of one property on one backend, over all (spec, d) cases."""

    status: str = "PASS"  # PASS, FAIL, ERROR, SKIP or n/a
    error: float = 0.0
    notes: list[str] = field(default_factory=list)

    def record(self, error: float, tolerance: float, where: str) -> None:
        error = float(error) if math.isfinite(error) else math.inf
        self.error = max(self.error, error)
        if not error <= tolerance:
            self.status = "FAIL" if self.status != "ERROR" else self.status
            self.notes.append(f"{where}: error {error:.3g} > tolerance {tolerance:g}")

    def crash(self, exc: BaseException, where: str) -> None:
        self.status = "ERROR"
        self.notes.append(f"{where}: {type(exc).__name__}: {exc}")

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "ERROR")

    def text(self) -> str:
        if self.status in ("SKIP", "n/a"):
            return self.status
        if self.status == "ERROR":
            return "ERROR"
        return f"{self.status} {_short(self.error)}"


def _short(value: float) -> str:
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return "inf"
    return f"{value:.1e}"


@dataclass(frozen=True)
class _Case:
    """One (spec, d) with its grids and backend-independent references."""

    spec: Spec
    d: int
    small: tuple[np.ndarray, ...]
    small_ref: tuple[np.ndarray, ...]
    large: tuple[np.ndarray, ...]
    large_ref: tuple[np.ndarray, ...] | None
    unique: np.ndarray
    bound: float
    p: tuple[np.ndarray, ...]
    k: np.ndarray
    dot_ref: np.ndarray

    @property
    def label(self) -> str:
        return f"spec={self.spec.name} d={self.d}"


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
    specs = args.spec or tuple(PRESETS[name] for name in _ONE_AXIS_PRESETS)
    cases, skipped = [], []
    for spec in specs:
        for d in args.dim:
            if d % 2 and spec.odd_d == "raise":
                skipped.append(f"{spec.name} d={d} (odd d needs odd_d='zero_pad')")
                continue
            cases.append(_make_case(spec, check_d(d, spec)))
    if not cases:
        raise ValueError(f"nothing to check: every combination was skipped: {', '.join(skipped)}")
    print(
        f"pe-core check: {len(cases)} case(s) "
        f"({', '.join(sorted({c.spec.name or '?' for c in cases}))}; d in "
        f"{', '.join(str(d) for d in dict.fromkeys(c.d for c in cases))}), float32 output, "
        f"backends: {', '.join(backends)}"
    )
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")
    results: dict[str, dict[str, _Cell]] = {}
    progress = _Progress()
    for name in backends:
        results[name] = _check_backend(
            name, cases, compiled=not args.no_compiled, progress=progress
        )
    _print_results(results)
    failures = [
        (b, col, cell) for b, row in results.items() for col, cell in row.items() if cell.failed
    ]
    if failures:
        print(f"\n{len(failures)} check(s) failed:")
        for backend, column, cell in failures:
            for note in cell.notes[:5]:
                print(f"  {backend} {column}: {note}")
            if len(cell.notes) > 5:
                print(f"  {backend} {column}: ... and {len(cell.notes) - 5} more")
        return 1
    print("\nall checks passed")
    return 0


def _print_results(results: dict[str, dict[str, _Cell]]) -> None:
    columns = list(COLUMNS)
    width = max(len("backend"), *(len(name) for name in results)) + 2
    cells = {b: {c: row[c].text() for c in columns} for b, row in results.items()}
    col_width = {c: max(len(c), *(len(cells[b][c]) for b in cells)) + 2 for c in columns}
    print()
    print("backend".ljust(width) + "".join(c.ljust(col_width[c]) for c in columns).rstrip())
    for backend in results:
        line = backend.ljust(width) + "".join(
            cells[backend][c].ljust(col_width[c]) for c in columns
        )
        print(line.rstrip())
    print()
    for column, (meaning, tolerance) in COLUMNS.items():
        scale = "*sqrt(d)" if column == "rel-dot" else ""
        print(f"  {column:<10} {meaning} (tol {tolerance:g}{scale})")


# -- grids and references ---------------------------------------------------------


def _make_case(spec: Spec, d: int) -> _Case:
    rng = np.random.default_rng(20240607)  # one fixed seed: every run checks the same values
    # Fractional positions are float32 values, which every backend holds exactly (JAX
    # without x64 rounds float64 ones to float32 before pe_core sees them).
    small = (
        np.arange(256, dtype=np.int64),
        np.concatenate([np.arange(-64, 64, 0.125), rng.uniform(-1000, 1000, 64)]).astype(
            np.float32
        ),
    )
    large_ints = np.concatenate(
        [
            [2**24, 2**24 - 1, 2**23 + 1, 10**6, 10**7, 12345678, 9999991, -(2**24), -7654321],
            rng.integers(2**20, 2**24, 23),
        ]
    ).astype(np.int64)
    large_floats = np.concatenate(
        [[2**23 - 0.5, 1e6 + 0.0625, -(3e6 + 0.25), 5e6 + 0.5], rng.uniform(-(2**24), 2**24, 28)]
    ).astype(np.float32)
    large = (large_ints, large_floats)
    window, bound = _uniqueness_window(d, spec)
    unique = np.unique(
        np.concatenate(
            [np.arange(min(64, window)), np.arange(max(0, window - 64), window)]
            + ([rng.integers(0, window, 128)] if window > 0 else [])
        )
    ).astype(np.int64)
    p = (
        np.array([0, 1, 2, 100, 12345, 2**21, 2**22], dtype=np.int64),
        np.array([0.5, 1000.5, 123456.5, -777.5], dtype=np.float32),
    )
    k = np.array([1, -1, 17, -1000, 65537, -(2**20) - 3, 2**22 - 1], dtype=np.int64)
    w = frequencies(d, spec)
    dot_ref = np.cos(k[:, None].astype(np.float64) * w).sum(axis=-1)  # angle error < 1e-9
    return _Case(
        spec=spec,
        d=d,
        small=small,
        small_ref=tuple(_reference_encoding(x, d, spec) for x in small),
        large=large,
        large_ref=_exact_encoding(large, d, spec),
        unique=unique,
        bound=bound,
        p=p,
        k=k,
        dot_ref=dot_ref,
    )


def _lay_out(sin: np.ndarray, cos: np.ndarray, d: int, layout: str) -> np.ndarray:
    if layout == "interleaved":
        table = np.stack([sin, cos], axis=-1).reshape(sin.shape[:-1] + (2 * sin.shape[-1],))
    else:
        table = np.concatenate([sin, cos], axis=-1)
    if d % 2:
        table = np.concatenate([table, np.zeros(table.shape[:-1] + (1,))], axis=-1)
    return table


def _schedule(d: int, spec: Spec) -> np.ndarray:
    """The frequency schedule restated from the Spec docstring (not pe_core's code)."""
    n = d // 2
    if spec.frequencies is not None:
        return np.asarray(spec.frequencies, dtype=np.float64)
    i = np.arange(n, dtype=np.float64)
    e = 2.0 * i / (2 * n) if spec.denominator == "d" else i / max(n - 1, 1)
    return np.power(spec.min_timescale / spec.base, e) / spec.min_timescale


def _reference_encoding(positions: np.ndarray, d: int, spec: Spec) -> np.ndarray:
    """float64 NumPy: accurate to ~|angle| * 2**-53, fine for the small grid."""
    angles = (positions.astype(np.float64)[..., None] + spec.offset) * _schedule(d, spec)
    return _lay_out(np.sin(angles), np.cos(angles), d, spec.layout)


def _exact_encoding(
    grids: tuple[np.ndarray, ...], d: int, spec: Spec
) -> tuple[np.ndarray, ...] | None:
    """mpmath at 200 bits from the float64 frequencies: exact to float64 rounding."""
    try:
        import mpmath
    except ImportError:
        return None
    w = [mpmath.mpf(float(v)) for v in frequencies(d, spec)]
    out = []
    with mpmath.workprec(200):
        offset = mpmath.mpf(float(spec.offset))
        for grid in grids:
            sin = np.empty(grid.shape + (len(w),))
            cos = np.empty_like(sin)
            for index, position in np.ndenumerate(grid):
                shifted = mpmath.mpf(float(position)) + offset
                for i, wi in enumerate(w):
                    angle = shifted * wi
                    sin[index + (i,)] = float(mpmath.sin(angle))
                    cos[index + (i,)] = float(mpmath.cos(angle))
            out.append(_lay_out(sin, cos, d, spec.layout))
    return tuple(out)


def _uniqueness_window(d: int, spec: Spec) -> tuple[int, float]:
    w = frequencies(d, spec)
    w = w[w > 0]
    if w.size == 0 or float(w.min()) >= 2 * math.pi:
        return 0, 0.0
    w_min = float(w.min())
    return math.floor(2 * math.pi / w_min), 2 * math.sin(w_min / 2)


# -- the checks -------------------------------------------------------------------


def _max_error(got: np.ndarray, expected: np.ndarray) -> float:
    if got.shape != expected.shape:
        raise ValueError(f"shape {got.shape}, expected {expected.shape}")
    err = np.abs(got.astype(np.float64) - expected)
    return float(np.max(np.where(np.isfinite(err), err, np.inf))) if err.size else 0.0


def _check_backend(
    name: str, cases: list[_Case], *, compiled: bool, progress: _Progress | None = None
) -> dict[str, _Cell]:
    progress = progress or _Progress()
    progress.begin(f"checking {name}: importing")
    try:
        xp = get_namespace(name)
    finally:
        progress.end()
    row = {column: _Cell() for column in COLUMNS}

    def run(column: str, where: str, body: Callable[[], float], d: int) -> None:
        tolerance = COLUMNS[column][1] * (math.sqrt(d) if column == "rel-dot" else 1.0)
        try:
            error = body()
        except Exception as exc:
            row[column].crash(exc, where)
        else:
            row[column].record(error, tolerance, where)
        progress.step(column if column != "compiled" else where.rsplit(" ", 1)[-1])

    def enc(positions: np.ndarray, case: _Case) -> np.ndarray:
        out = encode(positions, case.d, spec=case.spec, backend=name)
        if backend_of(out) != name or xp.dtype_of(out) != "float32":
            raise TypeError(f"encode returned {type(out).__name__} {xp.dtype_of(out)}")
        return xp.to_numpy(out).astype(np.float64)

    for case in cases:
        progress.begin(f"checking {name} {case.label}:")
        seen: list[np.ndarray] = []

        def agreement(case: _Case = case, seen: list[np.ndarray] = seen) -> float:
            errors = []
            for grid, ref in zip(case.small, case.small_ref, strict=True):
                seen.append(enc(grid, case))
                errors.append(_max_error(seen[-1], ref))
            return max(errors)

        run("agreement", case.label, agreement, case.d)

        if case.large_ref is None:
            row["large"].status = "SKIP"
            row["large"].notes.append("needs mpmath: pip install 'pe-core[test]'")
        else:

            def large(case: _Case = case, seen: list[np.ndarray] = seen) -> float:
                errors = []
                for grid, ref in zip(case.large, case.large_ref, strict=True):
                    seen.append(enc(grid, case))
                    errors.append(_max_error(seen[-1], ref))
                return max(errors)

            run("large", case.label, large, case.d)

        def bounded(seen: list[np.ndarray] = seen) -> float:
            if not seen:
                raise RuntimeError("no encodings to check (the columns before failed)")
            values = np.concatenate([s.reshape(-1) for s in seen])
            if not np.all(np.isfinite(values)):
                return math.inf
            return max(0.0, float(np.max(np.abs(values))) - 1.0)

        run("bounded", case.label, bounded, case.d)

        def unique(case: _Case = case) -> float:
            table = enc(case.unique, case)
            closest = math.inf
            for i in range(len(table) - 1):
                distances = np.sqrt(np.sum((table[i + 1 :] - table[i]) ** 2, axis=-1))
                closest = min(
                    closest, float(np.min(np.where(np.isfinite(distances), distances, 0)))
                )
            return max(0.0, case.bound - closest)

        run("unique", case.label, unique, case.d)

        try:
            here = [enc(p, case) for p in case.p]
            there = [
                [enc((p.astype(np.float64) + k).astype(p.dtype), case) for k in case.k]
                for p in case.p
            ]
        except Exception as exc:
            for column in ("linear", "shift", "rel-dot"):
                row[column].crash(exc, case.label)
            progress.end()
            continue

        def linear(case: _Case = case, here: Any = here, there: Any = there) -> float:
            matrices = xp.to_numpy(relative_matrix(case.k, case.d, case.spec, backend=name))
            errors = []
            for e_p, targets in zip(here, there, strict=True):
                for m, target in zip(matrices.astype(np.float64), targets, strict=True):
                    errors.append(_max_error(target, e_p @ m.T))
            return max(errors)

        run("linear", case.label, linear, case.d)

        def shifted(case: _Case = case, there: Any = there) -> float:
            errors = []
            for p, targets in zip(case.p, there, strict=True):
                native = encode(p, case.d, spec=case.spec, backend=name)
                for k, target in zip(case.k, targets, strict=True):
                    moved = shift(native, int(k), case.spec)
                    if backend_of(moved) != name or xp.dtype_of(moved) != "float32":
                        raise TypeError(
                            f"shift returned {type(moved).__name__} {xp.dtype_of(moved)} for "
                            f"a {name} float32 input"
                        )
                    errors.append(_max_error(xp.to_numpy(moved), target))
            return max(errors)

        run("shift", case.label, shifted, case.d)

        def rel_dot(case: _Case = case, here: Any = here, there: Any = there) -> float:
            errors = []
            for e_p, targets in zip(here, there, strict=True):
                for exact, target in zip(case.dot_ref, targets, strict=True):
                    errors.append(float(np.max(np.abs(np.sum(e_p * target, axis=-1) - exact))))
            return max(errors)

        run("rel-dot", case.label, rel_dot, case.d)
        progress.end()

    if name == "numpy":
        row["compiled"].status = "n/a"
    elif not compiled:
        row["compiled"].status = "SKIP"
    elif cases[0].large_ref is None:
        row["compiled"].status = "SKIP"
        row["compiled"].notes.append("needs mpmath: pip install 'pe-core[test]'")
    else:
        case = cases[0]
        progress.begin(f"checking {name} {case.label}: compiled with")
        for label, fn in _compilers(name, case):

            def compiled_error(fn: Callable[[Any], Any] = fn, case: _Case = case) -> float:
                errors = []
                for grid, ref in zip(case.large, case.large_ref, strict=True):
                    got = xp.to_numpy(fn(_native(name, grid))).astype(np.float64)
                    errors.append(_max_error(got, ref))
                return max(errors)

            run("compiled", f"{case.label} {label}", compiled_error, case.d)
        progress.end()
    return row


def _native(name: str, grid: np.ndarray) -> Any:
    """The grid as the backend's own array (int32/float32: what every backend holds)."""
    values = grid.astype(np.int32 if grid.dtype.kind == "i" else np.float32)
    if name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(values)
    if name == "torch":
        import torch

        return torch.from_numpy(values.astype(np.int64) if values.dtype.kind == "i" else values)
    import tensorflow as tf

    return tf.constant(values)


def _compilers(name: str, case: _Case) -> list[tuple[str, Callable[[Any], Any]]]:
    def fn(positions: Any) -> Any:
        return encode(positions, case.d, spec=case.spec)

    if name == "jax":
        import jax

        return [("jax.jit", jax.jit(fn))]
    if name == "torch":
        import torch

        return [("torch.compile", torch.compile(fn, fullgraph=True, dynamic=False))]
    import tensorflow as tf

    return [
        ("tf.function", tf.function(fn, jit_compile=False, reduce_retracing=True)),
        ("tf.function(jit_compile=True)", tf.function(fn, jit_compile=True)),
    ]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
