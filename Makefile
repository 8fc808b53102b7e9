# Two entry points for a fresh machine: `make repro` (main job) and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# DVC must not phone home: analytics and update checks are off in .dvc/config too.
export DVC_NO_ANALYTICS := 1

.PHONY: setup repro test lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

repro: $(STAMP)
	dvc repro
	dvc metrics show

test: $(STAMP)
	ruff check .
	pytest

lint: $(STAMP)
	ruff check .

clean:
	rm -rf $(VENV)
