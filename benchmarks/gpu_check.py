"""GPU check: one short prepared run on a CUDA machine (a few minutes on one H200).

1. **The CUDA test set** (``pytest -m cuda``): every registered method, localize, echo,
   ablation, gating, the views and a command on the GPU against the CPU (float32, relative 1e-4)
   and in bfloat16 (rankings).
2. **The embedded SmolLM2 on the GPU against the CPU**, when its weights are present: exact
   ARC-JSD in float32 on the questions of ``benchmarks/references/smollm2_arc_jsd_cpu.json``
   (CPU scores committed with their responses; ``--write-references`` makes them on a CPU), and
   bfloat16's top-1 and Spearman against them.
3. **Speed** at the Qwen2-1.5B and Qwen2-7B shapes (random weights from configs, bf16, no
   download) on one HotpotQA dev question with all ten paragraphs: exact ARC-JSD through the
   engine, the naive loop (one forward per ablation), and one plain Hugging Face forward over
   the same prompts without hooks; this GPU's measured bf16 matrix-multiply peak; model-FLOP
   utilisation (``2 * body parameters`` per input token plus the vocabulary projection per
   projected position, over seconds, over the peak); peak memory. The random models use the byte
   tokenizer, so each sentence is cut to a quarter of its characters: about the token count a
   BPE tokenizer gives (the record keeps the real counts).
4. **Throughput at data-set scale**: exact ARC-JSD over the first ``--throughput-questions``
   HotpotQA dev questions (every paragraph, cut the same way) at the SmolLM2 shape in bf16,
   questions per second under each engine token budget of ``--budgets`` (``0``: the engine's
   own choice from free memory); what the budget's cap should be, and whether one small-model
   case per pass can reach 5 questions per second. Then the same questions split among 1, 2, 4
   and 8 processes sharing the device (``--workers``; what a sweep's Ray workers with fractional
   GPUs, ``--gpus-per-worker 0.25``, do): whether several small cases at once fill the GPU.

Each run appends one record to ``experiments/runs/gpu_check/records.jsonl``; ``make results``
turns the newest into the ``gpu_check`` table, with the GPU's name. After each stage the record so
far is also written to ``in_progress.json`` beside it (removed once the record is appended): what
a run stopped at its time limit had measured, which no table reads until it is appended by hand.
Without CUDA it says so in one line and exits 0; ``--device cpu`` runs the script's own code on the
CPU (tiny shapes, no record unless ``--out`` is given), to check it anywhere.

    python benchmarks/gpu_check.py
    python benchmarks/gpu_check.py --device cpu --shapes smollm2-135m --layers 2 --no-tests \
        --no-embedded --matmul-size 512 --throughput-questions 2 --workers 1 2
    python benchmarks/gpu_check.py --write-references --device cpu   # the CPU references
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from baselines import Work, naive_arc_jsd

REPO = Path(__file__).resolve().parents[1]
REFERENCES = REPO / "benchmarks" / "references" / "smollm2_arc_jsd_cpu.json"
OUT = REPO / "experiments" / "runs" / "gpu_check"
SPEED_SHAPES = ("qwen2-1.5b", "qwen2-7b")
THROUGHPUT_SHAPE = "smollm2-135m"
THROUGHPUT_BUDGETS = (0, 262_144, 1_048_576)  # 0: the engine's own choice
CONCURRENT_WORKERS = (1, 2, 4, 8)  # processes sharing one device
# Each concurrent process's token budget: fixed, since each would otherwise size its batches
# from the same free memory.
WORKER_BUDGET = 65_536
BARRIER_SECONDS, WORKER_SECONDS = 300, 600  # a worker's wait for the others; the parent's
RESPONSE_TOKENS = 32
REFERENCE_QUESTIONS = 4
CHARS_PER_TOKEN = 4  # a BPE tokenizer's characters per token, roughly, for English prose
IN_PROGRESS = "in_progress.json"


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(function, device: str):
    """``(value, seconds, peak GiB)`` of one call (peak memory on CUDA only)."""
    synchronize(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    value = function()
    synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.startswith("cuda") else None
    return value, time.perf_counter() - start, peak


def matmul_peak(device: str, size: int, repeats: int = 20) -> float:
    """Measured bf16 matrix-multiply throughput of this device, TFLOP/s."""
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b  # warm-up
    _, seconds, _ = timed(lambda: [a @ b for _ in range(repeats)], device)
    return 2 * size**3 * repeats / seconds / 1e12


def speed_questions(n: int = 1, tokenizer_chars: int = CHARS_PER_TOKEN) -> list[tuple]:
    """``(query, sources)`` of the first ``n`` HotpotQA dev questions with all ten paragraphs,
    each sentence cut to ``1 / tokenizer_chars`` of its characters (see the module docstring)."""
    from mechrag.data import load_hotpotqa
    from mechrag.sources import Source

    return [
        (example.query, [
            Source(s.id, s.text[: max(8, len(s.text) // tokenizer_chars)], s.title, s.paragraph)
            for s in example.sources
        ])
        for example in load_hotpotqa(split="dev", n=n, distractors=None)
    ]  # fmt: skip


def speed_question() -> tuple:
    """The first of :func:`speed_questions`: the speed table's question."""
    return speed_questions(1)[0]


