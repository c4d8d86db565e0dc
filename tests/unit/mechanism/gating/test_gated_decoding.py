"""Dynamic gating: plain greedy decoding when no gate fires; position-exact gating when all do."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import torch

from mechrag.case import Case
from mechrag.divergences import jsd
from mechrag.mechanism.echo import Echo
from mechrag.mechanism.gating.comparison import GatingComparison, compare_gating
from mechrag.mechanism.gating.decoding import GatedDecoding, decode_with_gates
from mechrag.mechanism.gating.gates import Gates
from mechrag.mechanism.gating.rules import GatingRule
from mechrag.models.adapter import greedy_generate
from mechrag.prompts import PromptBuilder
from mechrag.sources import as_sources

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night."]
GATES = Gates(heads={(0, 1): 0.0, (1, 2): 3.0}, mlps={1: 0.2})

matplotlib.use("Agg")


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


def test_gated_decoding_round_trips_through_json():
    decoded = GatedDecoding(response_ids=[5, 7], echo=[0.3, 0.01], fired=[False, True])
    data = json.loads(decoded.to_json())
    assert data == {"response_ids": [5, 7], "echo": [0.3, 0.01], "fired": [False, True]}
    assert GatedDecoding.from_dict(data) == decoded


def _echo(context) -> Echo:
    tokens = [" Paris", "."][: len(context)]
    return Echo(tokens, np.array(context), np.array(context) / 2, "p1", np.ones(len(tokens), bool))


def test_gating_comparison_saves_gate_json_and_echo_strips(tmp_path):
    import matplotlib.pyplot as plt

    comparison = GatingComparison(
        query="Where?",
        rule=GatingRule("damp", k=2, factor=0.5),
        mode="dynamic",
        gates=GATES,
        fired_steps=1,
        response="Paris.",
        gated_response="Rome",
        echo=_echo([0.05, 0.4]),
        gated_echo=_echo([0.3]),
    )
    figures = plt.get_fignums()
    written = comparison.save(tmp_path)
    assert plt.get_fignums() == figures  # the strips it drew are closed
    assert [p.name for p in written] == [
        "gate.json",
        "echo_response.png",
        "echo_response.svg",
        "echo_gated_response.png",
        "echo_gated_response.svg",
    ]
    data = json.loads((tmp_path / "gate.json").read_text())
    assert list(data) == [
        "query",
        "rule",
        "mode",
        "gates",
        "fired_steps",
        "response",
        "gated_response",
        "echo",
        "gated_echo",
    ]
    assert data["rule"] == GatingRule("damp", k=2, factor=0.5).to_dict()
    assert data["gates"] == GATES.to_dict()
    assert data["echo"] == json.loads(comparison.echo.to_json())
    restored = GatingComparison.from_dict(data)
    assert (restored.rule, restored.gates) == (comparison.rule, GATES)
    assert (restored.query, restored.mode, restored.fired_steps) == ("Where?", "dynamic", 1)
    assert (restored.response, restored.gated_response) == ("Paris.", "Rome")
    np.testing.assert_array_equal(restored.gated_echo.context, [0.3])
    assert restored.to_dict() == data


def test_compare_gating_dynamic_without_firing_and_static(tiny_llama):
    case = Case(tiny_llama, QUERY, SOURCES, max_new_tokens=4)
    never = compare_gating(case, GatingRule("damp", k=4), threshold=0.0, max_new_tokens=4)
    assert never.fired_steps == 0 and never.gated_response == never.response == case.response_text
    assert never.echo.top_source == never.gated_echo.top_source
    # Equal up to float rounding: the generating case's full-context pass continues its
    # generation's cache, the gated response's case runs the whole sequence.
    np.testing.assert_allclose(never.gated_echo.context, never.echo.context, rtol=0, atol=1e-6)
    rule = GatingRule("amplify", k=6, factor=4.0)
    static = compare_gating(case, rule, mode="static", max_new_tokens=4)
    assert static.fired_steps is None and static.mode == "static"
    assert len(static.gates) == 6 and set(static.gates.mlps.values()) <= {4.0}
    with static.gates.apply(tiny_llama):
        expected = greedy_generate(tiny_llama, case.builder.ids(), max_new_tokens=4)
    assert static.gated_echo.response_tokens == [tiny_llama.tokenizer.decode([t]) for t in expected]
