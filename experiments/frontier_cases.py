"""What the frontier study and its replays share: the context sizes and their examples, the
cases rebuilt from exact ARC-JSD records, the run folders, the shipped weights' hash and the target
a ContextCite record was fitted on.

``frontier.py`` runs the methods; ``fit_size.py``, ``hierarchical_rules.py`` and
``attention_features.py`` replay its exact ARC-JSD records; ``faithfulness.py`` and the results
tables (``result_tables``) read which target a ContextCite record fitted. Scripts import this
module as their sibling (Python puts a script's folder first on its path; ``make_results.py``'s
folder is this one's).
"""

from __future__ import annotations

from pathlib import Path

# The repository's root: run folders sit there, wherever the command runs from.
REPOSITORY = Path(__file__).resolve().parent.parent
# The sizes that are a shipped sample's whole contexts: (data set, split).
WHOLE_CONTEXTS = {
    "hotpotqa": ("hotpotqa", "train"),
    "musique": ("musique", "train"),
    "hotpotqa_dev": ("hotpotqa", "dev"),
    "musique_dev": ("musique", "dev"),
}
SIZES = ("10", "20", "40", *WHOLE_CONTEXTS, "squad")
HIERARCHICAL_DOCUMENTS = 2
EVERY_EXAMPLE = 10_000  # examples_of_size's count that takes a whole sample
# The target of the ContextCite records made before records named theirs (``value``): the summed
# per-token log-odds, mechrag's ContextCite default before 0.3; context-cite, and mechrag's
# ContextCite since, fit the response's log-odds.
OLD_CONTEXTCITE_TARGET = "total_token_logit_prob"


def examples_of_size(size: str, count: int) -> list:
    from mechrag.data import cut_to_sentences, load_examples, load_squad_articles

    if size in WHOLE_CONTEXTS:
        dataset, split = WHOLE_CONTEXTS[size]
        return load_examples(dataset, unit="sentence", split=split)[:count]
    if size == "squad":
        return load_squad_articles(n=count)
    examples = load_examples("hotpotqa", unit="sentence")[:count]
    return [cut_to_sentences(e, int(size)) for e in examples]


def recorded_cases(model, exact: dict, sizes, done: set):
    """For each example of ``sizes`` that has an exact ARC-JSD record in ``exact`` (by size and
    id) and is not in ``done``: its size, the example, that record and a fresh case on the
    recorded response, its sources checked against the record's (the replays of these records
    run one pass on each)."""
    from mechrag import Case

    for size in sizes:
        wanted = {key[1] for key in exact if key[0] == size and key not in done}
        examples = examples_of_size(size, EVERY_EXAMPLE) if wanted else []
        for example in (e for e in examples if e.id in wanted):
            reference = exact[size, example.id]
            case = Case.from_example(model, example, response=list(reference["response_ids"]))
            if [s.id for s in case.sources] != reference["source_ids"]:
                raise RuntimeError(f"{size}/{example.id}: the frontier scored other sources")
            yield size, example, reference, case


def contextcite_target(record: dict) -> str | None:
    """The game a ContextCite record (the frontier's, or its faithfulness record) was fitted on:
    its ``value``, :data:`OLD_CONTEXTCITE_TARGET` for a record made before records named it;
    ``None`` for every other method."""
    if not record["method"].startswith("contextcite"):
        return None
    return record.get("value") or OLD_CONTEXTCITE_TARGET


def on_contextcite_target(record: dict) -> bool:
    """Whether a record is not a ContextCite one fitted on another game than ContextCite's own
    (context-cite's): the frontier reruns those, and the tables show them apart."""
    from mechrag.attribution.estimators import ContextCite

    return contextcite_target(record) in (None, ContextCite.default_value)


def run_folder(name: str, model: str, root: Path = REPOSITORY / "experiments" / "runs") -> Path:
    """Where a benchmark keeps ``model``'s records by default: ``ROOT/NAME_FAMILY`` (family:
    ``smollm2``, ``gemma3``), the committed run folders of this checkout from any working
    directory."""
    return root / f"{name}_{model.split('-')[0]}"


def weights_hash(model_name: str) -> str | None:
    """The shipped attention weights of ``model_name`` by a hash of their file (``None``
    when none ship)."""
    import hashlib

    from mechrag.attribution.attention import shipped_weights_path

    path = shipped_weights_path(model_name)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def timed_on_cpu(record: dict) -> bool:
    """Whether a frontier record's seconds are the CPU's (records made before the frontier ran
    on GPUs name no device: all ran on the CPU); only those enter a speed-up."""
    return record.get("device", "cpu") == "cpu"
