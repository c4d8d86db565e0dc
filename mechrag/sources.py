"""Sources: the removable units of a RAG context (sentences or documents).

A :class:`Source` carries an id, its text and, optionally, the title and paragraph it came from.
``as_sources`` accepts what users naturally have (a context string, a list of strings, a list of
sources) and returns a validated list. Sentence splitting uses Bling Fire, which works offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import blingfire

from mechrag.errors import InputError


@dataclass(frozen=True)
class Source:
    """One removable unit of context.

    ``paragraph`` groups consecutive sentences into one rendered block; ``title`` is shown at
    the top of that block.
    """

    id: str
    text: str
    title: str | None = None
    paragraph: int | None = None


def source_id(paragraph: int, sentence: int | None = None) -> str:
    """The one id scheme: ``p{paragraph}`` for a document, ``p{paragraph}s{sentence}`` for a
    sentence (indices as in the original text, so ids stay stable when others are dropped)."""
    return f"p{paragraph}" if sentence is None else f"p{paragraph}s{sentence}"


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (Bling Fire), dropping empty pieces."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    return [s.strip() for s in blingfire.text_to_sentences(text.strip()).split("\n") if s.strip()]


def sentences_from_paragraphs(
    paragraphs: Sequence[tuple[str | None, str | Sequence[str]]],
) -> list[Source]:
    """Sentence sources from ``(title, text or list of sentences)`` paragraphs.

    Ids follow :func:`source_id`.
    """
    sources: list[Source] = []
    for p_index, (title, body) in enumerate(paragraphs):
        sentences = split_sentences(body) if isinstance(body, str) else [s.strip() for s in body]
        for s_index, sentence in enumerate(s for s in sentences if s):
            sources.append(Source(source_id(p_index, s_index), sentence, title, p_index))
    return sources


def documents_from_texts(
    texts: Sequence[str], titles: Sequence[str | None] | None = None
) -> list[Source]:
    """One source per document; each is its own paragraph (ids ``p0``, ``p1``, ...)."""
    titles = list(titles) if titles is not None else [None] * len(texts)
    if len(titles) != len(texts):
        raise InputError(f"got {len(texts)} documents but {len(titles)} titles")
    return [
        Source(source_id(i), text.strip(), title, i)
        for i, (text, title) in enumerate(zip(texts, titles))
    ]


def as_sources(
    sources: str | Iterable[str] | Iterable[Source], min_sources: int = 2
) -> list[Source]:
    """Normalise user input to a validated list of sources.

    A string is split into paragraphs at blank lines and each paragraph into sentences; a list
    of strings becomes one source per string (sentences of one paragraph); sources pass
    through. Ids follow :func:`source_id`. Raises on empty text, duplicate ids, wrong types and
    fewer than ``min_sources`` sources (attribution needs something to compare against).
    """
    if isinstance(sources, str):
        if not sources.strip():
            raise InputError("context is empty: give at least two sentences or documents")
        paragraphs = [p for p in sources.split("\n\n") if p.strip()]
        items: list = sentences_from_paragraphs([(None, p) for p in paragraphs])
    else:
        try:
            items = list(sources)
        except TypeError:
            raise TypeError(
                "sources must be a context string, a list of strings or a list of Source, "
                f"got {type(sources).__name__}"
            ) from None
        if all(isinstance(s, str) for s in items):
            items = [Source(source_id(0, i), s.strip(), None, 0) for i, s in enumerate(items)]
        elif not all(isinstance(s, Source) for s in items):
            kinds = sorted({type(s).__name__ for s in items})
            raise TypeError(f"sources must all be strings or all be Source objects, got {kinds}")
    for source in items:
        if not source.text.strip():
            raise InputError(f"source {source.id!r} has empty text")
    if len(items) < min_sources:
        raise InputError(
            f"got {len(items)} source(s); attribution needs at least {min_sources} "
            "(split the context into sentences, or add documents)"
        )
    ids = [s.id for s in items]
    if len(set(ids)) != len(ids):
        raise InputError("source ids must be unique")
    return items
