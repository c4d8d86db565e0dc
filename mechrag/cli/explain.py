"""``mechrag explain``: retrieve, generate and explain both sides of one query (RAG-E).

    mechrag explain --query "..." (--corpus FILE | --dataset hotpotqa) [--k 10] [--out DIR]

The corpus file is plain text, documents separated by blank lines. Writes
``explanation.json`` (WARG, the WR/ND flags, every IG completeness ratio, both attributions) and
the plots (query and document saliency, document x response-token heatmap, retriever rank
against generator rank) to ``--out``. Needs the retrieval extra (``pip install
'mechrag[retrieval]'``).
"""

from __future__ import annotations

import argparse

from mechrag.cli.common import (
    add_html_argument,
    add_model_arguments,
    add_protocol_argument,
    add_question_arguments,
    check_html,
    check_question,
    engine_from,
    load_model_from,
    positive_int,
    print_written,
    write_html,
)
from mechrag.errors import InputError, require_extra

EXAMPLE = (
    'mechrag explain --query "Which team won the 1998 final?" --dataset hotpotqa --out '
    "out/explain --html"
)
HELP = "retrieve, generate and explain retriever and generator (RAG-E)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    require_extra("retrieval", "mechrag explain")
    from mechrag.protocols import EXPLAIN_PROTOCOL
    from mechrag.retrieval.conditions import CONDITIONS, PRESETS
    from mechrag.retrieval.corpus import CORPUS_DATASETS
    from mechrag.retrieval.options import BASELINES, RETRIEVER_SCORES

    add_question_arguments(parser, context_file=False)
    corpus = parser.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--corpus", help="text file, documents separated by blank lines")
    corpus.add_argument("--dataset", choices=CORPUS_DATASETS, help="a shipped sample as corpus")
    parser.add_argument(
        "--k", type=positive_int, default=None, help="documents retrieved (default: the protocol's)"
    )
    parser.add_argument("--condition", choices=CONDITIONS, default="c1")
    add_protocol_argument(parser, default=EXPLAIN_PROTOCOL)
    parser.add_argument("--preset", choices=PRESETS, help="conditions (default: protocol's)")
    parser.add_argument("--n-random", type=positive_int, help="random documents (c2-c4)")
    parser.add_argument(
        "--retriever-scores",
        choices=RETRIEVER_SCORES,
        default=None,
        help="WARG's retriever side (default: the protocol's)",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_model_arguments(parser)
    parser.add_argument("--budget", type=positive_int, help="subsets PMC-SHAP may score")
    parser.add_argument("--baseline", choices=BASELINES, default="unk", help="IG baseline")
    parser.add_argument("--n-steps", type=positive_int, default=100, help="IG integration points")
    parser.add_argument("--out", default=None, help="folder for explanation.json and the plots")
    add_html_argument(parser)


def run(args: argparse.Namespace) -> None:
    from mechrag.models import adapter
    from mechrag.retrieval.conditions import PromptConditions
    from mechrag.retrieval.corpus import Corpus, build_corpus
    from mechrag.retrieval.encoder import load_encoder
    from mechrag.retrieval.rag_e import documents_retrieved, explain
    from mechrag.retrieval.retriever import Retriever

    check_question(args)
    check_html(args)
    k = documents_retrieved(args.protocol, args.k)
    conditions = PromptConditions.for_protocol(
        args.protocol, args.preset, n_random=args.n_random, seed=args.seed
    )
    corpus = Corpus.from_text_file(args.corpus) if args.corpus else build_corpus([args.dataset])
    if k > len(corpus):
        raise InputError(f"--k {k} exceeds the corpus size {len(corpus)}")
    model = load_model_from(args)
    # The retriever's encoder (and integrated gradients on it) runs beside the generator.
    retriever = Retriever.build(corpus, query_encoder=load_encoder(device=adapter.device(model)))
    result = explain(
        args.query,
        retriever,
        model,
        k=k,
        protocol=args.protocol,
        condition=args.condition,
        conditions=conditions,
        retriever_scores=args.retriever_scores,
        seed=args.seed,
        response=args.response,
        max_new_tokens=args.max_new_tokens,
        budget=args.budget,
        baseline=args.baseline,
        n_steps=args.n_steps,
        engine=engine_from(args, model),
    )
    print(f"query:    {result.query}\nresponse: {result.response!r}\n")
    print(result.to_frame().drop(columns=["ig_completeness"]).to_string(index=False))
    flags = " ".join(f"{name}={int(value)}" for name, value in result.flags.items())
    print(f"\nWARG = {result.warg:+.3f} (tau {result.tau}); {flags}")
    ratios = ", ".join(f"{name} {value:.4f}" for name, value in result.completeness.items())
    print(f"IG completeness: {ratios}")
    if args.out:
        print_written(result.save(args.out, "explanation"))
        print_written(write_html(args))
