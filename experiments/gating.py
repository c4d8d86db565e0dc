"""JSD gating against hallucination: calibrate gates on one split, report on a disjoint one.

Per data set (HotpotQA, its training or dev sample; SQuAD 2.0 dev, about half answerable and
half unanswerable, from the shipped official JSON of 5 articles or ``--squad2-file``) the
examples are shuffled with ``--seed`` and cut into a calibration split and a disjoint test split.
The prompt (``ABSTENTION_TEMPLATE``) lets the model answer "unanswerable".

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

``--protocol paper`` runs ARC-JSD's gating protocol instead (Li et al., arXiv 2505.16415, ICLR
version §7, Table 4), with no calibration: on each test example (the same test split; the
calibration examples are skipped, and ``--n-calibration 0`` makes every example a test example,
since this protocol fits nothing) ``localize`` removes that example's top ARC-JSD source and
``GatingRule.paper()`` scales those of the top-5 heads and top-5 MLPs by JSD (ranked
separately) whose semantic gain ``G`` is negative by ``0.7 + 0.3 * sigmoid(G)``, at every
generation step (the paper does not say when; a mask on components reads as static).
Conditions: no gating, the paper rule, and ``--random-seeds`` random controls ("Gate Random 5")
that put the same factors on as many heads and MLPs as the rule gated, drawn uniformly among the
components it did not gate (``--random-pool ungated``, so control and rule never share a
component; ``all``: among every component, for models too small to leave enough), afresh for
every example (seed = ``--seed``, the example id, the control's number). Metrics as above: the
hallucination rate and factual F1 (token F1 against the gold answers). The paper evaluates
Qwen2-7B-IT on 200 HotpotQA dev examples (its max_new_tokens is 512) and does not define its
hallucination or factual F1 (see ``mechrag.metrics.answers``); ``--datasets hotpotqa_dev
--n-calibration 0 --n-test 200`` takes 200 of the shipped dev sample (``hotpotqa``, the training
sample, holds 100; ``make results`` reads ``runs/gating_paper/hotpotqa/paper``, the training
sample's run, and ``runs/gating_paper/hotpotqa_dev/paper``, the dev sample's). Records go to
``OUT/DATASET/paper/``.

    python experiments/gating.py --datasets hotpotqa squad --n-calibration 20 --n-test 60 \
        --out runs/gating
    python experiments/gating.py --protocol paper --datasets hotpotqa --n-calibration 0 \
        --n-test 100 --out runs/gating
    python experiments/gating.py --protocol paper --datasets hotpotqa_dev --n-calibration 0 \
        --n-test 200 --out runs/gating
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
import zlib
from functools import partial
from pathlib import Path

import matplotlib
import numpy as np
import torch

from mechrag import Case, ComponentAttribution
from mechrag.data import RAGExample, load_hotpotqa, load_squad2
from mechrag.errors import InputFileError
from mechrag.mechanism import (
    Gates,
    GatingRule,
    case_semantic_gain,
    decode_with_gates,
    detector_scores,
    echo,
    random_gates,
)
from mechrag.mechanism.gating.rules import DEFAULT_FACTORS
from mechrag.metrics import spearman
from mechrag.metrics.answers import ABSTENTION_ANSWER, ABSTENTION_TEMPLATE, judge_answer
from mechrag.metrics.detection import auroc, bootstrap_ci, mcnemar_exact, roc_curve
from mechrag.models.adapter import greedy_generate
from mechrag.prompts import render_context
from mechrag.results.files import append_jsonl, read_jsonl, write_text_atomic
from mechrag.sweep import load_sweep_model

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
# The rules the calibrated protocol tries (each at its default factor, every ``--k``).
CALIBRATED_RULES = ("damp", "sigmoid", "amplify")
PROTOCOLS = ("calibrated", "paper")
RANDOM_POOLS = ("ungated", "all")
PAPER_RULE = GatingRule.paper()
# The --datasets names of HotpotQA's shipped samples (each run has its own records folder).
HOTPOTQA_SPLITS = {"hotpotqa": "train", "hotpotqa_dev": "dev"}
THRESHOLD_QUANTILES = (0.25, 0.5)
MIN_SOURCES = 2  # localisation removes one source and needs one left


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="calibrated",
        help="calibrated: static rules chosen on a calibration split; paper: ARC-JSD's Table 4",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=[*HOTPOTQA_SPLITS, "squad"],
        default=["hotpotqa", "squad"],
        help="hotpotqa: the training sample (100); hotpotqa_dev: the dev sample (295)",
    )
    parser.add_argument(
        "--squad2-file",
        type=Path,
        default=None,
        help="official SQuAD 2.0 JSON (default: the shipped 5 dev articles)",
    )
    parser.add_argument("--n-calibration", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=60)
    parser.add_argument("--distractors", type=int, default=1)
    parser.add_argument("--k", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--random-seeds", type=int, default=5)
    parser.add_argument(
        "--random-pool",
        choices=RANDOM_POOLS,
        default="ungated",
        help="paper protocol: draw the random controls among the ungated components or all",
    )
    parser.add_argument("--f1-tolerance", type=float, default=0.02)
    parser.add_argument("--max-new-tokens", type=int, default=20)
    parser.add_argument("--model", default=None, help="HF id, folder, .gguf or toy:FAMILY")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/gating"))
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="summarise the records written so far, run nothing",
    )
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="judge the stored responses again with the current judge (no model pass), then "
        "summarise as --report-only",
    )
    args = parser.parse_args()
    if args.rejudge and args.protocol != "paper":
        parser.error(
            "--rejudge re-judges the paper protocol only (a calibrated run chose its rules by "
            "the judge it ran with)"
        )
    return args


# --- data ----------------------------------------------------------------------------------


def gold_answers(example: RAGExample) -> list[str]:
    return example.metadata.get("answers", [example.answer] if example.answer else [])


def splits(dataset: str, args) -> tuple[list[RAGExample], list[RAGExample]]:
    """Disjoint calibration and test examples (seeded shuffle; SQuAD 2.0 alternates answerable
    and unanswerable questions, so about half are unanswerable once one-sentence paragraphs are
    left out)."""
    if dataset in HOTPOTQA_SPLITS:
        split = HOTPOTQA_SPLITS[dataset]
        pool = load_hotpotqa(distractors=args.distractors, seed=args.seed, split=split)
    else:  # squad (--datasets has no other choice)
        everything = load_squad2(args.squad2_file)
        rng = random.Random(args.seed)
        answerable = [e for e in everything if gold_answers(e)]
        unanswerable = [e for e in everything if not gold_answers(e)]
        rng.shuffle(answerable)
        rng.shuffle(unanswerable)
        pool = [e for pair in zip(answerable, unanswerable) for e in pair]
    if dataset != "squad":
        random.Random(args.seed).shuffle(pool)
    # A one-sentence paragraph has no source to remove: localisation needs two (dropped after the
    # shuffle, so the others keep their order).
    pool = [e for e in pool if len(e.sources) >= MIN_SOURCES]
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


def judgement(text: str, example: RAGExample, context: str) -> dict:
    """The judge's fields for ``text`` (:func:`judge_answer`) given the prompt's ``context``."""
    return judge_answer(text, gold_answers(example), context).to_dict()


def judged(text: str, example: RAGExample, builder, **extra) -> dict:
    return {**judgement(text, example, builder.context()), "response": text, **extra}


def rejudge(records_path: Path, examples: list[RAGExample]) -> tuple[int, int]:
    """Judge every stored condition's response in ``records_path`` again with the current
    :func:`judge_answer` (the context rendered from each example's sources, as the prompt
    holds it) and rewrite the file when a judgement changed. Returns the number of changed
    judgements and of records left as they are (their example is not in ``examples``: a run
    with other data options). A torn last line (a crash mid-write) is dropped; any other line
    that is not JSON (:func:`read_jsonl`'s ``strict``), or a file that changes meanwhile (the
    experiment still writing it), is refused before anything is written."""
    before = records_path.stat()
    try:
        records = read_jsonl(records_path, strict=True)
    except InputFileError:
        message = f"gating: {records_path} has a line that is not JSON; none re-judged"
        raise SystemExit(message) from None
    by_id = {e.id: e for e in examples}
    changed = skipped = 0
    for record in records:
        example = by_id.get(record["id"])
        if example is None:
            skipped += 1
            continue
        context = render_context(example.sources)
        for name, condition in record["conditions"].items():
            updated = {**condition, **judgement(condition["response"], example, context)}
            changed += updated != condition
            record["conditions"][name] = updated
    now = records_path.stat()
    if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise SystemExit(f"gating: {records_path} changed while re-judging; is the run still on?")
    if changed:
        write_text_atomic(records_path, "".join(json.dumps(r) + "\n" for r in records))
    return changed, skipped


def statically_gated(model, example: RAGExample, builder, args, gates: Gates, plain: dict) -> dict:
    """The judged response with ``gates`` on at every step (``plain`` when there are none)."""
    return (
        judged(respond(model, builder, args, gates)[0], example, builder) if len(gates) else plain
    )


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
        located = case.localize(result.top_source, gain_definition="residual_cosine")
        attributions.append(located)
        rhos["response"].append(spearman(located.scores, located.gains))
        if gold_answers(example):
            gain = case_semantic_gain(
                case,
                target="answer",
                answer=gold_answers(example)[0],
                definition="residual_cosine",  # the calibrated rules' gain, per head
            )
            toward_answer = dataclasses.replace(
                located,
                head_gain=None if gain.heads is None else gain.heads.numpy(),
                attn_gain=gain.attention.numpy(),
                mlp_gain=gain.mlps.numpy(),
            )  # per-component gains as ``located.gains`` forms them (heads: own or layer gain)
            rhos["answer"].append(spearman(located.scores, toward_answer.gains))
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
    for name in CALIBRATED_RULES:
        for k in args.k:
            rule = GatingRule(name, k=k, factor=DEFAULT_FACTORS[name])
            gates = rule.gates(mean)
            static[rule.label] = run(gates) if len(gates) else plain
            rules[rule.label], sizes[rule.label] = rule, len(gates)
    answer_echo = np.concatenate([e.context[e.answer_mask] for e in echoes])
    thresholds = [float(np.quantile(answer_echo, q)) for q in THRESHOLD_QUANTILES]
    chosen = {}
    for name in CALIBRATED_RULES:
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
        conditions[f"static:{name}"] = statically_gated(
            model, example, builder, args, gates, conditions["none"]
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
        conditions[f"random:{seed}"] = statically_gated(
            model, example, builder, args, gates, conditions["none"]
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


def evaluate_paper(model, example: RAGExample, args) -> dict:
    """The paper protocol on one example: no gating, ``PAPER_RULE``'s gates from this example's
    own localisation (top ARC-JSD source removed), and the random controls."""
    case = make_case(model, example, args)
    builder = case.builder
    located = case.localize()
    gates = PAPER_RULE.gates(located)
    plain = judged(case.response_text, example, builder)
    conditions = {
        "none": plain,
        "paper": statically_gated(model, example, builder, args, gates, plain),
    }
    example_seed = zlib.crc32(example.id.encode("utf-8"))
    controls = {}
    for seed in range(args.random_seeds):
        control = random_gates(
            gates,
            model.cfg.n_layers,
            model.cfg.n_heads,
            seed=(args.seed, example_seed, seed),
            exclude_gated=args.random_pool == "ungated",
        )
        conditions[f"random:{seed}"] = statically_gated(
            model, example, builder, args, control, plain
        )
        controls[str(seed)] = control.to_dict()
    return {
        "id": example.id,
        "answers": gold_answers(example),
        "source_id": located.source_id,
        "rule": PAPER_RULE.to_dict(),
        "gates": gates.to_dict(),
        "random_pool": args.random_pool,
        "random_gates": controls,
        "top_heads": [c.label for c in located.top(PAPER_RULE.k, kind="head")],
        "top_mlps": [c.label for c in located.top(PAPER_RULE.k_mlps, kind="mlp")],
        "attn_gain": located.attn_gain.tolist(),
        "mlp_gain": located.mlp_gain.tolist(),
        "conditions": conditions,
    }


def condition_rows(records: list[dict], n_seeds: int) -> list[dict]:
    """Per-condition metrics with bootstrap intervals and McNemar p against no gating; the random
    conditions' seeds are averaged per example into one ``random`` row."""
    names = [n for n in records[0]["conditions"] if not n.startswith("random:")]
    if n_seeds:
        names.insert(
            names.index("echo_abstain") if "echo_abstain" in names else len(names), "random"
        )
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


