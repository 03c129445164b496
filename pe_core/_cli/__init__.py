"""The ``pe-core`` command line, one module per job; :mod:`pe_core.cli` is its face.

* :mod:`~pe_core._cli.output`: the one-line errors and the files the commands write.
* :mod:`~pe_core._cli.arguments`: the argument types (positions, presets, backends, ...).
* :mod:`~pe_core._cli.encode` and :mod:`~pe_core._cli.plot`: ``pe-core encode`` and
  ``pe-core plot``.
* ``pe-core check``: :mod:`~pe_core._cli.check_cases` (what is checked, on which fixed
  grids), :mod:`~pe_core._cli.check_plan` (which cases a run takes),
  :mod:`~pe_core._cli.check_run` (each case on each backend, every check through
  :func:`pe_core.testing.run_check`, compiled by the backends' own compilers),
  :mod:`~pe_core._cli.check_report` (the tables) and
  :mod:`~pe_core._cli.check` (the command).
* :mod:`~pe_core._cli.parser`: the argument parser, naming each command's function.
"""
