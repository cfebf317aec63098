"""``python -m pard.serve CONFIG``: the ``pard serve`` command on its own."""

import sys

from .cli import main

sys.exit(main())
