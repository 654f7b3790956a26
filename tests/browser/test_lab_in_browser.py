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
STARTUP_S, RUN_S = 60, 300  # Run All of lecture 1 takes about 20 s alone; under make test's other worker, more
QUIET_LAB = ("@jupyterlab/apputils-extension/notification.jupyterlab-settings", '{"fetchNews": "false"}')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, what: str, timeout_s: float = RUN_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s} s")
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
        # each notebook in a workspace of its own, so no test finds another's tabs restored; "" is `/`
        yield lambda name: (f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token={token}" if name
                            else f"{base}/?token={token}")
    finally:
        process.terminate()
        process.wait(timeout=30)


def solution_source(grade_id: str) -> str:
    """The solution cell ``grade_id`` of assignment 1 without its nbgrader markers."""
    cell = next(c for c in nbformat.read(SOLUTION, as_version=4).cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(line for line in cell.source.splitlines() if "### " not in line)


def open_notebook(page, url: str):
    """Open a notebook and wait for its kernel to be idle; return the locator of its cells."""
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=STARTUP_S * 1000)
    wait_for_idle_kernel(page)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def wait_for_idle_kernel(page) -> None:
    page.locator(".jp-NotebookPanel-toolbar [data-status='idle']").first.wait_for(timeout=RUN_S * 1000)


def run_from_menu(page, item: str, last_cell) -> None:
    """Run > ``item``, then wait until ``last_cell`` has run and the kernel is idle."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()
    prompt = last_cell.locator(".jp-InputPrompt")
    wait_until(lambda: re.search(r"\[\d+\]", prompt.text_content()), f"{item}: the last cell to run")
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
    cells = open_notebook(page, lab(LECTURE.name))
    run_from_menu(page, "Run All Cells", cells.and_(page.locator(".jp-CodeCell")).last)
    assert cells.count() == len(nbformat.read(LECTURE, as_version=4).cells)
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
    cells = open_notebook(page, lab(ASSIGNMENT.name))
    grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nbformat.read(ASSIGNMENT, as_version=4).cells]
    replace_source(cells.nth(grade_ids.index("map_kernel")), solution_source("map_kernel"))
    replace_source(cells.nth(grade_ids.index("zip_kernel")), WRONG_ZIP_KERNEL)
    cells.nth(grade_ids.index("test_zip") + 1).click()
    run_from_menu(page, "Run All Above Selected Cell", cells.nth(grade_ids.index("test_zip")))

    right = cells.nth(grade_ids.index("test_map")).locator(".jp-OutputArea-output").text_content()
    wrong = cells.nth(grade_ids.index("test_zip")).locator(".jp-OutputArea-output").text_content()
    assert right.startswith("✓"), right
    assert wrong.startswith("CheckFailed: zip_kernel gave a wrong result") and "should be" in wrong, wrong
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
