"""``python -m mlfc.lab.hpsearch_rescore``: the old path of the hyper-parameter search's rescoring,
kept for the commands in docs/; it lives in :mod:`mlfc.lab.hpsearch.rescore`."""

import sys

from mlfc.lab.hpsearch.rescore import main

if __name__ == "__main__":
    sys.exit(main())
