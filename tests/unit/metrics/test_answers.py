"""SQuAD normalisation, EM/F1, abstention and the hallucination definition on hand cases."""

from __future__ import annotations

import pytest

from mechrag.metrics.answers import (
    exact_match,
    expand_negations,
    is_abstention,
    judge_answer,
    normalize_answer,
    support,
    token_f1,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  A  cat,   an apple; THE end. ", "cat apple end"),
        ("Theory of the anthem", "theory of anthem"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("1,000-metre", "1000metre"),  # punctuation is removed, not replaced by a space
        ("an", ""),
        ("(Normandy)!", "normandy"),
    ],
)
def test_normalisation_matches_squad_definition(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_take_the_best_gold_answer():
    answers = ["10th and 11th centuries", "in the 10th and 11th centuries"]
    assert exact_match("In the 10th and 11th centuries.", answers) == 1.0
    assert exact_match("the 10th century", answers) == 0.0
    # "10th century" vs "10th and 11th centuries": 1 common token, P = 1/2, R = 1/4 -> F1 = 1/3;
    # vs "in 10th and 11th centuries": R = 1/5 -> 2/7. The maximum is 1/3.
    assert token_f1("the 10th century", answers) == pytest.approx(1 / 3)
    assert token_f1("France", ["France", "French Republic"]) == 1.0
    # Repeated tokens count once per matched occurrence.
    assert token_f1("paris paris", ["paris"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("the", ["a"]) == 1.0  # both normalise to nothing
    assert token_f1("anything", []) == 0.0


@pytest.mark.parametrize(
    "response, expected",
    [
        ("unanswerable", True),
        ("Unanswerable.", True),
        ("The context does not mention who built it.", True),
        ("This question cannot be answered from the context.", True),
        ("There is no information about that.", True),
        ("I don't know.", True),
        ("The answer is not given in the text.", True),
        ("Paris", False),
        ("It was not until 1889 that the tower opened.", False),
    ],
)
def test_abstention(response, expected):
    assert is_abstention(response) is expected


# Each contraction, its expansion, the curly-apostrophe and the apostrophe-less spelling.
DECLINES = [
    "The context doesn't contain the answer.",
    "The context does not contain the answer.",
    "The context doesn\u2019t contain the answer.",
    "The context doesnt contain the answer.",
    "I can't answer this from the passages.",
    "I can\u2019t answer this from the passages.",
    "I cannot answer this from the passages.",
    "I can not answer this from the passages.",
    "The answer isn't in the context.",
    "The answer isn\u2019t in the context.",
    "The answer is not in the context.",
    "I don't know.",
    "I don\u2019t know.",
    "I do not know.",
    "I dont know",
    "The documents don't mention it.",
    "The documents do not mention it.",
    "It won\u2019t be found in the text: it isn't mentioned.",
    # The common ways a model declines.
    "The context does not provide the year of his birth.",
    "The context doesn't provide this information.",
    "His age is not mentioned in the context.",
    "There is no information about the second director.",
    "Unanswerable",
    "UNANSWERABLE.",
    "I cannot answer that question based on the given context.",
    "No answer.",
    "It cannot be determined from the passage.",
    "I'm unable to answer from the context provided.",
    "The passage does not have enough information.",
    "I\u2019m sorry, but the text doesn\u2019t say.",
    # A hedged "not mentioned" (SmolLM2 on SQuAD 2.0).
    "Emma's brother is not explicitly mentioned in the context provided.",
    "The year is not directly stated in the passage.",
    "The context doesn't explicitly mention the year.",
]


@pytest.mark.parametrize("response", DECLINES)
def test_contractions_and_declines_are_abstentions(response):
    assert is_abstention(response)


@pytest.mark.parametrize(
    "response",
    [
        "Not until 1998.",
        "He did not win; she did.",
        "Notre-Dame",
        "Notre Dame de Paris",
        "No, it isn't: it's in Lyon.",
        "She doesn't live in Paris anymore; she lives in Rome.",
        "He can't swim.",
        "The ship was not sunk until 1912.",
        "Nothing Else Matters",
        "The knot",
        # Negations that refuse nothing (the review found these matched before).
        "He did not give up and ran again.",
        "The treaty did not include France.",
        "The treaty didn't include France.",
        "The cause could not be determined until 1990.",
        "He was not given the award.",
        "He was not explicitly given the award.",
    ],
)
def test_answers_that_merely_contain_not_are_not_abstentions(response):
    assert not is_abstention(response)


def test_expand_negations_maps_contractions_to_their_expansions():
    assert expand_negations("Doesn\u2019t, can't, CANNOT, won\u2019t, isn't, dont") == (
        "does not, can not, can not, will not, is not, do not"
    )
    assert expand_negations("Notre-Dame: not known, the knot") == "notre-dame: not known, the knot"


def test_an_abstention_on_an_unanswerable_question_is_not_a_hallucination():
    """The bug: "doesn't" lost its apostrophe, did not match, and counted as a hallucination."""
    context = "The Eiffel Tower was completed in 1889 in Paris."
    for response in ("The context doesn't contain the answer.", "I don\u2019t know."):
        judgement = judge_answer(response, [], context)
        assert judgement.abstained and not judgement.hallucinated and judgement.f1 == 1.0
    # A real answer containing "not", on an answerable question, keeps its F1: 2 of its 6
    # tokens match "she did" (P = 1/3, R = 1, F1 = 1/2).
    answer = judge_answer("He did not win; she did.", ["she did"], "He did not win; she did.")
    assert not answer.abstained and answer.f1 == pytest.approx(0.5)


def test_support_counts_content_words_in_context():
    context = "The Eiffel Tower was completed in 1889 in Paris."
    assert support("It was completed in 1889.", context) == 1.0
    assert support("Built in 1887 by Gustave Eiffel", context) == pytest.approx(1 / 4)
    assert support("It is.", context) == 1.0  # no content words: nothing unsupported


def test_hallucination_definition():
    context = "The Eiffel Tower was completed in 1889 in Paris."
    right = judge_answer("1889", ["1889"], context)
    assert (right.exact_match, right.f1, right.hallucinated) == (1.0, 1.0, False)
    # Wrong but every content word is in the context: a mistake, not a hallucination.
    grounded = judge_answer("Paris", ["1889"], context)
    assert grounded.wrong and not grounded.unsupported and not grounded.hallucinated
    # Wrong and unsupported: hallucinated.
    invented = judge_answer("Gustave Eiffel in 1887", ["1889"], context)
    assert invented.wrong and invented.unsupported and invented.hallucinated
    # Right but phrased with outside words: neither wrong nor hallucinated.
    outside = judge_answer("1889 CE records", ["1889"], context)  # F1 = 0.5, support 1/3
    assert outside.unsupported and not outside.wrong and not outside.hallucinated
    # A verbose right answer (F1 2/7 < 0.5, the gold answer inside): correct, so not wrong.
    verbose = judge_answer("Gustave built it in 1889 CE", ["1889"], context)
    assert verbose.f1 == pytest.approx(2 * (1 / 6) / (1 / 6 + 1))
    assert verbose.unsupported and not verbose.wrong and not verbose.hallucinated
    # Abstaining on an answerable question: a miss, not a hallucination.
    missed = judge_answer("unanswerable", ["1889"], context)
    assert missed.abstained and not missed.wrong and not missed.hallucinated and missed.f1 == 0
    # Unanswerable: any non-abstaining answer hallucinates, even a grounded one.
    assert judge_answer("Paris", [], context).hallucinated
    declined = judge_answer("The context does not say.", [], context)
    assert not declined.hallucinated and declined.exact_match == 1.0 and not declined.answerable


def test_response_correct_reads_containment_f1_and_yes_no():
    from mechrag.metrics.answers import response_correct

    assert response_correct("It was founded in Paris, France.", ["Paris"])
    assert not response_correct("It was founded in Parisville.", ["Paris"])
    assert response_correct("Yes, both are American.", ["yes"])
    assert not response_correct("There is no doubt they are both American.", ["no"])
    assert response_correct("the Eiffel tower", ["Eiffel Tower in Paris"])  # F1 = 0.8
    assert not response_correct("a tower", ["Eiffel Tower in Paris"])  # F1 = 0.4


def test_a_yes_no_answer_is_read_from_the_first_word_only():
    from mechrag.metrics.answers import response_correct

    assert not response_correct("Yes and no.", ["no"])  # F1 0.5 must not rescue it
    assert not response_correct("The answer is yes.", ["yes"])
    assert response_correct("No, they are not.", ["no"])
