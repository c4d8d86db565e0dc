"""The fast-attribution frontier: accuracy against cost, per context size, against exact ARC-JSD.

For each context size and example, one greedy response is generated (outside every timing) and
every method then runs on a fresh case with that response (its own, but for the two below), in this
one process: exact ARC-JSD (and its KL variant), the Fisher screen, hierarchical ARC-JSD, a proxy
model, attention attribution with uniform, localized and fitted weights, ContextCite at 32, 64 and
256 ablations (on context-cite's target, the response's log-odds: a record of its old target is
rerun, timed apart from exact ARC-JSD, and the tables show the old ones apart), Leverage SHAP and
pmcSHAP at 32, leave-one-out and question-word overlap;
``attention_after_generation`` is fitted attention on the case that generated the response (the
generation off the clock), which continues the generation's cache, as an attribution made while
answering does. Leave-one-out and the KL variant score exactly exact ARC-JSD's subsets
(:data:`BUILDS_ON`): beside it, they run on its case right after it, adding no pass (with
``--only-shared``, only there), and their records name it (``builds_on``) and carry its cost summed
with theirs, which is what each costs alone. Each method's speed-up is exact ARC-JSD's seconds over
its seconds on the same example; agreement is the top-1 match and the Spearman correlation with
exact ARC-JSD's scores; gold top-1 says whether its top source is a gold sentence, and each record
says whether the response was correct. Exact ARC-JSD is the reference of the frontier table, but a
run may leave it out (``--methods attention_fitted query_overlap``) to take a fast method to more
examples than exact can reach; those feed the paper-setting table (``make results``).

Sizes: ``10``, ``20``, ``40`` sentences (HotpotQA with all ten paragraphs, cut by
:func:`mechrag.data.cut_to_sentences`), ``hotpotqa`` (the whole ten-paragraph context, ~51
sentences), ``musique`` (all twenty paragraphs, ~90), ``hotpotqa_dev`` and ``musique_dev`` (the
same on the shipped dev samples, the papers' split: 295 and 200 examples) and ``squad`` (SQuAD 2.0
dev answerable questions over their whole article, 100-208 sentences:
:func:`mechrag.data.load_squad_articles`; no exact ARC-JSD reaches it here). Examples are the
first ``--examples`` of each sample less those the fitted attention weights were fitted on
(training examples 50-59; skipped for every method), so at most 90 per training sample; the dev
samples and SQuAD's 705 questions (dev) were never fitted on.

Records go to ``--out`` (one line per example and method, resumable: a rerun skips what is
there), each with the response's ids and text and how many of its content words (less the
query's) each source shares; ``make results`` builds the tables and the plot from the records
alone. ``--device cuda`` runs every method on a GPU, in float32 as on the CPU, so its records
resume and complete a CPU run's; each record names its device, and the tables' speed-ups pair only
records timed on the CPU.

    python experiments/frontier.py --sizes 20 hotpotqa --examples 20 --threads 2
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

from frontier_cases import (
    HIERARCHICAL_DOCUMENTS,
    SIZES,
    examples_of_size,
    on_contextcite_target,
    run_folder,
    weights_hash,
)

METHODS = (
    "exact",
    "exact_kl",
    "screen",
    "hierarchical",
    "proxy",
    "attention_uniform",
    "attention_localized",
    "attention_fitted",
    "attention_rescored5",
    "attention_after_generation",
    "contextcite32",
    "contextcite64",
    "contextcite256",
    "leverage32",
    "pmcshap32",
    "loo",
    "query_overlap",
)
# The methods that read the shipped attention weights: only their records depend on them.
WEIGHTED = ("attention_localized", "attention_fitted", "attention_rescored5",
            "attention_after_generation")  # fmt: skip
SCREEN_CANDIDATES = 5
PROXIES = {"smollm2-135m": "gemma3-270m", "gemma3-270m": "smollm2-135m"}
# Methods that score exactly the subsets of another (each single removal, beside the full
# context). Beside it, a method runs on its case after it, scoring nothing new, and its cost is the
# two summed (SUMMED; its model calls, the subsets it asks for, are its own either way).
# ContextCite's budgets are not here, though a larger one draws the smaller's masks first: split
# in two groups, its masks take up to a sixth more passes than alone.
BUILDS_ON = {"exact_kl": "exact", "loo": "exact"}
SUMMED = ("seconds", "forward_passes", "tokens_processed")


def run_order(methods: list[str]) -> list[str]:
    """``methods`` once each, in the order given, but each of :data:`BUILDS_ON` right after the
    method it builds on (when that runs too), so the host's case is released once they have run."""
    methods = list(dict.fromkeys(methods))

    def with_builders(name: str) -> list[str]:
        builders = [b for b in methods if BUILDS_ON.get(b) == name]
        return [name, *(then for b in builders for then in with_builders(b))]

    return [
        then
        for name in methods
        if BUILDS_ON.get(name) not in methods
        for then in with_builders(name)
    ]


