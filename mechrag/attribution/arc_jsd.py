"""ARC-JSD (Li et al., arXiv 2505.16415, Eq. 3-4) as a configured method.

Each source's score is the summed per-token divergence between the response distributions with
the full context and with that source alone removed: ``n + 1`` subsets, all from the case's
cache when they were scored before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from mechrag.attribution.base import SourceMethod

if TYPE_CHECKING:
    from mechrag.attribution.screening import SourceScreen


@dataclass(frozen=True)
class ARCJSD(SourceMethod):
    """``divergence``: ``jsd`` (the method), or ``kl``/``tv`` for comparisons. ``screen=m``
    scores exactly only the ``m`` sources a one-pass gradient screen ranks highest (a
    :class:`~mechrag.attribution.screening.SourceScreen` configures the screen; see that
    module); ``None`` scores every source exactly."""

    name: ClassVar[str] = "arc_jsd"
    description: ClassVar[str] = "ARC-JSD: divergence when each source alone is removed"
    refusal: ClassVar[str] = "arc_jsd scores the n + 1 leave-one-out subsets"
    # Deterministic, and always served from the case's cache of scored subsets.
    ignored: ClassVar[tuple[str, ...]] = ("seed", "reuse_scored")
    divergence: str = "jsd"
    screen: int | SourceScreen | None = None

    @property
    def label(self) -> str:
        """The result's method name: ``arc_jsd``, ``arc_kl`` or ``arc_tv``."""
        return "arc_jsd" if self.divergence == "jsd" else f"arc_{self.divergence}"

    def __call__(self, case):
        if self.screen is not None:
            from mechrag.attribution.screening import screened_arc_jsd

            return screened_arc_jsd(case, self.screen, self.divergence, self.label)
        meter = case.meter()
        per_token = case.token_divergences(case.leave_one_out_masks(), self.divergence)
        return case.attribution(
            self.label,
            per_token.sum(-1),
            meter,
            token_scores=per_token,
            model_calls=case.n_sources + 1,
            metadata={"divergence": self.divergence},
        )
