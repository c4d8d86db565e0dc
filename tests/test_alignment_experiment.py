"""The retriever-generator alignment experiment's summary: stored records re-scored without a
model pass."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from mechrag.metrics.alignment import position_scores, warg

SCRIPT = Path(__file__).parents[1] / "experiments" / "retriever_generator_alignment.py"


@pytest.fixture(scope="module")
def script():
    return runpy.run_path(str(SCRIPT))


def record(response: str, answer: str, *, correct: bool) -> dict:
    return {
        "key": "alignment/q/c1",
        "phase": "alignment",
        "condition": "c1",
        "similarities": [0.9, 0.7, 0.5],
        "generator_scores": [0.1, 0.6, 0.3],
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
    scores = position_scores(3)
    assert realigned["warg"] == pytest.approx(warg(scores, np.array([0.1, 0.6, 0.3])))
    assert realigned["preset"] == "all"
