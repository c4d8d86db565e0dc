"""A retrieval corpus: documents with titles and provenance (which example each came from).

:func:`build_corpus` turns the shipped HotpotQA and MuSiQue training samples and the SQuAD sample
into one corpus: every paragraph becomes a document; identical paragraphs (same text after
whitespace normalisation) are kept once, with every example they came from in ``provenance``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mechrag.data.loaders import DATASETS, RAGExample, load_examples, reader_options
from mechrag.errors import InputError, read_input_text
from mechrag.results.files import write_text_atomic
from mechrag.sources import Source

CORPUS_DATASETS = DATASETS  # every shipped data set (the retrieval command's choices)


@dataclass(frozen=True)
class Origin:
    """Where a document came from: dataset, example id, source id in that example, gold flag."""

    dataset: str
    example_id: str
    source_id: str
    gold: bool = False


@dataclass
class Document:
    """One retrievable document."""

    id: str
    text: str
    title: str | None = None
    provenance: list[Origin] = field(default_factory=list)

    def to_source(self, paragraph: int | None = None) -> Source:
        """This document as a prompt source (one paragraph)."""
        return Source(self.id, self.text, self.title, paragraph)

    @property
    def embedding_text(self) -> str:
        """What the encoder sees: ``"title: text"`` when there is a title."""
        return f"{self.title}: {self.text}" if self.title else self.text


def _normalise(text: str) -> str:
    return " ".join(text.split())


class Corpus(Sequence):
    """An ordered list of unique documents; ``corpus[i]`` and ``corpus.by_id[id]``."""

    def __init__(self, documents: Iterable[Document]) -> None:
        self.documents = list(documents)
        self.by_id = {d.id: d for d in self.documents}
        if len(self.by_id) != len(self.documents):
            raise InputError("document ids must be unique")

    def __len__(self) -> int:
        return len(self.documents)

    def __getitem__(self, index):
        return self.documents[index]

    def position(self, document_id: str) -> int:
        return self.documents.index(self.by_id[document_id])

    @classmethod
    def from_texts(cls, texts: Sequence[str], titles: Sequence[str | None] | None = None) -> Corpus:
        """Documents ``d0, d1, ...`` from plain texts (duplicates kept once)."""
        titles = list(titles) if titles is not None else [None] * len(texts)
        if len(titles) != len(texts):
            raise InputError(f"got {len(texts)} texts but {len(titles)} titles")
        seen, documents = set(), []
        for text, title in zip(texts, titles):
            key = _normalise(text)
            if not key:
                raise InputError("documents must not be empty")
            if key not in seen:
                seen.add(key)
                documents.append(Document(f"d{len(documents)}", text.strip(), title))
        return cls(documents)

    @classmethod
    def from_text_file(cls, path: str | Path) -> Corpus:
        """Plain text, documents separated by blank lines."""
        text = read_input_text(path, "corpus file")
        paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
        if len(paragraphs) < 2:
            raise InputError(
                f"corpus file {path} needs at least two documents (blank-line separated)"
            )
        return cls.from_texts(paragraphs)

    @classmethod
    def from_examples(cls, examples: Iterable[RAGExample]) -> Corpus:
        """Every paragraph of every example as a document, deduplicated by text.

        Sentence-level examples are regrouped into paragraphs (their ``paragraph`` field).
        """
        index: dict[str, Document] = {}
        for example in examples:
            gold = set(example.gold_ids)
            for key, (title, text, source_ids) in _paragraphs(example).items():
                normalised = _normalise(text)
                if normalised not in index:
                    index[normalised] = Document(f"c{len(index)}", text, title)
                origin = Origin(example.dataset, example.id, key, bool(gold & set(source_ids)))
                index[normalised].provenance.append(origin)
        return cls(index.values())

    def documents_of(self, dataset: str, example_id: str, gold_only: bool = False) -> list[str]:
        """Ids of the documents an example contributed (its gold ones with ``gold_only``)."""
        return [
            d.id
            for d in self.documents
            if any(
                o.dataset == dataset and o.example_id == example_id and (o.gold or not gold_only)
                for o in d.provenance
            )
        ]

    def save(self, path: str | Path) -> Path:
        """JSON lines, one document per line."""
        lines = [json.dumps(asdict(d)) for d in self.documents]
        return write_text_atomic(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        documents = []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                row["provenance"] = [Origin(**o) for o in row["provenance"]]
                documents.append(Document(**row))
        return cls(documents)


def _paragraphs(example: RAGExample) -> dict[str, tuple[str | None, str, list[str]]]:
    """``paragraph key -> (title, text, source ids)`` for one example's sources."""
    grouped: dict[str, tuple[str | None, list[str], list[str]]] = {}
    for source in example.sources:
        key = f"p{source.paragraph}" if source.paragraph is not None else source.id
        title, texts, ids = grouped.setdefault(key, (source.title, [], []))
        texts.append(source.text)
        ids.append(source.id)
    return {key: (title, " ".join(texts), ids) for key, (title, texts, ids) in grouped.items()}


def load_dataset_examples(dataset: str, n: int | None = None) -> list[RAGExample]:
    """All paragraphs of the first ``n`` shipped examples of ``dataset``, as documents.

    Readers with a ``unit`` give whole paragraphs; SQuAD's one paragraph of sentences is
    regrouped into its document by :meth:`Corpus.from_examples`.
    """
    units = {"unit": "document"} if "unit" in reader_options(dataset) else {}
    return load_examples(dataset, n=n, **units)


def build_corpus(datasets: Sequence[str] = CORPUS_DATASETS, n: int | None = None) -> Corpus:
    """One corpus from the shipped samples of ``datasets`` (first ``n`` examples of each;
    HotpotQA's and MuSiQue's training samples)."""
    examples = [e for name in datasets for e in load_dataset_examples(name, n)]
    return Corpus.from_examples(examples)
