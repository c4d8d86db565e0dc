"""Attention attribution in one forward pass: a weighted sum over heads of the attention that the
response pays to each source (AT2, Cohen-Wang, Chuang and Madry, 2025, fitted here against exact
ARC-JSD instead of random ablations).

Features. For layer ``l``, head ``h`` and source ``i``: ``f[l, h, i] = mean_t sum_{k in i}
A[l, h, t, k]``, the attention weight that the position predicting response token ``t`` pays to
source ``i``'s tokens (summed over them), averaged over the response. The weights are the model's
own softmax over every key (no renormalisation over the context), as in AT2. They are captured
at the response positions only, through the engine: on the full-context pass's cache when the
case has one (a case that generated its response makes that pass on its generation's cache, so
attention then costs two response-length passes), else in one pass over the whole sequence.

Scores. ``score_i = sum_{l, h} w[l, h] f[l, h, i]``, with one of three kinds of weights:

* ``uniform``: every head weighs ``1 / (n_layers n_heads)``, a baseline;
* ``localized``: the heads that ``localize`` finds (unsupervised): shipped with the fitted
  weights (the top heads by mean normalised head JSD over the training cases); for a model
  without shipped weights, ``localize`` runs on the case itself (then it costs what exact
  ARC-JSD and one localisation cost, and ``forward_passes`` says so);
* ``fitted``: non-negative weights fitted against exact ARC-JSD on training cases
  (:mod:`mechrag.attribution.attention_fit`, ``mechrag fit-attention``); shipped for the
  embedded models, with their provenance beside them.

``weights`` may also be the path of a weights file from ``mechrag fit-attention``. A file made
for another model is refused. ``rescore=m`` spends ``m`` more suffix passes (and the full-context
pass) to score the attention's top ``m`` sources exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import ClassVar

import numpy as np
from jaxtyping import Float

from mechrag.attribution.base import SourceMethod
from mechrag.errors import InputError, InputFileError

WEIGHT_KINDS = ("fitted", "localized", "uniform")
LOCALIZED_HERE = "localize on this case"
FORMAT = "mechrag-attention-weights/1"


def model_key(model) -> str:
    """The name weights are stored under: the embedded model's name, else the name mechrag
    loaded it by, else the bridge's model name."""
    from mechrag.models import adapter
    from mechrag.models.loading import DEFAULT_EMBEDDED, DEFAULT_MODEL_NAME

    name = getattr(model, "mechrag_name", None) or adapter.model_name(model)
    name = name or "unnamed"
    return DEFAULT_EMBEDDED if name == DEFAULT_MODEL_NAME else str(name)


def model_shape(model) -> dict[str, int]:
    """The dimensions weights must match: layers, heads per layer, vocabulary."""
    from mechrag.models import adapter

    return {
        "n_layers": adapter.n_layers(model),
        "n_heads": adapter.n_heads(model),
        "d_vocab": adapter.vocab_size(model),
    }


@dataclass
class AttentionFeatures:
    """Per layer, head, source and response token: the attention paid to the source's tokens.

    ``per_token[l, h, i, t]``; :attr:`features` is its mean over the response.
    """

    per_token: Float[np.ndarray, "n_layers n_heads n_sources n_response"]

    @property
    def features(self) -> Float[np.ndarray, "n_layers n_heads n_sources"]:
        return self.per_token.mean(-1)

    def design(self) -> Float[np.ndarray, "n_sources n_components"]:
        """One row per source, one column per head (layer-major): the fit's design matrix."""
        n_layers, n_heads, n_sources = self.features.shape
        return self.features.reshape(n_layers * n_heads, n_sources).T


def attention_features(case) -> AttentionFeatures:
    """The attention features of ``case`` (one pass on a fresh case; see the module)."""
    import torch

    from mechrag.attribution.screening import source_token_owners
    from mechrag.models import adapter

    owners = source_token_owners(case.builder)
    captured = case.capture(case.full_mask()[None], (adapter.PATTERN,))[adapter.PATTERN]
    patterns = captured[:, 0].double()  # [layer, head, T, keys]
    n_keys = patterns.shape[-1]
    length = len(case.builder.ids()) + len(case.response_ids) - 1
    # The keys a pass sees are the last ones of the sequence (a cached pass sees them all).
    positions = np.arange(length - n_keys, length)
    key_owner = np.full(n_keys, -1)
    in_prompt = positions < len(owners)
    key_owner[in_prompt] = owners[positions[in_prompt]]
    one_hot = torch.zeros(n_keys, case.n_sources, dtype=patterns.dtype, device=patterns.device)
    kept = np.flatnonzero(key_owner >= 0)
    rows = torch.as_tensor(kept, device=patterns.device)
    one_hot[rows, torch.as_tensor(key_owner[kept], device=patterns.device)] = 1.0
    per_token = torch.einsum("lhtk,ks->lhst", patterns, one_hot)
    return AttentionFeatures(per_token.cpu().numpy())


