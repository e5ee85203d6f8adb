"""``python -m mlfc.hosts.training ps|worker ...`` = ``mlfc-train``."""

import sys

from mlfc.hosts.training.cli import main

sys.exit(main())
