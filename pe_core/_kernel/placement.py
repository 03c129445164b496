"""Where positions live, decided once per call: on the host, on a device, or traced.

Every front door (:func:`~pe_core.encode`, :func:`~pe_core.rope.apply_rope`,
:func:`~pe_core.relative_matrix`) starts by classifying its positions with
:func:`prepare_positions`:

* ``"host"``: the values are known on the host without a device read: Python values,
  ranges, NumPy arrays, and framework arrays on the CPU (a zero-copy view for NumPy and
  CPU tensors). Host values are validated (NaN and inf raise; every finite position
  is encoded exactly, the largest by Python integers) and may take the host fast
  paths (tables, lookups, float64 small calls).
* ``"device"``: a framework array on an accelerator (or any framework array inside
  :func:`~pe_core_backends.force_device_path`). Its values are never read: no copy to
  the host, no synchronisation. Everything is computed where the array lives, by the
  exact integer kernel; invalid positions (NaN, inf, floats beyond the kernel's
  range: :func:`kernel_limit`) give NaN rows instead of an error.
  ``check_values=True`` reads them and raises for NaN and inf instead (this
  synchronises); finite positions beyond the kernel's range are then computed on
  the host, exactly.
  CPU tensors that require gradients take this path too (after the host checks), so
  that the kernel, differentiable in the positions, runs on them.
* ``"traced"``: a value being traced by ``jax.jit``, ``torch.compile`` or
  ``tf.function`` (or wrapped by ``jax.grad``, ``torch.func``): the kernel is traced
  too (same NaN policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pe_core._kernel.inputs import as_positions, check_finite, fits_backend
from pe_core._kernel.routes import CHECK_IN_PYTHON, MAX_KERNEL_FLOAT, MAX_KERNEL_FLOAT_INT32
from pe_core_backends import HOST, Namespace, backend_of, from_dlpack, get_namespace, is_dlpack


def kernel_limit(xp: Namespace) -> float:
    """Float positions ``|x|`` below this are exact in ``xp``'s device/traced kernel.

    Beyond it the kernel gives NaN; host positions never get there (they are reduced
    exactly on the host).

    >>> kernel_limit(get_namespace("numpy")) == 2.0**63
    True
    """
    return MAX_KERNEL_FLOAT if xp.supports("int64") else MAX_KERNEL_FLOAT_INT32


def _kernel_takes(values: np.ndarray, max_abs: float, xp: Namespace) -> bool:
    """Whether the device/traced kernel of ``xp`` computes every one of ``values``."""
    return values.dtype.kind in "iu" or max_abs < kernel_limit(xp)


@dataclass
class Positions:
    """Positions classified for one call.

    Attributes
    ----------
    placement : {"host", "device", "traced"}
        Where the values are (see the module docstring).
    host : numpy.ndarray or None
        The values on the host (``placement == "host"``), validated.
    array : array or None
        The positions on the compute backend (for ``"device"`` and ``"traced"``; for
        host positions only when the caller asked for it).
    shape : tuple
        Shape of the positions (sizes may be None while tracing).
    max_abs : float or None
        ``max |position|`` of host values.
    """

    placement: str
    host: np.ndarray | None
    array: Any
    shape: tuple[Any, ...]
    max_abs: float | None


def prepare_positions(
    pos: Any,
    xp: Namespace,
    source: str | None,
    *,
    what: str = "positions",
    check_values: bool = False,
    tracing: bool | None = None,
    like: Any = None,
) -> Positions:
    """Convert and classify ``pos`` for computing on ``xp``.

    Parameters
    ----------
    pos : any
        What the user passed.
    xp : Namespace
        The backend to compute on.
    source : str or None
        The backend ``pos`` belongs to (``None`` for Python values).
    what : str
        The argument's name, for error messages.
    check_values : bool
        Read and validate device-resident positions too (synchronises).
    tracing : bool, optional
        Whether ``xp`` is tracing now, if the caller knows; host positions are then
        turned into (constant) ``xp`` arrays and take the traced kernel, so that no
        host computation is baked into a compiled graph by accident.
    like : array, optional
        The array the positions are used with: traced positions made from host values
        are put on its device (a ``meta`` tensor's, for one).

    Examples
    --------
    >>> from pe_core_backends import get_namespace
    >>> p = prepare_positions(range(3), get_namespace("numpy"), None)
    >>> p.placement, p.host.tolist(), p.max_abs
    ('host', [0, 1, 2], 2.0)
    """
    if source is None and is_dlpack(pos):  # e.g. CuPy: imported by the backend computed on
        pos, source = from_dlpack(pos, xp.name, what=what), xp.name
    if source is None or source == HOST.name:  # Python values or NumPy arrays
        numpy = xp if xp.numpy_arrays else HOST
        host = as_positions(pos, numpy, source, what=what)
        max_abs = check_host_positions(host, what=what)
        if not xp.numpy_arrays and fits_backend(host, xp) and _kernel_takes(host, max_abs, xp):
            if tracing or (tracing is None and xp.is_tracing()):
                array = as_positions(host, xp, "numpy", what=what)
                if like is not None:
                    array = xp.asarray(array, like=like)
                return Positions("traced", None, array, xp.shape(array), None)
        return Positions("host", host, None, tuple(host.shape), max_abs)
    array = as_positions(pos, xp, source, what=what)
    if xp.is_traced(array):
        return Positions("traced", None, array, xp.shape(array), None)
    if xp.on_accelerator(array):
        if check_values:
            host = xp.to_numpy(array)
            max_abs = check_host_positions(host, what=what)
            if not _kernel_takes(host, max_abs, xp):  # exact on the host instead of NaN
                return Positions("host", host, array, tuple(host.shape), max_abs)
        return Positions("device", None, array, xp.shape(array), None)
    host = xp.concrete(array)
    assert host is not None  # not traced (checked above): its values are known
    max_abs = check_host_positions(host, what=what)
    if xp.requires_grad(array) and _kernel_takes(host, max_abs, xp):
        # gradients are taken with respect to the positions: the kernel runs on the
        # array itself (a host table would be a constant); validated like host values
        return Positions("device", None, array, xp.shape(array), None)
    return Positions("host", host, array, tuple(host.shape), max_abs)


def check_host_positions(values: np.ndarray, *, what: str = "positions") -> float:
    """Raise for NaN or inf; return ``max |value|`` (every finite position is exact).

    >>> check_host_positions(np.array([3, -7]))
    7.0
    >>> check_host_positions(np.array([2.0**60]))
    1.152921504606847e+18
    >>> check_host_positions(np.array([1.0, np.inf]))
    Traceback (most recent call last):
    ...
    ValueError: positions must be finite; found np.float64(inf) at index (1,) (1 non-finite value(s) in all).
    """
    if values.dtype.kind in "iu" and 0 < values.size <= CHECK_IN_PYTHON:
        # a few integers (decode steps): Python is quicker than NumPy reductions here
        return float(max(abs(v) for v in values.reshape(-1).tolist()))
    if values.dtype.kind in "iu" and values.size:
        # integers are finite: the extremes give the bound (two reductions)
        return float(max(abs(int(values.min())), abs(int(values.max()))))
    max_abs = check_finite(HOST, values, what=what, values=values)
    assert max_abs is not None
    return max_abs


def host_view(pos: Any) -> tuple[np.ndarray | None, Namespace | None]:
    """``pos`` as a NumPy array read without a copy, a transfer or a synchronisation,
    and the namespace of the backend it came from (``None`` for NumPy).

    A NumPy array is taken as it is; another backend's array through
    :meth:`~pe_core_backends.Namespace.host_view` (a CPU tensor that nothing records);
    anything else gives ``(None, None)``. The few-positions lanes of
    :func:`~pe_core.encode` and :func:`~pe_core.apply_rope` read their positions here.

    >>> values, source = host_view(np.arange(3))
    >>> values.tolist(), source
    ([0, 1, 2], None)
    >>> host_view([0, 1, 2])
    (None, None)
    """
    if type(pos) is np.ndarray:
        return pos, None
    xp = namespace_of(pos)
    if xp is None or xp.numpy_arrays:
        return None, None
    return xp.host_view(pos), xp


#: The namespace of each array type seen (see :func:`namespace_of`).
_NAMESPACE_BY_TYPE: dict[type, Namespace] = {}


def namespace_of(x: Any) -> Namespace | None:
    """The namespace of ``x``'s backend, ``None`` for Python values.

    Remembered per array type, for the few-positions lanes, where looking it up costs
    more than the arithmetic. Nothing is remembered while the backend traces:
    ``torch.compile`` cannot follow a dict that fills up during its trace.

    >>> namespace_of(np.zeros(2)).name, namespace_of([1, 2])
    ('numpy', None)
    """
    hit = _NAMESPACE_BY_TYPE.get(type(x))
    if hit is not None:
        return hit
    name = backend_of(x)
    if name is None:
        return None
    xp = get_namespace(name)
    if not xp.is_tracing():
        _NAMESPACE_BY_TYPE[type(x)] = xp
    return xp
