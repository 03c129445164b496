"""``pe-core check``: the checks of :mod:`pe_core.testing` on every installed backend.

The plan (:mod:`~pe_core._cli.check_plan`) is printed, each backend is imported and
runs every case (:mod:`~pe_core._cli.check_run`), then the tables are printed
(:mod:`~pe_core._cli.check_report`); the frameworks' own log lines are kept out for the
duration of the command.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from pe_core._cli.check_cases import COLUMNS, ROPE_COLUMNS
from pe_core._cli.check_plan import compiled_cases, plan
from pe_core._cli.check_report import report
from pe_core._cli.check_run import Cell, Progress, check_across, check_row
from pe_core_backends import get_namespace, installed_backends


@contextlib.contextmanager
def quiet_frameworks() -> Iterator[None]:
    """Keep the frameworks' log lines out of ``pe-core check``'s output, for its run only.

    TensorFlow's C++ logging reads ``TF_CPP_MIN_LOG_LEVEL`` when it first logs, so the
    variable is set before the check imports TensorFlow (a value the caller set is
    kept); its Python logger and JAX's drop below ERROR, and the frameworks' Python
    warnings are ignored. Everything is restored afterwards.
    """
    saved_env = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    loggers = [logging.getLogger(name) for name in ("tensorflow", "jax", "absl")]
    saved_levels = [logger.level for logger in loggers]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # errors only
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


@quiet_frameworks()
def run_check_command(args: argparse.Namespace) -> int:
    """Run ``pe-core check`` with the parsed ``args``; return the exit status (0 or 1).

    Plan, run every case on every backend, then report (the frameworks kept quiet)."""
    backends = args.backends or installed_backends()
    cases, rope_cases = plan(args, backends)
    rope_compiled = compiled_cases(rope_cases, args) if args.thorough else []
    work: dict[str, tuple[dict[str, str], Sequence[Any], Sequence[Any]]] = {
        "encode": (COLUMNS, cases, compiled_cases(cases, args)),
        "apply_rope": (ROPE_COLUMNS, rope_cases, rope_compiled),
    }
    tables: dict[str, dict[str, dict[str, Cell]]] = {title: {} for title in work}
    progress = Progress()
    for name in backends:
        import_backend(name, progress)
        for title, (columns, todo, compiled) in work.items():
            tables[title][name] = check_row(name, columns, todo, compiled, progress)
    across = check_across(backends, cases, rope_cases, progress)
    return report(backends, tables, across)


def import_backend(name: str, progress: Progress) -> None:
    """Import backend ``name``'s framework, on a progress line of its own."""
    progress.begin(f"checking {name}: importing")
    try:
        get_namespace(name)
    finally:
        progress.end()
