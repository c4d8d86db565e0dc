"""JSD gating against hallucination: calibrate gates on one split, report on a disjoint one.

Per data set (HotpotQA; SQuAD 2.0 with unanswerable questions when ``--squad2-file`` is given,
answerable only otherwise) the examples are shuffled with ``--seed`` and cut into a calibration
split and a disjoint test split. The prompt (``ABSTENTION_TEMPLATE``) lets the model answer
"unanswerable".

Calibration: ``localize`` on every calibration example's greedy response (top ARC-JSD source
removed, semantic gains toward the response), averaged with ``ComponentAttribution.average``;
each gating rule of ``mechrag.mechanism`` is tried with every ``k`` of ``--k`` (static: gates
on at every step) and the dynamic thresholds are quantiles of the calibration answer-token echo.
A configuration is admissible when its mean F1 is at least the ungated F1 minus ``--f1-tolerance``;
the admissible one with the lowest hallucination rate wins (ties: higher F1, then fewer gates);
the ungated model is always admissible, so a rule may end up with no gates. The echo-abstention
threshold (answer "unanswerable" when the mean answer-token echo is below it) is chosen the same
way. Spearman rho between component JSD and semantic gain (response and gold-answer targets) is
recorded per calibration example.

Test conditions: no gating; each rule static and dynamic; the best static rule's gates moved to
random components (``--random-seeds`` seeds, same counts and factors); echo abstention. Metrics
(``mechrag.metrics.answers``): hallucination rate (and its wrong / unsupported parts), EM, F1,
abstention rate, answer length, each with a seeded 95% bootstrap interval and the exact McNemar
p of hallucination against no gating. Detectors (on the ungated responses): AUROC of the context
echo, the source echo, mean log-probability, mean entropy and the leave-one-out log-likelihood
drop of the top source. Every example appends one JSON line; reruns resume.

    python experiments/gating.py --datasets hotpotqa squad --n-calibration 20 --n-test 60 \
        --squad2-file squad2_dev.json --out runs/gating
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import matplotlib
import numpy as np
import torch

from mechrag import Case, ComponentAttribution, Source, load_model
from mechrag.adapter import greedy_generate
from mechrag.data import RAGExample, load_hotpotqa, load_squad
from mechrag.mechanism import (
    RULES,
    Gates,
    GatingRule,
    case_semantic_gain,
    decode_with_gates,
    detector_scores,
    echo,
    random_gates,
)
from mechrag.metrics import spearman
from mechrag.metrics.answers import ABSTENTION_ANSWER, ABSTENTION_TEMPLATE, judge_answer
from mechrag.metrics.detection import auroc, bootstrap_ci, mcnemar_exact, roc_curve
from mechrag.outputs import append_jsonl, read_jsonl, write_text_atomic
from mechrag.sources import split_sentences

matplotlib.use("Agg")

METRICS = ("hallucinated", "wrong", "unsupported", "exact_match", "f1", "abstained", "n_words")
DETECTORS = (
    "echo",
    "echo_min",
    "echo_share_below",
    "source_echo",
    "logprob",
    "entropy",
    "loo_drop",
)
FACTORS = {"damp": 0.0, "sigmoid": 0.0, "amplify": 1.5}
THRESHOLD_QUANTILES = (0.25, 0.5)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["hotpotqa", "squad"])
    parser.add_argument(
        "--squad2-file",
        type=Path,
        default=None,
        help="official SQuAD 2.0 JSON (adds unanswerable questions)",
    )
    parser.add_argument("--n-calibration", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=60)
    parser.add_argument("--distractors", type=int, default=1)
    parser.add_argument("--k", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--random-seeds", type=int, default=5)
    parser.add_argument("--f1-tolerance", type=float, default=0.02)
    parser.add_argument("--max-new-tokens", type=int, default=20)
    parser.add_argument("--model", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/gating"))
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="summarise the records written so far, run nothing",
    )
    return parser.parse_args()


# --- data ----------------------------------------------------------------------------------


def load_squad2(path: Path) -> list[RAGExample]:
    """Official SQuAD 2.0 JSON -> one example per question, the paragraph split into sentences;
    ``metadata['answers']`` holds every gold answer (empty when unanswerable)."""
    examples = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            sentences = split_sentences(paragraph["context"])
            sources = [Source(f"p0s{i}", s, article["title"], 0) for i, s in enumerate(sentences)]
            for qa in paragraph["qas"]:
                answers = sorted({a["text"] for a in qa["answers"]})
                examples.append(
                    RAGExample(
                        qa["id"],
                        "squad",
                        qa["question"],
                        sources,
                        [],
                        answers[0] if answers else "",
                        {"answers": answers},
                    )
                )
    return examples


def gold_answers(example: RAGExample) -> list[str]:
    return example.metadata.get("answers", [example.answer] if example.answer else [])


def splits(dataset: str, args) -> tuple[list[RAGExample], list[RAGExample]]:
    """Disjoint calibration and test examples (seeded shuffle; SQuAD 2.0 half unanswerable)."""
    if dataset == "hotpotqa":
        pool = load_hotpotqa(distractors=args.distractors, seed=args.seed)
    elif dataset == "squad" and args.squad2_file is not None:
        everything = load_squad2(args.squad2_file)
        rng = random.Random(args.seed)
        answerable = [e for e in everything if gold_answers(e)]
        unanswerable = [e for e in everything if not gold_answers(e)]
        rng.shuffle(answerable)
        rng.shuffle(unanswerable)
        pool = [e for pair in zip(answerable, unanswerable) for e in pair]
    elif dataset == "squad":
        pool = load_squad()
    else:
        raise ValueError(f"unknown dataset {dataset!r}")
    if dataset != "squad" or args.squad2_file is None:
        random.Random(args.seed).shuffle(pool)
    needed = args.n_calibration + args.n_test
    if len(pool) < needed:
        raise ValueError(f"{dataset} has {len(pool)} examples, fewer than the {needed} asked for")
    calibration, test = pool[: args.n_calibration], pool[args.n_calibration : needed]
    assert not {e.id for e in calibration} & {e.id for e in test}
    return calibration, test


# --- responses -----------------------------------------------------------------------------


def make_case(model, example: RAGExample, args) -> Case:
    """The case of ``example`` with its greedy response under the abstention prompt."""
    return Case.from_example(
        model, example, template=ABSTENTION_TEMPLATE, max_new_tokens=args.max_new_tokens
    )


def respond(model, builder, args, gates: Gates | None = None, threshold: float | None = None):
    """Greedy response text: plain, statically gated, or dynamically gated (``threshold``)."""
    if threshold is not None:
        empty = torch.zeros(builder.n_sources, dtype=torch.bool)
        decoded = decode_with_gates(
            model, builder.ids(), builder.ids(empty), gates, threshold, args.max_new_tokens
        )
        return model.tokenizer.decode(decoded.response_ids), decoded.n_fired
    if gates is None:
        ids = greedy_generate(model, builder.ids(), args.max_new_tokens)
    else:
        with gates.apply(model):
            ids = greedy_generate(model, builder.ids(), args.max_new_tokens)
    return model.tokenizer.decode(ids), 0


def judged(text: str, example: RAGExample, builder, **extra) -> dict:
    record = judge_answer(text, gold_answers(example), builder.context()).to_dict()
    return {**record, "response": text, **extra}


# --- calibration ---------------------------------------------------------------------------


def objective(rows: list[dict]) -> tuple[float, float]:
    return float(np.mean([r["hallucinated"] for r in rows])), float(
        np.mean([r["f1"] for r in rows])
    )


def choose(candidates: dict, baseline_f1: float, tolerance: float, sizes: dict) -> str:
    """Lowest hallucination among candidates with F1 >= baseline - tolerance (ties: higher F1,
    fewer gates); the highest F1 when none is admissible."""
    scores = {n: objective(rows) for n, rows in candidates.items()}
    admissible = [n for n, (_, f1) in scores.items() if f1 >= baseline_f1 - tolerance]
    if not admissible:
        return max(scores, key=lambda n: (scores[n][1], -scores[n][0], -sizes[n]))
    return min(admissible, key=lambda n: (scores[n][0], -scores[n][1], sizes[n]))


def calibrate(model, examples, args, folder: Path) -> dict:
    path = folder / "calibration.json"
    if path.is_file():
        return json.loads(path.read_text())
    started = time.perf_counter()
    attributions, plain, echoes, rhos = [], [], [], {"response": [], "answer": []}
    cases = []
    for example in examples:
        case = make_case(model, example, args)
        cases.append(case)
        text = case.response_text
        plain.append(judged(text, example, case.builder))
        result = echo(case)
        echoes.append(result)
        located = case.localize(result.top_source)
        attributions.append(located)
        rhos["response"].append(spearman(located.scores, located.gains))
        if gold_answers(example):
            gain = case_semantic_gain(case, target="answer", answer=gold_answers(example)[0])
            answer_gains = np.concatenate([gain.heads.numpy().ravel(), gain.mlps.numpy()])
            rhos["answer"].append(spearman(located.scores, answer_gains))
    mean = ComponentAttribution.average(attributions)
    builders = [c.builder for c in cases]
    _, baseline_f1 = objective(plain)

    def run(gates=None, threshold=None):
        return [
            judged(respond(model, b, args, gates, threshold)[0], e, b)
            for b, e in zip(builders, examples)
        ]

    static = {"none": plain}
    rules, sizes = {"none": None}, {"none": 0}  # label -> rule, number of gates
    for name in RULES:
        for k in args.k:
            rule = GatingRule(name, k=k, factor=FACTORS[name])
            gates = rule.gates(mean)
            static[rule.label] = run(gates) if len(gates) else plain
            rules[rule.label], sizes[rule.label] = rule, len(gates)
    answer_echo = np.concatenate([e.context[e.answer_mask] for e in echoes])
    thresholds = [float(np.quantile(answer_echo, q)) for q in THRESHOLD_QUANTILES]
    chosen = {}
    for name in RULES:
        own = {label: static[label] for label, rule in rules.items() if rule and rule.name == name}
        gated = {label: rows for label, rows in own.items() if sizes[label]} or own
        best = choose(gated, baseline_f1, args.f1_tolerance, sizes)
        gates = rules[best].gates(mean)
        dynamic = {f"{t:.6g}": run(gates, t) if len(gates) else plain for t in thresholds}
        best_threshold = choose(dynamic, baseline_f1, args.f1_tolerance, dict.fromkeys(dynamic, 0))
        chosen[name] = {
            "rule": rules[best].to_dict(),
            "gates": gates.to_dict(),
            "static_label": best,
            "threshold": float(best_threshold),
        }
    picks = {"none": plain} | {name: static[c["static_label"]] for name, c in chosen.items()}
    overall = choose(
        picks,
        baseline_f1,
        args.f1_tolerance,
        {n: len(Gates.from_dict(c["gates"])) for n, c in chosen.items()} | {"none": 0},
    )
    best_rule = min(chosen, key=lambda n: (objective(picks[n])[0], -objective(picks[n])[1]))
    means = np.array([e.mean for e in echoes])
    abstain = {}
    for q in (0.1, 0.25):
        tau = float(np.quantile(means, q))
        abstain[f"{tau:.6g}"] = [
            judged(ABSTENTION_ANSWER, e, c.builder) if m < tau else p
            for e, c, m, p in zip(examples, cases, means, plain)
        ]
    best_tau = choose(abstain, baseline_f1, args.f1_tolerance, dict.fromkeys(abstain, 0))
    calibration = {
        "n": len(examples),
        "seconds": time.perf_counter() - started,
        "baseline": dict(zip(("hallucination", "f1"), objective(plain))),
        "static": {
            label: dict(zip(("hallucination", "f1"), objective(rows)))
            for label, rows in static.items()
        },
        "thresholds": thresholds,
        "rules": chosen,
        "best_static_rule": best_rule,
        "overall_pick": overall,
        "echo_abstain_threshold": float(best_tau),
        "spearman": {
            target: {"mean": float(np.nanmean(v)) if v else None, "values": v}
            for target, v in rhos.items()
        },
        "attribution": mean.to_dict(),
    }
    write_text_atomic(path, json.dumps(calibration, indent=1))
    return calibration


# --- test ----------------------------------------------------------------------------------


def evaluate(model, example: RAGExample, calibration: dict, args) -> dict:
    """Every condition's judged response and the detector scores on one test example."""
    case = make_case(model, example, args)
    builder = case.builder
    conditions = {"none": judged(case.response_text, example, builder)}
    for name, chosen in calibration["rules"].items():
        gates = Gates.from_dict(chosen["gates"])
        conditions[f"static:{name}"] = (
            judged(respond(model, builder, args, gates)[0], example, builder)
            if len(gates)
            else conditions["none"]
        )
        text, fired = (
            respond(model, builder, args, gates, chosen["threshold"])
            if len(gates)
            else (case.response_text, 0)
        )
        conditions[f"dynamic:{name}"] = judged(text, example, builder, fired=fired)
    best = Gates.from_dict(calibration["rules"][calibration["best_static_rule"]]["gates"])
    for seed in range(args.random_seeds):
        gates = random_gates(best, model.cfg.n_layers, model.cfg.n_heads, seed=seed)
        conditions[f"random:{seed}"] = (
            judged(respond(model, builder, args, gates)[0], example, builder)
            if len(gates)
            else conditions["none"]
        )
    result = echo(case)
    abstain = result.mean < calibration["echo_abstain_threshold"]
    conditions["echo_abstain"] = (
        judged(ABSTENTION_ANSWER, example, builder) if abstain else conditions["none"]
    )
    return {
        "id": example.id,
        "answers": gold_answers(example),
        "conditions": conditions,
        "detectors": detector_scores(case, result),
        "echo": result.to_dict(),
    }


