"""Models: loading (the embedded GGUF models, Hugging Face ids, folders; device and dtype), the
adapter (the only code that knows TransformerBridge's and Hugging Face's internals) and tiny
random models for tests (:mod:`mechrag.models.toy`)."""

from mechrag._lazy import lazy_exports

# Module -> the public names it defines, imported on first use (torch loads only then).
_MODULES = {
    "mechrag.models.loading": (
        "DEFAULT_EMBEDDED", "DEFAULT_MODEL_NAME", "EMBEDDED_MODELS", "EmbeddedModel", "cache_dir",
        "converted_gguf_dir", "default_device", "embedded_gguf_path", "embedded_model_dir",
        "load_model", "wrap_hf_model",
    ),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)
