"""`make student-edition`: the course as students get it, without a line of a solution or hidden test."""

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import ROOT
from gpucourse.course.setup_cell import PLACEHOLDER, sync
from gpucourse.course.student_edition import (
    INSTRUCTOR_TOOLS, STUDENT_NOTEBOOKS, build, check_setup_cells, colab_source, main, without_instructor_parts,
)
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
    # PIP_DRY_RUN: an edition that lacks a module fails here; the setup cell must not pip-install the course into
    # this interpreter (its Colab path), where every later test would import it
    env = dict(os.environ, PYTHONPATH=str(edition / "lib"), PIP_DRY_RUN="1")
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


LEFT_OUT_MODULES = tuple(name.removeprefix("lib/").removesuffix(".py").replace("/", ".")
                         for name in INSTRUCTOR_TOOLS if name.startswith("lib/"))  # gpucourse.classroom, ...
LEFT_OUT_SCRIPTS = tuple(Path(name).stem for name in INSTRUCTOR_TOOLS if name.startswith("benchmarks/"))


def test_the_instructors_tools_are_in_neither_the_edition_nor_its_wheel(edition):
    """The grader (its sandbox, clean room and allow-list), this builder, the GPU check and the grading benchmarks
    were shipped to students, in the folders and in the wheel Colab installs; and benchmarks/README.md told them
    about `make gpu-check`, the device tool and the grading benchmarks."""
    assert "gpucourse.classroom" in LEFT_OUT_MODULES and "gpu_check" in LEFT_OUT_SCRIPTS
    for name in INSTRUCTOR_TOOLS:
        assert (ROOT / name).exists(), f"{name} is no longer in the course: take it out of INSTRUCTOR_TOOLS"
        assert not (edition / name).exists(), f"{name} is in the edition"
    with zipfile.ZipFile(edition / "gpucourse-0.1.0-py3-none-any.whl") as wheel:
        shipped = [name for name in wheel.namelist()
                   if name.removesuffix(".py").replace("/", ".").startswith(LEFT_OUT_MODULES)]
    assert shipped == []
    readme = (edition / "benchmarks" / "README.md").read_text()
    for said in ("make gpu-check", "gpu-wheels", "device tool", "gpu_check.py", "gpu_grading", "grading_scale",
                 "INSTRUCTOR ONLY", "classroom"):
        assert said not in readme, f"the edition's benchmarks/README.md says {said!r}"
    assert "`matmul.py`" in readme and "## Compiled code of the top rungs" in readme
    results = (edition / "benchmarks" / "RESULTS.md").read_text()
    assert "grading_scale" not in results and "<!-- compiled_code: begin -->" in results


