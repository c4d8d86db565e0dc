"""mechrag: which source a RAG response rests on, and which parts of the model carry it.

Every public name is imported on first use (PEP 562), so ``import mechrag`` and the command
line's ``--help`` stay fast; ``mechrag.Case`` loads the model stack when it is first touched.
"""

from __future__ import annotations

from mechrag._lazy import lazy_exports
from mechrag._version import __version__  # noqa: F401 - the package version

# Public name -> the module that defines it.
_EXPORTS = {
    "ARCJSD": "mechrag.attribution.arc_jsd",
    "Attribution": "mechrag.results",
    "BetaShapley": "mechrag.attribution.estimators",
    "Case": "mechrag.case",
    "ComponentAttribution": "mechrag.mechanism.result",
    "ContextCite": "mechrag.attribution.estimators",
    "EMBEDDED_MODELS": "mechrag.models",
    "Echo": "mechrag.mechanism.echo",
    "Engine": "mechrag.engine",
    "Exact": "mechrag.attribution.estimators",
    "Gates": "mechrag.mechanism.gates",
    "KernelSHAP": "mechrag.attribution.estimators",
    "LeaveOneOut": "mechrag.attribution.estimators",
    "LeverageSHAP": "mechrag.attribution.estimators",
    "MCSHAP": "mechrag.attribution.estimators",
    "METHODS": "mechrag.attribution.methods",
    "PMCSHAP": "mechrag.attribution.estimators",
    "PromptBuilder": "mechrag.prompts",
    "Result": "mechrag.results",
    "Source": "mechrag.sources",
    "SourceScreen": "mechrag.attribution.screening",
    "TMCShapley": "mechrag.attribution.estimators",
    "ablate": "mechrag.mechanism.ablation",
    "arc_jsd": "mechrag.api",
    "as_sources": "mechrag.sources",
    "attribute": "mechrag.api",
    "echo": "mechrag.mechanism.echo",
    "explain": "mechrag.pipeline",
    "gate": "mechrag.mechanism.gates",
    "jsd": "mechrag.divergences",
    "kl": "mechrag.divergences",
    "load_model": "mechrag.models",
    "localize": "mechrag.api",
    "shapley_values": "mechrag.attribution.estimators",
    "split_sentences": "mechrag.sources",
    "sweep": "mechrag.sweep.runner",
    "total_variation": "mechrag.divergences",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, {"explain": "retrieval"})
