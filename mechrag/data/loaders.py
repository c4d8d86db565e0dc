"""Real QA datasets as RAG examples: HotpotQA, MuSiQue and SQuAD 2.0 (samples ship with mechrag).

Every reader returns :class:`RAGExample` objects: a query, its sources (sentences or documents),
the ids of the gold sources and the reference answer. Source ids keep the original paragraph
number (``p3s1`` is sentence 1 of paragraph 3; ``p3`` is paragraph 3 as a document), so they stay
stable when distractor paragraphs are dropped.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mechrag.errors import InputError, InputFileError, read_input_text
from mechrag.sources import Source, source_id, split_sentences

SHIPPED = {
    "hotpotqa": "hotpotqa_sample100.json",
    "musique": "musique_ans_sample100.json",
    "squad": "squad2_dev_5articles_gold_sentences.jsonl",
}
# HotpotQA and MuSiQue also ship dev-split samples (the papers' split), read with split="dev";
# SHIPPED's samples of the two are their training splits (PROVENANCE.md says where each came from).
DEV_SAMPLES = {
    "hotpotqa": "hotpotqa_dev_sample295.json",
    "musique": "musique_ans_dev_sample200.jsonl",
}
SPLITS = ("train", "dev")
# The official SQuAD 2.0 JSON of the same 5 dev articles, unanswerable questions included (read
# by load_squad2; not a data set of DATASETS: it has no gold sentences).
SQUAD2_FILE = "squad2_dev_5articles.json"
UNITS = ("sentence", "document")


@dataclass
class RAGExample:
    """One query with its retrievable sources and gold labels."""

    id: str
    dataset: str
    query: str
    sources: list[Source]
    gold_ids: list[str]
    answer: str
    metadata: dict = field(default_factory=dict)

    def gold_indices(self) -> list[int]:
        gold = set(self.gold_ids)
        return [i for i, source in enumerate(self.sources) if source.id in gold]


def shipped_path(dataset: str, split: str = "train") -> Path:
    """Path of the sample of ``dataset`` shipped inside the package (SQuAD's only sample is dev:
    its ``split`` is ignored)."""
    if dataset not in SHIPPED:
        raise InputError(f"unknown dataset {dataset!r}: choose from {sorted(SHIPPED)}")
    _check_split(split)
    if split == "dev" and dataset in DEV_SAMPLES:
        return package_file(DEV_SAMPLES[dataset])
    return package_file(SHIPPED[dataset])


def package_file(name: str) -> Path:
    """Path of the file ``name`` shipped in ``mechrag/datasets``."""
    return Path(str(resources.files("mechrag.datasets") / name))


def _check_unit(unit: str) -> None:
    if unit not in UNITS:
        raise InputError(f"unit must be one of {UNITS}, got {unit!r}")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}, got {split!r}")


def _choose_paragraphs(n_total: int, gold: set[int], distractors: int | None, rng) -> list[int]:
    """Gold paragraphs plus ``distractors`` random others, in their original order."""
    if distractors is None:
        return list(range(n_total))
    others = [i for i in range(n_total) if i not in gold]
    keep = set(gold) | set(rng.sample(others, min(distractors, len(others))))
    return sorted(keep)


def _paragraph_sources(
    paragraphs: list[tuple[int, str, list[str]]], gold_sentences: set[tuple[int, int]], unit: str
) -> tuple[list[Source], list[str]]:
    """Sources and gold ids from ``(paragraph index, title, sentences)`` triples."""
    sources, gold_ids = [], []
    for p_index, title, sentences in paragraphs:
        # Keep original sentence indices (gold labels count them), skipping empty sentences.
        kept = [(s_index, s.strip()) for s_index, s in enumerate(sentences) if s.strip()]
        if unit == "document":
            sources.append(Source(source_id(p_index), " ".join(s for _, s in kept), title, p_index))
            if any(p == p_index for p, _ in gold_sentences):
                gold_ids.append(source_id(p_index))
            continue
        for s_index, sentence in kept:
            sources.append(Source(source_id(p_index, s_index), sentence, title, p_index))
            if (p_index, s_index) in gold_sentences:
                gold_ids.append(source_id(p_index, s_index))
    return sources, gold_ids


def _read_json(path: str | Path | None, dataset: str, split: str = "train"):
    _check_split(split)  # also with a path given, where no shipped sample is chosen by it
    path = Path(path) if path is not None else shipped_path(dataset, split=split)
    if not path.is_file():
        raise InputFileError(f"{dataset} file not found: {path}")
    text = read_input_text(path, f"{dataset} file")
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputFileError(f"{dataset} file {path} is not valid JSON: {error}") from None


def load_hotpotqa(
    path: str | Path | None = None,
    n: int | None = None,
    distractors: int | None = None,
    unit: str = "sentence",
    seed: int = 0,
    split: str = "train",
) -> list[RAGExample]:
    """HotpotQA in its official JSON layout; gold = sentence-level ``supporting_facts``.

    ``distractors=k`` keeps the gold paragraphs plus ``k`` random others (the full ten-paragraph
    prompt is ~1,200 tokens). With ``unit="document"`` a paragraph is gold when it holds any
    supporting fact. ``split`` picks the shipped sample, training or dev, when ``path`` is None.
    """
    _check_unit(unit)
    rows = _read_json(path, "hotpotqa", split=split)[:n]
    examples = []
    for index, row in enumerate(rows):
        titles = [title for title, _ in row["context"]]
        gold_sentences = {
            (titles.index(title), s) for title, s in row["supporting_facts"] if title in titles
        }
        rng = random.Random(seed * 100_003 + index)
        gold_paragraphs = {p for p, _ in gold_sentences}
        kept = _choose_paragraphs(len(titles), gold_paragraphs, distractors, rng)
        paragraphs = [(p, row["context"][p][0], row["context"][p][1]) for p in kept]
        sources, gold_ids = _paragraph_sources(paragraphs, gold_sentences, unit)
        examples.append(
            RAGExample(
                row.get("_id", str(index)),
                "hotpotqa",
                row["question"],
                sources,
                gold_ids,
                row["answer"],
                {"type": row.get("type"), "level": row.get("level")},
            )
        )
    return examples


def load_musique(
    path: str | Path | None = None,
    n: int | None = None,
    distractors: int | None = None,
    unit: str = "document",
    seed: int = 0,
    split: str = "train",
) -> list[RAGExample]:
    """MuSiQue-Ans; gold = ``is_supporting`` paragraphs (all their sentences, at sentence level).
    ``split`` picks the shipped sample (training or dev) when ``path`` is None."""
    _check_unit(unit)
    rows = _read_json(path, "musique", split=split)[:n]
    examples = []
    for index, row in enumerate(rows):
        sentences = [split_sentences(p["paragraph_text"]) for p in row["paragraphs"]]
        gold_paragraphs = {i for i, p in enumerate(row["paragraphs"]) if p["is_supporting"]}
        gold_sentences = {(i, s) for i in gold_paragraphs for s in range(len(sentences[i]))}
        rng = random.Random(seed * 100_003 + index)
        kept = _choose_paragraphs(len(sentences), gold_paragraphs, distractors, rng)
        paragraphs = [(p, row["paragraphs"][p]["title"], sentences[p]) for p in kept]
        sources, gold_ids = _paragraph_sources(paragraphs, gold_sentences, unit)
        examples.append(
            RAGExample(
                row["id"],
                "musique",
                row["question"],
                sources,
                gold_ids,
                row["answer"],
                {"aliases": row.get("answer_aliases", [])},
            )
        )
    return examples


def load_squad(path: str | Path | None = None, n: int | None = None) -> list[RAGExample]:
    """SQuAD 2.0 gold-sentence JSONL: one paragraph as sentences; gold = answer sentences;
    ``metadata["answers"]`` holds every annotator's answer."""
    rows = _read_json(path, "squad")[:n]
    examples = []
    for row in rows:
        sentences = [(0, row["title"], row["sentences"])]
        gold = {(0, s) for s in row["gold_sentence_ids"]}
        sources, gold_ids = _paragraph_sources(sentences, gold, "sentence")
        answer = row["answers"][0] if row["answers"] else ""
        metadata = {"answers": list(row["answers"])}
        examples.append(
            RAGExample(row["id"], "squad", row["question"], sources, gold_ids, answer, metadata)
        )
    return examples


