"""Dataset readers on the shipped samples, and examples cut to fewer sentences."""

import pytest

from mechrag.data import (
    DATASETS,
    LOADERS,
    SHIPPED,
    load_examples,
    load_hotpotqa,
    load_musique,
    load_squad,
    reader_options,
    shipped_path,
)
from mechrag.errors import InputError
from mechrag.sources import source_id


def test_hotpotqa_gold_sentences_point_at_supporting_facts():
    examples = load_hotpotqa(n=5)
    assert len(examples) == 5
    for example in examples:
        assert len({s.paragraph for s in example.sources}) == 10
        assert example.gold_ids and set(example.gold_ids) <= {s.id for s in example.sources}
    first = examples[0]
    gold_titles = {s.title for s in first.sources if s.id in first.gold_ids}
    assert gold_titles == {"Alû", "Lilu (mythology)"}


def test_hotpotqa_distractor_selection_keeps_gold_and_is_seeded():
    a = load_hotpotqa(n=10, distractors=2, seed=1)
    b = load_hotpotqa(n=10, distractors=2, seed=1)
    for x, y in zip(a, b):
        paragraphs = {s.paragraph for s in x.sources}
        assert len(paragraphs) == 4
        assert [s.id for s in x.sources] == [s.id for s in y.sources]
        assert set(x.gold_ids) <= {s.id for s in x.sources}


def test_document_unit_and_musique_and_squad():
    docs = load_hotpotqa(n=3, unit="document", distractors=3)[0]
    assert len(docs.sources) == 5 and len(docs.gold_ids) == 2
    musique = load_musique(n=3, distractors=2)
    assert all(len(e.sources) == len(e.gold_ids) + 2 for e in musique)
    squad = load_squad(n=4)
    assert squad[0].answer == "France" and squad[0].gold_ids == ["p0s0"]
    assert load_examples("squad", n=2)[1].id == squad[1].id


def test_unknown_dataset_and_unit_are_rejected():
    with pytest.raises(ValueError, match="unknown dataset"):
        load_examples("nq")
    with pytest.raises(ValueError, match="unit"):
        load_hotpotqa(n=1, unit="token")


def test_datasets_are_listed_once_and_each_ships_a_sample():
    from mechrag.retrieval.corpus import CORPUS_DATASETS

    assert DATASETS == tuple(LOADERS) == tuple(SHIPPED) == ("hotpotqa", "musique", "squad")
    assert CORPUS_DATASETS is DATASETS
    assert all(shipped_path(dataset).is_file() for dataset in DATASETS)


def test_dev_samples_are_whole_checked_and_disjoint_from_the_training_samples():
    """Against the raw files: every dev row keeps all its paragraphs (HotpotQA 10, MuSiQue 20),
    every gold label points at real text, and no id (or question) is also in the training
    sample, so a method fitted on training examples is never scored on its own data."""
    import json

    from mechrag.data import DEV_SAMPLES, SPLITS

    assert SPLITS == ("train", "dev") and set(DEV_SAMPLES) == {"hotpotqa", "musique"}
    hotpot = json.loads(shipped_path("hotpotqa", "dev").read_text(encoding="utf-8"))
    assert len(hotpot) == 295 and {row["level"] for row in hotpot} == {"hard"}
    for row in hotpot:
        paragraphs = dict(row["context"])
        assert len(row["context"]) == len(paragraphs) == 10
        assert all(s < len(paragraphs[title]) for title, s in row["supporting_facts"])
    dev = load_hotpotqa(split="dev")
    assert [e.id for e in dev] == [row["_id"] for row in hotpot]
    assert all(len(e.gold_ids) == len(row["supporting_facts"]) for e, row in zip(dev, hotpot))
    musique = load_musique(split="dev", unit="sentence")
    assert len(musique) == 200
    assert all(len({s.paragraph for s in e.sources}) == 20 and e.gold_ids for e in musique)
    for loader in (load_hotpotqa, load_musique):
        train, dev = loader(), loader(split="dev")
        assert not {e.id for e in train} & {e.id for e in dev}
        assert not {e.query for e in train} & {e.query for e in dev}
    for path in (None, shipped_path("hotpotqa")):  # refused with or without a file
        with pytest.raises(ValueError, match="split must be one of"):
            load_hotpotqa(path, split="test")


def test_reader_options_are_each_readers_keywords_but_path_and_n():
    assert (
        reader_options("hotpotqa")
        == reader_options("musique")
        == {"distractors", "unit", "seed", "split"}
    )
    assert reader_options("squad") == set()
    with pytest.raises(ValueError, match="unknown dataset"):
        reader_options("nq")


def test_corpus_reads_whole_paragraphs_through_the_dispatch():
    from mechrag.retrieval.corpus import load_dataset_examples

    for dataset in ("hotpotqa", "musique"):
        (example,) = load_dataset_examples(dataset, n=1)
        assert [s.id for s in example.sources] == [source_id(s.paragraph) for s in example.sources]
        assert example.gold_ids == load_examples(dataset, n=1, unit="document")[0].gold_ids
    (squad,) = load_dataset_examples("squad", n=1)
    assert [s.id for s in squad.sources] == [s.id for s in load_squad(n=1)[0].sources]
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset_examples("nq")


