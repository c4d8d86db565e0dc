"""mechrag: which source a RAG response rests on, and which parts of the model carry it."""

from mechrag.api import arc_jsd, attribute, localize
from mechrag.attribution.estimators import (
    MCSHAP,
    PMCSHAP,
    BetaShapley,
    ContextCite,
    Exact,
    KernelSHAP,
    LeaveOneOut,
    LeverageSHAP,
    TMCShapley,
)
from mechrag.attribution.screening import SourceScreen
from mechrag.attribution.shapley import shapley_values
from mechrag.case import Case
from mechrag.divergences import jsd, kl, total_variation
from mechrag.engine import Engine
from mechrag.mechanism import ComponentAttribution, ablate
from mechrag.mechanism.echo import Echo, echo
from mechrag.mechanism.gates import Gates, gate
from mechrag.models import EMBEDDED_MODELS, load_model
from mechrag.prompts import PromptBuilder
from mechrag.results import Attribution, Result
from mechrag.sources import Source, as_sources, split_sentences
from mechrag.sweep import sweep

__all__ = [
    "EMBEDDED_MODELS",
    "Echo",
    "Gates",
    "MCSHAP",
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
    "LeverageSHAP",
    "PromptBuilder",
    "Result",
    "Source",
    "SourceScreen",
    "TMCShapley",
    "ablate",
    "arc_jsd",
    "as_sources",
    "attribute",
    "echo",
    "explain",
    "gate",
    "jsd",
    "kl",
    "load_model",
    "localize",
    "shapley_values",
    "split_sentences",
    "sweep",
    "total_variation",
]
__version__ = "0.2.0"


def __getattr__(name: str):
    # The pipeline needs faiss and captum (the retrieval extra): import it on first use only.
    if name == "explain":
        from mechrag.pipeline import explain

        return explain
    raise AttributeError(f"module 'mechrag' has no attribute {name!r}")
