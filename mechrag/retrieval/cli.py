"""``mechrag explain``: retrieve, generate and explain both sides of one query.

    mechrag explain --query "..." (--corpus FILE | --dataset hotpotqa) [--k 5] [--out DIR]

The corpus file is plain text, documents separated by blank lines. Writes
``explanation.json`` (WARG, the WR/ND flags, every IG completeness ratio, both attributions) and
the plots (query and document saliency, document x response-token heatmap, retriever rank
against generator rank) to ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mechrag.retrieval.conditions import CONDITIONS
from mechrag.retrieval.corpus import CORPUS_DATASETS
from mechrag.retrieval.integrated_gradients import BASELINES


def cmd_explain(args: argparse.Namespace) -> None:
    from mechrag import load_model
    from mechrag.outputs import write_text_atomic
    from mechrag.pipeline import explain
    from mechrag.plots.sources import save_figure
    from mechrag.retrieval.corpus import Corpus, build_corpus
    from mechrag.retrieval.retriever import Retriever

    if args.k < 1:
        raise ValueError(f"--k must be at least 1, got {args.k}")
    corpus = Corpus.from_text_file(args.corpus) if args.corpus else build_corpus([args.dataset])
    if args.k > len(corpus):
        raise ValueError(f"--k {args.k} exceeds the corpus size {len(corpus)}")
    retriever = Retriever.build(corpus)
    model = load_model(args.model)
    result = explain(
        args.query,
        retriever,
        model,
        k=args.k,
        condition=args.condition,
        seed=args.seed,
        response=args.response,
        max_new_tokens=args.max_new_tokens,
        budget=args.budget,
        baseline=args.baseline,
        n_steps=args.n_steps,
    )
    print(f"query:    {result.query}\nresponse: {result.response!r}\n")
    print(result.to_frame().drop(columns=["ig_completeness"]).to_string(index=False))
    flags = " ".join(f"{name}={int(value)}" for name, value in result.flags.items())
    print(f"\nWARG = {result.warg:+.3f} (tau {result.tau}); {flags}")
    ratios = ", ".join(f"{name} {value:.4f}" for name, value in result.completeness.items())
    print(f"IG completeness: {ratios}")
    if args.out:
        out = Path(args.out)
        write_text_atomic(out / "explanation.json", result.to_json())
        figures = {
            "query_saliency": result.plot_query_saliency(),
            "tokens": result.plot_tokens(),
            "ranks": result.plot_ranks(),
        }
        for index, document in enumerate(result.documents):
            figures[f"document_{index + 1}_{document.id}_saliency"] = result.plot_document_saliency(
                index
            )
        for name, figure in figures.items():
            save_figure(figure, out / name)
        print(f"wrote explanation.json and {len(figures)} plots to {out}")


def add_parser(commands) -> argparse.ArgumentParser:
    """Register ``explain`` on the ``mechrag`` subcommands."""
    parser = commands.add_parser(
        "explain", help="retrieve, generate and explain retriever and generator (RAG-E)"
    )
    parser.add_argument("--query", required=True)
    corpus = parser.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--corpus", help="text file, documents separated by blank lines")
    corpus.add_argument("--dataset", choices=CORPUS_DATASETS, help="a shipped sample as corpus")
    parser.add_argument("--k", type=int, default=5, help="documents retrieved")
    parser.add_argument("--condition", choices=CONDITIONS, default="c1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="HF id, local folder or .gguf")
    parser.add_argument("--response", default=None, help="response to explain (default: generate)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--budget", type=int, default=None, help="subsets PMC-SHAP may score")
    parser.add_argument("--baseline", choices=BASELINES, default="unk", help="IG baseline")
    parser.add_argument("--n-steps", type=int, default=100, help="IG integration points")
    parser.add_argument("--out", default=None, help="folder for explanation.json and the plots")
    parser.set_defaults(handler=cmd_explain)
    return parser
