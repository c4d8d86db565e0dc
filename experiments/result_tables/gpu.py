"""The GPU check (``benchmarks/gpu_check.py``): exact ARC-JSD through the engine against the
naive loop and a plain forward at the Qwen2 1.5B and 7B shapes, with model-FLOP utilisation
against the measured matrix-multiply peak, and the embedded SmolLM2 on the GPU against the CPU."""

from __future__ import annotations

from .common import Table, markdown, number, table

TABLES: dict[str, Table] = {}
RUNS = ("engine", "naive", "plain_forward")


def newest(records: list[dict]) -> list[dict]:
    """The newest run (the check is repeated as the code changes; older runs stay in the log)."""
    return [max(records, key=lambda record: record["started"])] if records else []


def concurrent_cells(row: dict, alone: float | None) -> list[str]:
    """A row of the concurrent throughput: its rate against one process's, or its error."""
    if "error" in row:
        return [str(row["workers"]), f"failed: {row['error'][:80]}", "", "", ""]
    rate = row["questions_per_second"]
    return [
        str(row["workers"]),
        f"{rate:.2f}",
        f"{rate / alone:.2f}x" if alone else "–",
        f"{row['tokens_per_second']:,.0f}",
        "n/a" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}",
    ]


@table(
    TABLES,
    "gpu_check",
    run="gpu_check",
    key=lambda record: record["started"],
    select=newest,
    optional=True,
    note="`python benchmarks/gpu_check.py` (the newest run of its records; bf16 random weights "
    "in each shape, one HotpotQA dev question with all ten paragraphs, the fastest of 3 runs; "
    "MFU = achieved FLOP/s over the measured bf16 matrix-multiply peak)",
)
def gpu_check_table(records: list[dict]) -> str:
    (record,) = records
    peak = record["matmul_peak_tflops"]
    lines = [
        f"{record['gpu']} (torch {record['torch']}, CUDA {record['cuda']}; {record['started']}): "
        f"measured matrix-multiply peak {peak:.0f} TFLOP/s.",
        "",
    ]
    header = ["shape", "parameters", "sources / prompt tokens"]
    header += [f"{name.replace('_', ' ')}: s (MFU)" for name in RUNS]
    header += ["engine peak GiB", "engine speed-up over naive"]
    rows = []
    for row in record["speed"]:
        cells = [f"{row[name]['seconds']:.2f} ({row[name]['mfu']:.0%})" for name in RUNS]
        memory = row["engine"].get("peak_gib")
        rows.append([
            row["shape"], f"{row['parameters'] / 1e9:.2f}B",
            f"{row['sources']} / {row['prompt_tokens']}", *cells,
            "n/a" if memory is None else f"{memory:.1f}",
            f"{row['naive']['seconds'] / row['engine']['seconds']:.2f}x",
        ])  # fmt: skip
    lines.append(markdown(header, rows))
    embedded = record.get("embedded")
    if embedded:
        questions = embedded["questions"]
        worst = max(q["max_relative_difference"] for q in questions)
        half = [q["spearman_bfloat16"] for q in questions]
        lines += [
            "",
            f"Embedded SmolLM2, GPU against the committed CPU references (n = {len(questions)}):"
            f" float32 differs by at most {worst:.1e} relative, top-1 "
            f"{sum(q['top1_float32'] for q in questions)} of {len(questions)}; bfloat16 top-1 "
            f"{sum(q['top1_bfloat16'] for q in questions)} of {len(questions)}, Spearman "
            f"{number(min(half), 2)}-{number(max(half), 2)}.",
        ]
    throughput = record.get("throughput")
    if throughput:
        first = throughput[0]
        lines += [
            "",
            f"Throughput, exact ARC-JSD over {first['questions']} HotpotQA dev questions (every "
            f"paragraph) at the {first['shape']} shape ({first['layers']} layers, "
            f"{first['dtype']}), one case at a time:",
            "",
            markdown(
                ["engine token budget", "questions / s", "tokens / s", "peak GiB"],
                [
                    [
                        f"{row['max_batch_tokens']:,}"
                        + (" (the engine's choice)" if row["chosen_by_engine"] else ""),
                        f"{row['questions_per_second']:.2f}",
                        f"{row['tokens_per_second']:,.0f}",
                        "n/a" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}",
                    ]
                    for row in throughput
                ],
            ),
        ]
    concurrent = record.get("concurrent")
    if concurrent:
        first = concurrent[0]
        alone = next((r.get("questions_per_second") for r in concurrent if r["workers"] == 1), None)
        lines += [
            "",
            f"The same {first['questions']} questions split among processes sharing the GPU "
            f"(each with its own model and a {first['max_batch_tokens']:,}-token budget; what a "
            "sweep's Ray workers with `--gpus-per-worker` below 1 do):",
            "",
            markdown(
                ["processes", "questions / s", "against one", "tokens / s", "peak GiB (all)"],
                [concurrent_cells(row, alone) for row in concurrent],
            ),
        ]
    tests = record.get("cuda_tests")
    if tests:
        counts = ", ".join(f"{n} {word}" for word, n in tests["counts"].items())
        lines += ["", f"CUDA test set: {counts} ({tests['seconds']:.0f} s)."]
    return "\n".join(lines)
