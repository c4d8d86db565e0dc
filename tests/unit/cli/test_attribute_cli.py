"""``mechrag attribute`` with the fast methods: their options, and missing weights or proxy
refused before any model is loaded."""

from __future__ import annotations

from helpers import QUERY, RESPONSE


def test_attribute_command_takes_the_fast_methods(tmp_path, capsys, monkeypatch, tiny_llama):
    from mechrag.cli import main

    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Oslo is cold.\n\nBo likes tea. Cy is tall.\n")
    base = [
        "attribute",
        "--query",
        QUERY,
        "--context-file",
        str(context),
        "--response",
        RESPONSE,
    ]
    for extra in (
        ["--method", "hierarchical", "--documents", "1"],
        ["--method", "hierarchical", "--documents", "1", "--within", "0.5"],
        ["--method", "attention", "--weights", "uniform"],
    ):
        assert main([*base, *extra]) == 0, capsys.readouterr().err
    assert main([*base, "--method", "arc_jsd", "--weights", "uniform"]) == 2
    assert "takes" in capsys.readouterr().err
    assert main([*base, "--method", "hierarchical", "--within", "2"]) == 2
    assert "within must be in (0, 1]" in capsys.readouterr().err


def test_attribute_command_refuses_a_missing_weights_file_or_proxy_before_loading(
    tmp_path, capsys, monkeypatch
):
    from mechrag.cli import main

    def no_model(name=None):
        raise AssertionError("the model was loaded before the inputs were checked")

    monkeypatch.setattr("mechrag.models.loading.load_model", no_model)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Oslo is cold.\n")
    base = ["attribute", "--query", QUERY, "--context-file", str(context), "--response", RESPONSE]
    missing = tmp_path / "nope.safetensors"
    assert main([*base, "--method", "attention", "--weights", str(missing)]) == 2
    assert "attention weights file not found" in capsys.readouterr().err
    malformed = tmp_path / "bad.safetensors"
    malformed.write_bytes(b"not a safetensors file")
    assert main([*base, "--method", "attention", "--weights", str(malformed)]) == 2
    assert "is not a safetensors file" in capsys.readouterr().err
    assert main([*base, "--method", "proxy"]) == 2
    assert "needs a proxy model" in capsys.readouterr().err
    assert not list(tmp_path.glob("attribution_*"))
