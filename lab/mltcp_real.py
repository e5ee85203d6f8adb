"""``python -m mlfc.lab.mltcp_real``: the old path of MLTCP's interleaving of real training jobs,
kept for the commands in docs/ and docs/data; the experiment lives in :mod:`mlfc.lab.mltcp.real`."""

import sys

from mlfc.lab.mltcp.real import main

if __name__ == "__main__":
    sys.exit(main())
