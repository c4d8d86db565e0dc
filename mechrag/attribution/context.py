"""Shared set-up for source attribution: validated sources, prompt builder, response, engine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mechrag.engine import Engine
from mechrag.generation import resolve_response
from mechrag.prompts import DEFAULT_TEMPLATE, PromptBuilder
from mechrag.sources import Source, as_sources


@dataclass
class AttributionTask:
    """Everything a method needs to score one (query, sources, response) case."""

    model: object
    builder: PromptBuilder
    response_ids: list[int]
    engine: Engine

    @classmethod
    def prepare(
        cls,
        model,
        query: str,
        sources: str | Iterable[str] | Iterable[Source],
        response: str | Sequence[int] | None = None,
        *,
        max_new_tokens: int = 64,
        template: str = DEFAULT_TEMPLATE,
        system_prompt: str | None = None,
        engine: Engine | None = None,
        progress: bool | None = None,
    ) -> AttributionTask:
        builder = PromptBuilder(
            model.tokenizer, query, as_sources(sources), template, system_prompt
        )
        engine = engine or Engine(model, progress=progress)
        if engine.model is not model:
            raise ValueError("engine was built for a different model")
        engine.sequences(builder, [0], builder.full_mask()[None])  # fail early on over-long prompts
        response_ids = resolve_response(model, builder, response, max_new_tokens)
        return cls(model, builder, response_ids, engine)

    @property
    def sources(self) -> list[Source]:
        return self.builder.sources

    @property
    def response_text(self) -> str:
        return self.model.tokenizer.decode(self.response_ids)

    @property
    def response_tokens(self) -> list[str]:
        decode = self.model.tokenizer.decode
        return [decode([token]) for token in self.response_ids]
