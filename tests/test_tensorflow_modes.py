"""TensorFlow in every mode: eager calls at many new lengths stay bounded (no graph
traced or compiled per length, no retracing warning), tensors of unknown rank are
refused by name. The Keras layers' TensorFlow modes are in tests/test_layers_keras.py."""

from __future__ import annotations

import collections
import inspect
import logging
from collections.abc import Iterator

import numpy as np
import pytest
from conftest import assert_close

tf = pytest.importorskip("tensorflow")

import pe_core  # noqa: E402
from pe_core.rope import apply_rope  # noqa: E402
from pe_core_backends import _registry, force_device_path  # noqa: E402


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    """Names of the functions TensorFlow traces into graphs (every ``tf.function``
    trace, ``get_concrete_function`` included, builds one through this function)."""
    from tensorflow.python.framework import func_graph

    counter: collections.Counter = collections.Counter()
    original = func_graph.func_graph_from_py_func

    def counting(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        counter[str(name)] += 1
        return original(name, *args, **kwargs)

    monkeypatch.setattr(func_graph, "func_graph_from_py_func", counting)
    return counter


@pytest.fixture
def tf_warnings() -> Iterator[list[str]]:
    """Messages TensorFlow logs at WARNING or above (its retracing warning among them)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def test_eager_host_runs_at_a_thousand_new_lengths_trace_nothing(
    traces: collections.Counter, tf_warnings: list[str]
) -> None:
    """128 pairs: every length here used to build its table with a compiled function
    traced (and XLA-compiled) for that row count."""
    for start in range(256, 1256, 100):
        for n in range(start, start + 100):
            pe_core.encode(range(n), 256, backend="tensorflow")
        assert sum(traces.values()) == 0, (start, dict(traces))
    got = pe_core.encode(range(1000, 1255), 256, backend="tensorflow")
    want = pe_core.encode(range(1000, 1255), 256, dtype="float64")
    assert_close(got, want.astype(np.float32), atol=1e-6, backend="tensorflow", dtype="float32")
    assert not [m for m in tf_warnings if "retracing" in m], tf_warnings


def test_eager_device_kernels_trace_once_per_signature(
    traces: collections.Counter, tf_warnings: list[str]
) -> None:
    """On the device path (GPU tensors; forced here) each compiled kernel is traced
    once per input dtypes and ranks, shape-generic, whatever the new lengths."""

    def calls(n: int) -> list:
        positions = tf.range(n, dtype=tf.int64) * 3
        return [
            pe_core.encode(positions, 16),
            pe_core.timestep_embedding(tf.cast(positions, tf.float32), 15),
            apply_rope(tf.ones((2, n, 8)), positions),
        ]

    with force_device_path():
        calls(3)
        first = sum(traces.values())
        for n in range(4, 24):
            calls(n)
        got = calls(40)
    assert 0 < first <= 3 and sum(traces.values()) == first, dict(traces)
    assert not [m for m in tf_warnings if "retracing" in m], tf_warnings
    want = [
        pe_core.encode(np.arange(40) * 3, 16, dtype="float64"),
        pe_core.timestep_embedding(np.arange(40.0) * 3, 15, dtype="float64"),
        apply_rope(np.ones((2, 40, 8)), np.arange(40) * 3),
    ]
    for g, w in zip(got, want, strict=True):
        assert_close(g, w.astype(np.float32), atol=2e-6, backend="tensorflow", dtype="float32")


UNKNOWN_RANK = {
    "positions": (lambda p: pe_core.encode(p, 8), [tf.TensorSpec(None, tf.int64)]),
    "timesteps": (lambda t: pe_core.timestep_embedding(t, 8), [tf.TensorSpec(None, tf.float32)]),
    "pos": (
        lambda x, p: apply_rope(x, p),
        [tf.TensorSpec([2, None, 8], tf.float32), tf.TensorSpec(None, tf.int64)],
    ),
    "x": (
        lambda x, p: apply_rope(x, p),
        [tf.TensorSpec(None, tf.float32), tf.TensorSpec([None], tf.int64)],
    ),
}


@pytest.mark.parametrize("name", list(UNKNOWN_RANK))
def test_unknown_rank_is_refused_by_name(name: str) -> None:
    fn, signature = UNKNOWN_RANK[name]
    with pytest.raises(ValueError, match=f"^{name} must have a known rank .* under tf.function"):
        tf.function(fn, input_signature=signature, autograph=False).get_concrete_function()


def test_known_rank_with_unknown_sizes_still_traces() -> None:
    f = tf.function(
        lambda x, p: apply_rope(x, p) + pe_core.encode(p, 8),
        input_signature=[tf.TensorSpec([None, None, 8]), tf.TensorSpec([None], tf.int64)],
        autograph=False,
    )
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    want = apply_rope(x.astype(np.float64), np.arange(5)) + pe_core.encode(
        range(5), 8, dtype="float64"
    )
    got = f(x, tf.range(5, dtype=tf.int64))
    assert_close(got, want.astype(np.float32), atol=2e-6, backend="tensorflow", dtype="float32")


def test_adapter_loaders_have_source_autograph_can_read() -> None:
    """tf.function's AutoGraph warns about every function whose source it cannot find."""
    loader = _registry._make_loader("json", "probe")
    assert "import json as adapter" in inspect.getsource(loader)
    assert loader().dumps([1]) == "[1]"


def _xla_calls(signature: list) -> int:
    """Operations of the traced graph that TensorFlow must compile with XLA."""

    def must_compile(op: object) -> bool:
        try:
            return bool(op.get_attr("_XlaMustCompile"))  # type: ignore[attr-defined]
        except ValueError:
            return False

    f = tf.function(lambda p: pe_core.encode(p, 8), input_signature=signature, autograph=False)
    return sum(must_compile(op) for op in f.get_concrete_function().graph.get_operations())


def test_traced_unknown_sizes_hold_no_xla_call_compiled_per_length() -> None:
    """An XLA call in a graph of unknown sizes compiles once per concrete length when
    run (a served model took about 1 s and 0.8 MB per new length): the kernel is
    traced inline there, and as one XLA call where every size is known."""
    assert _xla_calls([tf.TensorSpec([None], tf.int64)]) == 0
    assert _xla_calls([tf.TensorSpec([7], tf.int64)]) == 1
