"""Shared test fixtures: the backend fixture, Hypothesis profiles, the array comparators.

* ``backend`` is parametrised over every backend pe_core knows; a backend whose
  framework is missing is skipped. ``PE_CORE_TEST_BACKENDS=numpy,jax`` narrows the set
  (and rejects typos).
* Hypothesis profile ``ci`` is the default; ``PE_CORE_HYPOTHESIS_PROFILE=thorough`` runs
  many more examples.
* ``assert_close`` (a tolerance) and ``assert_equal`` (none) compare arrays of any backend
  and check library, dtype and shape as well as values; tests compare arrays through them
  (tests/test_testing_helpers.py shows each check can fail).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from pe_core_backends import BACKENDS, get_namespace, is_installed

#: How long a test's subprocess may run before it counts as hung. It guards against hangs
#: only: no test measures its own wall-clock time, so a busy machine slows the suite down but
#: does not fail it. ``PE_CORE_TEST_HANG_TIMEOUT`` (seconds) changes it.
HANG_TIMEOUT = float(os.environ.get("PE_CORE_TEST_HANG_TIMEOUT", "1800"))

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


def _host_copy(x: Any) -> np.ndarray:
    """A NumPy copy of ``x`` (an array of any backend or Python data) for comparing values.

    Floating values widen to float64 and complex ones to complex128; booleans and integers
    keep their dtype, so exact comparisons of large integers lose nothing.
    """
    from pe_core_backends import backend_of

    source = backend_of(x)
    host = np.asarray(x) if source is None else np.asarray(get_namespace(source).to_numpy(x))
    if host.dtype.kind in "biu":
        return host
    if host.dtype.kind == "c":
        return host.astype(np.complex128)
    return host.astype(np.float64)


def _check_kind(
    actual: Any, expected: Any, backend: str | None, dtype: str | None, err_msg: str
) -> tuple[np.ndarray, np.ndarray]:
    """Check library, dtype and shape; return host copies of both arrays.

    ``backend`` and ``dtype`` (canonical names, ``"float32"``) are required of ``actual``.
    An ``expected`` that is a framework array (not NumPy or Python data) also requires
    ``actual`` to be an array of the same framework, dtype and device.
    """
    from pe_core_backends import backend_of

    prefix = f"{err_msg}\n" if err_msg else ""
    got_backend = backend_of(actual)

    def dtype_name(x: Any, source: str | None) -> str:
        return get_namespace(source or "numpy").dtype_of(x if source else np.asarray(x))

    if backend is not None and got_backend != backend:
        raise AssertionError(
            f"{prefix}expected a {backend} array, got {type(actual).__module__}."
            f"{type(actual).__qualname__} ({got_backend or 'not an array'})"
        )
    if dtype is not None and dtype_name(actual, got_backend) != dtype:
        raise AssertionError(
            f"{prefix}expected dtype {dtype}, got {dtype_name(actual, got_backend)}"
        )
    want_backend = backend_of(expected)
    if want_backend not in (None, "numpy"):
        if got_backend != want_backend:
            raise AssertionError(
                f"{prefix}expected is a {want_backend} array, so actual must be one too; "
                f"got {type(actual).__module__}.{type(actual).__qualname__}"
            )
        got_dtype, want_dtype = dtype_name(actual, got_backend), dtype_name(expected, want_backend)
        if got_dtype != want_dtype:
            raise AssertionError(f"{prefix}dtype {got_dtype} != expected dtype {want_dtype}")
        xp = get_namespace(want_backend)
        if xp.device_key(actual) != xp.device_key(expected):
            raise AssertionError(
                f"{prefix}device {xp.device_key(actual)} != expected device "
                f"{xp.device_key(expected)}"
            )
    got, want = _host_copy(actual), _host_copy(expected)
    if got.shape != want.shape:
        raise AssertionError(f"{prefix}shape {got.shape} != expected shape {want.shape}")
    return got, want


def assert_close(
    actual: Any,
    expected: Any,
    *,
    atol: float | np.ndarray,
    rtol: float = 0.0,
    backend: str | None = None,
    dtype: str | None = None,
    err_msg: str = "",
) -> None:
    """Compare library, dtype and shape as well as values (after SciPy's xp_assert_close).

    Values must satisfy ``|actual - expected| <= atol + rtol * |expected|`` elementwise
    (NaNs in the same places count as equal), compared in float64 (complex128 for complex
    values); ``atol`` may also hold one bound per element (broadcast against ``expected``).
    Shapes must match exactly: nothing is broadcast. ``backend`` / ``dtype`` are required
    of ``actual``; an ``expected`` from a framework (a torch tensor, a JAX array...)
    requires ``actual`` to come from the same framework with the same dtype and device
    (as ``torch.testing.assert_close`` does).
    """
    got, want = _check_kind(actual, expected, backend, dtype, err_msg)
    if got.dtype.kind in "biu":
        got = got.astype(np.float64)
    if want.dtype.kind in "biu":
        want = want.astype(np.float64)
    if np.ndim(atol) == 0:
        np.testing.assert_allclose(got, want, atol=float(atol), rtol=rtol, err_msg=err_msg)
        return
    bound = np.broadcast_to(np.asarray(atol, dtype=np.float64), want.shape) + rtol * np.abs(want)
    with np.errstate(invalid="ignore"):  # inf - inf
        ok = (np.abs(got - want) <= bound) | (got == want) | (np.isnan(got) & np.isnan(want))
    if not ok.all():
        worst = np.unravel_index(
            np.argmax(np.where(ok, -np.inf, np.abs(got - want) - bound)), ok.shape
        )
        raise AssertionError(
            f"{err_msg}\n{int((~ok).sum())} of {ok.size} elements beyond their per-element "
            f"tolerance; at {tuple(int(i) for i in worst)}: actual {got[worst]!r}, "
            f"expected {want[worst]!r}, bound {bound[worst]!r}".lstrip("\n")
        )


def assert_equal(
    actual: Any,
    expected: Any,
    *,
    backend: str | None = None,
    dtype: str | None = None,
    err_msg: str = "",
) -> None:
    """Like :func:`assert_close` with no tolerance: every value exactly equal.

    Floats are widened to float64 (exactly); integers and booleans are compared as they are,
    not through float64, so large integers are compared exactly too.
    """
    got, want = _check_kind(actual, expected, backend, dtype, err_msg)
    np.testing.assert_array_equal(got, want, err_msg=err_msg)


def positions_on(backend: str, positions: np.ndarray) -> Any:
    """Hand positions to ``backend`` the way a user would (int32 on JAX without x64)."""
    xp = get_namespace(backend)
    if positions.dtype.kind == "i" and backend == "jax":
        positions = positions.astype(np.int32)
    if positions.dtype.kind == "f" and backend == "jax":
        positions = positions.astype(np.float32)
    return xp.asarray(positions)


@pytest.fixture
def placements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shapes of the host tables pe_core moves onto a device from now on (one per
    build), with :mod:`pe_core.device_tables` emptied first."""
    from pe_core import device_tables

    device_tables.clear()
    real, moved = device_tables.place, []

    def place(xp: Any, table: Any, like: Any, dtype_name: str) -> Any:
        moved.append(table.shape)
        return real(xp, table, like, dtype_name)

    monkeypatch.setattr(device_tables, "place", place)
    return moved
