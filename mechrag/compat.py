"""A shim for one known incompatibility between transformer-lens 4.3 and recent transformers.

transformers (5.2x) renamed the attention modules' ``past_key_values`` argument to ``cache``.
TransformerLens 4.3's attention bridges still look for ``past_key_values``/``layer_past``, so the
key-value cache is never filled and every cached decoding step sees only itself (wrong tokens
from ``generate`` and from any prefix reuse). ``patch_kv_cache_argument`` forwards ``cache``
under the old name (it is idempotent, and passing an argument the bridge already reads changes
nothing).
"""

from __future__ import annotations

import functools
import warnings


def patch_kv_cache_argument() -> None:
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

    original = getattr(AttentionBridge, "_update_kv_cache", None)
    if original is None or getattr(original, "_mechrag_cache_shim", False):
        return  # a TransformerLens without this hook point manages its cache itself

    @functools.wraps(original)
    def update_kv_cache(self, k, v, **kwargs):
        if kwargs.get("past_key_values") is None and kwargs.get("cache") is not None:
            kwargs["past_key_values"] = kwargs["cache"]
        return original(self, k, v, **kwargs)

    update_kv_cache._mechrag_cache_shim = True
    AttentionBridge._update_kv_cache = update_kv_cache
    # The bridge itself passes the old name to the Hugging Face model; users cannot act on it.
    warnings.filterwarnings(
        "ignore", message="`past_key_values` is deprecated", category=FutureWarning
    )
