"""What ``pe-core`` reports and writes: errors on one line, ``--out`` checked up front."""

from __future__ import annotations

from pathlib import Path


class WriteError(Exception):
    """An output file could not be written (exit status 1)."""


def check_out_path(out: str) -> Path:
    """Refuse an ``--out`` that cannot be a file before computing anything."""
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out {out!r} is a folder. Expected a file name.")
    if not path.parent.is_dir():
        raise ValueError(f"--out {out!r}: the folder {str(path.parent)!r} does not exist.")
    return path