@dataclass
class AttentionWeights:
    """Head weights for one model: ``fitted`` and ``localized`` (``[n_layers, n_heads]``, either
    may be ``None``), the model they were made for, and their provenance (data, n, seed, fit
    quality, command)."""

    model: str
    shape: dict[str, int]
    fitted: Float[np.ndarray, "n_layers n_heads"] | None = None
    localized: Float[np.ndarray, "n_layers n_heads"] | None = None
    provenance: dict = field(default_factory=dict)

    def check(self, model) -> None:
        """Refuse weights made for another model (by name or by shape)."""
        key, shape = model_key(model), model_shape(model)
        if key != self.model or shape != self.shape:
            raise InputError(
                f"attention weights were fitted for {self.model!r} {self.shape}, not for "
                f"{key!r} {shape}: run `mechrag fit-attention --model ...` for this model, or "
                "use weights='uniform'"
            )

    def get(self, kind: str) -> Float[np.ndarray, "n_layers n_heads"] | None:
        """The ``fitted`` or ``localized`` weights (``None`` when the file has none)."""
        return {"fitted": self.fitted, "localized": self.localized}[kind]

    def save(self, path: str | Path) -> list[Path]:
        """``path`` (safetensors: the weights and the model's identity) and ``path`` with
        ``.json`` (the provenance); returns both paths."""
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {
            kind: np.ascontiguousarray(getattr(self, kind), dtype=np.float64)
            for kind in ("fitted", "localized")
            if getattr(self, kind) is not None
        }
        header = {"format": FORMAT, "model": self.model, "shape": json.dumps(self.shape)}
        save_file(tensors, str(path), metadata=header)
        provenance = path.with_suffix(".json")
        document = {"format": FORMAT, "model": self.model, "shape": self.shape, **self.provenance}
        provenance.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        return [path, provenance]

    @classmethod
    def load(cls, path: str | Path) -> AttentionWeights:
        from safetensors import SafetensorError, safe_open

        path = Path(path)
        if not path.is_file():
            raise InputFileError(f"attention weights file not found: {path}")
        try:
            with safe_open(str(path), framework="numpy") as handle:
                header = handle.metadata() or {}
                tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        except (SafetensorError, OSError, ValueError) as error:
            raise InputFileError(f"{path} is not a safetensors file: {error}") from None
        if header.get("format") != FORMAT:
            raise InputFileError(f"{path} is not a mechrag attention-weights file")
        shape = json.loads(header["shape"])
        expected = (shape["n_layers"], shape["n_heads"])
        if any(tensor.shape != expected for tensor in tensors.values()):
            raise InputFileError(f"{path}: weights are not [{expected[0]}, {expected[1]}]")
        provenance_path = path.with_suffix(".json")
        try:
            provenance = (
                json.loads(provenance_path.read_text()) if provenance_path.is_file() else {}
            )
        except json.JSONDecodeError as error:
            raise InputFileError(f"{provenance_path} is not valid JSON: {error}") from None
        for key in ("format", "model", "shape"):
            provenance.pop(key, None)
        return cls(
            model=header["model"],
            shape=shape,
            fitted=tensors.get("fitted"),
            localized=tensors.get("localized"),
            provenance=provenance,
        )


def shipped_weights_path(model_name: str) -> Path:
    """Where the weights that ship for ``model_name`` live (inside the package)."""
    return Path(
        str(resources.files("mechrag.attribution") / "weights" / f"{model_name}.safetensors")
    )


def shipped_weights(model) -> AttentionWeights | None:
    """The weights that ship for ``model`` (embedded models), ``None`` for any other."""
    path = shipped_weights_path(model_key(model))
    return AttentionWeights.load(path) if path.is_file() else None


