"""The sinusoidal presets: one module each, found by :mod:`pe_core.presets`.

Every module of this package whose name does not start with ``_`` is a preset: its
name is the preset's name and it defines ``PRESET``, a :class:`Preset`. Adding a preset
is adding one such module (docs/architecture.md, "Adding a sinusoidal preset").

>>> from pe_core._presets import Preset
>>> from pe_core.spec import Spec
>>> Preset(spec=Spec(name="demo"), source="a demo", order=1000).spec.layout
'interleaved'
"""

from __future__ import annotations

import dataclasses

from pe_core.spec import Spec

__all__ = ["Preset"]


@dataclasses.dataclass(frozen=True)
class Preset:
    """One preset: its :class:`~pe_core.spec.Spec`, what it reproduces, where it sorts.

    Parameters
    ----------
    spec : Spec
        The preset's spec; ``spec.name`` is the module's name.
    source : str
        The codebases whose numbers it reproduces (the docs' conventions table).
    order : int
        Its place in :data:`pe_core.PRESETS`: ascending, ties by name. The built-in
        presets use 10, 20, ..., 100; a new one takes a larger number to come after them.

    Raises
    ------
    TypeError
        For a field of the wrong type, naming it.

    Examples
    --------
    >>> Preset(spec=Spec(name="demo"), source="a demo", order="1")
    Traceback (most recent call last):
    ...
    TypeError: Preset.order must be an int. Received: '1'
    """

    spec: Spec
    source: str
    order: int

    def __post_init__(self) -> None:
        if not isinstance(self.spec, Spec):
            raise TypeError(f"Preset.spec must be a pe_core.Spec. Received: {self.spec!r}")
        if not isinstance(self.source, str) or not self.source:
            raise TypeError(f"Preset.source must be a non-empty string. Received: {self.source!r}")
        if not isinstance(self.order, int) or isinstance(self.order, bool):
            raise TypeError(f"Preset.order must be an int. Received: {self.order!r}")
