"""Mechanistic localisation and intervention: which heads and MLPs carry a source, and what
gating them does."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use.
_MODULES = {
    "mechrag.mechanism.ablation": (
        "ComponentMeans", "ablate", "component_means", "parse_heads", "random_components",
    ),
    "mechrag.mechanism.consensus": ("Consensus", "ModuleConsensus", "consensus", "paper_record"),
    "mechrag.mechanism.echo": ("Echo", "detector_scores", "echo"),
    "mechrag.mechanism.gating.decoding": ("GatedDecoding", "decode_with_gates"),
    "mechrag.mechanism.gating.gates": ("Gates", "edit_components", "gate"),
    "mechrag.mechanism.gating.comparison": ("GatingComparison", "compare_gating"),
    "mechrag.mechanism.gating.rules": ("GatingRule", "RULES", "random_gates"),
    "mechrag.results.components": ("Component", "ComponentAttribution"),
    "mechrag.mechanism.semantic_gain": ("SemanticGain", "case_semantic_gain", "semantic_gain"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)