@dataclass(frozen=True)
class _SquadParagraph:
    """One paragraph of an official SQuAD 2.0 file: its article, its text and its questions as
    ``(id, question, ((answer text, start character), ...))`` (no answers: unanswerable)."""

    article: int
    title: str
    context: str
    questions: list[tuple[str, str, tuple[tuple[str, int], ...]]]


def _squad2_paragraphs(path: str | Path | None) -> list[_SquadParagraph]:
    """The paragraphs of an official SQuAD 2.0 JSON file (default: the shipped 5 dev articles);
    a file of another layout is one clear error."""
    path = package_file(SQUAD2_FILE) if path is None else Path(path)
    data = _read_json(path, "squad2")
    try:  # the layout's fields, read before any work, so a bug below is not a layout error
        return [
            _SquadParagraph(
                index,
                article["title"],
                paragraph["context"],
                [
                    (
                        qa["id"],
                        qa["question"],
                        tuple((a["text"], int(a["answer_start"])) for a in qa["answers"]),
                    )
                    for qa in paragraph["qas"]
                ],
            )
            for index, article in enumerate(data["data"])
            for paragraph in article["paragraphs"]
        ]
    except (KeyError, TypeError, ValueError):
        raise InputFileError(
            f"{path} is not an official SQuAD 2.0 JSON file (data > paragraphs > context, qas "
            "> answers > text, answer_start)"
        ) from None


