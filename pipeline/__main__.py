"""``python -m pipeline`` is the ``vapipe`` command."""

import sys

from .cli import main

sys.exit(main())
