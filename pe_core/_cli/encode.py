"""``pe-core encode``: print the encoding of some positions, or save every value.

The table is printed (summarised when wide or long) under the ``pe_core.encode`` call
that gives it; ``--out FILE.npy``, ``.csv`` or ``.json`` saves it, ``--format`` chooses
the format otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pe_core._cli.arguments import MAX_ENCODE_VALUES
from pe_core._cli.output import WriteError, check_out_path
from pe_core._schedule import check_d
from pe_core.encoding import encode
from pe_core.spec import Spec
from pe_core_backends import get_namespace

#: What ``pe-core encode --format`` writes; ``table`` is the printed summary.
ENCODE_FORMATS: tuple[str, ...] = ("table", "csv", "json", "npy")

#: ``--out`` extension -> format.
EXTENSIONS = {".npy": "npy", ".csv": "csv", ".json": "json"}


def output_format(out: str | None, chosen: str | None) -> str:
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
    if suffix not in EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of --out {out!r} from its extension {suffix or '(none)'!r}. "
            f"Expected one of: {', '.join(EXTENSIONS)}, or give --format csv|json|npy."
        )
    return EXTENSIONS[suffix]


def run_encode(args: argparse.Namespace) -> int:
    """Run ``pe-core encode`` with the parsed ``args``; return the exit status (0)."""
    spec: Spec = args.spec
    d = check_d(args.dim, spec)
    path = None if args.out is None else check_out_path(args.out)
    fmt = output_format(args.out, args.format)
    positions: np.ndarray = args.positions.values  # int64, float64, or Python ints
    if positions.size * d > MAX_ENCODE_VALUES:
        raise ValueError(
            f"{positions.size} positions x d={d} is {positions.size * d} values; "
            f"the limit is {MAX_ENCODE_VALUES}."
        )
    xp = get_namespace(args.backend)
    # integers beyond int64 go as the Python ints they are (see arguments.integers)
    pos = positions.tolist() if positions.dtype == object else positions
    table = xp.to_numpy(encode(pos, d, spec=spec, backend=args.backend, dtype=args.dtype))
    call = (
        f"pe_core.encode(pos={args.positions.call}, d={d}, spec={spec.name!r}, "
        f"backend={args.backend!r}, dtype={args.dtype!r})"
    )
    if fmt == "table":
        print(f"# {call} -> shape {table.shape}")
        print_table(positions, table)
        return 0
    if table.dtype.name == "bfloat16":  # NumPy cannot read bfloat16 back: save float32
        table = table.astype(np.float32)
    if path is None:  # csv or json to stdout
        sys.stdout.write(serialise(fmt, positions, table, call))
        return 0
    try:
        if fmt == "npy":
            with path.open("wb") as file:  # exactly this name (numpy.save would add .npy)
                np.save(file, table)
        else:
            path.write_text(serialise(fmt, positions, table, call))
    except OSError as exc:
        raise WriteError(f"could not write {str(path)!r}: {exc.strerror or exc}") from None
    print(f"saved {call}: shape {table.shape}, {table.dtype} -> {path} ({fmt})")
    return 0


def shortest(values: np.ndarray) -> list[str]:
    """Each value as the shortest decimal that reads back to it in its own dtype."""
    return [np.format_float_positional(v, unique=True, trim="-") for v in values.reshape(-1)]


def serialise(fmt: str, positions: np.ndarray, table: np.ndarray, call: str) -> str:
    labels = [format_position(p) for p in positions]
    if fmt == "csv":
        header = ",".join(["pos"] + [f"f{i}" for i in range(table.shape[-1])])
        rows = [",".join([label, *shortest(row)]) for label, row in zip(labels, table, strict=True)]
        return "\n".join([header, *rows]) + "\n"
    document = {
        "call": call,
        "dtype": table.dtype.name,
        "shape": list(table.shape),
        "pos": positions.tolist(),
        "values": [[float(v) for v in shortest(row)] for row in table],
    }
    return json.dumps(document) + "\n"


#: How ``print_table`` writes a row (``threshold`` aside).
ROW_FORMAT: dict[str, Any] = {"precision": 4, "floatmode": "fixed", "suppress_small": True}
ROW_FORMAT |= {"sign": " ", "max_line_width": 10**6, "edgeitems": 4}


def print_table(positions: np.ndarray, table: np.ndarray, max_rows: int = 50) -> None:
    labels = [format_position(p) for p in positions]
    width = max(3, *(len(label) for label in labels))
    d = table.shape[-1]
    summarise = d > 16
    threshold = 16 if summarise else 10**6
    rows = list(range(len(labels)))
    if len(rows) > max_rows:
        rows = rows[:10] + [-1] + rows[-10:]
    print(f"{'pos':>{width}}  features")
    for i in rows:
        if i < 0:
            print(f"{'...':>{width}}")
        else:
            text = np.array2string(table[i].astype(np.float64), threshold=threshold, **ROW_FORMAT)
            print(f"{labels[i]:>{width}}  {text}")
    notes = []
    if summarise:
        notes.append(f"the first and last 4 of {d} features")
    if len(rows) < len(labels):
        notes.append(f"the first and last 10 of {len(labels)} positions")
    if notes:
        print(f"# showing {' and '.join(notes)}; --out FILE.npy saves everything")


def format_position(value: Any) -> str:
    """A position as Python writes it (``3``, ``0.5``, ``1e+23``)."""
    return str(value.item() if isinstance(value, np.generic) else value)
