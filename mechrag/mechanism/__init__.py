"""Mechanistic localisation: which attention heads and MLPs carry a source into the response."""

from mechrag.mechanism.ablation import (
    ComponentMeans,
    ablate,
    ablation_effect,
    component_means,
    parse_heads,
)
from mechrag.mechanism.localize import localize, localize_task
from mechrag.mechanism.result import Component, ComponentAttribution
from mechrag.mechanism.semantic_gain import SemanticGain, semantic_gain, spearman

__all__ = [
    "Component",
    "ComponentAttribution",
    "ComponentMeans",
    "SemanticGain",
    "ablate",
    "ablation_effect",
    "component_means",
    "localize",
    "localize_task",
    "parse_heads",
    "semantic_gain",
    "spearman",
]
