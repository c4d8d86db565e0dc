"""Context echo: how much each response token still depends on the context.

For response token ``t`` (teacher forcing on the case's response ``r``):

* context echo ``e_t = JSD(P(. | q, C, r_<t) || P(. | q, r_<t))``, the full context against the
  query alone (the all-False mask);
* source echo ``s_t = JSD(P(. | q, C, r_<t) || P(. | q, C without i*, r_<t))`` with ``i*`` the
  top ARC-JSD source (the one whose removal moves the response most, ``argmax_i sum_t``).

A token the model would have said anyway, without the context, has a low echo; a response whose
answer tokens have low echo is suspected of resting on the model's priors rather than on the
context. Summaries run over the *answer tokens*: response tokens with at least one letter or
digit (punctuation and whitespace tokens are near-certain with or without context). ``mean`` and
``minimum`` over them, and ``share_below``, the share of them with ``e_t < threshold``.

:func:`detector_scores` turns an echo and the baselines into suspicion scores (higher = more
likely hallucinated) for AUROC: ``-mean e_t``, ``-mean s_t``, ``-mean log P(r_t | q, C, r_<t)``,
the mean entropy ``H(P(. | q, C, r_<t))`` and ``-(sum_t log P(r_t | q, C, r_<t) - log P(r_t | q,
C without i*, r_<t))``, the negated leave-one-out log-likelihood drop of the top source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Float

from mechrag.results.base import Serializable

DEFAULT_THRESHOLD = 0.1


def answer_token_mask(tokens: list[str]) -> Bool[np.ndarray, " n_response"]:
    """Tokens with at least one letter or digit (all tokens when none has)."""
    mask = np.array([any(ch.isalnum() for ch in token) for token in tokens], dtype=bool)
    return mask if mask.any() else np.ones(len(tokens), dtype=bool)


@dataclass
class Echo(Serializable):
    """Per-token context and source echo of one response, with response-level summaries.

    ``to_dict`` adds the summaries (``context_summary``, ``source_summary``) to the fields.
    """

    default_name = "echo"

    response_tokens: list[str]
    context: Float[np.ndarray, " n_response"]
    source: Float[np.ndarray, " n_response"]
    top_source: str
    answer_mask: Bool[np.ndarray, " n_response"]
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        """Arrays, also when read back from lists (``from_dict``)."""
        self.context, self.source = np.asarray(self.context), np.asarray(self.source)
        self.answer_mask = np.asarray(self.answer_mask, dtype=bool)

    def summary(self, which: str = "context") -> dict[str, float]:
        """``mean``, ``minimum`` and ``share_below`` of the ``context`` or ``source`` echo."""
        values = {"context": self.context, "source": self.source}[which][self.answer_mask]
        return {
            "mean": float(values.mean()),
            "minimum": float(values.min()),
            "share_below": float((values < self.threshold).mean()),
        }

    @property
    def mean(self) -> float:
        return self.summary()["mean"]

    @property
    def minimum(self) -> float:
        return self.summary()["minimum"]

    @property
    def share_below(self) -> float:
        return self.summary()["share_below"]

    @property
    def low_tokens(self) -> Bool[np.ndarray, " n_response"]:
        """Answer tokens whose context echo is below the threshold."""
        return self.answer_mask & (self.context < self.threshold)

    def to_dict(self) -> dict:
        return {
            **super().to_dict(),
            "context_summary": self.summary("context"),
            "source_summary": self.summary("source"),
        }

    def plot(self, ax=None):
        """Per-token echo strip over the response text; returns the figure."""
        from mechrag.plots.gating import plot_echo_strip

        return plot_echo_strip(self, ax=ax)

    def plots(self, name: str) -> dict:
        return {f"{name}_strip": self.plot}


def echo(case, *, threshold: float = DEFAULT_THRESHOLD) -> Echo:
    """Context echo and top-source echo of ``case``'s response (one engine call).

    ``case``: a :class:`mechrag.Case`; the masks it scores (query alone, each source left out)
    stay in its cache, so a later ``case.arc_jsd()`` costs nothing more.
    """
    masks = np.concatenate([case.empty_mask()[None], case.leave_one_out_masks()])
    divergences = case.token_divergences(masks)
    top = case.top_source()  # ARC-JSD on the leave-one-out subsets just scored
    tokens = list(case.response_tokens)
    return Echo(
        response_tokens=tokens,
        context=divergences[0],
        source=divergences[1 + top],
        top_source=case.sources[top].id,
        answer_mask=answer_token_mask(tokens),
        threshold=threshold,
    )


def detector_scores(case, result: Echo) -> dict[str, float]:
    """Suspicion scores (higher = more likely hallucinated) of the echo and the baselines."""
    without_top = np.stack([case.full_mask(), case.full_mask()])
    without_top[1, case.source_index(result.top_source)] = False
    logprobs = case.token_logprobs(without_top)
    import torch  # a case exists, so torch is loaded already

    full = case.reference_logprobs()  # [T, vocab], the full-context distributions
    entropies = torch.special.entr(full.exp()).sum(-1).double().cpu().numpy()
    keep = result.answer_mask
    return {
        "echo": -result.summary("context")["mean"],
        "echo_min": -result.summary("context")["minimum"],
        "echo_share_below": result.summary("context")["share_below"],
        "source_echo": -result.summary("source")["mean"],
        "logprob": -float(logprobs[0, keep].mean()),
        "entropy": float(entropies[keep].mean()),
        "loo_drop": -float((logprobs[0] - logprobs[1]).sum()),
    }
