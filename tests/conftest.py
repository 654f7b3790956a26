"""Test-wide settings (every simulated kernel must also compile for a real GPU) and shared fixtures.

The browser fixtures drive Debian's chromium with Playwright; without either the browser tests
skip in one line, except where ``GPUCOURSE_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""

import fcntl
import functools
import importlib.util
import itertools
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

os.environ.setdefault("GPUCOURSE_PTX_CHECK", "require")

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_NAMES = ("chromium", "chromium-browser")  # Debian's package, and Ubuntu's name for it
VIEWPORT = {"width": 1280, "height": 720}


# The test files that take longest, by their seconds of test time in `make test` (2 cores of an AMD EPYC,
# 2026-12-02), longest first. `make test` hands whole files to its workers (`--dist loadfile`) in collection order
# (`--no-loadscope-reorder`), which this puts them in: a long file started last would leave the other worker idle.
LONGEST_FIRST = (
    "classroom/test_classroom.py",  # 158
    "test_notebooks.py",  # 156
    "test_nbgrader.py",  # 79
    "course/test_colab_first_run.py",  # 55
    "test_assignments_run_all.py",  # 47
    "benchmarks/test_gpu_check.py",  # 47
    "run/test_tuning.py",  # 45
    "benchmarks/test_cost_model_benchmark.py",  # 42
    "browser/test_slides_in_browser.py",  # 40
    "benchmarks/test_tuning_benchmark.py",  # 39
    "kernels/test_fusion_kernels.py",  # 37
    "grading/test_tuning_checks.py",  # 31
    "grading/test_wrong_answers.py",  # 31
    "benchmarks/test_matmul_benchmark.py",  # 29
    "browser/test_lab_in_browser.py",  # 29
    "simulator/test_simulator_fuzz.py",  # 26
    "simulator/test_simulator_differential_fuzz.py",  # 20
    "test_lab.py",  # 18
    "grading/test_flash_exercise.py",  # 16
    "benchmarks/test_benchmarks_without_gpu.py",  # 15
    "gpu/test_differential.py",  # 15
    "browser/test_exchange_in_browser.py",  # 13
)


def pytest_collection_modifyitems(items):
    """The files of `LONGEST_FIRST` first, in its order; the others after them, as collected."""
    rank = {f"tests/{name}": place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session", autouse=True)
def compile_cache_of_this_run(tmp_path_factory):
    """Compilations kept for this test run only (all its workers and the notebooks they start), never the user's."""
    if "GPUCOURSE_COMPILE_CACHE" not in os.environ:
        os.environ["GPUCOURSE_COMPILE_CACHE"] = str(shared_folder(tmp_path_factory, "compile-cache"))


@pytest.fixture(autouse=True)
def random_data_of_this_test_alone(request):
    """A test module's random generator (``rng`` or ``RNG``) seeded afresh for each test from the test's own name:
    its data then do not depend on which tests ran before it (on this worker, under -k), so a failure reproduces."""
    import zlib

    import numpy as np

    for name in ("rng", "RNG"):
        if isinstance(getattr(request.module, name, None), np.random.Generator):
            setattr(request.module, name, np.random.default_rng(zlib.crc32(request.node.nodeid.encode())))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder that every worker of this test run shares (xdist gives each worker a sibling base folder)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


