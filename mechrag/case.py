"""The case: one question held across every method, with one cache of scored subsets.

A :class:`Case` is built once from a model, a query, its sources and a response (generated
greedily from the full prompt when not given). Every method runs on it: ``case.arc_jsd()``,
``case.attribute(...)``, ``case.localize(...)``, ``case.ablation_effect(...)``. Each distinct
source subset is run through the engine at most once: the case keeps, per subset, the per-token
log-probability of the response and the per-token divergences from the full context, so ARC-JSD
followed by LOO costs nothing more, and exact Shapley after LOO scores only the subsets not yet
seen.

Cached scores are kept per set of active model hooks: inside ``mechrag.ablate(...)`` or a gate
the case scores afresh (and keeps that cache only until the hooks change again), so a result
computed under one intervention is never served under another.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from jaxtyping import Bool, Float
from torch import Tensor

from mechrag.attribution.arc_jsd import ARCJSD
from mechrag.attribution.base import SourceMethod
from mechrag.attribution.games import value_game
from mechrag.attribution.methods import resolve_method
from mechrag.attribution.screening import SourceScreen
from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.divergences import DIVERGENCES, jsd
from mechrag.engine import Engine, Reference
from mechrag.errors import InputError
from mechrag.mechanism.echo import DEFAULT_THRESHOLD
from mechrag.mechanism.lens import DEFAULT_LOGIT_BUDGET
from mechrag.models import adapter
from mechrag.prompts import DEFAULT_TEMPLATE, PromptBuilder
from mechrag.protocols import LOCALIZE_PROTOCOL, get_protocol
from mechrag.results.attribution import Attribution
from mechrag.sources import Source, as_sources

Masks = Bool[np.ndarray, "n_masks n_sources"]


@dataclass
class _ScoredSubset:
    logprobs: Float[np.ndarray, " n_response"]
    divergences: dict[str, Float[np.ndarray, " n_response"]]


@dataclass(frozen=True)
class Meter:
    """Where a method's cost starts: the engine's pass and token counts and the clock."""

    forward_passes: int
    tokens_processed: int
    started: float


@dataclass
class _Generation:
    """The key-value cache of the generation that wrote the response, and the hooks that were
    active then (:func:`mechrag.models.adapter.active_hooks`)."""

    hooks: tuple[int, ...]
    cache: object


@dataclass
class _SubsetStore:
    """Everything scored under one set of active hooks."""

    reference: Reference
    subsets: dict[bytes, _ScoredSubset] = field(default_factory=dict)


class Case:
    """One query, its sources and one response, shared by every method.

    ``sources``: a context string (paragraphs at blank lines, then sentences), a list of strings
    or of :class:`mechrag.Source`. ``response``: text (tokenised as the continuation of the
    prompt) or token ids to teacher-force; generated greedily from the full prompt when ``None``
    (at most ``max_new_tokens``). ``template``/``system_prompt`` shape the prompt (see
    :class:`mechrag.PromptBuilder`); ``engine`` lets several cases share one configured engine.
    ``example`` keeps the data set record (gold ids, answer) the case came from. A generated
    response keeps its generation's key-value cache until the full-context pass, which then runs
    only the response positions on top of it (under the hooks active at generation, where
    prefix reuse is exact): a one-pass method such as ``attention`` then costs two
    response-length passes beyond the generation. Until that pass the case holds one
    prompt-length key-value cache (dropped early once a hook active at generation is gone).
    """

    def __init__(
        self,
        model,
        query: str,
        sources: str | Iterable[str] | Iterable[Source],
        response: str | Sequence[int] | None = None,
        *,
        max_new_tokens: int = MAX_NEW_TOKENS,
        template: str = DEFAULT_TEMPLATE,
        system_prompt: str | None = None,
        engine: Engine | None = None,
        example=None,
    ) -> None:
        self.model = model
        self.builder = PromptBuilder(
            model.tokenizer, query, as_sources(sources), template, system_prompt
        )
        self.engine = engine or Engine(model)
        if self.engine.model is not model:
            raise InputError("engine was built for a different model")
        # Fail early on over-long prompts, before any generation.
        self.engine.sequences(self.builder, [0], self.builder.full_mask()[None])
        # Kept until the full-context pass continues it (see the class docstring).
        self._generation: _Generation | None = None
        self.response_ids = self._resolve_response(response, max_new_tokens)
        self.engine.sequences(self.builder, self.response_ids, self.builder.full_mask()[None])
        self.example = example
        self._stores: dict[tuple[int, ...], _SubsetStore] = {}

    @classmethod
    def from_example(
        cls,
        model,
        example,
        response: str | Sequence[int] | None = None,
        *,
        max_new_tokens: int = MAX_NEW_TOKENS,
        template: str = DEFAULT_TEMPLATE,
        system_prompt: str | None = None,
        engine: Engine | None = None,
    ) -> Case:
        """A case for a :class:`mechrag.data.RAGExample` or a
        :class:`mechrag.data.scenarios.Scenario`.

        A scenario brings its fixed response; an example's response is generated unless given.
        """
        if response is None:
            response = getattr(example, "response", None)
        return cls(
            model,
            example.query,
            example.sources,
            response,
            max_new_tokens=max_new_tokens,
            template=template,
            system_prompt=system_prompt,
            engine=engine,
            example=example,
        )

    def for_model(self, model) -> Case:
        """This case on another model: the same query, sources, prompt settings and response
        *text* (re-tokenised by that model's tokenizer), with its own engine and cache."""
        return Case(
            model,
            self.query,
            self.sources,
            self.response_text,
            template=self.builder.template,
            system_prompt=self.builder.system_prompt,
            example=self.example,
        )

    def _resolve_response(self, response, max_new_tokens: int) -> list[int]:
        if response is None:
            if max_new_tokens < 1:
                raise InputError("max_new_tokens must be at least 1")
            ids, cache = adapter.greedy_generate_with_cache(
                self.model, self.builder.ids(), max_new_tokens
            )
            if not ids:
                raise InputError("the model generated an empty response: pass response=...")
            if cache is not None and self.engine.keeps_cache(self.builder, ids):
                self._generation = _Generation(adapter.active_hooks(self.model), cache)
            return ids
        if isinstance(response, str):
            return self.builder.response_ids(response)
        ids = [int(t) for t in response]
        if not ids:
            raise InputError("response is empty: nothing to attribute")
        vocab = adapter.vocab_size(self.model)
        if not all(0 <= t < vocab for t in ids):
            raise InputError(f"response token ids must lie in [0, {vocab}) for this model")
        return ids

    # -- what the case holds -------------------------------------------------------------------

    @property
    def query(self) -> str:
        return self.builder.query

    @property
    def sources(self) -> list[Source]:
        return self.builder.sources

    @property
    def n_sources(self) -> int:
        return self.builder.n_sources

    @property
    def response_text(self) -> str:
        return self.model.tokenizer.decode(self.response_ids)

    @property
    def response_tokens(self) -> list[str]:
        decode = self.model.tokenizer.decode
        return [decode([token]) for token in self.response_ids]

    def source_index(self, source: str | int) -> int:
        """Position of a source given by id (or by position, checked)."""
        ids = [s.id for s in self.sources]
        if isinstance(source, (int, np.integer)) and 0 <= source < len(ids):
            return int(source)
        if source in ids:
            return ids.index(source)
        raise InputError(f"unknown source {source!r}: choose from {ids}")

    def full_mask(self) -> Bool[np.ndarray, " n_sources"]:
        return np.ones(self.n_sources, dtype=bool)

    def empty_mask(self) -> Bool[np.ndarray, " n_sources"]:
        """No sources: the query alone (the context renders empty)."""
        return np.zeros(self.n_sources, dtype=bool)

    def leave_one_out_masks(self) -> Masks:
        """Row ``i`` keeps every source except ``i``."""
        return ~np.eye(self.n_sources, dtype=bool)

    def __repr__(self) -> str:
        return (
            f"Case(query={self.query!r}, n_sources={self.n_sources}, "
            f"response={self.response_text!r}, subsets_scored={self.subsets_scored})"
        )

    # -- the subset cache ----------------------------------------------------------------------

    def _store(self) -> _SubsetStore:
        """The cache for the hooks active now (created with its full-context pass)."""
        signature = adapter.active_hooks(self.model)
        if signature not in self._stores:
            # Keep the first (usually hook-free) cache and the newest intervention's only.
            for stale in list(self._stores)[1:]:
                del self._stores[stale]
            prompt_cache = self._generation_cache(signature)
            if prompt_cache is not None:
                self._generation = None  # the full-context pass's own cache supersedes it
            reference = self.engine.reference(
                self.builder, self.response_ids, prompt_cache=prompt_cache
            )
            self._stores[signature] = _SubsetStore(reference)
        return self._stores[signature]

    def _generation_cache(self, signature: tuple[int, ...]):
        """The generation's cache when it was made under the hooks ``signature`` names, else
        ``None``; dropped for good once a hook active at generation is gone (hook ids are never
        reused, so those hooks cannot come back)."""
        generation = self._generation
        if generation is not None and not set(generation.hooks) <= set(signature):
            self._generation = generation = None
        if generation is None or generation.hooks != signature:
            return None
        return generation.cache

    @property
    def subsets_scored(self) -> int:
        """Distinct subsets scored so far under the hooks active now."""
        signature = adapter.active_hooks(self.model)
        return len(self._stores[signature].subsets) if signature in self._stores else 0

    def _scored(self, masks) -> list[_ScoredSubset]:
        masks = np.asarray(masks, dtype=bool)
        if masks.ndim != 2 or masks.shape[1] != self.n_sources:
            raise ValueError(f"masks must be [m, {self.n_sources}], got {masks.shape}")
        store = self._store()
        keys = [row.tobytes() for row in masks]
        missing = list(dict.fromkeys(k for k in keys if k not in store.subsets))
        if missing:
            rows = np.stack([np.frombuffer(k, dtype=bool) for k in missing])
            scores = self.engine.score(self.builder, self.response_ids, rows, store.reference)
            for row, key in enumerate(missing):
                store.subsets[key] = _ScoredSubset(
                    scores.token_logprobs[row].double().cpu().numpy(),
                    {n: d[row].double().cpu().numpy() for n, d in scores.divergences.items()},
                )
        return [store.subsets[k] for k in keys]

    def scored_masks(self) -> Masks | None:
        """Every subset scored under the hooks active now, the full context first (the cache
        starts with its pass); ``None`` before any pass."""
        store = self._stores.get(adapter.active_hooks(self.model))
        if store is None:
            return None
        keys = dict.fromkeys([self.full_mask().tobytes(), *store.subsets])
        return np.stack([np.frombuffer(key, dtype=bool) for key in keys])

    def token_logprobs(self, masks: Masks) -> Float[np.ndarray, "n_masks n_response"]:
        """``log P(r_t | query, sources kept by mask, r_<t)`` per mask and response token."""
        return np.stack([s.logprobs for s in self._scored(masks)])

    def token_divergences(
        self, masks: Masks, divergence: str = "jsd"
    ) -> Float[np.ndarray, "n_masks n_response"]:
        """``D(P_full,t || P_mask,t)`` per mask and response token (``jsd``, ``kl`` or ``tv``)."""
        if divergence not in DIVERGENCES:
            raise InputError(f"unknown divergence {divergence!r}: choose from {list(DIVERGENCES)}")
        return np.stack([s.divergences[divergence] for s in self._scored(masks)])

    def reference_logprobs(self) -> Float[Tensor, "n_response vocab"]:
        """Full-context next-token log-probabilities at every response position (float32)."""
        return self._store().reference.logprobs

    def context_cache(self, length: int, repeats: int = 1):
        """Key-value cache of the full sequence's first ``length`` positions (``repeats`` rows),
        for a pass with gradients that continues it (reuses the full-context pass's cache)."""
        return self.engine.context_cache(self._store().reference, length, repeats)

    def game(self, value: str = "logprob"):
        """The value function ``masks -> [m]`` (``[m, T]`` for ``token_prob``) on this case."""
        return value_game(self.token_logprobs, value)

    # -- methods -------------------------------------------------------------------------------

    def meter(self) -> Meter:
        """Start measuring a method's cost (see :meth:`attribution`)."""
        return Meter(
            forward_passes=self.engine.forward_passes,
            tokens_processed=self.engine.tokens_processed,
            started=time.perf_counter(),
        )

    def attribution(
        self,
        method: str,
        scores: Float[np.ndarray, " n_sources"],
        meter: Meter,
        *,
        token_scores: Float[np.ndarray, "n_sources n_response"] | None = None,
        model_calls: int,
        metadata: dict,
    ) -> Attribution:
        """A method's result on this case: the engine's passes and tokens and the seconds
        since ``meter`` are its cost (``forward_passes``, ``metadata['tokens_processed']`` and
        ``metadata['seconds']``; a pass made outside the engine, such as the gradient screen's,
        is in the seconds only); ``model_calls`` the subsets it used."""
        return Attribution(
            method=method,
            query=self.query,
            sources=self.sources,
            scores=scores,
            response=self.response_text,
            response_ids=list(self.response_ids),
            response_tokens=self.response_tokens,
            token_scores=token_scores,
            model_calls=model_calls,
            forward_passes=self.engine.forward_passes - meter.forward_passes,
            metadata={
                "seconds": time.perf_counter() - meter.started,
                "tokens_processed": self.engine.tokens_processed - meter.tokens_processed,
                "model": getattr(self.model, "mechrag_name", None),
                **metadata,
            },
        )

    def arc_jsd(
        self, divergence: str = ARCJSD.divergence, *, screen: int | SourceScreen | None = None
    ) -> Attribution:
        """``ARCJSD(divergence, screen)(case)``: each source's summed per-token divergence when
        it alone is removed; see :class:`mechrag.attribution.arc_jsd.ARCJSD`."""
        return ARCJSD(divergence=divergence, screen=screen)(self)

    def attribute(
        self,
        method: str | SourceMethod = "arc_jsd",
        *,
        budget: int | None = None,
        seed: int | None = None,
        value: str | None = None,
        reuse_scored: bool | None = None,
    ) -> Attribution:
        """Attribute the response with ``method``, a name in
        :data:`mechrag.attribution.methods.METHODS` (its defaults) or a configured method such
        as ``mechrag.KernelSHAP(paired=True)``.

        ``budget``, ``seed``, ``value``, ``reuse_scored`` replace the method's fields of those
        names when given (see :class:`mechrag.attribution.estimators.Estimator`); a method
        without such a field (ARC-JSD has no budget) refuses them. ``model_calls`` counts the
        distinct subsets the method used; ``forward_passes`` the passes this call actually ran.
        """
        configured = resolve_method(method).with_settings(
            budget=budget, seed=seed, value=value, reuse_scored=reuse_scored
        )
        return configured(self)

    def echo(self, *, threshold: float = DEFAULT_THRESHOLD):
        """Per-token context echo (full context vs query alone) and source echo (vs the top
        ARC-JSD source removed), with response-level summaries; see :mod:`mechrag.mechanism.echo`.
        """
        from mechrag.mechanism.echo import echo

        return echo(self, threshold=threshold)

    def top_source(self) -> int:
        """Index of the source that ARC-JSD ranks first (from the cache when it already ran)."""
        return int(self.arc_jsd().ranking[0])

    def _chosen_source(self, source: str | int | None) -> int:
        return self.top_source() if source is None else self.source_index(source)

    def localize(
        self,
        source: str | int | None = None,
        *,
        gains: bool = True,
        gain_definition: str | None = None,
        protocol: str = LOCALIZE_PROTOCOL,
        logit_budget: int = DEFAULT_LOGIT_BUDGET,
    ):
        """Per-head, per-MLP and per-layer logit-lens JSD when ``source`` is removed (Eq. 3-5).

        ``source``: id of the source to remove; ``None`` picks the top ARC-JSD source (from the
        cache when ARC-JSD already ran). ``gains`` also computes semantic gains, by
        ``gain_definition`` (``argmax_token``: the paper's Eq. 6-10, per layer;
        ``residual_cosine``: mechrag's continuous gain, also per head; see
        :mod:`mechrag.mechanism.semantic_gain`), by default the ``protocol``'s
        (:mod:`mechrag.protocols`); ``logit_budget`` bounds the vocabulary-sized float32
        elements held at once.
        """
        from mechrag.mechanism.localize import localize_source

        if gain_definition is None:
            gain_definition = get_protocol(protocol).setting("gain_definition")
        attribution = self.arc_jsd() if source is None else None
        index = int(attribution.ranking[0]) if source is None else self.source_index(source)
        return localize_source(
            self,
            index,
            gains=gains,
            logit_budget=logit_budget,
            attribution=attribution,
            gain_definition=gain_definition,
        )

    def capture(self, masks: Masks, sites: Sequence[str]) -> dict[str, Tensor]:
        """Activations ``[n_layers, n_masks, T, ...]`` at the response positions of each mask.

        ``sites``: keys of :data:`mechrag.models.adapter.SITES` (``z``, ``resid_pre``,
        ``resid_mid``, ``resid_post``, ``mlp_out``) or ``pattern`` (attention weights ``[n_layers,
        n_masks, n_heads, T, n_keys]``, one mask only: rows of different lengths see different
        keys). Runs through the engine (token budget) on the full-context pass's cache (prefix
        reuse); a single mask on a fresh case does not run that pass just for this, so it costs one,
        unless the case holds its generation's cache: then that pass is response-length too.
        """
        masks = np.asarray(masks)
        if adapter.PATTERN in sites and len(masks) != 1:
            raise ValueError("attention patterns are captured for one mask at a time")
        layers = range(adapter.n_layers(self.model))
        hooks = {site: [adapter.hook_name(layer, site) for layer in layers] for site in sites}
        signature = adapter.active_hooks(self.model)
        store = self._stores.get(signature)
        generated = self._generation_cache(signature) is not None
        if store is None and (len(masks) > 1 or generated):
            store = self._store()  # several rows share the full-context pass's cache
        reference = store.reference if store is not None else None
        return self.engine.capture(self.builder, self.response_ids, masks, reference, hooks)

    def ablation_effect(
        self,
        source: str | int | None = None,
        *,
        heads: Iterable[tuple[int, int]] = (),
        mlps: Iterable[int] = (),
        mode: str = "zero",
        scale: float = 0.0,
        means=None,
    ) -> dict[str, float]:
        """How ablating ``heads``/``mlps`` changes the model on this case (response fixed).

        With ``P``/``P~`` the clean/ablated full-context distributions and ``Q``/``Q~`` those
        without ``source`` (default: the top ARC-JSD source):

        * ``output_jsd = sum_t JSD(P_t || P~_t)``;
        * ``delta_loglik = sum_t log P~_t(r_t) - log P_t(r_t)``;
        * ``delta_source_jsd = sum_t JSD(P~_t || Q~_t) - sum_t JSD(P_t || Q_t)``.

        Clean scores come from the case's cache; see :func:`mechrag.ablate` for the modes.
        """
        from mechrag.mechanism.ablation import ablate

        index = self._chosen_source(source)
        masks = np.stack([self.full_mask(), self.leave_one_out_masks()[index]])

        def measure() -> tuple[Tensor, np.ndarray, np.ndarray]:
            return (
                self.reference_logprobs(),
                self.token_logprobs(masks[:1])[0],
                self.token_divergences(masks[1:])[0],
            )

        clean = measure()
        with ablate(self.model, heads, mlps, mode=mode, scale=scale, means=means):
            ablated = measure()
        return {
            "output_jsd": float(jsd(clean[0], ablated[0]).sum()),
            "delta_loglik": float(ablated[1].sum() - clean[1].sum()),
            "delta_source_jsd": float(ablated[2].sum() - clean[2].sum()),
        }
