"""Benchmarks of pe_core: speed against the textbook code and accuracy against mpmath.

Run ``python -m benchmarks`` (see ``python -m benchmarks --help``). Results go to
``benchmarks/results/*.json`` and ``docs/benchmarks/*.md``.
"""
