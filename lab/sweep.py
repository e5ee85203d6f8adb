"""``python -m mlfc.lab.sweep``: the old path of MLTCP's slope/intercept sweep,
kept for the commands in docs/ and docs/data; the experiment lives in :mod:`mlfc.lab.mltcp.sweep`."""

import sys

from mlfc.lab.mltcp.sweep import main

if __name__ == "__main__":
    sys.exit(main())