def imported_modules(source: str, module: str = "") -> set[str]:
    """What ``source`` (the module ``module``, for relative imports) imports: each ``from X import y`` as X and
    X.y; IPython's magics and shell lines are left out."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[:len(module.split(".")) - node.level] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            found |= {stem} | {f"{stem}.{alias.name}" for alias in node.names}
    return found


def test_nothing_in_the_edition_imports_what_it_leaves_out(edition):
    """Lectures, assignments (with their checks), the course package and the benchmarks import none of the
    instructor's tools, read from the source; and every module of the edition's package imports, and
    `gpucourse.doctor()` runs, with the edition's lib/ alone (the lecture and assignment tests run notebooks so)."""
    imports = {}
    for path in (edition / "lib").rglob("*.py"):
        parts = path.relative_to(edition / "lib").with_suffix("").parts
        package = ".".join(parts if parts[-1] != "__init__" else parts[:-1] + ("x",))
        imports[path] = imported_modules(path.read_text(), package)
    for path in (edition / "benchmarks").rglob("*.py"):
        imports[path] = imported_modules(path.read_text())
    for folder in STUDENT_NOTEBOOKS:
        for path in (edition / folder).rglob("*.ipynb"):
            cells = nbformat.read(path, as_version=4).cells
            imports[path] = set().union(*[imported_modules(c.source) for c in cells if c.cell_type == "code"])
    lecture = edition / "lectures" / "03_matmul.ipynb"
    assert len(imports) > 100 and "gpucourse" in imports[lecture], "the scan reads the notebooks' imports"
    assert "gpucourse.run.doctor" in imports[edition / "lib" / "gpucourse" / "__init__.py"], "and relative ones"
    wrong = {str(path.relative_to(edition)): sorted(m for m in found if m.startswith(LEFT_OUT_MODULES)
                                                    or m.split(".")[0] in LEFT_OUT_SCRIPTS)
             for path, found in imports.items()}
    assert {name: modules for name, modules in wrong.items() if modules} == {}

    every_module = ("import importlib, pkgutil, gpucourse\n"
                    "names = [m.name for m in pkgutil.walk_packages(gpucourse.__path__, 'gpucourse.')]\n"
                    "for name in names: importlib.import_module(name)\n"
                    "print(gpucourse.__file__, len(names))\n"
                    "gpucourse.doctor()\n")
    env = dict(os.environ, PYTHONPATH=str(edition / "lib"))
    ran = subprocess.run([sys.executable, "-c", every_module], cwd=edition, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    where, count = ran.stdout.splitlines()[0].rsplit(" ", 1)
    assert where.startswith(str(edition / "lib")) and int(count) > 50 and "gpucourse environment report" in ran.stdout


def course_root_with(tmp_path, source: str) -> Path:
    """A course root with the repository's pyproject.toml (``install-source`` = ``source``) and lecture 1."""
    root = tmp_path / "course"
    (root / "lectures").mkdir(parents=True)
    (root / "assignments").mkdir()
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("install-source = ")
    (root / "pyproject.toml").write_text(text[:start] + f'install-source = "{source}"' + text[text.index("\n", start):])
    shutil.copy(ROOT / "lectures" / "01_threads_blocks_grids.ipynb", root / "lectures")
    return root


def test_setup_cells_that_disagree_with_the_install_source_are_refused_and_where_colab_installs_from_is_said(
        tmp_path, capsys):
    """install-source changed without `make setup-cells`: the edition went out with the old badge and setup cell."""
    root = course_root_with(tmp_path, "git+https://github.com/me/students")
    assert main([str(root), str(tmp_path / "out")]) == 1
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.splitlines()) == 1, said.err
    assert "lectures/01_threads_blocks_grids.ipynb" in said.err and "run `make setup-cells`" in said.err
    assert "git+https://github.com/me/students" in said.err and not (tmp_path / "out").exists()
    assert sync(root, STUDENT_NOTEBOOKS) == (["lectures/01_threads_blocks_grids.ipynb"], 1)
    check_setup_cells(root)  # now they agree
    assert colab_source(root) == ("Colab installs the course from git+https://github.com/me/students "
                                  "(pyproject.toml's install-source)")
    assert "students upload gpucourse-0.1.0-py3-none-any.whl from the edition" in colab_source(
        course_root_with(tmp_path / "wheel", ""))


