"""Integrated gradients for a dense retriever's similarity score, with Captum.

The retriever scores ``s(q, d) = E_q(q) · E_d(d)`` (cosine similarity for normalised
encoders). Each side is explained separately with the other held fixed: a document's
explanation targets ``s(q, d)`` with the query embedding precomputed; the query's explanation
targets ``Σ_j s(q, d_j)`` over the ``k`` retrieved documents (their embeddings precomputed).

Attributions live on the word-embedding layer's output ``x`` (one vector per token; for the
``zero_all`` baseline on the embeddings module's output, see below):

    IG_i = (x_i − x'_i) · ∫₀¹ ∂s(x' + α(x − x'))/∂x_i dα,   summed over the embedding dimension.

Baselines ``x'`` replace every non-special token by ``[UNK]`` (default, as in RAG-E), ``[PAD]``,
``[MASK]`` or the zero vector; special tokens (``[CLS]``, ``[SEP]``) keep their embeddings, so
their attribution is exactly 0. Captum's ``LayerIntegratedGradients`` takes baselines as token
ids and so cannot express the zero-embedding baseline; we therefore run Captum's
``IntegratedGradients`` on the word-embedding output directly (the model receives
``inputs_embeds``), which is the computation ``LayerIntegratedGradients`` performs on that layer;
a test checks that both agree for an ``[UNK]`` baseline.

Two zero baselines. RAG-E (v1 §5.1; App. D: the input is ``Φ(x) = Wx + p``) describes its zero
baseline as "zeros (discarding the positional embeddings)": the whole input embedding is zero.

- ``"zero"`` zeroes the word embeddings only; the model still adds the position (and token-type)
  embeddings. This is what RAG-E's official code computes (and mechrag did before issue 18).
- ``"zero_all"`` follows the paper as far as IG allows: IG runs on the embeddings module's output
  (``model.embeddings``: in BERT ``LayerNorm(word + position + token type)``, what the first
  layer receives), and the baseline is zero there at every non-special token. The attributions
  then live on that output instead of the word embeddings; completeness holds alike
  (``Σ IG = s(x) − s(x')`` with ``s(x')`` the score of the zeroed input).

  Zeroing the sum *before* the LayerNorm instead (the literal ``Wx + p = 0``) would make IG
  meaningless: ``LayerNorm(α z)`` is the same for every ``α`` above about ``sqrt(ε) / std(z)``,
  so the path is flat and the whole change ``s(x) − s(x')`` sits in a jump at ``α = 0``
  (``Σ IG ≈ 0`` at any number of steps; a test shows the flat path on a tiny BERT). The paper
  does not say where its zeros enter; the official code has only the word-embedding ``"zero"``.

Integration: Captum's default Gauss-Legendre rule with ``n_steps = 100`` nodes. Its weights sum
to exactly 1 and it is exact for polynomials of degree ``2n − 1``; on all-MiniLM-L6-v2 it meets
completeness to 1e-4 at 100 steps from every baseline but ``zero_all``, which misses it by up to
7% there (50 HotpotQA queries and documents, ``experiments/RESULTS.md``). We do not use Captum's
``riemann_trapezoid`` as is: it puts ``n`` points on ``[0, 1]`` (``n − 1`` intervals) but
weights them by ``1/n``, so its weights sum to ``(n − 1)/n`` and every attribution comes out 1%
short at 100 steps (the same defect as the RAG-E reference code, which divides by the point
count instead of the interval count). ``method="riemann_trapezoid"`` is offered with that factor
corrected (weights ``1/(n − 1)``, endpoints halved): the textbook trapezoid rule.

Completeness: ``Σ_i IG_i = s(x) − s(x')`` exactly in the limit; each explanation reports the
ratio ``Σ IG / (s − s0)`` and warns when it falls outside [0.95, 1.05].
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from captum.attr import IntegratedGradients
from jaxtyping import Float, Int

from mechrag.errors import InputError
from mechrag.results.base import Serializable
from mechrag.results.files import json_ready
from mechrag.retrieval.encoder import DenseEncoder
from mechrag.retrieval.options import BASELINES, INTEGRATION_METHODS

COMPLETENESS_RANGE = (0.95, 1.05)


@dataclass
class TokenAttribution(Serializable):
    """Per-token integrated gradients of one text's similarity score.

    ``scores[i]`` is token ``i``'s attribution (0 for special tokens); ``target`` is the
    explained score ``s`` at the input, ``baseline_target`` the score ``s0`` at the baseline.
    ``to_dict`` adds ``completeness`` and ``words`` to the fields.
    """

    default_name = "token_attribution"

    side: str
    text: str
    tokens: list[str]
    scores: Float[np.ndarray, " n_tokens"]
    special: list[bool]
    target: float
    baseline_target: float
    baseline: str
    n_steps: int
    method: str
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Scores as float64, also when read back from a list (``from_dict``)."""
        self.scores = np.asarray(self.scores, dtype=np.float64)

    @property
    def completeness(self) -> float:
        """``Σ IG / (s − s0)``: 1 for exact integration (NaN when ``s == s0``)."""
        gap = self.target - self.baseline_target
        return float(self.scores.sum() / gap) if gap != 0 else float("nan")

    def words(self) -> list[tuple[str, float]]:
        """Scores summed over WordPiece continuations (``##``) into words; specials dropped."""
        return merge_wordpieces(self.tokens, self.scores, self.special)

    def to_dict(self) -> dict:
        derived = {"completeness": self.completeness, "words": self.words()}
        return {**super().to_dict(), **json_ready(derived)}

    def plot(self, ax=None, title: str | None = None):
        """The text with each word coloured by its summed score; returns the figure."""
        from mechrag.plots.saliency import plot_token_saliency

        return plot_token_saliency(self, ax=ax, title=title)

    def plots(self, name: str) -> dict:
        return {f"{name}_saliency": self.plot}


