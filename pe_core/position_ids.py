"""Position ids computed from the data: padding masks, padded token ids, packed
sequences and NaViT's patch masks, on any backend.

Every function takes an array of NumPy, JAX, PyTorch or TensorFlow (or Python data,
computed with NumPy) and returns position ids of the same backend, on the same
device, as integers: int64, int32 on JAX without ``jax_enable_x64``. The values of a
framework array are never read back to the host: checks that would need them run
only for NumPy and Python input (each function says which), and every size comes
from static shapes, so the functions run under ``jax.jit``, ``torch.compile`` and
``tf.function``.

* :func:`from_attention_mask`: generation's rule, ``cumsum(mask) - 1`` on tokens,
  ``padding_value`` on padding (left-padded batches);
* :func:`from_input_ids`: RoBERTa's (and fairseq's ``make_positions``) numbering from
  ``padding_idx + 1``;
* :func:`from_cu_seqlens`: a position per token of packed sequences given their
  cumulative lengths (flash-attention's varlen ``cu_seqlens``);
* :func:`from_patch_attention_mask`: NaViT's fractional buckets of Idefics2, Idefics3
  and SmolVLM, for images of any size on a fixed ``num_patches_per_side`` grid;
* :func:`from_table_cells`: TAPAS's count that restarts in every table cell.

>>> from pe_core import position_ids
>>> position_ids.from_attention_mask([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]).tolist()
[[1, 1, 0, 1, 2], [0, 1, 2, 3, 4]]
>>> position_ids.from_cu_seqlens([0, 3, 5]).tolist()
[0, 1, 2, 0, 1]
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from pe_core._kernel.inputs import check_request_size
from pe_core._position_ids import navit, rules
from pe_core._position_ids.inputs import (
    allow,
    check_binary,
    check_fits,
    check_rank,
    inputs,
)
from pe_core.typing import BackendArrayT, BackendLike, HostData
from pe_core.validation import check_elements, choice, integer, known_size, positive_int

__all__ = [
    "NAVIT_RULES",
    "from_attention_mask",
    "from_cu_seqlens",
    "from_input_ids",
    "from_patch_attention_mask",
    "from_table_cells",
    "navit_bucket_table",
]

NavitRule = Literal["transformers", "transformers4", "exact"]

#: The coordinate rules :func:`from_patch_attention_mask` can reproduce.
NAVIT_RULES: tuple[str, ...] = ("transformers", "transformers4", "exact")


# --------------------------------------------------------------------------- masks and ids


def from_attention_mask(
    attention_mask: BackendArrayT | HostData,
    *,
    padding_value: int = 1,
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """Position ids of a padded batch from its attention mask: generation's rule.

    Token ``i`` gets the number of tokens before it (``cumsum(mask, -1) - 1``); padding
    gets ``padding_value``. For a left-padded prompt the first real token is at 0
    whatever the padding, which is what transformers' ``generate`` feeds a decoder
    whose ``position_ids`` are not given.

    Parameters
    ----------
    attention_mask : array of bool or int, shape (..., seq)
        1 (or ``True``) for tokens, 0 for padding; positions count along the last axis.
        NumPy and Python masks must hold 0 and 1 only. The values of a framework array
        are not read (that would be a host read): for other values it gives
        transformers' numbers, the running sum of the mask minus 1, padding where it
        is 0.
    padding_value : int
        The id written at padding places. 1 by default, as transformers 4's
        ``prepare_inputs_for_generation`` (``masked_fill_(attention_mask == 0, 1)``)
        and the models that keep that line (Idefics, Qwen2.5-Omni, Qwen3-Omni-MoE).
        transformers 5's ``GenerationMixin._prepare_position_ids_for_generation``
        writes 0. Either is harmless where attention ignores padding.
    backend : str, optional
        The backend to compute on: that of ``attention_mask`` by default (NumPy for
        Python data). A NumPy mask may be sent to another backend; a framework's
        array is not moved to another framework.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the mask's backend and device.

    Raises
    ------
    TypeError
        A mask that is not an array of booleans or integers; a non-integer
        ``padding_value``.
    ValueError
        A 0-d mask; host mask values other than 0 and 1.

    Examples
    --------
    >>> mask = [[0, 0, 1, 1], [1, 1, 1, 1]]
    >>> from_attention_mask(mask).tolist()
    [[1, 1, 0, 1], [0, 1, 2, 3]]
    >>> from_attention_mask(mask, padding_value=0).tolist()  # transformers 5's generate
    [[0, 0, 0, 1], [0, 1, 2, 3]]
    """
    n = known_size(attention_mask)  # the ids and their temporaries
    check_elements(n, "from_attention_mask", per_element=32, like=attention_mask)
    xp, mask, host, kind, wide, dtype = inputs(attention_mask, backend, "attention_mask")
    padding_value = integer(padding_value, "padding_value")
    allow(xp, mask, kind, "attention_mask")
    check_rank(mask, "attention_mask", 1, "(..., seq)")
    if host is not None:
        check_binary(host, "attention_mask")
    check_fits(xp, wide, "padding_value", padding_value)
    return rules.attention_mask_ids(xp, mask, kind, padding_value, dtype)


def from_input_ids(
    input_ids: BackendArrayT | HostData,
    padding_idx: int,
    past_length: int = 0,
    *,
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """RoBERTa's position ids: tokens count from ``padding_idx + 1``, padding gets
    ``padding_idx``.

    The numbers of transformers' ``create_position_ids_from_input_ids`` (in
    transformers 5 a staticmethod of ``RobertaEmbeddings`` and its copies: XLM-R,
    CamemBERT, Longformer, MPNet, ...; its third argument is ``cache_length``) and of
    fairseq's ``utils.make_positions``: token ``i`` of a row gets ``padding_idx +
    past_length + (number of non-padding tokens up to and including i)``.

    Parameters
    ----------
    input_ids : array of int, shape (..., seq)
        Token ids; positions count along the last axis.
    padding_idx : int
        The padding token's id (1 for RoBERTa), which is also the position id of padding
        and the one below the first token's.
    past_length : int
        Tokens already processed (a KV cache): the count starts after them. >= 0.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the ids' backend and device.

    Raises
    ------
    TypeError
        Ids that are not integers (booleans included); a non-integer ``padding_idx``
        or ``past_length``.
    ValueError
        0-d ids; ``past_length < 0``; results beyond int32 on JAX without x64.

    Examples
    --------
    >>> from_input_ids([[0, 31414, 232, 2, 1, 1]], padding_idx=1).tolist()
    [[2, 3, 4, 5, 1, 1]]
    >>> from_input_ids([[8, 9]], padding_idx=1, past_length=4).tolist()
    [[6, 7]]
    """
    # the ids and their temporaries
    check_elements(known_size(input_ids), "from_input_ids", per_element=32, like=input_ids)
    xp, ids, _, kind, wide, dtype = inputs(input_ids, backend, "input_ids")
    allow(xp, ids, kind, "input_ids", "int")
    pad = integer(padding_idx, "padding_idx")
    past = past_length  # a plain int >= 0 is the common case, without the general check
    if type(past) is not int or past < 0:
        past = positive_int(past_length, "past_length", minimum=0)
    shape = check_rank(ids, "input_ids", 1, "(..., seq)")
    check_fits(xp, wide, "the largest position id", pad, pad + past + int(shape[-1] or 0))
    return rules.input_ids_ids(xp, ids, pad, past, dtype)


# --------------------------------------------------------------------------- packed sequences


def from_cu_seqlens(
    cu_seqlens: BackendArrayT | HostData,
    *,
    total_length: int | None = None,
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """Position ids of packed sequences from their cumulative lengths.

    ``cu_seqlens = [0, n_1, n_1 + n_2, ...]`` (flash-attention's varlen input) packs
    sequences of lengths ``n_1, n_2, ...`` one after the other; token ``t`` gets its
    place in its own sequence, ``t - cu_seqlens[k]`` for the last ``k`` with
    ``cu_seqlens[k] <= t``. ``[0, 3, 5]`` gives ``[0, 1, 2, 0, 1]``.

    Parameters
    ----------
    cu_seqlens : array of int, shape (n + 1,)
        Starting at 0 and non-decreasing (an empty sequence repeats a value).
    total_length : int, optional
        The number of tokens, the output's length; ``cu_seqlens[-1]`` by default. For
        an eager framework array that default reads ``cu_seqlens[-1]`` back from the
        device: one synchronisation per call, as ``torch.repeat_interleave`` without
        ``output_size`` (pass the packed input's ``shape[0]`` to avoid it). Traced
        calls (``jax.jit``, ``torch.compile``, ``tf.function``) must pass it. Tokens
        from ``cu_seqlens[-1]`` on (trailing padding) count as one more sequence; a
        shorter ``total_length`` keeps the first ``total_length`` ids.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (total_length,)
        int64 (int32 on JAX without x64), on ``cu_seqlens``' backend and device.

    Raises
    ------
    TypeError
        Non-integer ``cu_seqlens`` or ``total_length``; a traced array without
        ``total_length``.
    ValueError
        Not 1-D or empty; for NumPy and Python input, a first value other than 0, a
        decrease or a value beyond int64 (the value and its index are named); a
        ``total_length`` beyond the output dtype, or whose output and working memory
        (about 32 bytes a token) exceed the available memory (refused before any work,
        the size named).

    Notes
    -----
    The values of a framework array are not read on the host, so the two value checks
    cannot raise for them. They run on the device instead, without a synchronisation:
    an invalid ``cu_seqlens`` gives ``-1`` at every place, an id no embedding table
    accepts, never plausible positions.

    Examples
    --------
    >>> from_cu_seqlens([0, 3, 5]).tolist()
    [0, 1, 2, 0, 1]
    >>> from_cu_seqlens([0, 2, 2, 3], total_length=5).tolist()  # an empty one, 2 padding
    [0, 1, 0, 0, 1]
    """
    xp, cu, host, kind, wide, dtype = inputs(cu_seqlens, backend, "cu_seqlens")
    allow(xp, cu, kind, "cu_seqlens", "int")
    shape = check_rank(cu, "cu_seqlens", (1,), "(n + 1,)")
    if shape[0] == 0:
        raise ValueError("cu_seqlens must hold at least one value (its leading 0). Received: []")
    if host is not None:
        if host.dtype == np.uint64 and host.max() > np.iinfo(np.int64).max:
            k = int(np.argmax(host > np.iinfo(np.int64).max))
            raise ValueError(
                f"cu_seqlens must fit in int64 (at most {2**63 - 1}). Received: "
                f"{int(host[k])} at index {k}"
            )
        values = host.astype(np.int64, copy=False)
        if values[0] != 0:
            raise ValueError(f"cu_seqlens must start at 0. Received: {values[0]} at index 0")
        decreases = values[1:] < values[:-1]
        if decreases.any():
            k = int(np.argmax(decreases)) + 1
            raise ValueError(
                "cu_seqlens must be non-decreasing (cumulative lengths). Received: "
                f"{values[k]} at index {k} after {values[k - 1]}"
            )
        if total_length is None:
            total_length = int(values[-1])
    elif total_length is None:
        if xp.is_tracing() or xp.is_traced(cu):
            raise TypeError(
                f"from_cu_seqlens needs total_length= for a traced {xp.name} array (under "
                "jit, compile or tf.function): it sizes the output, and a traced "
                "cu_seqlens[-1] has no value yet. Pass the packed input's length (its "
                "shape[0])."
            )
        # eager: the one synchronisation, as torch.repeat_interleave without output_size
        total_length = int(xp.to_numpy(cu[-1]))
    total = positive_int(total_length, "total_length", minimum=0)
    check_fits(xp, wide, "total_length", total)
    check_elements(total, "from_cu_seqlens", per_element=32, like=cu)
    return rules.cu_seqlens_ids(xp, cu, total, wide, dtype, host is not None)


# --------------------------------------------------------------------------- table cells


def from_table_cells(
    token_type_ids: BackendArrayT | HostData,
    *,
    max_position_embeddings: int | None = None,
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """TAPAS's position ids with ``reset_position_index_per_cell``: the count restarts
    in every table cell.

    Token ``t`` gets ``t - f``, where ``f`` is the first token of its cell: the first
    token of the same row with the same column id and row id. The question and the
    padding (column 0, row 0) form one cell that starts at 0, so they keep their
    absolute positions. With ``max_position_embeddings`` the ids are capped at
    ``max_position_embeddings - 1``. These are the ``position_ids`` of transformers'
    ``TapasEmbeddings.forward`` for a config with ``reset_position_index_per_cell=True``
    (its ``reduce_min`` over the product of the column and row index maps), without
    needing the type vocabulary sizes.

    Parameters
    ----------
    token_type_ids : array of int, shape (..., seq, k), k >= 3
        TAPAS's token types: ``[..., 1]`` is the column id and ``[..., 2]`` the row id
        (the other types are not used).
    max_position_embeddings : int, optional
        The position table's size (TAPAS's config, 1024 by default there): ids are at
        most one less. No cap by default.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (..., seq)
        int64 (int32 on JAX without x64), on the ids' backend and device.

    Raises
    ------
    TypeError
        Ids that are not integers; a non-integer ``max_position_embeddings``.
    ValueError
        Fewer than 2 axes or fewer than 3 token types; ``max_position_embeddings < 1``.

    Notes
    -----
    Cells are gathered by a stable sort of each sequence's (column, row) ids, on every
    backend: memory proportional to the output and time to the output times the log
    of the sequence length (no ``(..., seq, seq)`` comparison of every pair of tokens).

    Examples
    --------
    >>> types = [[[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 1, 1], [0, 1, 1], [0, 2, 1]]]
    >>> from_table_cells(types).tolist()  # question, header of column 1, two cells
    [[0, 1, 0, 0, 1, 0]]
    """
    xp, types, _, kind, _, dtype = inputs(token_type_ids, backend, "token_type_ids")
    allow(xp, types, kind, "token_type_ids", "int")
    shape = check_rank(types, "token_type_ids", 2, "(..., seq, k) with k >= 3")
    if shape[-1] is not None and shape[-1] < 3:
        raise ValueError(
            "token_type_ids must have shape (..., seq, k) with k >= 3 (column ids at [..., 1], "
            f"row ids at [..., 2]). Received: shape {tuple(shape)}"
        )
    cap = max_position_embeddings
    if cap is not None:
        cap = positive_int(cap, "max_position_embeddings") - 1
    # the ids, their casts, the sorts and the gathers: about a dozen int64 per token
    check_elements(known_size(types, 1), "from_table_cells", per_element=96, like=types)
    return rules.table_cell_ids(xp, types, int(shape[-2]), cap, dtype)


# --------------------------------------------------------------------------- NaViT buckets


def navit_bucket_table(
    num_patches_per_side: int,
    max_patches: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
) -> np.ndarray:
    """The bucket of every patch row (or column) ``i`` of an image ``count`` patches
    high (or wide): ``table[count, i]``, as :func:`from_patch_attention_mask` uses it.

    Parameters
    ----------
    num_patches_per_side : int
        The position grid's side ``n`` (``image_size // patch_size``): buckets are
        ``0 .. n - 1``.
    max_patches : int
        The largest image side in patches: the table has shape
        ``(max_patches + 1, max_patches)`` (row 0, no patches, is all 0).
    rule, vector_width
        As for :func:`from_patch_attention_mask`.

    Returns
    -------
    numpy.ndarray
        int64.

    Examples
    --------
    >>> navit_bucket_table(4, 3, rule="exact").tolist()
    [[0, 0, 0], [0, 3, 3], [0, 2, 3], [0, 1, 2]]
    """
    n = positive_int(num_patches_per_side, "num_patches_per_side")
    m = positive_int(max_patches, "max_patches")
    rule = choice(rule, "rule", NAVIT_RULES)  # type: ignore[assignment]
    width = _vector_width(vector_width)
    check_request_size((m + 1) * m, "int64", what="navit_bucket_table", extra_bytes=8 * m)
    return np.array(navit.navit_table(n, m, rule, width), dtype=np.int64)


def _vector_width(value: object) -> int:
    width = positive_int(value, "vector_width", minimum=0)
    if width & (width - 1):
        raise ValueError(
            f"vector_width must be 0 or a power of two (floats per CPU vector). Received: {value!r}"
        )
    return width


def from_patch_attention_mask(
    patch_attention_mask: BackendArrayT | HostData,
    num_patches_per_side: int,
    *,
    rule: NavitRule = "transformers",
    vector_width: int = 8,
    backend: BackendLike | None = None,
) -> BackendArrayT:
    """NaViT's fractional position ids of variable-size images (Idefics2, Idefics3,
    SmolVLM): the ``position_ids`` of transformers' ``Idefics2VisionEmbeddings.forward``.

    An image ``h x w`` patches large (its patch mask's ``True`` rows and columns) is
    mapped onto the learned ``n x n`` grid (``n = num_patches_per_side``): patch
    ``(i, j)`` gets ``bucket(i, h) * n + bucket(j, w)``, where ``bucket(i, h)`` is the
    bucket of the fractional coordinate ``i / h`` among the boundaries ``1/n, 2/n,
    ...`` (``torch.bucketize(..., right=True)``). Padding patches get 0.

    The buckets depend on float32 rounding where ``i / h`` falls on a boundary
    ``k / n`` (an image whose side is a multiple of ``n``'s factors), and transformers'
    rounding has changed over versions and depends on the CPU: ``rule`` and
    ``vector_width`` choose whose numbers to reproduce. They are found once per
    configuration on the host (a small ``(max_side + 1, max_side)`` table of integers)
    and gathered on the device, so every backend gives the same numbers exactly.

    Parameters
    ----------
    patch_attention_mask : array of bool or int, shape (batch, max_h, max_w)
        ``True`` on an image's patches, ``False`` on padding. As transformers, each
        image's height is the count of ``True`` in its first column and its width the
        count in its first row (the processors' masks are top-left rectangles).
    num_patches_per_side : int
        ``image_size // patch_size`` of the vision config (70 for Idefics2's 980/14,
        Idefics3's 364/14 is 26, SmolVLM's 512/16 is 32).
    rule : {"transformers", "transformers4", "exact"}
        ``"transformers"``: transformers 5's vectorised code, coordinates
        ``float32(i) * (1 / float32(h))`` clamped at ``float32(1 - 1e-6)``.
        ``"transformers4"``: transformers 4's loop over images, coordinates
        ``torch.arange(0, 1 - 1e-6, 1 / h)`` in float32 (the code the released
        checkpoints were trained with); the two differ for some sizes (``n = 2``:
        patch 29 of ``h = 58``, patch 55 of ``h = 110``). ``"exact"``: real-number arithmetic, ``bucket(i, h) =
        floor(i * n / h)``.
    vector_width : int
        For the two transformers rules: floats per CPU vector of the PyTorch build that
        made the boundaries ``torch.arange(1/n, 1, 1/n)`` (PyTorch rounds the values of
        its vectorised loop differently): 8 for AVX2 (the default), 16 for AVX512, 0 for
        the scalar loop. ``torch.backends.cpu.get_cpu_capability()`` tells.
    backend : str, optional
        As for :func:`from_attention_mask`.

    Returns
    -------
    array of int, shape (batch, max_h * max_w)
        int64 (int32 on JAX without x64), on the mask's backend and device: the
        ``position_embedding`` indices, row-major over the patch grid.

    Raises
    ------
    TypeError
        A mask that is not booleans or integers; non-integer options.
    ValueError
        A mask that is not 3-D; host mask values other than 0 and 1; an unknown
        ``rule``; a ``vector_width`` that is not 0 or a power of two.

    Examples
    --------
    >>> mask = [[[1, 1, 1, 0], [1, 1, 1, 0]]]  # one image, 2 x 3 patches of 2 x 4
    >>> from_patch_attention_mask(mask, 4).tolist()
    [[0, 1, 2, 0, 8, 9, 10, 0]]
    """
    xp, mask, host, kind, wide, dtype = inputs(
        patch_attention_mask, backend, "patch_attention_mask"
    )
    n = positive_int(num_patches_per_side, "num_patches_per_side")
    rule = choice(rule, "rule", NAVIT_RULES)  # type: ignore[assignment]
    width = _vector_width(vector_width)
    allow(xp, mask, kind, "patch_attention_mask")
    check_rank(mask, "patch_attention_mask", (3,), "(batch, max_h, max_w)")
    if host is not None:
        check_binary(host, "patch_attention_mask")
    check_fits(xp, wide, "the largest position id", n * n - 1)
    return navit.patch_ids(xp, mask, kind, n, rule, width, wide, dtype)
