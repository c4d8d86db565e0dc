"""Question-word overlap: a baseline that reads no model.

Each source is scored by how many of the query's content words (lower-cased word tokens, a short
list of function words left out) it shares. It is what a method that merely matches the question
would rank first; a contributive method such as ARC-JSD points instead at what the response
used, which differs when the response is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from jaxtyping import Float

from mechrag.attribution.base import SourceMethod

FUNCTION_WORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been what which who whom "
    "whose when where why how did does do that this these those it its as than into".split()
)


def content_words(text: str) -> set[str]:
    """The distinct lower-cased word tokens of ``text`` that are not function words."""
    return {w for w in re.findall(r"\w+", text.lower()) if w not in FUNCTION_WORDS}


def word_overlap(
    text: str, texts: list[str], *, leaving_out: str = ""
) -> Float[np.ndarray, " n_texts"]:
    """The number of ``text``'s content words, less those of ``leaving_out``, that each of
    ``texts`` shares. Of the query: the question-word baseline below. Of a response, leaving
    out the query (a response that restates the question would otherwise point at the
    sentence matching the question): the source it repeats most, the one a wrong response
    likely paraphrased."""
    words = content_words(text) - content_words(leaving_out)
    return np.array([len(words & content_words(other)) for other in texts], dtype=float)


@dataclass(frozen=True)
class QueryOverlap(SourceMethod):
    """Question-word overlap of each source (no fields: nothing to configure)."""

    name: ClassVar[str] = "query_overlap"
    description: ClassVar[str] = "content words each source shares with the query (no model)"
    refusal: ClassVar[str] = "query_overlap reads only the text"
    ignored: ClassVar[tuple[str, ...]] = ("seed", "reuse_scored")

    def __call__(self, case):
        meter = case.meter()
        scores = word_overlap(case.query, [source.text for source in case.sources])
        return case.attribution(self.name, scores, meter, model_calls=0, metadata={})
