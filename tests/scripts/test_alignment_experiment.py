"""The retriever-generator alignment experiment's summary: stored records re-scored without a
model pass."""

from __future__ import annotations

import runpy

import pytest
from helpers import REPO

SCRIPT = REPO / "experiments" / "retriever_generator_alignment.py"


@pytest.fixture(scope="module")
def script():
    return runpy.run_path(str(SCRIPT))


def record(response: str, answer: str, *, correct: bool) -> dict:
    return {
        "key": "alignment/q/c1",
        "phase": "alignment",
        "condition": "c1",
        "similarities": [0.9, 0.7, 0.5],
        "generator_scores": [0.05, 0.05, 0.9],  # it relies on the last slot only
        "response": response,
        "answer": answer,
        "correct": correct,
    }


@pytest.mark.parametrize(
    ("response", "answer", "stored", "judged"),
    [
        # a raw substring test called this correct: "no" inside "know"
        ("I know the band was formed in 1990.", "no", True, False),
        # and this wrong: the answer's tokens, not its exact string, are in the response
        ("The director was Steven Allan Spielberg.", "Steven Spielberg", False, True),
    ],
)
def test_realign_judges_correctness_again(script, response, answer, stored, judged):
    realigned = script["realign"](record(response, answer, correct=stored), "position")
    assert realigned["correct"] is judged
    assert realigned["warg"] == pytest.approx(-1.0)  # by slot: the retriever's lowest
    assert realigned["preset"] == "all"


def test_realign_labels_c2_to_c4_drawn_once_for_every_question(script):
    old = {**record("Paris.", "Paris", correct=True), "condition": "c4", "preset": "paper"}
    assert script["realign"](old, "position")["preset"] == "paper (one draw for every question)"
    new = {**old, "draws": "per-question"}
    assert script["realign"](new, "position")["preset"] == "paper"
