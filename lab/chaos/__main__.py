"""``python -m mlfc.lab.chaos``: the chaos experiment's command line (cli.py)."""

import sys

from mlfc.lab.chaos.cli import main

if __name__ == "__main__":
    sys.exit(main())