def condition_rows(records: list[dict], n_seeds: int) -> list[dict]:
    """Per-condition metrics with bootstrap intervals and McNemar p against no gating."""
    names = [n for n in records[0]["conditions"] if not n.startswith("random:")]
    names.insert(-1, "random")
    baseline = np.array([r["conditions"]["none"]["hallucinated"] for r in records], bool)
    rows = []
    for name in names:
        if name == "random":
            seeds = [f"random:{s}" for s in range(n_seeds)]
            values = {
                m: np.array(
                    [np.mean([float(r["conditions"][s][m]) for s in seeds]) for r in records]
                )
                for m in METRICS
            }
            p_value = None
        else:
            values = {
                m: np.array([float(r["conditions"][name][m]) for r in records]) for m in METRICS
            }
            p_value = mcnemar_exact(values["hallucinated"].astype(bool), baseline)
        row = {"condition": name, "n": len(records), "mcnemar_p": p_value}
        for metric, array in values.items():
            interval = bootstrap_ci(np.mean, array, seed=0, n_resamples=2000)
            row[metric] = {
                "estimate": interval.estimate,
                "low": interval.low,
                "high": interval.high,
            }
        rows.append(row)
    return rows


def detector_rows(records: list[dict]) -> tuple[list[dict], dict]:
    labels = np.array([r["conditions"]["none"]["hallucinated"] for r in records], int)
    rows, curves = [], {}
    if labels.min() == labels.max():
        return rows, curves
    for name in DETECTORS:
        scores = np.array([r["detectors"][name] for r in records])
        interval = bootstrap_ci(auroc, scores, labels, seed=0, n_resamples=2000)
        rows.append(
            {
                "detector": name,
                "auroc": interval.estimate,
                "low": interval.low,
                "high": interval.high,
                "n_positive": int(labels.sum()),
                "n": len(labels),
            }
        )
        curves[name] = roc_curve(scores, labels)
    return rows, curves


