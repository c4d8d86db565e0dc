"""The ``mechrag`` command line (also ``python -m mechrag``): one module per subcommand.

Each subcommand module holds ``HELP``, ``add_arguments(parser)`` and ``run(args)``, and imports
the library only inside them, so ``mechrag --help`` answers before torch loads: only the
subcommand being run builds its arguments (some read a registry for their choices). Bad input
(:class:`mechrag.errors.InputError`, a package to install) ends with one line and exit status 2;
any other exception is a bug and keeps its traceback. No library module imports this package.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from mechrag._version import __version__
from mechrag.errors import InputError, MissingDependencyError

COMMANDS = (
    "attribute", "localize", "gate", "explain", "sweep", "demo", "report", "fit-attention"
)


def _command_module(name: str):
    return importlib.import_module(f"mechrag.cli.{name.replace('-', '_')}")


def _chosen_command(argv: list[str]) -> str | None:
    """The subcommand named on the line (the first word that is not an option), if any."""
    words = [word for word in argv if not word.startswith("-")]
    return words[0] if words and words[0] in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; only ``command``'s arguments are built (``None``: none,
    enough for ``mechrag --help``)."""
    parser = argparse.ArgumentParser(
        prog="mechrag",
        description="Which source a RAG response rests on, and which heads and MLPs carry it.",
    )
    parser.add_argument("--version", action="version", version=f"mechrag {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _command_module(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.__doc__)
        if command == name:
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run its subcommand: 0, or 2 with one line on bad input (argparse's
    own errors exit 2 too); any other exception propagates with its traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _chosen_command(argv)
    try:
        args = build_parser(command).parse_args(argv)
        args.run(args)
    except (InputError, MissingDependencyError) as error:
        prefix = f"mechrag {command}" if command else "mechrag"
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return 2
    return 0
