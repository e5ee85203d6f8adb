import sys

from mlfc.refswitch.cli import main

sys.exit(main())
