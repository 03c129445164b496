"""Relative index tables: pe_core against the models' own code, timed in the same run.

``python -m benchmarks.relative_index`` prints one row per measurement with the median
time per call of pe_core and of the baseline, and their ratio (below 1 pe_core is
faster):

* DeBERTa buckets (PyTorch): ``deberta_log_bucket(rel, 256, 512)`` of a ``(L, L)``
  int64 matrix ``i - j`` (DeBERTa-v3's configuration), exact arithmetic (a binary
  search among integer thresholds) and float32. Baseline: transformers'
  ``make_log_bucket_position`` (float32 ``log``) then ``.to(torch.long)``;
* DeBERTa buckets (NumPy): the same against transformers' formula restated in NumPy
  float32;
* BEiT index (PyTorch): ``relative_position_index(14, prefix_tokens=1,
  backend="torch")`` (a cached host table, copied out). Baseline: transformers'
  ``BeitRelativePositionBias.generate_relative_position_index`` without its cache
  (``__wrapped__``);
* Swin bias (PyTorch): ``relative_position_bias(table, 7)`` with a ``(169, 4)`` table.
  Baseline: transformers' ``SwinRelativePositionBias.forward()``.

``--quick`` uses small sizes and short timings (CI); nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from benchmarks.common import fmt_ms, installed, md_table, setup_torch, time_call


def _numpy_make_log_bucket_position(rel: np.ndarray, bucket_size: int, max_position: int) -> Any:
    """transformers' ``make_log_bucket_position`` in NumPy float32, line by line."""
    sign = np.sign(rel)
    mid = bucket_size // 2
    abs_pos = np.where((rel < mid) & (rel > -mid), mid - 1, np.abs(rel))
    with np.errstate(divide="ignore"):
        log_pos = (
            np.ceil(
                np.log(abs_pos.astype(np.float32) / np.float32(mid))
                / np.log(np.float32((max_position - 1) / mid))
                * np.float32(mid - 1)
            )
            + mid
        )
    return np.where(abs_pos <= mid, rel.astype(np.float32), log_pos * sign).astype(np.int64)


def run(quick: bool) -> list[list[str]]:
    import pe_core

    length = 128 if quick else 512
    budget = {"repeats": 3, "min_time": 0.05 if quick else 0.5, "max_calls": 20 if quick else 200}
    rows: list[list[str]] = []

    def row(what: str, backend: str, ours: Any, baseline: Any) -> None:
        a = time_call(ours, **budget)["median_ms"]
        b = time_call(baseline, **budget)["median_ms"]
        rows.append([what, backend, fmt_ms(a), fmt_ms(b), f"{a / b:.2f}"])

    positions = np.arange(length)
    rel = positions[:, None] - positions[None, :]
    row(
        f"DeBERTa buckets, exact ({length} x {length})",
        "numpy",
        lambda: pe_core.deberta_log_bucket(rel, 256, 512),
        lambda: _numpy_make_log_bucket_position(rel, 256, 512),
    )
    if installed("torch") and installed("transformers"):
        torch = setup_torch()
        from transformers.models.beit.modeling_beit import BeitRelativePositionBias
        from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
        from transformers.models.swin.modeling_swin import SwinRelativePositionBias

        rel_t = torch.from_numpy(rel)
        for arithmetic in ("exact", "float32"):
            row(
                f"DeBERTa buckets, {arithmetic} ({length} x {length})",
                "torch",
                lambda a=arithmetic: pe_core.deberta_log_bucket(rel_t, 256, 512, arithmetic=a),
                lambda: make_log_bucket_position(rel_t, 256, 512).to(torch.long),
            )
        generate = BeitRelativePositionBias.generate_relative_position_index.__wrapped__
        row(
            "BEiT index, 14 x 14 window and class token",
            "torch",
            lambda: pe_core.relative_position_index(14, prefix_tokens=1, backend="torch"),
            lambda: generate((14, 14)),
        )
        swin = SwinRelativePositionBias(4, (7, 7))
        table = swin.relative_position_bias_table.detach()
        row(
            "Swin bias, 7 x 7 window, 4 heads",
            "torch",
            lambda: pe_core.relative_position_bias(table, 7, backend="torch"),
            lambda: swin(),
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings (CI)")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    print(md_table(["measurement", "backend", "pe_core ms", "baseline ms", "ratio"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
