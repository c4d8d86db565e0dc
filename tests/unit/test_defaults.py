"""One home per default: the response length, the protocols and what they imply, checked options.

Each test fails when a default is restated somewhere with another value, or when a protocol is
resolved by its name instead of by its fields.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from helpers import REPO

from mechrag import api
from mechrag.case import Case
from mechrag.cli import build_parser, main
from mechrag.data import RAGExample
from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.mechanism.gating.comparison import compare_gating
from mechrag.mechanism.gating.decoding import decode_with_gates
from mechrag.mechanism.gating.rules import GatingRule
from mechrag.protocols import EXPLAIN_PROTOCOL, LOCALIZE_PROTOCOL, PROTOCOLS, UNFIXED
from mechrag.sources import as_sources
from mechrag.sweep.config import SweepConfig
from mechrag.sweep.methods import get_method

QUERY = "Where does Ana live?"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]
GENERATING_COMMANDS = ("attribute", "localize", "gate", "explain", "demo", "fit-attention")


def default_of(function, name: str):
    return inspect.signature(function).parameters[name].default


def test_every_entry_point_generates_the_same_response_length():
    from mechrag.retrieval.rag_e import explain

    readers = [Case.__init__, Case.from_example, compare_gating, decode_with_gates, explain]
    readers += [api.arc_jsd, api.attribute, api.localize]
    assert {default_of(reader, "max_new_tokens") for reader in readers} == {MAX_NEW_TOKENS}
    for command in GENERATING_COMMANDS:
        args = build_parser(command).parse_args([command, *required_arguments(command)])
        assert args.max_new_tokens == MAX_NEW_TOKENS, command


def required_arguments(command: str) -> list[str]:
    return {
        "attribute": ["--query", "q", "--context-file", "c"],
        "localize": ["--query", "q", "--context-file", "c"],
        "gate": ["--query", "q", "--context-file", "c"],
        "explain": ["--query", "q", "--dataset", "hotpotqa"],
        "demo": [],
        "fit-attention": ["--n", "2", "--out", "w.safetensors"],
    }[command]


def test_committed_sweeps_keep_their_hashes():
    """The hash of every committed sweep is the one it was run under (a sweep passes
    ``max_new_tokens`` through only when given, and ``dtype`` is hashed only when set)."""
    import ablate_components  # noqa: F401 - registers its sweep method

    committed = sorted((REPO / "experiments" / "runs").rglob("config.json"))
    assert committed
    for path in committed:
        stored = json.loads(path.read_text())
        assert SweepConfig.from_dict(stored["config"]).hash == stored["hash"], path


@pytest.mark.parametrize(
    ("function", "method"),
    [(api.arc_jsd, Case.arc_jsd), (api.attribute, Case.attribute), (api.localize, Case.localize)],
)
def test_one_line_functions_take_every_option_of_the_case_with_its_default(function, method):
    """A new option of ``Case(...)`` or of the case method, or another default, fails here."""
    ours = inspect.signature(function).parameters
    theirs = {**inspect.signature(Case.__init__).parameters}
    theirs.pop("example")  # the data set record: Case.from_example's business
    theirs.update(inspect.signature(method).parameters)
    for name, parameter in theirs.items():
        if name in ("self", "model", "query", "sources"):
            continue
        assert name in ours, f"{function.__name__} lacks {name}"
        assert ours[name].default == parameter.default, (function.__name__, name)


def test_a_protocol_leaves_unfixed_settings_to_one_table():
    for protocol in PROTOCOLS.values():
        for field in UNFIXED:
            value = getattr(protocol, field)
            assert protocol.setting(field) == (UNFIXED[field] if value is None else value)
    assert PROTOCOLS[LOCALIZE_PROTOCOL].consensus and not PROTOCOLS[EXPLAIN_PROTOCOL].consensus
    assert default_of(Case.localize, "protocol") == LOCALIZE_PROTOCOL
    assert default_of(compare_gating, "protocol") == LOCALIZE_PROTOCOL


def test_rules_conditions_and_k_come_from_the_protocol_unless_given():
    from mechrag.retrieval.conditions import PromptConditions
    from mechrag.retrieval.rag_e import documents_retrieved

    assert GatingRule.for_protocol("arc-jsd").name == "paper"
    assert GatingRule.for_protocol("mechrag").name == "damp"
    assert GatingRule.for_protocol("mechrag", "sigmoid", k=3) == GatingRule("sigmoid", k=3)
    assert PromptConditions.for_protocol("rag-e").preset == "paper"
    assert PromptConditions.for_protocol("mechrag", n_random=2).preset == "code"
    assert PromptConditions.for_protocol("mechrag", "paper").preset == "paper"
    assert documents_retrieved("rag-e") == 10
    assert documents_retrieved("mechrag") == UNFIXED["k"]
    assert documents_retrieved("rag-e", 3) == 3


@pytest.mark.parametrize("consensus", [True, False])
def test_a_localize_sweep_reports_the_consensus_when_its_protocol_says_so(
    tiny_llama, monkeypatch, consensus
):
    """The consensus follows the protocol's field, not its name."""
    flipped = dataclasses.replace(PROTOCOLS["mechrag"], consensus=consensus)
    monkeypatch.setitem(PROTOCOLS, "mechrag", flipped)
    example = RAGExample("e1", "toy", QUERY, as_sources(DOCS), ["p0s0"], "Oslo")
    options = {"protocol": "mechrag", "max_new_tokens": 4}
    record = get_method("localize").run(tiny_llama, example, options)
    assert ("consensus" in record) is consensus
    assert record["result"]["gain_definition"] == "residual_cosine"  # the protocol's gain


@pytest.mark.parametrize(
    "arguments",
    [
        ["localize", "--top-k", "0"],
        ["attribute", "--budget", "-1"],
        ["gate", "--max-new-tokens", "0"],
        ["attribute", "--top-k", "two"],
    ],
)
def test_numeric_options_are_checked_where_they_are_defined(
    arguments, tmp_path, capsys, monkeypatch
):
    """Refused by the parser with one line and exit 2: no model loads, nothing is written."""

    def never(*args, **kwargs):
        raise AssertionError("no model may load on bad input")

    monkeypatch.setattr("mechrag.models.loading.load_model", never)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Bo likes tea.")
    command, *options = arguments
    out = tmp_path / "out"
    line = [command, "--query", "Who?", "--context-file", str(context), "--out", str(out)]
    with pytest.raises(SystemExit) as done:
        main([*line, *options])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"mechrag {command}: error: argument {options[0]}")
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "minimum"),
    [("--n", "0", 1), ("--offset", "-1", 0), ("--sentences", "1", 2)],
)
def test_fit_attention_checks_its_numbers_in_the_parser(option, value, minimum, capsys):
    line = ["fit-attention", "--n", "2", "--out", "w.safetensors", option, value]
    with pytest.raises(SystemExit) as done:
        main(line)
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"argument {option}: must be at least {minimum}, got {value}")
