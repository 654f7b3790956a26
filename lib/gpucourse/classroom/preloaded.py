"""The pipeline's commands (``python -m nbgrader ...``, the clean room) forked from a process that imported them once.

Starting ``python -m nbgrader`` costs about 3 s of imports (nbgrader, nbconvert, jsonschema's format
checkers), more than grading a small notebook takes. So a process that runs commands (a Dask worker,
the driver) starts one *preloaded* process on first use (`run_module`): it imports the pipeline once and
builds what each command would build again (`warm_caches`), then forks a child per command, which runs as
``python -m MODULE ARGS`` would, in the command's folder and environment, its output in files. Commands from
several threads run side by side. A child past its time limit is killed, and with it its kernels (the
sandbox's ``--die-with-parent``). When the process that started it ends, its pipe closes and the preloaded
process kills its children and exits.

``python -m gpucourse.classroom.preloaded`` is that process: one JSON request per line on stdin, one
JSON reply per line on stdout as each command ends (matched by ``id``).
"""

from __future__ import annotations

import ctypes
import importlib
import itertools
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from concurrent.futures import Future
from pathlib import Path

PRELOAD = ("nbgrader.apps", "gpucourse.classroom.autograde", "gpucourse.classroom.clean_room")
READY = b"ready\n"


def environment(device: str | None = None) -> dict:
    # nbgrader runs `alembic` for its database: this environment's bin/ must be on PATH.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    env["GPUCOURSE_COMPILE_CACHE"] = "off"  # students' code shares no compile cache, sandboxed or not
    if device:
        env["GPUCOURSE_DEVICE"] = device
    return env


def run_module(cwd: Path, module: str, *args: str, timeout: float, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """``python -m module *args`` in ``cwd``, forked from this process's preloaded process.

    A preloaded process that dies before it answers is started again and the command run once more
    (commands here write only inside their own folder, so a second run is safe).
    """
    command = [sys.executable, "-m", module, *args]
    with tempfile.TemporaryDirectory(prefix="preloaded-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        request = {"cwd": str(cwd), "module": module, "args": list(args), "env": env or environment(),
                   "timeout": timeout, "stdout": str(out), "stderr": str(err)}
        for _ in range(2):
            reply = _Server.running().ask(request)
            if reply is not None:
                break
        text = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
        if reply is None:
            return subprocess.CompletedProcess(command, -9, text(out), text(err) + "\nthe preloaded process died")
        stderr = text(err) + (f"\ntimed out after {timeout:.0f} s" if reply["timed_out"] else "")
        return subprocess.CompletedProcess(command, reply["returncode"], text(out), stderr)


class _Server:
    """This process's end of the preloaded process: requests written under a lock, replies read by a thread."""

    _current: _Server | None = None
    _starting = threading.Lock()

    @classmethod
    def running(cls) -> _Server:
        with cls._starting:
            if cls._current is None or cls._current.closed:
                cls._current = cls()
            return cls._current

    def __init__(self):
        with tempfile.TemporaryFile() as log:
            # no PR_SET_PDEATHSIG: it would fire when the starting *thread* ends; the closed pipe stops it instead
            self.process = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=log,
                                            env=dict(environment(), GPUCOURSE_DEVICE="cpu"))  # it never uses a GPU
            if self.process.stdout.readline() != READY:
                self.process.kill()
                self.process.wait()
                log.seek(0)
                raise RuntimeError(f"the preloaded process did not start: {log.read().decode(errors='replace')[-2000:]}")
        self.ids, self.waiting, self.lock, self.closed = itertools.count(), {}, threading.Lock(), False
        threading.Thread(target=self._read, name="preloaded replies", daemon=True).start()

    def ask(self, request: dict) -> dict | None:
        """The reply to ``request`` once its command ends; None if the preloaded process died first."""
        reply: Future = Future()
        with self.lock:
            if self.closed:
                return None
            key = next(self.ids)
            self.waiting[key] = reply
            try:
                self.process.stdin.write(json.dumps({**request, "id": key}).encode() + b"\n")
                self.process.stdin.flush()
            except OSError:
                self.process.kill()  # `_read` sees the pipe close and answers None
        return reply.result()

    def _read(self) -> None:
        for line in self.process.stdout:
            answer = json.loads(line)
            with self.lock:
                reply = self.waiting.pop(answer["id"])
            reply.set_result(answer)
        self.process.kill()  # the pipe closed: it died; what it was running is asked again
        self.process.wait()
        with self.lock:
            self.closed = True
            for reply in self.waiting.values():
                reply.set_result(None)
            self.waiting.clear()


