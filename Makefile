# Two entry points for a fresh machine: `make repro` (main job) and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# DVC must not phone home: analytics and update checks are off in .dvc/config too.
export DVC_NO_ANALYTICS := 1

.PHONY: setup browser repro test lint clean

# llama.cpp is built for AVX2 rather than for the build machine (GGML_NATIVE): on a CPU with
# AMX (Sapphire Rapids and later) the native build repacks the Q4_K weights for AMX and
# segfaults in the first decode (ggml-org/llama.cpp#20824). No wheel cache, so a natively
# built wheel from an earlier install is never reused.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet --no-cache-dir -e '.[test]'
	touch $(STAMP)

# Front-end packages pinned in package.json / package-lock.json (integrity hashes): npm ci.
# The page of `dvc plots show/diff` inlines Vega from them (.dvc/config plots.html_template).
NODE_STAMP := node_modules/.installed
PLOTS_PAGE := .dvc/plots/page.html

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts
	touch $(NODE_STAMP)

$(PLOTS_PAGE): $(NODE_STAMP) $(STAMP) stages/commands/plots_page.py
	$(PY) -m stages.commands.plots_page

setup: $(STAMP) $(PLOTS_PAGE)

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
repro: setup
	dvc repro
	rimo-eval summary

test: setup browser
	ruff check .
	pytest

lint: $(STAMP)
	ruff check .

clean:
	rm -rf $(VENV)
