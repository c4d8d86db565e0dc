"""``python -m mechrag.sweep ...`` runs ``mechrag sweep ...``."""

import sys

from mechrag.sweep.cli import main

sys.exit(main())