def test_empty_sentences_keep_gold_indices(tmp_path):
    import json

    row = {
        "_id": "x",
        "question": "q?",
        "answer": "a",
        "type": "bridge",
        "level": "easy",
        "context": [["T", ["S0.", " ", "S2 gold."]], ["U", ["Other."]]],
        "supporting_facts": [["T", 2]],
    }
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([row]))
    (example,) = load_hotpotqa(path)
    assert example.gold_ids == ["p0s2"]
    assert [s.text for s in example.sources if s.id == "p0s2"] == ["S2 gold."]


def test_squad2_reads_every_question_of_the_official_json_unanswerable_included():
    """Against a direct count of the shipped official file (PROVENANCE: 1,407 questions, 702
    unanswerable); each question keeps its own paragraph and every distinct gold answer."""
    import json

    from mechrag.data import SQUAD2_FILE, load_squad2, package_file

    data = json.loads(package_file(SQUAD2_FILE).read_text(encoding="utf-8"))["data"]
    questions = [
        (qa, paragraph["context"])
        for a in data
        for paragraph in a["paragraphs"]
        for qa in paragraph["qas"]
    ]
    examples = load_squad2()
    assert len(examples) == len(questions) == 1407
    assert sum(not e.metadata["answers"] for e in examples) == 702
    for example, (qa, context) in zip(examples, questions):
        assert example.id == qa["id"] and example.query == qa["question"]
        assert example.metadata["answers"] == sorted({a["text"] for a in qa["answers"]})
        assert " ".join(s.text for s in example.sources).split() == context.split()
        assert example.gold_ids == []
    first = examples[0]  # by hand, from the file's first question
    assert first.query == "In what country is Normandy located?"
    assert first.answer == "France" and first.metadata["answers"] == ["France"]
    assert first.sources[0].text.startswith("The Normans")
    assert len(load_squad2(n=3)) == 3


def test_squad2_refuses_another_layout_in_one_line(tmp_path):
    from mechrag.data import load_squad2
    from mechrag.errors import InputFileError

    gold_sentences = shipped_path("squad")  # the JSONL layout, a plausible mistake
    with pytest.raises(InputFileError, match="not an official SQuAD 2.0 JSON"):
        load_squad2(gold_sentences)
    other = tmp_path / "other.json"
    other.write_text('{"data": [{"title": "x"}]}')
    with pytest.raises(InputFileError, match="not an official SQuAD 2.0 JSON"):
        load_squad2(other)


def test_squad_articles_give_each_answerable_question_its_whole_article():
    """Against the shipped derived file (PROVENANCE: one row per answerable question with its
    paragraph's sentences and the ids of those overlapping an answer span): the same gold
    sentences, found here from the official file's character offsets, inside the whole article."""
    from mechrag.data import load_squad_articles
    from mechrag.prompts import render_context
    from mechrag.results.files import read_jsonl

    derived = {row["id"]: row for row in read_jsonl(shipped_path("squad"))}
    examples = load_squad_articles()
    assert len(examples) == len(derived) == 705
    titles = [e.metadata["article"] for e in examples[:5]]
    assert len(set(titles)) == 5  # the first questions span every article
    for example in examples:
        row = derived[example.id]
        assert example.query == row["question"] and example.metadata["answers"] == row["answers"]
        gold_texts = [s.text for s in example.sources if s.id in set(example.gold_ids)]
        assert gold_texts == [row["sentences"][i] for i in row["gold_sentence_ids"]]
        (paragraph,) = {s.paragraph for s in example.sources if s.id in set(example.gold_ids)}
        own = [s.text for s in example.sources if s.paragraph == paragraph]
        assert own == row["sentences"]  # the question's paragraph, in its article
        assert example.sources[0].title == row["title"]
        assert {s.title for s in example.sources[1:] if s.paragraph > 0} == {None}
    normans = next(e for e in examples if e.metadata["article"] == "Normans")
    assert len({s.paragraph for s in normans.sources}) == 39  # every paragraph of the article
    assert render_context(normans.sources).startswith("Normans\nThe Normans")
    assert len(load_squad_articles(n=7)) == 7


def test_sentence_spans_find_sentences_the_splitter_rejoined():
    """Bling Fire turns a newline inside a sentence into a space; the span still covers the
    paragraph's own characters."""
    from mechrag.data.loaders import _sentence_spans

    text = "A b\nc d. E f.  G h."
    spans = _sentence_spans(text)
    assert [sentence for sentence, _, _ in spans] == ["A b c d.", "E f.", "G h."]
    assert [text[start:end] for _, start, end in spans] == ["A b\nc d.", "E f.", "G h."]


def test_cut_to_sentences_keeps_gold_and_every_paragraph():
    from mechrag.data import cut_to_sentences, load_examples

    example = load_examples("hotpotqa", unit="sentence")[0]
    cut = cut_to_sentences(example, 12)
    assert len(cut.sources) == 12 and set(example.gold_ids) <= {s.id for s in cut.sources}
    assert len({s.paragraph for s in cut.sources}) == len({s.paragraph for s in example.sources})
    order = [example.sources.index(s) for s in cut.sources]
    assert order == sorted(order)
    with pytest.raises(InputError):
        cut_to_sentences(example, 1)
