"""Lazy public names for a package (PEP 562): each is imported from its module on first use.

A package's ``__init__`` then costs nothing to import, so the command line answers ``--help``
before torch loads, and a light submodule (a config, a registry) does not pull in the rest.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Callable


class LazyPackage(types.ModuleType):
    """A package whose public names are loaded on first use.

    A public name may be a submodule's name too (``mechrag.mechanism.echo`` is the function
    ``echo`` of the module ``echo``; ``mechrag.sweep`` the function of the package): when that
    submodule is imported, the import system binds it to the package under its name. That binding
    is not kept, so the name stays the public object, as it was when the names were imported
    eagerly; the submodule stays in ``sys.modules``.
    """

    def __setattr__(self, name: str, value) -> None:
        public = name in self.__dict__.get("__all__", ())
        own = f"{self.__name__}.{name}"
        submodule = isinstance(value, types.ModuleType) and value.__name__ == own
        if public and submodule:
            return
        super().__setattr__(name, value)


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
    sys.modules[package].__class__ = LazyPackage

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


def moved(package: str, moves: dict[str, str]) -> Callable[[str], object]:
    """``__getattr__`` for a module whose names ``moves`` (name -> new module) moved away: the
    old path keeps working for one release, with a ``DeprecationWarning`` naming the new one."""

    def __getattr__(name: str):
        if name not in moves:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import warnings

        warnings.warn(
            f"{package}.{name} moved to {moves[name]}.{name}; the old path goes in 0.4",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moves[name]), name)

    return __getattr__


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that replaced it (``moves``: old -> new), or as
    a stand-in whose names load from where they went (``splits``: old -> {name: new module}),
    with a ``DeprecationWarning`` naming the new path."""

    def __init__(self, moves: dict[str, str], splits: dict[str, dict[str, str]]) -> None:
        self.moves, self.splits = moves, splits

    def find_spec(self, name, path=None, target=None):
        if name in self.moves or name in self.splits:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        """The default module: a placeholder that :meth:`exec_module` replaces."""
        return None

    def exec_module(self, module) -> None:
        """Put the module that replaced the old path (or a stand-in for a split one) in
        ``sys.modules`` under the old name; the import system then returns it, and the new
        module keeps its own ``__spec__``."""
        import warnings

        name = module.__name__
        if name in self.moves:
            new = self.moves[name]
            warnings.warn(
                f"{name} moved to {new}; the old path goes in 0.4",
                DeprecationWarning,
                stacklevel=2,
            )
            sys.modules[name] = importlib.import_module(new)
            return
        names = self.splits[name]
        module.__doc__ = f"Moved to {', '.join(sorted(set(names.values())))}"
        module.__getattr__ = moved(name, names)


def alias_moved_modules(moves: dict[str, str], splits: dict[str, dict[str, str]]) -> None:
    """Keep old module paths importable (see :class:`_MovedModuleFinder`)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder(moves, splits))
