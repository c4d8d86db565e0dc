"""Model loading: clear errors, the embedded default offline, and its conversion cache."""

import os
import subprocess
import sys
import textwrap

import pytest

from mechrag import load_model
from mechrag.models import converted_gguf_dir, embedded_gguf_path


def test_unknown_model_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="unknown model 'no-such-org/no-such-model'"):
        load_model("no-such-org/no-such-model", device="cpu")
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        load_model(str(tmp_path / "missing.gguf"), device="cpu")


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
        model = mechrag.load_model(device="cpu")
        ids = model.tokenizer("The capital of France is", return_tensors="pt").input_ids
        print(model.tokenizer.decode(model(ids)[0, -1].argmax()))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MECHRAG_CACHE": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "Paris"
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


@pytest.mark.integration
def test_bridge_matches_the_plain_transformers_model(smollm):
    import torch
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(converted_gguf_dir(embedded_gguf_path()))
    ids = smollm.tokenizer("The Eiffel Tower is in", return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(smollm(ids), plain(ids).logits, atol=1e-3, rtol=0)
