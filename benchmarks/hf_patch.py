"""transformers' rotary module, unpatched vs patched by ``patch_rotary_embeddings``.

``python -m benchmarks.hf_patch [--quick] [--threads N]``: ``LlamaRotaryEmbedding``
(``head_dim`` 128) with the ``default`` and ``llama3`` rope types, called as a model
calls it (``module(hidden_states, position_ids)``, float32, torch eager on the CPU):
decode steps (one position per sequence, batch 1 and 8) and prefills of 512 and 4096
positions (batch 1). Two modules of the same config are timed in the same run,
alternating, best median of a few rounds; the ratio is the patched module's time over
the unpatched one's. torch runs one intra-op thread by default (``--threads``), as in
the other per-call benchmarks. Prints a Markdown table; writes nothing. The header
names torch and transformers only (the shared header imports every backend).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.common import cpu_model, fmt_ms, loadavg, md_table, setup_torch, time_call

HEAD_DIM = 128

#: rope type -> the config's rope_parameters
ROPES: dict[str, dict[str, Any]] = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_theta": 500000.0,
    },
}

#: call -> (batch, positions per sequence)
CALLS = {
    "decode, batch 1": (1, 1),
    "decode, batch 8": (8, 1),
    "prefill 512": (1, 512),
    "prefill 4096": (1, 4096),
}

#: Position of the decode steps (a context of this length so far).
DECODE_AT = 4095

HEADERS = ["rope type", "call", "unpatched ms", "patched ms", "ratio"]


def modules(rope: str) -> tuple[Any, Any]:
    """An unpatched and a patched ``LlamaRotaryEmbedding`` of the same config."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from pe_core.integrations.transformers import patch_rotary_embeddings

    config = LlamaConfig(
        hidden_size=32 * HEAD_DIM,
        num_attention_heads=32,
        head_dim=HEAD_DIM,
        max_position_embeddings=131072,
        rope_parameters=ROPES[rope],
    )
    return LlamaRotaryEmbedding(config), patch_rotary_embeddings(LlamaRotaryEmbedding(config))


def measure(quick: bool, threads: int) -> list[list[str]]:
    torch = setup_torch()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return [row for rope in ROPES for row in _rows(torch, rope, quick)]
    finally:
        torch.set_num_threads(before)  # the caller's setting back (in-process runs)


def _rows(torch: Any, rope: str, quick: bool) -> list[list[str]]:
    unpatched, patched = modules(rope)
    rounds = 1 if quick else 5
    rows = []
    for call, (batch, n) in CALLS.items():
        start = DECODE_AT if n == 1 else 0
        position_ids = torch.arange(start, start + n).expand(batch, n)
        x = torch.zeros(batch, n, HEAD_DIM)
        theirs = functools.partial(unpatched, x, position_ids)
        ours = functools.partial(patched, x, position_ids)
        big = batch * n > 1024
        repeats = 1 if quick and big else 3 if quick else 20
        kwargs = {"min_time": 0.01 if quick else 0.2, "max_calls": 30 if quick else 400}
        best_theirs = best_ours = float("inf")
        for _ in range(rounds):
            best_theirs = min(best_theirs, time_call(theirs, repeats, **kwargs)["median_ms"])
            best_ours = min(best_ours, time_call(ours, repeats, **kwargs)["median_ms"])
        ratio = f"{best_ours / best_theirs:.2f}"
        rows.append([rope, call, fmt_ms(best_theirs), fmt_ms(best_ours), ratio])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hf_patch", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    load = loadavg()
    rows = measure(args.quick, args.threads)
    import torch
    import transformers

    command = " ".join(["python -m benchmarks.hf_patch", *(["--quick"] if args.quick else [])])
    print(f"- Command: `{command}`")
    print(f"- Date: {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.platform()}")
    print(f"- Libraries: torch {torch.__version__}, transformers {transformers.__version__}")
    if load is not None:
        print(f"- 1-minute load average: {load:.2f} before, {loadavg():.2f} after")
    print(f"- torch threads: {args.threads}")
    print()
    print(md_table(HEADERS, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
