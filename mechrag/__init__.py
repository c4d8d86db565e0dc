"""mechrag: which source a RAG response rests on, and which parts of the model carry it.

Every public name is imported on first use (PEP 562), so ``import mechrag`` and the command
line's ``--help`` stay fast; ``mechrag.Case`` loads the model stack when it is first touched.
"""

from __future__ import annotations

from mechrag._lazy import lazy_exports
from mechrag._version import __version__  # noqa: F401 - the package version

# Module -> the public names it defines, imported on first use.
_MODULES = {
    "mechrag.api": ("arc_jsd", "attribute", "localize"),
    "mechrag.attribution.arc_jsd": ("ARCJSD",),
    "mechrag.attribution.attention": ("AttentionAttribution",),
    "mechrag.attribution.estimators": (
        "BetaShapley", "ContextCite", "Exact", "KernelSHAP", "LeaveOneOut", "LeverageSHAP",
        "MCSHAP", "PMCSHAP", "TMCShapley", "shapley_values",
    ),
    "mechrag.attribution.hierarchical": ("HierarchicalARCJSD",),
    "mechrag.attribution.methods": ("METHODS",),
    "mechrag.attribution.proxy": ("ProxyAttribution",),
    "mechrag.attribution.screening": ("SourceScreen",),
    "mechrag.case": ("Case",),
    "mechrag.divergences": ("jsd", "kl", "total_variation"),
    "mechrag.engine": ("Engine",),
    "mechrag.mechanism.ablation": ("ablate",),
    "mechrag.mechanism.echo": ("Echo", "echo"),
    "mechrag.mechanism.gates": ("Gates", "gate"),
    "mechrag.mechanism.result": ("ComponentAttribution",),
    "mechrag.models": ("EMBEDDED_MODELS", "load_model"),
    "mechrag.pipeline": ("explain",),
    "mechrag.prompts": ("PromptBuilder",),
    "mechrag.protocols": ("PROTOCOLS",),
    "mechrag.results": ("Attribution", "Result"),
    "mechrag.sources": ("Source", "as_sources", "split_sentences"),
    "mechrag.sweep.runner": ("sweep",),
}
__all__, __getattr__, __dir__ = lazy_exports(
    __name__, globals(), _MODULES, extras={"explain": "retrieval"}
)
