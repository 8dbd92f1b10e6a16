"""``python -m opendml``: the ``opendml`` command line (``opendml.cli``)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
