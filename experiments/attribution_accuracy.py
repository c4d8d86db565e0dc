"""Gold-sentence accuracy and cost of every attribution method, on the same cases.

For each HotpotQA, MuSiQue and SQuAD example (sentence sources; HotpotQA and MuSiQue keep the
gold paragraphs plus ``--distractors`` others) the embedded model's greedy response is generated
once; every method then explains that same response with the same model and prompt, each from
a fresh case (no shared cache, so its seconds are its own cost). Methods:

* ARC-JSD exact, screened (``screen=m``), and with KL or total variation in place of the JSD;
* leave-one-out log-likelihood; Kernel SHAP and mechrag's ContextCite at 32 and 64 subsets;
* the ``context-cite`` package at 32, 64 and 256 ablations (when installed);
* Captum's ``LLMAttribution`` with ``FeatureAblation`` (n + 1 calls) and
  ``ShapleyValueSampling`` at 32 and 64 calls (``n_samples = budget // (n + 1)``, at least 1),
  on the Hugging Face model inside the bridge, removing a source exactly as mechrag does (the
  template renders the kept sources), sequence-level forward, ``use_cached_outputs=False``;
* question-word overlap (content words shared with the query).

Top-1/top-3 = a gold sentence is ranked first / among the first three. Resumable: one JSON line
per (example, method) in ``OUT/records.jsonl``; finished pairs are skipped. The markdown table
is printed and written to ``OUT/table.md``.

    python experiments/attribution_accuracy.py --n 3 --threads 1 --out outputs/accuracy
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mechrag import Case, adapter, load_model
from mechrag.attribution.overlap import QueryOverlap
from mechrag.data import load_hotpotqa, load_musique, load_squad
from mechrag.metrics.accuracy import top_k_hit
from mechrag.results.files import append_jsonl, read_jsonl, write_text_atomic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from contextcite_speed import package_available, package_scores  # noqa: E402


def captum_scores(case: Case, method: str, budget: int | None, seed: int) -> tuple[np.ndarray, int]:
    """Captum ``LLMAttribution`` sequence scores and the model calls they took."""
    from captum.attr import FeatureAblation, LLMAttribution, ShapleyValueSampling, TextTemplateInput

    torch.manual_seed(seed)
    hf = adapter.hf_model(case.model)
    n = case.n_sources

    def render(*values: str) -> str:  # "" is Captum's baseline: that source is removed
        return case.builder.text([value != "" for value in values])

    inp = TextTemplateInput(render, values=[s.text for s in case.sources])
    if method == "feature_ablation":
        attribution, options, calls = FeatureAblation(hf), {}, n + 1
    else:
        samples = max(1, budget // (n + 1))
        attribution, options = ShapleyValueSampling(hf), {"n_samples": samples}
        calls = samples * n + 1
    llm = LLMAttribution(attribution, case.model.tokenizer)
    with torch.no_grad():
        result = llm.attribute(
            inp,
            target=torch.tensor(case.response_ids),
            use_cached_outputs=False,
            forward_in_tokens=False,
            **options,
        )
    return result.seq_attr.detach().double().cpu().numpy(), calls


def method_table(screen: int, seed: int) -> dict[str, Callable[[Case], tuple[np.ndarray, int]]]:
    """Method name -> function of a fresh case returning (scores, model calls)."""

    def from_result(result) -> tuple[np.ndarray, int]:
        return result.scores, result.model_calls

    methods = {
        "arc_jsd": lambda c: from_result(c.arc_jsd()),
        f"arc_jsd screen={screen}": lambda c: from_result(c.arc_jsd(screen=screen)),
        "arc_kl": lambda c: from_result(c.arc_jsd("kl")),
        "arc_tv": lambda c: from_result(c.arc_jsd("tv")),
        "loo (log-lik)": lambda c: from_result(c.attribute("loo")),
    }
    for budget in (32, 64):
        methods[f"kernel_shap@{budget}"] = lambda c, b=budget: from_result(
            c.attribute("kernel_shap", budget=b, seed=seed)
        )
        methods[f"contextcite@{budget}"] = lambda c, b=budget: from_result(
            c.attribute("contextcite", budget=b, seed=seed)
        )
    if package_available():
        for ablations in (32, 64, 256):
            methods[f"context-cite pkg@{ablations}"] = lambda c, a=ablations: (
                package_scores(c, a, seed),
                a + 1,
            )
    methods["captum FeatureAblation"] = lambda c: captum_scores(c, "feature_ablation", None, seed)
    for budget in (32, 64):
        methods[f"captum ShapleyValueSampling@{budget}"] = lambda c, b=budget: captum_scores(
            c, "shapley_value_sampling", b, seed
        )
    methods["question-word overlap"] = lambda c: (QueryOverlap()(c).scores, 0)
    return methods


def load(dataset: str, n: int, distractors: int):
    if dataset == "hotpotqa":
        examples = load_hotpotqa(distractors=distractors)
    elif dataset == "musique":
        examples = load_musique(distractors=distractors, unit="sentence")
    else:
        examples = load_squad()
    return [e for e in examples if e.gold_ids][:n]


def table(records: list[dict], methods: list[str], datasets: list[str]) -> str:
    header = (
        "| method | "
        + " | ".join(f"{d} top-1 | {d} top-3 | {d} s/ex" for d in datasets)
        + " | calls/ex |"
    )
    lines = [header, "|" + "---|" * (2 + 3 * len(datasets))]
    for method in methods:
        cells, calls = [], []
        for dataset in datasets:
            rows = [r for r in records if r["method"] == method and r["dataset"] == dataset]
            calls.extend(r["model_calls"] for r in rows)
            if rows:
                cells += [
                    f"{np.mean([r['top1'] for r in rows]):.2f}",
                    f"{np.mean([r['top3'] for r in rows]):.2f}",
                    f"{np.mean([r['seconds'] for r in rows]):.1f}",
                ]
            else:
                cells += ["-", "-", "-"]
        mean_calls = f"{np.mean(calls):.0f}" if calls else "-"
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {mean_calls} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="examples per data set")
    parser.add_argument("--datasets", nargs="+", default=["hotpotqa", "musique", "squad"])
    parser.add_argument("--distractors", type=int, default=2)
    parser.add_argument("--screen", type=int, default=3)
    parser.add_argument("--response-tokens", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="outputs/attribution_accuracy")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    records_path = out / "records.jsonl"
    done = {(r["dataset"], r["id"], r["method"]) for r in read_jsonl(records_path)}
    methods = method_table(args.screen, args.seed)
    if not package_available():
        print(
            "context-cite package not installed: its rows are skipped (pip install -e '.[peers]')"
        )
    model = load_model()
    print(f"threads={args.threads}  examples per data set={args.n}  methods={len(methods)}")
    for dataset in args.datasets:
        for example in load(dataset, args.n, args.distractors):
            todo = [m for m in methods if (dataset, example.id, m) not in done]
            if not todo:
                continue
            response = Case.from_example(
                model, example, max_new_tokens=args.response_tokens
            ).response_ids
            for method in todo:
                start = time.perf_counter()
                case = Case.from_example(model, example, response)
                scores, calls = methods[method](case)
                seconds = time.perf_counter() - start
                ranked = [case.sources[i].id for i in np.argsort(-scores, kind="stable")]
                append_jsonl(
                    records_path,
                    {
                        "dataset": dataset,
                        "id": example.id,
                        "method": method,
                        "n_sources": case.n_sources,
                        "response": case.response_text,
                        "top1": top_k_hit(ranked, example.gold_ids, 1),
                        "top3": top_k_hit(ranked, example.gold_ids, 3),
                        "seconds": seconds,
                        "model_calls": int(calls),
                        "ranking": ranked[:5],
                    },
                )
                print(f"{dataset} {example.id} {method}: {seconds:.1f}s", flush=True)
    records = read_jsonl(records_path)
    markdown = table(records, list(methods), args.datasets)
    sources = np.mean([r["n_sources"] for r in records]) if records else 0
    note = (
        f"\n\nSmolLM2-135M-Instruct, CPU, threads={args.threads}, {args.n} examples per data set, "
        f"mean {sources:.1f} sentence sources, responses <= {args.response_tokens} tokens.\n"
    )
    write_text_atomic(out / "table.md", markdown + note)
    print(markdown + note)


if __name__ == "__main__":
    main()
