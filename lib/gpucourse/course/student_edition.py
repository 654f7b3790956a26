"""The student edition: the course as students get it, without solutions, hidden tests or instructor files.

``python -m gpucourse.course.student_edition [ROOT] [OUT]`` (defaults: ``.`` and
``build/student-edition``) empties OUT, copies into it from the course repository
ROOT what students need, and zips it as ``OUT.zip``:

* ``lectures/``, ``assignments/`` (the nbgrader release: no solutions, no hidden tests),
  ``lib/`` (the course package), ``benchmarks/`` (the GPU results lectures show),
  ``pyproject.toml``, ``environment.yml``, ``.gitignore``, ``.jupyter/`` (what ``make lab`` hides);
* ``README.md`` and ``Makefile`` without their instructor parts: the lines from one
  marked ``BEGIN INSTRUCTOR ONLY`` to one marked ``END INSTRUCTOR ONLY``.

Left out: ``solutions/`` (answers and hidden tests), ``nbgrader_config.py`` (it
points at ``solutions/``; ``nbgrader validate`` needs no configuration), ``tests/``
and ``.ci/`` (they run the solutions).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

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


def build(root: Path, out: Path) -> Path:
    """Write the student edition of ``root`` into ``out`` and ``out.zip``; returns the zip's path."""
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
    return Path(shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("."), help="the course repository")
    parser.add_argument("out", nargs="?", type=Path, default=Path("build/student-edition"))
    args = parser.parse_args(argv)
    archive = build(args.root, args.out)
    print(f"student edition: {args.out}/ and {archive}")


if __name__ == "__main__":
    main()