@dataclass(frozen=True)
class AttentionAttribution(SourceMethod):
    """``weights``: ``fitted`` (the shipped weights of an embedded model), ``localized``,
    ``uniform``, or the path of a weights file from ``mechrag fit-attention``. ``rescore=m``
    scores the ``m`` sources the attention ranks highest exactly (their ARC-JSD) and ranks the
    others below them by attention, as the gradient screen does (AttriBoT's pruning with the
    attention pass as the pruner): one full pass, one response-length pass and ``m`` suffix
    passes."""

    name: ClassVar[str] = "attention"
    description: ClassVar[str] = (
        "weighted attention to each source in one pass (AT2-style), optionally rescored exactly"
    )
    refusal: ClassVar[str] = "attention reads one pass's attention weights"
    ignored: ClassVar[tuple[str, ...]] = ("seed", "reuse_scored")
    weights: str = "fitted"
    rescore: int = 0

    def __post_init__(self) -> None:
        if int(self.rescore) < 0:
            raise InputError(f"rescore must be 0 (attention only) or more, got {self.rescore}")

    def check_inputs(self) -> None:
        if self.weights not in WEIGHT_KINDS:
            AttentionWeights.load(self.weights)  # a missing or malformed file, before any model

    def _head_weights(self, case) -> tuple[np.ndarray, str, dict]:
        """The ``[n_layers, n_heads]`` weights, their kind, and where they came from."""
        from mechrag.models import adapter

        shape = (adapter.n_layers(case.model), adapter.n_heads(case.model))
        if self.weights == "uniform":
            return np.full(shape, 1.0 / (shape[0] * shape[1])), "uniform", {}
        if self.weights in WEIGHT_KINDS:
            stored = shipped_weights(case.model)
            kind = self.weights
            origin = f"shipped for {model_key(case.model)}"
        else:
            stored = AttentionWeights.load(self.weights)
            kind = "fitted" if stored.fitted is not None else "localized"
            origin = str(self.weights)
        if stored is not None:
            stored.check(case.model)
            if stored.get(kind) is not None:
                return stored.get(kind), kind, {"weights_from": origin}
        if kind == "localized":
            return (
                localized_weights([case.localize(gains=False).heads]),
                kind,
                {"weights_from": LOCALIZED_HERE},
            )
        raise InputError(
            f"no fitted attention weights for model {model_key(case.model)!r}: run `mechrag "
            "fit-attention --model ... --out FILE` and pass weights=FILE, or choose "
            "weights='uniform' or 'localized'"
        )

    def __call__(self, case):
        meter = case.meter()
        weights, kind, origin = self._head_weights(case)
        if self.rescore:
            case.reference_logprobs()  # the attention pass then reuses its cache
        features = attention_features(case)
        per_token = np.einsum("lh,lhst->st", weights, features.per_token)
        scores = per_token.mean(-1)
        # The localize fallback ran ARC-JSD (n + 1 subsets; localize reuses two of them).
        localized_here = origin.get("weights_from") == LOCALIZED_HERE
        model_calls = case.n_sources + 1 if localized_here else 1
        label = "attention" if kind == "fitted" else f"attention_{kind}"
        metadata = {"weights": kind, **origin}
        if self.rescore:
            from mechrag.attribution.screening import exact_on_top

            metadata["attention_scores"] = scores.tolist()
            scores, per_token, exact = exact_on_top(case, scores, self.rescore)
            metadata.update(rescore=int(self.rescore), exact=exact.tolist())
            label = f"{label}_rescored"
            if not localized_here:  # the full context and the m leave-one-out subsets
                model_calls += int(exact.sum()) + 1
        return case.attribution(
            label,
            scores,
            meter,
            token_scores=per_token,
            model_calls=model_calls,
            metadata=metadata,
        )


# How many heads the localized weights keep (the paper's top-10 heads).
LOCALIZED_HEADS = 10


def localized_weights(
    heads: Sequence[Float[np.ndarray, "n_layers n_heads"]], top: int = LOCALIZED_HEADS
) -> Float[np.ndarray, "n_layers n_heads"]:
    """Uniform weight on the ``top`` heads of highest mean normalised head JSD over the
    cases' ``heads`` (:attr:`~mechrag.results.components.ComponentAttribution.heads`): each
    case's head JSDs are divided by their sum first, so every case counts the same."""
    mean = np.stack([h / max(float(h.sum()), 1e-300) for h in heads]).mean(0)
    chosen = np.argsort(-mean, axis=None, kind="stable")[: min(top, mean.size)]
    weights = np.zeros(mean.size)
    weights[chosen] = 1.0 / len(chosen)
    return weights.reshape(mean.shape)
