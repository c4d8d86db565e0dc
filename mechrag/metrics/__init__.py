"""Evaluation metrics: agreement, accuracy, retriever-generator alignment, answers, detection."""

from mechrag._lazy import lazy_exports

# Public name -> its module, imported on first use.
_EXPORTS = {
    "AnswerJudgement": "mechrag.metrics.answers",
    "Interval": "mechrag.metrics.detection",
    "RocCurve": "mechrag.metrics.detection",
    "agreement": "mechrag.metrics.agreement",
    "aipc": "mechrag.metrics.alignment",
    "alignment_flags": "mechrag.metrics.alignment",
    "auroc": "mechrag.metrics.detection",
    "bootstrap_ci": "mechrag.metrics.detection",
    "exact_match": "mechrag.metrics.answers",
    "is_abstention": "mechrag.metrics.answers",
    "judge_answer": "mechrag.metrics.answers",
    "kendall_tau": "mechrag.metrics.agreement",
    "mcnemar_exact": "mechrag.metrics.detection",
    "ndcg_at_k": "mechrag.metrics.agreement",
    "noise_distraction": "mechrag.metrics.alignment",
    "normalize_answer": "mechrag.metrics.answers",
    "pearson": "mechrag.metrics.agreement",
    "perturbation_curves": "mechrag.metrics.alignment",
    "precision_at_k": "mechrag.metrics.agreement",
    "removal_top_k": "mechrag.metrics.agreement",
    "roc_curve": "mechrag.metrics.detection",
    "spearman": "mechrag.metrics.agreement",
    "spearman_test": "mechrag.metrics.agreement",
    "token_f1": "mechrag.metrics.answers",
    "top_k": "mechrag.metrics.agreement",
    "warg": "mechrag.metrics.alignment",
    "wasted_retrieval": "mechrag.metrics.alignment",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

