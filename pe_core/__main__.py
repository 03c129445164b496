"""``python -m pe_core``: the ``pe-core`` command line (:mod:`pe_core.cli`)."""

import sys

from pe_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
