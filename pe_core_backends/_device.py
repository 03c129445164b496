"""Where an array lives: on the host (CPU) or on an accelerator, and a switch for tests.

pe_core reads position values back to the host only for arrays that already live there
(NumPy, CPU tensors). Arrays on an accelerator take the *device path*: everything is
computed where the array lives, with no host read and no synchronisation. Tests force
that path on a CPU-only machine with :func:`force_device_path`, so the promise can be
checked without an accelerator.

>>> import numpy as np
>>> from pe_core_backends import force_device_path, get_namespace
>>> xp = get_namespace("numpy")
>>> xp.on_accelerator(np.zeros(2))
False
>>> with force_device_path():
...     xp.on_accelerator(np.zeros(2))  # NumPy arrays are host arrays, always
False
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_state = threading.local()


def device_path_forced() -> bool:
    """Whether :func:`force_device_path` is active in this thread."""
    return getattr(_state, "forced", 0) > 0


@contextlib.contextmanager
def force_device_path() -> Iterator[None]:
    """Treat every framework array (torch, JAX, TensorFlow) as if on an accelerator.

    Inside the block pe_core takes the path it takes for GPU/TPU arrays: no values read
    back to the host, no per-call host trigonometry. Only pe_core's own dispatch is
    affected (no framework setting changes); it nests and is local to the thread.
    NumPy arrays and Python values stay host values.

    Examples
    --------
    >>> from pe_core_backends import device_path_forced, force_device_path
    >>> with force_device_path():
    ...     device_path_forced()
    True
    >>> device_path_forced()
    False
    """
    _state.forced = getattr(_state, "forced", 0) + 1
    try:
        yield
    finally:
        _state.forced -= 1