def merge_wordpieces(
    tokens: list[str], scores: Float[np.ndarray, " n"], special: list[bool]
) -> list[tuple[str, float]]:
    """``(word, summed score)`` pairs: a ``##`` token continues the previous word."""
    words: list[tuple[str, float]] = []
    for token, score, is_special in zip(tokens, scores, special):
        if is_special:
            continue
        if token.startswith("##") and words:
            word, total = words[-1]
            words[-1] = (word + token[2:], total + float(score))
        else:
            words.append((token, float(score)))
    return words


class RetrieverIntegratedGradients:
    """Integrated gradients of the retrieval similarity, one side at a time.

    ``baseline``: ``"unk"`` | ``"pad"`` | ``"mask"`` | ``"zero"`` | ``"zero_all"`` (see the module
    docstring); ``method``:
    ``"gausslegendre"`` (default) or ``"riemann_trapezoid"`` (interval widths ``1/(n − 1)``);
    ``internal_batch_size`` bounds how many interpolation points run at once.
    """

    def __init__(
        self,
        query_encoder: DenseEncoder,
        document_encoder: DenseEncoder | None = None,
        *,
        baseline: str = "unk",
        n_steps: int = 100,
        method: str = "gausslegendre",
        internal_batch_size: int = 25,
        warn: bool = True,
    ) -> None:
        if baseline not in BASELINES:
            raise InputError(f"baseline must be one of {BASELINES}, got {baseline!r}")
        if method not in INTEGRATION_METHODS:
            raise InputError(f"method must be one of {INTEGRATION_METHODS}, got {method!r}")
        if n_steps < 2:
            raise InputError(f"n_steps must be >= 2, got {n_steps}")
        self.query_encoder = query_encoder
        self.document_encoder = document_encoder or query_encoder
        self.baseline = baseline
        self.n_steps = n_steps
        self.method = method
        self.internal_batch_size = internal_batch_size
        self.warn = warn

    @classmethod
    def from_retriever(cls, retriever, **options) -> RetrieverIntegratedGradients:
        return cls(retriever.query_encoder, retriever.document_encoder, **options)

    def explain_query(
        self, query: str, document_embeddings: Float[torch.Tensor, "k d"]
    ) -> TokenAttribution:
        """Attribute ``Σ_j s(q, d_j)`` to the query's tokens (documents held fixed)."""
        return self.attribute(self.query_encoder, query, document_embeddings, "query")

    def explain_document(
        self, document_text: str, query_embedding: Float[torch.Tensor, " d"]
    ) -> TokenAttribution:
        """Attribute ``s(q, d)`` to the document's tokens (query held fixed)."""
        return self.attribute(
            self.document_encoder, document_text, query_embedding[None], "document"
        )

    def integration_inputs(
        self,
        encoder: DenseEncoder,
        input_ids: Int[torch.Tensor, "1 seq"],
        attention_mask: Int[torch.Tensor, "1 seq"],
    ) -> tuple[Float[torch.Tensor, "1 seq d"], Float[torch.Tensor, "1 seq d"]]:
        """``(x, x')`` on the layer IG integrates over (the word embeddings; the embeddings
        module's output for ``zero_all``): non-special tokens replaced, special tokens kept."""
        special = special_token_mask(encoder, input_ids)
        with torch.no_grad():
            if self.baseline == "zero_all":
                inputs = embedding_output(encoder, input_ids, attention_mask)
                return inputs, inputs * special.unsqueeze(-1)
            inputs = encoder.word_embeddings(input_ids)
            if self.baseline == "zero":
                return inputs, inputs * special.unsqueeze(-1)
            replacement = getattr(encoder.tokenizer, f"{self.baseline}_token_id")
            if replacement is None:
                raise InputError(f"the tokenizer has no [{self.baseline.upper()}] token")
            baseline_ids = torch.where(special, input_ids, torch.full_like(input_ids, replacement))
            return inputs, encoder.word_embeddings(baseline_ids)

    def embed(
        self,
        encoder: DenseEncoder,
        values: Float[torch.Tensor, "batch seq d"],
        attention_mask: Int[torch.Tensor, "batch seq"],
    ) -> Float[torch.Tensor, "batch d_out"]:
        """The text's embedding as a function of the integrated layer's values."""
        if self.baseline == "zero_all":
            return embed_from_embedding_output(encoder, values, attention_mask)
        return encoder.embed_from_word_embeddings(values, attention_mask)

    def attribute(
        self,
        encoder: DenseEncoder,
        text: str,
        fixed: Float[torch.Tensor, "m d"],
        side: str,
    ) -> TokenAttribution:
        """IG of ``Σ_j E(text) · fixed_j`` on ``text``'s word embeddings (``zero_all``: on the
        embeddings module's output)."""
        batch = encoder.tokenize([text])
        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        fixed = fixed.detach().to(device=input_ids.device, dtype=torch.float32)

        def similarity(values, mask):
            return (self.embed(encoder, values, mask) @ fixed.T).sum(-1)

        inputs, baselines = self.integration_inputs(encoder, input_ids, attention_mask)
        integrated = IntegratedGradients(similarity)
        attributions = integrated.attribute(
            inputs,
            baselines=baselines,
            additional_forward_args=(attention_mask,),
            n_steps=self.n_steps,
            method=self.method,
            internal_batch_size=self.internal_batch_size,
        )
        if self.method == "riemann_trapezoid":
            # Captum weights its n trapezoid points by 1/n; the n - 1 intervals are 1/(n - 1) wide.
            attributions = attributions * (self.n_steps / (self.n_steps - 1))
        with torch.no_grad():
            target = float(similarity(inputs, attention_mask)[0])
            baseline_target = float(similarity(baselines, attention_mask)[0])
        special = special_token_mask(encoder, input_ids)[0].tolist()
        result = TokenAttribution(
            side=side,
            text=text,
            tokens=encoder.tokenizer.convert_ids_to_tokens(input_ids[0].tolist()),
            scores=attributions[0].sum(-1).detach().double().cpu().numpy(),
            special=special,
            target=target,
            baseline_target=baseline_target,
            baseline=self.baseline,
            n_steps=self.n_steps,
            method=self.method,
        )
        low, high = COMPLETENESS_RANGE
        if self.warn and not low <= result.completeness <= high:
            warnings.warn(
                f"IG completeness {result.completeness:.3f} outside [{low}, {high}] for the "
                f"{side} ({self.baseline} baseline, {self.n_steps} steps): raise n_steps",
                stacklevel=2,
            )
        return result


