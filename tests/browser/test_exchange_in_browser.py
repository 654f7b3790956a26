"""A student's JupyterLab (`make lab`'s configuration) in a real browser: the Assignment List fetches and submits.

An instructor releases the mini assignment (`tests/classroom/mini_course.py`) into a temporary
exchange; the student's Lab shows nbgrader's menu with the Assignment List and without the
Formgrader, fetches the assignment and submits it, and the submission lands in the exchange.
"""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from test_lab_in_browser import STARTUP_S, free_port, wait_for_server, wait_until

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "classroom"))
import mini_course as mini  # noqa: E402


def nbgrader(folder: Path, env: dict, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory):
    """The student's Lab over an empty home, with the mini assignment released; yields (URL, exchange)."""
    tmp = tmp_path_factory.mktemp("exchange-lab")
    exchange, home = tmp / "exchange", tmp / "home"
    exchange.mkdir(mode=0o777)
    home.mkdir()
    env = dict(os.environ, NBGRADER_EXCHANGE=str(exchange),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    env.pop("JUPYTER_CONFIG_PATH", None)
    course = mini.make_course(tmp / "course", ROOT / "nbgrader_config.py")
    nbgrader(course, env, "generate_assignment", mini.ASSIGNMENT, "--force")
    nbgrader(course, env, "release_assignment", mini.ASSIGNMENT)
    port, token = free_port(), secrets.token_hex(16)
    env.update(JUPYTER_CONFIG_PATH=str(ROOT / ".jupyter" / "student"), JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTER_DATA_DIR=str(tmp / "data"))  # nbgrader's cache of what the student submitted
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
               f"--ServerApp.token={token}", f"--ServerApp.root_dir={home}"]
    with open(tmp / "lab.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=home)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(f"{base}/api/status?token={token}", process)
        yield f"{base}/lab?token={token}", exchange
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_student_fetches_and_submits_from_the_assignment_list_and_sees_no_formgrader(student_lab, page):
    url, exchange = student_lab
    page.goto(url)
    menu = page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")
    menu.wait_for(timeout=STARTUP_S * 1000)
    menu.click()
    items = page.locator(".lm-Menu-content .lm-Menu-itemLabel")
    labels = [label.strip() for label in items.all_text_contents() if label.strip()]
    assert "Assignment List" in labels and not {"Formgrader", "Course List", "Create assignment"} & set(labels), labels
    items.filter(has_text="Assignment List").first.click()

    listing = page.locator("#nbgrader-assignment-list")
    fetch = listing.get_by_role("button", name="Fetch")
    fetch.wait_for(timeout=60_000)
    assert mini.ASSIGNMENT in listing.inner_text()
    fetch.click()
    submit = listing.get_by_role("button", name="Submit")
    submit.wait_for(timeout=60_000)
    submit.click()
    inbound = exchange / "gpu-kernels" / "inbound"
    wait_until(lambda: inbound.is_dir() and any(p.name.split("+")[1] == mini.ASSIGNMENT for p in inbound.iterdir()),
               "the submission in the exchange", 60)
