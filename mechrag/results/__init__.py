"""Results: the base every result shares (:mod:`~mechrag.results.base`), the per-source
:class:`Attribution`, the per-component :class:`ComponentAttribution`, and the file writing
they rely on (:mod:`~mechrag.results.files`: atomic writes, JSON lines, run records)."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use.
_MODULES = {
    "mechrag.results.attribution": ("Attribution",),
    "mechrag.results.base": ("Result", "Serializable"),
    "mechrag.results.components": ("Component", "ComponentAttribution"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)
