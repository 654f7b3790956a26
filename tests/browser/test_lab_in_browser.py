"""JupyterLab in a real browser, as a student uses it: `make lab` opens lecture 1, a lecture runs, its widget
redraws, an assignment grades.

The server, started with the options `make lab` gives JupyterLab, serves temporary copies of lecture 1
and assignment 1: the repository's notebooks are never opened, run or saved.
"""

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from test_lab import lab_options

ROOT = Path(__file__).resolve().parents[2]
LECTURE = ROOT / "lectures" / "01_threads_blocks_grids.ipynb"
ASSIGNMENT = ROOT / "assignments" / "01_threads_blocks_grids" / "threads_blocks_grids.ipynb"
SOLUTION = ROOT / "solutions" / "01_threads_blocks_grids" / "threads_blocks_grids.ipynb"
WRONG_ZIP_KERNEL = """@cuda.jit
def zip_kernel(out, a, b):
    i = cuda.threadIdx.x
    out[i] = a[i] - b[i]"""
# Run All of lecture 1 takes about 20 s alone, more beside make test's other worker: a run waits as long as
# cells keep finishing, and fails when none has finished for RUN_S.
STARTUP_S, RUN_S = 60, 300
QUIET_LAB = ("@jupyterlab/apputils-extension/notification.jupyterlab-settings", '{"fetchNews": "false"}')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, what: str, timeout_s: float = RUN_S, progress=lambda: None, stalled=lambda: "") -> None:
    """Wait for ``condition``; the deadline moves on each time ``progress()`` changes; ``stalled()`` says
    where it stood when it timed out."""
    deadline, seen = time.monotonic() + timeout_s, progress()
    while not condition():
        if (now := progress()) != seen:
            deadline, seen = time.monotonic() + timeout_s, now
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s} s{stalled()}")
        time.sleep(0.25)


