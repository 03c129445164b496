"""Which cases a ``pe-core check`` run takes: every (preset, ``--dim``) of ``encode``
and every RoPE configuration of each even ``--dim``, less those the options skip; and
which of them run compiled.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

from pe_core._cli.arguments import ONE_AXIS_PRESETS
from pe_core._cli.check_cases import EncodeCase, RopeCase, encode_case, rope_cases
from pe_core._schedule import check_d
from pe_core.presets import PRESETS


def plan(
    args: argparse.Namespace, backends: Sequence[str]
) -> tuple[list[EncodeCase], list[RopeCase]]:
    """The cases of ``args`` (printed, with what is skipped)."""
    specs = args.spec or tuple(PRESETS[name] for name in ONE_AXIS_PRESETS)
    dims = args.dim or ((64, 2, 63, 512) if args.thorough else (64,))
    cases, skipped = [], []  # the encode case of every (spec, d), less odd d the spec refuses
    for spec in specs:
        for d in dims:
            if d % 2 and spec.odd_d == "raise":
                skipped.append(f"{spec.name} d={d} (odd d needs odd_d='zero_pad')")
            else:
                cases.append(encode_case(spec, check_d(d, spec), args.thorough))
    # the apply_rope cases of every even head_dim (the odd ones skipped)
    ropes = [case for d in dims if d % 2 == 0 for case in rope_cases(d, args.thorough)]
    why = "(RoPE rotates pairs: head_dim must be even)"
    skipped += [f"rope head_dim={d} {why}" for d in dims if d % 2]
    if not cases and not ropes:
        raise ValueError(f"nothing to check: every combination was skipped: {', '.join(skipped)}")
    # what the run checks, on which backends, and what it skips (stdout)
    names = ", ".join(sorted({c.spec.name or "?" for c in cases}))
    print(
        f"pe-core check: {len(cases)} case(s) ({names}; d in {distinct(c.d for c in cases)}), "
        f"float32 output, backends: {', '.join(backends)}"
    )
    layouts = distinct(c.options["layout"] for c in ropes)
    head_dims = distinct(c.head_dim for c in ropes)
    print(f"apply_rope: {len(ropes)} case(s) (layouts {layouts}; head_dim in {head_dims})")
    if args.thorough:
        print("thorough: larger grids, positions to 1e300, more cases compiled")
    if skipped:
        print(f"skipped: {'; '.join(skipped)}")
    return cases, ropes


def distinct(values: Iterable[Any]) -> str:
    """The values once each, in order: ``"64, 2"``."""
    return ", ".join(str(value) for value in dict.fromkeys(values))


def compiled_cases(cases: Sequence[Any], args: argparse.Namespace) -> Sequence[Any]:
    """The first case; --thorough: every variant at the first size and the first variant
    at every size (every spec at the first d, the first spec at every d)."""
    if not cases or args.no_compiled:
        return []
    if not args.thorough:
        return cases[:1]
    variant, size = cases[0].variant
    return [c for c in cases if c.variant[0] == variant or c.variant[1] == size]
