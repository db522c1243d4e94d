"""`python -m pager`: the same as the `pager` console script."""

import sys

from pager.cli import main

sys.exit(main())
