"""Evaluation metrics for attributions."""

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

__all__ = [
    "agreement",
    "kendall_tau",
    "ndcg_at_k",
    "pearson",
    "precision_at_k",
    "removal_top_k",
    "spearman",
    "spearman_test",
    "top_k",
]
