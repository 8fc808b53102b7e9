# Two entry points for a fresh machine: `make repro` (main job) and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# DVC must not phone home: analytics and update checks are off in .dvc/config too.
export DVC_NO_ANALYTICS := 1

.PHONY: setup browser repro test lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The report test opens the HTML in headless Chromium (Debian packages).
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else \
			echo "install chromium and chromium-driver (Debian) for the browser test" >&2; exit 1; \
		fi; \
	fi

# Ends with a dozen lines: headline metrics with intervals, sample or full, backend, report.
repro: $(STAMP)
	dvc repro
	rimo-eval summary

test: $(STAMP) browser
	ruff check .
	pytest

lint: $(STAMP)
	ruff check .

clean:
	rm -rf $(VENV)
