"""``experiments/frontier.py``'s choice of examples and of accepted answers (no model pass)."""

from __future__ import annotations

import json
import runpy
from types import SimpleNamespace

from helpers import REPO

SCRIPT = REPO / "experiments" / "frontier.py"


def test_examples_the_weights_were_fitted_on_are_skipped_for_every_method(monkeypatch, capsys):
    from mechrag.data import load_examples

    script = runpy.run_path(str(SCRIPT))
    examples = load_examples("hotpotqa", unit="sentence")[:5]
    fitted = {f"hotpotqa:{examples[1].id}", f"hotpotqa:{examples[3].id}", "musique:other"}
    weights = SimpleNamespace(provenance={"data": {"example_keys": sorted(fitted)}})
    monkeypatch.setattr("mechrag.attribution.attention.shipped_weights", lambda model: weights)
    kept = script["unseen"](object(), examples)
    assert [e.id for e in kept] == [examples[i].id for i in (0, 2, 4)]
    assert "skipped 2 examples" in capsys.readouterr().out
    monkeypatch.setattr("mechrag.attribution.attention.shipped_weights", lambda model: None)
    assert script["unseen"](object(), examples) == examples


def test_musique_aliases_are_accepted_answers():
    from mechrag.data import load_examples

    script = runpy.run_path(str(SCRIPT))
    example = next(e for e in load_examples("musique") if e.metadata["aliases"])
    accepted = script["answers"](example)
    assert accepted[0] == example.answer and set(example.metadata["aliases"]) <= set(accepted)


def test_squad_articles_are_a_size_with_every_annotators_answer():
    script = runpy.run_path(str(SCRIPT))
    examples = script["examples_of_size"]("squad", 3)
    assert len(examples) == 3
    assert all(e.dataset == "squad" and e.gold_ids for e in examples)
    assert all(len({s.paragraph for s in e.sources}) > 20 for e in examples)  # whole articles
    every = script["examples_of_size"]("squad", 705)
    many = next(e for e in every if len(e.metadata["answers"]) > 1)
    assert set(many.metadata["answers"]) <= set(script["answers"](many))


def test_dev_sizes_are_the_dev_samples_whole_contexts():
    from mechrag.data import load_examples

    script = runpy.run_path(str(SCRIPT))
    for dataset, paragraphs in (("hotpotqa", 10), ("musique", 20)):
        dev = script["examples_of_size"](f"{dataset}_dev", 3)
        assert [e.id for e in dev] == [e.id for e in load_examples(dataset, n=3, split="dev")]
        assert all(len({s.paragraph for s in e.sources}) == paragraphs for e in dev)
        train = script["examples_of_size"](dataset, 3)
        assert not {e.id for e in train} & {e.id for e in dev}


def test_records_hold_the_response_text_and_its_overlap_with_each_source(
    tiny_llama, monkeypatch, tmp_path
):
    """A run on a tiny model writes, beside the response's ids, its decoded text and how many
    of its content words (less the query's) each source shares, the same for every method of
    an example. The response restates the query and repeats one source (a recorded response of
    another method, which the run reuses): that source alone shares the most, and the sources
    that share only the query's words get nothing for them."""
    import torch

    from mechrag.attribution.overlap import content_words

    script = runpy.run_path(str(SCRIPT))
    loads = []

    def load_model(name, device=None, dtype=None):
        loads.append((device, dtype))
        return tiny_llama

    monkeypatch.setattr("mechrag.models.loading.load_model", load_model)
    args = SimpleNamespace(
        model="smollm2-135m", sizes=["10"], methods=["exact", "query_overlap"], examples=1,
        max_new_tokens=4, threads=1, reuse_only=False, only_shared=False, out=str(tmp_path),
        device="cpu",
    )  # fmt: skip
    (example,) = script["examples_of_size"]("10", 1)
    asked = content_words(example.query)
    words = [content_words(source.text) for source in example.sources]
    assert any(w & asked for w in words)  # leaving the query out matters on this example
    repeated = max(range(len(words)), key=lambda i: len(words[i] - asked))
    text = f"{example.query} {example.sources[repeated].text}"
    response = tiny_llama.tokenizer.encode(text, add_special_tokens=False)
    earlier = {"size": "10", "id": example.id, "method": "loo", "response_ids": response,
               "settings": script["run_settings"](args)}  # fmt: skip
    (tmp_path / "records.jsonl").write_text(json.dumps(earlier) + "\n")
    script["run"](args)
    lines = (tmp_path / "records.jsonl").read_text().splitlines()[1:]
    found = [json.loads(line) for line in lines]
    assert [r["method"] for r in found] == ["exact", "query_overlap"]
    # float32 on the device asked for (a GPU's records stand beside the CPU's), named in each
    assert loads == [("cpu", torch.float32)]
    assert [r["device"] for r in found] == ["cpu", "cpu"]
    expected = [len((words[repeated] - asked) & w) for w in words]
    assert sorted(expected)[-2] < expected[repeated]  # the repeated source alone is closest
    for record in found:
        assert record["response_ids"] == response
        assert record["response_text"] == tiny_llama.tokenizer.decode(response) == text
        assert record["source_ids"] == [source.id for source in example.sources]
        assert record["response_overlap"] == expected


