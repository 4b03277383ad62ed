# The two commands a newcomer needs: `make run` starts the host, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install bench

$(BIN)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py runhost --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python -m bench
