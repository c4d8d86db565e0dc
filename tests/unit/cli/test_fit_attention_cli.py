"""``mechrag fit-attention``: its options are the fit's, it fits, resumes from its records, keeps
each model's records apart and refuses dev data and bad input."""

from __future__ import annotations

import pytest

from mechrag.attribution.attention import AttentionWeights
from mechrag.attribution.attention_fit import LOSSES


def test_fit_attention_options_are_the_fits():
    import argparse

    from mechrag.attribution.attention_fit import TARGETS, TEMPERATURE
    from mechrag.cli.fit_attention import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = {action.dest: action for action in parser._actions}
    assert tuple(options["target"].choices) == TARGETS
    assert tuple(options["loss"].choices) == LOSSES
    assert options["temperature"].default == TEMPERATURE


def test_fit_attention_command_fits_resumes_and_refuses_dev_data(tmp_path, capsys):
    from mechrag.cli import main
    from mechrag.data import load_hotpotqa

    out = tmp_path / "w.safetensors"
    words = [
        "fit-attention",
        "--model",
        "toy:llama",
        "--dataset",
        "hotpotqa",
        "--n",
        "3",
        "--sentences",
        "6",
        "--max-new-tokens",
        "4",
        "--out",
        str(out),
    ]
    assert main(words) == 0
    weights = AttentionWeights.load(out)
    assert weights.model == "tiny-llama" and weights.provenance["n"] == 3
    training = load_hotpotqa()[50:53]  # --offset's default: the training sample, never dev
    assert weights.provenance["data"]["example_keys"] == [f"hotpotqa:{e.id}" for e in training]
    assert weights.provenance["command"].startswith("mechrag fit-attention --dataset hotpotqa")
    assert weights.fitted.sum() == pytest.approx(1.0) and weights.localized is not None
    records = tmp_path / "w_cases" / "records.jsonl"
    assert len(records.read_text().splitlines()) == 3
    capsys.readouterr()
    assert main(words) == 0  # resumed: every case is on record, nothing is run again
    assert "[1/3]" not in capsys.readouterr().out
    assert len(records.read_text().splitlines()) == 3
    assert weights.provenance["fit"]["loss"] == "pearson"
    assert main([*words, "--loss", "listwise", "--temperature", "0.1"]) == 0  # records reused
    listwise = AttentionWeights.load(out)
    changed = {"loss": "listwise", "temperature": 0.1}
    assert listwise.provenance["fit"] == {**weights.provenance["fit"], **changed}
    assert "--loss listwise --temperature 0.1" in listwise.provenance["command"]
    assert len(records.read_text().splitlines()) == 3
    assert main([*words, "--loss", "listwise", "--temperature", "0"]) == 2
    assert "--temperature must be positive" in capsys.readouterr().err
    assert main([*words[:4], "squad", *words[5:]]) == 2
    assert "training splits only" in capsys.readouterr().err


def test_fit_attention_does_not_reuse_another_models_records(tmp_path, capsys):
    from mechrag.cli import main

    out = tmp_path / "w.safetensors"
    words = ["--dataset", "hotpotqa", "--n", "2", "--sentences", "5", "--max-new-tokens", "3",
             "--out", str(out)]  # fmt: skip
    assert main(["fit-attention", "--model", "toy:llama", *words]) == 0
    capsys.readouterr()
    assert main(["fit-attention", "--model", "toy:gpt2", *words]) == 0
    assert "[1/2]" in capsys.readouterr().out  # scored afresh on the other model
    assert AttentionWeights.load(out).model == "tiny-gpt2"


def test_bad_fit_input_writes_nothing(tmp_path):
    from mechrag.cli import main

    out = tmp_path / "w.safetensors"
    assert main(["fit-attention", "--model", "toy:nosuch", "--n", "2", "--out", str(out)]) == 2
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    words = ["fit-attention", "--n", "2", "--records", str(tmp_path / "file"), "--out", str(out)]
    assert main(words) == 2
