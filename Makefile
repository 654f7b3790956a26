# Two commands for everyone: `make lab` and `make test`. Everything else is for maintainers.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= cu13,course
INSTALLED := $(VENV)/.installed-$(EXTRAS)
ASSIGNMENTS := $(notdir $(wildcard solutions/[0-9]*))
# Jupyter refuses to start as root (containers, Codespaces) without --allow-root.
USER_ID ?= $(shell id -u)
LAB = $(VENV)/bin/jupyter lab $(if $(filter 0,$(USER_ID)),--allow-root) --ServerApp.root_dir="$(CURDIR)" lectures/01_threads_blocks_grids.ipynb
# Jupyter configuration that switches off nbgrader's instructor tools for students.
STUDENT_CONFIG := $(CURDIR)/.jupyter/student

.PHONY: lab lab-instructor test slides release setup-cells clean

## The virtual environment with the pinned dependencies and gpucourse (editable).
$(INSTALLED): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11 or newer is needed; set PYTHON=python3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-* && touch $@

## Open JupyterLab on the whole course, with the first lecture open (without nbgrader's instructor tools).
lab: $(INSTALLED)
	JUPYTER_CONFIG_PATH="$(STUDENT_CONFIG)" $(LAB)

## The same with nbgrader's formgrader, Create Assignment and course list.
lab-instructor: $(INSTALLED)
	$(LAB)

## The whole test suite (what CI runs).
test: $(INSTALLED)
	$(PY) -m pytest

## Every lecture as an offline reveal.js deck in build/slides/.
slides: $(INSTALLED)
	$(PY) -m gpucourse.course.slides lectures build/slides

## Regenerate assignments/ (the student release) from solutions/ with nbgrader.
release: $(INSTALLED)
	for a in $(ASSIGNMENTS); do $(VENV)/bin/nbgrader generate_assignment $$a --force --no-db || exit 1; done

## Rewrite every notebook's first cell from pyproject.toml's [tool.gpucourse].
setup-cells: $(INSTALLED)
	$(PY) -m gpucourse.course.setup_cell lectures solutions assignments

clean:
	rm -rf $(VENV) build .pytest_cache
