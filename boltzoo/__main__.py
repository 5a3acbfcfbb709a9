"""``python -m boltzoo``: the ``boltzoo`` command."""

import sys

from boltzoo.cli import main

sys.exit(main())
