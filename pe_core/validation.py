"""Argument checks shared by every pe_core module, with one message format.

Every check raises :class:`TypeError` for a value of the wrong type and
:class:`ValueError` for a value of the right type outside what is allowed, with the
message ``"<name> must be <allowed>. Received: <value!r>"`` (Keras' wording, the most
common one in pe_core). Choices read ``"Unknown <name> <value!r>. Expected one of:
a, b."``. Each helper returns the value converted to a plain Python type.

>>> from pe_core.validation import positive_int, choice, finite_real
>>> positive_int(8, "head_dim")
8
>>> positive_int(2.5, "head_dim")
Traceback (most recent call last):
...
TypeError: head_dim must be an integer >= 1. Received: 2.5
>>> choice("half", "layout", ("half", "interleaved"))
'half'
>>> finite_real(1.0, "base (rope_theta)", greater_than=1)
Traceback (most recent call last):
...
ValueError: base (rope_theta) must be a finite number > 1. Received: 1.0
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pe_core_backends import backend_of, get_namespace

__all__ = [
    "broadcasts_into",
    "choice",
    "even_int",
    "finite_real",
    "flag",
    "integer",
    "is_integer",
    "optional_str",
    "positive_int",
    "positive_ints",
]


def _allowed(what: str, detail: str | None) -> str:
    return f"{what} ({detail})" if detail else what


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer (Python or NumPy), booleans excluded.

    >>> is_integer(3), is_integer(True), is_integer(3.0)
    (True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(value: object, name: str, *, minimum: int = 1, what: str | None = None) -> int:
    """``value`` as an ``int`` ``>= minimum``.

    Parameters
    ----------
    value : object
        The argument to check.
    name : str
        Its name in the message.
    minimum : int
        Smallest allowed value (1 by default).
    what : str, optional
        What the number counts, shown in parentheses (e.g. ``"features per head"``).

    Raises
    ------
    TypeError
        ``value`` is not an integer (booleans and floats included, ``2.0`` too).
    ValueError
        ``value < minimum``.

    Examples
    --------
    >>> positive_int(0, "n_heads")
    Traceback (most recent call last):
    ...
    ValueError: n_heads must be an integer >= 1. Received: 0
    """

    def message() -> str:  # built only to raise: a traced size may not format
        return f"{name} must be {_allowed(f'an integer >= {minimum}', what)}. Received: {value!r}"

    if not is_integer(value):
        raise TypeError(message())
    if value < minimum:  # type: ignore[operator]
        raise ValueError(message())
    return int(value)  # type: ignore[call-overload]


def finite_real(
    value: object,
    name: str,
    *,
    greater_than: float | None = None,
    what: str | None = None,
) -> float:
    """``value`` as a finite ``float`` (``> greater_than`` when given).

    Raises
    ------
    TypeError
        ``value`` is not a real number (booleans and strings included).
    ValueError
        ``value`` is NaN, infinite, beyond float64 or not ``> greater_than``.

    Examples
    --------
    >>> finite_real(float("nan"), "std", greater_than=0)
    Traceback (most recent call last):
    ...
    ValueError: std must be a finite number > 0. Received: nan
    >>> finite_real("8", "alibi_bias_max")
    Traceback (most recent call last):
    ...
    TypeError: alibi_bias_max must be a finite number. Received: '8'
    """
    bound = "" if greater_than is None else f" > {greater_than:g}"
    message = f"{name} must be {_allowed(f'a finite number{bound}', what)}. Received: {value!r}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(message)
    try:
        out = float(value)
    except (OverflowError, ValueError):
        raise ValueError(message) from None
    if not math.isfinite(out) or (greater_than is not None and not out > greater_than):
        raise ValueError(message)
    return out


def choice(value: object, name: str, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed``, else ``ValueError`` listing them.

    >>> choice("neox", "layout", ("half", "interleaved"))
    Traceback (most recent call last):
    ...
    ValueError: Unknown layout 'neox'. Expected one of: half, interleaved.
    """
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"Unknown {name} {value!r}. Expected one of: {', '.join(allowed)}.")
    return value


def optional_str(value: object, name: str) -> str | None:
    """``value`` if it is a string or ``None``, else ``TypeError``.

    >>> optional_str(3, "layer_type")
    Traceback (most recent call last):
    ...
    TypeError: layer_type must be a string or None. Received: 3
    """
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None. Received: {value!r}")
    return value


