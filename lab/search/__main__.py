"""``python -m mlfc.lab.search``: the Optuna study experiment's command line (cli.py)."""

import sys

from mlfc.lab.search.cli import main

if __name__ == "__main__":
    sys.exit(main())
