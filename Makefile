# `make lab` for everyone (students too: it is all the student edition needs).
# BEGIN INSTRUCTOR ONLY (the lines up to END are left out of the student edition)
# `make test` for everyone who changes the course; `make grade` for instructors. Everything else is for maintainers.
# END INSTRUCTOR ONLY
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# BEGIN INSTRUCTOR ONLY
# The tests', the grading's and the benchmarks' packages too (the student edition installs the student extra only).
EXTRAS ?= cu13,course
# END INSTRUCTOR ONLY
EXTRAS ?= cu13,student
INSTALLED := $(VENV)/.installed-$(EXTRAS)
# Jupyter refuses to start as root (containers, Codespaces) without --allow-root.
USER_ID ?= $(shell id -u)
# numba-cuda 0.30 is built for Linux and Windows only: on macOS the install stops with one line (README, "On a Mac").
PLATFORM ?= $(shell uname -s)
# In a container started with `-p 8888:8888`: LAB_IP=0.0.0.0, so that the host's browser reaches the server.
LAB_IP ?=
# It opens on lecture 1: the page Jupyter prints, `/` and the browser it starts (a file argument would open
# only in that browser, and a printed link would show the Launcher).
LAB = $(VENV)/bin/jupyter lab $(if $(filter 0,$(USER_ID)),--allow-root) $(if $(LAB_IP),--ServerApp.ip=$(LAB_IP)) \
	--ServerApp.root_dir="$(CURDIR)" \
	--LabApp.default_url=/lab/tree/lectures/01_threads_blocks_grids.ipynb
# Jupyter configuration that switches off nbgrader's instructor tools for students (Fetch, Submit, Validate stay).
STUDENT_CONFIG := $(CURDIR)/.jupyter/student
# The nbgrader exchange: where students' Assignment List fetches and submits. An exported NBGRADER_EXCHANGE (what
# nbgrader itself reads) is honoured; EXCHANGE=... overrides it.
EXCHANGE ?= $(or $(NBGRADER_EXCHANGE),/srv/nbgrader/exchange)

.PHONY: lab slides clean

## The virtual environment with the pinned dependencies and gpucourse (editable).
$(INSTALLED): pyproject.toml
	@if [ "$(PLATFORM)" = Darwin ]; then echo "numba-cuda, which the course runs on, has no build for macOS (only Linux" \
		"and Windows): on a Mac, take the course in Colab or in a Linux container (README, \"On a Mac\")." >&2; exit 1; fi
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11 or newer is needed; set PYTHON=python3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	# jsonschema's optional IRI checker, pulled in by an extra of jupyter-events: importing it builds a grammar
	# (about 1.5 s) in every process that loads nbformat or Jupyter's server. Nothing here checks IRIs.
	$(PY) -m pip uninstall --quiet --yes rfc3987-syntax
	rm -f $(VENV)/.installed-* && touch $@

## Open JupyterLab on the whole course, with the first lecture open (without nbgrader's instructor tools).
lab: $(INSTALLED)
	JUPYTER_CONFIG_PATH="$(STUDENT_CONFIG)" NBGRADER_EXCHANGE="$(EXCHANGE)" $(LAB)

## Every lecture as an offline reveal.js deck in build/slides/.
slides: $(INSTALLED)
	$(PY) -m gpucourse.course.slides $(if $(L),lectures/$(L).ipynb,lectures) build/slides

clean:
	rm -rf $(VENV) build .pytest_cache

# BEGIN INSTRUCTOR ONLY
ASSIGNMENTS := $(notdir $(wildcard solutions/[0-9]*))
.PHONY: lab-instructor test soak browser release setup-cells student-edition exchange grade grade-one sandbox gpu-check gpu-wheels

## JupyterLab with nbgrader's formgrader, Create Assignment and course list (on the same exchange as `make lab`).
lab-instructor: $(INSTALLED)
	NBGRADER_EXCHANGE="$(EXCHANGE)" $(LAB)

## The whole test suite (what CI runs), on TEST_WORKERS processes (each test file stays in one; the longest files
## first, in the order of tests/conftest.py's LONGEST_FIRST).
TEST_WORKERS ?= 2
# Bytecode kept (in __pycache__, ignored by git) even where PYTHONDONTWRITEBYTECODE is set: about 150 Python
# processes of a run (kernels, nbgrader, graders) import the course, 0.3 s each compiling its sources again.
KEEP_BYTECODE := PYTHONDONTWRITEBYTECODE=
test: $(INSTALLED) browser sandbox
	$(KEEP_BYTECODE) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## Every lecture 5 times in a row in fresh kernels, each cell within a time limit (a stall names its cell).