def load_squad2(path: str | Path | None = None, n: int | None = None) -> list[RAGExample]:
    """Official SQuAD 2.0 JSON, unanswerable questions included: one example per question, its
    paragraph split into sentences; ``metadata["answers"]`` holds every distinct gold answer
    (empty when unanswerable). No gold sentences (``gold_ids`` empty): for answer-level studies
    such as gating."""
    examples = []
    for paragraph in _squad2_paragraphs(path):
        sentences = split_sentences(paragraph.context)
        title = paragraph.title
        sources = [Source(source_id(0, i), s, title, 0) for i, s in enumerate(sentences)]
        for question_id, question, spans in paragraph.questions:
            answers = sorted({text for text, _ in spans})
            first = answers[0] if answers else ""
            metadata = {"answers": answers}
            examples.append(
                RAGExample(question_id, "squad", question, sources, [], first, metadata)
            )
    return examples[:n]


def _sentence_spans(text: str) -> list[tuple[str, int, int]]:
    """``text``'s sentences (:func:`split_sentences`) with their start and end characters in
    ``text`` (found word by word: the splitter turns a newline inside a sentence into a space)."""
    spans, cursor = [], 0
    for sentence in split_sentences(text):
        pattern = r"\s+".join(map(re.escape, sentence.split()))
        found = re.compile(pattern).search(text, cursor)
        if found is None:  # the splitter changed a word: a bug, not bad input
            raise AssertionError(f"sentence {sentence[:40]!r} is not in its paragraph")
        spans.append((sentence, found.start(), found.end()))
        cursor = found.end()
    return spans


def load_squad_articles(path: str | Path | None = None, n: int | None = None) -> list[RAGExample]:
    """SQuAD 2.0's answerable questions over their whole article: every paragraph of the
    article one block of sentence sources (``p{paragraph}s{sentence}``, the title on the first),
    gold = the sentences of the question's own paragraph that overlap an annotator's answer
    span. The long-context SQuAD setting (an article is 2,500-4,500 words). Questions are taken
    from the articles in turn (the first of each article, then the second, ...), so the first
    ``n`` span every article; ``metadata["answers"]`` holds every distinct gold answer."""
    paragraphs = _squad2_paragraphs(path)
    articles: dict[int, list[_SquadParagraph]] = {}
    for paragraph in paragraphs:
        articles.setdefault(paragraph.article, []).append(paragraph)
    per_article = []
    for members in articles.values():
        sources, spans_of = [], []
        for p_index, paragraph in enumerate(members):
            spans = _sentence_spans(paragraph.context)
            title = paragraph.title if p_index == 0 else None
            sources += [
                Source(source_id(p_index, s), text, title, p_index)
                for s, (text, _, _) in enumerate(spans)
            ]
            spans_of.append(spans)
        questions = []
        for p_index, paragraph in enumerate(members):
            for question_id, question, answers in paragraph.questions:
                if not answers:
                    continue
                gold = [
                    source_id(p_index, s)
                    for s, (_, start, end) in enumerate(spans_of[p_index])
                    if any(a < end and a + len(t) > start for t, a in answers)
                ]
                texts = sorted({t for t, _ in answers})
                questions.append(
                    RAGExample(question_id, "squad", question, list(sources), gold, texts[0],
                               {"answers": texts, "article": paragraph.title})
                )  # fmt: skip
        per_article.append(questions)
    longest = max(map(len, per_article), default=0)
    interleaved = [q[i] for i in range(longest) for q in per_article if i < len(q)]
    return interleaved[:n]


# The one list of data sets: every other module (sweeps, the retrieval corpus) reads it here.
LOADERS = {"hotpotqa": load_hotpotqa, "musique": load_musique, "squad": load_squad}
DATASETS = tuple(LOADERS)


def _loader(dataset: str):
    if dataset not in LOADERS:
        raise InputError(f"unknown dataset {dataset!r}: choose from {sorted(LOADERS)}")
    return LOADERS[dataset]


def reader_options(dataset: str) -> set[str]:
    """The options the reader of ``dataset`` takes besides ``path`` and ``n``."""
    return set(inspect.signature(_loader(dataset)).parameters) - {"path", "n"}


def load_examples(dataset: str, path: str | Path | None = None, **options) -> list[RAGExample]:
    """Dispatch to the reader for ``dataset`` ("hotpotqa", "musique" or "squad")."""
    return _loader(dataset)(path, **options)


def cut_to_sentences(example: RAGExample, n_sentences: int) -> RAGExample:
    """``example`` cut to ``n_sentences`` sentence sources (more only when its gold sentences
    alone are more), keeping every paragraph as long as the budget allows: the gold sentences,
    then each paragraph's first sentence, then each one's second, and so on; the kept sentences
    stay in their original order. Sizes the frontier benchmark's contexts."""
    if n_sentences < 2:
        raise InputError(f"n_sentences must be at least 2, got {n_sentences}")
    gold = set(example.gold_ids)
    keep = {i for i, source in enumerate(example.sources) if source.id in gold}
    depth: dict[object, int] = {}
    rank = []
    for index, source in enumerate(example.sources):
        depth[source.paragraph] = depth.get(source.paragraph, -1) + 1
        rank.append((depth[source.paragraph], index))
    for _, index in sorted(rank):
        if len(keep) >= n_sentences:
            break
        keep.add(index)
    sources = [s for i, s in enumerate(example.sources) if i in keep]
    metadata = {**example.metadata, "cut_to_sentences": n_sentences}
    return dataclasses.replace(example, sources=sources, metadata=metadata)
