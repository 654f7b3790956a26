"""The pipeline's commands (``python -m nbgrader ...``, the clean room) forked from a process that imported them once.

Starting ``python -m nbgrader`` costs about 3 s of imports (nbgrader, nbconvert, jsonschema's format
checkers), more than grading a small notebook takes. So each thread that runs commands gets one
*preloaded* process (`run_module` starts it on first use): it imports the pipeline once, then forks a
child per command, which runs as ``python -m MODULE ARGS`` would, in the command's folder and
environment, its output in files. A child past its time limit is killed, and with it its kernels (the
sandbox's ``--die-with-parent``). The preloaded process dies with the thread that started it, and exits
when its caller closes the pipe.

``python -m gpucourse.classroom.preloaded`` is that process: JSON requests on stdin, one line each, and
one JSON line per request on stdout.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

PRELOAD = ("nbgrader.apps", "gpucourse.classroom.autograde", "gpucourse.classroom.clean_room")
READY = "ready"
_local = threading.local()  # .server: this thread's preloaded process


def die_with_parent() -> None:
    """In a child: SIGKILL when the thread that started it ends, so a lost worker leaves no grading behind."""
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def environment(device: str | None = None) -> dict:
    # nbgrader runs `alembic` for its database: this environment's bin/ must be on PATH.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if device:
        env["GPUCOURSE_DEVICE"] = device
    return env


def run_module(cwd: Path, module: str, *args: str, timeout: float, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """``python -m module *args`` in ``cwd``, forked from this thread's preloaded process.

    A preloaded process that dies before it answers is started again and the command run once more
    (commands here write only inside their own folder, so a second run is safe).
    """
    command = [sys.executable, "-m", module, *args]
    with tempfile.TemporaryDirectory(prefix="preloaded-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        request = {"cwd": str(cwd), "module": module, "args": list(args), "env": env or environment(),
                   "timeout": timeout, "stdout": str(out), "stderr": str(err)}
        for _ in range(2):
            reply = _ask(request)
            if reply is not None:
                break
        text = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
        if reply is None:
            return subprocess.CompletedProcess(command, -9, text(out), text(err) + "\nthe preloaded process died")
        stderr = text(err) + (f"\ntimed out after {timeout:.0f} s" if reply["timed_out"] else "")
        return subprocess.CompletedProcess(command, reply["returncode"], text(out), stderr)


def _ask(request: dict) -> dict | None:
    """Send one request to this thread's preloaded process; its reply, or None if it died first."""
    server = getattr(_local, "server", None)
    if server is None or server.poll() is not None:
        server = _local.server = _start()
    try:
        server.stdin.write(json.dumps(request).encode() + b"\n")
        server.stdin.flush()
        line = server.stdout.readline()
    except OSError:
        line = b""
    if not line:
        server.kill()
        server.wait()
        _local.server = None
        return None
    return json.loads(line)


def _start() -> subprocess.Popen:
    """A preloaded process, once it has imported `PRELOAD` (it never initialises a GPU: its children do not use one)."""
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=log, env=dict(environment(), GPUCOURSE_DEVICE="cpu"),
                                  preexec_fn=die_with_parent)
        if server.stdout.readline().strip() != READY.encode():
            server.kill()
            server.wait()
            log.seek(0)
            raise RuntimeError(f"the preloaded process did not start: {log.read().decode(errors='replace')[-2000:]}")
    return server


def _child(job: dict, replies: int) -> int:
    """In the forked child: run the job's module as ``__main__``; its exit status."""
    die_with_parent()
    os.close(replies)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)  # the requests stay the parent's
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


def _fork(job: dict, replies: int) -> dict:
    """Run one job in a forked child, killed at its time limit; its exit status."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(job, replies)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    finished = os.pidfd_open(pid)
    try:
        timed_out = not select.select([finished], [], [], job["timeout"])[0]
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(finished)
    return {"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out}


def serve() -> None:
    replies = os.dup(1)
    os.dup2(2, 1)  # nothing but replies on the pipe: a stray print goes to stderr
    for module in PRELOAD:
        importlib.import_module(module)
    os.write(replies, READY.encode() + b"\n")
    for line in sys.stdin.buffer:
        os.write(replies, json.dumps(_fork(json.loads(line), replies)).encode() + b"\n")


if __name__ == "__main__":
    serve()
