# Two entry points that work on a fresh machine with only Python 3.11+ and make.
#   make demo  -> records a small scheduler day into ./epochledger-demo.db and prints it
#   make test  -> the whole suite, with the Dagster and Celery extras installed and Airflow in a
#                 venv of its own (PostgreSQL tests skip unless a server answers, or fail when
#                 EPOCHLEDGER_TEST_POSTGRES=require; the browser, Dagster, Celery (Redis and
#                 RabbitMQ on 127.0.0.1) and Airflow tests likewise with EPOCHLEDGER_TEST_BROWSER,
#                 _DAGSTER, _CELERY and _AIRFLOW=require)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# The Airflow adapter's extra clashes with the dev venv's pins (Dagster's among them): a venv
# of its own, which tests/helpers/airflow_instance.py runs Airflow from (docs/adapters.md, "Airflow").
AIRFLOW_VENV ?= .venv-airflow

.PHONY: demo serve test ts-client ts-test check bench mutation clean axe screenshots

$(BIN)/epochledger: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[postgres,dev]'
	touch $@

# The Dagster importer's extra (docs/import-dagster.md), for the tests that run real Dagster.
$(VENV)/.dagster: $(BIN)/epochledger
	$(BIN)/python -m pip install -q -e '.[postgres,dev,dagster]'
	touch $@

# The live Celery adapter's extra (docs/adapters.md, "Celery"), for the tests that run a real worker.
$(VENV)/.celery: $(BIN)/epochledger
	$(BIN)/python -m pip install -q -e '.[postgres,dev,celery]'
	touch $@

# The live Prefect adapter's extra (docs/adapters.md, "Prefect"), for the tests that run real flows
# on Prefect's ephemeral API: 74 s and +148 MB beside the Dagster extra.
$(VENV)/.prefect: $(BIN)/epochledger
	$(BIN)/python -m pip install -q -e '.[postgres,dev,prefect]'
	touch $@

# Airflow 3.3.2 and epochledger with the `airflow` extra, ~380 MB: 81 s on a fresh clone (7 min at load 10).
$(AIRFLOW_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install -q -e '.[postgres,airflow]'
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

# axe-core from the npm registry, pinned by tests/axe/package-lock.json, into tests/axe: the
# console's accessibility check injects it into the page (rule H11, tests/console/test_console_browser.py).
AXE = tests/axe/node_modules/axe-core/axe.min.js
$(AXE): tests/axe/package.json tests/axe/package-lock.json
	@if ! command -v npm >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "make: installing Debian's nodejs and npm for axe-core"; \
		apt-get install -y -q nodejs npm >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q nodejs npm >/dev/null; }; \
	fi
	cd tests/axe && npm ci --no-audit --no-fund --loglevel=error
	touch $@

axe: $(AXE)

# The console's screenshots in docs/console/ (docs/console.md), in headless Chromium.
screenshots: $(BIN)/epochledger
	$(BIN)/python -m tests.helpers.console_shots

# The timeline and console tests (rules V1, H11) drive Debian's chromium, and the alerting rules' tests (rule H7)
# Debian's promtool (package prometheus); as root, install them if missing.
test: $(BIN)/epochledger $(VENV)/.dagster $(VENV)/.celery $(VENV)/.prefect $(AIRFLOW_VENV)/.installed $(AXE)
	@if [ "$$(id -u)" = 0 ] && [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then \
		echo "make test: installing Debian's chromium for the timeline tests (rule V1)"; \
		apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	fi
	@if [ "$$(id -u)" = 0 ] && ! command -v promtool >/dev/null && command -v apt-get >/dev/null; then \
		echo "make test: installing Debian's prometheus for promtool, which checks docs/alerts.yml (rule H7)"; \
		apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null; }; \
	fi
	@if [ "$$(id -u)" = 0 ] && { ! command -v curl >/dev/null || ! command -v jq >/dev/null; } && command -v apt-get >/dev/null; then \
		echo "make test: installing Debian's curl and jq for docs/service.md's HTTP loops (rule H2)"; \
		apt-get install -y -q curl jq >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q curl jq >/dev/null; }; \
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
	rm -rf $(VENV) $(AIRFLOW_VENV) *.egg-info epochledger-demo.db* mutants
