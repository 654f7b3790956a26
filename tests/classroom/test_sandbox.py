"""The sandbox keeps in view what the kernel's Python needs, also for a course checked out in /tmp or a symlinked
environment."""

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpucourse.classroom import sandbox

LIBRARY = Path(sandbox.__file__).resolve().parents[2]


def covered(path: Path, folder: Path) -> bool:
    return any(path.is_relative_to(p) for p in sandbox.python_paths_under(str(folder)))


def test_the_environment_and_the_library_stay_in_view_under_a_hidden_folder():
    prefix = Path(sys.prefix).resolve()
    assert covered(prefix, prefix.parent) and covered(LIBRARY, LIBRARY.parent)
    assert sandbox.python_paths_under("/no/such/folder") == []


def test_the_kernel_sees_its_folder_and_not_the_course(tmp_path):
    course, workdir = tmp_path / "course", tmp_path / "course" / "autograded" / "ann" / "a1"
    for folder in ("solutions", "submitted", "autograded"):
        (course / folder).mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True)
    argv = sandbox.kernel_argv([course], workdir, 1 << 30)
    pairs = list(zip(argv, argv[1:]))
    assert all(("--tmpfs", str(course / f)) in pairs for f in ("solutions", "submitted", "autograded"))
    assert ("--bind", str(workdir)) in pairs and ("--chdir", str(workdir)) in pairs
    assert argv.index("--tmpfs") < argv.index("--bind")  # the hidden folders first, then the kernel's own
    assert "--data=1073741824" in argv and argv[-2:] == ["-f", "{connection_file}"]
    assert ("GPUCOURSE_COMPILE_CACHE", "off") in pairs  # students' kernels share no compile cache


def test_a_symlinked_environment_stays_in_view_by_the_links_path(tmp_path):
    """A course whose ``.venv`` links to an environment elsewhere starts its kernels by the link's path."""
    link = tmp_path / "course" / ".venv"
    link.parent.mkdir()
    link.symlink_to(Path(sys.prefix).resolve())
    code = f"from gpucourse.classroom import sandbox; print(*sandbox.python_paths_under({str(tmp_path)!r}))"
    done = subprocess.run([str(link / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert str(link) in done.stdout.split()


def in_the_sandbox(argv: list[str], connection: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` run by this Python inside the sandbox ``argv`` describes (in place of the kernel)."""
    argv = [str(connection) if a == "{connection_file}" else a for a in argv]
    return subprocess.run(argv[:argv.index("--") + 1] + [sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def outside_tmp():
    """A folder outside /tmp, which the sandbox replaces with its own: where an instructor's course lies."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
        yield Path(folder)


def test_the_kernel_sees_no_answer_no_classmate_and_no_history(outside_tmp, a_sandbox):
    """What a student's code could copy at grading time: the solutions, another student's submission (collected,
    downloaded from an LMS, or in the exchange), the course's git history; its own folder stays writable."""
    tmp_path = outside_tmp
    repository = tmp_path / "repo"
    course, exchange = repository / "course", tmp_path / "exchange" / "inbound"
    secrets = [course / "solutions" / "a1" / "a1.ipynb", course / "submitted" / "bob" / "a1" / "a1.ipynb",
               course / "downloaded" / "a1" / "archive" / "bob_a1.ipynb", exchange / "bob+a1+1" / "a1.ipynb",
               repository / ".git" / "objects" / "ab" / "cdef"]
    for secret in secrets:
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text("the answer")
    workdir = course / "autograded" / "ann" / "a1"
    workdir.mkdir(parents=True)
    connection = tmp_path / "kernel.json"
    connection.write_text("{}")
    argv = sandbox.kernel_argv([course], workdir, 1 << 30, hidden=(str(exchange.parent),))
    probe = ("import pathlib, sys\n"
             "seen = [p for p in sys.argv[1:] if pathlib.Path(p).exists()]\n"
             "pathlib.Path('mine.txt').write_text('ok')\n"
             "print(seen, __import__('gpucourse').__name__)")
    done = in_the_sandbox(argv, connection, probe.replace("sys.argv[1:]", repr([str(s) for s in secrets])))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "gpucourse"]
    assert (workdir / "mine.txt").read_text() == "ok"
    assert all(secret.read_text() == "the answer" for secret in secrets)  # hidden from the kernel, not removed


def test_a_worktree_hides_its_git_folders(tmp_path):
    main, linked = tmp_path / "main" / ".git", tmp_path / "main" / ".git" / "worktrees" / "course"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    course = tmp_path / "course"
    course.mkdir()
    (course / ".git").write_text(f"gitdir: {linked}\n")
    assert sandbox.git_folders(course / "sub") == sandbox.git_folders(course) == [linked, main]


def test_a_grader_without_the_courses_config_hides_the_same_exchange(monkeypatch):
    """The clean room runs its kernel with no nbgrader configuration: it hides the exchange the course's uses."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    from conftest import ROOT
    from gpucourse.classroom.autograde import exchange_root

    for exported in (None, "/var/tmp/class-exchange"):
        if exported:
            monkeypatch.setenv("NBGRADER_EXCHANGE", exported)
        else:
            monkeypatch.delenv("NBGRADER_EXCHANGE", raising=False)
        course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
        assert exchange_root(Config()) == course.Exchange.root == (exported or "/srv/nbgrader/exchange")
        assert exchange_root(course) == course.Exchange.root


def test_a_hidden_folder_that_holds_the_kernels_python_stays_in_view(tmp_path):
    """An exchange configured above the course's environment (or its library) would hide the kernel's Python: such
    a folder is left in view, and the others are still hidden."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    above_python = Path(sys.prefix).resolve().parent
    argv = sandbox.kernel_argv([], workdir, 1 << 30, hidden=(str(above_python), str(exchange)))
    hidden = [b for a, b in zip(argv, argv[1:]) if a == "--tmpfs"]
    assert str(exchange) in hidden and str(above_python) not in hidden
