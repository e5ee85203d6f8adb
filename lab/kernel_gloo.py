"""``python -m mlfc.lab.kernel_gloo``: the old path of kernel MLTCP under unmodified DDP over gloo,
kept for the commands in docs/ and docs/data; the experiment lives in :mod:`mlfc.lab.mltcp.kernel_gloo`."""

import sys

from mlfc.lab.mltcp.kernel_gloo import main

if __name__ == "__main__":
    sys.exit(main())
