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

import contextlib
import os
import sys
from collections.abc import Sequence

from pe_core._cli.output import WriteError
from pe_core._cli.parser import build_parser
from pe_core.testing.checks import _one_line as one_line

__all__ = ["main"]


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
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and on bad arguments (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        return args.run(args)
    except BrokenPipeError:  # `pe-core encode ... | head`: stop quietly
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except WriteError as exc:
        print(f"pe-core {args.command}: error: {exc}", file=sys.stderr)
        return 1
    # Bad combinations and values pe_core rejects (ValueError, TypeError), a missing
    # framework (ImportError), numbers beyond what NumPy holds (OverflowError).
    except (ValueError, TypeError, ImportError, OverflowError) as exc:
        print(f"pe-core {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pe-core {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
