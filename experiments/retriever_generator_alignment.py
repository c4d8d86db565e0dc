"""Retriever-generator alignment over N questions (RAG-E): WARG against Spearman and Pearson.

Retrieval runs over a corpus of every paragraph of the shipped samples (``--corpus``, first
``--corpus-n`` examples of each; the index is built once and kept in ``OUT/retriever``). For
each question and prompt condition of a preset (``--preset paper``: c1 the top ``k`` in rank
order, c2 the top ``k − k // 2`` then ``k // 2`` random documents, c3 the random ones first, c4
the top ``k`` shuffled; ``--preset code``: c2/c3 the top ``k`` and ``k`` random documents, c4 c2
shuffled; ``--n-random`` overrides the count; see :mod:`mechrag.retrieval.conditions`) the
embedded SmolLM2 answers, PMC-SHAP (``token_prob``) attributes its response to the prompt
documents, and we record WARG (tau = 1.5), Spearman and Pearson between the retriever's scores
and the generator's document scores, the Wasted Retrieval / Noise Distraction flags at k = 1,
3, 5 (ranks from 1) and whether the response is correct (``response_correct``: it holds the
reference answer, or token F1 >= 0.5; a yes/no answer must be its first word).

The retriever's scores are the prompt positions (``--retriever-scores position``, default, as
RAG-E's code) or the similarities (``similarity``). Records keep the similarities and the
generator's scores, so the summary recomputes every alignment score for the kind asked, also
for records written with the other kind or before this option (whose WARG was by similarity).

The IG phase compares the integrated-gradient baselines (``BASELINES``: [UNK], [PAD], [MASK],
zero word embeddings, zero input embeddings) by AIPC on the retriever: query tokens (target:
summed similarity to the top ``k``) for every question, the top document's tokens for the first
``--ig-documents`` questions; removed tokens become [MASK].

Records are appended to ``OUT/records.jsonl`` as they finish; a rerun skips what is there. Keys
name the preset (and ``--n-random``) for c2-c4; c1 is the same prompt in every preset (and
before the presets), so its records are shared. Records from before the presets (mechrag's old
c2-c4: ``ceil(k / 2)`` random documents) are summarised under the preset label ``pre-presets``.
c2-c4 keys also name the per-question draws: records drawn before them (one draw, one ``c4``
shuffle, for every question) are summarised apart, labelled "one draw for every question".

    OMP_NUM_THREADS=1 python experiments/retriever_generator_alignment.py --n 50 --k 10 \\
        --preset paper --out runs/alignment
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from mechrag.data import load_hotpotqa
from mechrag.metrics.agreement import pearson, spearman
from mechrag.metrics.alignment import alignment_flags, bootstrap_ci, position_scores, warg
from mechrag.metrics.answers import response_correct
from mechrag.models.loading import load_model
from mechrag.results.files import append_jsonl, read_jsonl, write_text_atomic
from mechrag.retrieval import (
    BASELINES,
    CONDITIONS,
    Retriever,
    RetrieverIntegratedGradients,
    build_corpus,
    load_encoder,
    token_aipc,
)
from mechrag.retrieval.conditions import DRAWS, PRESETS, PromptConditions
from mechrag.retrieval.options import RETRIEVER_SCORES
from mechrag.retrieval.rag_e import explain

FLAG_KS = (1, 3, 5)
FLAGS = [f"{m}@{k}" for m in ("wr", "nd") for k in FLAG_KS]
PRE_PRESETS = "pre-presets"  # the label of c2-c4 records written before the presets
ONE_DRAW = "one draw for every question"  # c2-c4 records without ``draws`` (before DRAWS)


def load_retriever(out: Path, datasets: list[str], n: int | None) -> Retriever:
    folder = out / "retriever"
    encoder = load_encoder()
    if (folder / "index.faiss").is_file():
        return Retriever.load(folder, encoder)
    start = time.perf_counter()
    retriever = Retriever.build(build_corpus(datasets, n), encoder)
    retriever.save(folder)
    print(f"indexed {len(retriever.corpus)} documents in {time.perf_counter() - start:.0f} s")
    return retriever


def preset_label(args) -> str:
    """The preset as records name it: ``paper``, ``code``, or e.g. ``code, n_random=2``."""
    return args.preset if args.n_random is None else f"{args.preset}, n_random={args.n_random}"


def alignment_key(question_id: str, condition: str, preset: str) -> str:
    """c1 is the same prompt in every preset: one record serves all. c2-c4 keys name the
    per-question draws (records before them hold one draw for every question)."""
    if condition == "c1":
        return f"alignment/{question_id}/c1"
    return f"alignment/{preset}/{question_id}/{condition}/{DRAWS}"


def run_alignment(args, retriever, examples, records_path, done) -> None:
    model = load_model()
    conditions = PromptConditions(preset=args.preset, n_random=args.n_random, seed=args.seed)
    preset = preset_label(args)
    for example in examples:
        for condition in args.conditions:
            key = alignment_key(example.id, condition, preset)
            if key in done:
                continue
            start = time.perf_counter()
            result = explain(
                example.query,
                retriever,
                model,
                k=args.k,
                condition=condition,
                conditions=conditions,
                retriever_scores=args.retriever_scores,
                seed=args.seed,
                max_new_tokens=args.max_new_tokens,
                budget=args.budget,
                explain_query=False,
                explain_documents=False,
            )
            summary = result.summary()
            gold = set(retriever.corpus.documents_of("hotpotqa", example.id, gold_only=True))
            record = {
                "key": key,
                "phase": "alignment",
                "question_id": example.id,
                "condition": condition,
                "preset": None if condition == "c1" else preset,
                "draws": None if condition == "c1" else DRAWS,
                "retriever_score_kind": args.retriever_scores,
                **{name: summary[name] for name in ("warg", "spearman", "pearson", "response")},
                **{flag: summary.get(flag) for flag in FLAGS},
                "correct": response_correct(result.response, [example.answer]),
                "answer": example.answer,
                "gold_retrieved": sum(h.document.id in gold for h in result.hits),
                "similarities": result.similarities.tolist(),
                "generator_scores": result.generator.scores.tolist(),
                "retrieved": result.condition.retrieved,
                "model_calls": result.generator.model_calls,
                "seconds": time.perf_counter() - start,
            }
            append_jsonl(records_path, record)
            print(
                f"{key}: WARG {record['warg']:+.2f} rho {record['spearman']:+.2f} "
                f"correct {record['correct']} ({record['seconds']:.0f} s)",
                flush=True,
            )


def run_ig(args, retriever, examples, records_path, done) -> None:
    encoder = retriever.query_encoder
    for index, example in enumerate(examples[: args.ig_questions]):
        hits = retriever.search(example.query, args.k)
        top = retriever.embed_documents([h.document for h in hits])
        query_embedding = retriever.embed_query(example.query)
        for baseline in BASELINES:
            ig = RetrieverIntegratedGradients.from_retriever(
                retriever, baseline=baseline, n_steps=args.n_steps, warn=False
            )
            sides = [("query", example.query, top, ig.explain_query)]
            if index < args.ig_documents:
                text = hits[0].document.embedding_text
                sides.append(("document", text, query_embedding[None], ig.explain_document))
            for side, text, fixed, method in sides:
                key = f"ig/{example.id}/{baseline}/{side}"
                if key in done:
                    continue
                start = time.perf_counter()
                attribution = method(text, fixed if side == "query" else fixed[0])
                record = {
                    "key": key,
                    "phase": "ig",
                    "question_id": example.id,
                    "baseline": baseline,
                    "side": side,
                    "n_tokens": len(attribution.tokens),
                    "completeness": attribution.completeness,
                    "aipc": token_aipc(attribution, encoder, fixed),
                    "seconds": time.perf_counter() - start,
                }
                append_jsonl(records_path, record)
                print(
                    f"{key}: completeness {record['completeness']:.4f} AIPC {record['aipc']:+.3f}",
                    flush=True,
                )


def markdown(frame: pd.DataFrame, index: bool = False) -> str:
    """A pipe table (no extra dependency)."""
    frame = frame.reset_index() if index else frame
    cells = [[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row] for row in frame.values]
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * frame.shape[1]]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def mean_ci(values, seed: int) -> str:
    mean, low, high = bootstrap_ci(values, seed=seed)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def realign(record: dict, kind: str) -> dict:
    """The record with WARG, Spearman, Pearson and the flags recomputed for the retriever's
    ``kind`` of scores (records before the option hold the similarities as
    ``retriever_scores``), its correctness judged again by :func:`response_correct` (records
    before it hold a raw substring test), and its preset label (c1: ``all``; c2-c4 records
    without per-question draws say so)."""
    similarities = np.asarray(record.get("similarities", record.get("retriever_scores")), float)
    generator = np.asarray(record["generator_scores"], float)
    scores = position_scores(len(similarities)) if kind == "position" else similarities
    several = len(scores) > 1
    ks = tuple(k for k in FLAG_KS if k <= len(scores))
    preset = "all" if record["condition"] == "c1" else record.get("preset", PRE_PRESETS)
    if record["condition"] != "c1" and record.get("draws") != DRAWS:
        preset = f"{preset} ({ONE_DRAW})"
    return {
        **record,
        "preset": preset,
        "correct": response_correct(record["response"], [record["answer"]]),
        "warg": warg(scores, generator),
        "spearman": spearman(scores, generator) if several else 0.0,
        "pearson": pearson(scores, generator) if several else 0.0,
        **{flag: np.nan for flag in FLAGS},
        **alignment_flags(scores, generator, ks),
    }


def summarise(records: list[dict], seed: int, kind: str = "position") -> str:
    """Markdown tables from the records, the alignment with the retriever's ``kind`` of scores."""
    parts = []
    alignment = pd.DataFrame([realign(r, kind) for r in records if r["phase"] == "alignment"])
    if len(alignment):
        rows = []
        for (condition, preset), group in alignment.groupby(["condition", "preset"]):
            row = {"condition": condition, "preset": preset, "n": len(group)}
            for name in ("warg", "spearman", "pearson"):
                row[f"{name} (mean [95% CI])"] = mean_ci(group[name], seed)
            row["correct"] = f"{group['correct'].mean():.2f}"
            row["s per question"] = f"{group['seconds'].mean():.0f}"
            rows.append(row)
        parts.append(
            f"### WARG, Spearman, Pearson per condition (retriever scores: {kind})\n\n"
            + markdown(pd.DataFrame(rows))
        )
        flags = alignment[FLAGS].astype(float).groupby([alignment.condition, alignment.preset])
        flags = flags.mean()
        parts.append(
            "### Wasted Retrieval@k and Noise Distraction@k (rates; k counts ranks "
            "from 1)\n\n" + markdown(flags.round(3), index=True)
        )
        tables = []
        for label, group in [
            ("all conditions", alignment),
            *[(f"{c} ({p})", g) for (c, p), g in alignment.groupby(["condition", "preset"])],
        ]:
            high = group["warg"] > 0.5
            table = pd.crosstab(high, group["correct"]).reindex(
                index=[False, True], columns=[False, True], fill_value=0
            )
            degenerate = (table.sum(axis=0) == 0).any() or (table.sum(axis=1) == 0).any()
            chi2, p = (np.nan, np.nan) if degenerate else stats.chi2_contingency(table)[:2]
            tables.append(
                {
                    "rows": label,
                    "n": len(group),
                    "WARG>0.5 & correct": int(table.loc[True, True]),
                    "WARG>0.5 & wrong": int(table.loc[True, False]),
                    "WARG<=0.5 & correct": int(table.loc[False, True]),
                    "WARG<=0.5 & wrong": int(table.loc[False, False]),
                    "chi2": chi2,
                    "p": p,
                }
            )
        parts.append(
            "### WARG > 0.5 against answer correctness (chi-square, Yates)\n\n"
            + markdown(pd.DataFrame(tables))
        )
    ig = pd.DataFrame([r for r in records if r["phase"] == "ig"])
    if len(ig):
        rows = []
        for (side, baseline), group in ig.groupby(["side", "baseline"]):
            rows.append(
                {
                    "side": side,
                    "baseline": baseline,
                    "n": len(group),
                    "AIPC (mean [95% CI])": mean_ci(group["aipc"], seed),
                    "completeness (min..max)": f"{group['completeness'].min():.4f}.."
                    f"{group['completeness'].max():.4f}",
                    "s/explanation": f"{group['seconds'].mean():.1f}",
                }
            )
        parts.append(
            "### IG baselines by AIPC ([MASK] replacement, MoRF - LeRF)\n\n"
            + markdown(pd.DataFrame(rows))
        )
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="HotpotQA questions")
    parser.add_argument(
        "--offset", type=int, default=0, help="skip the first questions (run shards in parallel)"
    )
    parser.add_argument("--k", type=int, default=3, help="documents retrieved")
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    parser.add_argument("--preset", choices=PRESETS, default="paper", help="prompt conditions")
    parser.add_argument(
        "--n-random", type=int, default=None, help="random documents in c2-c4 (preset's)"
    )
    parser.add_argument(
        "--retriever-scores",
        choices=RETRIEVER_SCORES,
        default="position",
        help="the retriever's side of WARG, the flags and the correlations",
    )
    parser.add_argument(
        "--corpus",
        nargs="+",
        default=["hotpotqa"],
        help="shipped samples whose paragraphs form the corpus",
    )
    parser.add_argument(
        "--corpus-n", type=int, default=None, help="examples per sample in the corpus (all)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument(
        "--budget", type=int, default=None, help="subsets pmcSHAP scores (default 10 k)"
    )
    parser.add_argument("--phase", choices=("alignment", "ig", "both"), default="both")
    parser.add_argument("--ig-questions", type=int, default=50)
    parser.add_argument("--ig-documents", type=int, default=5)
    parser.add_argument("--n-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/alignment")
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    records_path = out / "records.jsonl"
    if not args.summary_only:
        retriever = load_retriever(out, args.corpus, args.corpus_n)
        examples = load_hotpotqa(n=args.n, unit="document")[args.offset :]
        done = {r["key"] for r in read_jsonl(records_path)}
        if args.phase in ("ig", "both"):
            run_ig(args, retriever, examples, records_path, done)
        if args.phase in ("alignment", "both"):
            run_alignment(args, retriever, examples, records_path, done)
    summary = summarise(read_jsonl(records_path), args.seed, args.retriever_scores)
    write_text_atomic(out / "summary.md", summary + "\n")
    print(summary)


if __name__ == "__main__":
    main()
