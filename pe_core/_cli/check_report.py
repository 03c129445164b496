"""What ``pe-core check`` prints when it is done: a backend x property table per
function, the line across backends, and every failure with its notes; the exit status.
"""

from __future__ import annotations

from collections.abc import Sequence

from pe_core._cli.check_cases import ACROSS_ATOL, COLUMNS, REFERENCE_BACKEND, ROPE_COLUMNS
from pe_core._cli.check_run import Cell


def print_check_table(
    title: str, rows: dict[str, dict[str, Cell]], columns: dict[str, str]
) -> None:
    """One function's table, a row per backend, then what each column measures."""
    width = max(len("backend"), *(len(name) for name in rows)) + 2
    cells = {b: {c: row[c].text() for c in columns} for b, row in rows.items()}
    col_width = {c: max(len(c), *(len(cells[b][c]) for b in cells)) + 2 for c in columns}
    print(f"\n{title}")
    for first, row in {"backend": {c: c for c in columns}, **cells}.items():
        print((first.ljust(width) + "".join(row[c].ljust(col_width[c]) for c in columns)).rstrip())
    print()
    for column, meaning in columns.items():
        print(f"  {column:<10} {meaning}")


def report(
    backends: Sequence[str], tables: dict[str, dict[str, dict[str, Cell]]], across: dict[str, Cell]
) -> int:
    """Print the tables, the line across backends and the failures; the exit status."""
    print_check_table("pe_core.encode", tables["encode"], COLUMNS)
    print_check_table("pe_core.apply_rope", tables["apply_rope"], ROPE_COLUMNS)
    if not across:
        print("\nacross backends: n/a (one backend checked)")
    else:
        others = ", ".join(b for b in backends if b != REFERENCE_BACKEND)
        cells = ", ".join(f"{what} {cell.text()}" for what, cell in across.items())
        what = f"check_cross_backend_agreement, {others} vs {REFERENCE_BACKEND}"
        print(f"\nacross backends ({what}, tol {ACROSS_ATOL:g}): {cells}")
    named: dict[str, Cell] = {}  # every cell under the name a failure is reported by
    for title, rows in tables.items():
        prefix = " rope" if title == "apply_rope" else ""  # "torch rope norm"
        named |= {f"{b}{prefix} {c}": cell for b, row in rows.items() for c, cell in row.items()}
    named |= {f"across backends {what}": cell for what, cell in across.items()}
    return print_failures({where: c for where, c in named.items() if c.status in ("FAIL", "ERROR")})


def print_failures(failures: dict[str, Cell]) -> int:
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
