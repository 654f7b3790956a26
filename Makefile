# Two commands for everyone: `make lab` and `make test`. Everything else is for maintainers.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= cu13,course
INSTALLED := $(VENV)/.installed-$(EXTRAS)
ASSIGNMENTS := $(notdir $(wildcard solutions/[0-9]*))

.PHONY: lab test browser slides release setup-cells clean

## The virtual environment with the pinned dependencies and gpucourse (editable).
$(INSTALLED): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11 or newer is needed; set PYTHON=python3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-* && touch $@

## Open JupyterLab on the whole course, with the first lecture open.
lab: $(INSTALLED)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" lectures/01_threads_blocks_grids.ipynb

## The whole test suite (what CI runs).
test: $(INSTALLED) browser
	$(PY) -m pytest

## Debian's chromium for the browser tests (Playwright drives it; it downloads no browser of its own).
## Installed only as root with apt-get; elsewhere one line says so and those tests skip.
browser:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the browser tests"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
			|| echo "could not install chromium: the browser tests will skip"; \
	else echo "no chromium and no root apt-get: the browser tests will skip"; fi

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
