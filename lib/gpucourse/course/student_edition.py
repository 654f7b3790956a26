"""The student edition: the course as students get it, without solutions, hidden tests or instructor files.

``python -m gpucourse.course.student_edition [ROOT] [OUT]`` (defaults: ``.`` and
``build/student-edition``) empties OUT, copies into it from the course repository
ROOT what students need, and zips it as ``OUT.zip``:

* ``lectures/``, ``assignments/`` (the nbgrader release: no solutions, no hidden tests),
  ``lib/`` (the course package), ``benchmarks/`` (the GPU results lectures show),
  ``pyproject.toml``, ``environment.yml``, ``.gitignore``, ``.jupyter/`` (what ``make lab`` hides);
* ``README.md`` and ``Makefile`` without their instructor parts: the lines from one
  marked ``BEGIN INSTRUCTOR ONLY`` to one marked ``END INSTRUCTOR ONLY``;
* ``gpucourse-<version>-py3-none-any.whl``, the course package, which the setup cell
  installs on Colab when no ``install-source`` is set.

It refuses an ``install-source`` that is the placeholder or this repository itself
(one of its git remotes): Colab would install from where nothing is, or from the
repository that holds the solutions.

Left out: ``solutions/`` (answers and hidden tests), ``nbgrader_config.py`` (it
points at ``solutions/``; ``nbgrader validate`` needs no configuration), ``tests/``
and ``.ci/`` (they run the solutions).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .setup_cell import GITHUB_SOURCE, configuration, install_source
from .wheel import build_wheel

COPIED = ("lectures", "assignments", "lib", "benchmarks", "pyproject.toml", "environment.yml", ".gitignore",
          ".jupyter")
WITHOUT_INSTRUCTOR_PARTS = ("README.md", "Makefile")
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


def build(root: Path, out: Path) -> Path:
    """Write the student edition of ``root`` into ``out`` and ``out.zip``; returns the zip's path."""
    check_install_source(root)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=NOT_SOURCES)
        else:
            shutil.copy2(source, out / name)
    for name in WITHOUT_INSTRUCTOR_PARTS:
        (out / name).write_text(without_instructor_parts((root / name).read_text(encoding="utf-8")), encoding="utf-8")
    build_wheel(out, out)
    return Path(shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name))


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