soak: $(INSTALLED)
	$(KEEP_BYTECODE) GPUCOURSE_SOAK=1 $(PY) -m pytest -n $(TEST_WORKERS) tests/test_soak.py

## Debian's chromium for the browser tests (Playwright drives it; it downloads no browser of its own).
## Installed only as root with apt-get; elsewhere one line says so and those tests skip.
browser:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the browser tests"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
			|| echo "could not install chromium: the browser tests will skip"; \
	else echo "no chromium and no root apt-get: the browser tests will skip"; fi

## Bubblewrap, which sandboxes each student's notebook at grading (Debian, as root; else it says what to do).
sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null); } || \
	  echo "bubblewrap is not installed: grading runs without a sandbox (install the bubblewrap package)"

## Regenerate assignments/ (the student release) from solutions/ with nbgrader.
release: $(INSTALLED)
	for a in $(ASSIGNMENTS); do $(VENV)/bin/nbgrader generate_assignment $$a --force --no-db || exit 1; done

## Rewrite every notebook's badge and first cell from pyproject.toml's [tool.gpucourse]; one line says what it did.
setup-cells: $(INSTALLED)
	$(PY) -m gpucourse.course.setup_cell lectures solutions assignments

## The course as students get it, without solutions/ or instructor files, with the course package as a wheel
## (what Colab installs without an install-source): build/student-edition/ and its .zip. The setup cells are
## rewritten first (a changed install-source), and a line says where Colab installs the course from.
student-edition: setup-cells
	$(PY) -m gpucourse.course.student_edition . build/student-edition

## The exchange folder (EXCHANGE=..., else NBGRADER_EXCHANGE, else /srv/nbgrader/exchange): everyone may write into
## it (nbgrader's setup); a line says what to export so that nbgrader and `make lab` use it.
exchange:
	mkdir -p "$(EXCHANGE)" && chmod ugo+rwx "$(EXCHANGE)"
	@if [ "$(NBGRADER_EXCHANGE)" = "$(EXCHANGE)" ]; then \
		echo "exchange $(EXCHANGE) is ready; next: nbgrader release_assignment <assignment>"; \
	else echo "exchange $(EXCHANGE) is ready; next: export NBGRADER_EXCHANGE=$(EXCHANGE), then nbgrader" \
		"release_assignment <assignment> (nbgrader and make lab read it)"; fi

# `make grade` without A= (`make grade-one` without A= or S=, or an assignment that is not in solutions/): one line
# that says how, before anything is installed, not the grader's usage.
GRADE_USAGE := $(if $(filter grade-one,$(MAKECMDGOALS)),make grade-one A=<assignment> S=<student>,make grade \
	A=<assignment>), e.g. make $(firstword $(filter grade grade-one,$(MAKECMDGOALS))) \
	A=$(firstword $(sort $(ASSIGNMENTS)))$(if $(filter grade-one,$(MAKECMDGOALS)), S=<student>)
ifneq ($(filter grade grade-one,$(MAKECMDGOALS)),)
ifeq ($(A),)
$(error $(GRADE_USAGE))
else ifeq ($(filter $(A),$(ASSIGNMENTS)),)
$(error no assignment $(A) in solutions/: $(GRADE_USAGE))
else ifeq ($(if $(filter grade-one,$(MAKECMDGOALS)),$(S),given),)
$(error $(GRADE_USAGE))
endif
endif

## Grade every submission of assignment A (in submitted/<student>/A/) on Dask: a local cluster of this machine's
## cores, or the cluster at SCHEDULER=tcp://host:8786; sandboxed, re-checked, feedback, grades.csv.
grade: $(INSTALLED) sandbox
	$(PY) -m gpucourse.classroom.grade $(A) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(ARGS)

## Grade again one student S of assignment A (ARGS="--settle notebook" or "--settle clean-room" after a review).
grade-one: $(INSTALLED) sandbox
	$(PY) -m gpucourse.classroom.grade $(A) --student $(S) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(ARGS)

## The whole course on a real GPU: notebooks, GPU benchmarks, the differential test (ARGS="--help" for its parts).
gpu-check:
	$(PYTHON) benchmarks/gpu_check.py $(ARGS)

## Download (online) the wheels gpu-check installs offline on the GPU machine (notebooks, grading, bubblewrap's
## .deb), into wheels/gpu-check/.
gpu-wheels:
	$(PYTHON) benchmarks/gpu_check.py --download-wheels $(ARGS)
# END INSTRUCTOR ONLY