def configured(name: str, model_name: str):
    """The method object behind each benchmark name."""
    from mechrag import ARCJSD, SourceScreen
    from mechrag.attribution.attention import AttentionAttribution
    from mechrag.attribution.estimators import PMCSHAP, ContextCite, LeaveOneOut, LeverageSHAP
    from mechrag.attribution.hierarchical import HierarchicalARCJSD
    from mechrag.attribution.overlap import QueryOverlap
    from mechrag.attribution.proxy import ProxyAttribution

    return {
        "exact": lambda: ARCJSD(),
        "exact_kl": lambda: ARCJSD(divergence="kl"),
        "screen": lambda: ARCJSD(screen=SourceScreen(SCREEN_CANDIDATES)),
        "hierarchical": lambda: HierarchicalARCJSD(documents=HIERARCHICAL_DOCUMENTS),
        "proxy": lambda: ProxyAttribution(proxy=PROXIES[model_name]),
        "attention_uniform": lambda: AttentionAttribution(weights="uniform"),
        "attention_localized": lambda: AttentionAttribution(weights="localized"),
        "attention_fitted": lambda: AttentionAttribution(weights="fitted"),
        "attention_rescored5": lambda: AttentionAttribution(weights="fitted", rescore=5),
        "attention_after_generation": lambda: AttentionAttribution(weights="fitted"),
        "contextcite32": lambda: ContextCite(budget=32),
        "contextcite64": lambda: ContextCite(budget=64),
        "contextcite256": lambda: ContextCite(budget=256),
        "leverage32": lambda: LeverageSHAP(budget=32),
        "pmcshap32": lambda: PMCSHAP(budget=32),
        "loo": lambda: LeaveOneOut(),
        "query_overlap": lambda: QueryOverlap(),
    }[name]()


def unseen(model, examples) -> list:
    """``examples`` without those the shipped attention weights were fitted on (said once per
    size), so every method runs on the same examples and none is scored on its training data."""
    from mechrag.attribution.attention import shipped_weights

    weights = shipped_weights(model)
    seen = set(weights.provenance.get("data", {}).get("example_keys", [])) if weights else set()
    kept = [e for e in examples if f"{e.dataset}:{e.id}" not in seen]
    if len(kept) < len(examples):
        print(f"skipped {len(examples) - len(kept)} examples the fitted weights were fitted on")
    return kept


def answers(example) -> list[str]:
    """Every accepted answer: the reference, its aliases (MuSiQue's) and every annotator's
    (SQuAD's)."""
    metadata = example.metadata
    return [example.answer, *metadata.get("aliases", []), *metadata.get("answers", [])]


def method_case(
    model, example, response: list[int], name: str, max_new_tokens: int, generated=None
):
    """The case a method runs on: the recorded response given, or for
    ``attention_after_generation`` the case that generated it, which keeps the generation's
    cache: ``generated`` when this run has just made the response with it, else a case that
    generates it again (off the method's clock); ``None``, said in one line, when that
    generation differs."""
    from mechrag import Case

    if name != "attention_after_generation":
        return Case.from_example(model, example, response=list(response))
    if generated is not None:
        return generated
    case = Case.from_example(model, example, max_new_tokens=max_new_tokens)
    if case.response_ids != list(response):
        print(f"skipped {example.id} for {name}: the generation differs from the recorded one")
        return None
    return case


