"""The drawing behind :mod:`pe_core.plots`: each ``draw_*`` takes validated arguments and
returns the Figure; :mod:`pe_core.plots` holds the signatures, docstrings and checks.

matplotlib is imported when a figure is made (:func:`~pe_core._plots.base.new_figure`),
never by importing this package.
"""
