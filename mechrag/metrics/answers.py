"""Answer quality: SQuAD exact match and token F1, abstention, and an operational hallucination.

Normalisation follows the official SQuAD evaluation script's definition: lowercase, drop
punctuation, drop the articles a/an/the, collapse whitespace. ``exact_match`` and ``token_f1``
take the maximum over the gold answers; an unanswerable question (no gold answers) is matched
only by an abstention.

Hallucination (operational definition, per response):

* **abstained**: the response says the context does not hold the answer (:func:`is_abstention`;
  the prompt :data:`ABSTENTION_INSTRUCTION` tells the model how to say so).
* **wrong**: an answerable question, no abstention, and max token F1 against the gold answers
  below 0.5.
* **unsupported**: fewer than half of the response's content words (normalised tokens that are
  not stop words) occur among the context's normalised tokens; a response without content words
  is never unsupported.
* **hallucinated** = (wrong and unsupported) on an answerable question, or any non-abstaining
  response to an unanswerable question.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

ABSTENTION_ANSWER = "unanswerable"
ABSTENTION_INSTRUCTION = (
    "Answer the query briefly using only the context. If the context does not contain the "
    f"answer, reply exactly: {ABSTENTION_ANSWER}."
)
ABSTENTION_TEMPLATE = ABSTENTION_INSTRUCTION + "\n\nContext: {context}\n\nQuery: {query}"

# Phrases (after normalisation) by which a response declines to answer.
ABSTENTION_PATTERNS = (
    r"\bunanswerable\b",
    r"\bcannot be answered\b",
    r"\bnot (?:be )?(?:found|mentioned|stated|given|provided|specified|answered)\b",
    r"\b(?:does|do|did) not (?:contain|mention|say|state|provide|specify|include)\b",
    r"\bno (?:information|answer|mention)\b",
    r"\bnot (?:in|part of) (?:context|text|passage)\b",
    r"\bi (?:do not|dont|cannot|cant) know\b",
    r"\bnot enough information\b",
)
STOP_WORDS = frozenset(
    "a an the and or but of in on at to for from by with as is are was were be been being it its "
    "this that these those he she they them his her their there here what which who whom whose "
    "when where why how i you we our your my me us not no yes do does did has have had will would "
    "can could should may might also than then so such into about over under after before".split()
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation, remove articles (a, an, the), collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def _f1(prediction: list[str], gold: list[str]) -> float:
    if not prediction or not gold:
        return float(prediction == gold)
    common = sum((Counter(prediction) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals some normalised gold answer, else 0.0."""
    normalized = normalize_answer(prediction)
    return float(any(normalized == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """Maximum SQuAD token F1 of ``prediction`` over ``answers`` (0.0 when there are none)."""
    tokens = answer_tokens(prediction)
    return max((_f1(tokens, answer_tokens(a)) for a in answers), default=0.0)


def is_abstention(response: str) -> bool:
    """Whether ``response`` declines to answer (says the context does not hold the answer)."""
    text = normalize_answer(response.replace("'", ""))
    return any(re.search(pattern, text) for pattern in ABSTENTION_PATTERNS)


def content_words(text: str) -> list[str]:
    """Normalised tokens of ``text`` that are not stop words."""
    return [token for token in answer_tokens(text) if token not in STOP_WORDS]


def support(response: str, context: str) -> float:
    """Share of the response's content words that occur in the context (1.0 when it has none)."""
    words = content_words(response)
    if not words:
        return 1.0
    available = set(answer_tokens(context))
    return sum(word in available for word in words) / len(words)


@dataclass(frozen=True)
class AnswerJudgement:
    """The answer metrics of one response (see the module docstring for the definitions)."""

    exact_match: float
    f1: float
    abstained: bool
    wrong: bool
    unsupported: bool
    hallucinated: bool
    answerable: bool
    n_words: int

    def to_dict(self) -> dict:
        return asdict(self)


def judge_answer(
    response: str, answers: Sequence[str], context: str, *, f1_threshold: float = 0.5
) -> AnswerJudgement:
    """EM, F1, abstention, wrong, unsupported and hallucinated for one response.

    ``answers``: the gold answers; empty for an unanswerable question (then EM = F1 = 1 for an
    abstention and 0 otherwise). ``context``: the text the model was given.
    """
    answerable = any(a.strip() for a in answers)
    abstained = is_abstention(response)
    if answerable:
        em, f1 = exact_match(response, answers), token_f1(response, answers)
    else:
        em = f1 = float(abstained)
    wrong = answerable and not abstained and f1 < f1_threshold
    unsupported = not abstained and support(response, context) < 0.5
    hallucinated = (wrong and unsupported) if answerable else not abstained
    return AnswerJudgement(
        exact_match=em,
        f1=f1,
        abstained=abstained,
        wrong=wrong,
        unsupported=unsupported,
        hallucinated=hallucinated,
        answerable=answerable,
        n_words=len(answer_tokens(response)),
    )
