"""Type aliases for pe_core's public API, for type checkers and IDEs.

* :data:`Array`, :data:`ArrayLike` and :data:`DTypeLike` name what functions take and
  return across backends. They are :data:`typing.Any` underneath: a NumPy array, a JAX
  array, a ``torch.Tensor`` and a ``tf.Tensor`` share no base class, and naming one
  would import that framework.
* The ``Literal`` aliases spell out the string choices the API takes (layouts, metrics,
  presets, ...): an IDE completes them and a type checker rejects a misspelt one. Each
  lists exactly the values of the runtime tuple named in its comment, in the same order
  (a test keeps the two equal); :data:`BackendName`, :data:`PresetName` and
  :data:`RopeType` list the built-in values of tables that grow by one module or row,
  so one added later works without being listed here.
* :data:`BackendLike` and :data:`PresetLike` add ``str`` to their ``Literal``: backend
  names have aliases in any case (``"TF"``), and both often arrive as plain strings from
  configs and command lines. An IDE still offers the ``Literal`` values; a misspelt
  name is caught when the call runs, with an error that lists the known ones.

* :data:`NDArray`, :data:`TorchTensor`, :data:`JaxArray` and :data:`TFTensor` are the
  framework array types, for annotations: a type checker reads them from the stub
  ``pe_core/_array_types.pyi`` (which names ``numpy.ndarray``, ``torch.Tensor``,
  ``jax.Array`` and ``tf.Tensor``); when the code runs they are :data:`typing.Any`.
  A framework that is not installed where the checker runs reads as ``Any``.
* **One typing shape** (einops' "a type variable instead of overloads"): a public
  function that returns an array of its input's framework is typed with one of two
  type variables bound to :class:`SupportsArray`, so a checker types the result by the
  input: a ``torch.Tensor`` in, a ``torch.Tensor`` out.

  - :data:`ArrayT` for functions with no ``backend=`` argument: host data
    (:data:`HostArrayLike`: lists, ranges, numbers) computes on NumPy, so the result of
    host data is a NumPy array (the type variable's default, :data:`NDArray`).
  - :data:`BackendArrayT` for functions with a ``backend=`` argument: the result of
    host data is the backend's array, which only the call knows, so it reads as
    ``Any`` (the type variable's default).

  ``@overload`` is kept only where the *call shape* changes the result: ``encode``
  and the factories that take sizes only (``alibi_bias``, ``t5_bucket_matrix``,
  ``grid``, ...) give a NumPy array for host data and the named backend's array for
  ``backend="torch"`` (:data:`TorchBackend`), ``"jax"`` or ``"tf"``; ``apply_rope``
  gives a tuple for a ``(q, k)`` tuple.
* :data:`RopeConfig` is what a ``scaling=`` or ``config=`` argument takes: a mapping
  (a parsed ``config.json``, a rope-parameters dict) or a transformers
  ``PretrainedConfig`` (:class:`HasToDict`: anything with ``to_dict()``).

This module imports nothing but :mod:`typing` and :mod:`collections.abc` when the code
runs: no framework, not even NumPy.

>>> from typing import get_args
>>> from pe_core.typing import RopeLayout
>>> get_args(RopeLayout)
('half', 'interleaved')
>>> from pe_core.rope_layout import LAYOUTS
>>> get_args(RopeLayout) == LAYOUTS
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias


class SupportsArray(Protocol):
    """What every backend's array has: a ``shape`` and a ``dtype`` (the bound of
    :data:`ArrayT` and :data:`BackendArrayT`; lists, ranges and numbers have neither)."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...


if TYPE_CHECKING:  # a stub file and a TypeVar default: nothing to import when the code runs
    from typing_extensions import TypeVar

    from pe_core._array_types import JaxArray, NDArray, TFTensor, TorchTensor

    ArrayT = TypeVar("ArrayT", bound=SupportsArray, default=NDArray)
    BackendArrayT = TypeVar("BackendArrayT", bound=SupportsArray, default=Any)