def run_settings(args: argparse.Namespace) -> dict:
    """What a record's content depends on besides its example and method: a resumed run reuses
    only records made under the same settings (the shipped weights by their hash, for the
    methods that read them: :func:`reusable`)."""
    return {
        "model": args.model,
        "max_new_tokens": args.max_new_tokens,
        "weights": weights_hash(args.model),
    }


def reusable(record: dict, settings: dict) -> bool:
    """Whether an earlier record stands for a run under ``settings``: made under the same
    settings, the shipped weights' hash counted only for the :data:`WEIGHTED` methods (a refit
    reruns those, not exact ARC-JSD), and for ContextCite fitted on its own target (records of
    the old one are rerun; the tables keep them apart). Speed-ups pair seconds of one session, so
    after a refit or a ContextCite rerun those rows show "timed apart" until exact ARC-JSD runs
    again beside them (remove its records of those examples first)."""

    def relevant(found: dict) -> dict:
        weighted = record.get("method") in WEIGHTED
        return {key: value for key, value in found.items() if key != "weights" or weighted}

    same_settings = relevant(record.get("settings") or {}) == relevant(settings)
    return same_settings and on_contextcite_target(record)


def run(args: argparse.Namespace) -> None:
    import uuid

    import torch

    from mechrag import Case
    from mechrag.attribution.overlap import word_overlap
    from mechrag.metrics.answers import response_correct
    from mechrag.models import adapter
    from mechrag.models.loading import load_model
    from mechrag.results.files import append_jsonl, run_records

    torch.set_num_threads(args.threads)
    print(f"threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    # float32 on every device, so a GPU's records stand beside the CPU's (bfloat16 would not)
    model = load_model(args.model, device=args.device, dtype=torch.float32)
    device = str(adapter.device(model))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = run_settings(args)
    # Speed-ups pair records of one session (one process, one machine state): make results
    # compares a method's seconds only with exact ARC-JSD's of the same session.
    session = uuid.uuid4().hex[:12]
    records = [r for r in run_records(out) if reusable(r, settings)]
    done = {(r["size"], r["id"], r["method"]) for r in records}
    # One response per example, whichever method's record holds it (exact ARC-JSD's first).
    responses = {}
    for record in sorted(records, key=lambda r: r["method"] != "exact"):
        responses.setdefault((record["size"], record["id"]), record["response_ids"])
    warmed = set()  # the models whose first pass has run: "target", "proxy"
    methods = run_order(args.methods)
    stranded = Counter()  # builders left out by --only-shared: an earlier run recorded the host
    for size in args.sizes:
        examples = unseen(model, examples_of_size(size, args.examples))
        for example in examples:
            response = responses.get((size, example.id))
            if response is None and args.reuse_only:
                continue
            generated = None  # the case that made the response, kept for after-generation
            if response is None:
                case = Case.from_example(model, example, max_new_tokens=args.max_new_tokens)
                response = case.response_ids
                if "attention_after_generation" in args.methods:
                    generated = case
            hosts = {}  # name -> (case, cost) of the BUILDS_ON hosts run on this example
            for name in methods:
                if name not in BUILDS_ON:  # the last host's builders ran just after it: free its
                    hosts.clear()  # case before the next method builds one
                    case = None
                if (size, example.id, name) in done:
                    continue
                builds_on = BUILDS_ON.get(name) if BUILDS_ON.get(name) in hosts else None
                if name in BUILDS_ON and args.only_shared and not builds_on:
                    stranded[name] += 1
                    continue
                runs_on = "proxy" if name == "proxy" else "target"
                if runs_on not in warmed:  # a model's first pass is slower: keep it off the clock
                    warm = Case.from_example(model, example, response=list(response))
                    if runs_on == "proxy":  # the proxy model is loaded (and cached) here
                        warm = warm.for_model(configured(name, args.model).proxy_model(warm))
                    warm.reference_logprobs()
                    warmed.add(runs_on)
                method = configured(name, args.model)
                if builds_on:
                    case = hosts[builds_on][0]
                else:
                    case = method_case(
                        model, example, response, name, args.max_new_tokens, generated=generated
                    )
                if case is None:
                    continue
                if case is generated:
                    generated = None  # its cache now holds the method's passes too
                result = method(case)
                own = dict(zip(SUMMED, (result.metadata["seconds"], result.forward_passes,
                                        result.metadata["tokens_processed"])))
                # The method's own clock (no model loads), and its host's when it built on one.
                cost = {k: v + hosts[builds_on][1][k] for k, v in own.items()} if builds_on else own
                if name in BUILDS_ON.values():
                    hosts[name] = (case, cost)
                ranked = [result.sources[i].id for i in result.ranking]
                append_jsonl(
                    out / "records.jsonl",
                    {
                        "size": size,
                        "id": example.id,
                        "settings": settings,
                        "session": session,
                        "dataset": example.dataset,
                        "method": name,
                        "model": args.model,
                        "threads": torch.get_num_threads(),
                        # Seconds are this device's (make results times on the CPU's alone).
                        "device": device,
                        "n_sources": case.n_sources,
                        "prompt_tokens": len(case.builder.ids()),
                        "response_ids": list(response),
                        "response_text": case.response_text,
                        # How many of the response's content words (less the query's) each
                        # source shares: which sentence a wrong response repeats (make
                        # results: paper_setting_misses).
                        "response_overlap": word_overlap(
                            case.response_text,
                            [s.text for s in case.sources],
                            leaving_out=case.query,
                        ).tolist(),
                        "correct": response_correct(case.response_text, answers(example)),
                        "gold_ids": list(example.gold_ids),
                        "source_ids": [s.id for s in case.sources],
                        "scores": result.scores.tolist(),
                        "top1_gold": ranked[0] in example.gold_ids,
                        **cost,
                        "model_calls": result.model_calls,
                        # The game a sampling estimator fitted (ContextCite's target changed in
                        # 0.3: frontier_cases.contextcite_target): None for the methods that
                        # have none.
                        "value": result.metadata.get("value"),
                        # The method it ran after on one case (BUILDS_ON), its cost included.
                        "builds_on": builds_on,
                    },
                )
                print(
                    f"{size:>8} {example.id[:10]} {name:>20} {cost['seconds']:7.1f} s "
                    f"({cost['forward_passes']} passes{f' with {builds_on}' if builds_on else ''})",
                    flush=True,
                )
    for name, count in stranded.items():
        counted = f"{count} example{'s' if count != 1 else ''}"
        print(
            f"--only-shared left out {name} on {counted} whose {BUILDS_ON[name]} record an "
            "earlier run made (without --only-shared it runs alone there, at its cost)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", choices=tuple(PROXIES))
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=SIZES)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--examples", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda: float32 there too, so records mix freely"
    )
    parser.add_argument(
        "--reuse-only", action="store_true", help="only examples with a recorded response"
    )
    parser.add_argument(
        "--only-shared",
        action="store_true",
        help="LOO and the KL variant only where exact ARC-JSD runs beside them (at no cost)",
    )
    parser.add_argument("--out", default=None, help="default: experiments/runs/frontier_MODEL")
    args = parser.parse_args()
    stranded = [name for name in args.methods if BUILDS_ON.get(name, name) not in args.methods]
    if args.only_shared and stranded:
        parser.error(
            f"--only-shared runs {', '.join(stranded)} only beside "
            f"{', '.join(sorted({BUILDS_ON[name] for name in stranded}))}: add it to --methods"
        )
    args.out = args.out or run_folder("frontier", args.model)
    run(args)
    print(
        "tables and figure: make results "
        "(experiments/make_results.py: frontier, frontier_depth, paper_setting, "
        "paper_setting_misses)"
    )


if __name__ == "__main__":
    main()
