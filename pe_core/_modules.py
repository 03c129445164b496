"""One entry per module: how a package of one-file extensions is read.

A preset (``pe_core/_presets/``) and a RoPE scaling type (``pe_core/_scaling/``) are each
one module defining one named object; :func:`module_entries` finds every public module
of such a package and checks the object it defines. The public modules that hold the
tables (:mod:`pe_core.presets`, :mod:`pe_core.rope_scaling`) call it at import.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any


def module_entries(package: ModuleType, attribute: str, kind: type, what: str) -> dict[str, Any]:
    """``{module name: module.<attribute>}`` for every module of ``package`` whose name
    does not start with ``_``, each checked to be a ``kind``.

    >>> import pe_core._presets as presets
    >>> entries = module_entries(presets, "PRESET", presets.Preset, "preset module")
    >>> entries["vaswani"].spec.name
    'vaswani'
    """
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        entry = getattr(module, attribute, None)
        if not isinstance(entry, kind):
            raise TypeError(
                f"{what} {module.__name__} must define {attribute}, a "
                f"{kind.__module__}.{kind.__qualname__}. Received: {entry!r}"
            )
        found[info.name] = entry
    return found
