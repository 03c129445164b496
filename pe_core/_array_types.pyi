"""The framework array types, for type checkers only.

A stub file with no module beside it: :mod:`pe_core.typing` imports it under
``typing.TYPE_CHECKING``, so a type checker reads the frameworks' own types while
``import pe_core`` imports no framework (and the import rules, which read ``.py``
files, see none). A framework that is not installed reads as ``Any``.
"""

from typing import TypeAlias

import jax
import numpy
import tensorflow
import torch

NDArray: TypeAlias = numpy.ndarray
TorchTensor: TypeAlias = torch.Tensor
JaxArray: TypeAlias = jax.Array
TFTensor: TypeAlias = tensorflow.Tensor
