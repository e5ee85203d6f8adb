"""``python -m mlfc.lab.kernel_mltcp``: kept as the documented entry point; the experiment lives in
:mod:`mlfc.lab.mltcp.kernel`."""

import sys

from mlfc.lab.mltcp.kernel import main

if __name__ == "__main__":
    sys.exit(main())
