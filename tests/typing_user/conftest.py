"""The files here are read by type checkers (``check.py``), not collected by pytest."""

collect_ignore_glob = ["*.py"]
