"""The sandbox keeps in view what the kernel's Python needs, also for a course checked out in /tmp or a symlinked
environment."""

import subprocess
import sys
from pathlib import Path

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
