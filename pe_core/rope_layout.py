"""Feature-order conversion between the two RoPE pair layouts (pure NumPy).

* ``"half"`` (rotate-half: GPT-NeoX, Llama, Hugging Face): feature ``j`` is
  paired with ``j + d/2`` and the pair rotates at frequency ``j``.
* ``"interleaved"`` (GPT-J, RoFormer, Meta's original Llama checkpoints):
  features ``2j`` and ``2j + 1`` form pair ``j``.

Attention scores do not change when a model's q/k projections are permuted
with :func:`rope_permutation` and the rotary kernel switches layout to match.
Interleaved to half is the permutation that transformers'
``convert_llama_weights_to_hf.permute`` applies
(``w.view(n_heads, d // 2, 2, hidden).transpose(1, 2)``).

>>> from pe_core.rope_layout import rope_permutation
>>> rope_permutation(8, "interleaved", "half").tolist()
[0, 2, 4, 6, 1, 3, 5, 7]
"""

from __future__ import annotations

import numpy as np

from pe_core.validation import check_request_size, choice, is_integer, positive_int

__all__ = ["LAYOUTS", "ROTARY_FEATURES", "TABLE_LAYOUTS", "rope_permutation", "table_layout"]

#: The RoPE pair layouts (:func:`pe_core.rope.apply_rope`, the layers,
#: :func:`rope_permutation`): the one definition every module imports (canonical here;
#: ``pe_core.rope.LAYOUTS`` is the same tuple, re-exported).
LAYOUTS: tuple[str, ...] = ("half", "interleaved")

#: Which features of a head a partial rotary embedding rotates
#: (:func:`pe_core.rope.apply_rope` ``rotary_features=``): the first ``rotary_dim``
#: (GPT-NeoX, GPT-J, Phi) or the last ``rotary_dim`` (DeepSeek-V4's ``[nope | rope]``
#: heads); the others pass through.
ROTARY_FEATURES: tuple[str, ...] = ("first", "last")

#: The sin/cos table layouts (:class:`pe_core.Spec`, :mod:`pe_core._kernel.features`):
#: ``"split"`` ``[s0, s1, ... | c0, c1, ...]`` and ``"interleaved"`` ``[s0, c0, s1, c1, ...]``.
TABLE_LAYOUTS: tuple[str, ...] = ("interleaved", "split")

#: The table layout whose columns pair up as a RoPE layout's features do: RoPE's
#: ``"half"`` (features ``j`` and ``j + r/2``) is the tables' ``"split"``.
_TABLE_LAYOUT = {"half": "split", "interleaved": "interleaved"}


def table_layout(layout: str) -> str:
    """The sin/cos table layout that pairs features as RoPE ``layout`` does.

    >>> table_layout("half"), table_layout("interleaved")
    ('split', 'interleaved')
    """
    return _TABLE_LAYOUT[choice(layout, "layout", LAYOUTS)]


def rope_permutation(
    head_dim: int, from_layout: str, to_layout: str, *, rotary_dim: int | None = None
) -> np.ndarray:
    """Index array ``perm`` with ``x_new = x_old[..., perm]`` along one head's features.

    The permutation acts on the head-dim axis, the features of one head.
    Apply it wherever that axis is:

    * to a per-head query/key vector of shape ``(..., head_dim)``:
      ``q_new = q_old[..., perm]``;
    * to q/k projection weights in PyTorch ``Linear`` layout, shape
      ``(n_heads * head_dim, hidden)``, it permutes the output rows of each
      head:
      ``w.reshape(n_heads, head_dim, hidden)[:, perm, :].reshape(n_heads * head_dim, hidden)``
      (a bias is permuted the same way per head). For a ``(hidden, n_heads * head_dim)``
      kernel (JAX/Keras layout), permute the columns per head instead.

    V and output projections are never touched.

    Parameters
    ----------
    head_dim : int
        Features per head, >= 1.
    from_layout, to_layout : {"half", "interleaved"}
        Layout of the old and of the new weights.
    rotary_dim : int, optional
        Number of rotated leading features (partial rotary, e.g. GPT-J or
        GPT-NeoX with ``rotary_pct < 1``). Must be even and at most
        ``head_dim``. The trailing ``head_dim - rotary_dim`` features keep
        their place. Defaults to ``head_dim``.

    Returns
    -------
    numpy.ndarray
        int64 array of shape ``(head_dim,)``. It is the identity when the two
        layouts are equal. The half-to-interleaved and interleaved-to-half
        permutations are inverses of each other.

    Raises
    ------
    TypeError
        ``head_dim`` not an integer.
    ValueError
        Unknown layout; a non-positive ``head_dim``; an odd rotary dimension,
        or one larger than ``head_dim``.

    Examples
    --------
    >>> rope_permutation(8, "half", "interleaved").tolist()
    [0, 4, 1, 5, 2, 6, 3, 7]
    >>> rope_permutation(6, "half", "interleaved", rotary_dim=4).tolist()
    [0, 2, 1, 3, 4, 5]
    >>> import numpy as np
    >>> w = np.arange(2 * 4 * 3).reshape(2 * 4, 3)  # 2 heads, head_dim 4, hidden 3
    >>> perm = rope_permutation(4, "interleaved", "half")
    >>> w.reshape(2, 4, 3)[:, perm, :].reshape(8, 3)[:, 0].tolist()
    [0, 6, 3, 9, 12, 18, 15, 21]
    """
    from_layout = choice(from_layout, "from_layout", LAYOUTS)
    to_layout = choice(to_layout, "to_layout", LAYOUTS)
    head_dim = positive_int(head_dim, "head_dim")
    check_request_size(head_dim, "int64", what="rope_permutation", extra_bytes=24 * head_dim)
    rot = head_dim if rotary_dim is None else rotary_dim
    if not is_integer(rot) or not 0 <= rot <= head_dim:
        raise ValueError(f"rotary_dim must be an integer in [0, head_dim={head_dim}], got {rot!r}.")
    rot = int(rot)
    if rot % 2:
        what = "head_dim" if rotary_dim is None else "rotary_dim"
        raise ValueError(f"{what} must be even (RoPE rotates pairs of features), got {rot}.")

    perm = np.arange(head_dim, dtype=np.int64)
    if from_layout == to_layout:
        return perm
    half = rot // 2
    if from_layout == "interleaved":  # new[i * half + j] = old[2 j + i]
        perm[:rot] = np.concatenate([np.arange(0, rot, 2), np.arange(1, rot, 2)])
    else:  # new[2 j + i] = old[i * half + j]
        perm[:rot] = np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)
    return perm
