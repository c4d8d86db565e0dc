"""Every method, localize, gating, echo, the views and a command on CUDA (marker ``cuda``).

A random-weight model in the embedded SmolLM2's shape (:func:`mechrag.models.toy.shaped_model`,
the first 4 of its 30 layers: no download) runs on the GPU in float32 and in bfloat16, with the
same weights as a CPU copy. GPU float32 must equal CPU float32 (relative 1e-4); bfloat16 must
keep the ranking (Spearman). Skipped without CUDA; ``MECHRAG_TEST_DEVICE=cpu`` runs the same
tests against a second CPU copy, to check the tests themselves on a machine without a GPU.

    python -m pytest -m cuda tests/gpu/test_cuda.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from mechrag import METHODS, Case
from mechrag.attribution.methods import resolve_method
from mechrag.metrics import spearman
from mechrag.models import adapter

DEVICE = os.environ.get("MECHRAG_TEST_DEVICE", "cuda")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason="needs CUDA"
    ),
]
QUERY = "Where does Ana live?"
SOURCES = [
    "Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold in winter.", "Cy is tall.",
    "Ana works at the port.", "The port is in Oslo.",
]  # fmt: skip
RESPONSE = "Ana lives in Oslo."
# Configured where a method needs more than its defaults; small budgets keep the check short.
SETTINGS = {
    "attention": {"weights": "uniform"},
    "hierarchical": {"documents": 1},
}
BUDGET = 12
FIXED_SUBSETS = ("exact", "loo")  # they score every subset they need: no budget to lower
RTOL = 1e-4


@pytest.fixture(scope="module")
def models():
    """Three copies of one random model: CPU float32, GPU float32, GPU bfloat16."""
    from mechrag.models.toy import shaped_model

    return {
        "cpu": shaped_model("smollm2-135m", n_layers=4),
        "gpu": shaped_model("smollm2-135m", n_layers=4, device=DEVICE),
        "bf16": shaped_model("smollm2-135m", n_layers=4, device=DEVICE, dtype=torch.bfloat16),
    }


def configured(name: str, model):
    method = resolve_method(name)
    settings = dict(SETTINGS.get(name, {}))
    if name == "proxy":
        settings["proxy"] = model  # the plumbing, on the same device
    fields = type(method).parameters()
    sampling = {"seed": 0} if name in FIXED_SUBSETS else {"budget": BUDGET, "seed": 0}
    settings |= {key: value for key, value in sampling.items() if key in fields}
    return method.with_settings(**settings)


def case_on(model) -> Case:
    return Case(model, QUERY, SOURCES, RESPONSE)


def assert_close(found, expected) -> None:
    found, expected = np.asarray(found, dtype=float), np.asarray(expected, dtype=float)
    scale = np.abs(expected).max() if expected.size else 0.0
    np.testing.assert_allclose(found, expected, rtol=RTOL, atol=RTOL * scale + 1e-9)


def keeps_ranking(found, expected) -> None:
    """bfloat16 keeps the float32 ranking: Spearman at least .6 where the scores vary."""
    if np.ptp(expected) > 1e-6 and np.ptp(found) > 0:
        assert spearman(found, expected) >= 0.6


def test_the_models_are_where_the_tests_say(models):
    assert adapter.device(models["gpu"]).type == torch.device(DEVICE).type
    assert next(adapter.hf_model(models["bf16"]).parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("name", list(METHODS), ids=list(METHODS))
def test_method_on_the_gpu_equals_the_cpu(models, name):
    expected = case_on(models["cpu"]).attribute(configured(name, models["cpu"])).scores
    found = case_on(models["gpu"]).attribute(configured(name, models["gpu"])).scores
    assert_close(found, expected)
    half = case_on(models["bf16"]).attribute(configured(name, models["bf16"])).scores
    assert np.isfinite(half).all()
    keeps_ranking(half, expected)


@pytest.mark.parametrize("protocol", ["arc-jsd", "mechrag"])
def test_localize_on_the_gpu_equals_the_cpu(models, protocol):
    expected = case_on(models["cpu"]).localize("p0s0", protocol=protocol)
    found = case_on(models["gpu"]).localize("p0s0", protocol=protocol)
    assert_close(found.scores, expected.scores)
    assert_close(found.gains, expected.gains)
    half = case_on(models["bf16"]).localize("p0s0", protocol=protocol)
    keeps_ranking(half.scores, expected.scores)


def test_echo_and_ablation_on_the_gpu_equal_the_cpu(models):
    expected, found = case_on(models["cpu"]), case_on(models["gpu"])
    assert_close(found.echo().context, expected.echo().context)
    heads = [(0, 1), (2, 3)]
    for mode in ("zero", "uniform"):
        effect = found.ablation_effect("p0s0", heads=heads, mode=mode)
        reference = expected.ablation_effect("p0s0", heads=heads, mode=mode)
        assert_close(list(effect.values()), list(reference.values()))


@pytest.mark.parametrize("rule", ["paper", "damp", "sigmoid", "amplify"])
def test_gating_on_the_gpu_equals_the_cpu(models, rule):
    from mechrag.mechanism.gating.comparison import compare_gating
    from mechrag.mechanism.gating.rules import GatingRule

    compared = {
        where: compare_gating(case_on(models[where]), GatingRule(rule), max_new_tokens=6)
        for where in ("cpu", "gpu")
    }
    assert compared["gpu"].gates.labels() == compared["cpu"].gates.labels()
    assert compared["gpu"].gated_response == compared["cpu"].gated_response
    assert_close(compared["gpu"].gated_echo.context, compared["cpu"].gated_echo.context)


def test_explain_on_the_gpu_equals_the_cpu(models, tmp_path):
    """RAG-E on both sides: the retriever's encoder and integrated gradients on the GPU, beside
    the generator, equal the same pipeline on the CPU."""
    import copy

    from helpers import _tiny_encoder

    from mechrag.retrieval.corpus import Corpus
    from mechrag.retrieval.encoder import DenseEncoder
    from mechrag.retrieval.rag_e import explain
    from mechrag.retrieval.retriever import Retriever

    cpu_encoder = _tiny_encoder(tmp_path)
    gpu_encoder = DenseEncoder(
        copy.deepcopy(cpu_encoder.model).to(DEVICE), cpu_encoder.tokenizer,
        pooling="mean", normalize=True, max_length=16,
    )  # fmt: skip
    corpus = Corpus.from_texts(["the cat sat on the mat", "the dog ran far", "red cats sat",
                                "the mat is red", "dogs ran on the mat"])  # fmt: skip
    found = {
        side: explain("where did the cat sit", Retriever.build(corpus, encoder), models[side],
                      k=3, n_steps=8, response="the cat sat")  # fmt: skip
        for side, encoder in (("cpu", cpu_encoder), ("gpu", gpu_encoder))
    }
    assert gpu_encoder.device.type == torch.device(DEVICE).type
    cpu, gpu = found["cpu"], found["gpu"]
    assert [d.id for d in gpu.documents] == [d.id for d in cpu.documents]
    assert_close(gpu.similarities, cpu.similarities)
    assert_close(gpu.generator.scores, cpu.generator.scores)
    assert_close(gpu.query_saliency.scores, cpu.query_saliency.scores)
    for on_gpu, on_cpu in zip(gpu.document_saliency, cpu.document_saliency, strict=True):
        assert_close(on_gpu.scores, on_cpu.scores)


def test_views_render_results_made_on_the_gpu(models):
    case = case_on(models["gpu"])
    for result in (case.arc_jsd(), case.localize("p0s0"), case.echo()):
        assert "<" in result.to_html()


def test_a_command_runs_on_the_gpu(tmp_path, capsys):
    from mechrag.cli import main

    context = tmp_path / "context.txt"
    context.write_text(" ".join(SOURCES[:3]) + "\n\n" + " ".join(SOURCES[3:]))
    out = tmp_path / "out"
    line = ["attribute", "--query", QUERY, "--context-file", str(context), "--out", str(out)]
    flags = ["--model", "toy:llama", "--device", DEVICE, "--max-new-tokens", "4", "--html"]
    assert main([*line, "--method", "attention", "--weights", "uniform", *flags]) == 0
    assert (out / "report.html").is_file()
