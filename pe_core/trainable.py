"""Trainable frequencies: RoPE and sinusoidal angles from frequencies a model learns.

Everywhere else pe_core takes frequencies as host constants (Python numbers, NumPy
arrays) and reduces the angle ``pos * w`` exactly (:mod:`pe_core._kernel.angles`).
Frequencies that are a framework's arrays (a ``torch.nn.Parameter`` or tensor, a JAX
array or tracer, a ``tf.Variable`` or tensor) are values a model learns: their angles
are the plain products ``pos * f`` computed where the frequencies live, in the
working dtype, by the framework's own differentiable operations. They are accepted
by

* :func:`pe_core.apply_rope` (``frequencies=`` an array of shape ``(r/2,)`` or
  ``(heads, r/2)``; see :func:`rope_angles` for the broadcasting): the one way to
  rotate by one-axis trainable frequencies (:func:`rope_angles` gives their angles
  only),
* :func:`apply_rope_mixed` and :func:`rope_mixed_angles` for mixed-axis frequencies
  ``(k, ..., r/2)`` (RoPE-Mixed, Mochi): ``angle = sum_a pos_a * f[a]``,
* :func:`pe_core.encode` (``frequencies=`` an array of shape ``(..., d/2)``),
* the ``RotaryEmbedding`` layers (``trainable_frequencies=True``).

What holds (see the "Trainable frequencies" page):

* **Values.** The angle is ``pos * f`` rounded in the working dtype (float32, or
  float64 for float64 ``x``/frequencies): with ``k`` axes its error is at most
  ``(k + 1) eps sum_a |pos_a f_a|`` (``eps = 2**-24`` in float32: the position's
  rounding, each product's and each sum's; ``2 eps |pos f|`` for one axis), then
  cos/sin and the rotation as in the framework. No exact reduction: large ``|pos * f|`` lose accuracy as in
  every framework formula.
* **Gradients** are those of the plain formula ``x * cos(pos f) + rotate(x) *
  sin(pos f)``: ``d angle / d f = pos``, computed by the framework's autograd
  (``torch.autograd``, ``jax.grad``, ``tf.GradientTape``).
* **Placement.** The frequencies are never read on the host; framework positions are
  used where they are, host positions are uploaded once per call.
* Frequencies held as constants keep the exact routes, unchanged.
"""

from __future__ import annotations

from typing import Any

from pe_core._kernel.inputs import check_request_size
from pe_core._learned import framework_angles, framework_frequencies, learned_rope, mixed_axes
from pe_core.typing import ArrayT, HostData, RopeLayout, SupportsArray
from pe_core.validation import known_size
from pe_core_backends import backend_of, get_namespace

__all__ = ["apply_rope_mixed", "framework_frequencies", "rope_angles", "rope_mixed_angles"]


def rope_angles(
    pos: SupportsArray | HostData, frequencies: ArrayT, *, check_values: bool = False
) -> ArrayT:
    """The RoPE angles ``pos[..., None] * frequencies[..., None, :]`` of framework
    frequencies.

    Parameters
    ----------
    pos : int, float, sequence, range or array
        Positions, shape ``P`` (e.g. ``(seq,)`` or ``(batch, 1, seq)``).
    frequencies : array
        A torch, JAX or TensorFlow array of angular frequencies (radians per position),
        shape ``L + (n,)``: ``(n,)`` for one vector, ``(heads, n)`` per head.
    check_values : bool
        Read framework positions on an accelerator to check them (synchronises).

    Returns
    -------
    array
        Shape ``broadcast(P + (1,), L + (1, n))`` on the frequencies' framework and
        device, float32 (float64 for float64 frequencies): with ``P = (seq,)`` and
        ``L = (heads,)`` it is ``(heads, seq, n)``.

    Examples
    --------
    >>> import torch
    >>> f = torch.tensor([[1.0, 0.5], [2.0, 0.25]], requires_grad=True)  # (heads, n)
    >>> a = rope_angles(range(3), f)
    >>> tuple(a.shape), a[1, 2].tolist()
    ((2, 3, 2), [4.0, 0.5])
    >>> a.sum().backward(); f.grad.tolist()  # d/df of sum(pos * f) = sum(pos)
    [[3.0, 3.0], [3.0, 3.0]]
    """
    _check_size(pos, frequencies, "rope_angles")
    return framework_angles(pos, frequencies, axes=None, check_values=check_values)[1]


