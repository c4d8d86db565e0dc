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
import re
import sys
import textwrap

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


ROLE = re.compile(r":\w+:`(~?)([^`]*)`")  # :func:`name`, :class:`~mechrag.Case`


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions re-wrapped paragraph by paragraph, indented lines (commands) kept as written,
    so a docstring reads as plain text at the terminal's width."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.strip().split("\n\n"):
            if paragraph.startswith(" "):
                paragraphs.append(textwrap.indent(textwrap.dedent(paragraph), indent + "  "))
            else:
                words = " ".join(paragraph.split())
                paragraphs.append(
                    textwrap.fill(words, width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(paragraphs)


def plain_text(doc: str) -> str:
    """A docstring without its reStructuredText markup: ````x```` and ``:role:`x``` become
    ``x`` (``~a.b`` becomes ``b``)."""
    doc = ROLE.sub(lambda role: role[2].rsplit(".", 1)[-1] if role[1] else role[2], doc)
    return doc.replace("``", "")


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
        sub = commands.add_parser(
            name,
            help=module.HELP,
            description=plain_text(module.__doc__ or ""),
            epilog=f"example:\n\n    {module.EXAMPLE}",
            formatter_class=HelpFormatter,
        )
        if command == name:
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run its subcommand: 0, or 2 with one line on bad input (argparse's
    own errors exit 2 too); any other exception propagates with its traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _chosen_command(argv)
    prefix = f"mechrag {command}" if command else "mechrag"
    args = None
    try:
        args = build_parser(command).parse_args(argv)
        args.run(args)
    except (InputError, MissingDependencyError) as error:
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        print(f"{prefix}: error: {out_of_memory_advice(error, args)}", file=sys.stderr)
        return 2
    return 0


def is_out_of_memory(error: BaseException) -> bool:
    """A CUDA (or other accelerator) out-of-memory error, told apart without importing torch."""
    return names_out_of_memory(type(error).__name__, str(error))


def names_out_of_memory(error_type: str, message: str) -> bool:
    """Whether an error, by its type's name and message (as a sweep's error record keeps them),
    is an accelerator running out of memory."""
    return error_type == "OutOfMemoryError" or "out of memory" in message.lower()


def out_of_memory_advice(error: BaseException, args) -> str:
    """One line: what ran out, and what to lower, by the options the command has."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    advice = []
    # A sweep records an example's out-of-memory error and goes on: only loading reaches here.
    if hasattr(args, "max_batch_tokens") and not hasattr(args, "retry_errors"):
        budget = args.max_batch_tokens
        now = f"now {budget}" if budget else "by default half the free GPU memory"
        advice.append(f"lower --max-batch-tokens ({now})")
    if hasattr(args, "dtype"):
        advice.append("pass --dtype bfloat16 or --device-map auto for a model that barely fits")
    return f"out of memory: {first[:160]}; " + ("; ".join(advice) or "use a smaller model")
