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
