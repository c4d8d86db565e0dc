"""Benchmark: the scoring engine against a naive one-forward-per-ablation ARC-JSD loop.

Both compute the same sentence-level ARC-JSD scores on the same HotpotQA examples and the same
teacher-forced responses, in one process with a fixed thread count, alternating which goes
first. The naive loop is how ARC-JSD is usually written: one unpadded sequence per forward pass,
full-vocabulary logits at every position, then the response slice. Prints seconds and the ratio.

Next to each measured ratio it prints the exact-computation bounds of that engine, from what
both actually ran: the token bound (naive tokens processed / engine tokens processed, padding
included, cached prefix tokens excluded) and a FLOP-ish bound that also counts the vocabulary
projection (``2 * body parameters`` per input token, plus ``2 * d_model * vocab`` per position
projected: every position for the naive loop, the response positions for the engine; attention's
quadratic term is left out).

    python benchmarks/engine_speed.py --n 3 --threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from baselines import Work, naive_arc_jsd

from mechrag import Case, Engine, PromptBuilder, load_model
from mechrag.data import load_hotpotqa
from mechrag.models import adapter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="HotpotQA examples")
    parser.add_argument("--distractors", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--response-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default=None, help="default: CUDA when available")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(device=args.device)
    cases = []
    for example in load_hotpotqa(n=args.n, distractors=args.distractors):
        case = Case.from_example(model, example, max_new_tokens=args.response_tokens)
        cases.append((example, case.response_ids))

    engines = {
        "engine (batched, response-only logits)": {"reuse_prefix": False},
        "engine + KV-prefix reuse (default)": {"reuse_prefix": True},
    }
    timings = dict.fromkeys([*engines, "naive"], 0.0)
    work = {name: Work() for name in timings}
    for repeat in range(args.repeats):
        for example, response_ids in cases:
            names = list(timings) if repeat % 2 == 0 else list(reversed(timings))
            scores = {}
            for name in names:
                start = time.perf_counter()
                if name == "naive":
                    builder = PromptBuilder(model.tokenizer, example.query, example.sources)
                    scores[name] = naive_arc_jsd(model, builder, response_ids, work[name])
                else:
                    engine = Engine(model, progress=False, **engines[name])
                    case = Case.from_example(model, example, response_ids, engine=engine)
                    scores[name] = case.arc_jsd().scores
                    work[name].tokens += engine.tokens_processed
                    work[name].projected += (case.n_sources + 1) * len(response_ids)
                timings[name] += time.perf_counter() - start
            for name in engines:
                np.testing.assert_allclose(scores[name], scores["naive"], atol=1e-3)
    sources = sum(len(e.sources) for e, _ in cases)
    print(
        f"threads={args.threads}  examples={len(cases)}  sources={sources}  "
        f"response tokens={args.response_tokens}  repeats={args.repeats}"
    )
    hf = adapter.hf_model(model)
    head = adapter.vocab_size(model) * model.cfg.d_model
    lookups = {
        id(p)
        for m in (hf.get_input_embeddings(), hf.get_output_embeddings())
        for p in m.parameters()
    }
    body = sum(p.numel() for p in hf.parameters() if id(p) not in lookups)
    naive_flops = work["naive"].flops(body, head)
    for name, seconds in timings.items():
        ratio = timings["naive"] / seconds
        token_bound = work["naive"].tokens / work[name].tokens
        flop_bound = naive_flops / work[name].flops(body, head)
        print(
            f"{name:<40} {seconds:8.1f} s   speed-up vs naive {ratio:5.2f}x   "
            f"bound: tokens {token_bound:5.2f}x, FLOP-ish {flop_bound:5.2f}x"
        )


if __name__ == "__main__":
    main()
