"""Tiny randomly initialised models with a byte-level tokenizer, built locally in seconds.

Used by the unit tests, benchmarks and docs to exercise every code path without downloading or
de-quantising anything. Two families: Llama-style (RMSNorm, RoPE, GQA, gated MLP, no biases)
and GPT-2-style (LayerNorm, learned positions, biases). :func:`shaped_model` builds random
weights in real models' shapes (the embedded SmolLM2, Qwen2 1.5B and 7B) for device and speed
checks.
"""

from __future__ import annotations

import tempfile

import torch

from mechrag.errors import InputError

CHAT_TEMPLATE = (
    "{% for message in messages %}<|start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|end|>\n{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|start|>", "<|end|>", "<|pad|>"]


def byte_tokenizer(chat: bool = True, prefix_space: bool = False):
    """Byte-level tokenizer: 256 byte tokens, three specials, optional chat template.

    ``prefix_space`` marks the start of a text with a space, as SentencePiece-style tokenizers
    do, so a text tokenises differently on its own than as a continuation.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|start|>", eos_token="<|end|>", pad_token="<|pad|>"
    )
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    # TransformerLens re-opens tokenizers from their folder, so give it one.
    folder = tempfile.mkdtemp(prefix="mechrag-byte-tokenizer-")
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def tiny_hf_model(family: str = "llama", vocab_size: int = 259, seed: int = 0):
    """A randomly initialised two-layer causal LM of ``family``.

    "llama" (RMSNorm, RoPE, grouped-query attention), "mistral" (the same with a 32-token
    sliding window) or "gpt2" (LayerNorm, learned positions, biases).
    """
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
    )

    torch.manual_seed(seed)
    llama_shape = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        initializer_range=0.3,
    )
    if family == "llama":
        config = LlamaConfig(**llama_shape)
        model = LlamaForCausalLM(config)
    elif family == "mistral":
        config = MistralConfig(**llama_shape, sliding_window=32)
        model = MistralForCausalLM(config)
    elif family == "gpt2":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=2048,
            initializer_range=0.3,
        )
        model = GPT2LMHeadModel(config)
    else:
        raise InputError(f"unknown tiny model family {family!r}: use llama, mistral or gpt2")
    config.architectures = [type(model).__name__]
    return model.eval()


def tiny_model(
    family: str = "llama",
    chat: bool = True,
    seed: int = 0,
    prefix_space: bool = False,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
):
    """A tiny random model of ``family`` wrapped like ``load_model`` wraps real ones (its
    weights drawn on the CPU, so the same on every ``device``)."""
    from mechrag.models.loading import wrap_hf_model

    tokenizer = byte_tokenizer(chat=chat, prefix_space=prefix_space)
    hf_model = tiny_hf_model(family, len(tokenizer), seed).to(dtype=dtype, device=device)
    bridge = wrap_hf_model(hf_model, tokenizer, name=f"tiny-{family}", dtype=dtype)
    bridge.mechrag_name = f"tiny-{family}"
    return bridge


# Real models' shapes (their configs' sizes), for random-weight models built without a download:
# device and speed checks at the embedded models' and at 1.5B / 7B sizes.
SHAPES = {
    "smollm2-135m": dict(
        family="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True,
    ),
    "qwen2-1.5b": dict(
        family="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
    ),
    "qwen2-7b": dict(
        family="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        tie_word_embeddings=False,
    ),
}  # fmt: skip


def shaped_model(
    shape: str,
    *,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    seed: int = 0,
    n_layers: int | None = None,
    same_weights: bool = True,
):
    """A random-weight model of a real model's ``shape`` (:data:`SHAPES`) on ``device`` in
    ``dtype``, with the byte tokenizer, wrapped like ``load_model`` wraps real ones.
    ``same_weights``: drawn on the CPU, so one ``seed`` gives the same weights on every device
    (``False`` draws them on ``device``: much faster for a 7B shape, when only speed matters).
    ``n_layers`` keeps only the first layers (each layer's shape unchanged), for quick checks."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from mechrag.models.loading import wrap_hf_model

    if shape not in SHAPES:
        raise InputError(f"unknown shape {shape!r}: choose from {tuple(SHAPES)}")
    sizes = dict(SHAPES[shape])
    family = sizes.pop("family")
    if n_layers is not None:
        sizes["num_hidden_layers"] = n_layers
    config_class, model_class = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[family]
    config = config_class(**sizes, max_position_embeddings=8192)
    config.architectures = [model_class.__name__]
    torch.manual_seed(seed)
    with torch.device("cpu" if same_weights else device):
        hf_model = model_class(config)
    hf_model = hf_model.to(dtype=dtype, device=device).eval()
    bridge = wrap_hf_model(hf_model, byte_tokenizer(), name=f"random-{shape}", dtype=dtype)
    bridge.mechrag_name = f"random-{shape}"
    return bridge
