"""Import timm without torchvision (whose registry wheels need a CUDA torch).

timm imports torchvision at import time, for data pipelines the models do not use. :func:`import_timm`
serves ``torchvision`` and its submodules, for the length of ``import timm`` only, as stub packages whose
missing attributes are placeholder classes; it then removes the stub from ``sys.meta_path`` and every
``torchvision`` entry from ``sys.modules`` (so other libraries' availability checks are not fooled).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__all__ = ["import_timm", "timm_or_skip"]


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderMeta(name, (), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderMeta(name, (), {})


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _StubFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


def import_timm() -> Any:
    """``timm``, imported with a stub ``torchvision`` where the real one is missing."""
    if "timm" in sys.modules:
        return sys.modules["timm"]
    try:
        importlib.import_module("torchvision")
        have_torchvision = True
    except Exception:  # a broken torchvision is as good as none
        have_torchvision = False
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    if have_torchvision:
        return importlib.import_module("timm")
    finder = _StubFinder()
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module("timm")
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]


def timm_or_skip() -> Any:
    """timm (see :func:`import_timm`), or a pytest skip where it is not installed."""
    import pytest

    try:
        return import_timm()
    except ImportError as error:
        pytest.skip(f"timm is not importable: {error}")
