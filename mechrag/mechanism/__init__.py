"""Mechanistic localisation and intervention: which heads and MLPs carry a source, and what
gating them does."""

from mechrag._lazy import lazy_exports

# Public name -> its module, imported on first use.
_EXPORTS = {
    "Component": "mechrag.mechanism.result",
    "ComponentAttribution": "mechrag.mechanism.result",
    "ComponentMeans": "mechrag.mechanism.ablation",
    "Echo": "mechrag.mechanism.echo",
    "GatedDecoding": "mechrag.mechanism.gated_decoding",
    "GatingComparison": "mechrag.mechanism.gating_report",
    "Gates": "mechrag.mechanism.gates",
    "GatingRule": "mechrag.mechanism.gating_rules",
    "RULES": "mechrag.mechanism.gating_rules",
    "SemanticGain": "mechrag.mechanism.semantic_gain",
    "ablate": "mechrag.mechanism.ablation",
    "case_semantic_gain": "mechrag.mechanism.semantic_gain",
    "compare_gating": "mechrag.mechanism.gating_report",
    "component_means": "mechrag.mechanism.ablation",
    "decode_with_gates": "mechrag.mechanism.gated_decoding",
    "detector_scores": "mechrag.mechanism.echo",
    "echo": "mechrag.mechanism.echo",
    "edit_components": "mechrag.mechanism.gates",
    "gate": "mechrag.mechanism.gates",
    "parse_heads": "mechrag.mechanism.ablation",
    "random_gates": "mechrag.mechanism.gating_rules",
    "semantic_gain": "mechrag.mechanism.semantic_gain",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

