"""The numerical kernel: positions in, sin/cos out.

Nothing here knows a public function. The modules, bottom up:

* :mod:`~pe_core._kernel.routes`: every threshold that chooses a route, in one table;
* :mod:`~pe_core._kernel.inputs`: positions as given (Python values, arrays of any
  backend) turned into arrays, checked, sized, and their dtypes resolved;
* :mod:`~pe_core._kernel.placement`: the one classification of a call's positions
  (host, device or traced) into a :class:`~pe_core._kernel.placement.Positions`;
* :mod:`~pe_core._kernel.angles`: the exact reduction of ``pos * w`` to turns;
* :mod:`~pe_core._kernel.features`: sin/cos halves assembled into feature order;
* :mod:`~pe_core._kernel.tables`, :mod:`~pe_core._kernel.gather`,
  :mod:`~pe_core._kernel.host_tables`: the host routes (float64 pass, runs, blocked
  angle-addition tables, gathered lookups).
"""
