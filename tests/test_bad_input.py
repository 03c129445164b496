"""Bad input raises a clear error naming the bad value and what is allowed: one test per case."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import HANG_TIMEOUT, assert_equal

import pe_core
from pe_core import Spec


@pytest.mark.parametrize("d", [0, -4])
def test_non_positive_d(d: int) -> None:
    with pytest.raises(ValueError, match=rf"d must be an integer >= 1 \(the .*Received: {d}"):
        pe_core.encode([0, 1], d)


@pytest.mark.parametrize("d", [4.0, "8", True])
def test_non_integer_d(d: object) -> None:
    with pytest.raises(TypeError, match=r"d must be an integer >= 1.*Received"):
        pe_core.encode([0, 1], d)  # type: ignore[arg-type]


def test_odd_d_under_the_raising_policy() -> None:
    with pytest.raises(ValueError, match=r"d must be even.*d=7.*zero_pad"):
        pe_core.encode([0, 1], 7)


def test_odd_d_zero_pads_when_asked() -> None:
    out = pe_core.encode([0, 1, 2], 7, spec="tensor2tensor")
    assert out.shape == (3, 7)
    assert_equal(out[:, -1], np.zeros(3))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_positions(backend: str, bad: float) -> None:
    from pe_core_backends import get_namespace

    positions = get_namespace(backend).asarray(np.array([0.0, 1.0, bad], dtype=np.float32))
    with pytest.raises(ValueError, match=r"positions must be finite; found .* at index \(2,\)"):
        pe_core.encode(positions, 4)


def test_boolean_positions(backend: str) -> None:
    from pe_core_backends import get_namespace

    with pytest.raises(TypeError, match="bool"):
        pe_core.encode(get_namespace(backend).asarray(np.array([True, False])), 4)
    with pytest.raises(TypeError, match="booleans"):
        pe_core.encode([True, False], 4)


def test_complex_positions() -> None:
    with pytest.raises(TypeError, match=r"integer or floating dtypes\. Received dtype: complex128"):
        pe_core.encode(np.array([1 + 2j]), 4)


def test_unknown_preset() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown preset 'bert'. Expected one of: .*fairseq, flax"
    ):
        pe_core.encode([0], 4, spec="bert")


def test_unknown_backend() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown backend 'tf2'. Expected one of: jax, numpy, tensorflow, torch."
    ):
        pe_core.encode([0], 4, backend="tf2")


@pytest.mark.parametrize(
    ("backend_name", "module"), [("torch", "torch"), ("jax", "jax"), ("tensorflow", "tensorflow")]
)
def test_missing_backend_names_the_extra(backend_name: str, module: str) -> None:
    """In a subprocess where the framework cannot be imported (None in sys.modules)."""
    import subprocess
    import sys

    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "import pe_core\n"
        "try:\n"
        f"    pe_core.encode([0], 4, backend={backend_name!r})\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_TIMEOUT
    )
    assert f"pip install 'pe-core[{backend_name}]'" in result.stdout, result.stdout + result.stderr


def test_dtype_the_backend_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    from pe_core_backends import _numpy

    # NumPy has bfloat16 through ml_dtypes (installed with JAX): pretend it is missing
    monkeypatch.setattr(_numpy, "_has_ml_dtypes", lambda: False)
    with pytest.raises(
        ValueError, match=r"backend 'numpy' has no dtype 'bfloat16'. Expected one of"
    ):
        pe_core.encode([0], 4, dtype="bfloat16")


def test_non_float_dtype() -> None:
    with pytest.raises(ValueError, match=r"dtype must be a floating dtype.*int32"):
        pe_core.encode([0], 4, dtype="int32")


@pytest.mark.parametrize("field", ["base", "min_timescale"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_spec_with_non_positive_timescale(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"Spec.{field} must be a finite number > 0"):
        Spec(**{field: value})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"layout": "zigzag"},
            "Unknown Spec.layout 'zigzag'. Expected one of: interleaved, split.",
        ),
        ({"denominator": "d-1"}, "Unknown Spec.denominator 'd-1'. Expected one of: d, half_min"),
        ({"odd_d": "pad"}, "Unknown Spec.odd_d 'pad'. Expected one of: raise, zero_pad"),
        ({"offset": float("nan")}, "Spec.offset must be a finite number"),
        ({"frequencies": (1.0, -2.0)}, "Spec.frequencies must be finite and >= 0"),
        ({"min_timescale": 10.0, "base": 5.0}, "min_timescale must not exceed Spec.base"),
    ],
)
def test_invalid_spec_fields(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Spec(**kwargs)


def test_explicit_frequencies_must_match_d() -> None:
    with pytest.raises(ValueError, match=r"has 2 entries but d=8 needs d // 2 = 4"):
        pe_core.encode([0], 8, spec=Spec(frequencies=(1.0, 0.5)))


def test_spec_of_wrong_type() -> None:
    with pytest.raises(TypeError, match=r"spec must be a pe_core\.Spec, a preset name or None"):
        pe_core.encode([0], 4, spec=42)  # type: ignore[arg-type]


def test_shift_k_that_does_not_broadcast() -> None:
    pe = pe_core.encode(np.arange(6).reshape(2, 3), 4)
    with pytest.raises(
        ValueError, match=r"k of shape \(4,\) does not broadcast against the leading axes \(2, 3\)"
    ):
        pe_core.shift(pe, np.arange(4))


def test_shift_rejects_integer_encodings() -> None:
    with pytest.raises(TypeError, match="encoding must be a floating array"):
        pe_core.shift(np.zeros((2, 4), dtype=np.int32), 1)


def test_low_precision_positions_warn(backend: str) -> None:
    from pe_core_backends import get_namespace

    xp = get_namespace(backend)
    positions = xp.asarray(np.array([1.0, 300.0], dtype=np.float32), dtype=xp.dtype("float16"))
    with pytest.warns(pe_core.LowPrecisionPositionsWarning, match="float16"):
        pe_core.encode(positions, 4)


def test_ragged_python_positions() -> None:
    with pytest.raises(TypeError, match="positions must be numbers of one shape"):
        pe_core.encode([[0, 1], [2]], 4)