def rope_mixed_angles(
    pos: SupportsArray | HostData, frequencies: ArrayT, *, check_values: bool = False
) -> ArrayT:
    """Mixed-axis RoPE angles ``sum_a pos[..., a, None] * frequencies[a][..., None, :]``.

    The learned directions of RoPE-Mixed (timm ``RotaryEmbeddingMixed``: one
    ``(2, heads, n)`` block per layer) and Mochi (diffusers' ``pos_frequencies``,
    ``(3, heads, n)``): every rotary pair turns by a learned combination of all ``k``
    coordinates.

    Parameters
    ----------
    pos : array or sequence
        Coordinates of shape ``P + (k,)`` (e.g. ``(seq, 2)`` for ``(x, y)``).
    frequencies : array
        A torch, JAX or TensorFlow array of shape ``(k,) + L + (n,)``, e.g.
        ``(k, heads, n)``.
    check_values : bool
        As for :func:`rope_angles`.

    Returns
    -------
    array
        Shape ``broadcast(P + (1,), L + (1, n))``: ``(heads, seq, n)`` for ``P =
        (seq,)`` and ``L = (heads,)``; float32 (float64 for float64 frequencies).

    Examples
    --------
    >>> import torch
    >>> f = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])  # (k=2, heads=1, n=2)
    >>> rope_mixed_angles([[3.0, 5.0]], f).tolist()  # (heads, seq, n)
    [[[3.0, 5.0]]]
    """
    axes = mixed_axes(frequencies)
    _check_size(pos, frequencies, "rope_mixed_angles", trailing=1)
    return framework_angles(pos, frequencies, axes=axes, check_values=check_values)[1]


def apply_rope_mixed(
    x: SupportsArray | HostData,
    pos: SupportsArray | HostData,
    frequencies: ArrayT,
    *,
    layout: RopeLayout = "half",
    check_values: bool = False,
) -> ArrayT:
    """Rotate ``x`` by mixed-axis angles (:func:`rope_mixed_angles`).

    Parameters
    ----------
    x : array
        Queries or keys ``(..., heads, seq, head_dim)`` of the frequencies' framework
        (host arrays are uploaded to it).
    pos : array or sequence
        Coordinates ``P + (k,)``; ``P`` broadcasts against ``x.shape[:-1]`` as for
        :func:`pe_core.apply_rope` (``(seq,)``, ``(batch, 1, seq)``).
    frequencies : array
        Shape ``(k,) + L + (n,)`` with ``2 n <= head_dim`` (the first ``2 n`` features
        rotate, the rest pass through); ``L`` broadcasts against the axes before
        ``seq`` (``(heads,)``).
    layout : {"half", "interleaved"}
        Which features pair up, as for :func:`pe_core.apply_rope` (timm's RoPE-Mixed and
        Mochi pair ``(2j, 2j + 1)``: ``"interleaved"``).
    check_values : bool
        As for :func:`pe_core.apply_rope`.

    Returns
    -------
    array
        Same shape, dtype and framework as ``x``. Differentiable in ``x`` and
        ``frequencies``.

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(1, 2, 4)  # (heads=1, seq=2, head_dim=4)
    >>> f = torch.zeros(2, 1, 2)  # (k=2, heads=1, n=2): no rotation
    >>> bool(torch.equal(apply_rope_mixed(x, [[0.0, 0.0], [1.0, 2.0]], f), x))
    True
    """
    axes = mixed_axes(frequencies)
    _check_size(pos, frequencies, "apply_rope_mixed", trailing=1, x=x)
    return learned_rope(x, pos, frequencies, axes=axes, layout=layout, check_values=check_values)


def _check_size(pos: Any, frequencies: Any, what: str, trailing: int = 0, x: Any = None) -> None:
    """Refuse, from the shapes alone and before anything is uploaded, angles (at least a
    row of ``frequencies.shape[-1]`` per position) or an ``x`` that cannot fit in memory;
    traced and non-framework frequencies are left to the call's own checks."""
    source = backend_of(frequencies)
    xp = None if source is None else get_namespace(source)
    if xp is None or xp.is_traced(frequencies) or not xp.shape(frequencies):
        return
    n_pos = known_size(pos, trailing) or 1
    n = max(n_pos * int(xp.shape(frequencies)[-1]), known_size(x) or 0)
    check_request_size(  # with its uploads and temporaries in host memory unless on a device
        n, xp.dtype_of(frequencies), what=what, extra_bytes=16 * (n + n_pos), like=frequencies
    )
