"""A student's Run All on an assignment release, then each exercise on its own.

JupyterLab's Run All stops at the first cell that fails: in an untouched
release, the first exercise's ``raise NotImplementedError()``. Whatever that
run defined is all a student has when they then write one exercise and run
its cells. `run_each_exercise_alone` replays exactly that: Run All up to its
first error, then, for each exercise, its answer cells (filled with the
solution's) and its test cells, forgetting afterwards every name the
exercise defined, so no exercise leans on another, unless it says so: an
exercise whose heading cell has ``"gpucourse": {"builds_on": [4, 5]}`` in its
metadata (its text says that it runs the student's answers of Exercises 4 and
5) gets the answer cells of those exercises run first.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from notebook_runner import ptx_coverage_cell, stderr_outputs

REMEMBER_NAMES = "_names_before_exercises = set(globals())"
NEW_NAMES = "{k: v for k, v in globals().items() if k not in _names_before_exercises}"
FORGET_NEW_NAMES = (
    "for _name in set(globals()) - _names_before_exercises:\n"
    "    if not _name.startswith('_'):\n"
    "        del globals()[_name]"
)


def nbgrader_flags(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def exercises(notebook) -> list[list]:
    """The code cells of each ``## Exercise`` section, in order: its answer and test cells, and any cell between
    them a student runs too (assignment 5 builds its flash kernel around the answer in a cell of its own)."""
    return [cells for _, cells in sections_of(notebook)]


def sections_of(notebook) -> list[tuple[object, list]]:
    """Each ``## Exercise`` section as (its heading cell, its code cells)."""
    sections = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and re.match(r"## Exercise\b", cell.source):
            sections.append((cell, []))
        elif sections and cell.cell_type == "code" and nbgrader_flags(cell):
            sections[-1][1].append(cell)
    return sections


def exercise_number(heading) -> int:
    return int(re.match(r"## Exercise (\d+)", heading.source).group(1))


def builds_on(heading) -> list[int]:
    """The exercises whose answers this one runs, as its heading cell's metadata declares."""
    return heading.metadata.get("gpucourse", {}).get("builds_on", [])


def with_answers(release, solution) -> None:
    """Put the solution's source into every answer cell of ``release`` (matched by grade_id)."""
    answers = {nbgrader_flags(c)["grade_id"]: c.source for c in solution.cells if nbgrader_flags(c).get("solution")}
    for cell in release.cells:
        if nbgrader_flags(cell).get("solution"):
            cell.source = answers[nbgrader_flags(cell)["grade_id"]]


@dataclass
class Replay:
    stopped_at: str = ""  # the grade_id of the cell Run All stopped at
    first_exercise: list[str] = field(default_factory=list)  # the grade_ids of the first exercise's cells
    failures: dict[str, str] = field(default_factory=dict)  # an exercise's first grade_id -> its error
    gpucourse_file: str = ""  # where the kernel imported gpucourse from
    stderr: dict[str, str] = field(default_factory=dict)  # an exercise's first grade_id -> what it wrote to stderr
    unchecked: dict[str, str] = field(default_factory=dict)  # -> the kernels it defined but never launched


def run_each_exercise_alone(release_path: Path, solution_path: Path, pythonpath: str | None = None) -> Replay:
    """Run All (stopping at the first error), then each exercise alone with the solution's answers."""
    release = nbformat.read(release_path, as_version=4)
    # a pythonpath without the course (an edition missing a module) must fail here, not install the course: the
    # setup cell's Colab path would pip-install it into this interpreter, under every later test
    env = dict(os.environ, **({"PYTHONPATH": pythonpath, "PIP_DRY_RUN": "1"} if pythonpath else {}))
    client = NotebookClient(release, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(release_path.parent)}})
    replay = Replay()
    with client.setup_kernel(env=env):
        for index, cell in enumerate(release.cells):
            if cell.cell_type == "code" and not run(client, cell, index):
                replay.stopped_at = nbgrader_flags(cell).get("grade_id", cell.source)
                break
        run(client, nbformat.v4.new_code_cell(REMEMBER_NAMES), 0)
        with_answers(release, nbformat.read(solution_path, as_version=4))
        replay.first_exercise = [nbgrader_flags(cell)["grade_id"] for cell in exercises(release)[0]]
        sections = sections_of(release)
        answers = {exercise_number(heading): [c for c in cells if nbgrader_flags(c).get("solution")]
                   for heading, cells in sections}
        for heading, section in sections:
            name = nbgrader_flags(section[0])["grade_id"]
            for cell in [c for number in builds_on(heading) for c in answers[number]] + section:
                if not run(client, cell, 0):
                    replay.failures[name] = error_of(cell)
                    break
            if stderr := "".join(stderr_outputs(section)):
                replay.stderr[name] = stderr
            if (unchecked := unchecked_kernels(client, NEW_NAMES)) != "[]":
                replay.unchecked[name] = unchecked
            run(client, nbformat.v4.new_code_cell(FORGET_NEW_NAMES), 0)
        if (unchecked := unchecked_kernels(client, "globals()")) != "[]":  # those defined before the exercises
            replay.unchecked["before the exercises"] = unchecked
        replay.gpucourse_file = run_and_print(client, "import gpucourse; print(gpucourse.__file__)")
    return replay


def run(client, cell, index) -> bool:
    """Execute one cell; False if it raised."""
    try:
        client.execute_cell(cell, index)
    except CellExecutionError:
        return False
    return True


def error_of(cell) -> str:
    return next(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")


def unchecked_kernels(client, namespace: str) -> str:
    """The kernels in ``namespace`` (an expression the kernel evaluates) never launched, as a printed list."""
    return run_and_print(client, ptx_coverage_cell(namespace)).split("UNCHECKED_KERNELS", 1)[-1].strip()


def run_and_print(client, source: str) -> str:
    cell = nbformat.v4.new_code_cell(source)
    run(client, cell, 0)
    return "".join(o.get("text", "") for o in cell.outputs).strip()
