"""A bit-for-bit corpus of pe_core's public API, kept across refactors.

A fixed list of named calls of the public API (``import pe_core``, ``pe_core.nd``,
``pe_core.rope``, ``pe_core.rope_nd``, ``pe_core.rope_scaling`` and the framework
layers), chosen to reach every route of :func:`pe_core.encode` and
:func:`pe_core.apply_rope` (the few-positions lanes, the small float32 and float64
passes, runs of consecutive positions, blocked tables, gathered lookups, the exact
kernel, huge, negative and fractional positions, offsets, odd ``d``, ``out=``,
``like=``, the device path and traced calls) on every installed backend and dtype.
Each output is moved to the host as a NumPy array (bfloat16 as float32, its dtype
recorded) and stored as raw bytes with its dtype and shape. Run from the repository
root::

    python -m tests.corpus save FILE    # evaluate the corpus and store every output
    python -m tests.corpus check FILE   # evaluate again and compare bit for bit

``check`` names every case whose bytes, dtype or shape differ (with the number of
differing elements and the largest absolute difference), and every case missing
from either side; it exits with status 1 if there is any, and prints
``N cases identical`` otherwise. The script also runs by path
(``python tests/corpus.py ...``) against whichever ``pe_core`` is importable. Every
random input is drawn from a fixed seed. Importing this module runs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["build_cases", "check", "compare", "evaluate", "load", "main", "save"]

#: One case: its name and the call that computes its output.
Case = tuple[str, Callable[[], Any]]

#: One stored array: (dtype string of the original output, the host array).
Entry = tuple[str, np.ndarray]


# --------------------------------------------------------------------------- inputs


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _normal(seed: int, shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """Standard normal draws of ``shape`` from ``seed``, rounded to ``dtype``."""
    return _rng(seed).standard_normal(tuple(shape)).astype(dtype)


def _permutation(seed: int, n: int) -> np.ndarray:
    return _rng(seed).permutation(n).astype(np.int64)


class _Corpus:
    """The list of cases being built; names must be unique."""

    def __init__(self) -> None:
        self.cases: list[Case] = []
        self._names: set[str] = set()

    def add(self, name: str, fn: Callable[[], Any]) -> None:
        if name in self._names:
            raise ValueError(f"duplicate case name {name!r}")
        self._names.add(name)
        self.cases.append((name, fn))


def _installed(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class _Lazy:
    """A module imported on first use, inside a case: an import that fails then fails
    only the cases that use it (reported by name), not the whole corpus."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), attr)


@contextlib.contextmanager
def _device_path() -> Iterator[None]:
    """Every framework array treated as on an accelerator (the documented switch of
    ``pe_core_backends``, see docs/devices.md)."""
    from pe_core_backends import force_device_path

    with force_device_path():
        yield


# --------------------------------------------------------------------------- scaling

#: One valid rope-parameters dict per ``rope_type`` (docs/rope_scaling.md), plus variants.
SCALINGS: dict[str, dict[str, Any]] = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "proportional": {"rope_type": "proportional", "factor": 2.0, "partial_rotary_factor": 0.5},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 64},
    "yarn": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 256,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    },
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
    },
    "yarn_untruncated": {
        "rope_type": "yarn",
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "truncate": False,
        "attention_factor": 1.25,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.05 * j for j in range(32)],
        "long_factor": [1.0 + 0.5 * j for j in range(32)],
        "original_max_position_embeddings": 32,
        "max_position_embeddings": 128,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "legacy_type_linear": {"type": "linear", "factor": 2.0},
}

