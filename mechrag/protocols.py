"""Named protocols: each paper's choices in one name, so that "as in the paper" is one argument.

A :class:`Protocol` holds the settings a paper fixes (``None`` where it says nothing about that
part); the library's own defaults already follow the papers, and ``mechrag`` names the package's
earlier choices, kept as options:

- ``arc-jsd`` (Li et al., arXiv 2505.16415): semantic gain by the logit-lens argmax tokens of the
  pre-, mid- and post-residual stream (Eq. 6-10, ``argmax_token``), with which the consensus
  statistic (Eq. 11-12, Table 3) is computed; gating by the ICLR version's Table 4 rule
  (``paper``); head ablation by uniform attention (Appendix I; the official code zeroes the
  query states).
- ``rag-e`` (arXiv 2601.21803): prompt conditions c1-c4 as the issue gives the paper's text
  (``paper`` preset), WARG/WR/ND with retrieval scored by prompt position in every condition.
- ``mechrag``: mechrag's continuous gain (``residual_cosine``), its ``damp`` rule, zero ablation,
  the official RAG-E code's conditions (``code``; mechrag before 0.3 mixed in ``ceil(k/2)``
  random documents, in corpus order: not kept) and true retriever similarities.

A protocol is resolved once, where the work happens: :meth:`mechrag.Case.localize`,
:func:`mechrag.explain` and :func:`mechrag.mechanism.gating.comparison.compare_gating` take
``protocol=`` (default :data:`LOCALIZE_PROTOCOL` or :data:`EXPLAIN_PROTOCOL`); ``--protocol`` on
``mechrag localize``, ``gate`` and ``explain``, on ``experiments/ablate_components.py`` and the
``protocol`` option of localize sweeps pass the name through. What a protocol implies is a field
(``consensus``: localisation reports the paper's consensus statistic), never a test of its name;
a setting it leaves ``None`` takes the library's choice in :data:`UNFIXED`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mechrag.errors import InputError


@dataclass(frozen=True)
class Protocol:
    """One paper's settings (see the module docstring); ``None``: the paper does not fix it."""

    name: str
    paper: str
    gain_definition: str | None = None
    gating_rule: str | None = None
    ablation_mode: str | None = None
    conditions_preset: str | None = None
    retriever_scores: str | None = None
    k: int | None = None  # documents retrieved
    consensus: bool = False  # localisation reports the paper's consensus statistic (Eq. 11-12)

    def setting(self, field: str):
        """The protocol's value of ``field``, or the library's (:data:`UNFIXED`) where it fixes
        none."""
        value = getattr(self, field)
        return UNFIXED[field] if value is None else value


# The library's choice where a protocol fixes nothing (``Protocol.setting``).
UNFIXED = {
    "gain_definition": "argmax_token",
    "gating_rule": "paper",
    "ablation_mode": "uniform",
    "conditions_preset": "paper",
    "retriever_scores": "position",
    "k": 5,
}
# The protocol each workflow follows unless told otherwise.
LOCALIZE_PROTOCOL = "arc-jsd"  # Case.localize, mechrag localize and gate, localize sweeps
EXPLAIN_PROTOCOL = "rag-e"  # explain, mechrag explain


PROTOCOLS: dict[str, Protocol] = {
    protocol.name: protocol
    for protocol in (
        Protocol(
            "arc-jsd",
            "Li et al., ARC-JSD, arXiv 2505.16415 (Eq. 3-12, Tables 3-5, Appendix I)",
            gain_definition="argmax_token",
            gating_rule="paper",
            ablation_mode="uniform",
            consensus=True,
        ),
        Protocol(
            "rag-e",
            "RAG-E, arXiv 2601.21803 (§3.3; the official code's WARG)",
            conditions_preset="paper",
            retriever_scores="position",
            k=10,
        ),
        Protocol(
            "mechrag",
            "mechrag's own choices before 0.3",
            gain_definition="residual_cosine",
            gating_rule="damp",
            ablation_mode="zero",
            conditions_preset="code",
            retriever_scores="similarity",
        ),
    )
}


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise InputError(f"unknown protocol {name!r}: choose from {tuple(PROTOCOLS)}")
    return PROTOCOLS[name]
