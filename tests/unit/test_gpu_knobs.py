"""The knobs GPU users expect, checked on the CPU: --device, --dtype and --device-map reach the
loader, the engine's token budget follows free accelerator memory, an out-of-memory error is one
line that names the budget to lower, and a sweep's dtype is hashed only when set."""

from __future__ import annotations

import pytest
import torch

import mechrag
from mechrag.cli import build_parser, main
from mechrag.cli.common import engine_from, load_model_from
from mechrag.engine import (
    CPU_BATCH_TOKENS,
    MAX_BATCH_TOKENS,
    MEMORY_FRACTION,
    MIN_BATCH_TOKENS,
    Engine,
    batch_budget,
    tokens_that_fit,
)
from mechrag.errors import InputError
from mechrag.models import adapter
from mechrag.sweep.arguments import backend_from
from mechrag.sweep.backends import load_sweep_model
from mechrag.sweep.config import Backend, SweepConfig
from mechrag.sweep.methods import SWEEP_METHODS, case_for, register_method

GIB = 1 << 30


def test_bytes_per_token_counts_keys_values_and_one_layers_activations(tiny_llama):
    config = adapter.hf_model(tiny_llama).config
    head_dim = config.hidden_size // config.num_attention_heads
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim
    width = kv + 4 * config.hidden_size + 2 * config.intermediate_size
    assert adapter.bytes_per_token(tiny_llama) == width * 4  # float32


