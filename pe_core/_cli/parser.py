"""The argument parser of ``pe-core``: its commands, their options, and the function
each command runs (``args.run(args)``, an exit status)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pe_core import __version__
from pe_core._cli.arguments import (
    ONE_AXIS_PRESETS,
    backend_arg,
    backends_arg,
    bases_arg,
    dims_arg,
    positions_arg,
    positive_int_arg,
    preset_arg,
    presets_arg,
)
from pe_core._cli.check import run_check_command
from pe_core._cli.encode import ENCODE_FORMATS, run_encode
from pe_core._cli.plot import PLOT_KINDS, run_plot
from pe_core.presets import DEFAULT_PRESET
from pe_core_backends import FLOAT_DTYPES

#: A preset option's help (each command closes the parenthesis its own way).
PRESET_HELP = f"preset name, one of: {', '.join(ONE_AXIS_PRESETS)} (default: {DEFAULT_PRESET}"

#: ``pe-core encode``'s arguments: their names, then ``add_argument``'s keywords.
ENCODE_ARGUMENTS: dict[str, dict[str, Any]] = {
    "--positions": dict(
        required=True,
        type=positions_arg,
        help="'a:b' or 'a:b:step' (like range/arange), a comma list '0,5,2.5', or one "
        "number; write negative ones as --positions=-4:4",
    ),
    "--dim -d": dict(required=True, type=positive_int_arg, help="number of features d"),
    "--spec": dict(default=DEFAULT_PRESET, type=preset_arg, help=f"{PRESET_HELP})"),
    "--backend": dict(
        default="numpy", type=backend_arg, help="numpy (default), jax, torch or tensorflow"
    ),
    "--dtype": dict(
        default="float32", choices=FLOAT_DTYPES, help="output dtype (default: float32)"
    ),
    "--out -o": dict(
        metavar="FILE",
        help="save the table (every value) instead of printing it; the format follows "
        "the extension: .npy (numpy.save), .csv (a 'pos' column, then one per feature), "
        ".json; bfloat16 is saved as float32",
    ),
    "--format -f": dict(
        choices=ENCODE_FORMATS,
        help="table (printed, the default without --out), csv or json (printed, or "
        "saved to --out), npy (needs --out); with --out, overrides its extension",
    ),
}

#: ``pe-core check``'s arguments.
CHECK_ARGUMENTS: dict[str, dict[str, Any]] = {
    "--backends": dict(type=backends_arg, help="comma list (default: every installed backend)"),
    "--dim -d": dict(
        type=dims_arg,
        help="comma list of feature counts, also RoPE's head_dim (default: 64; with "
        "--thorough 2,63,64,512); an odd d is checked on presets that zero-pad",
    ),
    "--spec": dict(type=presets_arg, help="comma list of preset names (default: all)"),
    "--no-compiled": dict(
        action="store_true", help="skip the compiled columns (jax.jit, torch.compile, tf.function)"
    ),
    "--thorough": dict(
        action="store_true",
        help="larger grids, positions up to 1e300, more RoPE configurations, and every "
        "case compiled (several minutes)",
    ),
}

#: ``pe-core plot``'s arguments.
PLOT_ARGUMENTS: dict[str, dict[str, Any]] = {
    "kind": dict(choices=PLOT_KINDS, metavar="KIND", help=", ".join(PLOT_KINDS)),
    "--dim -d": dict(
        type=dims_arg,
        help="number of features (default: 128; spectrum 512); distance takes a comma "
        "list (default: 16,64,256)",
    ),
    "--len -n": dict(
        dest="length",
        type=positive_int_arg,
        help="number of positions (default: 100); for distance the largest distance (default: 200)",
    ),
    "--spec": dict(
        type=preset_arg,
        help=f"{PRESET_HELP}; spectrum compares vaswani and tensor2tensor unless given)",
    ),
    "--metric": dict(
        default="cosine",
        choices=("cosine", "dot", "euclidean"),
        help="similarity and distance: what to draw (default: cosine)",
    ),
    "--base": dict(type=bases_arg, help="distance: comma list of bases (default: 100,10000)"),
    "--dpi": dict(type=positive_int_arg, default=120, help="resolution (default: 120)"),
    "--out -o": dict(required=True, metavar="FILE.png", help="where to save"),
}

#: Each command: its help, its description, its arguments and the function it runs.
COMMANDS: dict[str, tuple[str, str, dict[str, dict[str, Any]], Callable[..., int]]] = {
    "encode": (
        "print or save the encoding of some positions",
        "Print the encoding of POSITIONS (or save it with --out).",
        ENCODE_ARGUMENTS,
        run_encode,
    ),
    "check": (
        "run pe_core's property checks on every installed backend",
        "Run the property checks on each backend and print a backend x property table. Exit "
        "status 1 when a check fails.",
        CHECK_ARGUMENTS,
        run_check_command,
    ),
    "plot": (
        "draw a figure of the encoding to a PNG (needs matplotlib)",
        "Draw KIND and save it to --out: heatmap (positions x features), similarity (the "
        "position x position matrix), distance (similarity against distance for several d "
        "and bases), spectrum (the wavelength of every sin/cos pair). Needs matplotlib: pip "
        "install 'pe-core[plot]'.",
        PLOT_ARGUMENTS,
        run_plot,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """``pe-core`` and its commands ``encode``, ``check`` and ``plot``."""
    parser = argparse.ArgumentParser(
        prog="pe-core",
        description="Sinusoidal positional encodings, exact on NumPy, JAX, PyTorch and TensorFlow.",
    )
    parser.add_argument("--version", action="version", version=f"pe-core {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, description, arguments, run) in COMMANDS.items():
        command = commands.add_parser(name, help=summary, description=description)
        for names, options in arguments.items():
            command.add_argument(*names.split(), **options)
        command.set_defaults(run=run)
    return parser
