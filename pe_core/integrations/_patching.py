"""The record an integration keeps on each module it patches, shared by all of them.

:func:`patch` sets instance attributes (and, for torch modules, replaces buffers) and
keeps what they were in a :class:`Patch` under a plain instance attribute (never in a
state dict, a config or a layer's tracked state); :func:`unpatch` gives back the very
objects. A module holding the record is patched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Patch", "patch", "plan_all", "unpatch"]


@dataclass
class Patch:
    """What a patch replaced on one module: instance attributes (their previous values;
    ``absent``: those the instance did not have) and buffers (the original tensors)."""

    attributes: dict[str, Any] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    buffers: dict[str, Any] = field(default_factory=dict)


def patch(
    module: Any, record: str, attributes: dict[str, Any], buffers: dict[str, Any] | None = None
) -> None:
    """Set ``attributes`` on ``module`` (instance attributes, past any ``__setattr__`` of
    its class) and replace its torch ``buffers`` by name; keep what they were in
    ``vars(module)[record]``."""
    kept = Patch()
    for name, value in (buffers or {}).items():
        kept.buffers[name] = module._buffers[name]
        module._buffers[name] = value
    for name, value in attributes.items():
        if name in vars(module):
            kept.attributes[name] = vars(module)[name]
        else:
            kept.absent.add(name)
        object.__setattr__(module, name, value)
    object.__setattr__(module, record, kept)


def unpatch(module: Any, record: str) -> None:
    """Give ``module`` back what its patch under ``record`` replaced (nothing if it has
    none); a buffer moved or cast since comes back moved or cast the same way."""
    kept = vars(module).pop(record, None)
    if kept is None:
        return
    for name in kept.absent:
        vars(module).pop(name, None)
    for name, old in kept.attributes.items():
        object.__setattr__(module, name, old)
    for name, old in kept.buffers.items():
        now = module._buffers.get(name)
        if now is not None and (now.device != old.device or now.dtype != old.dtype):
            old = old.to(device=now.device, dtype=now.dtype)  # moved or cast since
        module._buffers[name] = old


def plan_all(
    found: Iterable[tuple[str, Any]], record: str, plan: Callable[[Any], tuple[dict, dict]]
) -> tuple[list[tuple[Any, dict[str, Any], dict[str, Any]]], list[str]]:
    """The patches ``plan`` makes for the modules of ``found`` (``(path, module)`` pairs;
    those already patched under ``record`` skipped), and a line per module it refuses
    (its ``ValueError`` or ``TypeError``, with the module's class and path)."""
    plans: list[tuple[Any, dict[str, Any], dict[str, Any]]] = []
    refused: list[str] = []
    for path, module in found:
        if record in vars(module):
            continue
        try:
            attributes, buffers = plan(module)
        except (ValueError, TypeError) as error:
            refused.append(f"{type(module).__name__} at {path!r}: {error}")
            continue
        plans.append((module, attributes, buffers))
    return plans, refused
