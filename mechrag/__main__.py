"""``python -m mechrag ...`` runs ``mechrag ...``."""

import sys

from mechrag.cli import main

sys.exit(main())
