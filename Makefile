# TEMPO book. `make book` and `make test` set everything up from scratch (Python 3.11).
#   make book                  run every notebook (PROFILE=full; two at a time, JOBS=1: one) and build _build/html
#   make book PROFILE=smoke    the same with tiny grids (minutes), into build/smoke-book/
#   make notebook NB=05_calibration PROFILE=gpu    run one notebook (uses an activated conda env, see TEMPO_PYTHON)
#   make book TRACE=trace.npz  the claims the paper computes on recorded routing, on your recorded trace
#   make test                  unit tests, smoke build of the whole book, browser check
#   make warmup                compile the solver ahead (every target that solves does this first)
#   make bench                 solver benchmark, each target met or missed (BENCH_ARGS=--compare REV: also an older commit)
#   make traces                the shipped routing traces and profiles (data/traces/) from the public recordings
#                              in SOURCE=../shared/data/routing (about 4 minutes; the book reads only data/traces/)
#   make sglang-test           optional: the SGLang plugin against sglang 0.5.23 at its own pins (CPU, large download)
#   make gpu-check             on a GPU node, in the GPU environment: about 7 minutes of checks and short
#                              calibration grids into build/gpu-check (GPU_CHECK_ARGS=--record: data/measured);
#                              exits 1 naming each failed section.  On a lent node's own image, without
#                              installing anything: bash scripts/gpu-node-all.sh (GPU.md)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
# The Python that runs everything. Default: a private .venv built from the CPU lock. On a GPU
# node, use the environment you activated instead (nothing is installed, no .venv is made):
# TEMPO_PYTHON=/path/to/python, or automatically $(CONDA_PREFIX)/bin/python when a conda env
# other than `base` is active (`conda activate tempo-book`). TEMPO_PYTHON=.venv forces the venv.
TEMPO_PYTHON ?= $(if $(and $(CONDA_PREFIX),$(filter-out base,$(CONDA_DEFAULT_ENV))),$(CONDA_PREFIX)/bin/python)
ifneq ($(filter-out .venv,$(strip $(TEMPO_PYTHON))),)
PY := $(or $(shell command -v $(TEMPO_PYTHON) 2>/dev/null),$(error TEMPO_PYTHON=$(TEMPO_PYTHON) is not an executable Python))
STAMP := build/.env-checked$(subst /,_,$(PY))
else
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
endif
PYBIN := $(dir $(PY))
PROFILE ?= full
# the compiled solver's machine code, compiled once after installing (numba caches it on disk)
WARM := build/.solver-warm

