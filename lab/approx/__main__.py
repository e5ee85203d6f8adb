"""``python -m mlfc.lab.approx``: the approximate flow control experiment's command line (cli.py)."""

import sys

from mlfc.lab.approx.cli import main

if __name__ == "__main__":
    sys.exit(main())