def markdown(dataset: str, rows: list[dict], detectors: list[dict], notes: list[str]) -> str:
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
    if detectors:
        lines += ["", "| detector | AUROC [95% CI] | positives / n |", "|---|---|---|"]
    for row in detectors:
        lines.append(
            f"| {row['detector']} | {row['auroc']:.3f} [{row['low']:.3f}, "
            f"{row['high']:.3f}] | {row['n_positive']} / {row['n']} |"
        )
    return "\n".join([*lines, "", *notes, ""])


def calibration_notes(calibration: dict) -> list[str]:
    rho = calibration["spearman"]
    return [
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
    ]


def paper_notes(records: list[dict]) -> list[str]:
    """How many heads and MLPs the paper rule gated per example, and its factors' range."""
    gates = [Gates.from_dict(r["gates"]) for r in records]
    factors = [f for g in gates for f in [*g.heads.values(), *g.mlps.values()]]
    spread = f"factors {min(factors):.3f} to {max(factors):.3f}" if factors else "no factors"
    return [
        f"Paper protocol: {PAPER_RULE.label}, per example; gated heads per example "
        f"{np.mean([len(g.heads) for g in gates]):.2f}, "
        f"MLPs {np.mean([len(g.mlps) for g in gates]):.2f}; "
        f"{sum(not len(g) for g in gates)} of {len(gates)} examples without gates; {spread}. "
        "Random: the same factors on as many other heads and MLPs, drawn per example.",
    ]


