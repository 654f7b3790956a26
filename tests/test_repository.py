"""The repository's own rules: layout, pins, clean notebooks, a Colab badge and one setup cell, git hygiene."""

import re
import subprocess
import tomllib
from pathlib import PurePosixPath

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from conftest import ROOT
from gpucourse.course.setup_cell import badge_cell, first_code_cell, render, render_badge

NOTEBOOKS = sorted(
    p for folder in ("lectures", "solutions", "assignments") for p in (ROOT / folder).rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)
LECTURES = sorted((ROOT / "lectures").glob("*.ipynb"))


def notebook_id(path):
    return str(path.relative_to(ROOT))


def test_layout():
    for name in ("README.md", "environment.yml", "pyproject.toml", "Makefile", "nbgrader_config.py",
                 "lectures", "solutions", "assignments", "lib/gpucourse", "tests", "benchmarks", ".ci/run"):
        assert (ROOT / name).exists(), f"missing {name}"


def git_ignores(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


def test_gitignore_keeps_lib_and_drops_grading_folders():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert not git_ignores("lib/gpucourse/__init__.py")
    for path in ("submitted/alice/x.ipynb", "autograded/a", "feedback/a", "gradebook.db"):
        assert git_ignores(path), f"{path} should be ignored by git"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=notebook_id)
def test_notebooks_are_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name} has outputs; clear them before committing"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=notebook_id)
def test_first_code_cell_is_the_setup_cell(path):
    cell = first_code_cell(nbformat.read(path, as_version=4))
    assert cell is not None and cell.source == render(ROOT / "pyproject.toml"), (
        f"{path.name}: run `make setup-cells`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=notebook_id)
def test_notebook_opens_in_colab_from_the_configured_source(path):
    """The badge opens the notebook from install-source's repository; without one there is no badge."""
    cell = badge_cell(nbformat.read(path, as_version=4))
    expected = render_badge(ROOT / "pyproject.toml", PurePosixPath(notebook_id(path)))
    assert (cell and cell.source) == expected, f"{path.name}: run `make setup-cells`"


@pytest.mark.parametrize("path", LECTURES, ids=notebook_id)
def test_lecture_cells_carry_slide_metadata(path):
    kinds = {"slide", "subslide", "fragment", "-", "skip", "notes"}
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        assert cell.metadata.get("slideshow", {}).get("slide_type") in kinds, f"cell {index}"


def pyproject_requirements(extras=("course", "cu13")) -> dict[str, Requirement]:
    """What the package and ``extras`` ask for, by name (an extra that asks for another of the course's own,
    ``gpucourse[student]``, expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]

    def expanded(names) -> list[Requirement]:
        listed = [Requirement(r) for name in names for r in optional[name]]
        return [own for r in listed if r.name == project["name"] for own in expanded(r.extras)] + [
            r for r in listed if r.name != project["name"]]

    requirements = [Requirement(r) for r in project["dependencies"]] + expanded(extras)
    return {r.name: r for r in requirements}


def conda_specifier(spec: str) -> tuple[str, SpecifierSet]:
    """'numba=0.68' (conda's 0.68.*) and 'numpy<2.5' as pip specifiers."""
    name, version = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", spec).groups()
    if re.fullmatch(r"=[\d.]+", version):
        version = f"=={version[1:]}.*"
    return name, SpecifierSet(version)


def environment_pins(text: str) -> tuple[dict, dict]:
    """An environment.yml's (conda, pip) packages: name -> pip specifier, name -> Requirement."""
    conda, pip = {}, {}
    for entry in yaml.safe_load(text)["dependencies"]:
        if isinstance(entry, dict):
            for line in entry["pip"]:
                if not line.startswith("-"):
                    requirement = Requirement(line)
                    pip[requirement.name] = requirement
        elif not entry.startswith(("python", "pip")):
            name, specifier = conda_specifier(entry)
            conda[name] = specifier
    return conda, pip


@pytest.mark.parametrize("edition, extras", [("course", ("course", "cu13")), ("student", ("student", "cu13"))])
def test_environment_yml_has_the_same_pins_as_pyproject(edition, extras):
    """Here, the `course` extra's packages; in the student edition (the instructor parts left out), the `student`
    extra's, as its `make lab` installs."""
    from gpucourse.course.student_edition import without_instructor_parts

    text = (ROOT / "environment.yml").read_text()
    conda, pip = environment_pins(without_instructor_parts(text) if edition == "student" else text)
    wanted = pyproject_requirements(extras)
    for name, requirement in wanted.items():
        if name in pip:
            assert pip[name].specifier == requirement.specifier and pip[name].extras <= requirement.extras | {"cu13"}
        else:
            assert name in conda, f"environment.yml lacks {name}"
            assert conda[name] == requirement.specifier, f"{name}: {conda[name]} != {requirement.specifier}"
    assert set(conda) | set(pip) <= set(wanted), f"environment.yml pins a package the {edition} extra does not"


def test_the_files_scheduled_first_exist():
    """`make test` starts the files of `conftest.LONGEST_FIRST` first: a name there that no longer exists is dropped
    from that order without a word, so the suite would quietly end with a long file on one worker."""
    from conftest import LONGEST_FIRST

    assert [name for name in LONGEST_FIRST if not (ROOT / "tests" / name).is_file()] == []
