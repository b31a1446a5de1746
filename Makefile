# bringup: the two commands a fresh machine needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install real demo demo-service test lint typecheck unit docs man bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The real components the tests run against (sshd, llama.cpp server, vLLM CPU), cached
# outside the repository; what cannot be had is named in one line and its tests skip.
real: $(STAMP)
	scripts/install-real.sh

demo: $(STAMP)
	$(BIN)/bringup demo

# the seed's story as a systemd service, against a real systemd 252 in its own namespaces (root)
demo-service: $(STAMP)
	$(BIN)/python scripts/demo_service.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts tools
	$(BIN)/ruff format --check src tests bench scripts tools

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q

# the docs site (strict: a broken link or page fails), and the examples the pages show rerun
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python scripts/docs_examples.py --check

# the man page, generated from the parser (man/bringup.1)
man: $(STAMP)
	$(BIN)/python scripts/build_man.py

test: real lint typecheck unit docs man

bench: $(STAMP)
	$(BIN)/python bench/run_all.py
	$(BIN)/python bench/collect_results.py

clean:
	rm -rf $(VENV) build dist site man src/*.egg-info .mypy_cache .pytest_cache .ruff_cache
