# Two commands: `make run` serves bulkops on SQLite with the examples; `make test` runs
# every check CI runs. Both create the virtual environment when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest docs install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/bulkops serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# One pytest-xdist worker per core: the tests that start processes (tests/e2e, tests/browser)
# run one after another in one of them, the in-process tests share out among all.
pytest: $(STAMP)
	$(BIN)/pytest -n auto --dist loadgroup

# The documentation site, built offline into site/; --strict fails on a broken link, a
# missing page or a Python name the reference cannot find.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site

# Benchmarks of a real service process (benchmarks/README.md): `make bench` is the full run
# (a few minutes), `make bench-quick` the same scenarios on small inputs (well under a minute).
.PHONY: bench bench-quick

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks.run --quick

# The chaos run (benchmarks/chaos.py): a private PostgreSQL server, an API process and three
# workers under 40 s of compound faults per seed (workers killed, every connection cut, the
# database restarted, silent partitions, the S3 store down), then the invariants checked;
# several seeds, each fault kind at least twice. `tests/e2e/test_chaos.py` runs two of 25 s in the test suite.
.PHONY: chaos

chaos: $(STAMP)
	$(BIN)/python -m benchmarks.chaos --seconds 40 --seeds 1,2,3

# The dashboard screenshots of the README and the docs, retaken by the browser tests (Debian's chromium).
.PHONY: screenshots

screenshots: $(STAMP)
	DASHBOARD_SCREENSHOTS=docs/screenshots $(BIN)/pytest tests/browser/test_layout.py -q