#: Whole model configs (the other form ``scaling=`` takes).
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "llama31": {
        "hidden_size": 512,
        "num_attention_heads": 8,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    "gptneox": {
        "hidden_size": 512,
        "num_attention_heads": 8,
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
        "max_position_embeddings": 2048,
    },
    "gptj": {"n_embd": 512, "n_head": 8, "rotary_dim": 16, "n_positions": 2048},
    "qwen25_yarn": {
        "head_dim": 64,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rope_scaling": {
            "type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    },
    "phi3_longrope": {
        "hidden_size": 256,
        "num_attention_heads": 4,
        "rope_theta": 10000.0,
        "max_position_embeddings": 512,
        "original_max_position_embeddings": 64,
        "rope_scaling": {
            "type": "longrope",
            "short_factor": [1.0 + 0.01 * j for j in range(32)],
            "long_factor": [1.5 + 0.25 * j for j in range(32)],
        },
    },
}

#: Gemma 3's legacy config: one rope per layer type.
GEMMA3: dict[str, Any] = {
    "head_dim": 64,
    "rope_theta": 1e6,
    "rope_local_base_freq": 1e4,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}


# --------------------------------------------------------------------------- encode


def _encode_numpy(c: _Corpus) -> None:
    import pe_core

    enc = pe_core.encode
    # the few-positions lane (default spec, <= 64 integer positions, no keywords)
    c.add("encode/lane/int64", lambda: enc(np.array([0, 1, 5, 100, -7, 65535]), 64))
    c.add("encode/lane/int32", lambda: enc(np.array([3, 1, 4, 1, 5], np.int32), 32))
    c.add("encode/lane/uint8", lambda: enc(np.arange(0, 250, 7, dtype=np.uint8), 16))
    c.add("encode/lane/int16_2d", lambda: enc(np.arange(-16, 16, dtype=np.int16).reshape(4, 8), 16))
    c.add("encode/lane/scalar_array", lambda: enc(np.array(12345), 8))
    c.add("encode/lane/d2", lambda: enc(np.array([0, 1, 2, 3]), 2))
    c.add("encode/lane/64", lambda: enc(_permutation(1, 64) * 37 - 900, 128))
    c.add("encode/lane/near_2_26", lambda: enc(np.array([2**26 - 1, -(2**26) + 1, 0]), 64))
    c.add("encode/lane/run32_d256", lambda: enc(np.arange(100, 132), 256))
    c.add("encode/lane/run64_d64", lambda: enc(np.arange(-20, 44), 64))
    c.add("encode/lane/run16_d256", lambda: enc(np.arange(7, 23), 256))
    c.add("encode/lane/run_large_start", lambda: enc(np.arange(2**40, 2**40 + 32), 128))
    c.add("encode/lane/run_2d", lambda: enc(np.arange(1000, 1032).reshape(2, 16), 256))
    c.add("encode/lane/beyond_2_26", lambda: enc(np.array([2**30, 5, -(2**33)]), 8))
    c.add("encode/general/65_positions", lambda: enc(np.arange(65) * 3, 64))
    c.add("encode/general/python_int", lambda: enc(7, 16))
    c.add("encode/general/python_list", lambda: enc([0, 1, 2, 10**6], 16))
    c.add("encode/general/range", lambda: enc(range(10), 16))
    c.add("encode/general/python_float", lambda: enc(2.5, 16))
    # the small float32 pass through the general route
    c.add("encode/small/spec_given", lambda: enc(np.arange(10), 64, spec="vaswani"))
    c.add("encode/small/dtype_given", lambda: enc(np.array([5, 9, -3]), 64, dtype="float32"))
    c.add(
        "encode/small/fractional_f32",
        lambda: enc(np.linspace(-3.7, 1000.25, 50).astype(np.float32), 64),
    )
    c.add("encode/small/fractional_f64", lambda: enc(np.linspace(-3.7, 1000.25, 50), 64))
    c.add("encode/small/negative", lambda: enc(np.arange(-40, 0) * 11, 32, spec="whisper"))
    c.add("encode/small/split", lambda: enc(np.arange(30), 48, spec=pe_core.Spec(layout="split")))
    # small float64 / float16 / bfloat16 passes (float64 work, rounded once)
    for dtype in ("float64", "float16", "bfloat16"):
        c.add(f"encode/small/{dtype}/int", lambda dt=dtype: enc(np.arange(-5, 35), 64, dtype=dt))
        c.add(
            f"encode/small/{dtype}/fractional",
            lambda dt=dtype: enc(np.linspace(-50.5, 800.125, 33), 32, dtype=dt),
        )
        c.add(
            f"encode/small/{dtype}/fractional_big",
            lambda dt=dtype: enc(np.array([1e5 + 0.5, -3e4 - 0.25]), 32, dtype=dt),
        )
    # runs through the general route: one start row, or the blocked tables
    c.add("encode/run/start_row", lambda: enc(range(0, 40), 128, spec="vaswani"))
    c.add("encode/run/split", lambda: enc(range(5, 45), 128, spec="whisper"))
    c.add("encode/run/offset", lambda: enc(range(0, 40), 128, spec="fairseq"))
    c.add("encode/run/float_positions", lambda: enc(np.arange(10.0, 50.0), 128, spec="vaswani"))
    c.add("encode/blocked/520x64", lambda: enc(range(520), 64))
    c.add("encode/blocked/negative", lambda: enc(range(-300, 300), 64))
    c.add("encode/blocked/far", lambda: enc(range(10**12, 10**12 + 600), 64))
    c.add("encode/blocked/whisper", lambda: enc(np.arange(600), 64, spec="whisper"))
    c.add("encode/blocked/fairseq_odd", lambda: enc(np.arange(600), 65, spec="fairseq"))
    c.add("encode/blocked/float64", lambda: enc(range(600), 64, dtype="float64"))
    c.add("encode/blocked/float16", lambda: enc(range(600), 64, dtype="float16"))
    c.add("encode/blocked/bfloat16", lambda: enc(range(600), 64, dtype="bfloat16"))
    c.add("encode/blocked/2d", lambda: enc(np.arange(1024).reshape(4, 256), 32))
    c.add(
        "encode/blocked/frac_offset",
        lambda: enc(range(600), 64, spec=pe_core.Spec(offset=0.5)),
    )
    # gathered lookups
    c.add("encode/gather/permutation", lambda: enc(_permutation(2, 1024), 32))
    c.add(
        "encode/gather/offsets",
        lambda: enc(np.array([0, 1000, 50, 7])[:, None] + np.arange(256), 32),
    )
    c.add("encode/gather/float_ints", lambda: enc(_permutation(3, 1024).astype(np.float64), 32))
    c.add("encode/gather/split", lambda: enc(_permutation(4, 2048), 64, spec="whisper"))
    c.add("encode/gather/fairseq", lambda: enc(_permutation(5, 2048), 64, spec="fairseq"))
    c.add("encode/gather/float64", lambda: enc(_permutation(6, 1024), 32, dtype="float64"))
    c.add("encode/gather/odd_d", lambda: enc(_permutation(7, 1024), 33, spec="tensor2tensor"))
    c.add("encode/gather/far", lambda: enc(_permutation(8, 1024) - 10**15, 32))
    # the exact kernel (wide, huge, fractional)
    c.add("encode/kernel/wide", lambda: enc(np.arange(256) * 10**6, 128))
    c.add(
        "encode/kernel/huge_ints",
        lambda: enc(np.array([10**15, 2**62, -(2**62), 0, 1, 2**63 - 1, -(2**63)]), 64),
    )
    c.add("encode/kernel/uint64_max", lambda: enc(np.array([2**64 - 1, 2**63], np.uint64), 32))
    c.add("encode/kernel/huge_list", lambda: enc([10**15, 2**62, 3], 16))
    c.add(
        "encode/kernel/huge_floats",
        lambda: enc(np.array([1e300, -(2.0**70), 2.0**62 + 2048.0, 1e18, -1e-300]), 64),
    )
    c.add("encode/kernel/big_fraction", lambda: enc(np.array([1e8 + 0.25, -7e9 - 0.5]), 64))
    c.add(
        "encode/kernel/big_fraction_f64", lambda: enc(np.array([1e8 + 0.25]), 64, dtype="float64")
    )
    c.add(
        "encode/kernel/many_fractional",
        lambda: enc(np.arange(2000) * 1.5 + 0.25, 32),
    )
    c.add("encode/kernel/float16_positions", lambda: enc(np.arange(40, dtype=np.float16), 16))
    c.add("encode/kernel/float32_big", lambda: enc(np.array([3e7, 1.5e9], np.float32), 32))
    # offsets and specs
    specs = {
        "offset_frac": pe_core.Spec(offset=0.5),
        "offset_huge": pe_core.Spec(offset=10**18),
        "offset_negative": pe_core.Spec(offset=-3),
        "base500": pe_core.Spec(base=500.0),
        "min_timescale2": pe_core.Spec(min_timescale=2.0, base=1e4),
        "half_minus_one": pe_core.Spec(denominator="half_minus_one"),
        "explicit": pe_core.Spec(frequencies=(1.0, 0.5, 1e-3, math.pi)),
        "explicit_fast": pe_core.Spec(frequencies=(1e6, 3.0)),
        "zero_pad": pe_core.Spec(odd_d="zero_pad"),
    }
    for key, spec in specs.items():
        d = 8 if key.startswith("explicit") else 33 if key == "zero_pad" else 32
        if key == "explicit_fast":
            d = 4
        c.add(f"encode/spec/{key}/ints", lambda s=spec, d=d: enc(np.arange(-4, 20), d, spec=s))
        c.add(
            f"encode/spec/{key}/fractional",
            lambda s=spec, d=d: enc(np.array([0.5, -2.25, 1e3 + 0.125]), d, spec=s),
        )
        c.add(f"encode/spec/{key}/run", lambda s=spec, d=d: enc(range(700), d, spec=s))
        c.add(
            f"encode/spec/{key}/float64",
            lambda s=spec, d=d: enc(np.arange(-4, 20), d, spec=s, dtype="float64"),
        )
    # out= and check_values=
    c.add("encode/out/float32", lambda: enc(range(100), 64, out=np.empty((100, 64), np.float32)))
    c.add("encode/out/float64", lambda: enc(range(100), 64, out=np.empty((100, 64), np.float64)))
    c.add("encode/out/blocked", lambda: enc(range(600), 64, out=np.empty((600, 64), np.float32)))
    c.add(
        "encode/out/gather",
        lambda: enc(_permutation(9, 1024), 32, out=np.full((1024, 32), 7.0, np.float32)),
    )
    c.add(
        "encode/out/odd",
        lambda: enc(np.arange(5), 9, spec="flax", out=np.full((5, 9), 3.0, np.float32)),
    )
    c.add("encode/out/few", lambda: enc(np.arange(3), 8, out=np.full((3, 8), 2.0, np.float32)))
    c.add("encode/check_values", lambda: enc(np.arange(10), 16, check_values=True))
    c.add("encode/lane/numpy_int_d", lambda: enc(np.arange(5), np.int64(16)))
    c.add("encode/lane/too_many_pairs", lambda: enc(np.arange(64), 1024))
    c.add("encode/lane/odd_d_raises", lambda: enc(np.arange(3), 7))
    c.add("encode/empty/1d", lambda: enc(np.array([], np.int64), 8))
    c.add("encode/empty/2d_float", lambda: enc(np.zeros((0, 3)), 8, spec="whisper"))
    c.add("encode/empty/range", lambda: enc(range(0), 8, dtype="float64"))
    c.add("encode/run/beyond_2_52", lambda: enc(np.arange(2**60, 2**60 + 600), 64))
    c.add(
        "encode/gather/interleaved_odd",
        lambda: enc(_permutation(16, 1024), 33, spec=pe_core.Spec(odd_d="zero_pad")),
    )
    c.add("encode/backend_numpy", lambda: enc(range(10), 16, backend="numpy"))


def _encode_presets(c: _Corpus) -> None:
    import pe_core

    for name, spec in pe_core.PRESETS.items():
        if spec.axes == 1:
            c.add(
                f"preset/{name}/d64", lambda n=name: pe_core.encode(np.arange(-5, 45), 64, spec=n)
            )
            c.add(f"preset/{name}/run", lambda n=name: pe_core.encode(range(600), 64, spec=n))
            c.add(
                f"preset/{name}/fractional",
                lambda n=name: pe_core.encode(np.array([0.5, 1e6 + 0.75, -3.25]), 32, spec=n),
            )
            if spec.odd_d != "raise":
                c.add(
                    f"preset/{name}/d33", lambda n=name: pe_core.encode(np.arange(20), 33, spec=n)
                )
            c.add(f"preset/{name}/frequencies", lambda n=name: pe_core.frequencies(64, n))
            continue
        shape = (4, 6) if spec.axes == 2 else (2, 3, 4)
        d = 8 * spec.axes
        c.add(
            f"preset/{name}/grid",
            lambda n=name, s=shape, d=d: pe_core.encode(pe_core.grid(s), 4 * d, spec=n),
        )
        c.add(
            f"preset/{name}/grid_float64",
            lambda n=name, s=shape, d=d: pe_core.encode(
                pe_core.grid(s), 4 * d, spec=n, dtype="float64"
            ),
        )
        c.add(
            f"preset/{name}/coords_fractional",
            lambda n=name, k=spec.axes: pe_core.encode(
                np.linspace(-10.5, 1e4, 12 * k).reshape(12, k), 12 * k, spec=n
            ),
        )
        c.add(
            f"preset/{name}/big_grid",
            lambda n=name, k=spec.axes: pe_core.encode(
                pe_core.grid((32, 32) if k == 2 else (8, 8, 16)), 24 * k, spec=n
            ),
        )
        if spec.odd_d != "raise":
            odd = 30 if spec.axes == 2 else 44
            c.add(
                f"preset/{name}/odd_d",
                lambda n=name, s=shape, o=odd: pe_core.encode(pe_core.grid(s), o, spec=n),
            )
        c.add(f"preset/{name}/frequencies", lambda n=name, d=d: pe_core.frequencies(4 * d, n))
        c.add(
            f"preset/{name}/grid_encoding",
            lambda n=name, s=shape, d=d: pe_core.grid_encoding(4 * d, s, spec=n),
        )
    c.add("preset/spec_fields", lambda: _spec_fields(pe_core.PRESETS))


def _spec_fields(presets: Any) -> str:
    """The presets' fields as text (a renamed or changed preset shows)."""
    return json.dumps(
        {
            name: [spec.base, spec.min_timescale, spec.denominator, spec.frequencies]
            + [spec.layout, spec.offset, spec.odd_d, spec.axes, spec.axis_order]
            for name, spec in presets.items()
        },
        sort_keys=True,
    )


def _encode_jax(c: _Corpus) -> None:
    import jax
    import jax.numpy as jnp

    import pe_core

    enc = pe_core.encode
    c.add("encode/jax/range", lambda: enc(range(20), 32, backend="jax"))
    c.add("encode/jax/int_array", lambda: enc(jnp.arange(-5, 30), 64))
    c.add("encode/jax/lane_like", lambda: enc(jnp.array([1, 2, 3], jnp.int32), 16))
    c.add("encode/jax/float_array", lambda: enc(jnp.linspace(-3.5, 900.25, 40), 64))
    c.add("encode/jax/blocked", lambda: enc(jnp.arange(600), 64))
    c.add("encode/jax/gather", lambda: enc(jnp.asarray(_permutation(10, 1024)), 32))
    c.add("encode/jax/huge", lambda: enc(np.array([10**15, 2**62, -5]), 32, backend="jax"))
    c.add("encode/jax/float16", lambda: enc(range(40), 32, backend="jax", dtype="float16"))
    c.add("encode/jax/bfloat16", lambda: enc(range(40), 32, backend="jax", dtype="bfloat16"))
    c.add(
        "encode/jax/bfloat16_blocked", lambda: enc(range(600), 64, backend="jax", dtype="bfloat16")
    )
    c.add("encode/jax/like", lambda: enc(range(30), 16, like=jnp.zeros(3)))
    c.add("encode/jax/odd", lambda: enc(jnp.arange(12), 17, spec="tensor2tensor"))
    c.add("encode/jax/nd", lambda: enc(pe_core.grid((4, 5), backend="jax"), 32, spec="mae_2d"))

    def device(pos: Any, d: int, **kwargs: Any) -> Callable[[], Any]:
        def run() -> Any:
            with _device_path():
                return enc(pos, d, **kwargs)

        return run

    c.add("encode/jax/device/int5", device(jnp.arange(5), 32))
    c.add("encode/jax/device/int100", device(jnp.arange(100) * 7 - 50, 64))
    c.add("encode/jax/device/float", device(jnp.linspace(-40.5, 1e5, 20), 32))
    c.add("encode/jax/device/float16", device(jnp.arange(9), 16, dtype="float16"))
    c.add("encode/jax/device/bfloat16", device(jnp.arange(9), 16, dtype="bfloat16"))
    c.add("encode/jax/device/split", device(jnp.arange(9), 16, spec="whisper"))
    c.add("encode/jax/device/offset", device(jnp.arange(9), 17, spec="fairseq"))
    c.add("encode/jax/device/nd", device(pe_core.grid((3, 4), backend="jax"), 16, spec="mae_2d"))
    c.add("encode/jax/device/like", device(range(12), 16, like=jnp.zeros(2)))
    c.add("encode/jax/device/uint32", device(jnp.array([2**32 - 1, 2**31, 5], jnp.uint32), 16))
    c.add("encode/jax/device/int16", device(jnp.array([-(2**15), 2**15 - 1], jnp.int16), 16))
    c.add("encode/jax/device/float16_pos", device(jnp.array([0.5, 1000.0, -3.25], jnp.float16), 16))
    c.add("encode/jax/device/big_float", device(jnp.array([3e9 + 128.0, -1e12], jnp.float32), 16))

    c.add("encode/jax/jit/int", lambda: jax.jit(lambda p: enc(p, 32))(jnp.arange(-3, 17)))
    c.add(
        "encode/jax/jit/float",
        lambda: jax.jit(lambda p: enc(p, 32, spec="whisper"))(jnp.linspace(-7.25, 3e4, 11)),
    )
    c.add(
        "encode/jax/jit/float16",
        lambda: jax.jit(lambda p: enc(p, 16, dtype="float16"))(jnp.arange(8)),
    )
    c.add(
        "encode/jax/jit/host_positions",
        lambda: jax.jit(lambda: enc(np.arange(6), 16, backend="jax"))(),
    )
    c.add(
        "encode/jax/jit/nd",
        lambda: jax.jit(lambda g: enc(g, 24, spec="positional_encodings_2d"))(
            pe_core.grid((3, 3), backend="jax")
        ),
    )


def _encode_torch(c: _Corpus) -> None:
    import torch

    import pe_core

    enc = pe_core.encode
    c.add("encode/torch/range", lambda: enc(range(20), 32, backend="torch"))
    c.add("encode/torch/lane", lambda: enc(torch.tensor([0, 5, 9, 100]), 64))
    c.add("encode/torch/lane_run", lambda: enc(torch.arange(50, 90), 128))
    c.add("encode/torch/int_array", lambda: enc(torch.arange(-5, 80), 64))
    c.add("encode/torch/float_array", lambda: enc(torch.linspace(-3.5, 900.25, 40), 64))
    c.add("encode/torch/float64_positions", lambda: enc(torch.arange(30, dtype=torch.float64), 16))
    c.add("encode/torch/blocked", lambda: enc(torch.arange(600), 64))
    c.add("encode/torch/blocked_split", lambda: enc(torch.arange(600), 64, spec="whisper"))
    c.add("encode/torch/blocked_float64", lambda: enc(torch.arange(600), 64, dtype="float64"))
    c.add("encode/torch/gather", lambda: enc(torch.from_numpy(_permutation(11, 1024)), 32))
    c.add(
        "encode/torch/gather_split",
        lambda: enc(torch.from_numpy(_permutation(12, 1024)), 32, spec="whisper"),
    )
    c.add("encode/torch/huge", lambda: enc(torch.tensor([10**15, 2**62, -5]), 32))
    c.add(
        "encode/torch/huge_float",
        lambda: enc(torch.tensor([1e300, -1e20], dtype=torch.float64), 32),
    )
    for dtype in ("float16", "bfloat16", "float64"):
        c.add(
            f"encode/torch/{dtype}", lambda dt=dtype: enc(range(40), 32, backend="torch", dtype=dt)
        )
        c.add(
            f"encode/torch/{dtype}_blocked",
            lambda dt=dtype: enc(range(600), 64, backend="torch", dtype=dt),
        )
    c.add(
        "encode/torch/out",
        lambda: enc(torch.arange(50), 32, out=torch.full((50, 32), 5.0)),
    )
    c.add(
        "encode/torch/out_blocked",
        lambda: enc(range(600), 64, out=torch.empty(600, 64)),
    )
    c.add(
        "encode/torch/out_bfloat16",
        lambda: enc(range(20), 16, out=torch.empty(20, 16, dtype=torch.bfloat16)),
    )
    c.add("encode/torch/like", lambda: enc(range(30), 16, like=torch.zeros(3)))
    c.add("encode/torch/odd", lambda: enc(torch.arange(12), 17, spec="tensor2tensor"))
    c.add("encode/torch/nd", lambda: enc(pe_core.grid((4, 5), backend="torch"), 32, spec="mae_2d"))

    def grad_positions() -> Any:
        pos = torch.linspace(-5.5, 300.25, 17, dtype=torch.float32).requires_grad_(True)
        return enc(pos, 32)

    c.add("encode/torch/requires_grad", grad_positions)

    def device(pos: Callable[[], Any], d: int, **kwargs: Any) -> Callable[[], Any]:
        def run() -> Any:
            with _device_path():
                return enc(pos(), d, **kwargs)

        return run

    c.add("encode/torch/device/int", device(lambda: torch.arange(-10, 90), 64))
    c.add("encode/torch/device/huge", device(lambda: torch.tensor([2**62, -(10**15), 3]), 32))
    c.add(
        "encode/torch/device/float",
        device(lambda: torch.tensor([0.5, -2.25, 1e6 + 0.5, 1e20, 2.0**70]), 32),
    )
    c.add(
        "encode/torch/device/float64",
        device(lambda: torch.linspace(-9.5, 7e4, 13, dtype=torch.float64), 32, dtype="float64"),
    )
    c.add("encode/torch/device/float16", device(lambda: torch.arange(9), 16, dtype="float16"))
    c.add("encode/torch/device/bfloat16", device(lambda: torch.arange(9), 16, dtype="bfloat16"))
    c.add("encode/torch/device/split_offset", device(lambda: torch.arange(9), 17, spec="fairseq"))
    c.add(
        "encode/torch/device/out",
        device(lambda: torch.arange(9), 16, out=torch.zeros(9, 16)),
    )
    c.add("encode/torch/device/like", device(lambda: range(12), 16, like=torch.zeros(2)))
    c.add(
        "encode/torch/device/like_blocked",
        device(lambda: range(600), 64, like=torch.zeros(2)),
    )
    c.add(
        "encode/torch/device/like_float16",
        device(lambda: np.arange(40), 32, like=torch.zeros(2), dtype="float16"),
    )
    c.add(
        "encode/torch/device/out_odd",
        device(lambda: torch.arange(9), 17, spec="fairseq", out=torch.zeros(9, 17)),
    )
    c.add(
        "encode/torch/device/checked_huge",
        device(lambda: torch.tensor([1e300, 3.5], dtype=torch.float64), 16, check_values=True),
    )
    c.add(
        "encode/torch/device/uint8",
        device(lambda: torch.arange(0, 250, 9, dtype=torch.uint8), 16),
    )
    c.add(
        "encode/torch/device/int32",
        device(lambda: torch.tensor([2**31 - 1, -(2**31), 7], dtype=torch.int32), 16),
    )
    c.add(
        "encode/torch/device/like_gather",
        device(lambda: _permutation(17, 1024), 32, like=torch.zeros(2)),
    )
    c.add(
        "encode/torch/device/nd",
        device(lambda: pe_core.grid((3, 4), backend="torch"), 16, spec="mae_2d"),
    )


def _encode_tensorflow(c: _Corpus) -> None:
    import tensorflow as tf

    import pe_core

    enc = pe_core.encode
    c.add("encode/tf/range", lambda: enc(range(20), 32, backend="tensorflow"))
    c.add("encode/tf/int_array", lambda: enc(tf.range(-5, 80), 64))
    c.add("encode/tf/float_array", lambda: enc(tf.linspace(-3.5, 900.25, 40), 64))
    c.add("encode/tf/blocked", lambda: enc(tf.range(600), 64))
    c.add("encode/tf/blocked_split", lambda: enc(tf.range(600), 64, spec="whisper"))
    c.add("encode/tf/gather_like", lambda: enc(tf.constant(_permutation(13, 1024)), 32))
    c.add("encode/tf/huge", lambda: enc(tf.constant([10**15, 2**62, -5], tf.int64), 32))
    for dtype in ("float16", "bfloat16", "float64"):
        c.add(
            f"encode/tf/{dtype}",
            lambda dt=dtype: enc(range(40), 32, backend="tensorflow", dtype=dt),
        )
        c.add(
            f"encode/tf/{dtype}_blocked",
            lambda dt=dtype: enc(range(600), 64, backend="tensorflow", dtype=dt),
        )
    c.add("encode/tf/like", lambda: enc(range(30), 16, like=tf.zeros(3)))
    c.add("encode/tf/odd", lambda: enc(tf.range(12), 17, spec="tensor2tensor"))
    c.add(
        "encode/tf/nd", lambda: enc(pe_core.grid((4, 5), backend="tensorflow"), 32, spec="mae_2d")
    )

    def device(pos: Callable[[], Any], d: int, **kwargs: Any) -> Callable[[], Any]:
        def run() -> Any:
            with _device_path():
                return enc(pos(), d, **kwargs)

        return run

    c.add("encode/tf/device/int", device(lambda: tf.range(-10, 90), 64))
    c.add("encode/tf/device/float", device(lambda: tf.constant([0.5, -2.25, 1e6 + 0.5]), 32))
    c.add(
        "encode/tf/device/float64",
        device(lambda: tf.constant([0.5, -2.25, 1e9 + 0.5], tf.float64), 32, dtype="float64"),
    )
    c.add("encode/tf/device/bfloat16", device(lambda: tf.range(9), 16, dtype="bfloat16"))
    c.add("encode/tf/device/like", device(lambda: range(12), 16, like=tf.zeros(2)))
    c.add(
        "encode/tf/device/uint64",
        device(lambda: tf.constant([2**64 - 1, 2**63, 5], tf.uint64), 16),
    )
    c.add(
        "encode/tf/device/huge_float",
        device(lambda: tf.constant([1e300, 2.0**62, -3.5], tf.float64), 16),
    )

    c.add(
        "encode/tf/function/int",
        lambda: _tf_function(lambda p: enc(p, 32))(tf.range(-3, 17)),
    )
    c.add(
        "encode/tf/function/float",
        lambda: _tf_function(lambda p: enc(p, 32, spec="whisper"))(
            tf.constant([0.5, -7.25, 3e4 + 0.125])
        ),
    )
    c.add(
        "encode/tf/function/float16",
        lambda: _tf_function(lambda p: enc(p, 16, dtype="float16"))(tf.range(8)),
    )
    c.add(
        "encode/tf/function/host_positions",
        lambda: _tf_function(lambda: enc(np.arange(6), 16, backend="tensorflow"))(),
    )


def _tf_function(fn: Callable[..., Any]) -> Any:
    """``tf.function`` without AutoGraph (the corpus's lambdas need no conversion)."""
    import tensorflow as tf

    return tf.function(fn, autograph=False)


# --------------------------------------------------------------------------- apply_rope


def _rope_numpy(c: _Corpus) -> None:
    import pe_core

    rope = pe_core.apply_rope
    x4 = _normal(100, (2, 4, 3, 64))
    # the few-positions lane
    c.add("rope/lane/seq", lambda: rope(x4, np.arange(3)))
    c.add("rope/lane/python_int", lambda: rope(x4, 17))
    c.add("rope/lane/per_example", lambda: rope(x4, np.array([[[5, 6, 7]], [[100, 101, 102]]])))
    c.add("rope/lane/interleaved", lambda: rope(x4, np.arange(3), layout="interleaved"))
    c.add("rope/lane/rotary_dim", lambda: rope(x4, np.arange(3), rotary_dim=32))
    c.add(
        "rope/lane/rotary_dim_interleaved",
        lambda: rope(x4, np.arange(3), rotary_dim=16, layout="interleaved"),
    )
    c.add("rope/lane/base", lambda: rope(x4, np.arange(3), base=500000.0))
    q = _normal(101, (1, 8, 1, 64))
    k = _normal(102, (1, 2, 1, 64))
    c.add("rope/lane/qk", lambda: rope((q, k), np.array([1000])))
    c.add("rope/lane/qk_list", lambda: rope([q, k], 2**25, layout="interleaved"))
    c.add(
        "rope/lane/spec_linear",
        lambda: rope(x4, np.arange(3), spec=pe_core.RopeSpec(scaling=SCALINGS["linear"])),
    )
    c.add(
        "rope/lane/spec_yarn",
        lambda: rope((q, k), np.array([77]), spec=pe_core.RopeSpec(scaling=SCALINGS["yarn"])),
    )
    c.add(
        "rope/lane/spec_layout",
        lambda: rope(x4, np.arange(3), spec=pe_core.RopeSpec(layout="interleaved", rotary_dim=48)),
    )
    c.add("rope/lane/64", lambda: rope(_normal(103, (64, 32)), np.arange(64) * 1000))
    c.add("rope/lane/int32", lambda: rope(x4, np.array([3, 2, 1], np.int32)))
    c.add("rope/lane/too_many_pairs", lambda: rope(_normal(112, (64, 1024)), np.arange(64)))
    c.add("rope/qk/mixed_dtypes", lambda: rope((x4, x4.astype(np.float64)), np.arange(3)))
    c.add("rope/qk/mixed_head_dim", lambda: rope((x4, x4[..., :32]), np.arange(3)))
    c.add("rope/empty", lambda: rope(_normal(113, (2, 0, 16)), np.arange(0)))
    # the general route
    x = _normal(104, (3, 200, 64))
    c.add("rope/general/200", lambda: rope(x, np.arange(200)))
    c.add("rope/general/200_interleaved", lambda: rope(x, np.arange(200), layout="interleaved"))
    c.add("rope/general/range_offset", lambda: rope(x, range(10**6, 10**6 + 200)))
    c.add("rope/general/far", lambda: rope(x, range(2**40, 2**40 + 200)))
    c.add("rope/general/negative", lambda: rope(x, np.arange(-100, 100) * 3))
    c.add("rope/general/fractional", lambda: rope(x, np.linspace(-10.5, 5000.25, 200)))
    c.add("rope/general/fractional_f32", lambda: rope(x, np.linspace(-1, 1, 200, dtype=np.float32)))
    c.add("rope/general/huge", lambda: rope(x[:, :4], np.array([10**15, 2**62, -(2**62), 1])))
    c.add("rope/general/huge_float", lambda: rope(x[:, :3], np.array([1e300, -1e18, 2.0**70])))
    c.add("rope/general/scalar_float", lambda: rope(x, 2.5))
    c.add("rope/general/check_values", lambda: rope(x4, np.arange(3), check_values=True))
    c.add("rope/general/rotary_dim", lambda: rope(x, np.arange(200), rotary_dim=24))
    xl = _normal(105, (700, 64))
    c.add("rope/general/blocked", lambda: rope(xl, np.arange(700)))
    c.add("rope/general/blocked_far", lambda: rope(xl, np.arange(700) + 10**13))
    xg = _normal(106, (1024, 32))
    c.add("rope/general/gather", lambda: rope(xg, _permutation(14, 1024)))
    c.add(
        "rope/general/gather_interleaved",
        lambda: rope(xg, _permutation(15, 1024), layout="interleaved"),
    )
    c.add(
        "rope/general/per_example_long",
        lambda: rope(_normal(107, (2, 1, 100, 32)), np.array([[[0]], [[500]]]) + np.arange(100)),
    )
    for dtype in ("float64", "float16"):
        xd = _normal(108, (2, 50, 64), dtype)
        c.add(f"rope/{dtype}/small", lambda xd=xd: rope(xd, np.arange(50)))
        c.add(f"rope/{dtype}/python_int", lambda xd=xd: rope(xd, 123456))
        c.add(
            f"rope/{dtype}/interleaved", lambda xd=xd: rope(xd, np.arange(50), layout="interleaved")
        )
        c.add(f"rope/{dtype}/fractional", lambda xd=xd: rope(xd, np.linspace(-3.5, 1e4, 50)))
        c.add(
            f"rope/{dtype}/blocked",
            lambda dt=dtype: rope(_normal(109, (700, 32), dt), np.arange(700)),
        )
        c.add(
            f"rope/{dtype}/huge",
            lambda xd=xd: rope(xd[:, :2], np.array([2**62, 10**15])),
        )
        c.add(f"rope/{dtype}/qk", lambda xd=xd: rope((xd, xd[:1]), np.arange(50)))
    c.add("rope/backend_torch", lambda: rope(x4, np.arange(3), backend="torch"))
    # scaling: every rope_type and model configs
    xs = _normal(110, (2, 40, 64))
    xs_long = _normal(111, (300, 64))
    for key, scaling in SCALINGS.items():
        c.add(f"rope/scaling/{key}", lambda s=scaling: rope(xs, np.arange(40), scaling=s))
        c.add(
            f"rope/scaling/{key}/long", lambda s=scaling: rope(xs_long, np.arange(300), scaling=s)
        )
        c.add(
            f"rope/scaling/{key}/interleaved",
            lambda s=scaling: rope(xs, np.arange(40) + 5000, scaling=s, layout="interleaved"),
        )
        c.add(f"rope/scaling/{key}/decode", lambda s=scaling: rope(xs[:, :1], 9, scaling=s))
        c.add(
            f"rope/scaling/{key}/spec",
            lambda s=scaling: rope(xs, np.arange(40), spec=pe_core.RopeSpec(scaling=s)),
        )
    c.add(
        "rope/scaling/yarn/rotary_dim",
        lambda: rope(xs, np.arange(40), scaling=SCALINGS["yarn"], rotary_dim=32),
    )
    c.add(
        "rope/scaling/linear/float64",
        lambda: rope(xs.astype(np.float64), np.arange(40), scaling=SCALINGS["linear"]),
    )
    c.add(
        "rope/scaling/longrope/float16",
        lambda: rope(xs_long.astype(np.float16), np.arange(300), scaling=SCALINGS["longrope"]),
    )
    c.add(
        "rope/scaling/dynamic/float64",
        lambda: rope(xs_long.astype(np.float64), np.arange(300), scaling=SCALINGS["dynamic"]),
    )
    for key, config in MODEL_CONFIGS.items():
        c.add(f"rope/config/{key}", lambda cfg=config: rope(xs, np.arange(40) * 31, scaling=cfg))
        c.add(
            f"rope/config/{key}/long",
            lambda cfg=config: rope(xs_long, np.arange(300), scaling=cfg),
        )
    for layer in ("full_attention", "sliding_attention"):
        c.add(
            f"rope/config/gemma3/{layer}",
            lambda lt=layer: rope(xs, np.arange(40), scaling=GEMMA3, layer_type=lt),
        )
        c.add(
            f"rope/config/gemma3/{layer}/spec",
            lambda lt=layer: rope(
                xs, np.arange(40), spec=pe_core.RopeSpec(scaling=GEMMA3, layer_type=lt)
            ),
        )


def _rope_frameworks(c: _Corpus) -> None:
    import pe_core

    rope = pe_core.apply_rope
    x_np = _normal(120, (2, 4, 3, 64))
    x_big = _normal(121, (2, 200, 64))
    xs = _normal(122, (2, 40, 64))
    if _installed("torch"):
        import torch

        def t(a: np.ndarray, dtype: Any = torch.float32) -> Any:
            return torch.tensor(a, dtype=dtype)  # a copy: rotations never touch the inputs

        c.add("rope/torch/lane", lambda: rope(t(x_np), torch.arange(3)))
        c.add("rope/torch/lane_int", lambda: rope(t(x_np), 12))
        c.add("rope/torch/lane_numpy_pos", lambda: rope(t(x_np), np.arange(3)))
        c.add(
            "rope/torch/lane_qk",
            lambda: rope((t(x_np), t(x_np[:, :2])), torch.tensor([[[1], [2], [3]]]).mT),
        )
        c.add(
            "rope/torch/lane_interleaved",
            lambda: rope(t(x_np), torch.arange(3), layout="interleaved"),
        )
        c.add("rope/torch/lane_rotary_dim", lambda: rope(t(x_np), torch.arange(3), rotary_dim=16))
        c.add("rope/torch/general", lambda: rope(t(x_big), torch.arange(200)))
        c.add("rope/torch/general_range", lambda: rope(t(x_big), range(200)))
        c.add(
            "rope/torch/general_interleaved",
            lambda: rope(t(x_big), range(200), layout="interleaved"),
        )
        c.add("rope/torch/fractional", lambda: rope(t(x_big), torch.linspace(-5.5, 1e4, 200)))
        c.add("rope/torch/huge", lambda: rope(t(x_big[:, :3]), torch.tensor([2**62, 10**15, -1])))
        c.add("rope/torch/blocked", lambda: rope(t(_normal(123, (700, 64))), torch.arange(700)))
        c.add("rope/torch/qk_mixed_backends", lambda: rope((t(x_np), x_np), np.arange(3)))
        big = _normal(130, (2, 8, 512, 64))
        for dtype in (torch.bfloat16, torch.float16):
            name = str(dtype).split(".")[-1]
            c.add(f"rope/torch/{name}/block_plan", lambda dt=dtype: rope(t(big, dt), range(512)))
            c.add(
                f"rope/torch/{name}/block_plan_per_example",
                lambda dt=dtype: rope(
                    t(big, dt), np.arange(512) + np.array([0, 10**5])[:, None, None]
                ),
            )
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            name = str(dtype).split(".")[-1]
            c.add(
                f"rope/torch/{name}/lane_shape", lambda dt=dtype: rope(t(x_np, dt), torch.arange(3))
            )
            c.add(f"rope/torch/{name}/general", lambda dt=dtype: rope(t(x_big, dt), range(200)))
            c.add(
                f"rope/torch/{name}/interleaved",
                lambda dt=dtype: rope(
                    t(x_big, dt), range(200), layout="interleaved", rotary_dim=32
                ),
            )
            c.add(
                f"rope/torch/{name}/scaling_yarn",
                lambda dt=dtype: rope(t(xs, dt), range(40), scaling=SCALINGS["yarn"]),
            )
        for key in ("linear", "dynamic", "longrope", "llama3", "proportional"):
            c.add(
                f"rope/torch/scaling/{key}",
                lambda s=SCALINGS[key]: rope(t(_normal(124, (300, 64))), range(300), scaling=s),
            )

        def grad_x() -> Any:
            x = t(x_big).requires_grad_(True)
            return rope(x, range(200))

        c.add("rope/torch/requires_grad_x", grad_x)

        def grad_pos() -> Any:
            pos = torch.linspace(0.0, 50.0, 200).requires_grad_(True)
            return rope(t(x_big), pos)

        c.add("rope/torch/requires_grad_pos", grad_pos)

        def device(fn: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                with _device_path():
                    return fn()

            return run

        c.add("rope/torch/device/tensor_pos", device(lambda: rope(t(x_big), torch.arange(200))))
        c.add("rope/torch/device/host_pos", device(lambda: rope(t(x_big), range(200))))
        c.add("rope/torch/device/lane_shape", device(lambda: rope(t(x_np), torch.arange(3))))
        c.add(
            "rope/torch/device/float_pos",
            device(lambda: rope(t(x_big), torch.linspace(-3.25, 7e5, 200))),
        )
        c.add(
            "rope/torch/device/huge",
            device(lambda: rope(t(x_big[:, :2]), torch.tensor([2**62, -(10**15)]))),
        )
        c.add(
            "rope/torch/device/float64",
            device(lambda: rope(t(x_big, torch.float64), torch.arange(200))),
        )
        c.add(
            "rope/torch/device/bfloat16",
            device(lambda: rope(t(x_big, torch.bfloat16), torch.arange(200))),
        )
        c.add(
            "rope/torch/device/bfloat16_host_pos",
            device(lambda: rope(t(x_big, torch.bfloat16), range(200))),
        )
        c.add(
            "rope/torch/device/scaling_yarn",
            device(lambda: rope(t(xs), torch.arange(40), scaling=SCALINGS["yarn"])),
        )
        c.add(
            "rope/torch/device/dynamic_checked",
            device(
                lambda: rope(
                    t(_normal(125, (300, 64))),
                    torch.arange(300),
                    scaling=SCALINGS["dynamic"],
                    check_values=True,
                )
            ),
        )
        c.add(
            "rope/torch/device/qk",
            device(lambda: rope((t(x_np), t(x_np[:, :1])), torch.arange(3), layout="interleaved")),
        )

    if _installed("jax"):
        import jax
        import jax.numpy as jnp

        def j(a: np.ndarray, dtype: Any = jnp.float32) -> Any:
            return jnp.asarray(a, dtype=dtype)

        c.add("rope/jax/small", lambda: rope(j(x_np), jnp.arange(3)))
        c.add("rope/jax/numpy_pos", lambda: rope(j(x_np), np.arange(3)))
        c.add("rope/jax/python_int", lambda: rope(j(x_np), 99))
        c.add("rope/jax/qk", lambda: rope((j(x_np), j(x_np[:, :1])), range(3)))
        c.add("rope/jax/general", lambda: rope(j(x_big), range(200)))
        c.add("rope/jax/interleaved", lambda: rope(j(x_big), jnp.arange(200), layout="interleaved"))
        c.add("rope/jax/fractional", lambda: rope(j(x_big), jnp.linspace(-5.5, 1e4, 200)))
        c.add("rope/jax/blocked", lambda: rope(j(_normal(126, (700, 64))), range(700)))
        c.add("rope/jax/huge", lambda: rope(j(x_big[:, :2]), np.array([2**62, 10**15])))
        for dtype in (jnp.float16, jnp.bfloat16):
            name = jnp.dtype(dtype).name
            c.add(f"rope/jax/{name}/general", lambda dt=dtype: rope(j(x_big, dt), range(200)))
            c.add(
                f"rope/jax/{name}/rotary_dim",
                lambda dt=dtype: rope(j(x_np, dt), jnp.arange(3), rotary_dim=32),
            )
        c.add(
            "rope/jax/scaling/longrope",
            lambda: rope(j(_normal(127, (300, 64))), range(300), scaling=SCALINGS["longrope"]),
        )
        c.add("rope/jax/scaling/yarn", lambda: rope(j(xs), range(40), scaling=SCALINGS["yarn"]))

        def jdevice(fn: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                with _device_path():
                    return fn()

            return run

        c.add("rope/jax/device/array_pos", jdevice(lambda: rope(j(x_big), jnp.arange(200))))
        c.add("rope/jax/device/host_pos", jdevice(lambda: rope(j(x_big), range(200))))
        c.add(
            "rope/jax/device/bfloat16",
            jdevice(lambda: rope(j(x_big, jnp.bfloat16), jnp.arange(200))),
        )
        c.add(
            "rope/jax/jit/array_pos",
            lambda: jax.jit(lambda x, p: rope(x, p))(j(x_big), jnp.arange(200)),
        )
        c.add(
            "rope/jax/jit/host_pos",
            lambda: jax.jit(lambda x: rope(x, np.arange(200), layout="interleaved"))(j(x_big)),
        )
        c.add(
            "rope/jax/jit/float16_yarn",
            lambda: jax.jit(lambda x, p: rope(x, p, scaling=SCALINGS["yarn"]))(
                j(xs, jnp.float16), jnp.arange(40) * 100
            ),
        )
        c.add(
            "rope/jax/jit/qk",
            lambda: jax.jit(lambda q, k, p: rope((q, k), p))(
                j(x_np), j(x_np[:, :1]), jnp.arange(3) + 2**20
            ),
        )

    if _installed("tensorflow"):
        import tensorflow as tf

        def f(a: np.ndarray, dtype: Any = tf.float32) -> Any:
            return tf.cast(tf.constant(a), dtype)

        c.add("rope/tf/small", lambda: rope(f(x_np), tf.range(3)))
        c.add("rope/tf/numpy_pos", lambda: rope(f(x_np), np.arange(3)))
        c.add("rope/tf/general", lambda: rope(f(x_big), range(200)))
        c.add("rope/tf/interleaved", lambda: rope(f(x_big), tf.range(200), layout="interleaved"))
        c.add("rope/tf/fractional", lambda: rope(f(x_big), tf.linspace(-5.5, 1e4, 200)))
        c.add("rope/tf/blocked", lambda: rope(f(_normal(128, (700, 64))), range(700)))
        for dtype in (tf.float16, tf.bfloat16, tf.float64):
            c.add(f"rope/tf/{dtype.name}/general", lambda dt=dtype: rope(f(x_big, dt), range(200)))
        c.add(
            "rope/tf/scaling/dynamic",
            lambda: rope(f(_normal(129, (300, 64))), range(300), scaling=SCALINGS["dynamic"]),
        )

        def tdevice(fn: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                with _device_path():
                    return fn()

            return run

        c.add("rope/tf/device/array_pos", tdevice(lambda: rope(f(x_big), tf.range(200))))
        c.add("rope/tf/device/host_pos", tdevice(lambda: rope(f(x_big), range(200))))
        c.add(
            "rope/tf/function/array_pos",
            lambda: _tf_function(lambda x, p: rope(x, p))(f(x_big), tf.range(200)),
        )
        c.add(
            "rope/tf/function/float16",
            lambda: _tf_function(lambda x, p: rope(x, p, layout="interleaved"))(
                f(xs, tf.float16), tf.range(40) * 1000
            ),
        )
        c.add(
            "rope/tf/function/host_pos",
            lambda: _tf_function(lambda x: rope(x, np.arange(40), scaling=SCALINGS["linear"]))(
                f(xs)
            ),
        )


def _rope_nd(c: _Corpus) -> None:
    import pe_core

    rope_nd = _Lazy("pe_core.rope_nd")

    rope = pe_core.apply_rope
    x = _normal(140, (2, 24, 16))
    coords = pe_core.grid((2, 3, 4)).reshape(24, 3)
    c.add("rope_nd/contiguous", lambda: rope(x, coords, sections=(2, 3, 3)))
    c.add(
        "rope_nd/interleaved",
        lambda: rope(x, coords, sections=(4, 2, 2), section_layout="interleaved"),
    )
    c.add(
        "rope_nd/interleaved_layout",
        lambda: rope(x, coords * 100, sections=(2, 3, 3), layout="interleaved"),
    )
    c.add("rope_nd/per_axis", lambda: rope(x, coords, sections=(2, 3, 3), frequencies="per_axis"))
    c.add(
        "rope_nd/pixel",
        lambda: rope(
            x,
            np.linspace(-1, 1, 72).reshape(24, 3),
            sections=(2, 3, 3),
            frequencies=rope_nd.pixel_frequencies((2, 3, 3)),
        ),
    )
    c.add(
        "rope_nd/pixel_frequencies",
        lambda: np.array(rope_nd.pixel_frequencies((4, 2, 2), 7.0, "interleaved")),
    )
    c.add("rope_nd/pair_axes", lambda: np.array(rope_nd.pair_axes((4, 2, 2), "interleaved")))
    c.add(
        "rope_nd/rotary_dim",
        lambda: rope(x, coords, sections=(1, 2, 1), rotary_dim=8),
    )
    c.add(
        "rope_nd/scaling_linear",
        lambda: rope(x, coords, sections=(2, 3, 3), scaling=SCALINGS["linear"]),
    )
    c.add(
        "rope_nd/scaling_yarn_per_axis",
        lambda: rope(
            x, coords, sections=(2, 3, 3), scaling=SCALINGS["yarn"], frequencies="per_axis"
        ),
    )
    c.add("rope_nd/fractional", lambda: rope(x, coords + 0.5, sections=(2, 3, 3)))
    c.add(
        "rope_nd/array_frequencies",
        lambda: rope(x, coords, sections=(2, 3, 3), frequencies=np.linspace(0.01, 2.0, 8).tolist()),
    )
    c.add("rope_nd/huge", lambda: rope(x, coords + 10**15, sections=(2, 3, 3)))
    c.add("rope_nd/float64", lambda: rope(x.astype(np.float64), coords, sections=(2, 3, 3)))
    c.add("rope_nd/float16", lambda: rope(x.astype(np.float16), coords, sections=(2, 3, 3)))
    c.add("rope_nd/qk", lambda: rope((x, x[:1]), coords, sections=(2, 3, 3)))
    c.add(
        "rope_nd/big",
        lambda: rope(
            _normal(141, (1024, 64)),
            pe_core.grid((4, 16, 16)).reshape(-1, 3),
            sections=(8, 12, 12),
        ),
    )
    c.add(
        "rope_nd/two_axes",
        lambda: rope(_normal(142, (12, 8)), pe_core.grid((3, 4)).reshape(12, 2), sections=(2, 2)),
    )
    c.add(
        "rope_nd/apply_rope_nd",
        lambda: rope_nd.apply_rope_nd(
            x, coords, sections=(2, 3, 3), layout="interleaved", frequencies="per_axis"
        ),
    )
    qwen = {
        "head_dim": 16,
        "rope_theta": 1e6,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }
    qwen3 = {
        "text_config": {
            "head_dim": 16,
            "rope_theta": 5e6,
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [4, 2, 2],
                "mrope_interleaved": True,
            },
        }
    }
    ids = [
        [1, 2, *[151655] * 4, 3, 4, *[151656] * 8, 5],
        [0, 0, 7, 8, 9, *[151655] * 4, 10, 11, 12, 13, 14, 15, 16, 17],
    ]
    mask = [[1] * 17, [0, 0] + [1] * 15]

    def mrope_ids() -> Any:
        return pe_core.mrope_position_ids(
            ids,
            image_grid_thw=[[1, 4, 4], [1, 4, 4]],
            video_grid_thw=[[2, 4, 4]],
            attention_mask=mask,
        )

    c.add("rope_nd/mrope_position_ids", mrope_ids)
    c.add("rope_nd/rope_sections/qwen2", lambda: pe_core.rope_sections(qwen))
    c.add("rope_nd/rope_sections/qwen3", lambda: pe_core.rope_sections(qwen3))

    def mrope_apply(config: dict[str, Any]) -> Callable[[], Any]:
        def run() -> Any:
            pos, _ = mrope_ids()
            sections = pe_core.rope_sections(config)
            text = config.get("text_config", config)
            xq = _normal(143, (2, 2, 17, 16))
            return rope(
                xq,
                np.asarray(pos)[:, None],
                sections=sections.sections,
                section_layout=sections.section_layout,
                scaling=text,
            )

        return run

    c.add("rope_nd/mrope/qwen2", mrope_apply(qwen))
    c.add("rope_nd/mrope/qwen3", mrope_apply(qwen3))

    if _installed("torch"):
        import torch

        xt = torch.from_numpy(x)
        c.add("rope_nd/torch", lambda: rope(xt, torch.from_numpy(coords), sections=(2, 3, 3)))
        c.add(
            "rope_nd/torch/bfloat16",
            lambda: rope(xt.bfloat16(), coords, sections=(4, 2, 2), section_layout="interleaved"),
        )

        def device() -> Any:
            with _device_path():
                return rope(
                    xt, torch.from_numpy(coords), sections=(2, 3, 3), frequencies="per_axis"
                )

        c.add("rope_nd/torch/device", device)

        def device_host() -> Any:
            with _device_path():
                return rope(xt, coords, sections=(2, 3, 3))

        c.add("rope_nd/torch/device_host_pos", device_host)
    if _installed("jax"):
        import jax
        import jax.numpy as jnp

        xj = jnp.asarray(x)
        c.add("rope_nd/jax", lambda: rope(xj, jnp.asarray(coords), sections=(2, 3, 3)))
        c.add(
            "rope_nd/jax/jit",
            lambda: jax.jit(
                lambda a, p: rope(a, p, sections=(4, 2, 2), section_layout="interleaved")
            )(xj, jnp.asarray(coords)),
        )
    if _installed("tensorflow"):
        import tensorflow as tf

        xf = tf.constant(x)
        c.add("rope_nd/tf", lambda: rope(xf, tf.constant(coords), sections=(2, 3, 3)))
        c.add(
            "rope_nd/tf/function",
            lambda: tf.function(
                lambda a, p: rope(a, p, sections=(2, 3, 3), frequencies="per_axis")
            )(xf, tf.constant(coords)),
        )


def _torch_compiled(c: _Corpus) -> None:
    """One torch.compile graph (compiling is slow) holding several calls."""
    import torch

    import pe_core

    def compiled() -> tuple[Any, ...]:
        def fn(p: Any, pf: Any, x: Any, k: Any) -> tuple[Any, ...]:
            q2, k2 = pe_core.apply_rope((x, k), p)
            return (
                pe_core.encode(p, 32),
                pe_core.encode(pf, 16, spec="whisper"),
                pe_core.apply_rope(x, pf, layout="interleaved"),
                q2,
                k2,
            )

        graph = torch.compile(fn, fullgraph=True)
        x = torch.from_numpy(_normal(150, (2, 8, 32)))
        k = torch.from_numpy(_normal(151, (1, 8, 32)))
        return tuple(graph(torch.arange(8) + 1000, torch.linspace(-3.5, 70.25, 8), x, k))

    c.add("torch_compile/graph", compiled)


# --------------------------------------------------------------------------- the rest


def _relative_and_friends(c: _Corpus) -> None:
    import pe_core

    rope_scaling = _Lazy("pe_core.rope_scaling")

    c.add("relative_matrix/int", lambda: pe_core.relative_matrix(5, 8))
    c.add("relative_matrix/float", lambda: pe_core.relative_matrix(2.5, 16, "whisper"))
    c.add("relative_matrix/array", lambda: pe_core.relative_matrix(np.array([0, -3, 10**9]), 8))
    c.add("relative_matrix/huge", lambda: pe_core.relative_matrix(2**62, 8))
    c.add("relative_matrix/float64", lambda: pe_core.relative_matrix(7, 8, dtype="float64"))
    c.add("relative_matrix/nd", lambda: pe_core.relative_matrix(np.array([1, 2]), 16, "mae_2d"))
    c.add("relative_matrix/odd", lambda: pe_core.relative_matrix(3, 9, "tensor2tensor"))
    pe = pe_core.encode(np.arange(4), 6)
    c.add("shift/int", lambda: pe_core.shift(pe, 100))
    c.add("shift/array", lambda: pe_core.shift(pe, np.array([1, 2, -5, 10**6])))
    c.add("shift/float", lambda: pe_core.shift(pe, 0.25))
    c.add(
        "shift/whisper",
        lambda: pe_core.shift(pe_core.encode(np.arange(5), 8, spec="whisper"), 3, "whisper"),
    )
    c.add(
        "shift/nd",
        lambda: pe_core.shift(
            pe_core.encode(pe_core.grid((2, 2)), 16, spec="mae_2d"), np.array([3, 4]), "mae_2d"
        ),
    )
    c.add("frequencies/default", lambda: pe_core.frequencies(64))
    c.add("frequencies/odd", lambda: pe_core.frequencies(65, "tensor2tensor"))
    c.add(
        "frequencies/explicit", lambda: pe_core.frequencies(6, pe_core.Spec(frequencies=(1, 2, 3)))
    )
    c.add(
        "frequencies/base",
        lambda: pe_core.frequencies(10, pe_core.Spec(base=77.0, min_timescale=0.5)),
    )
    for key, scaling in SCALINGS.items():
        config = {"head_dim": 64, "rope_theta": 10000.0, "rope_parameters": dict(scaling)}
        if "max_position_embeddings" in config["rope_parameters"]:
            config["max_position_embeddings"] = config["rope_parameters"].pop(
                "max_position_embeddings"
            )
        c.add(f"rope_frequencies/{key}", lambda cfg=config: pe_core.rope_frequencies(cfg))
        c.add(
            f"rope_frequencies/{key}/seq_len_1000",
            lambda cfg=config: pe_core.rope_frequencies(cfg, seq_len=1000),
        )
    for key, config in MODEL_CONFIGS.items():
        c.add(f"rope_frequencies/config/{key}", lambda cfg=config: pe_core.rope_frequencies(cfg))
    for layer in ("full_attention", "sliding_attention"):
        c.add(
            f"rope_frequencies/gemma3/{layer}",
            lambda lt=layer: pe_core.rope_frequencies(GEMMA3, layer_type=lt),
        )
    c.add("rope_scaling/types", lambda: json.dumps(sorted(rope_scaling.SCALING_TYPES)))
    c.add("rope_spec/constants", lambda: pe_core.RopeSpec(scaling=SCALINGS["yarn"]).constants(64))
    c.add(
        "rope_spec/constants_seq",
        lambda: pe_core.RopeSpec(scaling=SCALINGS["longrope"]).constants(64, seq_len=500),
    )
    c.add("ntk_aware_base", lambda: pe_core.ntk_aware_base(10000.0, 4.0, 64))
    c.add("ntk_aware_base/odd", lambda: pe_core.ntk_aware_base(500000.0, 2.5, 128))
    c.add("xpos_scale/default", lambda: pe_core.xpos_scale(np.arange(-8, 8), 32))
    c.add(
        "xpos_scale/options",
        lambda: pe_core.xpos_scale(np.arange(100) * 3, 16, scale_base=256.0, gamma=0.5),
    )
    c.add("rope_permutation/h2i", lambda: pe_core.rope_permutation(8, "half", "interleaved"))
    c.add("rope_permutation/i2h", lambda: pe_core.rope_permutation(64, "interleaved", "half"))
    c.add(
        "rope_permutation/partial",
        lambda: pe_core.rope_permutation(10, "half", "interleaved", rotary_dim=6),
    )
    for n in (1, 2, 3, 8, 12, 16, 24, 40):
        c.add(f"alibi_slopes/{n}", lambda n=n: pe_core.alibi_slopes(n))
    c.add("alibi_slopes/bias_max", lambda: pe_core.alibi_slopes(12, alibi_bias_max=16.0))
    c.add("alibi_bias/causal", lambda: pe_core.alibi_bias(5, 7, 12))
    c.add("alibi_bias/bidirectional", lambda: pe_core.alibi_bias(6, 6, 5, causal=False))
    c.add("alibi_bias/decode", lambda: pe_core.alibi_bias(1, 9, 4))
    c.add("alibi_bias/float16", lambda: pe_core.alibi_bias(4, 4, 3, dtype="float16"))
    c.add(
        "alibi_bias/float64",
        lambda: pe_core.alibi_bias(4, 4, 3, dtype="float64", alibi_bias_max=6.0),
    )
    t5 = np.arange(-300, 300)
    c.add("t5_relative_bucket/default", lambda: pe_core.t5_relative_bucket(t5))
    c.add(
        "t5_relative_bucket/unidirectional",
        lambda: pe_core.t5_relative_bucket(t5, bidirectional=False),
    )
    c.add(
        "t5_relative_bucket/small",
        lambda: pe_core.t5_relative_bucket(t5 * 7, num_buckets=16, max_distance=64),
    )
    c.add(
        "t5_relative_bucket/exact",
        lambda: pe_core.t5_relative_bucket(
            t5 * 1000, num_buckets=64, max_distance=4096, arithmetic="exact"
        ),
    )
    c.add(
        "t5_relative_bucket/huge",
        lambda: pe_core.t5_relative_bucket(np.array([-(2**62), 2**62, 0])),
    )
    c.add("t5_bucket_matrix/default", lambda: pe_core.t5_bucket_matrix(5, 9))
    c.add(
        "t5_bucket_matrix/offset",
        lambda: pe_core.t5_bucket_matrix(1, 300, offset=299, bidirectional=False),
    )
    table = _normal(160, (32, 4))
    c.add("t5_relative_bias/default", lambda: pe_core.t5_relative_bias(4, 6, table))
    c.add(
        "t5_relative_bias/offset",
        lambda: pe_core.t5_relative_bias(2, 50, table, offset=48, bidirectional=False),
    )
    c.add("binary_encode/range", lambda: pe_core.binary_encode(range(20), 6))
    c.add(
        "binary_encode/2d",
        lambda: pe_core.binary_encode(np.arange(12).reshape(3, 4), 4, dtype="float64"),
    )
    c.add("binary_encode/big", lambda: pe_core.binary_encode(np.array([2**40 + 5, 0]), 48))
    c.add("normalized_positions/7", lambda: pe_core.normalized_positions(7))
    c.add("normalized_positions/1", lambda: pe_core.normalized_positions(1))
    c.add(
        "normalized_positions/float64", lambda: pe_core.normalized_positions(1000, dtype="float64")
    )
    c.add("learned_table_init/default", lambda: pe_core.learned_table_init(16, 8))
    c.add(
        "learned_table_init/options",
        lambda: pe_core.learned_table_init(40, 12, seed=3, std=0.1, dtype="float64"),
    )
    c.add("transformer_xl/basic", lambda: pe_core.transformer_xl_embedding(5, 16))
    c.add(
        "transformer_xl/mem_clamp",
        lambda: pe_core.transformer_xl_embedding(5, 16, mem_len=3, clamp_len=4),
    )
    c.add(
        "transformer_xl/float64",
        lambda: pe_core.transformer_xl_embedding(300, 64, mem_len=400, dtype="float64"),
    )
    c.add("grid/2d", lambda: pe_core.grid((3, 4)))
    c.add("grid/3d_float", lambda: pe_core.grid((2, 2, 3), dtype="float32"))
    c.add("grid/int", lambda: pe_core.grid(5))
    c.add("grid/int32", lambda: pe_core.grid((2, 3), dtype="int32"))
    c.add("grid/float16", lambda: pe_core.grid((2, 3), dtype="float16"))
    c.add("encode/nd/list_coords", lambda: pe_core.encode([[0, 1], [5, 7]], 16, spec="mae_2d"))
    c.add(
        "encode/nd/out",
        lambda: pe_core.encode(
            pe_core.grid((3, 4)), 16, spec="mae_2d", out=np.full((3, 4, 16), 9.0, np.float32)
        ),
    )
    c.add(
        "relative_matrix/nd_zero_pad",
        lambda: pe_core.relative_matrix([1, 2], 10, "tensor2tensor_2d"),
    )
    c.add(
        "shift/nd_zero_pad",
        lambda: pe_core.shift(
            pe_core.encode(pe_core.grid((2, 2)), 10, spec="tensor2tensor_2d").tolist(),
            [3, 4],
            "tensor2tensor_2d",
        ),
    )
    c.add("grid_encoding/default", lambda: pe_core.grid_encoding(16, (3, 4), extra_tokens=1))
    c.add(
        "grid_encoding/diffusers",
        lambda: pe_core.grid_encoding(32, (6, 8), base_size=4, interpolation_scale=1.5),
    )
    c.add(
        "grid_encoding/t2t",
        lambda: pe_core.grid_encoding(30, (5, 5), spec="tensor2tensor_2d", dtype="float64"),
    )
    c.add("grid_encoding/3d", lambda: pe_core.grid_encoding(24, (2, 3, 4), spec="tensor2tensor_3d"))
    c.add("grid_encoding/bfloat16", lambda: pe_core.grid_encoding(16, (4, 4), dtype="bfloat16"))
    for backend in ("jax", "torch", "tensorflow"):
        if not _installed(backend):
            continue
        b = backend
        c.add(f"alibi_bias/{b}", lambda b=b: pe_core.alibi_bias(5, 7, 6, backend=b))
        c.add(
            f"alibi_bias/{b}/bfloat16",
            lambda b=b: pe_core.alibi_bias(3, 5, 4, backend=b, dtype="bfloat16"),
        )
        c.add(f"t5_relative_bucket/{b}", lambda b=b: pe_core.t5_relative_bucket(t5, backend=b))
        c.add(f"t5_bucket_matrix/{b}", lambda b=b: pe_core.t5_bucket_matrix(4, 8, backend=b))
        c.add(f"binary_encode/{b}", lambda b=b: pe_core.binary_encode(range(10), 5, backend=b))
        c.add(f"normalized_positions/{b}", lambda b=b: pe_core.normalized_positions(9, backend=b))
        c.add(f"learned_table_init/{b}", lambda b=b: pe_core.learned_table_init(8, 4, backend=b))
        c.add(
            f"transformer_xl/{b}",
            lambda b=b: pe_core.transformer_xl_embedding(6, 16, mem_len=2, backend=b),
        )
        c.add(f"relative_matrix/{b}", lambda b=b: pe_core.relative_matrix(5, 8, backend=b))
        c.add(f"grid/{b}", lambda b=b: pe_core.grid((2, 3), backend=b))
        c.add(f"grid_encoding/{b}", lambda b=b: pe_core.grid_encoding(16, (3, 4), backend=b))
        c.add(
            f"normalized_positions/{b}/bfloat16",
            lambda b=b: pe_core.normalized_positions(9, backend=b, dtype="bfloat16"),
        )
    if _installed("torch"):
        import torch

        c.add(
            "shift/torch",
            lambda: pe_core.shift(pe_core.encode(torch.arange(4), 8), torch.tensor([1, 2, 3, 4])),
        )
        c.add(
            "t5_relative_bias/torch",
            lambda: pe_core.t5_relative_bias(3, 5, torch.from_numpy(table)),
        )
        c.add("alibi_bias/torch/like", lambda: pe_core.alibi_bias(3, 4, 2, like=torch.zeros(1)))

        def alibi_device() -> Any:
            with _device_path():
                return pe_core.alibi_bias(3, 4, 2, like=torch.zeros(1), dtype="float16")

        c.add("alibi_bias/torch/device_like", alibi_device)
        c.add(
            "t5_bucket_matrix/torch/offsets",
            lambda: pe_core.t5_bucket_matrix(2, 5, offset=torch.tensor([0, 3, 100])),
        )
        c.add(
            "transformer_xl/torch/like",
            lambda: pe_core.transformer_xl_embedding(4, 8, mem_len=2, like=torch.zeros(1)),
        )
    if _installed("jax"):
        import jax.numpy as jnp

        c.add(
            "t5_relative_bias/jax/table",
            lambda: pe_core.t5_relative_bias(3, 6, jnp.asarray(table), offset=2),
        )
        c.add(
            "t5_relative_bias/jax/offsets",
            lambda: pe_core.t5_relative_bias(2, 4, jnp.asarray(table), offset=jnp.array([0, 9])),
        )


# --------------------------------------------------------------------------- layers


def _layers(c: _Corpus) -> None:
    x = _normal(170, (2, 10, 64))
    q = _normal(171, (2, 4, 10, 32))
    k = _normal(172, (2, 2, 10, 32))
    patches = _normal(173, (2, 12, 16))
    if _installed("torch"):
        import torch

        layers = _Lazy("pe_core.layers.torch")

        xt, qt, kt = (torch.from_numpy(a) for a in (x, q, k))
        c.add("layers/torch/sinusoidal", lambda: layers.SinusoidalEncoding(64)(xt, offset=5))
        c.add(
            "layers/torch/sinusoidal_offsets",
            lambda: layers.SinusoidalEncoding(64, spec="fairseq")(
                xt, offset=torch.tensor([0, 10**6])
            ),
        )
        c.add(
            "layers/torch/sinusoidal_cache",
            lambda: layers.SinusoidalEncoding(64, 0.0, 16)(xt.double()),
        )
        c.add(
            "layers/torch/sinusoidal_seq_first",
            lambda: layers.SinusoidalEncoding(64, batch_first=False)(xt.transpose(0, 1).half()),
        )
        c.add("layers/torch/rotary", lambda: layers.RotaryEmbedding(32)(qt, kt))
        c.add(
            "layers/torch/rotary_offset",
            lambda: layers.RotaryEmbedding(32, layout="interleaved", rotary_dim=16)(
                qt, kt, offset=100
            ),
        )
        c.add(
            "layers/torch/rotary_scaling",
            lambda: layers.RotaryEmbedding(32, scaling=SCALINGS["yarn"])(
                qt.bfloat16(), kt.bfloat16()
            ),
        )
        c.add(
            "layers/torch/rotary_offsets",
            lambda: layers.RotaryEmbedding(32)(qt, kt, offset=torch.tensor([3, 900])),
        )
        c.add(
            "layers/torch/rotary_nd",
            lambda: layers.RotaryEmbeddingND(32, (4, 6, 6), grid_shape=(2, 5, 1))(
                qt, kt, positions=_grid_rows((2, 5, 1)) * 3
            ),
        )
        c.add(
            "layers/torch/rotary_nd_grid",
            lambda: layers.RotaryEmbeddingND(32, (8, 8), grid_shape=(2, 5))(qt, kt),
        )
        c.add(
            "layers/torch/patch",
            lambda: layers.SinusoidalPatchEncoding(16, grid_shape=(3, 4), spec="mae_2d")(
                torch.from_numpy(patches)
            ),
        )
        c.add("layers/torch/alibi", lambda: layers.AlibiBias(6)(4, 7))

        def t5_layer() -> Any:
            torch.manual_seed(0)
            return layers.T5RelativeBias(4)(5, 8, offset=2)

        c.add("layers/torch/t5", t5_layer)
    if _installed("flax"):
        import jax.numpy as jnp

        layers_flax = _Lazy("pe_core.layers.flax")

        xj, qj, kj = (jnp.asarray(a) for a in (x, q, k))
        c.add("layers/flax/sinusoidal", lambda: layers_flax.SinusoidalEncoding(64)(xj, offset=5))
        c.add(
            "layers/flax/sinusoidal_offsets",
            lambda: layers_flax.SinusoidalEncoding(64, spec="whisper")(
                xj, offset=jnp.array([0, 77])
            ),
        )
        c.add("layers/flax/rotary", lambda: layers_flax.RotaryEmbedding(32)(qj, kj))
        c.add(
            "layers/flax/rotary_scaling",
            lambda: layers_flax.RotaryEmbedding(32, scaling=SCALINGS["llama3"])(qj, kj, offset=50),
        )
        c.add(
            "layers/flax/patch",
            lambda: layers_flax.SinusoidalPatchEncoding(16, grid_shape=(3, 4), spec="mae_2d")(
                jnp.asarray(patches)
            ),
        )
        c.add(
            "layers/flax/rotary_nd",
            lambda: layers_flax.RotaryEmbeddingND(32, (8, 8), grid_shape=(2, 5))(qj, kj),
        )
        c.add("layers/flax/alibi", lambda: layers_flax.AlibiBias(6)(4, 7))
        c.add(
            "layers/flax/sinusoidal_cache",
            lambda: layers_flax.SinusoidalEncoding(64, max_len=32)(xj, offset=3),
        )
        c.add(
            "layers/flax/linen_sinusoidal",
            lambda: layers_flax.LinenSinusoidalEncoding(64, spec="flax").apply({}, xj),
        )
        c.add(
            "layers/flax/linen_rotary",
            lambda: layers_flax.LinenRotaryEmbedding(32, layout="interleaved").apply({}, qj, kj),
        )
    if _installed("keras"):
        layers_keras = _Lazy("pe_core.layers.keras")

        c.add("layers/keras/sinusoidal", lambda: layers_keras.SinusoidalEncoding(64)(x))
        c.add(
            "layers/keras/sinusoidal_offset",
            lambda: layers_keras.SinusoidalEncoding(64, spec="tensor2tensor")(x, offset=1000),
        )
        c.add("layers/keras/rotary", lambda: layers_keras.RotaryEmbedding(32)(q, k))
        c.add(
            "layers/keras/rotary_offset",
            lambda: layers_keras.RotaryEmbedding(32, layout="interleaved")(q, k, offset=12),
        )
        c.add(
            "layers/keras/sinusoidal_cache",
            lambda: layers_keras.SinusoidalEncoding(64, max_len=32)(x, offset=7),
        )
        c.add(
            "layers/keras/alibi",
            lambda: layers_keras.AlibiBias(alibi_bias_max=8.0)(np.zeros((2, 6, 4, 7), np.float32)),
        )
        c.add(
            "layers/keras/rotary_nd",
            lambda: layers_keras.RotaryEmbeddingND(32, (8, 8))(q, k, _grid_rows((2, 5))),
        )
        c.add(
            "layers/keras/patch",
            lambda: layers_keras.SinusoidalPatchEncoding(16, grid_shape=(3, 4))(patches),
        )


def _grid_rows(shape: Sequence[int]) -> np.ndarray:
    """``pe_core.grid(shape)`` reshaped to ``(-1, len(shape))`` rows of coordinates."""
    import pe_core

    return np.asarray(pe_core.grid(tuple(shape))).reshape(-1, len(shape))


# --------------------------------------------------------------------------- running


def build_cases(*, compile_torch: bool = True) -> list[Case]:
    """Every case of the corpus, in a fixed order (frameworks that are not installed
    contribute none). A group whose building fails is reported on stderr and
    contributes the cases it added before failing (``check`` reports the rest missing)."""
    c = _Corpus()
    groups: list[tuple[Callable[[_Corpus], None], str | None]] = [
        (_encode_numpy, None),
        (_encode_presets, None),
        (_encode_jax, "jax"),
        (_encode_torch, "torch"),
        (_encode_tensorflow, "tensorflow"),
        (_rope_numpy, None),
        (_rope_frameworks, None),
        (_rope_nd, None),
        (_relative_and_friends, None),
        (_layers, None),
    ]
    if compile_torch:
        groups.append((_torch_compiled, "torch"))
    for builder, framework in groups:
        if framework is not None and not _installed(framework):
            continue
        try:
            builder(c)
        except Exception as exc:
            print(
                f"building {builder.__name__} failed: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
    return c.cases


def _to_host(value: Any) -> Entry:
    """``(dtype string, NumPy array)`` of one output (bfloat16 stored as float32)."""
    if isinstance(value, str):
        return "str", np.frombuffer(value.encode(), np.uint8).copy()
    if isinstance(value, (bool, int, float)):
        return type(value).__name__, np.asarray(value)
    if type(value).__module__.startswith("torch"):
        tensor = value.detach().cpu()
        dtype = str(tensor.dtype)
        if dtype == "torch.bfloat16":
            tensor = tensor.float()
        return dtype, np.ascontiguousarray(tensor.numpy())
    if not isinstance(value, (np.ndarray, np.generic)) and callable(getattr(value, "numpy", None)):
        value = value.numpy()  # TensorFlow (and Keras on it): its own host copy
    array = np.asarray(value)
    dtype = array.dtype.name
    if dtype == "bfloat16":  # ml_dtypes (JAX, TensorFlow)
        array = array.astype(np.float32)
    if array.dtype == object:
        raise TypeError(f"cannot store an output of type {type(value).__name__}")
    return dtype, np.ascontiguousarray(array)


def _flatten(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(entry name, value)`` for every array of one output (tuples element by element)."""
    if isinstance(value, (tuple, list)) and not (
        value and all(isinstance(v, (bool, int, float)) for v in value)
    ):
        for i, item in enumerate(value):
            yield from _flatten(f"{name}#{i}", item)
        return
    yield name, value


def evaluate(
    cases: Sequence[Case], *, verbose: bool = False, messages: dict[str, str] | None = None
) -> dict[str, Entry]:
    """Run every case; a case that raises is stored as ``("error:<Type>", empty)`` (its
    message goes to ``messages``, not to the file: messages may name moved modules)."""
    results: dict[str, Entry] = {}
    slow: list[tuple[float, str]] = []
    for name, fn in cases:
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                output = fn()
                entries = [(key, _to_host(value)) for key, value in _flatten(name, output)]
        except Exception as exc:  # recorded: a refactor must raise the same type
            entries = [(name, (f"error:{type(exc).__name__}", np.zeros(0, np.uint8)))]
            if messages is not None:
                messages[name] = f"{type(exc).__name__}: {exc}"
            if verbose:
                print(f"  {name}: raised {type(exc).__name__}: {exc}", file=sys.stderr)
        slow.append((time.perf_counter() - start, name))
        for key, entry in entries:
            results[key] = entry
    if verbose:
        for seconds, name in sorted(slow, reverse=True)[:10]:
            print(f"  {seconds:7.2f}s  {name}", file=sys.stderr)
    return results


def save(path: str, results: dict[str, Entry]) -> None:
    """Store ``results`` as raw bytes plus a JSON index of names, dtypes and shapes."""
    arrays: dict[str, np.ndarray] = {}
    index: dict[str, Any] = {}
    for i, (key, (dtype, array)) in enumerate(results.items()):
        slot = f"e{i:05d}"
        arrays[slot] = np.frombuffer(array.tobytes(), np.uint8)
        index[key] = {
            "slot": slot,
            "dtype": dtype,
            "stored": array.dtype.str,
            "shape": list(array.shape),
        }
    arrays["index"] = np.frombuffer(json.dumps(index).encode(), np.uint8)
    with open(path, "wb") as file:
        np.savez_compressed(file, **arrays)


def load(path: str) -> dict[str, Entry]:
    """The results :func:`save` stored."""
    out: dict[str, Entry] = {}
    with np.load(path) as data:
        index = json.loads(data["index"].tobytes().decode())
        for key, meta in index.items():
            raw = data[meta["slot"]].tobytes()
            array = np.frombuffer(raw, np.dtype(meta["stored"])).reshape(meta["shape"])
            out[key] = (meta["dtype"], array)
    return out


def _difference(now: np.ndarray, then: np.ndarray) -> str:
    """The number of differing elements and the largest absolute difference."""
    if now.size == 0:
        return "0 elements"
    width = now.dtype.itemsize
    bytes_now = np.ascontiguousarray(now).view(np.uint8).reshape(now.size, width)
    bytes_then = np.ascontiguousarray(then).view(np.uint8).reshape(then.size, width)
    differ = int((bytes_now != bytes_then).any(axis=1).sum())
    text = f"{differ} of {now.size} elements differ"
    if now.dtype.kind in "iufc":
        with np.errstate(all="ignore"):
            delta = np.abs(now.astype(np.complex128) - then.astype(np.complex128))
        finite = delta[np.isfinite(delta)]
        text += f", max abs difference {float(finite.max()) if finite.size else math.nan:.6g}"
        if now.dtype.kind in "fc":
            nan_now, nan_then = int(np.isnan(now).sum()), int(np.isnan(then).sum())
            if nan_now != nan_then:
                text += f", NaNs {nan_then} -> {nan_now}"
    return text


def compare(
    baseline: dict[str, Entry],
    current: dict[str, Entry],
    messages: dict[str, str] | None = None,
) -> list[str]:
    """One line per difference between the stored and the recomputed results."""
    messages = messages or {}
    problems = []
    for key, (dtype, array) in baseline.items():
        if key not in current:
            problems.append(f"{key}: missing (not computed now)")
            continue
        now_dtype, now = current[key]
        if (
            dtype == now_dtype
            and array.shape == now.shape
            and array.dtype == now.dtype
            and array.tobytes() == now.tobytes()
        ):
            continue
        parts = []
        if dtype != now_dtype:
            parts.append(f"dtype {dtype} -> {now_dtype}")
        if key in messages:
            parts.append(f"raised {messages[key]}")
        elif array.shape != now.shape:
            parts.append(f"shape {array.shape} -> {now.shape}")
        elif array.dtype != now.dtype:
            parts.append(f"stored dtype {array.dtype} -> {now.dtype}")
        else:
            parts.append(f"shape {array.shape}, {_difference(now, array)}")
        problems.append(f"{key}: " + "; ".join(parts))
    for key in current:
        if key not in baseline:
            problems.append(f"{key}: new (not in the baseline)")
    return problems


def check(
    path: str,
    results: dict[str, Entry],
    messages: dict[str, str] | None = None,
    *,
    skip: tuple[str, ...] = (),
) -> int:
    """Compare ``results`` against the file (but the cases named ``skip*``), print
    every difference and the verdict, and return the exit status."""
    baseline = {key: entry for key, entry in load(path).items() if not key.startswith(skip)}
    problems = compare(baseline, results, messages)
    if problems:
        for line in problems:
            print(f"MISMATCH {line}")
        print(f"{len(problems)} of {len(baseline)} cases differ")
        return 1
    print(f"{len(results)} cases identical")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``save FILE`` or ``check FILE`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.corpus", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("command", choices=("save", "check"))
    parser.add_argument("file")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="skip the torch.compile cases (slow), on both sides of a check",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print errors and the slowest cases"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    import pe_core

    cases = build_cases(compile_torch=not args.no_compile)
    messages: dict[str, str] = {}
    results = evaluate(cases, verbose=args.verbose, messages=messages)
    print(
        f"pe_core from {pe_core.__file__}: {len(cases)} calls, {len(results)} cases, "
        f"{len(messages)} raising, {time.perf_counter() - start:.1f}s"
    )
    if args.command == "save":
        save(args.file, results)
        for key, message in messages.items():
            print(f"note: {key} raised {message}")
        print(f"saved {len(results)} cases to {args.file}")
        return 0
    skip = ("torch_compile/",) if args.no_compile else ()
    return check(args.file, results, messages, skip=skip)


if __name__ == "__main__":
    sys.exit(main())
