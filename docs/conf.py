"""Sphinx configuration of mechrag's documentation (``make docs``).

Prose pages are Markdown (MyST); the API reference is autodoc over the package's own
reStructuredText docstrings. Nothing installed is mocked: an optional module whose extra is
absent (faiss, captum, ray, ...) is mocked only when its package cannot be found.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mechrag  # noqa: E402 - after the path, for a checkout that is not installed

project = "mechrag"
author = "the mechrag authors"
copyright = "mechrag authors"
version = release = mechrag.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"mechrag {release}"

# -- autodoc ----------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = False
autosummary_generate = False
# The docstrings are plain reST (no Google or NumPy sections), so napoleon is not used: it would
# read a property's "Label: text" docstring as a type.

# The optional extras' packages, mocked only when absent (an installed one is imported as is).
OPTIONAL_PACKAGES = ("faiss", "captum", "ray", "pyarrow", "accelerate", "context_cite")
autodoc_mock_imports = [
    name for name in OPTIONAL_PACKAGES if importlib.util.find_spec(name) is None
]

# -- the lazy public names --------------------------------------------------------------------
# ``mechrag.Case`` is defined in ``mechrag.case``; the packages export their names lazily
# (``mechrag._lazy``), and the reference documents each object where it is defined. Docstrings
# cite the short paths (:class:`mechrag.Case`), so a reference to one resolves to the long one.
LAZY_PACKAGES = (
    "mechrag", "mechrag.data", "mechrag.mechanism", "mechrag.metrics", "mechrag.models",
    "mechrag.results", "mechrag.retrieval", "mechrag.sweep",
)  # fmt: skip


def lazy_aliases() -> dict[str, str]:
    """``package.name`` -> ``module.name`` for every lazily exported name."""
    aliases = {}
    for package in LAZY_PACKAGES:
        modules = getattr(importlib.import_module(package), "_MODULES", {})
        for module, names in modules.items():
            aliases.update({f"{package}.{name}": f"{module}.{name}" for name in names})
    return aliases


ALIASES = lazy_aliases()


def canonical(target: str, reftype: str = "obj") -> str | None:
    """Where the object ``target`` names is documented, when that is another name: a lazy
    export (also its attributes: ``mechrag.Case.localize``) or a name a package imports
    eagerly (``mechrag.views.write_report``)."""
    for alias, home in ALIASES.items():
        if alias in sys.modules:  # also a module's name (mechrag.sweep): only the name itself
            if target == alias and reftype != "mod":
                return home
        elif target == alias or target.startswith(alias + "."):
            return home + target[len(alias) :]
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:split])
        if module not in sys.modules:
            continue
        name, rest = parts[split], parts[split + 1 :]
        defined = getattr(getattr(sys.modules[module], name, None), "__module__", None)
        if isinstance(defined, str) and defined.startswith("mechrag") and defined != module:
            return ".".join([defined, name, *rest])
        return None
    return None


def resolve_alias(app, env, node, contnode):
    """``missing-reference``: retry a Python reference at the object's documented name (a short
    name is first read in the module whose docstring cites it: ``Backend`` in
    :mod:`mechrag.sweep.runner` is :class:`mechrag.sweep.config.Backend`)."""
    if node.get("refdomain") != "py":
        return None
    written = node.get("reftarget", "").lstrip("~.")
    module = node.get("py:module")
    reftype = node["reftype"]
    target = canonical(written, reftype)
    if target is None and module:
        target = canonical(f"{module}.{written}", reftype)
    if target is None:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, reftype, target, node, contnode)


class PublicNames(SphinxDirective):
    """``.. public-names:: PACKAGE`` (reST; in Markdown, inside ``{eval-rst}``): a table of the
    package's lazily exported names, each linked to where it is defined, with the first line of
    its docstring (autosummary, read from the package's own registry, so the table never goes
    stale)."""

    required_arguments = 1

    def run(self):
        package = self.arguments[0]
        modules = importlib.import_module(package)._MODULES
        entries = sorted(
            ((name, module) for module, names in modules.items() for name in names),
            key=lambda entry: entry[0].lower(),
        )
        # Absolute names: the page's current module (``mechrag``) would prefix them.
        lines = [".. currentmodule:: None", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   ~{module}.{name}" for name, module in entries]
        return self.parse_text_to_nodes("\n".join(lines))


def drop_type_docstring(app, what, name, obj, options, lines):
    """``autodoc-process-docstring``: a constant without a docstring of its own (a dict, a
    tuple) would show its type's (``dict()`` -> new empty dictionary ...); drop that."""
    if what in ("data", "attribute") and lines:
        own = type(obj).__doc__
        if isinstance(own, str) and "\n".join(lines).strip() == inspect.cleandoc(own).strip():
            lines.clear()


def setup(app):
    app.connect("autodoc-process-docstring", drop_type_docstring)
    app.connect("missing-reference", resolve_alias)
    app.add_directive("public-names", PublicNames)
