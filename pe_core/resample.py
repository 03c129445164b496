"""Learned position tables resampled to a new grid, with PyTorch's numbers on every backend.

A ViT trained at 224 px has a ``14 x 14`` table of learned position embeddings; run it at
512 px and the table must be resized to ``32 x 32``. Model code does this with
``torch.nn.functional.interpolate`` (timm ``resample_abs_pos_embed``, transformers
``interpolate_pos_encoding``), and ports to JAX or TensorFlow usually reach for
``jax.image.resize`` or ``tf.image.resize``, which compute other numbers (the documentation's page
"Resampling learned tables" measures how far). Here the resize is PyTorch's: its 1-D weights are
built on the host in float64 from the static sizes (:mod:`pe_core._resample`) and
applied to the table axis by axis (the taps of each output gathered and weighed) in the
table's own framework, so NumPy,
JAX, PyTorch and TensorFlow give ``F.interpolate``'s values (``align_corners=False``,
``bilinear`` or ``bicubic``, ``antialias`` on or off) within float32 rounding, eager,
traced (``jax.jit``, ``torch.compile``, ``tf.function``) and under autograd.

The functions:

* :func:`resample_pos_embed`: timm's ``resample_abs_pos_embed`` (prefix rows kept, the
  grid resized);
* :func:`interpolate_pos_encoding`: transformers' ``ViTEmbeddings.interpolate_pos_encoding``
  (the grid of an image of ``height x width`` pixels);
* :func:`resize_naflex_pos_embed`: SigLIP2's per-image NaFlex resize
  (``Siglip2VisionEmbeddings.resize_positional_embeddings``);
* :func:`resize_rel_pos_bias_table`: a relative-position bias table for a new window
  (timm ``resize_rel_pos_bias_table_simple``; BEiT's ``interpolate_pos_encoding`` with
  ``interpolation="bilinear"``);
* :func:`get_rel_pos`, :func:`decomposed_rel_pos` and :func:`add_decomposed_rel_pos`:
  SAM / ViTDet decomposed relative positions;
* :func:`pos_embed_load_hook`: a PyTorch ``load_state_dict`` pre-hook that resamples a
  checkpoint's table to the model's grid;
* :func:`resample_pos_embed_in_tree`: the same for a nested-dict checkpoint (Flax linen
  params, a pure dict of an ``nnx.State``): the table at a key path resized, the rest kept.

Every size is a Python integer (static); the tables stay where they are (no host read).
NaFlex's ``spatial_shapes`` may also be a framework's integer array (transformers passes
a torch ``LongTensor``): its values are the result's shape, so they are read on the host.

>>> import numpy as np
>>> table = np.arange(1 + 2 * 2, dtype=np.float32).reshape(1, 5, 1)  # a class row, 2x2 grid
>>> resample_pos_embed(table, (4, 4), interpolation="bilinear")[0, :, 0].tolist()[:5]
[0.0, 1.0, 1.25, 1.75, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pe_core import _resample
from pe_core._resample import array as _array
from pe_core._resample import size as _size
from pe_core.typing import ArrayT, Interpolation
from pe_core.validation import choice, flag, positive_int

__all__ = [
    "INTERPOLATIONS",
    "add_decomposed_rel_pos",
    "decomposed_rel_pos",
    "get_rel_pos",
    "interpolate_pos_encoding",
    "pos_embed_load_hook",
    "resample_pos_embed",
    "resample_pos_embed_in_tree",
    "resize_naflex_pos_embed",
    "resize_rel_pos_bias_table",
]

#: The interpolation modes (``torch.nn.functional.interpolate``'s names).
INTERPOLATIONS = ("bicubic", "bilinear")

#: A checkpoint tree: its type is kept.
_TreeT = TypeVar("_TreeT", bound=Mapping[Any, Any])


def _method(interpolation: object, antialias: object) -> tuple[str, bool]:
    """The validated ``interpolation`` and ``antialias`` of a resize."""
    return choice(interpolation, "interpolation", INTERPOLATIONS), flag(antialias, "antialias")


# -- absolute tables --------------------------------------------------------------------
def resample_pos_embed(
    table: ArrayT,
    new_size: int | Sequence[int],
    *,
    old_size: int | Sequence[int] | None = None,
    num_prefix_tokens: int = 1,
    interpolation: Interpolation = "bicubic",
    antialias: bool = False,
) -> ArrayT:
    """A learned position table ``(N, prefix + old_h * old_w, C)`` resized to the grid
    ``new_size``: ``(N, prefix + new_h * new_w, C)`` (timm's ``resample_abs_pos_embed``).

    The first ``num_prefix_tokens`` rows (class and register tokens) are kept as they are;
    the others, read as a row-major ``(old_h, old_w)`` grid, are resized with
    ``torch.nn.functional.interpolate(grid, size=new_size, mode=interpolation,
    align_corners=False, antialias=antialias)`` and flattened back.

    Parameters
    ----------
    table : array
        ``(N, L, C)`` from NumPy, JAX, PyTorch or TensorFlow (any float dtype; float16
        and bfloat16 are resampled in float32 and rounded once).
    new_size : int or (int, int)
        The new grid ``(new_h, new_w)``; an int is a square.
    old_size : int or (int, int), optional
        The table's grid; by default the square with ``old_h * old_w = L - prefix``
        (an error when ``L - prefix`` is not a square).
    num_prefix_tokens : int
        Leading rows that are not on the grid, >= 0 (1: a class token).
    interpolation : {"bicubic", "bilinear"}
    antialias : bool
        PyTorch's ``antialias``: when shrinking, the filter is widened by the shrink
        factor (Pillow's resampling); no effect when enlarging except at the borders.

    Returns
    -------
    array
        The resized table, same framework, device and dtype as ``table``. When the grid
        does not change, ``table`` itself.

    Raises
    ------
    TypeError
        ``table`` is not an array of a float dtype; sizes are not integers.
    ValueError
        ``table`` is not 3-D, has fewer rows than the prefix, its rows do not fill
        ``old_size``; an unknown interpolation.

    Notes
    -----
    timm's ``resample_abs_pos_embed`` defaults to ``antialias=True``; here the default
    is ``F.interpolate``'s (and transformers') ``antialias=False``: pass
    ``antialias=True`` for timm's numbers (:func:`pos_embed_load_hook` does by
    default). timm returns the table unchanged whenever the row count stays and the new
    grid is square (even from a non-square ``old_size``), and resamples float64 tables
    in float32; here the grid is always resized from ``old_size``, and float64 tables in
    float64 (``F.interpolate``'s numbers for float64 inputs).

    Examples
    --------
    >>> import numpy as np
    >>> table = np.random.default_rng(0).normal(size=(1, 1 + 14 * 14, 8)).astype(np.float32)
    >>> resample_pos_embed(table, 32).shape
    (1, 1025, 8)
    >>> resample_pos_embed(table, (16, 8), interpolation="bilinear", antialias=True).shape
    (1, 129, 8)
    """
    xp, (n, rows, channels) = _array(table, "table", 3)
    new = _size(new_size, "new_size")
    prefix = positive_int(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    mode, aa = _method(interpolation, antialias)
    old = _resample.pos_embed_grid((n, rows, channels), prefix, old_size)
    if old == new:
        return table
    sides = ((old[0], new[0]), (old[1], new[1]))
    size = n * (prefix + new[0] * new[1]) * channels
    _resample.check_request(xp, table, sides, mode, aa, size, "resample_pos_embed")
    return _resample.run(xp, _resample.pos_embed_kernel, (table,), (prefix, old, new, mode, aa))


def interpolate_pos_encoding(
    table: ArrayT,
    height: int,
    width: int,
    patch_size: int | Sequence[int],
    *,
    num_prefix_tokens: int = 1,
    interpolation: Interpolation = "bicubic",
) -> ArrayT:
    """A ViT position table ``(1, prefix + S * S, C)`` for an image of ``height x width``
    pixels: the grid resized to ``(height // patch_h, width // patch_w)``.

    transformers' ``ViTEmbeddings.interpolate_pos_encoding`` (and DeiT's, DINOv2-like
    models with ``interpolation``): bicubic ``F.interpolate`` with
    ``size=(new_h, new_w)``, ``align_corners=False``, the class row kept.

    Parameters
    ----------
    table : array
        ``(N, prefix + S * S, C)``, a square grid of ``S * S`` rows.
    height, width : int
        The image size in pixels (>= one patch).
    patch_size : int or (int, int)
        The patch size ``(patch_h, patch_w)``.
    num_prefix_tokens : int
        Rows before the grid (1: the class token).
    interpolation : {"bicubic", "bilinear"}

    Examples
    --------
    >>> import numpy as np
    >>> table = np.zeros((1, 1 + 14 * 14, 4), np.float32)
    >>> interpolate_pos_encoding(table, 384, 512, 16).shape  # a 24 x 32 grid
    (1, 769, 4)
    """
    ph, pw = _size(patch_size, "patch_size")
    h = positive_int(height, "height", minimum=ph, what="pixels, at least one patch")
    w = positive_int(width, "width", minimum=pw, what="pixels, at least one patch")
    return resample_pos_embed(
        table, (h // ph, w // pw), num_prefix_tokens=num_prefix_tokens, interpolation=interpolation
    )


def resize_naflex_pos_embed(
    table: ArrayT,
    spatial_shapes: Any,
    max_length: int,
    *,
    interpolation: str = "bilinear",
    antialias: bool = True,
) -> ArrayT:
    """SigLIP2's NaFlex position embeddings: one ``(h_i, w_i)`` grid per image, padded.

    transformers' ``Siglip2VisionEmbeddings.resize_positional_embeddings``: the
    ``(H, W, C)`` table is resized to each image's ``(h_i, w_i)`` (bilinear,
    ``antialias=True``, ``align_corners=False``), flattened row-major into the first
    ``h_i * w_i`` rows of a ``(max_length, C)`` block; the remaining rows repeat the
    first row of that image's grid (transformers' padding).

    Parameters
    ----------
    table : array
        ``(H, W, C)``.
    spatial_shapes : sequence of (int, int) or integer array
        ``(B, 2)``: each image's patch grid. A framework array (the torch
        ``LongTensor`` transformers passes) is read on the host: the sizes fix the
        shape of the result, so an accelerator array costs one synchronisation (as
        transformers' own loop over it does); a traced one is refused.
    max_length : int
        Rows per image, at least every ``h_i * w_i``.
    interpolation : {"bilinear", "bicubic"}
    antialias : bool

    Returns
    -------
    array
        ``(B, max_length, C)`` in the table's framework and dtype (transformers upcasts
        to float32 on the CPU and casts back: the same rounding here).

    Examples
    --------
    >>> import numpy as np
    >>> table = np.ones((16, 16, 4), np.float32)
    >>> resize_naflex_pos_embed(table, [(8, 12), (16, 6)], 100).shape
    (2, 100, 4)
    """
    xp, (height, width, channels) = _array(table, "table", 3)
    mode, aa = _method(interpolation, antialias)
    pairs = _resample.spatial_pairs(spatial_shapes)
    longest = max(h * w for h, w in pairs)
    length = positive_int(max_length, "max_length", minimum=longest, what="the largest h * w")
    sides = [side for h, w in pairs for side in ((height, h), (width, w))]
    size = len(pairs) * length * channels
    _resample.check_request(xp, table, sides, mode, aa, size, "resize_naflex_pos_embed")
    return _resample.run(xp, _resample.naflex_kernel, (table,), (tuple(pairs), length, mode, aa))


# -- relative tables --------------------------------------------------------------------
def resize_rel_pos_bias_table(
    table: ArrayT,
    new_window_size: int | Sequence[int],
    *,
    old_window_size: int | Sequence[int] | None = None,
    num_extra_tokens: int = 0,
    interpolation: str = "bicubic",
    antialias: bool = False,
) -> ArrayT:
    """A relative-position bias table resized to a new attention window.

    A window ``(Wh, Ww)`` has ``(2 Wh - 1) x (2 Ww - 1)`` relative offsets. The table is
    either flat, ``(offsets + num_extra_tokens, heads)`` with the offsets row-major and
    the extra rows (BEiT's three class-token biases) last, or ``(heads, 2 Wh - 1,
    2 Ww - 1)`` (TF MaxViT). The offset grid is resized with ``F.interpolate``
    (``align_corners=False``); extra rows are kept.

    This is timm's ``resize_rel_pos_bias_table_simple`` (bicubic); BEiT's
    ``BeitRelativePositionBias(interpolate_pos_encoding=True)`` in transformers is
    ``interpolation="bilinear", num_extra_tokens=3`` (square windows: transformers reads
    the grid as ``(width, height)``, which differs for non-square ones).

    Parameters
    ----------
    table : array
        ``(rows, heads)`` or ``(heads, 2 Wh - 1, 2 Ww - 1)``.
    new_window_size : int or (int, int)
        The new window ``(Wh, Ww)``.
    old_window_size : int or (int, int), optional
        The table's window; by default the square one the table's rows fill (flat
        tables) or the 3-D table's own grid.
    num_extra_tokens : int
        Flat tables: rows after the offset grid, >= 0.
    interpolation : {"bicubic", "bilinear"}
    antialias : bool

    Examples
    --------
    >>> import numpy as np
    >>> table = np.zeros((13 * 13 + 3, 12), np.float32)  # BEiT, window 7 x 7, 12 heads
    >>> resize_rel_pos_bias_table(table, 12, num_extra_tokens=3).shape
    (532, 12)
    >>> resize_rel_pos_bias_table(np.zeros((4, 13, 13), np.float32), (8, 6)).shape
    (4, 15, 11)
    """
    xp, shape = _array(table, "table", (2, 3))
    wh, ww = _size(new_window_size, "new_window_size")
    new = (2 * wh - 1, 2 * ww - 1)
    mode, aa = _method(interpolation, antialias)
    extra = positive_int(num_extra_tokens, "num_extra_tokens", minimum=0)
    return _resample.resize_bias_table(xp, table, shape, new, old_window_size, extra, mode, aa)


def get_rel_pos(q_size: int, k_size: int, rel_pos: ArrayT) -> ArrayT:
    """SAM / ViTDet relative positions along one axis: ``(q_size, k_size, C)``.

    ``rel_pos`` ``(L, C)`` holds one embedding per offset; when ``L`` differs from the
    ``2 max(q_size, k_size) - 1`` offsets needed it is resized by 1-D linear
    interpolation (``F.interpolate(mode="linear")``, ``align_corners=False``). Query
    ``i`` and key ``j`` then read the offset ``i * max(k/q, 1) - j * max(q/k, 1) +
    (k - 1) * max(q/k, 1)``, truncated (the shorter axis's coordinates scaled up).
    transformers' ``SamVisionAttention.get_rel_pos``.

    Examples
    --------
    >>> import numpy as np
    >>> rel = np.arange(7, dtype=np.float32)[:, None]  # offsets -3 .. 3 of a 4-long axis
    >>> get_rel_pos(4, 4, rel)[..., 0].tolist()[0]  # query 0: offsets 0, -1, -2, -3
    [3.0, 2.0, 1.0, 0.0]
    """
    q = positive_int(q_size, "q_size")
    k = positive_int(k_size, "k_size")
    xp, (length, channels) = _array(rel_pos, "rel_pos", 2)
    _resample.check_rel_request(xp, rel_pos, [(length, q, k)], q * k * channels, "get_rel_pos")
    return _resample.run(xp, _resample.rel_pos_kernel, (rel_pos,), (q, k))


def decomposed_rel_pos(
    query: ArrayT,
    rel_pos_h: ArrayT,
    rel_pos_w: ArrayT,
    q_size: Sequence[int],
    k_size: Sequence[int],
) -> ArrayT:
    """SAM / ViTDet decomposed relative-position bias ``(B, q_h, q_w, k_h, k_w)``.

    ``bias[b, i, j, k, l] = q[b, i, j] . Rh[i, k] + q[b, i, j] . Rw[j, l]`` with ``Rh =
    get_rel_pos(q_h, k_h, rel_pos_h)`` and ``Rw = get_rel_pos(q_w, k_w, rel_pos_w)``
    (MViTv2): transformers' ``SamVisionAttention.get_decomposed_rel_pos``.

    Parameters
    ----------
    query : array
        ``(B, q_h * q_w, C)``, row-major over the query grid.
    rel_pos_h, rel_pos_w : array
        ``(L_h, C)``, ``(L_w, C)``: embeddings per offset along each axis.
    q_size, k_size : (int, int)
        The query and key grids.

    Examples
    --------
    >>> import numpy as np
    >>> q = np.ones((2, 4 * 4, 8), np.float32)
    >>> r = np.ones((7, 8), np.float32)
    >>> decomposed_rel_pos(q, r, r, (4, 4), (4, 4)).shape
    (2, 4, 4, 4, 4)
    """
    q, k = _size(q_size, "q_size"), _size(k_size, "k_size")
    xp, (batch, n_query, dim) = _array(query, "query", 3)
    if n_query != q[0] * q[1]:
        raise ValueError(
            f"query has {n_query} rows, q_size {q} needs {q[0] * q[1]}. "
            f"Received: shape {(batch, n_query, dim)}"
        )
    axes = _resample.rel_axes(xp, dim, (rel_pos_h, rel_pos_w), q, k)
    size = batch * q[0] * q[1] * k[0] * k[1]
    _resample.check_rel_request(xp, query, axes, size, "decomposed_rel_pos")
    return _resample.run(xp, _resample.decomposed_kernel, (query, rel_pos_h, rel_pos_w), (q, k))


def add_decomposed_rel_pos(
    attn: ArrayT,
    query: ArrayT,
    rel_pos_h: ArrayT,
    rel_pos_w: ArrayT,
    q_size: Sequence[int],
    k_size: Sequence[int],
) -> ArrayT:
    """Attention logits ``(B, q_h * q_w, k_h * k_w)`` plus :func:`decomposed_rel_pos`
    (segment-anything's ``add_decomposed_rel_pos``).

    Examples
    --------
    >>> import numpy as np
    >>> q = np.ones((2, 16, 8), np.float32)
    >>> add_decomposed_rel_pos(np.zeros((2, 16, 16), np.float32), q,
    ...                        np.ones((7, 8), np.float32), np.ones((7, 8), np.float32),
    ...                        (4, 4), (4, 4))[0, 0, 0]
    np.float32(16.0)
    """
    q, k = _size(q_size, "q_size"), _size(k_size, "k_size")
    xp, (batch, rows, cols) = _array(attn, "attn", 3)
    if (rows, cols) != (q[0] * q[1], k[0] * k[1]):
        raise ValueError(
            f"attn must be (B, {q[0] * q[1]}, {k[0] * k[1]}) for q_size {q} and k_size "
            f"{k}. Received: shape {(batch, rows, cols)}"
        )
    other, (q_batch, n_query, dim) = _array(query, "query", 3)
    if other.name != xp.name or (q_batch, n_query) != (batch, rows):
        raise ValueError(
            f"query must be a {xp.name} array of shape ({batch}, {rows}, C) for attn "
            f"{(batch, rows, cols)}. Received: a {other.name} array of shape "
            f"{(q_batch, n_query, dim)}"
        )
    axes = _resample.rel_axes(xp, dim, (rel_pos_h, rel_pos_w), q, k)
    size = 2 * batch * rows * cols
    _resample.check_rel_request(xp, attn, axes, size, "add_decomposed_rel_pos")
    arrays = (attn, query, rel_pos_h, rel_pos_w)
    return _resample.run(xp, _resample.add_decomposed_kernel, arrays, (q, k))


# -- loading checkpoints ----------------------------------------------------------------
def pos_embed_load_hook(
    name: str = "pos_embed",
    *,
    num_prefix_tokens: int = 1,
    interpolation: Interpolation = "bicubic",
    antialias: bool = True,
) -> Callable[..., None]:
    """A PyTorch ``load_state_dict`` pre-hook that resamples a checkpoint's position table
    to the grid of the model's own.

    Register it with ``module.register_load_state_dict_pre_hook(hook)`` on the module
    that owns the parameter ``name`` (shape ``(1, prefix + h * w, C)``, a square grid):
    a checkpoint table with another square grid is resized with
    :func:`resample_pos_embed` before it is copied in, so a model built for 448 px loads
    a 224 px checkpoint.

    The defaults are timm's when it loads a ViT checkpoint (``checkpoint_filter_fn``,
    and ``resample_abs_pos_embed``'s own defaults, which ``set_input_size`` and
    ``dynamic_img_size`` use too): bicubic with ``antialias=True``. (Antialiasing
    changes the numbers when the grid shrinks, and at the borders when it grows: by
    about 8 % of the largest value of a random table on a 14 x 14 -> 24 x 24 load.)
    :func:`resample_pos_embed` keeps ``F.interpolate``'s ``antialias=False``.

    Examples
    --------
    >>> hook = pos_embed_load_hook("pos_embed")
    >>> callable(hook)
    True
    """
    options = {k: v for k, v in locals().items() if k != "name"}  # resample_pos_embed's
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string. Received: {name!r}")
    positive_int(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    _method(interpolation, antialias)

    def hook(module: Any, state_dict: Any, prefix: str, *_: Any) -> None:
        key = prefix + name
        if key not in state_dict:
            return
        loaded, target = state_dict[key], getattr(module, name)
        want, have = tuple(target.shape), tuple(loaded.shape)
        if want == have:
            return
        new_side = _resample.square_side(
            want[1] - num_prefix_tokens, "a square grid", f"the model's {name}"
        )
        state_dict[key] = resample_pos_embed(loaded, new_side, **options)

    return hook


def resample_pos_embed_in_tree(
    tree: _TreeT, path: str | Sequence[Any], new_size: int | Sequence[int], **kwargs: Any
) -> _TreeT:
    """A checkpoint tree with the position table at ``path`` resized by
    :func:`resample_pos_embed`; every other entry is the same object.

    The Flax counterpart of :func:`pos_embed_load_hook`. ``tree`` is nested mappings with
    arrays at the leaves: Flax linen ``params`` (dicts or ``FrozenDict``) or the pure dict
    of an ``nnx.State`` (``nnx.to_pure_dict(state)``; write it back with
    ``nnx.replace_by_pure_dict(state, tree)``). The input is not changed: the mappings on
    the path are rebuilt (each as its own type), the others shared.

    Parameters
    ----------
    tree : mapping
        The checkpoint's parameters.
    path : str or sequence of keys
        Where the table is: ``"params/pos_embed"`` or ``("params", "pos_embed")``
        (keys that are not strings, such as list indices of an nnx pure dict, as a
        sequence).
    new_size : int or (int, int)
        The model's grid.
    **kwargs
        :func:`resample_pos_embed`'s ``old_size``, ``num_prefix_tokens``,
        ``interpolation`` and ``antialias``.

    Returns
    -------
    mapping
        The tree with ``resample_pos_embed(table, new_size, **kwargs)`` at ``path``.

    Raises
    ------
    TypeError
        ``tree`` or a level on the path is not a mapping; the leaf is not an array (an
        ``nnx.State`` with its ``Variable`` leaves: pass its pure dict).
    KeyError
        A key of ``path`` is missing (the message names the keys that are there).

    Examples
    --------
    >>> import numpy as np
    >>> params = {"params": {"pos_embed": np.zeros((1, 1 + 14 * 14, 8), np.float32),
    ...                      "head": {"kernel": np.ones((8, 2), np.float32)}}}
    >>> out = resample_pos_embed_in_tree(params, "params/pos_embed", 32)
    >>> out["params"]["pos_embed"].shape, out["params"]["head"] is params["params"]["head"]
    ((1, 1025, 8), True)
    >>> params["params"]["pos_embed"].shape  # the input is kept
    (1, 197, 8)
    """
    return _resample.replace_in_tree(
        tree, path, lambda table: resample_pos_embed(table, new_size, **kwargs)
    )