def random_response(n_tokens: int = RESPONSE_TOKENS) -> list[int]:
    """Byte-tokenizer ids, the same on every run (the random models' responses)."""
    draw = torch.Generator().manual_seed(0)  # host: a seeded draw of ids
    return torch.randint(3, 259, (n_tokens,), generator=draw).tolist()


def arc_jsd_on(model, query: str, sources, response: list[int], budget: int | None):
    """Exact ARC-JSD of one question on an engine of its own (``budget``: its token budget,
    ``None``: the engine's choice), returned for its counters."""
    from mechrag import Case, Engine

    engine = Engine(model, max_batch_tokens=budget, progress=False)
    Case(model, query, sources, response, engine=engine).arc_jsd()
    return engine


def throughput(device: str, layers: int | None, budgets, n_questions: int) -> list[dict]:
    """Exact ARC-JSD over ``n_questions`` questions at :data:`THROUGHPUT_SHAPE`: questions per
    second, tokens per second and peak memory per engine token budget."""
    from mechrag.models.toy import shaped_model

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = shaped_model(THROUGHPUT_SHAPE, dtype=dtype, device=device, n_layers=layers,
                         same_weights=False)  # fmt: skip
    questions, response = speed_questions(n_questions), random_response()

    def run_all(budget: int, questions=questions) -> tuple[int, int]:
        tokens = chosen = 0
        for query, sources in questions:
            engine = arc_jsd_on(model, query, sources, response, budget or None)
            tokens, chosen = tokens + engine.tokens_processed, engine.max_batch_tokens
        return tokens, chosen

    run_all(budgets[0], questions[:1])  # warm-up
    rows = []
    for budget in budgets:
        (tokens, chosen), seconds, memory = timed(lambda b=budget: run_all(b), device)
        rows.append({
            "shape": THROUGHPUT_SHAPE, "layers": model.cfg.n_layers, "questions": len(questions),
            "dtype": str(dtype).removeprefix("torch."),
            "max_batch_tokens": chosen, "chosen_by_engine": not budget, "seconds": seconds,
            "questions_per_second": len(questions) / seconds,
            "tokens_per_second": tokens / seconds, "peak_gib": memory,
        })  # fmt: skip
        rate = len(questions) / seconds
        print(f"throughput at {THROUGHPUT_SHAPE}, budget {chosen:,} tokens: {rate:.2f} "
              f"questions/s ({len(questions)} in {seconds:.1f} s)")  # fmt: skip
    return rows


def _concurrent_worker(rank: int, workers: int, settings: dict, barrier, results) -> None:
    """One of ``workers`` processes sharing the device: its own model, every ``workers``-th
    question from ``rank``, timed from a barrier all of them pass together; what it puts on
    ``results`` is its timing, or the error that stopped it (then the barrier is broken, so
    no other worker waits for it)."""
    try:
        results.put(_concurrent_run(rank, workers, settings, barrier))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which gives up
        barrier.abort()
        results.put({"rank": rank, "error": f"{type(error).__name__}: {error}"})