def markdown(dataset: str, rows: list[dict], detectors: list[dict], calibration: dict) -> str:
    def cell(row, metric, scale=100.0):
        v = row[metric]
        return f"{scale * v['estimate']:.1f} [{scale * v['low']:.1f}, {scale * v['high']:.1f}]"

    lines = [
        f"### {dataset} (test n = {rows[0]['n']})",
        "",
        "| condition | halluc. % | wrong % | unsupported % | EM % | F1 % | abstain % | words "
        "| McNemar p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        p = "" if row["mcnemar_p"] is None else f"{row['mcnemar_p']:.3g}"
        lines.append(
            f"| {row['condition']} | {cell(row, 'hallucinated')} | {cell(row, 'wrong')} | "
            f"{cell(row, 'unsupported')} | {cell(row, 'exact_match')} | {cell(row, 'f1')} | "
            f"{cell(row, 'abstained')} | {cell(row, 'n_words', 1.0)} | {p} |"
        )
    lines += ["", "| detector | AUROC [95% CI] | positives / n |", "|---|---|---|"]
    for row in detectors:
        lines.append(
            f"| {row['detector']} | {row['auroc']:.3f} [{row['low']:.3f}, "
            f"{row['high']:.3f}] | {row['n_positive']} / {row['n']} |"
        )
    rho = calibration["spearman"]
    lines += [
        "",
        "Calibration choices: "
        + "; ".join(
            f"{n}: {c['static_label']}, {len(Gates.from_dict(c['gates']))} gates, "
            f"dynamic threshold {c['threshold']:.4g}"
            for n, c in calibration["rules"].items()
        ),
        f"calibration pick: {calibration['overall_pick']}; "
        f"echo-abstention threshold {calibration['echo_abstain_threshold']:.4g}; "
        f"Spearman rho(JSD, gain): response {rho['response']['mean']}, "
        f"answer {rho['answer']['mean']}",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model) if args.model else load_model()
    for dataset in args.datasets:
        folder = args.out / dataset
        calibration_examples, test_examples = splits(dataset, args)
        started = time.perf_counter()
        calibration = calibrate(model, calibration_examples, args, folder)
        print(f"{dataset}: calibration ready ({calibration['seconds']:.0f} s)", flush=True)
        records_path = folder / "records.jsonl"
        done = {r["id"] for r in read_jsonl(records_path)}
        for index, example in enumerate(test_examples):
            if example.id in done or args.report_only:
                continue
            record = evaluate(model, example, calibration, args)
            record["seconds"] = time.perf_counter() - started
            append_jsonl(records_path, record)
            print(f"{dataset} {index + 1}/{len(test_examples)}", flush=True)
        records = [r for r in read_jsonl(records_path) if r["id"] in {e.id for e in test_examples}]
        rows = condition_rows(records, args.random_seeds)
        detectors, curves = detector_rows(records)
        summary = {
            "conditions": rows,
            "detectors": detectors,
            "calibration": {k: v for k, v in calibration.items() if k != "attribution"},
        }
        write_text_atomic(folder / "summary.json", json.dumps(summary, indent=1))
        from mechrag.plots.gating import plot_conditions, plot_roc

        plot_conditions(rows).savefig(folder / "conditions.png", dpi=150)
        if curves:
            plot_roc(curves).savefig(folder / "roc.png", dpi=150)
        text = markdown(dataset, rows, detectors, calibration)
        write_text_atomic(folder / "report.md", text)
        print(text, flush=True)


if __name__ == "__main__":
    main()
