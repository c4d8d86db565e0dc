"""Proxy attribution: ARC-JSD on another model, with the response text re-tokenised for it."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import QUERY, RESPONSE, fresh, sources

from mechrag import Case
from mechrag.attribution.attention import model_key
from mechrag.attribution.proxy import ProxyAttribution
from mechrag.errors import InputError


def test_proxy_retokenises_the_response_text(tiny_llama):
    from mechrag.models.toy import tiny_model

    proxy = tiny_model("gpt2")  # a prefix-space byte tokenizer would split differently
    case = fresh(tiny_llama)
    method = ProxyAttribution(proxy=proxy)
    proxied = case.for_model(method.proxy_model(case))
    assert proxy.tokenizer.decode(proxied.response_ids) == case.response_text
    result = method(case)
    direct = Case(proxy, QUERY, sources(), RESPONSE).arc_jsd()
    np.testing.assert_allclose(result.scores, direct.scores)
    assert result.method == "proxy_arc_jsd" and result.metadata["proxy"] == model_key(proxy)
    # The cost is the proxy's passes; the target model ran none.
    assert case.engine.forward_passes == 0
    assert result.forward_passes == direct.forward_passes and result.model_calls == 13
    assert result.metadata["tokens_processed"] == direct.metadata["tokens_processed"] > 0
    with pytest.raises(InputError, match="proxy model"):
        fresh(tiny_llama).attribute("proxy")


def test_a_named_proxy_loads_on_the_targets_device_in_its_dtype(tiny_llama, monkeypatch):
    """A float32 target gets a float32 proxy wherever it runs (on a GPU, load_model's own default
    would be bfloat16), on its device; loaded once per name, device and dtype."""
    import torch

    from mechrag.attribution import proxy as proxy_module

    loads = []

    def load_model(name, device=None, dtype=None):
        loads.append((name, device, dtype))
        return tiny_llama

    monkeypatch.setattr("mechrag.models.loading.load_model", load_model)
    proxy_module._load_proxy.cache_clear()
    case = fresh(tiny_llama)
    method = ProxyAttribution(proxy="other-model")
    assert method.proxy_model(case) is method.proxy_model(case) is tiny_llama
    proxy_module._load_proxy.cache_clear()
    assert loads == [("other-model", "cpu", torch.float32)]
