"""Defaults that several entry points share, in one light module.

Each is read where the work happens (:class:`mechrag.Case`, the gating code); the one-line API,
the commands and the sweeps pass values through, and the command line shows them in ``--help``
without loading torch.
"""

MAX_NEW_TOKENS = 64
"""How many tokens a case generates, greedily, when no response is given.

64 holds a one- or two-sentence answer from a chat model, so an attribution is not computed on
a sentence cut in half (32, the commands' value before 0.3, cut SmolLM2's longer answers); the
studies in ``experiments/`` pin their own ``--max-new-tokens`` and record it."""

DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes a model may be loaded in, by name (``--dtype``, a sweep's ``dtype``); unset, the
loader's choice: float32 on the CPU, bfloat16 on a GPU."""
