"""GPU check: a bf16 1B-class model through the engine, against a naive loop and against fp32.

On a CUDA device this builds a randomly initialised Llama-shaped model (about 1B parameters,
from a config: no download) or loads ``--model``, then

* chooses the engine's token budget from free memory (``torch.cuda.mem_get_info``);
* times exact ARC-JSD through the engine against a one-forward-per-ablation naive loop and
  reports the speed-up and the peak memory of each;
* confirms the softmax and the logit lens run in float32 on the bf16 model;
* compares the bf16 ARC-JSD ranking with the fp32 one (Spearman, top-1);
* times the screened ARC-JSD (``screen=m``) against exact.

Without a CUDA device it prints why and exits 0.

    python benchmarks/gpu_check.py --sources 20 --response-tokens 16
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def random_llama_1b(tokenizer, dtype: torch.dtype):
    """A random-init Llama-shaped model of about 1B parameters, wrapped like ``load_model``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from mechrag.models import wrap_hf_model

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    )
    config.architectures = ["LlamaForCausalLM"]
    hf = LlamaForCausalLM(config).to(dtype).cuda().eval()
    return wrap_hf_model(hf, tokenizer, name="random-llama-1b", dtype=dtype)


def token_budget(n_layers: int, d_model: int, bytes_per_value: int, fraction: float) -> int:
    """Tokens per batch that fit ``fraction`` of free memory (KV cache and a few activations)."""
    free, _ = torch.cuda.mem_get_info()
    per_token = n_layers * d_model * bytes_per_value * 8
    return max(512, int(free * fraction / per_token))


def free_gib() -> float:
    return torch.cuda.mem_get_info()[0] / 2**30


def timed(function):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    value = function()
    torch.cuda.synchronize()
    return value, time.perf_counter() - start, torch.cuda.max_memory_allocated() / 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="local model path; default: random 1B")
    parser.add_argument("--sources", type=int, default=20)
    parser.add_argument("--response-tokens", type=int, default=16)
    parser.add_argument("--screen", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: the GPU check was not run (exit 0)")
        return 0

    import numpy as np
    from baselines import naive_arc_jsd

    from mechrag import Case, Engine, PromptBuilder, load_model
    from mechrag.data import load_hotpotqa
    from mechrag.mechanism.lens import lens_logprobs
    from mechrag.metrics import spearman

    embedded = load_model(device="cpu")
    if args.model:
        model = load_model(args.model, device="cuda", dtype=torch.bfloat16)
    else:
        model = random_llama_1b(embedded.tokenizer, torch.bfloat16)
    cfg = model.cfg
    budget = token_budget(cfg.n_layers, cfg.d_model, 2, fraction=0.5)
    name = args.model or "random-llama-1b"
    print(f"model={name} bf16  engine max_batch_tokens={budget}  free={free_gib():.1f} GiB")
    example = load_hotpotqa(n=1, distractors=None)[0]
    sources = example.sources[: args.sources]
    response = list(range(1000, 1000 + args.response_tokens))
    engine = Engine(model, max_batch_tokens=budget, progress=False)
    case = Case(model, example.query, sources, response, engine=engine)
    exact, t_engine, m_engine = timed(lambda: case.arc_jsd())
    builder = PromptBuilder(model.tokenizer, example.query, sources)
    naive, t_naive, m_naive = timed(lambda: naive_arc_jsd(model, builder, response))
    print(
        f"engine {t_engine:.2f}s peak {m_engine:.1f} GiB | naive {t_naive:.2f}s peak "
        f"{m_naive:.1f} GiB | speed-up {t_naive / t_engine:.2f}x | "
        f"max |diff| {np.abs(exact.scores - naive).max():.2e}"
    )
    assert case.reference_logprobs().dtype == torch.float32, "softmax not float32"
    captured = case.capture(case.full_mask()[None], ["resid_post"])["resid_post"]
    lens = lens_logprobs(model, captured[-1])
    assert lens.dtype == torch.float32, "lens not float32"
    print("float32 softmax and lens: confirmed")
    fresh = Case(model, example.query, sources, response, engine=Engine(model, progress=False))
    screened, t_screen, _ = timed(lambda: fresh.arc_jsd(screen=args.screen))
    print(
        f"screened (m={args.screen}) {t_screen:.2f}s vs exact {t_engine:.2f}s: "
        f"{t_engine / t_screen:.2f}x, top-1 agrees {screened.ranking[0] == exact.ranking[0]}"
    )
    if args.model:
        model32 = load_model(args.model, device="cuda", dtype=torch.float32)
    else:  # same seed, so the same weights before the bf16 cast
        model32 = random_llama_1b(embedded.tokenizer, torch.float32)
    reference = Case(model32, example.query, sources, response).arc_jsd()
    print(
        f"bf16 vs fp32 ranking: spearman {spearman(exact.scores, reference.scores):.3f}, "
        f"top-1 agrees {exact.ranking[0] == reference.ranking[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
