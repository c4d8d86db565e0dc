#!/bin/bash
# A GPU session's one prepared run (a lent H100/H200 with no network; see docs/gpus.md and the
# device tool's README), after the GGUF pieces and the wheels have travelled:
#   here:   ../shared/gpu-bundle/make_bundle.sh .gpu --chunks 24   (.gpu and .gpu-chunks ignored)
#   call 1: carry .gpu, .gpu-chunks/part-00.d;  mkdir -p /tmp/g && cp .gpu-chunks/part-00.d/* /tmp/g/
#           && rm -rf /tmp/gpu && cp -r .gpu /tmp/gpu && source /tmp/gpu/setup.sh
#   call 2: carry .gpu-chunks/part-01.d;  cp .gpu-chunks/part-01.d/* /tmp/g/
#   call 3: carry .gpu-chunks/part-02.d;  cp .gpu-chunks/part-02.d/* /tmp/g/
#   call 4: carry .gpu-chunks/part-03.d, .gpu-chunks/part-04.d (if any);  bash benchmarks/gpu_session.sh
# (each call right after the last: an idle machine goes back after 30 s, and /tmp with it; 24 MiB
# pieces keep each call under the 64 MiB a call carries, the working tree included).
# It runs the GPU check, then the frontier (SmolLM2, HotpotQA dev, float32 on CUDA: exact ARC-JSD
# with LOO and the KL variant beside it, and ContextCite at 256 ablations, the paper's Table 2
# pair, to 100 questions; then the other methods) and its faithfulness replay, each under a time
# limit, the whole within LIMIT seconds. What comes back under $OUT: gpu_check/records.jsonl (or
# gpu_check/in_progress.json, when the check ran out of time), fr/records.jsonl and
# fa/records.jsonl, fa/scored/records.jsonl (the committed records with the new ones appended:
# they replace experiments/runs/frontier_smollm2/records.jsonl and faithfulness_smollm2's), and
# the logs.
LIMIT=${LIMIT:-560}; T0=$SECONDS; FAITH=${FAITH:-100}; OUT=$(realpath "$OUT")
left() { echo $(( LIMIT - (SECONDS - T0) )); }
# within() runs a command for the seconds left less $1, or says it was skipped (timeout 0 would
# not limit it, and a negative one would not run it)
within() { local t=$(( $(left) - $1 )); shift
  if [ "$t" -ge 10 ]; then timeout "$t" "$@"; else echo "skipped (${t} s left): $*"; return 124; fi; }
GGUF_BYTES=${GGUF_BYTES:-98362432}  # the embedded SmolLM2 GGUF, whole
for d in .gpu-chunks/part-0*.d; do cp "$d"/* /tmp/g/; done; ls -la /tmp/g
[ "$(cat /tmp/g/part-* | wc -c)" -eq "$GGUF_BYTES" ] || { echo "GGUF pieces missing"; exit 1; }
# sourced, not piped: a pipe would run it in a subshell and lose its PYTHONPATH
source /tmp/gpu/setup.sh --gguf > /tmp/setup.log 2>&1; tail -4 /tmp/setup.log
python3 -c "import mechrag, transformer_lens" || { echo "set-up failed: see above"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
CHECK=$(( $(left) - FAITH - 60 )); [ "$CHECK" -gt 280 ] && CHECK=280  # leaves the frontier a minute
within $(( $(left) - CHECK )) python3 benchmarks/gpu_check.py --out "$OUT/gpu_check" > "$OUT/gpu_check.log" 2>&1
echo "gpu_check rc $? at $((SECONDS - T0)) s"; grep -v "it/s\]" "$OUT/gpu_check.log" | tail -25
mkdir -p "$OUT/fr" "$OUT/fa/scored"
cp experiments/runs/frontier_smollm2/records.jsonl* "$OUT/fr/"
cp experiments/runs/faithfulness_smollm2/records.jsonl "$OUT/fa/"
cp experiments/runs/faithfulness_smollm2/scored/records.jsonl "$OUT/fa/scored/"
cd experiments || exit 1
within "$FAITH" python3 frontier.py --device cuda --threads 8 --sizes hotpotqa_dev \
  --examples 100 --methods exact exact_kl loo contextcite256 --out "$OUT/fr" > "$OUT/frontier.log" 2>&1
echo "frontier (Table 2's pair) rc $? at $((SECONDS - T0)) s"
if [ "$(left)" -gt $(( FAITH + 40 )) ]; then
  within "$FAITH" python3 frontier.py --device cuda --threads 8 --sizes hotpotqa_dev \
    --examples 100 --methods contextcite32 contextcite64 leverage32 pmcshap32 attention_uniform \
    attention_localized attention_rescored5 hierarchical screen --out "$OUT/fr" >> "$OUT/frontier.log" 2>&1
  echo "frontier (the others) rc $? at $((SECONDS - T0)) s"
fi
tail -3 "$OUT/frontier.log"
within 5 python3 faithfulness.py --device cuda --threads 8 --sizes hotpotqa_dev \
  --frontier "$OUT/fr" --out "$OUT/fa" > "$OUT/faith.log" 2>&1
echo "faithfulness rc $? at $((SECONDS - T0)) s"; tail -3 "$OUT/faith.log"
rm -f "$OUT/fr/records.jsonl.gz"  # unchanged: the committed one stands
ls -la "$OUT" "$OUT"/*