def test_attention_after_generation_continues_the_generations_cache(
    tiny_llama, monkeypatch, tmp_path, capsys
):
    """On the case that generated the response (the run's own generation: the response is
    generated once), attention runs two response-length passes and scores as a fresh case does;
    a recorded response the model does not generate is skipped in one line, with no record."""
    from mechrag import Case
    from mechrag.attribution.attention import AttentionAttribution

    script = runpy.run_path(str(SCRIPT))
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name, **_: tiny_llama)
    generations = []
    from_example = Case.from_example.__func__

    def counted(cls, model, example, **options):
        generations.extend([example.id] if options.get("response") is None else [])
        return from_example(cls, model, example, **options)

    monkeypatch.setattr(Case, "from_example", classmethod(counted))
    uniform = lambda name, model_name: AttentionAttribution(weights="uniform")  # noqa: E731
    monkeypatch.setitem(script["run"].__globals__, "configured", uniform)
    args = SimpleNamespace(
        model="smollm2-135m", sizes=["10"], methods=["attention_fitted",
        "attention_after_generation"], examples=1, max_new_tokens=4, threads=1, reuse_only=False,
        only_shared=False, out=str(tmp_path), device="cpu",
    )  # fmt: skip
    script["run"](args)
    fresh, generated = [json.loads(line) for line in (tmp_path / "records.jsonl").open()]
    assert len(generations) == 1
    n_response, n_prompt = len(fresh["response_ids"]), fresh["prompt_tokens"]
    assert generated["method"] == "attention_after_generation"
    assert generated["response_ids"] == fresh["response_ids"]
    assert (generated["forward_passes"], generated["tokens_processed"]) == (2, 2 * n_response)
    assert (fresh["forward_passes"], fresh["tokens_processed"]) == (1, n_prompt + n_response - 1)
    for mine, theirs in zip(generated["scores"], fresh["scores"]):
        assert abs(mine - theirs) < 1e-6
    (tmp_path / "records.jsonl").write_text(
        json.dumps({**fresh, "response_ids": [65, 66, 67]}) + "\n"
    )
    capsys.readouterr()
    script["run"](args)
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 1
    assert "the generation differs from the recorded one" in capsys.readouterr().out


def test_a_refit_reruns_only_the_methods_that_read_the_weights():
    """The weighted methods are those configured with shipped weights; an earlier record of any
    other method stands under new weights, one of a weighted method does not."""
    from mechrag.attribution.attention import AttentionAttribution

    script = runpy.run_path(str(SCRIPT))
    weighted = [
        name
        for name in script["METHODS"]
        if isinstance(method := script["configured"](name, "smollm2-135m"), AttentionAttribution)
        and method.weights != "uniform"
    ]
    assert tuple(weighted) == script["WEIGHTED"]
    settings = {"model": "smollm2-135m", "max_new_tokens": 32, "weights": "new"}
    earlier = {**settings, "weights": "old"}
    reusable = script["reusable"]
    for name in script["METHODS"]:
        # ContextCite's records name its target (the old one's are rerun: the next test).
        fitted = {"value": "logit_prob"} if name.startswith("contextcite") else {}
        record = {"method": name, **fitted}
        assert reusable({**record, "settings": earlier}, settings) == (name not in weighted)
        assert reusable({**record, "settings": settings}, settings)
        shorter = {**settings, "max_new_tokens": 16}
        assert not reusable({**record, "settings": shorter}, settings)


def test_contextcite_records_of_the_old_target_are_rerun_and_no_others():
    """ContextCite runs at its own default target (context-cite's), and a ContextCite record
    of the old one (named, or made before records named it) is rerun; every other method's
    record stands whatever game it names."""
    from mechrag.attribution.estimators import ContextCite

    script = runpy.run_path(str(SCRIPT))
    settings = {"model": "smollm2-135m", "max_new_tokens": 32, "weights": "w"}
    reusable = script["reusable"]
    for name in ("contextcite32", "contextcite64", "contextcite256"):
        assert script["configured"](name, "smollm2-135m").value is None
        assert reusable({"method": name, "settings": settings, "value": "logit_prob"}, settings)
        assert ContextCite.default_value == "logit_prob"
        for old in ({}, {"value": None}, {"value": "total_token_logit_prob"}):
            assert not reusable({"method": name, "settings": settings, **old}, settings)
    for name in ("loo", "leverage32", "exact"):
        assert reusable({"method": name, "settings": settings}, settings)
        assert reusable({"method": name, "settings": settings, "value": "logprob"}, settings)


