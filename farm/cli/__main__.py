"""`python -m farm.cli ...`: the same as `farm ...`."""

import sys

from farm.cli import main

sys.exit(main())