def test_make_student_edition_says_where_colab_installs_from(tmp_path, capsys):
    assert main([str(ROOT), str(tmp_path / "student-edition")]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said == [f"student edition: {tmp_path / 'student-edition'}/ and {tmp_path / 'student-edition.zip'}",
                    colab_source(ROOT)]
    assert said[1].startswith("Colab installs the course from ")


# What the edition may import without installing it: the GPU machine's packages (a GPU benchmark's references, a
# lecture's GPU-only cell) and Colab's own.
NOT_INSTALLED_BY_THE_EDITION = {"cupy": "GPU", "torch": "GPU", "triton": "GPU", "google": "Colab"}


def requirements(project: dict, extras) -> list[Requirement]:
    """What installing ``project`` (pyproject.toml's table) with ``extras`` asks for, its own extras expanded."""
    asked = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        for r in map(Requirement, project["optional-dependencies"][extra]):
            asked += requirements(project, r.extras)[len(project["dependencies"]):] if r.name == project["name"] else [r]
    return asked


def installed_by(asked: list[Requirement]) -> set[str]:
    """The distributions pip installs for ``asked``, read from this environment's metadata (extras followed)."""
    seen, todo = set(), list(asked)
    while todo:
        r = todo.pop()
        if (key := (canonicalize_name(r.name), frozenset(r.extras))) in seen:
            continue
        seen.add(key)
        try:
            required = distribution(r.name).requires or []
        except PackageNotFoundError:
            continue
        todo += [q for q in map(Requirement, required)
                 if q.marker is None or any(q.marker.evaluate({"extra": e}) for e in r.extras or {""})]
    return {name for name, _ in seen}


def test_the_editions_make_lab_installs_the_student_extra_and_it_holds_what_the_edition_imports(edition):
    """`make lab` in the edition installed the `course` extra: the test runner, Dask, Playwright, for students who
    only open notebooks. Now it installs `student`, and every package the edition's package, benchmarks and
    notebooks import comes with it (or is one that only a GPU machine or Colab has)."""
    def extras(folder: Path) -> str:
        said = make(folder, "-s", "--eval", "print-extras: ; @echo $(EXTRAS)", "print-extras")
        assert said.returncode == 0, said.stderr
        return said.stdout.strip()

    assert (extras(ROOT), extras(edition)) == ("cu13,course", "cu13,student")
    project = tomllib.loads((edition / "pyproject.toml").read_text())["project"]
    installed = installed_by(requirements(project, extras(edition).split(",")))
    assert {"jupyterlab", "nbgrader", "numba-cuda", "matplotlib"} <= installed
    assert not {"pytest", "distributed", "playwright", "hypothesis"} & installed
    sources = {path: imported_modules(path.read_text(), ".".join(path.relative_to(edition / "lib").parts[:-1] + ("x",)))
               for path in (edition / "lib").rglob("*.py")}
    sources |= {path: imported_modules(path.read_text()) for path in (edition / "benchmarks").glob("*.py")}
    for folder in STUDENT_NOTEBOOKS:
        for path in (edition / folder).rglob("*.ipynb"):
            cells = nbformat.read(path, as_version=4).cells
            sources[path] = set().union(*[imported_modules(c.source) for c in cells if c.cell_type == "code"])
    distributions, scripts = packages_distributions(), {path.stem for path in sources}
    lacking = {}
    for path, modules in sources.items():
        for top in {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - scripts - {"gpucourse"}:
            if (top not in NOT_INSTALLED_BY_THE_EDITION
                    and not {canonicalize_name(d) for d in distributions.get(top, ())} & installed):
                lacking.setdefault(top, []).append(str(path.relative_to(edition)))
    assert lacking == {}


def make(folder: Path, *arguments: str, exchange: str | None = None) -> subprocess.CompletedProcess:
    """``make arguments`` in ``folder``, with NBGRADER_EXCHANGE exported as ``exchange`` (unset when None), as a
    person types it: not as a sub-make of `make test` (whose MAKELEVEL makes make print the directories it enters)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NBGRADER_EXCHANGE", "EXCHANGE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    if exchange is not None:
        env["NBGRADER_EXCHANGE"] = exchange
    return subprocess.run(["make", *arguments], cwd=folder, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("where", ["course", "edition"])
def test_make_lab_uses_an_exported_nbgrader_exchange_here_and_in_the_edition(edition, where):
    """`make exchange EXCHANGE=/tmp/exchange` and an exported NBGRADER_EXCHANGE: nbgrader released there, but
    `make lab` put students on /srv/nbgrader/exchange (its EXCHANGE default won over the exported variable)."""
    folder = ROOT if where == "course" else edition

    def lab(*settings, exchange=None) -> str:
        dry_run = make(folder, "-n", "lab", "USER_ID=1000", *settings, exchange=exchange)
        assert dry_run.returncode == 0, dry_run.stderr
        return next(line for line in dry_run.stdout.splitlines() if "jupyter lab" in line)

    line = lab(exchange="/tmp/course-exchange")
    assert 'NBGRADER_EXCHANGE="/tmp/course-exchange"' in line
    assert f'JUPYTER_CONFIG_PATH="{folder}/.jupyter/student"' in line and (folder / ".jupyter" / "student").is_dir()
    lecture = line.split("--LabApp.default_url=/lab/tree/")[1].split()[0]
    assert (folder / lecture).is_file()
    assert 'NBGRADER_EXCHANGE="/tmp/other"' in lab("EXCHANGE=/tmp/other", exchange="/tmp/course-exchange")
    assert 'NBGRADER_EXCHANGE="/srv/nbgrader/exchange"' in lab()


def test_make_exchange_says_what_to_export(tmp_path):
    exchange = tmp_path / "exchange"
    made = make(ROOT, "exchange", f"EXCHANGE={exchange}")
    assert made.returncode == 0 and exchange.is_dir() and (exchange.stat().st_mode & 0o777) == 0o777, made.stderr
    assert made.stdout.splitlines()[-1] == (f"exchange {exchange} is ready; next: export NBGRADER_EXCHANGE={exchange},"
                                            " then nbgrader release_assignment <assignment> (nbgrader and make lab "
                                            "read it)")
    made = make(ROOT, "exchange", exchange=str(exchange))
    assert made.stdout.splitlines()[-1] == f"exchange {exchange} is ready; next: nbgrader release_assignment <assignment>"


@pytest.mark.parametrize("arguments, said", [
    (["grade"], "make grade A=<assignment>, e.g. make grade A=01_threads_blocks_grids"),
    (["grade-one", "A=01_threads_blocks_grids"], "make grade-one A=<assignment> S=<student>"),
    (["grade-one", "S=alice"], "make grade-one A=<assignment> S=<student>"),
    (["grade", "A=01_threads"], "no assignment 01_threads in solutions/: make grade A=<assignment>"),
])
def test_make_grade_without_its_arguments_says_how_in_one_line(arguments, said):
    """`make grade` without A= printed the grader's whole argparse usage."""
    made = make(ROOT, *arguments)
    assert made.returncode != 0 and made.stdout == "" and len(made.stderr.splitlines()) == 1, made.stderr
    assert said in made.stderr and "usage:" not in made.stderr


def test_what_the_grader_writes_at_the_course_root_stays_out_of_git():
    """`make grade` writes grades.csv (and the gradebook, autograded/, feedback/) at the root; grades.csv was not
    ignored."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("grades.csv", "gradebook.db", "gradebook.db-journal", "nbgrader.log", "autograded/s/a/x.ipynb",
                 "feedback/s/a/x.html", "submitted/s/a/x.ipynb", "downloaded/a/archive/x.zip"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, f"{path} is not ignored"


def test_a_rebuild_keeps_the_students_repository_and_takes_only_what_git_tracks(tmp_path):
    """The edition's folder, published as the students' repository, keeps its .git across builds (out of the zip);
    a stray file beside the release (a copy of a solution) is not copied, being untracked; and a notebook with
    outputs or an nbgrader solution region is refused, naming it."""
    course = tmp_path / "course"
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(".venv", "build", ".git", "__pycache__", "*.pyc",
                                                                "node_modules", "gradebook.db", "wheels"))
    git = lambda *args: subprocess.run(["git", "-C", str(course), *args], check=True, capture_output=True)  # noqa
    git("init", "-q", "-b", "main")
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty", "-m", "init")
    git("add", "-A")
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "course")
    out = tmp_path / "published" / "student-edition"
    build(course, out)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    stray = course / "assignments" / "01_threads_blocks_grids" / "my_key_copy.ipynb"
    shutil.copy(next((course / "solutions" / "01_threads_blocks_grids").glob("*.ipynb")), stray)
    archive = build(course, out)
    assert (out / ".git" / "HEAD").exists() and not (out / stray.relative_to(course)).exists()
    with zipfile.ZipFile(archive) as zipped:
        assert not any("/.git/" in name for name in zipped.namelist())
    lecture = course / "lectures" / "01_threads_blocks_grids.ipynb"
    notebook = nbformat.read(lecture, as_version=4)
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    nbformat.write(notebook, lecture)
    with pytest.raises(ValueError, match=r"lectures/01_threads_blocks_grids.ipynb holds outputs: clear them"):
        build(course, out)
    git("checkout", "--", "lectures")
    git("add", str(stray))  # tracked now: refused for what it holds
    with pytest.raises(ValueError, match=r"my_key_copy.ipynb holds nbgrader's `### BEGIN SOLUTION`"):
        build(course, out)
