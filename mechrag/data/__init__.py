"""Data: real QA data sets as RAG examples (HotpotQA, MuSiQue, SQuAD 2.0; samples ship in
``mechrag/datasets``) and seeded synthetic scenarios (:mod:`mechrag.data.scenarios`)."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use.
_MODULES = {
    "mechrag.data.loaders": (
        "DATASETS", "DEV_SAMPLES", "LOADERS", "RAGExample", "SHIPPED", "SPLITS", "SQUAD2_FILE",
        "UNITS", "cut_to_sentences", "load_examples", "load_hotpotqa", "load_musique",
        "load_squad", "load_squad2", "load_squad_articles", "package_file", "reader_options",
        "shipped_path",
    ),
    "mechrag.data.scenarios": ("Scenario", "make_scenario", "make_scenarios"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)
