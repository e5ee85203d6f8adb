"""``python -m mlfc.lab.hpsearch``: the hyper-parameter search experiment's command line (cli.py)."""

import sys

from mlfc.lab.hpsearch.cli import main

if __name__ == "__main__":
    sys.exit(main())
