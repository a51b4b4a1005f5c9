# Two entry points that work on a fresh machine with only Python 3.11+ and make.
#   make demo  -> records a small scheduler day into ./epochledger-demo.db and prints it
#   make test  -> the whole suite, with the Dagster extra installed (PostgreSQL tests skip
#                 unless a server answers, or fail when EPOCHLEDGER_TEST_POSTGRES=require;
#                 the browser and Dagster tests likewise with EPOCHLEDGER_TEST_BROWSER=require
#                 and EPOCHLEDGER_TEST_DAGSTER=require)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo serve test ts-client ts-test check bench mutation clean

$(BIN)/epochledger: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[postgres,dev]'
	touch $@

# The Dagster importer's extra (docs/import-dagster.md), for the tests that run real Dagster.
$(VENV)/.dagster: $(BIN)/epochledger
	$(BIN)/python -m pip install -q -e '.[postgres,dev,dagster]'
	touch $@

demo: $(BIN)/epochledger
	$(BIN)/epochledger demo

# The service on the demo's ledger (docs/service.md): http://127.0.0.1:8750, loopback only.
serve: $(BIN)/epochledger
	@[ -e epochledger-demo.db ] || $(BIN)/epochledger demo
	$(BIN)/epochledger --store epochledger-demo.db serve

# The TypeScript client (clients/typescript): its types are generated from the committed
# OpenAPI document (docs/openapi.json); ts-test fails when they are stale, then runs its
# tests with Node's own runner against a real server. Node and npm: Debian's, when missing.
TS = clients/typescript
$(TS)/node_modules/.installed: $(TS)/package.json $(TS)/package-lock.json
	@if ! command -v npm >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "make: installing Debian's nodejs and npm for the TypeScript client's tests"; \
		apt-get install -y -q nodejs npm >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q nodejs npm >/dev/null; }; \
	fi
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-client: $(TS)/node_modules/.installed
	cd $(TS) && node scripts/generate.mjs ../../docs/openapi.json src/api.ts

ts-test: $(BIN)/epochledger $(TS)/node_modules/.installed
	cd $(TS) && node scripts/generate.mjs ../../docs/openapi.json src/api.ts --check
	cd $(TS) && npx tsc -p tsconfig.json && EPOCHLEDGER_PYTHON=$(abspath $(BIN))/python node --test dist/test/

# The timeline tests (rule V1) drive Debian's chromium; as root, install it if missing.
test: $(BIN)/epochledger $(VENV)/.dagster
	@if [ "$$(id -u)" = 0 ] && [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then \
		echo "make test: installing Debian's chromium for the timeline tests (rule V1)"; \
		apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	fi
	$(BIN)/python -m pytest -n 2 -q
	$(MAKE) ts-test

# Static checks: lint, format (ruff format; the truth tables keep their fmt: off blocks), types (strict),
# the layer contracts.
check: $(BIN)/epochledger
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(BIN)/epochledger
	$(BIN)/python -m bench

# Mutation testing of the rule modules (docs/mutation.md): minutes to an hour, not CI.
mutation: $(BIN)/epochledger
	$(BIN)/python -m pip install -q -e '.[postgres,dev,mutation]'
	$(BIN)/python -m tests.mutation

clean:
	rm -rf $(VENV) *.egg-info epochledger-demo.db* mutants
