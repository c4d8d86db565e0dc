"""Dense retrieval and its explanations: encoders, FAISS index, corpus, IG, AIPC, conditions."""

from mechrag._lazy import lazy_exports

# Public name -> its module, imported on first use (faiss, captum and torch load only then).
_EXPORTS = {
    "BASELINES": "mechrag.retrieval.options",
    "CONDITIONS": "mechrag.retrieval.conditions",
    "Corpus": "mechrag.retrieval.corpus",
    "DenseEncoder": "mechrag.retrieval.encoder",
    "Document": "mechrag.retrieval.corpus",
    "FlatIndex": "mechrag.retrieval.index",
    "Hit": "mechrag.retrieval.retriever",
    "Origin": "mechrag.retrieval.corpus",
    "PromptCondition": "mechrag.retrieval.conditions",
    "Retriever": "mechrag.retrieval.retriever",
    "RetrieverIntegratedGradients": "mechrag.retrieval.integrated_gradients",
    "TokenAttribution": "mechrag.retrieval.integrated_gradients",
    "build_corpus": "mechrag.retrieval.corpus",
    "embedded_encoder_path": "mechrag.retrieval.encoder",
    "load_encoder": "mechrag.retrieval.encoder",
    "merge_wordpieces": "mechrag.retrieval.integrated_gradients",
    "prompt_condition": "mechrag.retrieval.conditions",
    "token_aipc": "mechrag.retrieval.perturbation",
    "token_removal_value": "mechrag.retrieval.perturbation",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
