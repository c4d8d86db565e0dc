"""Benchmark: mechrag's ContextCite surrogate against the ``context-cite`` package, equal ablations.

Same examples (HotpotQA sentences, gold + distractors), same weights (the embedded SmolLM2: the
package gets the Hugging Face model inside the bridge), same prompt, sources and teacher-forced
response, one process, a stated thread count. ``context-cite`` is optional (the ``peers``
extra); without it the script says so and exits 0.

    python benchmarks/contextcite_speed.py --n 3 --ablations 32 64 --threads 1
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np
import torch
from baselines import context_cite_partitioner

from mechrag import Case, load_model
from mechrag.data import load_hotpotqa
from mechrag.metrics import pearson
from mechrag.models import adapter

PACKAGE = "context_cite"


def package_available() -> bool:
    return importlib.util.find_spec(PACKAGE) is not None


def package_scores(case: Case, ablations: int, seed: int = 0) -> np.ndarray:
    """``context_cite.ContextCiter`` scores on the case's sources, prompt and response.

    The package's own sentence splitter needs nltk data (a download), so it gets the case's
    sources through a partitioner that renders them exactly as mechrag does; the response is
    set on the citer rather than regenerated, so both explain the same tokens.
    """
    from context_cite import ContextCiter

    torch.manual_seed(seed)
    np.random.seed(seed)
    partitioner = context_cite_partitioner(case.sources)
    citer = ContextCiter(
        adapter.hf_model(case.model),
        case.model.tokenizer,
        partitioner.context,
        case.query,
        num_ablations=ablations,
        batch_size=1,
        prompt_template=case.builder.template,
        partitioner=partitioner,
    )
    _, prompt = citer._get_prompt_ids(return_prompt=True)
    citer._cache["output"] = prompt + case.response_text
    return np.asarray(citer.get_attributions(verbose=False), dtype=float)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="HotpotQA examples")
    parser.add_argument("--distractors", type=int, default=2)
    parser.add_argument("--ablations", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--response-tokens", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not package_available():
        print(f"skipped: the {PACKAGE!r} package is not installed (pip install -e '.[peers]')")
        return 0
    torch.set_num_threads(args.threads)
    model = load_model()
    print(f"threads={args.threads}  examples={args.n}  ablations={args.ablations}")
    print("| ablations | mechrag s | package s | package / mechrag | pearson | top-1 agree |")
    print("|---|---|---|---|---|---|")
    examples = load_hotpotqa(n=args.n, distractors=args.distractors)
    responses = [
        Case.from_example(model, e, max_new_tokens=args.response_tokens).response_ids
        for e in examples
    ]
    for ablations in args.ablations:
        ours_s = theirs_s = 0.0
        correlations, agree = [], []
        for example, response in zip(examples, responses):
            start = time.perf_counter()
            case = Case.from_example(model, example, response)
            ours = case.attribute("contextcite", budget=ablations).scores
            ours_s += time.perf_counter() - start
            start = time.perf_counter()
            theirs = package_scores(case, ablations)
            theirs_s += time.perf_counter() - start
            correlations.append(pearson(ours, theirs))
            agree.append(ours.argmax() == theirs.argmax())
        print(
            f"| {ablations} | {ours_s:.1f} | {theirs_s:.1f} | {theirs_s / ours_s:.2f}x "
            f"| {np.mean(correlations):.2f} | {np.mean(agree):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
