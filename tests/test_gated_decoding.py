"""Dynamic gating: plain greedy decoding when no gate fires; position-exact gating when all do."""

from __future__ import annotations

import torch

from mechrag.adapter import greedy_generate
from mechrag.divergences import jsd
from mechrag.mechanism.gated_decoding import decode_with_gates
from mechrag.mechanism.gates import Gates
from mechrag.prompts import PromptBuilder
from mechrag.sources import as_sources

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night."]
GATES = Gates(heads={(0, 1): 0.0, (1, 2): 3.0}, mlps={1: 0.2})


def _builder(model):
    return PromptBuilder(model.tokenizer, QUERY, as_sources(SOURCES))


def _next_logprobs(model, ids, hooks=()):
    with torch.no_grad(), model.hooks(fwd_hooks=list(hooks)):
        return model(torch.tensor([ids]))[0, -1].float().log_softmax(-1)


def test_no_gate_fired_equals_plain_greedy(tiny_llama):
    builder = _builder(tiny_llama)
    empty = torch.zeros(builder.n_sources, dtype=torch.bool)
    plain = greedy_generate(tiny_llama, builder.ids(), max_new_tokens=12)
    decoded = decode_with_gates(
        tiny_llama, builder.ids(), builder.ids(empty), GATES, threshold=0.0, max_new_tokens=12
    )
    assert decoded.response_ids == plain
    assert decoded.n_fired == 0
    # Each step's echo equals an uncached two-pass JSD.
    for step in (0, len(plain) // 2, len(plain) - 1):
        full = _next_logprobs(tiny_llama, builder.ids() + plain[:step])
        alone = _next_logprobs(tiny_llama, builder.ids(empty) + plain[:step])
        assert abs(decoded.echo[step] - float(jsd(full, alone))) < 1e-5


def _gated_from(position: int, gates: Gates):
    """Hooks scaling the gated components only at sequence positions >= ``position``."""

    def head_hook(layer):
        def hook(z, hook):
            z = z.clone()
            for (gated_layer, head), factor in gates.heads.items():
                if gated_layer == layer:
                    z[:, position:, head] *= factor
            return z

        return hook

    def mlp_hook(factor):
        def hook(out, hook):
            out = out.clone()
            out[:, position:] *= factor
            return out

        return hook

    hooks = [(f"blocks.{layer}.attn.hook_z", head_hook(layer)) for layer in (0, 1)]
    return hooks + [(f"blocks.{m}.hook_mlp_out", mlp_hook(f)) for m, f in gates.mlps.items()]


def test_gate_on_every_step_matches_position_selective_reference(tiny_llama):
    builder = _builder(tiny_llama)
    empty = torch.zeros(builder.n_sources, dtype=torch.bool)
    prompt = builder.ids()
    decoded = decode_with_gates(
        tiny_llama, prompt, builder.ids(empty), GATES, threshold=float("inf"), max_new_tokens=8
    )
    assert all(decoded.fired) and decoded.n_fired == len(decoded.response_ids)
    # The prompt's last token and every response token were processed with the gates on.
    hooks = _gated_from(len(prompt) - 1, GATES)
    reference = []
    for _ in range(len(decoded.response_ids)):
        reference.append(int(_next_logprobs(tiny_llama, prompt + reference, hooks).argmax()))
    assert decoded.response_ids == reference
    plain = greedy_generate(tiny_llama, builder.ids(), max_new_tokens=8)
    assert decoded.response_ids != plain  # the gates changed the response