def embedding_output(
    encoder: DenseEncoder,
    input_ids: Int[torch.Tensor, "1 seq"],
    attention_mask: Int[torch.Tensor, "1 seq"],
) -> Float[torch.Tensor, "1 seq d"]:
    """The output of the encoder's embeddings module (``model.embeddings``) for ``input_ids``."""
    captured = []
    handle = _embeddings_module(encoder).register_forward_hook(
        lambda module, args, output: captured.append(output)
    )
    try:
        encoder.embed_ids(input_ids, attention_mask)
    finally:
        handle.remove()
    return captured[0]


def embed_from_embedding_output(
    encoder: DenseEncoder,
    values: Float[torch.Tensor, "batch seq d"],
    attention_mask: Int[torch.Tensor, "batch seq"],
) -> Float[torch.Tensor, "batch d_out"]:
    """Embeddings with the embeddings module's output replaced by ``values`` (differentiable in
    them; the module still runs, on zero word embeddings, and its output is discarded)."""
    word_shape = (*values.shape[:2], encoder.word_embeddings.embedding_dim)
    handle = _embeddings_module(encoder).register_forward_hook(lambda module, args, output: values)
    try:
        return encoder.embed_from_word_embeddings(values.new_zeros(word_shape), attention_mask)
    finally:
        handle.remove()


def _embeddings_module(encoder: DenseEncoder) -> torch.nn.Module:
    module = getattr(encoder.model, "embeddings", None)
    if not isinstance(module, torch.nn.Module):
        raise InputError("the zero_all baseline needs a BERT-style encoder (model.embeddings)")
    return module


def special_token_mask(
    encoder: DenseEncoder, input_ids: Int[torch.Tensor, "batch seq"]
) -> torch.Tensor:
    """True at special tokens ([CLS], [SEP], [PAD], ...)."""
    special_ids = torch.tensor(sorted(encoder.tokenizer.all_special_ids), device=input_ids.device)
    return torch.isin(input_ids, special_ids)