def _child(job: dict, keep: set[int]) -> int:
    """In a forked child: run the job's module as ``__main__``; its exit status."""
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: it dies with the preloaded process
    for fd in keep:  # the preloaded process's reply pipe and the pipes of its other children
        os.close(fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    sys.argv = [job["module"], *job["args"]]
    warnings.filterwarnings("ignore", "'gpucourse", RuntimeWarning)  # runpy: "found in sys.modules": preloaded
    try:
        runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _fork(job: dict, keep: set[int]) -> tuple[int, int]:
    """Start one job in a forked child: its pid, and a pipe that reaches its end when the child ends."""
    sys.stdout.flush()
    sys.stderr.flush()
    ended, alive = os.pipe()  # the child holds `alive` until it exits (close-on-exec: its kernels do not)
    pid = os.fork()
    if pid == 0:
        os.close(ended)
        code = 1
        try:
            code = _child(job, keep)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    os.close(alive)
    return pid, ended


def alembic_head() -> str:
    """The gradebook schema's version, as the first word ``alembic heads`` prints, without starting a process for it."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:  # the arguments nbgrader gives `alembic heads`
        return ScriptDirectory.from_config(Config(ini)).get_current_head()


def warm_caches() -> None:
    """Build once, before the first fork, what every command would otherwise build again in its own (0.5 s each):
    the notebook schema's validators (nbconvert checks a notebook after each of its preprocessors), an HTML
    export's compiled CSS selectors, lexers and Markdown rules (feedback), the gradebook's SQLite driver and the
    addresses a kernel's connection is checked against."""
    import nbformat
    import sqlalchemy
    from jupyter_client.localinterfaces import localhost
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    notebook = new_notebook(
        cells=[new_markdown_cell("# A *title*"), new_code_cell("print(1)", outputs=[new_output("stream", text="1")])],
        metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    for relaxed in (False, True):
        nbformat.validate(notebook, relax_add_props=relaxed)
    HTMLExporter().from_notebook_node(notebook)
    sqlalchemy.create_engine("sqlite://").connect().close()
    localhost()


def serve() -> None:
    """Fork a child per request line; reply as each ends or reaches its time limit; at end of input, stop them."""
    replies = os.dup(1)
    os.dup2(2, 1)  # nothing but replies on the pipe: a stray print goes to stderr
    for module in PRELOAD:
        importlib.import_module(module)
    # nbgrader runs `alembic heads` in a new Python (2.5 s) for every new gradebook; the same answer, found once:
    head = alembic_head()
    importlib.import_module("nbgrader.api").get_alembic_version = lambda: head
    warm_caches()
    os.write(replies, READY)
    running: dict[int, tuple[int, int, float]] = {}  # a child's pipe -> (request id, pid, deadline)
    pending = b""
    while True:
        left = min((deadline for _, _, deadline in running.values()), default=None)
        ready = select.select([0, *running], [], [], None if left is None else max(0.0, left - time.monotonic()))[0]
        if 0 in ready:
            data = os.read(0, 1 << 16)
            if not data:  # the process that started us is gone
                for _, pid, _ in running.values():
                    os.kill(pid, signal.SIGKILL)
                return
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                job = json.loads(line)
                pid, ended = _fork(job, {replies, *running})
                running[ended] = (job["id"], pid, time.monotonic() + job["timeout"])
        for finished in list(running):
            key, pid, deadline = running[finished]
            timed_out = finished not in ready and time.monotonic() >= deadline
            if finished in ready or timed_out:
                if timed_out:
                    os.kill(pid, signal.SIGKILL)
                status = os.waitpid(pid, 0)[1]
                os.close(finished)
                del running[finished]
                reply = {"id": key, "returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out}
                os.write(replies, json.dumps(reply).encode() + b"\n")


if __name__ == "__main__":
    serve()
