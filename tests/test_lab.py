"""`make lab` starts as root, opens lecture 1, hides nbgrader's instructor tools and keeps the students' (fetch,
submit, validate); `make lab-instructor` keeps them all."""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

INSTRUCTOR_PLUGINS = ["@jupyter/nbgrader:course-list", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:formgrader"]
TOKEN = "course-test"


def lab_command(target: str, user_id: int, *settings: str) -> str:
    """The line `make <target>` runs to start JupyterLab, for a user with that id (and make's ``settings``)."""
    dry_run = subprocess.run(["make", "-n", target, f"USER_ID={user_id}", *settings], cwd=ROOT,
                             capture_output=True, text=True, check=True)
    return next(line for line in dry_run.stdout.splitlines() if "jupyter lab" in line)


@pytest.mark.parametrize("target", ["lab", "lab-instructor"])
def test_lab_allows_root_only_for_root(target):
    assert "--allow-root" in lab_command(target, user_id=0)
    assert "--allow-root" not in lab_command(target, user_id=1000)


def student_config() -> str:
    """The JUPYTER_CONFIG_PATH that `make lab` sets (and `make lab-instructor` does not)."""
    assert "JUPYTER_CONFIG_PATH" not in lab_command("lab-instructor", os.geteuid())
    match = re.match(r"JUPYTER_CONFIG_PATH=(\S+) ", lab_command("lab", os.geteuid()))
    assert match, "make lab sets JUPYTER_CONFIG_PATH"
    return shlex.split(match[1])[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET, without proxies or redirects (a redirect's body is its Location); status 0
    when nothing answers."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", "")
    except urllib.error.URLError:
        return 0, ""


def lab_options(target: str) -> list[str]:
    """The --LabApp options of the line `make <target>` runs."""
    return [word for word in shlex.split(lab_command(target, os.geteuid())) if word.startswith("--LabApp.")]


def lab_pages(config_path: str | None, tmp_path, pages=("lab", "formgrader", "courses"), options=(),
              address: str = "127.0.0.1") -> dict:
    """Start JupyterLab with that JUPYTER_CONFIG_PATH and options; the status and body of each page, asked at
    ``address``."""
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["NBGRADER_EXCHANGE"] = str(tmp_path / "exchange")
    (tmp_path / "exchange").mkdir(exist_ok=True)
    if config_path:
        env["JUPYTER_CONFIG_PATH"] = config_path
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={ROOT}",
         *options],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while get(f"{base}/api?token={TOKEN}")[0] != 200:
            assert server.poll() is None and time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.5)
        return {page: get(f"http://{address}:{port}/{page}?token={TOKEN}") for page in pages}
    finally:
        server.terminate()
        server.wait(timeout=30)


def disabled_plugins(lab_page: str) -> list[str]:
    page_config = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                            lab_page, re.S)[1]
    return sorted(json.loads(page_config)["disabledExtensions"])


def test_students_lab_hides_nbgrader_instructor_tools_and_instructors_lab_keeps_them(tmp_path):
    student = lab_pages(student_config(), tmp_path)
    assert disabled_plugins(student["lab"][1]) == INSTRUCTOR_PLUGINS
    assert student["formgrader"][0] == 404
    assert student["courses"][0] == 200 and json.loads(student["courses"][1])["success"], student["courses"]

    instructor = lab_pages(None, tmp_path)
    assert not set(disabled_plugins(instructor["lab"][1])) & set(INSTRUCTOR_PLUGINS)
    assert instructor["formgrader"][0] in (200, 302)


def test_students_code_cells_wrap_long_lines_and_no_news_toast_opens(tmp_path):
    """A test cell's long line wraps in a student's JupyterLab instead of running past the window's edge, and
    JupyterLab does not ask over the first lecture whether to fetch its news."""
    tracker = "lab/api/settings/@jupyterlab/notebook-extension:tracker"
    news = "lab/api/settings/@jupyterlab/apputils-extension:notification"
    defaults = {}
    for who, config in (("student", student_config()), ("instructor", None)):
        pages = lab_pages(config, tmp_path, pages=(tracker, news))
        assert all(status == 200 for status, _ in pages.values()), pages
        schemas = {page: json.loads(body)["schema"]["properties"] for page, (_, body) in pages.items()}
        defaults[who] = (schemas[tracker]["codeCellConfig"]["default"]["lineWrap"],
                         schemas[news]["fetchNews"]["default"])
    assert defaults == {"student": (True, "false"), "instructor": (False, "none")}


def test_lab_opens_lecture_one(tmp_path):
    """Jupyter's address (printed, or opened in a browser) is `/`: it leads to lecture 1, not the Launcher."""
    lecture = "lectures/01_threads_blocks_grids.ipynb"
    for target in ("lab", "lab-instructor"):
        assert f"--LabApp.default_url=/lab/tree/{lecture}" in lab_options(target)
    pages = lab_pages(student_config(), tmp_path, pages=("", f"lab/tree/{lecture}"), options=lab_options("lab"))
    assert pages[""] == (302, f"/lab/tree/{lecture}?token={TOKEN}")
    assert pages[f"lab/tree/{lecture}"][0] == 200 and (ROOT / lecture).is_file()


def test_lab_ip_lets_a_containers_published_port_reach_jupyter(tmp_path):
    """README, "On a Mac": `docker run -p 8888:8888 ... make lab LAB_IP=0.0.0.0`. Jupyter listens on localhost
    alone by default, which a published port does not reach; LAB_IP widens it (seen here at 127.0.0.2, a
    loopback address that a server on 127.0.0.1 alone does not answer)."""
    assert "--ServerApp.ip" not in lab_command("lab", 0)
    wide = [w for w in shlex.split(lab_command("lab", 0, "LAB_IP=0.0.0.0")) if w.startswith("--ServerApp.ip")]
    assert wide == ["--ServerApp.ip=0.0.0.0"]
    assert lab_pages(None, tmp_path, pages=("api",), options=wide, address="127.0.0.2")["api"][0] == 200
    assert lab_pages(None, tmp_path, pages=("api",), address="127.0.0.2")["api"][0] == 0


def test_on_macos_the_install_stops_with_one_line_that_says_where_to_go(tmp_path):
    """numba-cuda has no macOS build: `make lab` says so before it makes a virtual environment, not pip's
    resolver error after it."""
    venv = tmp_path / "venv"
    made = subprocess.run(["make", "lab", "PLATFORM=Darwin", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert made.returncode != 0 and not venv.exists()
    said = made.stderr.splitlines()[0]
    assert "no build for macOS" in said and "Colab" in said and "Linux container" in said, made.stderr
