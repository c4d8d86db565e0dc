"""Benchmark: how many Fisher probes the screen needs, random signs against drawn tokens.

The Fisher screen (``mechrag.attribution.screening``) estimates ``F_ii`` from random-sign probes
over the whole vocabulary. The alternative is to draw one token per response position from the
model's distribution. Both are unbiased; this compares their noise on HotpotQA cases (all ten
paragraphs cut to ``n`` sentences): Spearman of each estimate, over seeds, against a reference
of ``--reference-probes`` sign probes, and against exact ARC-JSD.

    python benchmarks/screen_probes.py --n 10 --examples 3
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from screening_speed import sized_examples

from mechrag import Case, load_model
from mechrag.attribution.screening import (
    context_end,
    gated_response_logprobs,
    screen_sources,
    source_token_owners,
)
from mechrag.metrics import spearman


def drawn_token_fisher(case: Case, probes: int, seed: int) -> np.ndarray:
    """``F_ii / 8`` from ``probes`` rows, each with one token drawn per position from ``P_t``."""
    owners = source_token_owners(case.builder)
    past = case.context_cache(context_end(owners), probes)
    with torch.enable_grad():
        gates = torch.ones(probes, case.n_sources).requires_grad_(True)
        logprobs = gated_response_logprobs(
            case.model, case.builder, case.response_ids, gates, owners, past
        )
        generator = torch.Generator().manual_seed(seed)
        probabilities = case.reference_logprobs().float().exp()
        draws = torch.multinomial(probabilities, probes, replacement=True, generator=generator)
        objective = logprobs.gather(-1, draws.T[..., None]).sum()
        (gradient,) = torch.autograd.grad(objective, gates)
    return (gradient.double().numpy() ** 2).mean(0) / 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="sources per case")
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--probes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--reference-probes", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model()
    print(f"threads={args.threads}  n={args.n}  seeds={args.seeds}\n")
    print("| case | probes | kind | Spearman vs reference | Spearman vs exact ARC-JSD |")
    print("|---|---|---|---|---|")
    for example in sized_examples(args.n, args.examples):
        case = Case.from_example(model, example, max_new_tokens=12)
        exact = case.arc_jsd().scores
        chunks = range(0, args.reference_probes, 64)  # 64 rows at a time bounds the memory
        reference = np.mean(
            [screen_sources(case, samples=64, seed=10_000 + c).estimates for c in chunks], 0
        )
        print(
            f"| {example.id[:8]} | {args.reference_probes} | sign (reference) | 1 "
            f"| {spearman(reference, exact):.2f} |"
        )
        for probes in args.probes:
            for kind in ("sign", "drawn"):
                estimates = [
                    screen_sources(case, samples=probes, seed=seed).estimates
                    if kind == "sign"
                    else drawn_token_fisher(case, probes, seed)
                    for seed in range(args.seeds)
                ]
                to_reference = np.mean([spearman(e, reference) for e in estimates])
                to_exact = np.mean([spearman(e, exact) for e in estimates])
                print(
                    f"| {example.id[:8]} | {probes} | {kind} | {to_reference:.2f} "
                    f"| {to_exact:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
