"""`make student-edition`: the course as students get it, without a line of a solution or hidden test."""

import os
import subprocess
import tomllib
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT
from gpucourse.course.setup_cell import PLACEHOLDER
from gpucourse.course.student_edition import build, main, without_instructor_parts
from gpucourse.course.wheel import metadata
from gpucourse.classroom.regions import lines_by_region
from run_all import run_each_exercise_alone

TOO_SHORT_TO_TELL = 12  # shorter lines (`pass`, `d *= 2`) say nothing of a solution


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("published") / "student-edition"
    build(ROOT, out)
    return out


def cell_lines(notebook: Path) -> list[str]:
    return [line.strip() for cell in nbformat.read(notebook, as_version=4).cells for line in cell.source.splitlines()]


def secret_lines() -> set[str]:
    """Lines of solutions/ inside solution or hidden-test regions, and nowhere public: not outside
    those regions, not in the lectures or lib."""
    regions = [lines_by_region(notebook) for notebook in (ROOT / "solutions").rglob("*.ipynb")]
    secret = {line for r in regions for line in r["solution"] | r["hidden tests"] if len(line) >= TOO_SHORT_TO_TELL}
    public = set().union(*[r["public"] for r in regions])
    public |= {line for notebook in (ROOT / "lectures").glob("*.ipynb") for line in cell_lines(notebook)}
    public |= {line.strip() for source in (ROOT / "lib").rglob("*.py") for line in source.read_text().splitlines()}
    return secret - public


def text_lines(path: Path) -> set[str]:
    if path.suffix == ".ipynb":
        return set(cell_lines(path))
    try:
        return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
    except UnicodeDecodeError:
        return set()


def test_edition_holds_what_students_need_and_nothing_of_the_instructor(edition):
    names = {p.name for p in edition.iterdir()}
    assert names == {"lectures", "assignments", "lib", "benchmarks", "README.md", "Makefile", "pyproject.toml",
                     "environment.yml", ".gitignore", ".jupyter", "gpucourse-0.1.0-py3-none-any.whl"}
    assert "## Instructor path" not in (edition / "README.md").read_text()
    assert "solutions" not in (edition / "Makefile").read_text()
    with zipfile.ZipFile(edition.with_suffix(".zip")) as archive:
        zipped = {name.removeprefix("student-edition/") for name in archive.namelist() if not name.endswith("/")}
    assert zipped == {str(p.relative_to(edition)) for p in edition.rglob("*") if p.is_file()}


def test_no_line_of_a_solution_or_hidden_test_is_in_the_edition(edition):
    secret = secret_lines()
    assert len(secret) > 100, "the solutions have solution and hidden-test lines to look for"
    leaks = {str(path.relative_to(edition)): sorted(text_lines(path) & secret)[:3]
             for path in edition.rglob("*") if path.is_file()}
    assert {name: lines for name, lines in leaks.items() if lines} == {}


def test_instructor_markers_must_pair():
    assert without_instructor_parts("a\n# BEGIN INSTRUCTOR ONLY\nb\n# END INSTRUCTOR ONLY\nc\n") == "a\nc\n"
    for unpaired in ("# BEGIN INSTRUCTOR ONLY\n", "# END INSTRUCTOR ONLY\n",
                     "# BEGIN INSTRUCTOR ONLY\n# BEGIN INSTRUCTOR ONLY\n"):
        with pytest.raises(ValueError):
            without_instructor_parts(unpaired)


def test_a_lecture_runs_from_the_edition(edition):
    lecture = edition / "lectures" / "01_threads_blocks_grids.ipynb"
    notebook = nbformat.read(lecture, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("import gpucourse; print(gpucourse.__file__)"))
    env = dict(os.environ, PYTHONPATH=str(edition / "lib"))
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(lecture.parent)}}).execute(env=env)
    assert notebook.cells[-1].outputs[0]["text"].startswith(str(edition / "lib"))


def test_an_assignment_runs_from_the_edition(edition):
    release = edition / "assignments" / "01_threads_blocks_grids" / "threads_blocks_grids.ipynb"
    replay = run_each_exercise_alone(release, ROOT / "solutions" / release.parent.name / release.name,
                                     pythonpath=str(edition / "lib"))
    assert replay.gpucourse_file.startswith(str(edition / "lib"))
    assert replay.failures == {}


def test_the_wheel_holds_the_editions_package(edition):
    with zipfile.ZipFile(edition / "gpucourse-0.1.0-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read("gpucourse-0.1.0.dist-info/METADATA").decode()
    package = {p.relative_to(edition / "lib").as_posix() for p in (edition / "lib" / "gpucourse").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}  # bytecode of the edition's own runs stays out
    assert names - package == {f"gpucourse-0.1.0.dist-info/{name}" for name in ("METADATA", "WHEEL", "RECORD")}
    assert package <= names and "Provides-Extra: cu12" in metadata and "Requires-Dist: numba-cuda==0.30.*" in metadata


@pytest.mark.parametrize("source", [PLACEHOLDER, "git+https://github.com/Teacher/Course.git@fall"])
def test_an_install_source_that_is_the_placeholder_or_this_repository_is_refused(tmp_path, capsys, source):
    root = tmp_path / "course"
    root.mkdir()
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("install-source = ")
    (root / "pyproject.toml").write_text(text[:start] + f'install-source = "{source}"' + text[text.index("\n", start):])
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "git@github.com:teacher/course.git"], check=True)
    assert main([str(root), str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert ("placeholder" if source == PLACEHOLDER else "this repository, which holds the solutions") in error
    assert not (tmp_path / "out").exists()


def test_the_wheels_requirements_parse_as_pip_reads_them_and_keep_their_markers():
    """Each ``Requires-Dist`` of the edition's wheel is one requirement; one with a marker of its own (nvdisasm: no
    macOS wheel) keeps it beside its extra's (pip refused the whole wheel when the two were simply joined)."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [line.split(": ", 1)[1] for line in metadata(project).splitlines() if line.startswith("Requires-Dist: ")]
    requirements = [Requirement(line) for line in lines]
    nvdisasm = next(r for r in requirements if r.name == "nvidia-cuda-nvdisasm")
    assert nvdisasm.marker.evaluate({"extra": "cu13", "sys_platform": "linux"})
    assert not nvdisasm.marker.evaluate({"extra": "cu12", "sys_platform": "linux"})
    assert not nvdisasm.marker.evaluate({"extra": "cu13", "sys_platform": "darwin"})
    numba = next(r for r in requirements if r.name == "numba")
    assert numba.marker is None
