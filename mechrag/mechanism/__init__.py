"""Mechanistic localisation: which attention heads and MLPs carry a source into the response."""

from mechrag.mechanism.ablation import ComponentMeans, ablate, component_means, parse_heads
from mechrag.mechanism.result import Component, ComponentAttribution
from mechrag.mechanism.semantic_gain import SemanticGain, semantic_gain

__all__ = [
    "Component",
    "ComponentAttribution",
    "ComponentMeans",
    "SemanticGain",
    "ablate",
    "component_means",
    "parse_heads",
    "semantic_gain",
]
