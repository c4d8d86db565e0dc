"""mechrag: which source a RAG response rests on, and which parts of the model carry it."""

from mechrag.attribution.api import attribute
from mechrag.attribution.arc_jsd import arc_jsd
from mechrag.attribution.shapley import shapley_values
from mechrag.divergences import jsd, kl, total_variation
from mechrag.engine import Engine
from mechrag.mechanism import ComponentAttribution, ablate, localize
from mechrag.models import load_model
from mechrag.prompts import PromptBuilder
from mechrag.results import Attribution
from mechrag.sources import Source, as_sources, split_sentences

__all__ = [
    "Attribution",
    "ComponentAttribution",
    "Engine",
    "PromptBuilder",
    "Source",
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
__version__ = "0.1.0"