else:
    from typing import TypeVar

    NDArray = TorchTensor = JaxArray = TFTensor = Any
    ArrayT = TypeVar("ArrayT", bound=SupportsArray)
    BackendArrayT = TypeVar("BackendArrayT", bound=SupportsArray)

__all__ = [
    "Array",
    "ArrayLike",
    "ArrayT",
    "AxisLayout",
    "AxisOrder",
    "BackendArrayT",
    "BackendLike",
    "BackendName",
    "DTypeLike",
    "Denominator",
    "FloatDTypeName",
    "HasToDict",
    "HostArrayLike",
    "HostData",
    "Interpolation",
    "JaxArray",
    "JaxBackend",
    "Metric",
    "NDArray",
    "NamedFrequencies",
    "NumpyBackend",
    "OddDPolicy",
    "PositionCode",
    "PresetLike",
    "PresetName",
    "RopeConfig",
    "RopeLayout",
    "RopeType",
    "RotaryFeatures",
    "SectionLayout",
    "SinCosOrder",
    "SupportsArray",
    "T5Arithmetic",
    "TFTensor",
    "TableLayout",
    "TensorFlowBackend",
    "TorchBackend",
    "TorchTensor",
]

# -- arrays and dtypes ---------------------------------------------------------------

#: An array of any backend: ``numpy.ndarray``, ``jax.Array``, ``torch.Tensor`` or
#: ``tf.Tensor``. Functions that return an ``Array`` return one of the backend they
#: computed on (the backend of their input, or ``backend=``).
Array: TypeAlias = Any

#: An :data:`Array`, or Python data NumPy can turn into one: an int, a float, a
#: (nested) sequence of them, or a ``range``.
ArrayLike: TypeAlias = Any

#: The canonical names of the built-in backends (:data:`pe_core_backends.BACKENDS`).
BackendName: TypeAlias = Literal["jax", "numpy", "tensorflow", "torch"]

#: The names of one backend, as ``backend=`` takes them (the lower-case aliases of
#: :func:`pe_core_backends.canonical_backend`): the overloads type a call with one of
#: them by that backend's array.
NumpyBackend: TypeAlias = Literal["numpy", "np"]
JaxBackend: TypeAlias = Literal["jax", "jnp"]
TorchBackend: TypeAlias = Literal["torch", "pytorch"]
TensorFlowBackend: TypeAlias = Literal["tensorflow", "tf"]

#: Host data that computes on NumPy unless ``backend=`` says otherwise: a Python
#: number, a ``range``, a (nested) sequence or a NumPy array.
HostArrayLike: TypeAlias = int | float | range | Sequence[Any] | NDArray

#: Host data that is not yet an array: a Python number, a ``range`` or a (nested)
#: sequence. A signature ``pos: ArrayT | HostData`` types an array input by
#: :data:`ArrayT` and Python data by its default.
HostData: TypeAlias = int | float | range | Sequence[Any]

#: What a ``backend=`` argument takes: a :data:`BackendName`, or any spelling
#: :func:`pe_core_backends.canonical_backend` accepts (``"np"``, ``"tf"``,
#: ``"pytorch"``, ``"jnp"``; any case).
BackendLike: TypeAlias = BackendName | str

#: The floating dtype names pe_core speaks, widest first
#: (:data:`pe_core_backends.FLOAT_DTYPES`).
FloatDTypeName: TypeAlias = Literal["float64", "float32", "bfloat16", "float16"]

#: What a ``dtype=`` argument takes: a :data:`FloatDTypeName` or a framework's dtype
#: object (``numpy.float32``, ``torch.bfloat16``, ``jnp.float16``, ``tf.float64``, ...).
DTypeLike: TypeAlias = FloatDTypeName | Any

# -- sinusoidal encodings ------------------------------------------------------------

#: The sin/cos table layouts (:data:`pe_core.rope_layout.TABLE_LAYOUTS`; the
#: ``layout`` of :class:`pe_core.Spec`).
TableLayout: TypeAlias = Literal["interleaved", "split"]

#: The frequency schedules of :attr:`pe_core.Spec.denominator`.
Denominator: TypeAlias = Literal["d", "half_minus_one"]