def made_once(target: Path, make) -> Path:
    """``target``, made by ``make(part)`` (which writes the file ``part``) once per test run, by whichever worker
    asks first (the others wait for it). A make that fails leaves nothing: the next to ask makes it again."""
    with open(target.with_name(f"{target.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            part = target.with_name(f"{target.name}.part")
            make(part)
            part.rename(target)
    return target


@pytest.fixture(scope="session")
def executed_lecture(tmp_path_factory):
    """``executed_lecture(path)``: the lecture run top to bottom (`notebook_runner.execute`) once per test run,
    so the lecture tests and the slides share one run."""
    from notebook_runner import execute

    folder = shared_folder(tmp_path_factory, "executed-lectures")

    def executed(path: Path):
        made = made_once(folder / path.name, lambda part: nbformat.write(execute(path), part))
        return nbformat.read(made, as_version=4)
    return executed


@pytest.fixture(scope="session")
def built_decks(tmp_path_factory, executed_lecture) -> Path:
    """Every lecture executed and exported as a slide deck (what `make slides` does), built once per test run."""
    from gpucourse.course.slides import copy_assets, write_deck

    folder, staging = shared_folder(tmp_path_factory, "slides"), tmp_path_factory.mktemp("deck")
    made_once(folder / "assets", lambda part: (copy_assets(folder), part.touch()))

    def deck(path: Path, part: Path):
        notebook = executed_lecture(path)
        notebook.cells.pop()  # the PTX coverage cell `execute` appends
        write_deck(notebook, path.stem, staging).rename(part)

    # from the last: beside `test_notebooks.py` on another worker, each runs the lectures the other has not reached
    for path in sorted((ROOT / "lectures").glob("*.ipynb"), reverse=True):
        made_once(folder / f"{path.stem}.slides.html", functools.partial(deck, path))
    return folder


def browser_unavailable(reason: str):
    if os.environ.get("GPUCOURSE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GPUCOURSE_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module.

    Not per session: while Playwright's sync API is open, its event loop counts as running in the
    main thread, and nbclient in later tests then waits on a kernel from a helper thread (seen to hang).
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_unavailable("the browser tests need playwright (`make test` installs it)")
    executable = next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    if executable is None:
        browser_unavailable("the browser tests need Debian's chromium package (`make test` installs it as root)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh 1280 x 720 page in a browser context of its own."""
    context = browser.new_context(viewport=VIEWPORT)
    yield context.new_page()
    context.close()


def load_benchmark(name: str, module_name: str):
    """Import ``benchmarks/<name>.py`` as module ``module_name``; returns it and a function that unloads it."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module, lambda: sys.modules.pop(spec.name, None)


class BenchmarkRun:
    """A GPU benchmark's `main` run as on a GPU, for its tests: ``device`` stands for the GPU, no reference library
    is found, what it would record is caught, and its time budget runs on a clock that only the rows move (the
    test's stand-in for a row's measurement calls `row`: each row takes ROW_SECONDS)."""

    ROW_SECONDS = 60.0
    ONE_ROW = ("--seconds", "90")  # time for the first row only: a second would end at 120 s

    def __init__(self, module, device, monkeypatch):
        self.module, self.now, self.recorded = module, 0.0, None
        stand_ins = {"without_gpu": lambda script: False, "current_device": lambda: device,
                     "reference_libraries": dict, "finish": self.finish,
                     "TimeBudget": functools.partial(module.TimeBudget, clock=lambda: self.now)}
        for name, value in stand_ins.items():
            monkeypatch.setattr(module, name, value)

    def row(self) -> None:
        self.now += self.ROW_SECONDS

    def finish(self, name, text, measurements, write) -> int:
        self.recorded = SimpleNamespace(text=text, measurements=measurements, write=write)
        return 0

    def __call__(self, *arguments: str) -> SimpleNamespace:
        """`main` with ``arguments``: what it would record (``text``, ``measurements``, ``write``)."""
        assert self.module.main(list(arguments)) == 0
        return self.recorded


@pytest.fixture
def benchmark_run(monkeypatch):
    """``benchmark_run(module, device)``: a `BenchmarkRun` of that benchmark module (its stand-ins undone after)."""
    return lambda module, device: BenchmarkRun(module, device, monkeypatch)


def table_rows(text: str, after: str = "") -> list[list[str]]:
    """The cells of each row of the first Markdown table in ``text`` after ``after`` (its header and rule left out)."""
    lines = text.split(after, 1)[1].splitlines() if after else text.splitlines()
    table = itertools.takewhile(lambda line: line.startswith("|"),
                                itertools.dropwhile(lambda line: not line.startswith("|"), lines))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in list(table)[2:]]


@pytest.fixture(scope="module")
def a_sandbox():
    """Students' code must not run unsandboxed here (it would write the library): skip, or in CI fail."""
    from gpucourse.classroom import sandbox  # noqa: PLC0415

    if sandbox.unavailable() is not None:
        reason = f"no sandbox for students' code: {sandbox.unavailable()}"
        if os.environ.get("GPUCOURSE_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"GPUCOURSE_REQUIRE_SANDBOX=1 but {reason}", pytrace=False)
        pytest.skip(reason)
