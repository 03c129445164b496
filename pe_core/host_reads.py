"""Catch code that reads array values back to the host: :func:`forbid_host_reads`.

On a GPU or TPU, reading a value of a device array in Python (``float(x)``,
``x.item()``, ``np.asarray(x)``, ``if x > 0:``, printing) copies it to the host and
waits for every queued kernel: a synchronisation that stalls the accelerator. Such a read
is easy to add by accident and invisible in the results. Inside
``with forbid_host_reads():`` each one raises :class:`HostReadError` instead, with a
traceback pointing at it, so a test can prove that a function stays on the device.

pe_core's own tests run its device path under this guard (see ``docs/devices.md``);
it works as well on your code, and on a CPU-only machine.

>>> import torch
>>> from pe_core.host_reads import HostReadError, forbid_host_reads
>>> x = torch.arange(4.0)
>>> with forbid_host_reads("torch"):
...     y = torch.sin(x) * 2 + x[1]  # stays on x's device: allowed
...     float(y.sum())  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pe_core.host_reads.HostReadError: float(tensor) reads a torch tensor's value on the host ...
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from pe_core_backends import backend_info, canonical_backend, get_namespace

__all__ = ["GUARDED_BACKENDS", "HostReadError", "forbid_host_reads"]

#: The backends :func:`forbid_host_reads` can guard.
GUARDED_BACKENDS: tuple[str, ...] = ("jax", "torch")

_HINT = (
    " inside forbid_host_reads(): on an accelerator this copies to the host and "
    "synchronises. Keep the computation on the device (or move the read outside the block)."
)


class HostReadError(RuntimeError):
    """An array's values were read back to the host inside :func:`forbid_host_reads`."""


@contextlib.contextmanager
def forbid_host_reads(*backends: str) -> Iterator[None]:
    """Raise :class:`HostReadError` on any host read of a torch or JAX array in the block.

    Parameters
    ----------
    *backends : {"torch", "jax"}
        The frameworks to guard (aliases such as ``"pytorch"`` are accepted; the named
        frameworks are imported). By default every one of them that is already imported,
        so the guard never imports a framework you did not use.

    Raises
    ------
    HostReadError
        Inside the block, at the read. What counts as a read:

        * **torch** (a :class:`torch.overrides.TorchFunctionMode`, so subclasses and
          every device are covered): ``.item()``, ``.tolist()``, ``.numpy()``,
          ``np.asarray(t)`` (``__array__``), ``bool(t)`` (``if t:``, ``t and ...``),
          ``int(t)``, ``float(t)``, ``complex(t)``, ``operator.index(t)`` (``t`` as a
          list index or a ``range`` bound), ``repr``/``str``/``format`` (printing);
          ``.cpu()``, ``.to("cpu")`` and ``cpu_tensor.copy_(t)`` of a tensor on another
          device; and the operations that synchronise because their output size
          depends on the values: ``nonzero``, ``argwhere``, one-argument ``where``,
          ``masked_select``, ``unique``, boolean-mask indexing ``t[mask]``,
          ``torch.equal``, ``torch.allclose``, ``is_nonzero``.
        * **jax**: ``np.asarray``/``np.array``/``np.asanyarray``/``np.ascontiguousarray``
          of a ``jax.Array`` (called through the ``numpy`` module, as nearly all code
          does), ``float``/``int``/``bool``/``complex``/``operator.index``,
          ``.item()``, ``.tolist()``, ``.tobytes()``, printing, ``jax.device_get`` and
          ``jnp.nonzero`` without ``size=``. On an accelerator JAX's own transfer guard
          is also set (``jax.transfer_guard_device_to_host("disallow_explicit")``), and
          it reports reads that bypass Python with JAX's error.
    ValueError
        For a backend other than torch and jax (TensorFlow's reads happen in C++
        and cannot be intercepted).

    Notes
    -----
    *Uploads are allowed.* Moving host data to the device (``torch.as_tensor(a,
    device=...)``, ``jnp.asarray(np_array)``, Python scalars in arithmetic,
    ``host_tensor.to("cuda")``) is not a read and does not wait for the device, so code
    may still build small constant tables on the host and move them over. (JAX's
    ``jax.transfer_guard("disallow")`` would also refuse those, down to the Python
    scalar in ``x * 2.0``; that is why only the device-to-host direction is guarded.)

    *CPU tensors.* ``.cpu()`` or ``.to("cpu")`` of a tensor already on the CPU moves
    nothing, so it passes; what is then done with its values (``.numpy()``, ``.item()``,
    ...) is caught. With :func:`pe_core_backends.force_device_path` this makes the
    guard meaningful on a CPU-only machine: every read of a value is still caught.

    *Scope.* Torch function modes are per thread; the JAX checks are global patches of
    ``numpy``'s conversion functions and of ``jax.Array``'s value accessor that raise
    only in the thread that holds the guard, and are removed when the last guard
    exits. The guard nests and restores everything on exit, also on error. Code that
    bound ``from numpy import asarray`` before the block, and NumPy ufuncs applied
    directly to a CPU ``jax.Array`` (``np.sin(x)``, which read through the buffer
    protocol in C), are not seen.

    Examples
    --------
    A function that stays on the device passes; one that reads does not:

    >>> import jax.numpy as jnp
    >>> from pe_core.host_reads import forbid_host_reads
    >>> x = jnp.arange(8.0)
    >>> def normalise(v):
    ...     return v / jnp.max(jnp.abs(v))  # stays on the device
    >>> def normalise_with_a_read(v):
    ...     return v / float(jnp.max(jnp.abs(v)))  # float(): a host read
    >>> with forbid_host_reads("jax"):
    ...     y = normalise(x)
    >>> with forbid_host_reads("jax"):
    ...     normalise_with_a_read(x)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pe_core.host_reads.HostReadError: reading a jax.Array's values on the host ...

    Outside the block the same reads work again:

    >>> float(normalise_with_a_read(x)[-1])
    1.0
    """
    for backend in backends:
        if canonical_backend(backend) not in GUARDED_BACKENDS:
            raise ValueError(
                f"forbid_host_reads guards {' and '.join(GUARDED_BACKENDS)} arrays only. "
                f"Received: {backend!r}"
            )
    imported = tuple(n for n in GUARDED_BACKENDS if backend_info(n).framework in sys.modules)
    with contextlib.ExitStack() as stack:
        for name in dict.fromkeys(map(canonical_backend, backends or imported)):
            stack.enter_context(get_namespace(name).host_read_guard(_error))
        yield


def _error(what: str) -> HostReadError:
    """The error of a host read ``what`` (the backends' guards name the read)."""
    return HostReadError(what + _HINT)
