"""mechrag: which source a RAG response rests on, and which parts of the model carry it.

Every public name is imported on first use (PEP 562), so ``import mechrag`` and the command
line's ``--help`` stay fast; ``mechrag.Case`` loads the model stack when it is first touched.
"""

from __future__ import annotations

from mechrag._lazy import alias_moved_modules, lazy_exports
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
    "mechrag.mechanism.gating.gates": ("Gates", "gate"),
    "mechrag.models.loading": ("EMBEDDED_MODELS", "load_model"),
    "mechrag.prompts": ("PromptBuilder",),
    "mechrag.protocols": ("PROTOCOLS",),
    "mechrag.results.attribution": ("Attribution",),
    "mechrag.results.base": ("Result",),
    "mechrag.results.components": ("ComponentAttribution",),
    "mechrag.retrieval.rag_e": ("explain",),
    "mechrag.sources": ("Source", "as_sources", "split_sentences"),
    "mechrag.sweep.runner": ("sweep",),
}
__all__, __getattr__, __dir__ = lazy_exports(
    __name__, globals(), _MODULES, extras={"explain": "retrieval"}
)

# Modules that moved in 0.3: their old paths keep working, with a DeprecationWarning, until 0.4.
MOVED_MODULES = {
    "mechrag.adapter": "mechrag.models.adapter",
    "mechrag.toy": "mechrag.models.toy",
    "mechrag.scenarios": "mechrag.data.scenarios",
    "mechrag.pipeline": "mechrag.retrieval.rag_e",
    "mechrag.mechanism.result": "mechrag.results.components",
    "mechrag.mechanism.gates": "mechrag.mechanism.gating.gates",
    "mechrag.mechanism.gating_rules": "mechrag.mechanism.gating.rules",
    "mechrag.mechanism.gated_decoding": "mechrag.mechanism.gating.decoding",
    "mechrag.mechanism.gating_report": "mechrag.mechanism.gating.comparison",
}
# A module split in two: each of its names -> the module that holds it now.
SPLIT_MODULES = {
    "mechrag.outputs": {
        "Serializable": "mechrag.results.base",
        **dict.fromkeys(
            (
                "json_ready", "write_json", "write_text_atomic", "JsonlWriter", "append_jsonl",
                "repair_jsonl", "read_jsonl", "run_records", "compact_records", "replace_records",
            ),
            "mechrag.results.files",
        ),
    },
}
alias_moved_modules(MOVED_MODULES, SPLIT_MODULES)
