"""Retriever-generator alignment over N questions (RAG-E): WARG against Spearman and Pearson.

Retrieval runs over a corpus of every paragraph of the shipped samples (``--corpus``, first
``--corpus-n`` examples of each; the index is built once and kept in ``OUT/retriever``). For
each question and prompt condition (c1: the top ``k`` in rank order; c2: top ``k`` then random
documents; c3: random first; c4: c2 shuffled) the embedded SmolLM2 answers, PMC-SHAP
(``token_prob``) attributes its response to the prompt documents, and we record WARG
(tau = 1.5), Spearman and Pearson between the retriever's similarities and the generator's
document scores, the Wasted Retrieval / Noise Distraction flags at k = 1, 3, 5 (ranks from 1)
and whether the response contains the reference answer.

The IG phase compares the integrated-gradient baselines ([UNK], [PAD], [MASK], zero) by AIPC on
the retriever: query tokens (target: summed similarity to the top ``k``) for every question, the
top document's tokens for the first ``--ig-documents`` questions; removed tokens become [MASK].

Records are appended to ``OUT/records.jsonl`` as they finish; a rerun skips what is there.

    OMP_NUM_THREADS=1 python experiments/retriever_generator_alignment.py --n 50 --k 3 \\
        --out runs/alignment
"""

from __future__ import annotations

import argparse
import re
import string
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from mechrag.data import load_hotpotqa
from mechrag.metrics.alignment import bootstrap_ci
from mechrag.models import load_model
from mechrag.outputs import append_jsonl, read_jsonl, write_text_atomic
from mechrag.pipeline import explain
from mechrag.retrieval import (
    BASELINES,
    CONDITIONS,
    Retriever,
    RetrieverIntegratedGradients,
    build_corpus,
    load_encoder,
    token_aipc,
)

FLAGS = [f"{m}@{k}" for m in ("wr", "nd") for k in (1, 3, 5)]


def normalise_answer(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def answer_in_response(answer: str, response: str) -> bool:
    """Lenient correctness: the normalised reference answer occurs in the normalised response."""
    return bool(normalise_answer(answer)) and normalise_answer(answer) in normalise_answer(response)


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


def run_alignment(args, retriever, examples, records_path, done) -> None:
    model = load_model()
    for example in examples:
        for condition in args.conditions:
            key = f"alignment/{example.id}/{condition}"
            if key in done:
                continue
            start = time.perf_counter()
            result = explain(
                example.query,
                retriever,
                model,
                k=args.k,
                condition=condition,
                seed=args.seed,
                max_new_tokens=args.max_new_tokens,
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
                **{name: summary[name] for name in ("warg", "spearman", "pearson", "response")},
                **{flag: summary.get(flag) for flag in FLAGS},
                "correct": answer_in_response(example.answer, result.response),
                "answer": example.answer,
                "gold_retrieved": sum(h.document.id in gold for h in result.hits),
                "retriever_scores": result.retriever_scores.tolist(),
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


def summarise(records: list[dict], seed: int) -> str:
    """Markdown tables from the records."""
    parts = []
    alignment = pd.DataFrame([r for r in records if r["phase"] == "alignment"])
    if len(alignment):
        rows = []
        for condition, group in alignment.groupby("condition"):
            row = {"condition": condition, "n": len(group)}
            for name in ("warg", "spearman", "pearson"):
                row[f"{name} (mean [95% CI])"] = mean_ci(group[name], seed)
            row["correct"] = f"{group['correct'].mean():.2f}"
            row["s per question"] = f"{group['seconds'].mean():.0f}"
            rows.append(row)
        parts.append("### WARG, Spearman, Pearson per condition\n\n" + markdown(pd.DataFrame(rows)))
        flags = alignment.groupby("condition")[[f for f in FLAGS if f in alignment]].mean()
        parts.append(
            "### Wasted Retrieval@k and Noise Distraction@k (rates; k counts ranks "
            "from 1)\n\n" + markdown(flags.round(3), index=True)
        )
        tables = []
        for label, group in [
            ("all conditions", alignment),
            *[(c, g) for c, g in alignment.groupby("condition")],
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
    summary = summarise(read_jsonl(records_path), args.seed)
    write_text_atomic(out / "summary.md", summary + "\n")
    print(summary)


if __name__ == "__main__":
    main()
