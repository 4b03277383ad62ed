# The two commands a newcomer needs: `make run` starts the host, `make test` runs the suite.
# `make lint` runs the fences CI runs before the suites: ruff and mypy (configured in pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# Test processes `make test` runs side by side (pytest-xdist): most tests wait on sockets and the
# processes they start, so three share two cores well. TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3

# The agent harnesses' CLIs, pinned exactly and installed once, never fetched while the host runs.
HARNESS := var/harness
CLAUDE_CODE := @anthropic-ai/claude-code@2.1.332
COPILOT_CLI := @github/copilot@1.0.102
# Claude Code 2.1 declares Node >= 22: npm installs the CLIs running on this Node, from the npm registry.
HARNESS_NODE := node@22.23.3

.PHONY: run test install bench harness lint

$(BIN)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

$(HARNESS)/.installed: Makefile
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the claude and github-copilot agents stay unavailable until \`make harness\` runs with npm"; \
	else \
		npm install --prefix $(HARNESS)/node --no-fund --no-audit --save-exact $(HARNESS_NODE) \
		&& PATH="$(CURDIR)/$(HARNESS)/node/node_modules/node/bin:$$PATH" \
			npm install --prefix $(HARNESS) --no-fund --no-audit --save-exact $(CLAUDE_CODE) $(COPILOT_CLI) && touch $@ \
			|| echo "npm could not install the harness CLIs: the claude and github-copilot agents stay unavailable"; \
	fi

harness: $(HARNESS)/.installed

install: $(BIN)/.installed harness

run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py runhost --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# Both run, so one report shows every finding; either failing fails the target.
lint: $(BIN)/.installed
	@status=0; $(BIN)/ruff check . || status=1; $(BIN)/mypy . || status=1; exit $$status

bench: install
	$(BIN)/python -m bench
