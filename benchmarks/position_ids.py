"""Position ids from data: pe_core.position_ids against transformers' own code, torch eager.

``python -m benchmarks.position_ids`` times, at batch x sequence sizes 1 x 16, 8 x 512
and 64 x 4096 (``--quick``: the first two), with a seeded mask of left padding:

* ``from_attention_mask(mask)`` (padding 1) against generation's rule as transformers 4
  wrote it and Idefics keeps it, ``position_ids = mask.long().cumsum(-1) - 1;
  position_ids.masked_fill_(mask == 0, 1)``;
* ``from_attention_mask(mask, padding_value=0)`` against transformers 5's own
  ``GenerationMixin._prepare_position_ids_for_generation``;
* ``from_input_ids(ids, 1)`` against transformers' own
  ``RobertaEmbeddings.create_position_ids_from_input_ids(ids, 1)``.

The two calls of a row run in turn, round-robin, in an order that alternates every
round, so that load from other processes affects both alike; the table gives the
median time per call and the ratio pe_core / transformers (below 1 pe_core is faster),
with the target. torch runs with ``torch.set_num_threads(2)``. Nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from benchmarks import common

#: pe_core / transformers time ratio each row should stay within.
TARGET = 1.5

FULL_SIZES = ((1, 16), (8, 512), (64, 4096))
QUICK_SIZES = ((1, 16), (8, 512))


def _per_call(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def compare(
    ours: Callable[[], Any], theirs: Callable[[], Any], budget_s: float
) -> tuple[float, float]:
    """Median seconds per call of ``ours`` and ``theirs``, timed in alternating turns."""
    ours()
    theirs()
    number = max(1, int(1e-3 / max(_per_call(theirs, 3), 1e-7)))  # ~1 ms per measurement
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    pair = [("ours", ours), ("theirs", theirs)]
    deadline = time.perf_counter() + budget_s
    rounds = 0
    while rounds < 5 or time.perf_counter() < deadline:
        for name, fn in pair if rounds % 2 == 0 else pair[::-1]:
            times[name].append(_per_call(fn, number))
        rounds += 1
        if rounds >= 400:
            break
    return statistics.median(times["ours"]), statistics.median(times["theirs"])


def rows(sizes: Sequence[tuple[int, int]], budget_s: float) -> list[list[str]]:
    torch = common.setup_torch()
    from transformers.generation.utils import GenerationMixin
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    from pe_core import position_ids

    rng = np.random.default_rng(0)
    out = []
    for batch, seq in sizes:
        pad = rng.integers(0, seq // 2 + 1, batch)
        mask = torch.as_tensor((np.arange(seq)[None, :] >= pad[:, None]).astype(np.int64))
        ids = torch.where(mask.bool(), torch.as_tensor(rng.integers(3, 50000, (batch, seq))), 1)
        kwargs = {"attention_mask": mask}

        def generate_rule_4(mask: Any = mask) -> Any:
            position_ids_ = mask.long().cumsum(-1) - 1
            position_ids_.masked_fill_(mask == 0, 1)
            return position_ids_

        def prepare(ids: Any = ids, kwargs: Any = kwargs) -> Any:
            no_model: Any = None  # the method reads nothing of the model
            return GenerationMixin._prepare_position_ids_for_generation(no_model, ids, kwargs)

        cases: list[tuple[str, str, Callable[[], Any], Callable[[], Any]]] = [
            (
                "from_attention_mask (padding 1)",
                "cumsum - 1; masked_fill_(mask == 0, 1)",
                partial(position_ids.from_attention_mask, mask),
                generate_rule_4,
            ),
            (
                "from_attention_mask (padding 0)",
                "_prepare_position_ids_for_generation",
                partial(position_ids.from_attention_mask, mask, padding_value=0),
                prepare,
            ),
            (
                "from_input_ids",
                "create_position_ids_from_input_ids",
                partial(position_ids.from_input_ids, ids, 1),
                partial(RobertaEmbeddings.create_position_ids_from_input_ids, ids, 1),
            ),
        ]
        for name, baseline, ours, theirs in cases:
            assert torch.equal(ours(), theirs()), name  # the same numbers first
            t_ours, t_theirs = compare(ours, theirs, budget_s)
            ratio = t_ours / t_theirs
            out.append(
                [
                    name,
                    f"{batch} x {seq}",
                    common.fmt_ms(t_ours * 1e3),
                    common.fmt_ms(t_theirs * 1e3),
                    baseline,
                    f"{ratio:.2f}",
                    f"<= {TARGET}",
                ]
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.position_ids",
        description="pe_core.position_ids against transformers' functions (torch eager).",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, short budget")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    table = rows(sizes, budget_s=0.2 if args.quick else 2.0)
    headers = [
        "call",
        "batch x seq",
        "pe_core ms",
        "transformers ms",
        "baseline",
        "ratio",
        "target",
    ]
    print(common.md_table(headers, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
