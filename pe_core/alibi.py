"""ALiBi head slopes (Press et al., 2022), pure NumPy float64.

The rule follows the paper's reference ``get_slopes`` (ofirpress/attention_with_linear_biases)
and BLOOM's ``build_alibi_tensor`` in transformers. For ``n`` heads with ``p``
the largest power of two ``<= n``:

* the first ``p`` slopes are ``2 ** (-8 * k / p)`` for ``k = 1 .. p``;
* the remaining ``n - p`` slopes are the odd-indexed members of the ``2p``-head
  sequence, ``2 ** (-8 * k / (2 p))`` for ``k = 1, 3, 5, ..``.

>>> from pe_core.alibi import alibi_slopes
>>> alibi_slopes(4).tolist()
[0.25, 0.0625, 0.015625, 0.00390625]
"""

from __future__ import annotations

import numpy as np

__all__ = ["alibi_slopes"]


def alibi_slopes(n_heads: int) -> np.ndarray:
    """Per-head ALiBi slopes, closest-power-of-two rule included.

    Parameters
    ----------
    n_heads : int
        Number of attention heads, >= 1.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n_heads,)``. Head ``h`` adds
        ``-slopes[h] * (i - j)`` to the score of query ``i`` on key ``j``.
        The values are computed as ``2.0 ** exponent`` with the exponent
        evaluated in float64, so powers of two come out exact. BLOOM instead
        raises a float32 base to integer powers, which differs in the last
        bits.

    Raises
    ------
    TypeError
        If ``n_heads`` is not an integer (``bool`` and floats included).
    ValueError
        If ``n_heads`` < 1.

    Examples
    --------
    >>> alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]
    True
    >>> s = alibi_slopes(12)  # 8 heads of the 8-rule, then 4 odd ones of the 16-rule
    >>> s[8:].tolist() == [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    True
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, (int, np.integer)):
        raise TypeError(f"n_heads must be an integer >= 1, got {n_heads!r}.")
    n = int(n_heads)
    if n < 1:
        raise ValueError(f"n_heads must be an integer >= 1, got {n}.")
    p = 1 << (n.bit_length() - 1)  # largest power of two <= n
    k = np.arange(1, p + 1, dtype=np.float64)
    slopes = np.power(2.0, -8.0 * k / p)
    if p != n:
        k_extra = np.arange(1, 2 * (n - p), 2, dtype=np.float64)
        slopes = np.concatenate([slopes, np.power(2.0, -8.0 * k_extra / (2 * p))])
    return slopes