def _concurrent_run(rank: int, workers: int, settings: dict, barrier) -> dict:
    from mechrag.models.toy import shaped_model

    device, dtype = settings["device"], getattr(torch, settings["dtype"])
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    model = shaped_model(THROUGHPUT_SHAPE, dtype=dtype, device=device,
                         n_layers=settings["layers"], same_weights=False)  # fmt: skip
    questions = speed_questions(settings["questions"])[rank::workers]
    response = random_response()

    def arc_jsd(query, sources) -> int:
        return arc_jsd_on(model, query, sources, response, settings["budget"]).tokens_processed

    arc_jsd(*questions[0])  # warm-up, off the clock
    synchronize(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    barrier.wait(timeout=BARRIER_SECONDS)
    start = time.time()
    tokens = sum(arc_jsd(query, sources) for query, sources in questions)
    synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.startswith("cuda") else None
    return {"rank": rank, "start": start, "end": time.time(), "tokens": tokens,
            "layers": model.cfg.n_layers, "peak_gib": peak}  # fmt: skip


def concurrent_throughput(
    device: str, layers: int | None, worker_counts, n_questions: int, budget: int
) -> list[dict]:
    """Exact ARC-JSD over ``n_questions`` questions at :data:`THROUGHPUT_SHAPE` split among
    several processes on one device (what a sweep's Ray workers with fractional GPUs do):
    questions per second per worker count, from the first start to the last finish. A worker
    count whose run fails gets a row with its error, and the rest still run."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    settings = {"device": device, "dtype": dtype, "layers": layers, "questions": n_questions,
                "budget": budget}  # fmt: skip
    if device.startswith("cuda"):
        torch.cuda.empty_cache()  # what this process cached is the workers' to use
    rows = []
    for workers in sorted({min(w, n_questions) for w in worker_counts}):
        barrier, results = context.Barrier(workers), context.Queue()
        processes = [
            context.Process(target=_concurrent_worker, daemon=True,
                            args=(rank, workers, settings, barrier, results))  # fmt: skip
            for rank in range(workers)
        ]
        for process in processes:
            process.start()
        finished = []
        for _ in processes:
            try:
                finished.append(results.get(timeout=WORKER_SECONDS))
            except queue.Empty:  # a worker killed outright (no error put)
                finished.append({"error": f"no result within {WORKER_SECONDS} s"})
                break
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
        row = {"shape": THROUGHPUT_SHAPE, "dtype": dtype, "workers": workers,
               "questions": n_questions, "max_batch_tokens": budget}  # fmt: skip
        # The failure itself before the workers it stopped at the barrier.
        errors = sorted((r["error"] for r in finished if "error" in r),
                        key=lambda error: error.startswith("BrokenBarrierError"))  # fmt: skip
        if errors:
            rows.append({**row, "error": errors[0]})
            print(f"throughput with {workers} processes on one device failed: {errors[0]}")
            continue
        seconds = max(r["end"] for r in finished) - min(r["start"] for r in finished)
        peaks = [r["peak_gib"] for r in finished if r["peak_gib"] is not None]
        rows.append({
            **row, "layers": finished[0]["layers"], "seconds": seconds,
            "questions_per_second": n_questions / seconds,
            "tokens_per_second": sum(r["tokens"] for r in finished) / seconds,
            "peak_gib": sum(peaks) if peaks else None,
        })  # fmt: skip
        rate = n_questions / seconds
        print(f"throughput at {THROUGHPUT_SHAPE}, {workers} processes on one device: "
              f"{rate:.2f} questions/s ({n_questions} in {seconds:.1f} s)")  # fmt: skip
    return rows


def body_and_head(model) -> tuple[int, int]:
    """Parameters run per input token (all but the embedding lookups) and per projected
    position (the unembedding)."""
    from mechrag.models import adapter

    hf = adapter.hf_model(model)
    tables = (hf.get_input_embeddings(), hf.get_output_embeddings())
    lookups = {id(p) for table in tables for p in table.parameters()}
    body = sum(p.numel() for p in hf.parameters() if id(p) not in lookups)
    return body, adapter.vocab_size(model) * model.cfg.d_model


def plain_forward(model, builder, response: list[int], device: str) -> Work:
    """One batched Hugging Face forward over the full prompt and every leave-one-out prompt,
    left-padded, no hooks, response positions projected only."""
    from mechrag.models import adapter

    masks = [builder.full_mask(), *(~torch.eye(builder.n_sources, dtype=torch.bool))]
    rows = [builder.ids(mask) + response[:-1] for mask in masks]
    width = max(len(r) for r in rows)
    pad = adapter.pad_token_id(model)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
    starts = torch.tensor([width - len(r) for r in rows], device=device)
    attention = (torch.arange(width, device=device)[None] >= starts[:, None]).long()
    with torch.no_grad():
        hf_model = adapter.hf_model(model)
        hf_model(input_ids=ids, attention_mask=attention, logits_to_keep=len(response))
    return Work(tokens=ids.numel(), projected=len(rows) * len(response))


def speed_row(shape: str, device: str, layers: int | None, peak: float, repeats: int) -> dict:
    """Engine, naive loop and plain forward at one model shape (see the module docstring)."""
    from mechrag import Case, Engine, PromptBuilder
    from mechrag.models.toy import shaped_model

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = shaped_model(shape, dtype=dtype, device=device, n_layers=layers, same_weights=False)
    query, sources = speed_question()
    builder = PromptBuilder(model.tokenizer, query, sources)
    response = random_response()
    body, head = body_and_head(model)
    row = {
        "shape": shape, "layers": model.cfg.n_layers, "parameters": body + head,
        "sources": len(sources), "prompt_tokens": len(builder.ids()),
        "response_tokens": RESPONSE_TOKENS,
    }  # fmt: skip

    def engine_run():
        engine = Engine(model, progress=False)
        Case(model, query, sources, response, engine=engine).arc_jsd()
        projected = (len(sources) + 1) * RESPONSE_TOKENS
        return Work(tokens=engine.tokens_processed, projected=projected), engine.max_batch_tokens

    runs = {
        "engine": engine_run,
        "naive": lambda: (_naive(model, builder, response), None),
        "plain_forward": lambda: (plain_forward(model, builder, response, device), None),
    }
    for name, run in runs.items():
        run()  # warm-up
        best = None
        for _ in range(repeats):
            (work, budget), seconds, memory = timed(run, device)
            if best is None or seconds < best[1]:
                best = (work, seconds, memory, budget)
        work, seconds, memory, budget = best
        achieved = work.flops(body, head) / seconds / 1e12
        row[name] = {
            "seconds": seconds, "tokens": work.tokens, "tflops": achieved, "mfu": achieved / peak,
            "peak_gib": memory, **({"max_batch_tokens": budget} if budget else {}),
        }  # fmt: skip
    return row


def _naive(model, builder, response) -> Work:
    work = Work()
    naive_arc_jsd(model, builder, response, work)
    return work


def write_references(device: str, out: Path = REFERENCES) -> None:
    """Exact ARC-JSD of the embedded SmolLM2 in float32 on ``device`` (a CPU) for the first
    HotpotQA dev questions, two distractor paragraphs each, with their greedy responses."""
    from mechrag import Case, load_model
    from mechrag.data import load_hotpotqa

    model = load_model(device=device, dtype=torch.float32)
    questions = []
    for example in load_hotpotqa(split="dev", n=REFERENCE_QUESTIONS, distractors=2):
        case = Case.from_example(model, example, max_new_tokens=16)
        scores = case.arc_jsd().scores.tolist()
        questions.append({"id": example.id, "response_ids": case.response_ids, "scores": scores})
    out.parent.mkdir(parents=True, exist_ok=True)
    made = {"torch": torch.__version__, "device": device, "questions": questions}
    out.write_text(json.dumps(made, indent=1) + "\n")
    print(f"wrote {out}")


def embedded_equality(device: str) -> dict | None:
    """The embedded SmolLM2 on ``device`` against the committed CPU references (``None`` when
    its weights are absent)."""
    from mechrag import Case, load_model
    from mechrag.data import load_hotpotqa
    from mechrag.errors import MissingDependencyError
    from mechrag.metrics import spearman

    try:
        model32 = load_model(device=device, dtype=torch.float32)
    except (MissingDependencyError, FileNotFoundError, OSError) as error:
        print(f"embedded SmolLM2 not present: skipped its GPU check ({type(error).__name__})")
        return None
    model16 = load_model(device=device, dtype=torch.bfloat16)
    references = json.loads(REFERENCES.read_text())["questions"]
    examples = {e.id: e for e in load_hotpotqa(split="dev", n=REFERENCE_QUESTIONS, distractors=2)}
    rows = []
    for reference in references:
        example, expected = examples[reference["id"]], np.array(reference["scores"])
        found = Case.from_example(model32, example, reference["response_ids"]).arc_jsd().scores
        half = Case.from_example(model16, example, reference["response_ids"]).arc_jsd().scores
        difference = np.abs(found - expected).max() / np.abs(expected).max()
        rows.append({
            "id": example.id, "sources": len(expected),
            "max_relative_difference": float(difference),
            "top1_float32": bool(found.argmax() == expected.argmax()),
            "top1_bfloat16": bool(half.argmax() == expected.argmax()),
            "spearman_bfloat16": float(spearman(half, expected)),
        })  # fmt: skip
    return {"questions": rows}


def cuda_tests(device: str) -> dict:
    """The cuda-marked tests, in a child process: their pass and fail counts and seconds."""
    env = {**os.environ, "MECHRAG_TEST_DEVICE": device, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, str(REPO / "tests" / "gpu")],
        capture_output=True, text=True, check=False, cwd=REPO, env=env,
    )  # fmt: skip
    last = (done.stdout.strip().splitlines() or ["no output"])[-1]
    print(f"cuda tests: {last}")
    if done.returncode not in (0, 5):
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    found = re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)
    counts = {word: int(n) for n, word in found}
    return {"returncode": done.returncode, "counts": counts, "seconds": time.perf_counter() - start}


def keep_so_far(out: Path | None, record: dict) -> None:
    """The record as it stands after each stage, in ``out/in_progress.json``: what a run stopped
    at its time limit had measured (the whole record is appended to ``records.jsonl`` at the end,
    and this file removed)."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / IN_PROGRESS).write_text(json.dumps(record) + "\n")


def main() -> int:
    from mechrag.errors import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, or cpu: a check of the script")
    parser.add_argument("--shapes", nargs="+", default=list(SPEED_SHAPES), help="speed shapes")
    parser.add_argument("--layers", type=int, default=None, help="first layers only (quick)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--no-tests", action="store_true", help="skip the cuda test set")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded SmolLM2")
    parser.add_argument("--throughput-questions", type=int, default=20, help="0: skip it")
    parser.add_argument(
        "--budgets", type=int, nargs="+", default=list(THROUGHPUT_BUDGETS),
        help="engine token budgets for the throughput (0: the engine's choice)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=positive_int, nargs="*", default=list(CONCURRENT_WORKERS),
        help="processes sharing the device for the concurrent throughput (none: skip it)",
    )  # fmt: skip
    parser.add_argument("--worker-budget", type=int, default=WORKER_BUDGET,
                        help="each concurrent process's engine token budget")  # fmt: skip
    parser.add_argument("--write-references", action="store_true", help="make the CPU references")
    parser.add_argument("--out", type=Path, default=None, help=f"record folder (on CUDA: {OUT})")
    args = parser.parse_args()
    if args.write_references:
        write_references(args.device)
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: the GPU check was not run (exit 0)")
        return 0
    out = args.out or (OUT if args.device.startswith("cuda") else None)
    on_cuda = args.device.startswith("cuda")
    gpu = torch.cuda.get_device_name(args.device) if on_cuda else platform.processor() or "cpu"
    record = {
        "gpu": gpu, "device": args.device, "torch": torch.__version__,
        "cuda": torch.version.cuda, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    if not args.no_tests:
        record["cuda_tests"] = cuda_tests(args.device)
        keep_so_far(out, record)
    record["embedded"] = None if args.no_embedded else embedded_equality(args.device)
    keep_so_far(out, record)
    peak = matmul_peak(args.device, args.matmul_size)
    record["matmul_peak_tflops"] = peak
    print(f"{gpu}: measured matrix-multiply peak {peak:.0f} TFLOP/s")
    record["speed"] = []
    for shape in args.shapes:
        row = speed_row(shape, args.device, args.layers, peak, args.repeats)
        if on_cuda:
            torch.cuda.empty_cache()  # the shape's model is gone with speed_row
        record["speed"].append(row)
        keep_so_far(out, record)
        cells = "  ".join(
            f"{name} {row[name]['seconds']:.2f}s MFU {row[name]['mfu']:.0%}"
            for name in ("engine", "naive", "plain_forward")
        )
        size = f"{row['parameters'] / 1e9:.2f}B, {row['sources']} sources"
        print(f"{shape} ({size}, {row['prompt_tokens']} prompt tokens): {cells}")
    if args.throughput_questions:
        record["throughput"] = throughput(
            args.device, args.layers, args.budgets, args.throughput_questions
        )
        keep_so_far(out, record)
        if args.workers:
            record["concurrent"] = concurrent_throughput(
                args.device, args.layers, args.workers, args.throughput_questions,
                args.worker_budget,
            )  # fmt: skip
    if out is not None:
        from mechrag.results.files import append_jsonl

        append_jsonl(out / "records.jsonl", record)
        (out / IN_PROGRESS).unlink(missing_ok=True)
        print(f"appended to {out / 'records.jsonl'}")
    failed = record.get("cuda_tests", {}).get("returncode", 0) not in (0, 5)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
