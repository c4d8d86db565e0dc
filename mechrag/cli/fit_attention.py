"""``mechrag fit-attention``: fit the ``attention`` method's head weights against exact ARC-JSD.

    mechrag fit-attention --model M --dataset hotpotqa musique --n 40 --out weights.safetensors

Each training case (examples ``--offset`` to ``--offset + --n`` of each data set's shipped
training sample, cut to ``--sentences`` sentences) runs exact ARC-JSD, one attention pass and
one localisation; its record is appended to ``--records`` (default: a folder beside ``--out``),
so an interrupted fit resumes where it stopped. The weights file and its provenance (data, n,
seed, fit quality on held-out training cases) are written to ``--out``. Use them with
``AttentionAttribution(weights=FILE)``; the embedded models' weights ship with mechrag.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from mechrag.cli.common import (
    add_model_arguments,
    engine_from,
    load_model_from,
    print_written,
)
from mechrag.errors import InputError, at_least, positive_int

EXAMPLE = (
    "mechrag fit-attention --model smollm2-135m --dataset hotpotqa --n 40 --out "
    "weights.safetensors"
)
HELP = "fit the attention method's head weights against exact ARC-JSD"
# The shipped samples that come from training splits (SQuAD's is dev: never fit on it).
TRAINING_DATASETS = ("hotpotqa", "musique")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--dataset", nargs="+", default=list(TRAINING_DATASETS))
    parser.add_argument(
        "--n", type=positive_int, required=True, help="training examples per data set"
    )
    parser.add_argument("--offset", type=at_least(0), default=50, help="first example used")
    parser.add_argument(
        "--sentences", type=at_least(2), default=20, help="sentences per context"
    )
    parser.add_argument("--out", required=True, help="weights file (.safetensors)")
    parser.add_argument("--records", default=None, help="folder of per-case training records")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--l2", type=float, default=1e-3)
    # The fit's TARGETS, LOSSES and TEMPERATURE (mechrag.attribution.attention_fit, which
    # imports torch; a test ties them together).
    parser.add_argument("--target", choices=("scores", "ranks"), default="scores")
    parser.add_argument(
        "--loss", choices=("pearson", "listwise"), default="pearson", help="the per-case loss"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.2,
        help="softmax temperature of --loss listwise, in standard deviations",
    )
    parser.add_argument("--no-localize", action="store_true", help="skip the localized weights")


def check_arguments(args: argparse.Namespace) -> None:
    unknown = [d for d in args.dataset if d not in TRAINING_DATASETS]
    if unknown:
        raise InputError(f"fit on training splits only: {list(TRAINING_DATASETS)}, not {unknown}")
    if not args.temperature > 0:
        raise InputError(f"--temperature must be positive, got {args.temperature}")
    if not args.out.endswith(".safetensors"):
        raise InputError("--out must name a .safetensors file")


def training_examples(args: argparse.Namespace) -> list:
    from mechrag.data.loaders import cut_to_sentences, load_examples

    examples = []
    for dataset in args.dataset:
        training = load_examples(dataset, unit="sentence", split="train")
        rows = training[args.offset : args.offset + args.n]
        if len(rows) < args.n:
            raise InputError(
                f"{dataset} has {len(rows)} examples from offset {args.offset}, not {args.n}"
            )
        examples.extend(cut_to_sentences(example, args.sentences) for example in rows)
    return examples


def command_line(args: argparse.Namespace) -> str:
    """The command that makes these weights again (every setting spelled out)."""
    words = ["mechrag", "fit-attention", "--dataset", *args.dataset]
    options = ["model", "max_new_tokens", "n", "offset", "sentences", "seed", "l2", "target"]
    options += ["loss", "temperature"] if args.loss == "listwise" else ["loss"]
    for option in options:
        value = getattr(args, option)
        if value is not None:
            words += [f"--{option.replace('_', '-')}", str(value)]
    words += ["--no-localize"] if args.no_localize else []
    words += ["--records", args.records] if args.records else []
    return shlex.join([*words, "--out", args.out])


def run(args: argparse.Namespace) -> None:
    from mechrag.attribution.attention import model_key, model_shape
    from mechrag.attribution.attention_fit import training_record, weights_from_records
    from mechrag.case import Case
    from mechrag.results.files import append_jsonl, run_records

    check_arguments(args)
    examples = training_examples(args)
    out = Path(args.out)
    records_folder = Path(args.records) if args.records else out.with_name(f"{out.stem}_cases")
    if records_folder.exists() and not records_folder.is_dir():
        raise InputError(f"--records must be a folder, not the file {records_folder}")
    model = load_model_from(args)
    engine = engine_from(args, model)
    # A record is reused only for the same model and settings.
    settings = {
        "model": model_key(model),
        "shape": model_shape(model),
        "max_new_tokens": args.max_new_tokens,
        "sentences": args.sentences,
        "localize": not args.no_localize,
    }
    done = {r["key"]: r for r in run_records(records_folder) if r.get("settings") == settings}
    for number, example in enumerate(examples, 1):
        key = f"{example.dataset}:{example.id}"
        if key in done:
            continue
        case = Case.from_example(
            model, example, max_new_tokens=args.max_new_tokens, engine=engine
        )
        records_folder.mkdir(parents=True, exist_ok=True)
        record = {
            "key": key,
            "settings": settings,
            **training_record(case, localize=not args.no_localize),
        }
        append_jsonl(records_folder / "records.jsonl", record)
        done[key] = record
        print(f"[{number}/{len(examples)}] {key}: {case.n_sources} sources", flush=True)
    records = [done[f"{e.dataset}:{e.id}"] for e in examples]
    provenance = {
        "data": {
            "datasets": list(args.dataset),
            "split": "train (the shipped samples of the training splits)",
            "offset": args.offset,
            "n_per_dataset": args.n,
            "sentences": args.sentences,
            "example_keys": [r["key"] for r in records],
        },
        "n": len(records),
        "max_new_tokens": args.max_new_tokens,
        "command": command_line(args),
    }
    weights = weights_from_records(
        records,
        model,
        l2=args.l2,
        target=args.target,
        loss=args.loss,
        temperature=args.temperature,
        seed=args.seed,
        provenance=provenance,
    )
    quality = weights.provenance["quality"]
    for name, measured in quality.items():
        print(
            f"{name}: top-1 {measured['top1']:.3f}, Spearman {measured['spearman']:.3f} "
            f"(n = {measured['n']})"
        )
    print_written(weights.save(out))
