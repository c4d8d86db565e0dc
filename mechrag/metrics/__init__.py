"""Evaluation metrics: agreement, accuracy, retriever-generator alignment, answers, detection."""

from mechrag.metrics.agreement import (
    agreement,
    kendall_tau,
    ndcg_at_k,
    pearson,
    precision_at_k,
    removal_top_k,
    spearman,
    spearman_test,
    top_k,
)
from mechrag.metrics.alignment import (
    aipc,
    alignment_flags,
    noise_distraction,
    perturbation_curves,
    warg,
    wasted_retrieval,
)
from mechrag.metrics.answers import (
    AnswerJudgement,
    exact_match,
    is_abstention,
    judge_answer,
    normalize_answer,
    token_f1,
)
from mechrag.metrics.detection import (
    Interval,
    RocCurve,
    auroc,
    bootstrap_ci,
    mcnemar_exact,
    roc_curve,
)

__all__ = [
    "AnswerJudgement",
    "Interval",
    "RocCurve",
    "agreement",
    "aipc",
    "alignment_flags",
    "auroc",
    "bootstrap_ci",
    "exact_match",
    "is_abstention",
    "judge_answer",
    "kendall_tau",
    "mcnemar_exact",
    "ndcg_at_k",
    "noise_distraction",
    "normalize_answer",
    "pearson",
    "perturbation_curves",
    "precision_at_k",
    "removal_top_k",
    "roc_curve",
    "spearman",
    "spearman_test",
    "token_f1",
    "top_k",
    "wasted_retrieval",
    "warg",
]
