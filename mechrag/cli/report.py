"""``mechrag report``: one self-contained HTML page of the results a command wrote to a folder.

    mechrag report DIR

Reads the result JSON in ``DIR`` (``attribution_*.json``, ``demo_arc_jsd.json``,
``components.json``, ``explanation.json``, ``gate.json``) and writes ``DIR/report.html``: inline
CSS and SVG, no script, nothing loaded from the network. ``--html`` on ``attribute``,
``localize``, ``gate``, ``explain`` and ``demo`` writes the same page after the command.
"""

from __future__ import annotations

import argparse

from mechrag.cli.common import print_written

EXAMPLE = "mechrag report out/attribution"
HELP = "one self-contained HTML page of a command's output folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="a command's --out folder")


def run(args: argparse.Namespace) -> None:
    from mechrag.views.report import write_report

    print_written([write_report(args.directory)])
