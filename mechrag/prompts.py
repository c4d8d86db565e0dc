"""Prompts: query plus any subset of sources, rendered and tokenised.

Removing a source leaves its text out of the context and re-tokenises the prompt (as ARC-JSD
does), so every subset is a well-formed prompt. Chat models get the user turn through their chat
template; tokenizers without one get a plain ``... Answer:`` completion prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

import numpy as np
import torch
from jaxtyping import Bool

from mechrag.errors import InputError
from mechrag.sources import Source

DEFAULT_TEMPLATE = "Context: {context}\n\nQuery: {query}"
PLAIN_SUFFIX = "\nAnswer:"

# Which sources a prompt keeps; torch or numpy (``Case`` keeps numpy masks), see ``as_masks``.
SourceMask = Bool[torch.Tensor, " n_sources"] | Bool[np.ndarray, " n_sources"]


def as_masks(masks) -> Bool[torch.Tensor, "*batch n_sources"]:
    """Boolean source mask(s) as a torch tensor, from torch, numpy or nested lists.

    The one conversion at the builder's and the engine's entry, so callers holding numpy masks
    need not convert them.
    """
    if isinstance(masks, torch.Tensor):
        return masks.to(torch.bool)
    return torch.from_numpy(np.ascontiguousarray(masks, dtype=bool))  # host: prompts are text


def render_context(sources: Sequence[Source]) -> str:
    """Join sources: sentences of one paragraph with spaces, paragraphs by blank lines.

    A paragraph's title heads its block while any of its sentences remain.
    """
    blocks = []
    for _, group in groupby(sources, key=lambda s: (s.paragraph, s.title)):
        members = list(group)
        body = " ".join(s.text for s in members)
        title = members[0].title
        blocks.append(f"{title}\n{body}" if title else body)
    return "\n\n".join(blocks)


@dataclass
class PromptBuilder:
    """Renders ``query`` with any subset of ``sources`` to token ids.

    ``template`` must contain ``{context}`` and ``{query}``. ``use_chat_template=None`` uses the
    tokenizer's chat template when it has one.
    """

    tokenizer: object
    query: str
    sources: list[Source]
    template: str = DEFAULT_TEMPLATE
    system_prompt: str | None = None
    use_chat_template: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, str):
            raise TypeError(f"query must be a string, got {type(self.query).__name__}")
        if not self.query.strip():
            raise InputError("query is empty")
        if "{context}" not in self.template or "{query}" not in self.template:
            raise InputError("template must contain '{context}' and '{query}'")
        if self.use_chat_template is None:
            self.use_chat_template = bool(getattr(self.tokenizer, "chat_template", None))
        if self.system_prompt is not None and not self.use_chat_template:
            raise InputError("system_prompt needs a chat template; put it in template instead")

    @property
    def n_sources(self) -> int:
        return len(self.sources)

    def full_mask(self) -> Bool[torch.Tensor, " n_sources"]:
        return torch.ones(self.n_sources, dtype=torch.bool)  # host: prompts are built as text

    def context(self, mask: SourceMask | None = None) -> str:
        """The context text for the sources kept by ``mask`` (all when ``None``)."""
        if mask is None:
            return render_context(self.sources)
        return render_context([s for s, k in zip(self.sources, as_masks(mask).tolist()) if k])

    def text(self, mask: SourceMask | None = None) -> str:
        """The full prompt text, ending where the response begins."""
        user = self.template.format(context=self.context(mask), query=self.query.strip())
        if not self.use_chat_template:
            return user + PLAIN_SUFFIX
        messages = [{"role": "user", "content": user}]
        if self.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def ids(self, mask: SourceMask | None = None) -> list[int]:
        """Token ids of the prompt; the response starts right after the last id."""
        return self._tokenize(self.text(mask))

    def response_ids(self, response: str) -> list[int]:
        """Tokenise a caller-given response as the continuation of the full prompt.

        Tokenisers can split a text differently on its own than after the prompt (a leading
        space marker, merges across the boundary), and the model is scored on the latter. When
        the prompt's own tokens are not a prefix of the joint tokenisation (the response would
        merge with the prompt's last token), the response is tokenised on its own instead.
        """
        if not isinstance(response, str):
            raise TypeError(f"response must be a string, got {type(response).__name__}")
        if not response.strip():
            raise InputError("response is empty: nothing to attribute")
        prompt = self.ids()
        joint = self._tokenize(self.text() + response)
        ids = joint[len(prompt) :] if joint[: len(prompt)] == prompt else self._alone(response)
        if not ids:
            raise InputError("response is empty: nothing to attribute")
        return ids

    def _tokenize(self, text: str) -> list[int]:
        # Chat templates already write their special tokens; plain prompts get the
        # tokenizer's own (e.g. BOS).
        return list(self.tokenizer(text, add_special_tokens=not self.use_chat_template).input_ids)

    def _alone(self, response: str) -> list[int]:
        return list(self.tokenizer(response, add_special_tokens=False).input_ids)