def run_records(
    dataset: str,
    examples: list[RAGExample],
    folder: Path,
    args,
    started: float,
    evaluate_one,
    also_rejudged: list[RAGExample] = (),
) -> list[dict]:
    """``evaluate_one(example)`` for every example not yet in ``folder/records.jsonl`` (one line
    appended each, so reruns resume); the records of ``examples``. ``--rejudge`` judges the
    stored records of ``examples`` and ``also_rejudged`` again instead."""
    records_path = folder / "records.jsonl"
    done = {r["id"] for r in read_jsonl(records_path)}
    if args.rejudge and records_path.is_file():
        changed, skipped = rejudge(records_path, [*examples, *also_rejudged])
        print(f"{dataset}: {changed} stored judgements changed", flush=True)
        if skipped:
            print(f"{dataset}: {skipped} records of other examples left as they are", flush=True)
    for index, example in enumerate(examples):
        if example.id in done or args.report_only or args.rejudge:
            continue
        record = evaluate_one(example)
        record["seconds"] = time.perf_counter() - started
        append_jsonl(records_path, record)
        print(f"{dataset} {index + 1}/{len(examples)}", flush=True)
    wanted = {e.id for e in examples}
    return [r for r in read_jsonl(records_path) if r["id"] in wanted]


def report(dataset: str, folder: Path, rows: list[dict], detectors, curves, notes, extra) -> None:
    """``summary.json``, ``conditions.png`` (and ``roc.png``) and ``report.md`` in ``folder``."""
    summary = {"conditions": rows, "detectors": detectors, **extra}
    write_text_atomic(folder / "summary.json", json.dumps(summary, indent=1))
    from mechrag.plots.gating import plot_conditions, plot_roc

    plot_conditions(rows).savefig(folder / "conditions.png", dpi=150)
    if curves:
        plot_roc(curves).savefig(folder / "roc.png", dpi=150)
    text = markdown(dataset, rows, detectors, notes)
    write_text_atomic(folder / "report.md", text)
    print(text, flush=True)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    summarise_only = args.report_only or args.rejudge
    model = None if summarise_only else load_sweep_model(args.model)
    for dataset in args.datasets:
        calibration_examples, test_examples = splits(dataset, args)
        unanswerable = sum(not gold_answers(e) for e in test_examples)
        print(f"{dataset}: {len(test_examples)} test examples, {unanswerable} unanswerable")
        started = time.perf_counter()
        if args.protocol == "paper":
            folder = args.out / dataset / "paper"
            evaluate_one = partial(evaluate_paper, model, args=args)
            records = run_records(
                dataset, test_examples, folder, args, started, evaluate_one, calibration_examples
            )
            detectors, curves = [], {}
            notes = paper_notes(records) if records else []
            extra = {"protocol": "paper", "rule": PAPER_RULE.to_dict()}
        else:
            folder = args.out / dataset
            if summarise_only and not (folder / "calibration.json").is_file():
                print(f"{dataset}: no calibration in {folder}", flush=True)
                continue
            calibration = calibrate(model, calibration_examples, args, folder)
            print(f"{dataset}: calibration ready ({calibration['seconds']:.0f} s)", flush=True)
            evaluate_one = partial(evaluate, model, calibration=calibration, args=args)
            records = run_records(dataset, test_examples, folder, args, started, evaluate_one)
            detectors, curves = detector_rows(records) if records else ([], {})
            notes = calibration_notes(calibration)
            calibrated = {k: v for k, v in calibration.items() if k != "attribution"}
            extra = {"protocol": "calibrated", "calibration": calibrated}
        if not records:
            print(f"{dataset}: no records in {folder}", flush=True)
            continue
        rows = condition_rows(records, args.random_seeds)
        report(dataset, folder, rows, detectors, curves, notes, extra)


if __name__ == "__main__":
    main()