def broadcasts_into(shape: tuple[Any, ...], target: tuple[Any, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target`` without adding axes
    (sizes ``None``, unknown while tracing, match any size).

    >>> broadcasts_into((4, 1, 7), (4, 32, 7)), broadcasts_into((3,), (4, 32, 7))
    (True, False)
    >>> broadcasts_into((None, 1), (2, 5)), broadcasts_into((1, 1, 1, 7), (32, 7))
    (True, False)
    """
    if len(shape) > len(target):
        return False
    for p, n in zip(reversed(shape), reversed(target), strict=False):  # a loop: hot path
        if p != 1 and p != n and p is not None and n is not None:
            return False
    return True


# -- from fourier
def positive_ints(value: object, name: str, *, what: str | None = None) -> tuple[int, ...]:
    """``value``, a non-empty sequence of integers ``>= 1``, as a tuple of ``int``.

    >>> positive_ints([2, 3], "index_dims")
    (2, 3)
    >>> positive_ints(4, "max_resolution", what="one per axis")
    Traceback (most recent call last):
    ...
    TypeError: max_resolution must be a sequence of integers >= 1 (one per axis). Received: 4
    """
    if not isinstance(value, Sequence):
        allowed = _allowed("a sequence of integers >= 1", what)
        raise TypeError(f"{name} must be {allowed}. Received: {value!r}")
    sizes = tuple(positive_int(n, f"{name} entries") for n in value)
    if not sizes:
        raise ValueError(f"{name} must hold at least one size. Received: ()")
    return sizes


# -- from posnd


def integer(value: object, name: str) -> int:
    """``value`` as an ``int``: any integer (Python or NumPy), booleans excluded.

    >>> integer(-3, "padding_idx")
    -3
    >>> integer(1.0, "padding_idx")
    Traceback (most recent call last):
    ...
    TypeError: padding_idx must be an integer. Received: 1.0
    """
    if type(value) is int:  # the common case, without the slower ABC check
        return value
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer. Received: {value!r}")
    return int(value)  # type: ignore[call-overload]


# -- from index


def flag(value: object, name: str) -> bool:
    """``value`` as a ``bool`` if it is ``True`` or ``False`` (NumPy's too), else
    ``TypeError``.

    >>> flag(1, "bidirectional")
    Traceback (most recent call last):
    ...
    TypeError: bidirectional must be True or False. Received: 1
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False. Received: {value!r}")
    return bool(value)


# -- from rope


def even_int(value: object, name: str, *, minimum: int = 1) -> int:
    """``value`` as an even ``int`` ``>= minimum`` (a count of features RoPE rotates in
    pairs): :func:`positive_int`, then a ``ValueError`` for an odd value.

    >>> even_int(3, "rotary_dim")
    Traceback (most recent call last):
    ...
    ValueError: rotary_dim must be even (RoPE rotates pairs of features). Received: 3
    """
    out = positive_int(value, name, minimum=minimum)
    if out % 2:
        raise ValueError(f"{name} must be even (RoPE rotates pairs of features). Received: {out}")
    return out


#: Requests whose estimated memory stays below this are not checked further.
_CHECKED_BYTES = 256 * 2**20

#: Host memory per sin/cos pair for the frequency and reduction constants.
BYTES_PER_PAIR = 512

_ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


def available_memory() -> int | None:
    """Bytes of memory the system can still give (``MemAvailable``; else free pages).

    >>> m = available_memory()
    >>> m is None or m > 0
    True
    """
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_request_size(
    n_elements: int | None,
    dtype_name: str,
    *,
    what: str,
    n_pairs: int = 0,
    extra_bytes: int = 0,
    host_output: bool = True,
    like: Any = None,
) -> None:
    """Refuse, before allocating anything, a request that cannot fit in memory.

    The estimate is the output (``n_elements`` of ``dtype_name``, when it is built in
    host memory), the per-pair constants (:data:`BYTES_PER_PAIR` each) and
    ``extra_bytes`` of temporaries; it is compared with :func:`available_memory`.
    ``n_elements=None`` (sizes unknown while tracing) checks the rest only. ``like`` is
    an array the output and its temporaries follow: where its backend's namespace says
    it sits on an accelerator, only the constants are host memory.

    >>> check_request_size(10, "float32", what="encode")
    >>> check_request_size(2**62, "float32", what="encode")
    Traceback (most recent call last):
    ...
    ValueError: encode would need about 16777216.0 TiB of memory (4611686018427387904 float32 values and their working memory); about ... are available. Ask for fewer positions or features (or a smaller dtype), or compute in pieces.
    """
    out_bytes = (n_elements or 0) * _ITEMSIZE.get(dtype_name, 8) if host_output else 0
    total = out_bytes + n_pairs * BYTES_PER_PAIR + extra_bytes
    if total >= _CHECKED_BYTES and like is not None and _on_accelerator(like):
        host_output, total = False, n_pairs * BYTES_PER_PAIR
    if total < _CHECKED_BYTES:
        return
    available = available_memory()
    if available is None or total <= available:
        return
    count = f"{n_elements} {dtype_name} values and their working memory"
    if not host_output or not n_elements:
        count = f"{n_pairs} sin/cos pairs of constants"
    raise ValueError(
        f"{what} would need about {_size(total)} of memory ({count}); about "
        f"{_size(available)} are available. Ask for fewer positions or features (or a "
        "smaller dtype), or compute in pieces."
    )


def check_elements(
    n: int | None, what: str, *, dtype: str = "int64", per_element: int = 24, like: Any = None
) -> None:
    """:func:`check_request_size` of ``n`` results of ``dtype`` (an index table, ids)
    that need ``per_element`` bytes each with their working memory (``like`` as
    there); ``n=None`` (unknown sizes) is not checked.

    >>> check_elements(2**60, "toy_index")
    Traceback (most recent call last):
    ...
    ValueError: toy_index would need about 25165824.0 TiB of memory (1152921504606846976 int64 values and their working memory); about ... are available. Ask for fewer positions or features (or a smaller dtype), or compute in pieces.
    """
    if n:
        extra = (per_element - _ITEMSIZE.get(dtype, 8)) * n
        check_request_size(n, dtype, what=what, extra_bytes=extra, like=like)


def int32_values(values: np.ndarray, backend: str, what: str) -> np.ndarray:
    """Host integers as int32, for a backend whose widest integer that is now (JAX
    without x64); values beyond it are refused, never wrapped.

    >>> int32_values(np.array([2**31]), "jax", "positions")
    Traceback (most recent call last):
    ...
    ValueError: positions do not fit in int32, the widest integer of backend 'jax' now (enable jax_enable_x64 for int64). Received values from 2147483648 to 2147483648
    """
    info = np.iinfo(np.int32)
    if values.size and not (info.min <= int(values.min()) and int(values.max()) <= info.max):
        raise ValueError(
            f"{what} do not fit in int32, the widest integer of backend {backend!r} now "
            f"(enable jax_enable_x64 for int64). Received values from {values.min()} to "
            f"{values.max()}"
        )
    return values.astype(np.int32)


def _on_accelerator(obj: Any) -> bool:
    """Whether array ``obj`` sits on an accelerator, as its backend's namespace says."""
    source = backend_of(obj)
    return source is not None and get_namespace(source).on_accelerator(obj)


def known_size(obj: Any, trailing: int = 0) -> int | None:
    """The element count of array ``obj`` (less its last ``trailing`` axes) from its
    shape alone (a broadcast view is not copied, no data is read); ``None`` for Python
    data (already in memory) and while sizes are unknown (traced, symbolic).

    >>> known_size(np.broadcast_to(np.zeros(()), (2**20, 2**20))), known_size([1, 2])
    (1099511627776, None)
    >>> known_size(np.zeros((3, 4, 2)), trailing=1)
    12
    """
    if isinstance(obj, np.ndarray) and not trailing:
        return obj.size
    shape = getattr(obj, "shape", None)
    if shape is None:
        return None
    try:
        dims = list(shape)
    except (TypeError, ValueError):  # a TensorFlow shape of unknown rank
        return None
    n = 1
    for size in dims[: len(dims) - trailing]:  # (a loop, not a generator: torch.compile traces it)
        if not isinstance(size, (int, np.integer)):
            return None
        n *= int(size)
    return n


def _size(n_bytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n_bytes < 1024:
            return f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.1f} TiB"
