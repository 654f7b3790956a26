"""A submission's kernel in a sandbox: bubblewrap, a memory cap, no network, and only its own folder in view.

The kernel that runs a student's notebook sees the file system read-only (the course library
included), its own working folder writable, a private ``/tmp``, and in place of the course's
``solutions/``, ``submitted/``, ``autograded/``, ``feedback/`` and ``downloaded/`` folders, its git
history, the gradebook and the nbgrader exchange, nothing: neither the answers nor another
student's submission. It runs in its own PID namespace, so it cannot signal the grader or other students'
kernels, and with a cap on its data segment (``prlimit --data``), so a huge allocation fails
in the student's cell instead of taking the machine. Where bubblewrap can make one, it runs in
a network namespace of its own (``--unshare-net``: no network, no reaching the grader's
or other kernels' ports); the grader then talks to it over Unix sockets (ZeroMQ's ``ipc``
transport) in a folder that both see, ``sockets``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

HIDDEN_FOLDERS = ("solutions", "submitted", "autograded", "feedback",
                  "downloaded")  # an LMS's archives of every student's submission
HIDDEN_FILES = ("gradebook.db",)
LIBRARY = Path(__file__).resolve().parents[2]  # the folder that holds the gpucourse package


def git_folders(course_root: Path) -> list[Path]:
    """The git folders of the repository that holds ``course_root`` (its history has every solution): the ``.git``
    folder of the nearest folder up that has one, or, where ``.git`` is a file (a worktree), the folder it names and
    the repository's common folder."""
    for folder in (course_root, *course_root.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return [dot_git]
        if dot_git.is_file():
            text = dot_git.read_text(errors="replace").strip()
            if not text.startswith("gitdir:"):
                return []
            gitdir = (folder / text.removeprefix("gitdir:").strip()).resolve()
            common = gitdir / "commondir"
            found = [gitdir, (gitdir / common.read_text().strip()).resolve()] if common.is_file() else [gitdir]
            return [path for path in found if path.is_dir()]
    return []


@functools.cache
def unavailable() -> str | None:
    """Why bubblewrap cannot sandbox kernels here, or None when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"bubblewrap cannot create a sandbox here: {probe.stderr.strip() or probe.returncode}"
    return None


@functools.cache
def isolates_network() -> bool:
    """Whether bubblewrap can give a kernel a network namespace of its own here (some containers forbid it)."""
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent",
                            "true"], capture_output=True, text=True, timeout=30)
    return probe.returncode == 0


def python_paths_under(folder: str) -> list[str]:
    """The folders this Python runs from (environment, interpreter, import path, the course library) inside
    ``folder``, as given and as resolved: a symlinked environment (``.venv -> ...``) is started by the link's path."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), str(LIBRARY),
             *(p for p in sys.path if p and Path(p).is_dir())}
    forms = {str(form) for p in paths for form in (Path(os.path.abspath(p)), Path(p).resolve())}
    inside = sorted(p for p in forms if Path(p).is_relative_to(folder))
    return [p for p in inside if not any(p != q and Path(p).is_relative_to(q) for q in inside)]


def kernel_argv(course_roots: list[Path], workdir: Path, memory_bytes: int, sockets: Path | None = None,
                hidden: tuple = ()) -> list[str]:
    """The command that starts an IPython kernel for ``workdir``'s notebook inside the sandbox.

    Each of ``course_roots`` (a worker's private copy of the course, and the instructor's course
    when the worker can see it) has its folders of answers and grades and its git history hidden, and so is each
    folder of ``hidden`` (the nbgrader exchange). With ``sockets`` (a folder for
    the kernel's Unix sockets: its connection file names ``ipc`` as the transport), the kernel has no network.
    """
    workdir = workdir.resolve()
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    if sockets is not None:
        argv += ["--unshare-net", "--bind", str(sockets), str(sockets)]
    for path in python_paths_under("/tmp"):  # a course checked out in /tmp: its Python must stay in view
        argv += ["--ro-bind", path, path]
    for device in sorted(Path("/dev").glob("nvidia*")):  # a GPU machine: the kernel may use the GPU
        argv += ["--dev-bind", str(device), str(device)]
    folders = [Path(folder).resolve() for folder in hidden]
    for course_root in (Path(root).resolve() for root in course_roots):
        folders += [course_root / folder for folder in HIDDEN_FOLDERS] + git_folders(course_root)
        for name in HIDDEN_FILES:
            if (course_root / name).exists():
                argv += ["--ro-bind", "/dev/null", str(course_root / name)]
    needed = [Path(sys.prefix).resolve(), LIBRARY]  # never hidden, should a folder above them be named
    for folder in dict.fromkeys(folders):  # once each (the kernel's own folder, bound below, shows through)
        if folder.is_dir() and not any(path.is_relative_to(folder) for path in needed):
            argv += ["--tmpfs", str(folder)]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir),
             "--ro-bind", "{connection_file}", "{connection_file}"]  # jupyter_client fills in the path
    for variable, value in {"HOME": "/tmp", "IPYTHONDIR": "/tmp/ipython", "MPLCONFIGDIR": "/tmp/matplotlib",
                            "NUMBA_CACHE_DIR": "/tmp/numba", "GPUCOURSE_COMPILE_CACHE": "off"}.items():
        argv += ["--setenv", variable, value]
    argv += ["--unsetenv", "JPY_PARENT_PID"]  # its parent is the sandbox's init: ipykernel would think it orphaned
    return argv + ["--", "prlimit", f"--data={memory_bytes}", "--",
                   sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
