"""Proxy-model attribution: a smaller (or just another) model attributes the target's response.

AttriBoT's proxy trick (Liu, Kandpal and Raffel, ICLR 2025). The proxy gets the same query and
sources, rendered with its own tokenizer and prompt template, and the target model's response
*text*, re-tokenised with the proxy's tokenizer (so the response is the same string, whatever the
two vocabularies). Any registered method then runs on that proxy case, and its source scores are
the result. The cost is the proxy's: ``forward_passes`` and ``metadata['tokens_processed']`` count
the proxy's passes and tokens (the target model runs none); ``metadata['proxy']`` names the proxy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from mechrag.attribution.base import SourceMethod
from mechrag.errors import InputError

if TYPE_CHECKING:
    import torch


@functools.lru_cache(maxsize=2)
def _load_proxy(name: str, device: str, dtype: torch.dtype):
    from mechrag.models.loading import load_model

    return load_model(name, device=device, dtype=dtype)


@dataclass(frozen=True)
class ProxyAttribution(SourceMethod):
    """``proxy``: a model name for :func:`mechrag.load_model` (loaded once, on the target
    model's device, before the clock starts) or a loaded model; ``method``: the registered
    method the proxy runs (default exact ARC-JSD)."""

    name: ClassVar[str] = "proxy"
    description: ClassVar[str] = "another model's attribution of the same response text"
    refusal: ClassVar[str] = "proxy runs its method's defaults on the proxy model"
    ignored: ClassVar[tuple[str, ...]] = ("seed", "reuse_scored")
    proxy: object = None
    method: str = "arc_jsd"

    def check_inputs(self) -> None:
        if self.proxy is None:
            raise InputError(
                "proxy attribution needs a proxy model: ProxyAttribution(proxy=...), "
                "--proxy-model on the command line, --option proxy=... in a sweep"
            )

    def proxy_model(self, case):
        """The proxy model (a name is loaded and cached on the case model's device, in its
        dtype: a float32 target on a GPU gets a float32 proxy, not that device's default)."""
        self.check_inputs()
        if isinstance(self.proxy, str):
            from mechrag.models import adapter

            model = case.model
            return _load_proxy(self.proxy, str(adapter.device(model)), adapter.dtype(model))
        return self.proxy

    def __call__(self, case):
        model = self.proxy_model(case)
        meter = case.meter()
        proxied = case.for_model(model)
        result = proxied.attribute(self.method)
        attribution = case.attribution(
            f"proxy_{result.method}",
            result.scores,
            meter,
            model_calls=result.model_calls,
            metadata={
                "proxy": getattr(proxied.model, "mechrag_name", None),
                "proxy_method": result.method,
                "proxy_response_tokens": len(proxied.response_ids),
            },
        )
        attribution.forward_passes = result.forward_passes
        attribution.metadata["tokens_processed"] = result.metadata["tokens_processed"]
        return attribution
