"""The student edition: the course as students get it, without solutions, hidden tests or instructor files.

``python -m gpucourse.course.student_edition [ROOT] [OUT]`` (defaults: ``.`` and
``build/student-edition``) empties OUT (all but ``OUT/.git``: the students' repository published from it keeps
its history), copies into it from the course repository ROOT what students need (in a git checkout, the files git
tracks), and zips it as ``OUT.zip``:

* ``lectures/``, ``assignments/`` (the nbgrader release: no solutions, no hidden tests),
  ``lib/`` (the course package), ``benchmarks/`` (the GPU results lectures show),
  ``pyproject.toml``, ``environment.yml``, ``.gitignore``, ``.jupyter/`` (what ``make lab`` hides);
* ``README.md``, ``Makefile`` and ``benchmarks/README.md`` without their instructor parts:
  the lines from one marked ``BEGIN INSTRUCTOR ONLY`` to one marked ``END INSTRUCTOR ONLY``
  (in Markdown, ``<!-- BEGIN INSTRUCTOR ONLY -->``);
* ``gpucourse-<version>-py3-none-any.whl``, the course package of the edition's ``lib/``,
  which the setup cell installs on Colab when no ``install-source`` is set.

It refuses a notebook of the edition with outputs, or with an nbgrader solution or hidden-test region, and an
``install-source`` that is the placeholder or this repository itself
(one of its git remotes): Colab would install from where nothing is, or from the
repository that holds the solutions; and notebooks whose Colab badge or setup cell
disagrees with ``install-source`` (``make setup-cells`` rewrites them). It prints
where Colab installs the course from.

Left out: ``solutions/`` (answers and hidden tests), ``nbgrader_config.py`` (it
points at ``solutions/``; ``nbgrader validate`` needs no configuration), ``tests/``
and ``.ci/`` (they run the solutions), and the instructor's tools (`INSTRUCTOR_TOOLS`:
the grading pipeline ``gpucourse.classroom``, this command and its wheel builder, the
GPU check and the grading benchmarks), from ``lib/`` and so from the wheel too (nothing
a student runs imports them), and the sections of ``benchmarks/RESULTS.md`` they record.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from .results import markers
from .setup_cell import GITHUB_SOURCE, configuration, install_source, out_of_date
from .wheel import build_wheel

COPIED = ("lectures", "assignments", "lib", "benchmarks", "pyproject.toml", "environment.yml", ".gitignore",
          ".jupyter")
WITHOUT_INSTRUCTOR_PARTS = ("README.md", "Makefile", "environment.yml", "benchmarks/README.md")
# Instructor and maintainer tooling inside the copied folders: grading a class (its sandbox, clean room and
# allow-list), building this edition, checking the course on a GPU machine, and measuring the simulator (its speed
# and numba-cuda's tests: they read tests/ and the `course` extra). Left out of the edition and of its wheel.
INSTRUCTOR_TOOLS = ("lib/gpucourse/classroom", "lib/gpucourse/course/student_edition.py",
                    "lib/gpucourse/course/wheel.py", "benchmarks/gpu_check.py", "benchmarks/gpu_grading.py",
                    "benchmarks/grading_scale.py", "benchmarks/simulator_speed.py",
                    "benchmarks/numba_cuda_conformance.py", "benchmarks/numba_cuda_conformance_plugin.py",
                    "benchmarks/numba_cuda_conformance_site")
# The sections of benchmarks/RESULTS.md that those tools record (no lecture shows them), left out of its copy.
INSTRUCTOR_RESULTS = ("gpu_check", "gpu_grading", "grading_scale")
STUDENT_NOTEBOOKS = ("lectures", "assignments")
BEGIN, END = "BEGIN INSTRUCTOR ONLY", "END INSTRUCTOR ONLY"
NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info", ".pytest_cache")


def without_instructor_parts(text: str) -> str:
    """``text`` without the lines from a ``BEGIN INSTRUCTOR ONLY`` marker to its ``END`` marker."""
    kept, inside = [], False
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if BEGIN in line or END in line:
            if inside == (BEGIN in line):
                raise ValueError(f"line {number}: {line.strip()!r} does not pair with the marker before it")
            inside = BEGIN in line
        elif not inside:
            kept.append(line)
    if inside:
        raise ValueError(f"{BEGIN} without {END}")
    return "".join(kept)


def without_sections(text: str, names) -> str:
    """``text`` (benchmarks/RESULTS.md) without the recorded sections ``names``."""
    for name in names:
        begin, end = markers(name)
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end) + r"\n*", "", text, flags=re.S)
    return text.rstrip("\n") + "\n"


GITHUB_REMOTE = re.compile(r"github\.com[:/](?P<repo>[^/\s]+/[^/\s]+?)(?:\.git)?/?$")


def github_remotes(root: Path) -> set[str]:
    """``owner/repo`` (lower case) of every GitHub remote of the git repository ``root``; empty if none."""
    try:
        urls = subprocess.run(["git", "-C", str(root), "remote", "-v"], capture_output=True, text=True).stdout
    except OSError:
        return set()
    found = (GITHUB_REMOTE.search(line.split()[1]) for line in urls.splitlines() if len(line.split()) > 1)
    return {match["repo"].lower() for match in found if match}


def check_install_source(root: Path) -> None:
    """Refuse the placeholder (ValueError from `install_source`) and the instructor's own repository."""
    source = install_source(configuration(root / "pyproject.toml"))
    match = GITHUB_SOURCE.fullmatch(source)
    if match and match["repo"].lower() in github_remotes(root):
        raise ValueError(f"install-source {source} is this repository, which holds the solutions: set it to the "
                         "students' repository or leave it empty (Colab then installs the edition's wheel)")