def test_the_token_budget_fills_half_the_free_memory_within_bounds():
    assert tokens_that_fit(8 * GIB, 100_000) == int(8 * GIB * MEMORY_FRACTION // 100_000)
    assert tokens_that_fit(1 << 20, 100_000) == MIN_BATCH_TOKENS
    assert tokens_that_fit(1 << 50, 10) == MAX_BATCH_TOKENS


def test_the_engine_reads_free_memory_unless_given_a_budget(tiny_llama, monkeypatch):
    assert Engine(tiny_llama).max_batch_tokens == CPU_BATCH_TOKENS  # no accelerator to read
    monkeypatch.setattr(adapter, "free_memory", lambda model: 6 * GIB)
    expected = tokens_that_fit(6 * GIB, adapter.bytes_per_token(tiny_llama))
    assert Engine(tiny_llama).max_batch_tokens == expected
    assert Engine(tiny_llama, max_batch_tokens=300).max_batch_tokens == 300


def test_device_dtype_and_budget_flags_reach_the_model_and_the_engine():
    line = ["attribute", "--query", "q", "--context-file", "c", "--model", "toy:llama"]
    args = build_parser("attribute").parse_args(
        [*line, "--device", "cpu", "--dtype", "bfloat16", "--max-batch-tokens", "512"]
    )
    model = load_model_from(args)
    assert next(adapter.hf_model(model).parameters()).dtype == torch.bfloat16
    assert engine_from(args, model).max_batch_tokens == 512


def test_unset_flags_leave_the_loaders_defaults(monkeypatch):
    calls = []
    monkeypatch.setattr(
        "mechrag.models.loading.load_model", lambda name=None, **options: calls.append(options)
    )
    args = build_parser("localize").parse_args(["localize", "--query", "q", "--context-file", "c"])
    load_model_from(args)
    args = build_parser("localize").parse_args(
        ["localize", "--query", "q", "--context-file", "c", "--device-map", "auto", "--dtype",
         "float16"]
    )  # fmt: skip
    load_model_from(args)
    assert calls == [{}, {"dtype": torch.float16, "device_map": "auto"}]


def test_a_command_runs_on_the_flags(tmp_path, capsys):
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Bo likes tea.\n\nOslo is cold.")
    out = tmp_path / "out"
    line = ["attribute", "--query", "Where does Ana live?", "--context-file", str(context)]
    flags = ["--model", "toy:llama", "--device", "cpu", "--dtype", "float32"]
    flags += ["--max-batch-tokens", "64", "--max-new-tokens", "3", "--out", str(out)]
    assert main([*line, *flags]) == 0
    assert (out / "attribution_arc_jsd.json").is_file()


def test_out_of_memory_is_one_line_naming_the_budget_and_writes_nothing(
    tmp_path, capsys, monkeypatch
):
    def exhausted(args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore")

    monkeypatch.setattr("mechrag.cli.attribute.run", exhausted)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Bo likes tea.")
    out = tmp_path / "out"
    line = ["attribute", "--query", "Who?", "--context-file", str(context), "--out", str(out)]
    assert main([*line, "--max-batch-tokens", "4096"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("mechrag attribute: error: out of memory")
    assert "--max-batch-tokens (now 4096)" in error and not out.exists()


def test_other_runtime_errors_keep_their_traceback(monkeypatch, tmp_path):
    def broken(args):
        raise RuntimeError("shapes do not match")

    monkeypatch.setattr("mechrag.cli.attribute.run", broken)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Bo likes tea.")
    with pytest.raises(RuntimeError, match="shapes"):
        main(["attribute", "--query", "Who?", "--context-file", str(context)])


def test_a_sweeps_dtype_is_hashed_only_when_set():
    plain = SweepConfig(method="arc_jsd")
    assert "dtype" not in plain.to_dict()  # config.json as before
    assert SweepConfig.from_dict(plain.to_dict()) == plain
    assert SweepConfig(method="arc_jsd", dtype="bfloat16").hash != plain.hash
    with pytest.raises(ValueError, match="unknown dtype"):
        SweepConfig(method="arc_jsd", dtype="int8")
    moved = SweepConfig.from_dict({**plain.to_dict(), "n": 5})
    assert moved.hash == plain.hash  # how many examples is not what each record holds


def test_a_sweep_model_loads_in_its_dtype():
    model = load_sweep_model("toy:llama", dtype="bfloat16")
    assert next(adapter.hf_model(model).parameters()).dtype == torch.bfloat16


@pytest.mark.integration
def test_device_map_reaches_from_pretrained_and_scores_the_same(smollm, monkeypatch):
    pytest.importorskip("accelerate", reason="device_map needs the gpu extra (accelerate)")
    from transformers import AutoModelForCausalLM

    from mechrag import Case, load_model

    seen = []
    original = AutoModelForCausalLM.from_pretrained

    def recording(*args, **kwargs):
        seen.append(kwargs.get("device_map"))
        return original(*args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", recording)
    mapped = load_model(device="cpu", device_map={"": "cpu"})
    assert seen == [{"": "cpu"}]
    query, sources = "Where does Ana live?", ["Ana lives in Oslo.", "Bo likes tea."]
    expected = Case(smollm, query, sources, "Oslo.").arc_jsd().scores
    found = Case(mapped, query, sources, "Oslo.").arc_jsd().scores
    torch.testing.assert_close(torch.as_tensor(found), torch.as_tensor(expected))


def test_a_batch_budget_scope_sets_the_engines_made_in_it_and_ends_with_it(
    tiny_llama, monkeypatch
):
    with batch_budget(777):
        assert Engine(tiny_llama).max_batch_tokens == 777
        assert Engine(tiny_llama, max_batch_tokens=300).max_batch_tokens == 300  # given wins
    assert Engine(tiny_llama).max_batch_tokens == CPU_BATCH_TOKENS
    token_bytes = adapter.bytes_per_token(tiny_llama)
    free = 16 * MIN_BATCH_TOKENS * token_bytes / MEMORY_FRACTION  # a budget of 16x the least
    monkeypatch.setattr(adapter, "free_memory", lambda model: free)
    with pytest.raises(RuntimeError), batch_budget(memory_share=0.25):
        assert Engine(tiny_llama).max_batch_tokens == 4 * MIN_BATCH_TOKENS
        raise RuntimeError("the scope ends on an exception too")
    assert Engine(tiny_llama).max_batch_tokens == 16 * MIN_BATCH_TOKENS
    for bad in ({"max_batch_tokens": 0}, {"memory_share": 0}, {"memory_share": 1.5}):
        with pytest.raises(InputError), batch_budget(**bad):
            pass


def test_a_sweeps_budget_reaches_every_cases_engine_and_a_gpu_share_scales_it(
    tmp_path, monkeypatch
):
    def engine_budget(model, example, options):
        return {"budget": case_for(model, example, {"max_new_tokens": 2}).engine.max_batch_tokens}

    register_method("engine_budget_probe", engine_budget, replace=True)
    try:
        frame = mechrag.sweep("engine_budget_probe", "squad", n=2, out=tmp_path / "given",
                              model="toy:llama", max_batch_tokens=640, progress=False)  # fmt: skip
        assert list(frame["budget"]) == [640, 640]
        model = load_sweep_model("toy:llama")
        free = 16 * MIN_BATCH_TOKENS * adapter.bytes_per_token(model) / MEMORY_FRACTION
        monkeypatch.setattr(adapter, "free_memory", lambda model: free)
        frame = mechrag.sweep("engine_budget_probe", "squad", n=2, out=tmp_path / "shared",
                              model="toy:llama", progress=False)  # fmt: skip
        assert list(frame["budget"]) == [16 * MIN_BATCH_TOKENS] * 2  # one whole GPU
        with Backend("ray", gpus_per_worker=0.5).batch_budget():  # what each Ray worker runs in
            assert Engine(model).max_batch_tokens == 8 * MIN_BATCH_TOKENS
        for whole in (Backend("ray", gpus_per_worker=2), Backend(gpus_per_worker=0.5)):
            with whole.batch_budget():  # several GPUs, or the driver's own process
                assert Engine(model).max_batch_tokens == 16 * MIN_BATCH_TOKENS
    finally:
        SWEEP_METHODS.pop("engine_budget_probe")
    args = build_parser("sweep").parse_args(
        ["sweep", "--method", "arc_jsd", "--out", "o", "--max-batch-tokens", "128"]
    )
    assert backend_from(args).max_batch_tokens == 128
    with pytest.raises(InputError):
        Backend(max_batch_tokens=0)


def test_a_sweep_records_out_of_memory_and_says_which_budget_to_lower(tmp_path, capsys):
    raised = []

    def exhausted(model, example, options):  # the allocator's error, then a kernel's
        raised.append(example.id)
        if len(raised) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        raise RuntimeError("CUDA error: out of memory")

    register_method("out_of_memory_probe", exhausted, replace=True)
    try:
        line = ["sweep", "--method", "out_of_memory_probe", "--dataset", "squad", "--n", "2",
                "--model", "toy:llama", "--out", str(tmp_path / "run"),
                "--no-progress"]  # fmt: skip
        assert main([*line, "--max-batch-tokens", "512"]) == 0
    finally:
        SWEEP_METHODS.pop("out_of_memory_probe")
    printed = capsys.readouterr().out
    assert "0 ok, 2 errors" in printed
    assert "2 examples ran out of GPU memory: lower --max-batch-tokens (now 512)" in printed
