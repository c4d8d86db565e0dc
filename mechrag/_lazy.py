"""Lazy public names for a package (PEP 562): each is imported from its module on first use.

A package's ``__init__`` then costs nothing to import, so the command line answers ``--help``
before torch loads, and a light submodule (a config, a registry) does not pull in the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(
    package: str,
    namespace: dict,
    modules: dict[str, tuple[str, ...]],
    extras: dict[str, str] | None = None,
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose public names are
    defined in the modules of ``modules`` (module -> the names it defines); ``extras[name]``
    names the optional extra a name needs (checked first, for a one-line install hint). A name,
    once loaded, is kept in ``namespace`` (the package's globals), so later lookups are plain
    attribute reads."""
    exports = {name: module for module, names in modules.items() for name in names}
    extras = extras or {}

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if name in extras:
            from mechrag.errors import require_extra

            require_extra(extras[name], f"{package}.{name}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return sorted(exports), __getattr__, __dir__