def check_setup_cells(root: Path) -> None:
    """Refuse notebooks whose badge or setup cell is not what pyproject.toml's ``install-source`` gives."""
    stale = out_of_date(root, STUDENT_NOTEBOOKS)
    if stale:
        source = install_source(configuration(root / "pyproject.toml")) or "empty: the edition's wheel"
        raise ValueError(f"the Colab badge or setup cell of {len(stale)} notebook(s) ({stale[0]}"
                         f"{', ...' if len(stale) > 1 else ''}) does not match pyproject.toml's install-source "
                         f"({source}): run `make setup-cells`, commit, and build the edition again")


def colab_source(root: Path) -> str:
    """One line: where the edition's setup cell installs the course from on Colab."""
    source = install_source(configuration(root / "pyproject.toml"))
    if source:
        return f"Colab installs the course from {source} (pyproject.toml's install-source)"
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return (f"Colab installs the course from the edition's wheel: students upload {project['name']}-"
            f"{project['version']}-py3-none-any.whl from the edition (no install-source in pyproject.toml)")


def tracked_files(root: Path, name: str) -> list[str] | None:
    """The files under ``name`` that git tracks in ``root`` (None where ``root`` is no git checkout): a stray file
    in the working tree (a copy of a solution saved beside the release) is never part of the edition."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", name], capture_output=True)
    if listed.returncode:
        return None
    return [path for path in listed.stdout.decode().split("\0") if path]


def empty(out: Path) -> None:
    """``out`` emptied, all but its ``.git``: the students' repository published from it keeps its history."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in out.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


SECRET_MARKERS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")  # nbgrader's, in solutions/ only


def check_notebooks(out: Path) -> None:
    """A clear error when a notebook of the edition holds outputs (a lecture saved after a run) or an nbgrader
    solution or hidden-test region (a copy of a solution): nothing of that kind may reach students."""
    for folder in STUDENT_NOTEBOOKS:
        for notebook in sorted((out / folder).rglob("*.ipynb")):
            cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
            name = notebook.relative_to(out).as_posix()
            if any(cell.get("outputs") for cell in cells):
                raise ValueError(f"{name} holds outputs: clear them (Edit > Clear Outputs of All Cells, then save) "
                                 "or `git checkout` it, and build again")
            secret = next((m for cell in cells for m in SECRET_MARKERS if m in "".join(cell["source"])), None)
            if secret:
                raise ValueError(f"{name} holds nbgrader's `{secret}`: a solution or its hidden tests; students get "
                                 "the release (`make release`), never solutions/")


def build(root: Path, out: Path) -> Path:
    """Write the student edition of ``root`` into ``out`` (all of it but its ``.git``, kept) and ``out.zip``;
    returns the zip's path. In a git checkout it copies the files git tracks, as they are in the working tree."""
    check_install_source(root)
    check_setup_cells(root)
    empty(out)
    for name in COPIED:
        source = root / name
        files = tracked_files(root, name)
        if files is not None:
            for path in files:
                (out / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / path, out / path)
        elif source.is_dir():
            shutil.copytree(source, out / name, ignore=NOT_SOURCES)
        else:
            shutil.copy2(source, out / name)
    for name in INSTRUCTOR_TOOLS:
        left_out = out / name
        if left_out.is_dir():
            shutil.rmtree(left_out)
        else:
            left_out.unlink(missing_ok=True)
    for name in WITHOUT_INSTRUCTOR_PARTS:
        try:
            text = without_instructor_parts((root / name).read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{name}, {error}: pair each {BEGIN} with an {END}") from None
        (out / name).write_text(text, encoding="utf-8")
    results = out / "benchmarks" / "RESULTS.md"
    if results.exists():
        results.write_text(without_sections(results.read_text(encoding="utf-8"), INSTRUCTOR_RESULTS), encoding="utf-8")
    check_notebooks(out)
    build_wheel(out, out)
    return archive(out)


def archive(out: Path) -> Path:
    """``out.zip``: every file of ``out`` under ``out``'s name, its ``.git`` left out."""
    path = Path(f"{out}.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zipped:
        for file in sorted(out.rglob("*")):
            relative = file.relative_to(out)
            if file.is_file() and relative.parts[0] != ".git":
                zipped.write(file, (Path(out.name) / relative).as_posix())
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("."), help="the course repository")
    parser.add_argument("out", nargs="?", type=Path, default=Path("build/student-edition"))
    args = parser.parse_args(argv)
    try:
        archive = build(args.root, args.out)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"student edition: {args.out}/ and {archive}")
    print(colab_source(args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
