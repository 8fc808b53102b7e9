# Two entry points for a fresh machine: `make repro` (main job) and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# DVC must not phone home: analytics and update checks are off in .dvc/config too.
export DVC_NO_ANALYTICS := 1
# A PYTHONDONTWRITEBYTECODE=1 in the caller's environment (this machine's shells set it) with
# setup's --no-compile left every Python process of the tests (each CLI call, each DVC stage)
# compiling scipy, pandas, statsmodels and DVC from source again: the caches are written here.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup browser slurm peers-start repro test test-fast lint docs clean

# KaTeX for `rimo-eval view`, from the npm registry, pinned with integrity hashes by
# package-lock.json; the view copies it into the site (no CDN). npm writes the stamp.
NPM_STAMP := node_modules/.package-lock.json

# llama.cpp is built for AVX2 rather than for the build machine (GGML_NATIVE): on a CPU with
# AMX (Sapphire Rapids and later) the native build repacks the Q4_K weights for AMX and
# segfaults in the first decode (ggml-org/llama.cpp#20824). No wheel cache, so a natively
# built wheel from an earlier install is never reused.
# Only what the Python package loads is built (the build is most of a fresh `make setup`): no
# libmtmd (LLAVA_BUILD: images, never sent here), no libllama-common (cmake/llama_slim.cmake);
# 74 of 178 objects are compiled (ninja, in parallel already).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/cmake/llama_slim.cmake

# --no-compile: pip would byte-compile all 18k modules of the environment (47 s of CPU, one
# process); Python compiles (and caches) the 40% a run imports (`make test`) when it does.
# Material for MkDocs prints an end-of-life banner when the theme is imported, unless
# NO_MKDOCS_2_WARNING is set. The theme loads while mkdocs.yml is validated, before any hook, so
# mkdocs.yml cannot set it: a .pth file of the venv does, for every process of the venv, and a
# plain `mkdocs build` is quiet.
define QUIET_MKDOCS
import pathlib, sysconfig
pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / "rimo_eval_quiet_mkdocs.pth"
pth.write_text("import os; os.environ.setdefault('NO_MKDOCS_2_WARNING', '1')\n")
endef
export QUIET_MKDOCS

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	@echo "make setup: installing the pinned dependencies and building llama.cpp for the local model (4-6 minutes the first time on 2 cores, silent while it compiles)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet --no-cache-dir --no-compile \
		-e '.[test]'
	$(PY) -c "$$QUIET_MKDOCS"
	touch $(STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund

# The page of `dvc plots show/diff` inlines Vega from node_modules (.dvc/config
# plots.html_template), so DVC's charts render offline.
PLOTS_PAGE := .dvc/plots/page.html

$(PLOTS_PAGE): $(NPM_STAMP) $(STAMP) rimo_eval/commands/plots_page.py
	$(PY) -m rimo_eval.commands.plots_page

setup: $(STAMP) $(NPM_STAMP) $(PLOTS_PAGE)

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

# The sweep test (tests/e2e/test_sweep.py) starts a single-node Slurm: Debian's slurm-wlm and
# munge, installed as root like the browser; elsewhere the test skips and says why.
slurm:
	@if ! command -v sbatch >/dev/null || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/munged ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq slurm-wlm munge >/dev/null; \
		else \
			echo "slurm-wlm and munge (Debian) not installed: the sweep test will skip" >&2; \
		fi; \
	fi

# The replay import tests (tests/engine/test_replay_import.py) run the real inspect_ai and
# lm-eval, each in its own venv under benchmarks/.venvs/ that tests/support/foreign_logs.py
# installs on first use: in a fresh clone, 3 minutes of downloads that held one worker of the
# parallel pass. `make test` starts both installs first, in the background (the same function,
# the same pins), so they overlap setup's llama.cpp build, and waits for them before pytest; in a
# set-up clone each is a version check of a second. Not in `make setup`: `make repro` needs
# neither tool.
PEERS := inspect lmeval

peers-start:
	@mkdir -p build
	@for tool in $(PEERS); do rm -f build/peer-$$tool.rc; \
		( python3 -c "from tests.support.foreign_logs import tool_python; tool_python('$$tool')" \
			> build/peer-$$tool.log 2>&1; echo $$? > build/peer-$$tool.rc ) & \
	done

define PEERS_WAIT
for tool in $(PEERS); do \
	while [ ! -e build/peer-$$tool.rc ]; do sleep 1; done; \
	if [ "$$(cat build/peer-$$tool.rc)" != 0 ]; then cat build/peer-$$tool.log; \
		echo "make: installing the $$tool venv for the tests failed (build/peer-$$tool.log)" >&2; \
		exit 1; fi; \
done
endef

# Ends with a dozen lines: headline metrics with intervals, sample or full, backend, report.
# The transcript browser (reports/view/, which the report links into) is the view stage of
# dvc.yaml: dvc repro builds it with the run, and dvc exp apply / checkout restore it with it.
# check-params first, outside DVC: DVC expands every YAML alias of params.yaml before any stage
# runs, so on an alias bomb dvc repro hangs for minutes; our loader names it in a second.
repro: setup
	rimo-eval check-params
	dvc repro
	rimo-eval summary

# Two passes: what can share the machine on 2 xdist workers (each test file stays on one worker,
# so a module's shared repo is built once), then the `serial` tests alone: kill loops, timed
# limits, DVC's queue workers. Flaky is worse than slow.
# PYTEST_ARGS goes to both passes (`make test PYTEST_ARGS=--durations=20`).
PYTEST_WORKERS ?= 2
# --durations: every CI log names its slowest tests, where the time budget goes.
PYTEST_ARGS ?= --durations=30
# --no-loadscope-reorder: files in collection order, the end-to-end ones first
# (tests/conftest.py), not by their number of tests.
PYTEST_PARALLEL := pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The docs site (mkdocs.yml) builds strictly, offline, into the git-ignored build/site: a
# broken link, anchor or nav entry fails the run in seconds, before the tests. Never --quiet:
# it hides the warnings that --strict counts. NO_MKDOCS_2_WARNING silences Material's banner.
# mypy (a minute of one core from a cold cache, as in a fresh clone) runs beside the first
# pytest pass, whose two workers leave CPU idle while their tests wait on servers, kills and
# child processes; its report prints after that pass, and a failure fails `make test` there.
# `make lint` runs it alone.
test: peers-start setup browser slurm
	ruff check .
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict
	@$(PEERS_WAIT)
	mypy > build/mypy.log 2>&1 & typing=$$!; \
	$(PYTEST_PARALLEL) -m "not serial"; tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy (beside the first pass):"; cat build/mypy.log; \
	[ $$typed -eq 0 ] && [ $$tests -eq 0 ]
	pytest $(PYTEST_ARGS) -m "serial"

# The edit loop: everything but the end-to-end tests marked `slow`.
test-fast: peers-start setup
	@$(PEERS_WAIT)
	$(PYTEST_PARALLEL) -m "not slow and not serial"
	pytest $(PYTEST_ARGS) -m "serial and not slow"

lint: $(STAMP)
	ruff check .
	mypy

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict

clean:
	rm -rf $(VENV) node_modules
