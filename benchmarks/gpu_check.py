"""make gpu-check: the whole course on a real GPU, in parts that each fit one 10-minute command.

    python benchmarks/gpu_check.py --download-wheels          # here, online: make gpu-wheels
    python benchmarks/gpu_check.py --out $OUT                 # on the GPU machine: every part
    python benchmarks/gpu_check.py --part lectures --out $OUT # one part per command

Parts, in this order (``--part`` names one or more; the default runs them all):

  lectures, solutions  every notebook of lectures/ (solutions/) run top to bottom on the GPU
                       (GPUCOURSE_DEVICE=gpu, so the simulator is never used); an error, output on
                       stderr or a backend other than the GPU fails it
  <benchmark>          every GPU benchmark of benchmarks/ (each script but the helpers and the
                       CPU-only ones), full size: it records its section of RESULTS.md
                       (``--quick``: its quick mode, which records nothing)
  differential         `python -m gpucourse.grading.differential_cases`: every reference and solution
                       kernel on the GPU and on the simulator; its report becomes RESULTS.md's
                       `differential` section
  grading              `benchmarks/gpu_grading.py`: a solution and an untouched release of assignment 07
                       graded as `make grade` does, on a worker with GPU=1, kernels on the GPU; it needs
                       nbgrader and Dask, carried in its own command (``--wheels wheels/gpu-grade``), so it
                       runs only when named (``--part grading``), never by default

Each notebook runs ``--repeat`` times (3) in fresh kernels, each cell within ``--cell-timeout``
seconds (300): a cell past it is reported with the notebook, the cell's index and its first line.
``--jobs`` notebooks (a third of the CPUs, at most 6) run side by side, each in its own process: they
share the GPU, and the benchmarks, which time it, run alone after them.

Limits (the device tool's): one command under 10 minutes, so nothing new is started once ``--limit``
seconds (570) are spent, nor a benchmark that took longer than the time left when it last ran (the
`gpu_check` section's seconds), and the summary is always printed. ``--resume`` skips what RESULTS.md's
`gpu_check` section already records as passed for this same tree (notebook by notebook), so a second
and a third command finish the run. 64 MiB carried: the wheels folder (``make gpu-wheels``, about
47 MiB) plus the working tree (about 1.5 MiB).

What the GPU machine lacks comes as wheels (numpy<2.5, numba-cuda 0.30, nbclient, ipykernel,
ipywidgets, matplotlib and their dependencies, Linux x86_64, CPython 3.12), installed offline
(``pip --no-index``). Where this Python is itself a virtual environment with the GPU stack (the
device tool's machine: PyTorch, CuPy and numba live in /opt/torch/.venv), only the wheels it lacks go
into a folder put first on PYTHONPATH (``--site``); elsewhere into a virtual environment that sees the
machine's packages. ``--use-this-python`` skips both (Colab: install the course first).

Writes to ``--out``: gpu-check.log (everything every part printed), RESULTS.md (benchmarks/RESULTS.md
after the run, with its `gpu_check` section: device, date, versions, the parts, one line per notebook)
and summary.md (the table printed last). Exit status 0 when every part passed. Without a GPU it says so
in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
WHEELS = ROOT / "wheels" / "gpu-check"
PLACE = ROOT / "build" / "gpu-check-env"  # site/ (the wheels a virtual environment lacks) or venv/
LIMIT = 570  # seconds: the device tool stops a command at 600
JOBS = max(1, min(6, (os.cpu_count() or 1) // 3))  # notebooks at a time: NVVM compiles on the CPU
NOTEBOOK_AT_LEAST = 20  # seconds: a notebook is not started with less time left
NOTEBOOK_PARTS = ("lectures", "solutions")  # the parts that run notebooks, not a script
# Not GPU benchmarks: helpers, this script, and the benchmarks that need no GPU.
ON_REQUEST = {"grading"}  # parts run only when named: grading carries its own wheels, in its own command
NOT_GPU_BENCHMARKS = {"common", "gpu_check", "gpu_grading", "grading_scale", "numba_cuda_conformance",
                      "numba_cuda_conformance_plugin", "simulator_speed"}
# For the device machine: Linux x86_64, CPython 3.12, manylinux wheels.
PLATFORM = ["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "--python-version", "3.12", "--implementation", "cp",
            "--abi", "cp312"]
REQUIREMENTS = ["numpy<2.5", "nbclient>=0.10,<1", "nbformat", "ipykernel>=6.29,<7", "ipywidgets>=8,<9",
                "matplotlib>=3.8"]
WITHOUT_DEPENDENCIES = ["numba-cuda==0.30.*"]  # its numba and llvmlite (60 MB) are the machine's own
# Dependencies nothing imports when notebooks run headless: the debugger, completion, widget front ends.
LEFT_OUT = {"debugpy", "jedi", "parso", "widgetsnbextension", "jupyterlab_widgets"}
BACKEND_MARK = "GPU_CHECK_BACKEND"
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the NVIDIA driver sees


@dataclass
class Result:
    part: str
    status: str  # passed, failed, not run
    seconds: float = 0.0
    note: str = ""
    notebooks: list = field(default_factory=list)  # (path, line) of each notebook this part ran


# -- the parts -----------------------------------------------------------------------------------------------------
def gpu_benchmarks(folder: Path = BENCHMARKS) -> list[str]:
    """The benchmark scripts that need a GPU, by name: every script but the helpers and the CPU-only ones."""
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in NOT_GPU_BENCHMARKS)


def all_parts(folder: Path = BENCHMARKS) -> list[str]:
    return [*NOTEBOOK_PARTS, *gpu_benchmarks(folder), "differential", "grading"]


def select_parts(asked: list[str] | None, folder: Path = BENCHMARKS) -> list[str]:
    """The parts to run, in their order (by default all but `ON_REQUEST`); a clear error for a name that is not
    a part."""
    parts = all_parts(folder)
    if not asked or asked == ["all"]:
        return [p for p in parts if p not in ON_REQUEST]
    unknown = [p for p in asked if p not in parts]
    if unknown:
        raise SystemExit(f"gpu_check: no part named {', '.join(unknown)}; the parts are: {', '.join(parts)}")
    return [p for p in parts if p in asked]


def notebooks(part: str, match: str | None = None) -> list[Path]:
    found = sorted(ROOT.glob("lectures/*.ipynb")) if part == "lectures" else sorted(ROOT.glob("solutions/*/*.ipynb"))
    return [p for p in found if match is None or match in p.name]


def execute_notebook(path: Path, cell_timeout: float, require_gpu: bool = True) -> list[str]:
    """Run ``path`` in a fresh kernel in its folder; what went wrong (an error, a stalled cell, stderr output,
    no GPU), or []."""
    import nbformat  # noqa: PLC0415 (in the prepared environment only)
    from nbclient.exceptions import CellExecutionError  # noqa: PLC0415

    from gpucourse.course import CellStalled, run_notebook  # noqa: PLC0415

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"import gpucourse\nprint('{BACKEND_MARK}', gpucourse.BACKEND.kind)"))
    try:
        run_notebook(notebook, path.parent, cell_timeout)
    except CellStalled as stalled:
        return [f"stalled: {stalled}"]
    except CellExecutionError as exc:
        return [f"a cell failed: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"]
    except Exception as exc:  # a dead kernel
        return [f"{type(exc).__name__}: {str(exc).strip()[:300]}"]
    problems = [f"stderr: {out.get('text', '').strip()[:300]}" for cell in notebook.cells if cell.cell_type == "code"
                for out in cell.get("outputs", []) if out.get("output_type") == "stream" and out.get("name") == "stderr"]
    backend = "".join(out.get("text", "") for out in notebook.cells[-1].outputs).split(BACKEND_MARK)[-1].strip()
    if require_gpu and backend != "gpu":
        problems.append(f"ran on the {backend or 'unknown backend'}, not the GPU")
    return problems


def execute_repeatedly(path: Path, repeat: int, cell_timeout: float, deadline: float, require_gpu: bool = True) -> str:
    """``repeat`` fresh runs of ``path``; one line, e.g. "lectures/03_matmul.ipynb: ok, 3/3 runs, 17 s".

    It stops at the first failing run, and starts no run that ``deadline`` (a ``time.monotonic()``) would cut.
    """
    name, seconds, runs = path.relative_to(ROOT).as_posix(), [], 0
    for run in range(1, repeat + 1):
        if seconds and time.monotonic() + max(seconds) > deadline:
            return f"{name}: not finished, {runs}/{repeat} runs (time limit)"
        start = time.monotonic()
        problems = execute_notebook(path, cell_timeout, require_gpu)
        seconds.append(time.monotonic() - start)
        if problems:
            return f"{name}: FAILED in run {run}, {runs}/{repeat} runs: {'; '.join(problems)}"
        runs += 1
    return f"{name}: ok, {runs}/{repeat} runs, {max(seconds):.0f} s"


# -- the environment ----------------------------------------------------------------------------------------------
def no_gpu(driver_gpus: Path = DRIVER_GPUS) -> str | None:
    """Why there is no NVIDIA GPU here (nvidia-smi lists none, or without it the driver lists none), or None."""
    if shutil.which("nvidia-smi") is None:
        if driver_gpus.is_dir() and any(driver_gpus.iterdir()):
            return None
        return f"no nvidia-smi on PATH and no GPU in {driver_gpus}"
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if listed.returncode or "GPU" not in listed.stdout:
        return f"nvidia-smi lists no GPU ({(listed.stderr or listed.stdout).strip()[:200] or 'no output'})"
    return None


def pip_download(folder: Path, requirements: list[str], python: str, script: str) -> bool:
    """``pip download`` ``requirements`` with their dependencies, and `WITHOUT_DEPENDENCIES` without, for the GPU
    machine, into ``folder``; False (said on stderr, as ``script``) when pip fails."""
    folder.mkdir(parents=True, exist_ok=True)
    pip = [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", *PLATFORM, "-d", str(folder)]
    for command in ([*pip, *requirements], [*pip, "--no-deps", *WITHOUT_DEPENDENCIES]):
        if subprocess.run(command).returncode:
            print(f"{script}: pip download failed (command: {' '.join(command)})", file=sys.stderr)
            return False
    return True


def download_wheels(folder: Path = WHEELS, python: str = sys.executable) -> int:
    """``pip download`` what the GPU machine lacks into ``folder``; print its size."""
    if not pip_download(folder, REQUIREMENTS, python, "gpu_check"):
        return 1
    for wheel in folder.glob("*.whl"):
        if wheel.name.split("-")[0].lower() in LEFT_OUT:
            wheel.unlink()
    size = sum(p.stat().st_size for p in folder.glob("*.whl"))
    print(f"{len(list(folder.glob('*.whl')))} wheels in {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}: "
          f"{size / 2**20:.1f} MiB (the working tree travels beside them: the device tool carries 64 MiB)")
    return 0


def is_virtual_environment(python: str) -> bool:
    """Whether ``python`` is itself a virtual environment (its packages are then not a base's site-packages)."""
    probe = subprocess.run([python, "-c", "import sys; print(sys.prefix != sys.base_prefix)"], capture_output=True,
                           text=True)
    return probe.stdout.strip() == "True"


def installed_versions(python: str, path_first=()) -> dict[str, str]:
    """{normalised distribution name: version} of what ``python`` imports, with ``path_first`` first on its path
    (where a package is found twice, the first wins, as in an import)."""
    script = ("from importlib import metadata\nfor d in metadata.distributions():\n"
              "    print(d.metadata['Name'], d.version)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path_first, os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env).stdout.split("\n")
    found = {}
    for line in listed:
        if len(line.split()) == 2:
            found.setdefault(normalised(line.split()[0]), line.split()[1])
    return found


def normalised(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def lacking(wheels: list[Path], installed: dict[str, str]) -> list[Path]:
    """The wheels ``installed`` lacks: a course pin it does not meet (numpy<2.5), or an absent or older package."""
    from packaging.requirements import Requirement  # noqa: PLC0415
    from packaging.version import Version  # noqa: PLC0415

    pins = {normalised(r.name): r.specifier for r in map(Requirement, REQUIREMENTS + WITHOUT_DEPENDENCIES)}
    needed = []
    for wheel in wheels:
        name, version = normalised(wheel.name.split("-")[0]), wheel.name.split("-")[1]
        have = installed.get(name)
        if have is None or (name in pins and have not in pins[name]) or (name not in pins and Version(have) < Version(version)):
            needed.append(wheel)
    return needed


def prepare(wheels: Path, place: Path, log, python: str = sys.executable, route: str | None = None) -> tuple[str, list[str]]:
    """A Python with the course's packages, and what goes first on its PYTHONPATH.

    ``route`` "site" (the default where ``python`` is itself a virtual environment): the wheels ``python``
    lacks, installed offline into ``place``/site, put first on PYTHONPATH. "venv" (elsewhere): a virtual
    environment at ``place``/venv that sees the machine's packages, with every wheel installed.
    """
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise SystemExit(f"gpu_check: no wheels in {wheels}: run `make gpu-wheels` on a machine with network and "
                         "carry the folder (or pass --use-this-python where the course is installed)")
    route = route or ("site" if is_virtual_environment(python) else "venv")
    pip = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--no-deps", "--no-compile"]
    if route == "site":
        site = place / "site"  # kept on a machine that stays warm between commands: only what is still lacking
        needed = lacking(found, installed_versions(python, [str(site)]))
        log.write(f"installing {len(needed)} of {len(found)} wheels into {site}: "
                  f"{', '.join(w.name.split('-')[0] for w in needed) or 'none'}\n")
        if needed and subprocess.run([python, *pip, "--upgrade", "--target", str(site), *map(str, needed)],
                                     stdout=log, stderr=subprocess.STDOUT).returncode:
            raise SystemExit(f"gpu_check: installing the wheels of {wheels} into {site} failed (see the log)")
        return python, [str(site)]
    environment = place / "venv"
    venv_python = environment / "bin" / "python"
    if not venv_python.exists():  # the machine's pip serves it (it sees the machine's packages), else its own
        venv.EnvBuilder(system_site_packages=True, with_pip=False).create(environment)
        if subprocess.run([str(venv_python), "-m", "pip", "--version"], capture_output=True).returncode:
            if subprocess.run([str(venv_python), "-m", "ensurepip"], stdout=log, stderr=subprocess.STDOUT).returncode:
                raise SystemExit(f"gpu_check: no pip for {venv_python} (neither the machine's nor ensurepip)")
    if subprocess.run([str(venv_python), *pip, *map(str, found)], stdout=log, stderr=subprocess.STDOUT).returncode:
        raise SystemExit(f"gpu_check: installing the wheels of {wheels} failed (see the log)")
    return str(venv_python), []


def versions(python: str, path_first=()) -> str:
    """One line of the versions that ``python`` imports (with ``path_first`` first on its path)."""
    script = ("from importlib import metadata as m\nimport platform\nnames = ['numpy', 'numba', 'numba-cuda', "
              "'cupy-cuda12x', 'cupy-cuda13x', 'torch', 'nbclient', 'ipykernel', 'matplotlib']\n"
              "found = []\nfor n in names:\n    try:\n        found.append(f'{n} {m.version(n)}')\n"
              "    except m.PackageNotFoundError:\n        pass\nprint('Python', platform.python_version() + ',', ', '.join(found))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path_first, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([python, "-c", script], capture_output=True, text=True, env=env).stdout.strip()


# -- the record: RESULTS.md's gpu_check section ------------------------------------------------------------------
SECTION = "gpu_check"
TREE_FOLDERS = ("lib", "lectures", "solutions", "assignments", "benchmarks")
NOTEBOOK_LINE = re.compile(r"^((?:lectures|solutions)/\S+\.ipynb): (.*)$", re.M)
PART_ROW = re.compile(r"^\| (\S+) \| (passed|failed|not run) \| (\d+) \|", re.M)


def tree_fingerprint(root: Path = ROOT) -> str:
    """A hash of the course's files (RESULTS.md aside): --resume trusts only a record of this same tree."""
    digest = hashlib.sha256()
    for folder in TREE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.name != "RESULTS.md":
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class Record:
    """What a gpu_check section says: the tree it ran on, each part's result, each notebook's line."""

    tree: str = ""
    parts: dict = field(default_factory=dict)  # part -> Result
    notebooks: dict = field(default_factory=dict)  # "lectures/01_x.ipynb" -> "ok, 3/3 runs, 10 s"

    @classmethod
    def read(cls, text: str | None) -> "Record":
        if not text:
            return cls()
        tree = re.search(r"^- Tree: (\S+)", text, re.M)
        return cls(tree.group(1) if tree else "",
                   {m[1]: Result(m[1], m[2], float(m[3])) for m in PART_ROW.finditer(text)},
                   {m[1]: m[2].rstrip() for m in NOTEBOOK_LINE.finditer(text)})  # "  ": a Markdown line break

    def durations(self) -> dict:
        """{part: seconds} of the benchmark parts that ran to their end (on any tree): how long each will take.
        The notebook parts are left out: they stop starting notebooks at the time limit themselves."""
        return {p: r.seconds for p, r in self.parts.items() if r.status != "not run" and p not in NOTEBOOK_PARTS}

    def passed(self, tree: str) -> tuple[set, set]:
        """The parts and notebooks recorded as passed on ``tree``."""
        if self.tree != tree:
            return set(), set()
        return ({p for p, r in self.parts.items() if r.status == "passed"},
                {n for n, line in self.notebooks.items() if line.startswith("ok")})

    def render(self, device: str, versions_line: str, settings: "Settings") -> str:
        rows = ["| part | result | seconds |", "|---|---|---:|"]
        rows += [f"| {r.part} | {r.status} | {r.seconds:.0f} |" for r in self.parts.values()]
        lines = [f"{path}: {line}" for path, line in sorted(self.notebooks.items())]
        return "\n".join([f"`python benchmarks/gpu_check.py` on {device}", "",
                          f"- Date: {time.strftime('%Y-%m-%d')}", f"- Tree: {self.tree}", f"- Versions: {versions_line}",
                          "", *rows, "",
                          f"Notebooks ({settings.repeat} fresh runs each, at most {settings.cell_timeout:.0f} s per cell):",
                          "", *[f"{line}  " for line in lines]])


def device_name() -> str:
    """The GPU, its driver and CUDA version, from nvidia-smi."""
    try:
        query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=60).stdout.strip().splitlines()
        cuda = re.search(r"CUDA Version: (\S+)", subprocess.run(["nvidia-smi"], capture_output=True, text=True,
                                                                 timeout=60).stdout)
    except (OSError, subprocess.TimeoutExpired):
        return "an NVIDIA GPU (nvidia-smi did not answer)"
    name, _, driver = (query[0] if query else "an NVIDIA GPU, ?").partition(", ")
    return f"{name} (driver {driver or '?'}, CUDA {cuda.group(1) if cuda else '?'})"


# -- running -----------------------------------------------------------------------------------------------------
@dataclass
class Settings:
    match: str | None = None  # only notebooks whose file name contains it
    quick: bool = False
    repeat: int = 3
    cell_timeout: float = 300
    path_first: list = field(default_factory=list)  # folders put first on PYTHONPATH (the installed wheels)
    skip_notebooks: set = field(default_factory=set)  # recorded as ok on this tree (--resume)
    jobs: int = 1  # notebooks run at a time
    expected: dict = field(default_factory=dict)  # part -> seconds it took when it last ran to its end


def run_part(part: str, python: str, seconds_left: float, log, out: Path, settings: Settings) -> Result:
    env = {**os.environ, "GPUCOURSE_DEVICE": "gpu", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [*settings.path_first, str(ROOT / "lib"),
                                                       os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    if part in NOTEBOOK_PARTS:
        paths = [p for p in notebooks(part, settings.match) if p.relative_to(ROOT).as_posix() not in settings.skip_notebooks]
        command = [python, __file__, "--repeat", str(settings.repeat), "--cell-timeout", str(settings.cell_timeout)]
        note = f"{len(paths)} notebooks, {settings.repeat} runs each, {min(settings.jobs, len(paths) or 1)} at a time"
        log.write(f"\n===== {part}: {' '.join(command)} --limit SECONDS --execute NOTEBOOK ({note})\n")

        def execute(path: Path) -> tuple[int, str]:  # in its own process and kernels, within what is left
            left = seconds_left - (time.monotonic() - start)
            unfinished = f"{path.relative_to(ROOT).as_posix()}: not finished, 0/{settings.repeat} runs (time limit)\n"
            if left < NOTEBOOK_AT_LEAST:
                return 1, unfinished
            code, output = run_command([*command, "--limit", str(left - 5), "--execute", str(path)], env, left)
            return (1, output + unfinished) if code is None else (code, output)

        with ThreadPoolExecutor(max(1, settings.jobs)) as pool:
            finished = list(pool.map(execute, paths))
        output = "".join(text for _, text in finished)
        returncode = next((code for code, _ in finished if code != 0), 0)
    else:
        if part == "differential":
            command = [python, "-m", "gpucourse.grading.differential_cases", "--markdown", str(out / "differential.md")]
            note = ""
        elif part == "grading":
            command, note = [python, str(BENCHMARKS / "gpu_grading.py")], ""
        else:
            command = [python, str(BENCHMARKS / f"{part}.py"), *(["--quick"] if settings.quick else [])]
            note = "quick: nothing recorded" if settings.quick else ""
        log.write(f"\n===== {part}: {' '.join(command)}\n")
        returncode, output = run_command(command, env, seconds_left)
    log.write(output)
    seconds = time.monotonic() - start
    if returncode is None:
        return Result(part, "failed", seconds, f"stopped at the time limit: run `--part {part}` alone")
    lines = [(m[1], m[2]) for m in NOTEBOOK_LINE.finditer(output)]
    if returncode:
        unfinished = any("not finished" in line for _, line in lines)
        return Result(part, "not run" if unfinished and not any("FAILED" in line for _, line in lines) else "failed",
                      seconds, "time limit: --resume goes on" if unfinished else f"exit status {returncode}: "
                      "see gpu-check.log", lines)
    if "needs a CUDA GPU" in output:
        return Result(part, "failed", seconds, "found no usable GPU: see gpu-check.log")
    if part == "differential":
        recorded = subprocess.run([python, __file__, "--record", "differential", str(out / "differential.md")],
                                  env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        if recorded.returncode:
            return Result(part, "failed", seconds, "could not record its section of RESULTS.md")
    return Result(part, "passed", seconds, note, lines)


def run_command(command: list[str], env: dict, seconds: float) -> tuple[int | None, str]:
    """(exit status, or None when it ran past ``seconds``; what it printed)."""
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired as stopped:
        output = stopped.stdout or ""
        return None, output.decode(errors="replace") if isinstance(output, bytes) else output
    return done.returncode, done.stdout


def summary(results: list[Result]) -> str:
    """The table printed last: one row per part."""
    rows = ["| part | result | seconds | note |", "|---|---|---:|---|"]
    rows += [f"| {r.part} | {r.status} | {r.seconds:.0f} | {r.note} |" for r in results]
    failed = sum(r.status != "passed" for r in results)
    return "\n".join(rows + ["", f"gpu-check: {len(results) - failed} of {len(results)} parts passed."])


def check(parts: list[str], python: str, out: Path, limit: float, settings: Settings, runner=run_part,
          record_as: tuple[Record, str, str] | None = None, results_file: Path = BENCHMARKS / "RESULTS.md") -> list[Result]:
    """Run ``parts`` in order within ``limit`` seconds, logging to ``out``/gpu-check.log; write RESULTS.md and
    summary.md there. ``record_as`` (the record so far, the device, the versions) adds the run to RESULTS.md's
    gpu_check section."""
    out.mkdir(parents=True, exist_ok=True)
    start, results = time.monotonic(), []
    with open(out / "gpu-check.log", "a") as log:
        log.write(f"gpu-check {time.strftime('%Y-%m-%d %H:%M:%S')}: {versions(python, settings.path_first)}\n")
        for part in parts:
            left = limit - (time.monotonic() - start)
            expected = settings.expected.get(part, 0)
            if left < 10 or (results and expected > left):  # a part that would be cut is not started
                why = f"expected {expected:.0f} s, {left:.0f} s left" if expected > left else "time limit"
                results.append(Result(part, "not run", 0, f"{why}: run `--part {part}` in another command"))
                continue
            results.append(runner(part, python, left, log, out, settings))
            print(f"gpu-check: {part} {results[-1].status} ({results[-1].seconds:.0f} s)", flush=True)
            log.flush()
    if record_as is not None:
        record_run(results, *record_as, settings, results_file)
    if results_file.exists():
        shutil.copy(results_file, out / "RESULTS.md")
    table = summary(results)
    (out / "summary.md").write_text(table + "\n")
    return results


def record_run(results: list[Result], record: Record, device: str, versions_line: str, settings: Settings,
               results_file: Path) -> None:
    """Add this command's results to the record (a part that passed before and did not run now stays) and
    write it as RESULTS.md's gpu_check section."""
    from gpucourse.course import results as recorded_results  # noqa: PLC0415

    for result in results:
        before = record.parts.get(result.part)
        for path, line in result.notebooks:
            record.notebooks[path] = line
        if result.part in NOTEBOOK_PARTS and result.status != "failed":
            ours = [line for path, line in record.notebooks.items() if path.startswith(result.part + "/")]
            expected = len(notebooks(result.part, settings.match))
            done = sum(line.startswith("ok") for line in ours)
            result = Result(result.part, "passed" if done == expected else "not run",
                            result.seconds + (before.seconds if before else 0), f"{done} of {expected} notebooks")
        if result.status != "not run" or before is None:
            record.parts[result.part] = result
    order = all_parts()
    record.parts = dict(sorted(record.parts.items(), key=lambda item: order.index(item[0]) if item[0] in order else 99))
    recorded_results.record(SECTION, record.render(device, versions_line, settings), results_file)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="+", metavar="PART",
                        help=f"run only these parts (default all): {', '.join(all_parts())}")
    parser.add_argument("--resume", action="store_true",
                        help="skip the parts and notebooks RESULTS.md's gpu_check section records as passed on this tree")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check",
                        help="where the log, RESULTS.md and summary.md go (default build/gpu-check; $OUT on the device)")
    parser.add_argument("--limit", type=float, default=LIMIT, help=f"seconds for the whole command (default {LIMIT})")
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs of each notebook (default 3)")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds a notebook cell may run (default 300)")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"notebooks run at a time, each in its own process and kernels (default here {JOBS}: "
                             "a third of the CPUs, at most 6)")
    parser.add_argument("--notebooks", metavar="TEXT", help="only the notebooks whose file name contains TEXT")
    parser.add_argument("--quick", action="store_true", help="the benchmarks' quick modes (a smoke run: nothing recorded)")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="the wheels folder (default wheels/gpu-check)")
    parser.add_argument("--site", type=Path, default=PLACE,
                        help="where the wheels are installed (default build/gpu-check-env: site/ or venv/ in it)")
    parser.add_argument("--results", type=Path, default=BENCHMARKS / "RESULTS.md",
                        help="the results file whose gpu_check section records the run (default benchmarks/RESULTS.md)")
    parser.add_argument("--use-this-python", action="store_true",
                        help="no wheels: this Python has the course's packages (Colab)")
    parser.add_argument("--download-wheels", action="store_true",
                        help="download the wheels the GPU machine lacks into --wheels (online; make gpu-wheels)")
    parser.add_argument("--execute", nargs="+", type=Path, help=argparse.SUPPRESS)  # notebooks, in the environment
    parser.add_argument("--record", nargs=2, metavar=("SECTION", "FILE"), help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)

    if arguments.download_wheels:
        return download_wheels(arguments.wheels)
    if arguments.execute:
        deadline = time.monotonic() + arguments.limit
        lines = [execute_repeatedly(path, arguments.repeat, arguments.cell_timeout, deadline)
                 for path in arguments.execute]
        for line in lines:
            print(line, flush=True)
        return 0 if all(": ok," in line for line in lines) else 1
    if arguments.record:
        from gpucourse.course import record  # noqa: PLC0415 (in the prepared environment only)

        record(arguments.record[0], Path(arguments.record[1]).read_text())
        return 0

    parts = select_parts(arguments.part)
    problem = no_gpu()
    if problem:
        print(f"gpu-check needs an NVIDIA GPU and there is none here ({problem}): run it on the GPU machine or a "
              "Colab GPU runtime (benchmarks/README.md).")
        return 2
    arguments.out.mkdir(parents=True, exist_ok=True)
    settings = Settings(arguments.notebooks, arguments.quick, arguments.repeat, arguments.cell_timeout,
                        jobs=arguments.jobs)
    python = sys.executable
    if not arguments.use_this_python:
        with open(arguments.out / "gpu-check.log", "a") as log:
            python, settings.path_first = prepare(arguments.wheels, arguments.site, log)
    sys.path[:0] = [*settings.path_first, str(ROOT / "lib")]
    from gpucourse.course import recorded  # noqa: PLC0415 (after the course is importable)

    tree = tree_fingerprint()
    record = Record.read(recorded(SECTION, arguments.results))
    settings.expected = record.durations()
    if record.tree != tree:
        record = Record(tree)
    if arguments.resume:
        done_parts, settings.skip_notebooks = record.passed(tree)
        parts = [p for p in parts if p not in done_parts]
    results = check(parts, python, arguments.out, arguments.limit, settings,
                    record_as=(record, device_name(), versions(python, settings.path_first)),
                    results_file=arguments.results)
    print((arguments.out / "summary.md").read_text(), end="")
    return 0 if all(r.status == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
