"""``python -m mlfc.lab.shift``: the old path of MLTCP's shift of a recorded run,
kept for the commands in docs/ and docs/data; the experiment lives in :mod:`mlfc.lab.mltcp.shift`."""

import sys

from mlfc.lab.mltcp.shift import main

if __name__ == "__main__":
    sys.exit(main())