NB_SRC := $(sort $(wildcard notebooks/[0-9][0-9]_*.md))
NB_NAMES := $(notdir $(basename $(NB_SRC)))
LEDGER := 99_claims_ledger
EXEC := build/executed/$(PROFILE)
EXECUTED := $(addprefix $(EXEC)/,$(addsuffix .ipynb,$(NB_NAMES)))
DEPS := $(shell find tempo -name '*.py') $(wildcard data/paper/* data/params/* data/traces/*) $(shell find data/measured -type f 2>/dev/null) $(STAMP)
ifeq ($(PROFILE),smoke)
BOOK_OUT := build/smoke-book
else
BOOK_OUT := .
endif

.PHONY: all book test unit browser bench venv notebook clean sglang-test gpu-check traces warmup
.SECONDARY:
.DELETE_ON_ERROR:
all: book

venv: $(STAMP)
# an activated environment is checked, never modified
build/.env-checked%: requirements.txt pyproject.toml
	@$(PY) -c "import tempo, papermill, jupytext, jupyter_book" || { echo "TEMPO_PYTHON=$(PY) lacks the book's packages:" \
	  "install requirements.txt and this package into it (conda env create -f environment.yml does both), or use TEMPO_PYTHON=.venv"; exit 1; }
	@echo "using the activated environment: $(PY)"; mkdir -p build && touch $@
$(VENV)/.installed-stamp: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

# numba compiles the solver once (about 2 minutes idle) and caches it: every later process loads it
warmup: $(WARM)
$(WARM): $(STAMP) $(wildcard tempo/policies/tempo_fast/*.py) tempo/core/pricing.py
	@echo "compiling the solver ahead (python -m tempo warmup; once per install or solver edit)"
	$(PY) -m tempo warmup --quiet
	@mkdir -p build && touch $@

# one executed notebook per source; papermill passes the profile (and the trace, below)
$(EXEC)/%.ipynb: notebooks/%.md $(DEPS) | $(WARM)
	@$(PY) -m tempo.book.runbook $* $(PROFILE) $(TRACE)

# TRACE=trace.npz (a recorded routing trace, `python -m tempo import-trace DUMP... -o trace.npz`):
# the chapters whose claims the paper computes on recorded routing draw their batches from it
# (papermill parameter trace_path; the file's sha256 goes into each experiment's config).
# Changing TRACE, or the file, re-runs them; the stamp holds the TRACE this profile was built with.
TRACE ?=
ifneq ($(TRACE),)
ifeq ($(wildcard $(TRACE)),)
$(error TRACE=$(TRACE) does not exist: record routing with SGLang and convert it, `python -m tempo import-trace DUMP... -o $(TRACE)` (chapter 04, "A trace-backed build"))
endif
endif
TRACE_NBS := 02_theory 03_solver 04_1_routing 04_3_placement
TRACE_STAMP := build/trace-$(PROFILE).txt
_trace_stamp := $(shell mkdir -p build && { test -f $(TRACE_STAMP) && test "$$(cat $(TRACE_STAMP))" = "$(TRACE)" || echo "$(TRACE)" > $(TRACE_STAMP); })
$(addprefix $(EXEC)/,$(addsuffix .ipynb,$(TRACE_NBS))): $(TRACE_STAMP) $(TRACE)

# the ledger reads the claims every other chapter recorded
$(EXEC)/$(LEDGER).ipynb: $(filter-out $(EXEC)/$(LEDGER).ipynb,$(EXECUTED))

# MathJax 3 served from _static (the default CDN is unreachable offline)
MATHJAX := _vendor/mathjax/tex-svg-full.js
$(MATHJAX):
	@mkdir -p build/npm _vendor/mathjax
	cd build/npm && npm pack mathjax@3.2.2 --silent >/dev/null && tar -xzf mathjax-3.2.2.tgz package/es5/tex-svg-full.js
	cp build/npm/package/es5/tex-svg-full.js $@

_static/vega-bundle.js: $(STAMP)
	$(PY) -c "from tempo.book.figures import write_vega_bundle; write_vega_bundle()"

# the notebooks run JOBS at a time (default 2; JOBS=1: one at a time): a chapter's grids already
# use every core, and its serial parts (the kernel's start, serial studies, tables) overlap another
# chapter's.  The longest chapters are listed first so they start first.  Chapter 04's lectures run
# in their order (the second reads the grid the first cached); the ledger runs after all of them.
JOBS ?= 2
MAKEFLAGS += --jobs=$(JOBS)
CH04 := $(filter $(EXEC)/04_%,$(EXECUTED))
LONGEST := $(CH04) $(addprefix $(EXEC)/,03_solver.ipynb 02_theory.ipynb)
_seq := 1 2 3 4 5 6 7 8 9
$(foreach n,$(wordlist 2,$(words $(CH04)),$(_seq)),$(eval $(word $(n),$(CH04)): | $(word $(word $(n),0 $(_seq)),$(CH04))))
book: $(filter $(EXECUTED),$(LONGEST)) $(EXECUTED) _static/vega-bundle.js $(MATHJAX)
	@rm -rf book/generated && mkdir -p book/generated
	@cp $(EXECUTED) book/generated/
	@cp build/results/$(PROFILE)/ledger_summary.md book/generated/ledger_summary.md
	$(PYBIN)jupyter-book build . --path-output $(BOOK_OUT) -W --keep-going -q
	@echo "book ($(PROFILE)): $(BOOK_OUT)/_build/html/index.html"

notebook: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make notebook NB=05_calibration [PROFILE=smoke|full|gpu]"; exit 2; }
	$(MAKE) --no-print-directory $(EXEC)/$(NB).ipynb

unit: $(STAMP) $(WARM)
	$(PY) -m pytest -q tests --ignore=tests/browser

browser: $(STAMP)
	BOOK_HTML=build/smoke-book/_build/html $(PY) -m pytest -q tests/browser

test: unit
	$(MAKE) --no-print-directory book PROFILE=smoke
	$(MAKE) --no-print-directory browser

# optional: the plugin against the real sglang 0.5.23 on CPU, every package at sglang's own pins (the GPU
# lock's versions, tests/sglang/requirements.txt) except torch and triton, which stay the .venv's CPU
# build (a large download into build/sglang-site; not part of `make test`)
SGL_SITE := build/sglang-site
$(SGL_SITE)/.stamp: tests/sglang/requirements.txt $(STAMP)
	$(PY) -m pip install -q --no-deps --target $(SGL_SITE) -r tests/sglang/requirements.txt
	@touch $@
sglang-test: $(SGL_SITE)/.stamp
	PYTHONPATH=tests/sglang/stubs:$(SGL_SITE) $(PY) -m pytest -q tests/sglang

bench: $(STAMP) $(WARM)
	$(PY) -m tempo bench $(BENCH_ARGS)

# runs in the GPU environment's python (environment.yml, or the node's own torch), never the CPU .venv
GPU_PYTHON ?= python3
GPU_CHECK_ARGS ?=
gpu-check:
	$(GPU_PYTHON) -m tempo gpu-check $(GPU_CHECK_ARGS)

SOURCE ?= ../shared/data/routing
traces: $(STAMP)
	$(PY) -m tempo make-traces --source $(SOURCE)

clean:
	rm -rf _build build book/generated _static/vega-bundle.js _vendor
