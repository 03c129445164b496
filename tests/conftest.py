"""Shared test fixtures: the backend fixture, Hypothesis profiles, one array comparator.

* ``backend`` is parametrised over every backend pe_core knows; a backend whose
  framework is missing is skipped. ``PE_CORE_TEST_BACKENDS=numpy,jax`` narrows the set
  (and rejects typos).
* Hypothesis profile ``ci`` is the default; ``PE_CORE_HYPOTHESIS_PROFILE=thorough`` runs
  many more examples.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from pe_core_backends import BACKENDS, get_namespace, is_installed

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "thorough",
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("PE_CORE_HYPOTHESIS_PROFILE", "ci"))


def _selected_backends() -> tuple[str, ...]:
    raw = os.environ.get("PE_CORE_TEST_BACKENDS", "").strip()
    if not raw:
        return BACKENDS
    chosen = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown:
        raise pytest.UsageError(
            f"PE_CORE_TEST_BACKENDS has unknown backend(s) {unknown}. "
            f"Expected names from: {', '.join(BACKENDS)}."
        )
    return chosen


SELECTED_BACKENDS = _selected_backends()


@pytest.fixture(params=SELECTED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every selected backend; skipped when its framework is not installed."""
    name = request.param
    if not is_installed(name):
        pytest.skip(f"backend {name!r} is not installed")
    return name


def to_numpy(x: Any) -> np.ndarray:
    """A float64 NumPy copy of an array from any backend."""
    from pe_core_backends import backend_of

    source = backend_of(x)
    if source is None:
        return np.asarray(x, dtype=np.float64)
    return get_namespace(source).to_numpy(x).astype(np.float64)


def assert_close(
    actual: Any,
    expected: np.ndarray,
    *,
    atol: float,
    backend: str | None = None,
    dtype: str | None = None,
    rtol: float = 0.0,
) -> None:
    """Compare library, dtype and shape as well as values (after SciPy's xp_assert_close)."""
    from pe_core_backends import backend_of

    if backend is not None:
        assert backend_of(actual) == backend, f"expected a {backend} array, got {type(actual)}"
    if dtype is not None:
        xp = get_namespace(backend_of(actual) or "numpy")
        assert xp.dtype_of(actual) == dtype, f"expected dtype {dtype}, got {xp.dtype_of(actual)}"
    got = to_numpy(actual)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}"
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol)


def positions_on(backend: str, positions: np.ndarray) -> Any:
    """Hand positions to ``backend`` the way a user would (int32 on JAX without x64)."""
    xp = get_namespace(backend)
    if positions.dtype.kind == "i" and backend == "jax":
        positions = positions.astype(np.int32)
    if positions.dtype.kind == "f" and backend == "jax":
        positions = positions.astype(np.float32)
    return xp.asarray(positions)
