"""Mechanistic localisation and intervention: which heads and MLPs carry a source, and what
gating them does."""

from mechrag.mechanism.ablation import ComponentMeans, ablate, component_means, parse_heads
from mechrag.mechanism.echo import Echo, detector_scores, echo
from mechrag.mechanism.gated_decoding import GatedDecoding, decode_with_gates
from mechrag.mechanism.gates import Gates, edit_components, gate
from mechrag.mechanism.gating_rules import RULES, GatingRule, random_gates
from mechrag.mechanism.result import Component, ComponentAttribution
from mechrag.mechanism.semantic_gain import SemanticGain, case_semantic_gain, semantic_gain

__all__ = [
    "RULES",
    "Component",
    "ComponentAttribution",
    "ComponentMeans",
    "Echo",
    "GatedDecoding",
    "Gates",
    "GatingRule",
    "SemanticGain",
    "ablate",
    "case_semantic_gain",
    "component_means",
    "decode_with_gates",
    "detector_scores",
    "echo",
    "edit_components",
    "gate",
    "parse_heads",
    "random_gates",
    "semantic_gain",
]
