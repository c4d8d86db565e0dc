"""Dense retrieval and its explanations: encoders, FAISS index, corpus, IG, AIPC, conditions."""

from mechrag.retrieval.conditions import CONDITIONS, PromptCondition, prompt_condition
from mechrag.retrieval.corpus import Corpus, Document, Origin, build_corpus
from mechrag.retrieval.encoder import DenseEncoder, embedded_encoder_path, load_encoder
from mechrag.retrieval.index import FlatIndex
from mechrag.retrieval.integrated_gradients import (
    BASELINES,
    RetrieverIntegratedGradients,
    TokenAttribution,
    merge_wordpieces,
)
from mechrag.retrieval.perturbation import token_aipc, token_removal_value
from mechrag.retrieval.retriever import Hit, Retriever

__all__ = [
    "BASELINES",
    "CONDITIONS",
    "Corpus",
    "DenseEncoder",
    "Document",
    "FlatIndex",
    "Hit",
    "Origin",
    "PromptCondition",
    "Retriever",
    "RetrieverIntegratedGradients",
    "TokenAttribution",
    "build_corpus",
    "embedded_encoder_path",
    "load_encoder",
    "merge_wordpieces",
    "prompt_condition",
    "token_aipc",
    "token_removal_value",
]
