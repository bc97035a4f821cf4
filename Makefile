# TEMPO book. `make book` and `make test` set everything up from scratch (Python 3.11).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROFILE ?= full

.PHONY: all book test unit bench venv clean
all: book

venv: $(STAMP)
$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

unit: $(STAMP)
	$(PY) -m pytest -q tests

test: unit

bench: $(STAMP)
	$(PY) -m tempo bench

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --path-output . -W --keep-going -q
	@echo "book: _build/html/index.html"

clean:
	rm -rf _build build book/generated
