"""Benchmark: screened ARC-JSD (``case.arc_jsd(screen=m)``) against exact ARC-JSD.

For each context size n the same examples, teacher-forced responses and thread count serve
both; each run starts from a fresh case (no shared cache), so the times include the full-context
pass. Reports the speed-up and how often the screened top-1 equals the exact top-1, and the mean
overlap of the screened and exact top-3 sets, how often the exact top-1 is among the
candidates, and the Spearman correlation of the screen's estimates with the exact scores, for
each screen proxy (``fisher``, ``loglik``) and number of candidates ``m``.

Contexts of n sentences:

* n <= 40: HotpotQA with all ten paragraphs (``load_hotpotqa(distractors=None)``), examples with
  at least n sentences, truncated to the gold sentences plus the first non-gold sentences in
  reading order until n;
* n > 40: SQuAD whole articles: the question's paragraph followed by the article's other
  paragraphs (in file order, wrapping around) until n sentences; gold = the answer sentences.

    python benchmarks/screening_speed.py --sizes 10 20 40 80 --examples 3 --screen 3 5
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from mechrag import Case, SourceScreen, load_model
from mechrag.attribution.screening import PROXIES
from mechrag.data import RAGExample, load_hotpotqa, load_squad, shipped_path
from mechrag.metrics import spearman
from mechrag.sources import Source, source_id


def truncated_hotpotqa(n: int, count: int) -> list[RAGExample]:
    """HotpotQA examples cut to ``n`` sentences: every gold sentence, then the first others."""
    examples = []
    for example in load_hotpotqa(distractors=None):
        if len(example.sources) < n or len(example.gold_ids) > n:
            continue
        gold = set(example.gold_ids)
        others = [s.id for s in example.sources if s.id not in gold][: n - len(gold)]
        keep = gold | set(others)
        sources = [s for s in example.sources if s.id in keep]
        examples.append(
            RAGExample(
                example.id, "hotpotqa", example.query, sources, example.gold_ids, example.answer
            )
        )
        if len(examples) == count:
            break
    return examples


def squad_articles(n: int, count: int) -> list[RAGExample]:
    """SQuAD questions over their article: own paragraph first, then the others, ``n`` sentences."""
    import json

    rows = [json.loads(line) for line in shipped_path("squad").read_text().splitlines() if line]
    paragraphs: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        article = paragraphs.setdefault(row["title"], [])
        if tuple(row["sentences"]) not in article:
            article.append(tuple(row["sentences"]))
    examples, seen_titles = [], set()
    for row, example in zip(rows, load_squad()):
        article = paragraphs[row["title"]]
        if row["title"] in seen_titles or sum(map(len, article)) < n or not example.gold_ids:
            continue
        seen_titles.add(row["title"])  # one question per article: different contexts
        start = article.index(tuple(row["sentences"]))
        sources: list[Source] = []
        for offset in range(len(article)):
            p_index = (start + offset) % len(article)
            for s_index, text in enumerate(article[p_index]):
                if len(sources) < n and text.strip():
                    sources.append(
                        Source(source_id(p_index, s_index), text.strip(), row["title"], p_index)
                    )
        gold = [f"p{start}s{g}" for g in row["gold_sentence_ids"]]
        examples.append(
            RAGExample(row["id"], "squad", row["question"], sources, gold, example.answer)
        )
        if len(examples) == count:
            break
    return examples


def sized_examples(n: int, count: int) -> list[RAGExample]:
    return truncated_hotpotqa(n, count) if n <= 40 else squad_articles(n, count)


def top_overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    return len(set(a[:k]) & set(b[:k])) / k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--screen", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--proxies", nargs="+", choices=PROXIES, default=list(PROXIES))
    parser.add_argument("--response-tokens", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model()
    print(
        f"threads={args.threads} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})  "
        f"response tokens <= {args.response_tokens}  examples per n={args.examples}\n"
    )
    print(
        "| n | data | prompt tokens | proxy | m | exact s | screened s | speed-up | top-1 agree "
        "| top-3 overlap | exact top-1 in candidates | Spearman screen vs exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        examples = sized_examples(n, args.examples)
        rows = {(proxy, m): [] for proxy in args.proxies for m in args.screen}
        lengths = []
        for example in examples:
            first = Case.from_example(model, example, max_new_tokens=args.response_tokens)
            response = first.response_ids
            lengths.append(len(first.builder.ids()))
            start = time.perf_counter()
            exact = Case.from_example(model, example, response).arc_jsd()
            t_exact = time.perf_counter() - start
            for proxy, m in rows:
                start = time.perf_counter()
                case = Case.from_example(model, example, response)
                screened = case.arc_jsd(screen=SourceScreen(m, proxy=proxy))
                t_screen = time.perf_counter() - start
                candidates = np.flatnonzero(screened.metadata["exact"])
                estimates = np.abs(screened.metadata["screen_estimates"])
                rows[proxy, m].append(
                    (
                        t_exact,
                        t_screen,
                        screened.ranking[0] == exact.ranking[0],
                        top_overlap(screened.ranking, exact.ranking, 3),
                        exact.ranking[0] in candidates,
                        spearman(estimates, exact.scores),
                    )
                )
        for (proxy, m), values in rows.items():
            if not values:
                continue
            t_exact, t_screen, top1, top3, recall, rho = (
                np.array(v, dtype=float) for v in zip(*values)
            )
            print(
                f"| {n} | {examples[0].dataset} x{len(examples)} | {np.mean(lengths):.0f} "
                f"| {proxy} | {m} | {t_exact.sum():.1f} | {t_screen.sum():.1f} "
                f"| {t_exact.sum() / t_screen.sum():.2f}x | {top1.mean():.2f} | {top3.mean():.2f} "
                f"| {recall.mean():.2f} | {rho.mean():.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