def wait_for_server(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer {url} in {STARTUP_S} s")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free port over a temporary folder; yields the function that gives a notebook's URL."""
    home = tmp_path_factory.mktemp("lab")
    notebooks = home / "notebooks"
    notebooks.mkdir()
    for notebook in (LECTURE, ASSIGNMENT):
        shutil.copy(notebook, notebooks)
    (notebooks / "lectures").mkdir()
    shutil.copy(LECTURE, notebooks / "lectures")  # where `make lab` opens it
    settings = home / "settings" / QUIET_LAB[0]  # no news toast over the widgets
    settings.parent.mkdir(parents=True)
    settings.write_text(QUIET_LAB[1])
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
               f"--ServerApp.token={token}", f"--ServerApp.root_dir={notebooks}", *lab_options("lab")]
    with open(home / "lab.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(f"{base}/api/status?token={token}", process)
        def url(name: str) -> str:
            """The notebook's address, in a workspace of its own (no test finds another's tabs restored);
            "" is `/`."""
            return f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token={token}" if name else f"{base}/?token={token}"
        url.log = home / "lab.log"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def solution_source(grade_id: str) -> str:
    """The solution cell ``grade_id`` of assignment 1 without its nbgrader markers."""
    cell = next(c for c in nbformat.read(SOLUTION, as_version=4).cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(line for line in cell.source.splitlines() if "### " not in line)


def open_notebook(page, url: str, notebook: Path | None = None):
    """Open a notebook and wait until all its cells are shown (those of ``notebook``, if given) and its kernel
    is idle; return the locator of its cells. (JupyterLab shows one empty cell and "No Kernel" first.)"""
    page.goto(url)
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
    cells.first.wait_for(timeout=STARTUP_S * 1000)
    if notebook is not None:
        expected = len(nbformat.read(notebook, as_version=4).cells)
        wait_until(lambda: cells.count() == expected, f"the {expected} cells of {notebook.name}", STARTUP_S)
    wait_for_idle_kernel(page)
    return cells


def wait_for_idle_kernel(page) -> None:
    """Wait until the shown notebook has a kernel (not "No Kernel") and it is idle."""
    toolbar = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-NotebookPanel-toolbar")
    wait_until(lambda: "No Kernel" not in toolbar.first.text_content()
               and toolbar.locator("[data-status='idle']").count() > 0, "an idle kernel")


def execution_counts(page) -> list[int]:
    """The execution counts the notebook's input prompts show, in cell order."""
    prompts = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt")
    return [int(n) for text in prompts.all_text_contents() for n in re.findall(r"\[(\d+)\]", text)]


def where_it_stands(page, log: Path) -> str:
    """For a timeout's message: the cell that is running, the errors shown, the end of the server's log."""
    running = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell",
                           has=page.locator(".jp-InputPrompt", has_text="[*]"))
    source = running.first.locator(".cm-content").text_content()[:80] if running.count() else "none"
    tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
    return (f"; {len(execution_counts(page))} cells had run, running: {source!r}; errors shown: {error_texts(page)};"
            " the server's log ends:\n" + "\n".join(tail))


def run_from_menu(page, item: str, last_cell, log: Path, stop_at_error: bool = True) -> None:
    """Run > ``item``, then wait until ``last_cell`` has run and the kernel is idle, as long as cells keep
    finishing. With ``stop_at_error``, a cell's error ends the wait at once (Run All would stop there)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()
    prompt = last_cell.locator(".jp-InputPrompt")

    def finished():
        if stop_at_error and (errors := error_texts(page)):
            raise AssertionError(f"{item}: a cell failed, so the cells after it did not run: {errors}")
        return re.search(r"\[\d+\]", prompt.text_content())
    wait_until(finished, f"{item}: the last cell to run", progress=lambda: max(execution_counts(page), default=0),
               stalled=lambda: where_it_stands(page, log))
    wait_for_idle_kernel(page)


def replace_source(cell, source: str) -> None:
    """Type ``source`` into the cell's editor in place of what is there (as a paste: no auto-indent)."""
    cell.locator(".cm-content").click()
    cell.page.keyboard.press("Control+A")
    cell.page.keyboard.insert_text(source)


def error_texts(page) -> list[str]:
    outputs = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    return outputs.all_text_contents()


def test_lecture_runs_and_its_index_explorer_redraws(lab, page):
    cells = open_notebook(page, lab(LECTURE.name), LECTURE)
    run_from_menu(page, "Run All Cells", cells.and_(page.locator(".jp-CodeCell")).last, lab.log)
    assert not error_texts(page), f"cells wrote errors: {error_texts(page)}"

    explorer = page.locator(".jupyter-widgets.widget-vbox", has=page.locator(".widget-slider")).first
    explorer.scroll_into_view_if_needed()
    figure = explorer.locator("img.widget-image")  # figure_view: an image widget, replaced at each redraw
    summary = explorer.locator(".widget-html").first
    before = figure.get_attribute("src"), summary.inner_text()
    explorer.locator(".widget-slider", has_text="grid x").locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    wait_until(lambda: figure.get_attribute("src") != before[0], "the figure redrawn")
    assert explorer.locator(".widget-slider", has_text="grid x").locator(".widget-readout").inner_text() == "3"
    assert summary.inner_text() != before[1]
    assert figure.get_attribute("src").startswith("blob:")  # the widget's new PNG, drawn
    assert figure.evaluate("img => img.complete && img.naturalWidth > 400")


def test_assignment_says_which_answer_is_right(lab, page):
    cells = open_notebook(page, lab(ASSIGNMENT.name), ASSIGNMENT)
    grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nbformat.read(ASSIGNMENT, as_version=4).cells]
    replace_source(cells.nth(grade_ids.index("map_kernel")), solution_source("map_kernel"))
    replace_source(cells.nth(grade_ids.index("zip_kernel")), WRONG_ZIP_KERNEL)
    cells.nth(grade_ids.index("test_zip") + 1).click()
    run_from_menu(page, "Run All Above Selected Cell", cells.nth(grade_ids.index("test_zip")), lab.log,
                  stop_at_error=False)  # the wrong zip_kernel's test fails: the last cell run

    right = cells.nth(grade_ids.index("test_map")).locator(".jp-OutputArea-output").text_content()
    wrong = cells.nth(grade_ids.index("test_zip")).locator(".jp-OutputArea-output").text_content()
    assert right.startswith("✓"), right
    said = " ".join(wrong.split())  # the message as words: its lines wrap at 100 columns (`grading.feedback`)
    assert said.startswith("CheckFailed: zip_kernel gave a wrong result") and "should be" in said, wrong
    assert "Traceback" not in wrong and "File " not in wrong, f"a traceback under the message: {wrong}"
    assert error_texts(page) == [wrong], "another cell wrote an error"


def test_make_lab_opens_lecture_one(lab, page):
    """The address Jupyter prints (or opens in a browser) shows lecture 1, not the Launcher (last: its kernel
    competes with no other test's)."""
    cells = open_notebook(page, lab(""))
    assert page.url.split("?")[0].endswith(f"/lab/tree/lectures/{LECTURE.name}")
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    assert tab.filter(has_text=LECTURE.name).count() == 1, tab.all_text_contents()
    wait_until(lambda: cells.count() > 10, "the lecture's cells")
    assert page.locator(".jp-Launcher:visible").count() == 0