#: What :attr:`pe_core.Spec.odd_d` does with an odd ``d``.
OddDPolicy: TypeAlias = Literal["raise", "zero_pad", "truncate"]

#: The coordinate orders of :attr:`pe_core.Spec.axis_order` (besides a permutation).
AxisOrder: TypeAlias = Literal["forward", "reversed"]

#: Which function comes first in :attr:`pe_core.Spec.order`.
SinCosOrder: TypeAlias = Literal["sin_cos", "cos_sin"]

#: How the N-D blocks are laid out (:attr:`pe_core.Spec.axis_layout`).
AxisLayout: TypeAlias = Literal["blocks", "split"]

#: The built-in preset names of :data:`pe_core.PRESETS`, in the table's order.
PresetName: TypeAlias = Literal[
    "vaswani",
    "tensor2tensor",
    "fairseq",
    "whisper",
    "flax",
    "mae_2d",
    "tensor2tensor_2d",
    "tensor2tensor_3d",
    "positional_encodings_2d",
    "positional_encodings_3d",
    "musicgen",
    "diffusers_flip_sin_to_cos",
    "positional_encodings_1d",
    "cogvideox",
    "timm_sincos_2d",
]

#: What a ``spec=`` argument takes besides a :class:`pe_core.Spec`: a
#: :data:`PresetName`, or any string (checked against :data:`pe_core.PRESETS` when the
#: call runs).
PresetLike: TypeAlias = PresetName | str

#: The similarity measures of :mod:`pe_core.analysis` (:data:`~pe_core.analysis.METRICS`).
Metric: TypeAlias = Literal["cosine", "dot", "euclidean"]

#: The position codes :func:`pe_core.analysis.resolution_report` measures
#: (:data:`~pe_core.analysis.CODES`).
PositionCode: TypeAlias = Literal["sinusoidal", "binary", "normalized"]

# -- rotary embeddings ---------------------------------------------------------------

#: The RoPE pair layouts (:data:`pe_core.rope_layout.LAYOUTS`): ``"half"`` pairs
#: feature ``j`` with ``j + r/2``, ``"interleaved"`` pairs ``2j`` with ``2j + 1``.
RopeLayout: TypeAlias = Literal["half", "interleaved"]

#: The built-in ``rope_type`` values of a RoPE scaling dict
#: (:data:`pe_core.rope_scaling.ROPE_TYPES`, the keys of ``SCALING_TYPES``).
RopeType: TypeAlias = Literal[
    "default", "dynamic", "linear", "llama3", "longrope", "proportional", "yarn"
]

#: Which features of a head RoPE rotates (:data:`pe_core.rope_layout.ROTARY_FEATURES`).
RotaryFeatures: TypeAlias = Literal["first", "last"]


class HasToDict(Protocol):
    """An object with ``to_dict()``, as a transformers ``PretrainedConfig`` is."""

    def to_dict(self) -> Mapping[str, Any]: ...


#: A model config or rope-parameters dict: a mapping, or an object with ``to_dict()``
#: (a transformers ``PretrainedConfig``), read as its ``to_dict()``.
RopeConfig: TypeAlias = Mapping[str, Any] | HasToDict

#: How M-RoPE sections share out the rotary pairs
#: (:data:`pe_core.rope_nd.SECTION_LAYOUTS`).
SectionLayout: TypeAlias = Literal["contiguous", "interleaved", "blocks"]

#: The frequency schedules N-D RoPE's ``frequencies=`` names (besides explicit values).
NamedFrequencies: TypeAlias = Literal["per_axis"]

# -- relative biases -----------------------------------------------------------------

#: The arithmetics :func:`pe_core.t5_relative_bucket` can reproduce
#: (:data:`pe_core.t5.ARITHMETICS`).
T5Arithmetic: TypeAlias = Literal["float32", "exact"]

# -- resampling ------------------------------------------------------------------------

#: The interpolation modes of :func:`pe_core.resample_pos_embed`
#: (:data:`pe_core.resample.INTERPOLATIONS`).
Interpolation: TypeAlias = Literal["bicubic", "bilinear"]