def test_loo_and_the_kl_variant_run_on_exact_arc_jsds_case_and_cost_what_they_cost_alone(
    tiny_llama, monkeypatch, tmp_path, capsys
):
    """Beside exact ARC-JSD (asked for first or last), LOO and the KL variant run on its case
    after it, adding no pass: each scores as it does alone on a fresh case, and its record's cost
    (its own and exact ARC-JSD's, summed) is its cost alone, pass for pass and token for token.
    Without exact ARC-JSD (already recorded) each runs alone, unless asked to run only beside it."""
    import numpy as np

    from mechrag import Case

    script = runpy.run_path(str(SCRIPT))
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name, **_: tiny_llama)
    args = SimpleNamespace(
        model="smollm2-135m", sizes=["10"], methods=["loo", "exact_kl", "exact", "query_overlap"],
        examples=1, max_new_tokens=4, threads=1, reuse_only=False, only_shared=False,
        out=str(tmp_path), device="cpu",
    )  # fmt: skip
    script["run"](args)
    records = {r["method"]: r for r in map(json.loads, (tmp_path / "records.jsonl").open())}
    assert list(records) == ["exact", "loo", "exact_kl", "query_overlap"]  # right after exact
    exact = records["exact"]
    assert exact["builds_on"] is records["query_overlap"]["builds_on"] is None
    (example,) = script["examples_of_size"]("10", 1)
    for name in ("loo", "exact_kl"):
        fresh = Case.from_example(tiny_llama, example, response=exact["response_ids"])
        alone = script["configured"](name, args.model)(fresh)
        found = records[name]
        assert found["builds_on"] == "exact"
        assert np.allclose(found["scores"], alone.scores, rtol=1e-9, atol=1e-12)
        assert found["model_calls"] == alone.model_calls
        assert found["seconds"] > exact["seconds"]
        cost = (alone.forward_passes, alone.metadata["tokens_processed"])
        assert (found["forward_passes"], found["tokens_processed"]) == cost
        assert (exact["forward_passes"], exact["tokens_processed"]) == cost
    lines = (tmp_path / "records.jsonl").open()
    kept = [line for line in lines if json.loads(line)["method"] != "loo"]
    (tmp_path / "records.jsonl").write_text("".join(kept))
    args.only_shared = True
    capsys.readouterr()
    script["run"](args)
    assert (tmp_path / "records.jsonl").read_text() == "".join(kept)
    left_out = [line for line in capsys.readouterr().out.splitlines() if "left out" in line]
    assert left_out == [
        "--only-shared left out loo on 1 example whose exact record an earlier run made "
        "(without --only-shared it runs alone there, at its cost)"
    ]
    args.only_shared = False
    script["run"](args)
    again = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[-1])
    assert again["method"] == "loo" and again["builds_on"] is None
    assert again["forward_passes"] == exact["forward_passes"]
    assert np.allclose(again["scores"], records["loo"]["scores"], rtol=1e-9, atol=1e-12)
    args.only_shared, args.out = True, str(tmp_path / "beside")
    capsys.readouterr()
    script["run"](args)
    assert "left out" not in capsys.readouterr().out
    beside = [json.loads(line) for line in (tmp_path / "beside" / "records.jsonl").open()]
    assert [(r["method"], r["builds_on"]) for r in beside] == [
        ("exact", None),
        ("loo", "exact"),
        ("exact_kl", "exact"),
        ("query_overlap", None),
    ]


def test_only_shared_without_exact_arc_jsd_is_refused_in_one_line(monkeypatch, capsys):
    """``--only-shared`` runs LOO and the KL variant only beside exact ARC-JSD: asked for without
    it, they would never run, so the command stops before loading anything."""
    import pytest

    script = runpy.run_path(str(SCRIPT))

    def loaded(name):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr("mechrag.models.loading.load_model", loaded)
    monkeypatch.setattr("sys.argv", ["frontier.py", "--methods", "loo", "screen", "--only-shared"])
    with pytest.raises(SystemExit) as stopped:
        script["main"]()
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith("--only-shared runs loo only beside exact: add it to --methods")


def test_run_order_runs_each_method_once_and_builders_right_after_their_host(monkeypatch):
    """Repeated names run once; a builder follows its host, and one built on a builder follows
    that builder, wherever each was asked for."""
    script = runpy.run_path(str(SCRIPT))
    run_order = script["run_order"]
    assert run_order(["loo", "screen", "exact", "screen", "loo"]) == ["screen", "exact", "loo"]
    monkeypatch.setitem(run_order.__globals__["BUILDS_ON"], "after_loo", "loo")
    assert run_order(["after_loo", "query_overlap", "loo", "exact_kl", "exact"]) == [
        "query_overlap", "exact", "loo", "after_loo", "exact_kl",
    ]  # fmt: skip
    assert run_order(["after_loo", "loo"]) == ["loo", "after_loo"]  # its host's host not asked
