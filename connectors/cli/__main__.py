"""``python -m connectors.cli``: the ``streamfair`` command."""

import sys

from connectors.cli.commands import main

sys.exit(main())
