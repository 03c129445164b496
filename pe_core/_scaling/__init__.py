"""The RoPE scaling types: one module each, found by :mod:`pe_core.rope_scaling`.

Every module of this package whose name does not start with ``_`` is a ``rope_type``:
its name is the type's name and it defines ``SCALING_TYPE``, a
:class:`~pe_core.rope_scaling.RopeScalingType`. ``_types`` defines that class (and
:class:`~pe_core.rope_scaling.ScalingInputs`, :class:`~pe_core.rope_scaling.MissingRopeKeyError`),
``_common`` the checks and config reads the types share, ``_config`` how
:mod:`pe_core.rope_scaling` reads a model config (its rope dicts, head size, rotated
pairs, misspelt keys). Adding a type is adding one
module (docs/architecture.md, "Adding a RoPE scaling type").
"""
