"""The linear relation ``PE(pos + k) = M_k @ PE(pos)``: the matrix and its action.

For each sin/cos pair with frequency ``w``, the angle-addition formulas give

    sin((p + k) w) =  cos(k w) sin(p w) + sin(k w) cos(p w)
    cos((p + k) w) = -sin(k w) sin(p w) + cos(k w) cos(p w)

a 2x2 rotation by ``k w`` that does not involve ``p``. ``M_k`` places these rotations
block-diagonally in the spec's layout. Its angles use the same exact kernel as
:func:`~pe_core.encode`, so large ``k`` is as exact as large positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pe_core._kernel.inputs import check_request_size
from pe_core._relative import relative_matrix_1d, relative_matrix_nd, shift_1d, shift_nd
from pe_core.presets import resolve_spec
from pe_core.spec import Spec
from pe_core.typing import (
    ArrayT,
    BackendArrayT,
    BackendLike,
    DTypeLike,
    HostData,
    PresetLike,
    SupportsArray,
)
from pe_core.validation import is_integer, known_size
from pe_core_backends import backend_of, get_namespace


def relative_matrix(
    k: BackendArrayT | HostData,
    d: int,
    spec: Spec | PresetLike | None = None,
    *,
    backend: BackendLike | None = None,
    dtype: DTypeLike | None = None,
) -> BackendArrayT:
    """The ``(d, d)`` matrix ``M_k`` with ``PE(pos + k) = M_k @ PE(pos)``.

    Parameters
    ----------
    k : int, float or array
        The shift. An array of shape ``K`` gives a stack of shape ``K + (d, d)``. For a
        spec with ``axes > 1``, shape ``K + (axes,)``: one shift per coordinate, and a
        block-diagonal matrix (see :mod:`pe_core.nd`).
    d : int
        Number of features.
    spec : Spec or str, optional
        Spec or preset name (the offset plays no role: shifts are relative).
    backend, dtype
        As for :func:`~pe_core.encode`.

    Returns
    -------
    array
        Block-diagonal rotations, orthogonal, with ``M_a @ M_b = M_(a+b)`` and
        ``M_(-k) = M_k.T``. For odd ``d`` with zero padding the padded feature maps
        to itself.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import encode
    >>> M = relative_matrix(5, 8)
    >>> bool(np.allclose(M @ encode(3, 8), encode(8, 8), atol=1e-6))
    True
    >>> bool(np.allclose(M @ M.T, np.eye(8), atol=1e-6))
    True
    """
    spec = resolve_spec(spec)
    if spec.axes > 1:  # N-D: k is (..., axes); block-diagonal per axis (pe_core.nd)
        return relative_matrix_nd(k, d, spec, backend, dtype)
    n_shifts = known_size(k)
    if n_shifts is not None and is_integer(d) and backend is None:  # before k is read
        _check_early(
            "relative_matrix", k, n_shifts * int(d) ** 2, "float32", 0
        )  # (at least float32)
    return relative_matrix_1d(k, d, spec, backend, dtype)


def shift(
    encoding: ArrayT, k: SupportsArray | HostData, spec: Spec | PresetLike | None = None
) -> ArrayT:
    """Apply ``M_k`` to encodings without recomputing them from positions.

    Parameters
    ----------
    encoding : array
        Encodings of shape ``(..., d)`` from any backend, in the layout of ``spec``.
    k : int, float or array
        The shift; an array broadcasts against the leading axes ``(...)``. For a spec
        with ``axes > 1``, shape ``(..., axes)``: one shift per coordinate.
    spec : Spec or str, optional
        The spec the encodings were made with.

    Returns
    -------
    array
        ``PE(pos + k)`` where ``encoding`` is ``PE(pos)``, same backend and dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from pe_core import encode
    >>> pe = encode(np.arange(4), 6)
    >>> bool(np.allclose(shift(pe, 100), encode(np.arange(4) + 100, 6), atol=1e-6))
    True
    """
    spec = resolve_spec(spec)
    if spec.axes > 1:  # N-D: k is (..., axes); each axis's block shifts (pe_core.nd)
        return shift_nd(encoding, k, spec)
    source, dims = backend_of(encoding), (_dims(encoding), _dims(k))
    if source is not None and dims[0] and dims[1] is not None:
        try:  # the shifted encodings (leading axes broadcast with k's) before any work
            lead = np.broadcast_shapes(dims[0][:-1], dims[1])
        except ValueError:
            lead = None  # refused with its shapes named below
        if lead is not None:
            n = math.prod(lead) * dims[0][-1]
            _check_early("shift", encoding, n, get_namespace(source).dtype_of(encoding), 2)
    return shift_1d(encoding, k, spec)


def _dims(x: Any) -> tuple[int, ...] | None:
    """The sizes of array ``x`` (``()`` for a Python number), ``None`` where not known
    without reading or converting it (Python sequences, traced sizes)."""
    if is_integer(x) or isinstance(x, float):
        return ()
    return None if known_size(x) is None else tuple([int(n) for n in x.shape])


def _check_early(what: str, x: Any, n: int, dtype_name: str, temporaries: int) -> None:
    """Refuse a result of ``n`` values (and ``temporaries`` times as much of working
    memory) beyond the available memory, from the inputs' sizes alone."""
    size = 8 if dtype_name == "float64" else 4  # the working dtype
    check_request_size(n, dtype_name, what=what, extra_bytes=temporaries * n * size, like=x)
