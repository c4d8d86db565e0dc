"""Side by side: the ``context-cite`` package, our ContextCite surrogate and ARC-JSD.

Same examples (seeded scenarios), same model weights (the embedded SmolLM2 as a plain HF model),
same prompt (chat template over ``Context: ...\\n\\nQuery: ...``), same sources and the same
response. ``context-cite`` is an optional dependency with heavy requirements (scikit-learn,
spacy, nltk, datasets): install the ``peers`` extra, or use a separate environment that also
sees mechrag::

    pip install -e ".[peers]"
    python experiments/contextcite_side_by_side.py --cases 1

Compatibility notes for context-cite 0.0.4 with transformers 5: its sentence splitter needs
nltk's punkt data (a download, unavailable offline), so sources come from our own partitioner;
the response is set on the citer instead of being regenerated, so all methods explain the same
tokens; ``as_dataframe=True`` is not used (it breaks on pandas 3).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from peers import context_cite_partitioner

from mechrag import Case, load_model
from mechrag.data.scenarios import make_scenarios
from mechrag.metrics import pearson
from mechrag.models import converted_gguf_dir, embedded_gguf_path
from mechrag.prompts import DEFAULT_TEMPLATE


def package_scores(hf_model, tokenizer, case, response: str, ablations: int, seed: int):
    """Scores from ``context_cite.ContextCiter`` on our sources and response."""
    from context_cite import ContextCiter

    partitioner = context_cite_partitioner(case.sources)
    citer = ContextCiter(
        hf_model,
        tokenizer,
        partitioner.context,
        case.query,
        num_ablations=ablations,
        batch_size=1,
        prompt_template=DEFAULT_TEMPLATE,
        partitioner=partitioner,
    )
    # Explain our response rather than regenerating one: the package reads it from its cache.
    _, prompt = citer._get_prompt_ids(return_prompt=True)
    citer._cache["output"] = prompt + response
    return np.asarray(citer.get_attributions(verbose=False), dtype=float)


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2, help="scenario cases per kind")
    parser.add_argument("--documents", type=int, default=6)
    parser.add_argument("--ablations", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = converted_gguf_dir(embedded_gguf_path())
    hf_model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bridge = load_model()
    agree = {"ours_vs_package": [], "ours_vs_arc_jsd": [], "package_vs_arc_jsd": []}
    for case in make_scenarios(args.cases, args.seed, args.documents):
        # Separate cases, so neither method reuses subsets the other scored (fair timings).
        ours, t_ours = timed(
            lambda case=case: (
                Case.from_example(bridge, case)
                .attribute("contextcite", budget=args.ablations, seed=args.seed)
                .scores
            )
        )
        arc, t_arc = timed(lambda case=case: Case.from_example(bridge, case).arc_jsd().scores)
        theirs, t_theirs = timed(
            lambda case=case: package_scores(
                hf_model, tokenizer, case, case.response, args.ablations, args.seed
            )
        )
        tops = {"ours": ours.argmax(), "package": theirs.argmax(), "arc_jsd": arc.argmax()}
        agree["ours_vs_package"].append(tops["ours"] == tops["package"])
        agree["ours_vs_arc_jsd"].append(tops["ours"] == tops["arc_jsd"])
        agree["package_vs_arc_jsd"].append(tops["package"] == tops["arc_jsd"])
        keys = [case.sources[i].id for i in case.key_positions]
        print(f"\n{case.id}: {case.query!r} -> {case.response!r} (keys {keys})")
        for name, scores, seconds in (
            ("ours (contextcite)", ours, t_ours),
            ("context-cite pkg", theirs, t_theirs),
            ("arc_jsd", arc, t_arc),
        ):
            print(
                f"  {name:19s} {seconds:6.1f}s  top={case.sources[scores.argmax()].id:6s} "
                + " ".join(f"{v:+.3f}" for v in scores)
            )
        print(f"  pearson ours vs package: {pearson(ours, theirs):.3f}")
    print("\ntop-1 agreement over", len(agree["ours_vs_package"]), "cases:")
    for name, hits in agree.items():
        print(f"  {name}: {np.mean(hits):.2f}")


if __name__ == "__main__":
    main()
