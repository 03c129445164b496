"""The argument parser of ``pe-core``: its commands, their options, and the function
each command runs (``args.run(args)``, an exit status)."""

from __future__ import annotations

import argparse

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


def build_parser() -> argparse.ArgumentParser:
    """``pe-core`` and its commands ``encode``, ``check`` and ``plot``."""
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
        type=positions_arg,
        help="'a:b' or 'a:b:step' (like range/arange), a comma list '0,5,2.5', or one "
        "number; write negative ones as --positions=-4:4",
    )
    enc.add_argument(
        "--dim", "-d", required=True, type=positive_int_arg, help="number of features d"
    )
    enc.add_argument(
        "--spec",
        default=DEFAULT_PRESET,
        type=preset_arg,
        help=f"preset name, one of: {', '.join(ONE_AXIS_PRESETS)} (default: {DEFAULT_PRESET})",
    )
    enc.add_argument(
        "--backend",
        default="numpy",
        type=backend_arg,
        help="numpy (default), jax, torch or tensorflow",
    )
    enc.add_argument(
        "--dtype", default="float32", choices=FLOAT_DTYPES, help="output dtype (default: float32)"
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
        help="table (printed, the default without --out), csv or json (printed, or "
        "saved to --out), npy (needs --out); with --out, overrides its extension",
    )
    enc.set_defaults(run=run_encode)

    chk = commands.add_parser(
        "check",
        help="run pe_core's property checks on every installed backend",
        description="Run the property checks on each backend and print a backend x property "
        "table. Exit status 1 when a check fails.",
    )
    chk.add_argument(
        "--backends", type=backends_arg, help="comma list (default: every installed backend)"
    )
    chk.add_argument(
        "--dim",
        "-d",
        type=dims_arg,
        help="comma list of feature counts, also RoPE's head_dim (default: 64; with "
        "--thorough 2,63,64,512); an odd d is checked on presets that zero-pad",
    )
    chk.add_argument("--spec", type=presets_arg, help="comma list of preset names (default: all)")
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
    chk.set_defaults(run=run_check_command)

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
        type=dims_arg,
        help="number of features (default: 128; spectrum 512); distance takes a comma "
        "list (default: 16,64,256)",
    )
    plot.add_argument(
        "--len",
        "-n",
        dest="length",
        type=positive_int_arg,
        help="number of positions (default: 100); for distance the largest distance (default: 200)",
    )
    plot.add_argument(
        "--spec",
        type=preset_arg,
        help=f"preset name, one of: {', '.join(ONE_AXIS_PRESETS)} (default: {DEFAULT_PRESET}; "
        "spectrum compares vaswani and tensor2tensor unless given)",
    )
    plot.add_argument(
        "--metric",
        default="cosine",
        choices=("cosine", "dot", "euclidean"),
        help="similarity and distance: what to draw (default: cosine)",
    )
    plot.add_argument(
        "--base", type=bases_arg, help="distance: comma list of bases (default: 100,10000)"
    )
    plot.add_argument("--dpi", type=positive_int_arg, default=120, help="resolution (default: 120)")
    plot.add_argument("--out", "-o", required=True, metavar="FILE.png", help="where to save")
    plot.set_defaults(run=run_plot)
    return parser
