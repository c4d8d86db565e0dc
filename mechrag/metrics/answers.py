"""Answer quality: SQuAD exact match and token F1, abstention, and an operational hallucination.

Normalisation follows the official SQuAD evaluation script's definition: lowercase, drop
punctuation, drop the articles a/an/the, collapse whitespace. ``exact_match`` and ``token_f1``
take the maximum over the gold answers; an unanswerable question (no gold answers) is matched
only by an abstention.

Hallucination (operational definition, per response):

* **abstained**: the response says the context does not hold the answer (:func:`is_abstention`;
  the prompt :data:`ABSTENTION_INSTRUCTION` tells the model how to say so).
* **wrong**: an answerable question, no abstention, and a response that is not correct by
  :func:`response_correct`, the rule of every "correct response" in mechrag (a verbose model's
  right answer is rarely short enough for token F1 alone; a yes/no answer must open the
  response, since "There is no doubt..." says yes).
* **unsupported**: fewer than half of the response's content words (normalised tokens that are
  not stop words) occur among the context's normalised tokens; a response without content words
  is never unsupported.
* **hallucinated** = (wrong and unsupported) on an answerable question, or any non-abstaining
  response to an unanswerable question.

**Factual F1** is :func:`token_f1` against the gold answers (the ``f1`` of
:class:`AnswerJudgement`; on an unanswerable question 1 for an abstention, else 0).

The ARC-JSD paper (Li et al., arXiv 2505.16415; its ICLR version's Table 4, known here from notes
on that table, reports a "hallucination rate" and a "factual F1" under gating) defines neither
in its arXiv text, and its
official code has no gating or answer evaluation, so there is no paper definition to implement
beside this one. mechrag keeps its own because it is spelled out and checkable: a wrong answer
built from the context's own words is a mistake, not a hallucination; a wrong answer that brings
in words the context lacks is one; and on an unanswerable question anything but an abstention
is one. Numbers from it are comparable with the paper's only in direction, not in level.

Abstention matching (:func:`is_abstention`) runs on the response with curly apostrophes made
straight and negative contractions expanded (``doesn't``/``doesnt`` -> ``does not``, ``can't``
and ``cannot`` -> ``can not``, ``won't`` -> ``will not``), then normalised as above, so a
contraction and its expansion match the same patterns. EM and F1 use the plain normalisation.
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

# Phrases by which a response declines to answer, matched on the response with negative
# contractions expanded (:func:`expand_negations`) and then normalised (no punctuation, no
# articles): "does not", never "doesnt".
# A negation alone is not a refusal ("The treaty did not include France."): each pattern names
# the context, the answer or the information, or says the model cannot answer.
_SAYS = r"(?:contain|mention|say|state|provide|specify|include|give)"
_GIVEN = r"(?:found|mentioned|stated|given|provided|specified|available)"
_SOURCE = r"(?:context|text|passage|document|sources?|information provided)"
_HEDGE = r"(?:(?:explicitly|directly|specifically|clearly|anywhere) )?"  # "not explicitly stated"
ABSTENTION_PATTERNS = (
    r"\bunanswerable\b",
    rf"\b{_SOURCE}s? (?:does|do|did) not {_HEDGE}{_SAYS}\b",
    rf"\b(?:does|do|did) not {_HEDGE}{_SAYS} (?:any |enough |this |that |such )?"
    r"(?:information|answer|details?|mention)\b",
    rf"\bnot {_HEDGE}{_GIVEN} (?:in|by) {_SOURCE}\b",
    rf"\b(?:answer|information|it) (?:is|was|are|were) not {_HEDGE}{_GIVEN}\b",
    r"\b(?:can|could) not be (?:determined|answered)(?: (?:from|based on|with|using)\b|$)",
    r"\bno (?:information|answer|mention)\b",
    r"\bnot (?:in|part of) (?:context|text|passage)\b",
    r"\bi (?:do|can) not know\b",
    r"\b(?:i|we) (?:can|could) not (?:answer|determine|tell|say)\b",
    r"\b(?:unable|not able) to (?:answer|determine)\b",
    r"\bnot (?:have |contain |provide |give )?enough information\b",
    r"\binsufficient information\b",
)
STOP_WORDS = frozenset(
    "a an the and or but of in on at to for from by with as is are was were be been being it its "
    "this that these those he she they them his her their there here what which who whom whose "
    "when where why how i you we our your my me us not no yes do does did has have had will would "
    "can could should may might also than then so such into about over under after before".split()
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
# Right single quotation mark, left one, modifier letter apostrophe, prime, grave accent.
_APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u2018\u02bc\u2032`", "'"))
_CAN_NOT = re.compile(r"\bcan'?t\b|\bcannot\b")
_WILL_NOT = re.compile(r"\bwon't\b")
_NT = re.compile(r"\b(\w+)n't\b")
# Contractions typed without the apostrophe; "wont" and "aint" stay (words, or not negations).
_BARE_NT = re.compile(
    r"\b(do|does|did|is|are|was|were|has|have|had|could|would|should|must|need)nt\b"
)


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


# A response counts as correct at this token F1 (or when it contains the answer).
CORRECT_F1 = 0.5


def response_correct(response: str, answers: Sequence[str]) -> bool:
    """Whether ``response`` answers correctly: it contains some normalised gold answer (a yes/no
    answer must open the response), or its token F1 with one is at least ``CORRECT_F1`` (a
    free-form response rarely matches exactly)."""
    normalized = normalize_answer(response)

    gold = [normalize_answer(a) for a in answers]
    if any(answer in ("yes", "no") for answer in gold):  # a yes/no answer: its first word only
        return normalized.split()[:1] in ([a] for a in gold)
    contains = any(answer and f" {answer} " in f" {normalized} " for answer in gold)
    return contains or token_f1(response, answers) >= CORRECT_F1


def expand_negations(text: str) -> str:
    """``text`` lowercased, apostrophes made straight and negative contractions expanded:
    ``doesn't`` and ``doesnt`` -> ``does not``, ``can't``/``cant``/``cannot`` -> ``can not``,
    ``won't`` -> ``will not``, any other ``Xn't`` -> ``X not``."""
    text = text.lower().translate(_APOSTROPHES)
    text = _CAN_NOT.sub("can not", text)
    text = _WILL_NOT.sub("will not", text)
    text = _NT.sub(r"\1 not", text)
    return _BARE_NT.sub(r"\1 not", text)


def is_abstention(response: str) -> bool:
    """Whether ``response`` declines to answer (says the context does not hold the answer)."""
    text = normalize_answer(expand_negations(response))
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


def judge_answer(response: str, answers: Sequence[str], context: str) -> AnswerJudgement:
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
    wrong = answerable and not abstained and not response_correct(response, answers)
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
