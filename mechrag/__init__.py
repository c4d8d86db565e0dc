"""mechrag: which source a RAG response rests on, and which parts of the model carry it."""

from mechrag.api import arc_jsd, attribute, localize
from mechrag.attribution.estimators import (
    PMCSHAP,
    BetaShapley,
    ContextCite,
    Exact,
    KernelSHAP,
    LeaveOneOut,
    TMCShapley,
)
from mechrag.attribution.shapley import shapley_values
from mechrag.case import Case
from mechrag.divergences import jsd, kl, total_variation
from mechrag.engine import Engine
from mechrag.mechanism import ComponentAttribution, ablate
from mechrag.models import load_model
from mechrag.prompts import PromptBuilder
from mechrag.results import Attribution
from mechrag.sources import Source, as_sources, split_sentences

__all__ = [
    "PMCSHAP",
    "Attribution",
    "BetaShapley",
    "Case",
    "ComponentAttribution",
    "ContextCite",
    "Engine",
    "Exact",
    "KernelSHAP",
    "LeaveOneOut",
    "PromptBuilder",
    "Source",
    "TMCShapley",
    "ablate",
    "arc_jsd",
    "as_sources",
    "attribute",
    "jsd",
    "kl",
    "load_model",
    "localize",
    "shapley_values",
    "split_sentences",
    "total_variation",
]
__version__ = "0.2.0"
