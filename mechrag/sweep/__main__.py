"""``python -m mechrag.sweep ...`` runs ``mechrag sweep ...``."""

import sys

from mechrag.cli import main

sys.exit(main(["sweep", *sys.argv[1:]]))
