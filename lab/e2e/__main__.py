"""``python -m mlfc.lab.e2e``: the end-to-end runs' command line (cli.py)."""

import sys

from mlfc.lab.e2e.cli import main

if __name__ == "__main__":
    sys.exit(main())
