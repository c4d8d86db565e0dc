"""Dense retrieval and its explanations: encoders, FAISS index, corpus, IG, AIPC, conditions."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use (faiss, captum and torch load
# only then).
_MODULES = {
    "mechrag.retrieval.conditions": (
        "CONDITIONS", "PRESETS", "PromptCondition", "PromptConditions", "prompt_condition",
    ),
    "mechrag.retrieval.corpus": ("Corpus", "Document", "Origin", "build_corpus"),
    "mechrag.retrieval.encoder": ("DenseEncoder", "embedded_encoder_path", "load_encoder"),
    "mechrag.retrieval.index": ("FlatIndex",),
    "mechrag.retrieval.integrated_gradients": (
        "RetrieverIntegratedGradients", "TokenAttribution", "merge_wordpieces",
    ),
    "mechrag.retrieval.options": ("BASELINES", "RETRIEVER_SCORES"),
    "mechrag.retrieval.perturbation": ("token_aipc", "token_removal_value"),
    "mechrag.retrieval.retriever": ("Hit", "Retriever"),
}
# The modules that import faiss or captum: their names need the retrieval extra.
_NEEDS_EXTRA = (
    "mechrag.retrieval.index",
    "mechrag.retrieval.integrated_gradients",
    "mechrag.retrieval.perturbation",
    "mechrag.retrieval.retriever",
)
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    _MODULES,
    extras={name: "retrieval" for module in _NEEDS_EXTRA for name in _MODULES[module]},
)
