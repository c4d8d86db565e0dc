"""Evaluation metrics: agreement, accuracy, faithfulness (LDS, top-k removal), retriever-generator
alignment, answers, detection."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use.
_MODULES = {
    "mechrag.metrics.agreement": (
        "agreement", "kendall_tau", "ndcg_at_k", "pearson", "precision_at_k", "removal_top_k",
        "spearman", "spearman_test", "top_k",
    ),
    "mechrag.metrics.alignment": (
        "aipc", "alignment_flags", "noise_distraction", "perturbation_curves", "warg",
        "wasted_retrieval",
    ),
    "mechrag.metrics.answers": (
        "AnswerJudgement", "exact_match", "is_abstention", "judge_answer", "normalize_answer",
        "response_correct", "token_f1",
    ),
    "mechrag.metrics.faithfulness": (
        "LDS", "faithfulness", "held_out_masks", "lds", "response_logit_prob", "token_logit_probs",
        "topk_keep", "topk_removal",
    ),
    "mechrag.metrics.detection": (
        "Interval", "RocCurve", "auroc", "bootstrap_ci", "mcnemar_exact", "roc_curve",
        "sign_flip_p",
    ),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)

