"""make gpu-check: the whole course on a real GPU, in one or two commands of the device tool's 10 minutes.

    python benchmarks/gpu_check.py --download-wheels          # here, online: make gpu-wheels
    python benchmarks/gpu_check.py --out $OUT                 # on the GPU machine: every part
    python benchmarks/gpu_check.py --resume --limit 240 --out $OUT  # the next command: what is left

Parts (``--part`` names one or more; the default runs them all):

  lectures, solutions  every notebook of lectures/ (solutions/) run top to bottom on the GPU
                       (GPUCOURSE_DEVICE=gpu, so the simulator is never used); an error, output on
                       stderr or a backend other than the GPU fails it
  differential         `python -m gpucourse.grading.differential_cases`: every reference and solution
                       kernel on the GPU and on the simulator; its report becomes RESULTS.md's
                       `differential` section
  simulator_fuzz       random small kernels on the GPU and on the simulator (2,000); the `fuzz` section
  grading              `benchmarks/gpu_grading.py`: a solution and an untouched release of assignment 07
                       graded as `make grade` does, on a worker with GPU=1, kernels on the GPU
  <benchmark>          every other GPU benchmark of benchmarks/ (each script but the helpers and the
                       CPU-only ones): it records its section of RESULTS.md (``--quick``: its quick mode,
                       which records nothing)

The device time is short (15 minutes a session, the machine's start included), so the parts that check
results share the GPU and run side by side first: the notebooks, ``--jobs`` at a time (a third of the
CPUs, at most 6), each in its own process, beside the differential test, the fuzzing and the grading, and
``--jobs-alone`` at a time (two thirds of the CPUs, at most 12) once those three are done. The
benchmarks, which time the GPU, run after them one at a time (those of the course's goals first, the
compiler baselines last), each with its share of the time left (``--seconds``, shared in proportion to how
long each took when it last ran): a benchmark measures the goals' rows first and names in its section the
rows it had no time for (the part is then `partial`).

Each notebook runs ``--repeat`` times (3), each run in its own process and fresh kernel, the runs of all
notebooks side by side (as many at a time as above, the notebooks that took longest last time first), each cell within
``--cell-timeout`` seconds (300): a cell past it is reported with the notebook, the cell's index and its first line.

Limits (the device tool's): one command under 10 minutes, so nothing new is started once ``--limit``
seconds (570, counted from the start: installing the wheels included) are spent, and the summary is always
printed; a part stopped at the limit may start again in the next command. ``--resume`` skips what RESULTS.md's
`gpu_check` section already records as passed for this same tree (notebook by notebook; a partial
benchmark runs again), so a second command finishes the run; on a machine still warm from the last command,
the RESULTS.md that command left there (``KEPT``) stands in for one not copied back. 64 MiB carried: the wheels folder
(``make gpu-wheels``, about 45 MiB) plus the working tree (about 3 MiB).

What the GPU machine lacks comes as wheels (numpy<2.5, numba-cuda 0.30, nbclient, ipykernel,
ipywidgets, nbgrader 0.9, Dask and their dependencies, Linux x86_64, CPython 3.12, minus what the device
tool's image already has and what headless runs never import) and Debian's bubblewrap package, installed
offline (``pip --no-index``). Where this Python is itself a virtual environment with the GPU stack (the
device tool's machine: PyTorch, CuPy and numba live in /opt/torch/.venv), only the wheels it lacks go
into a folder put first on PYTHONPATH (``--site``); elsewhere into a virtual environment that sees the
machine's packages. ``--use-this-python`` skips both (Colab: install the course first).

Writes to ``--out``: gpu-check.log (everything every part printed), RESULTS.md (benchmarks/RESULTS.md,
copied after every part, so that a command stopped later keeps what ran; at the end with its `gpu_check`
section: device, date, versions, the parts, one line per notebook)
and summary.md (the table printed last). Exit status 0 when every part passed (or was partial). Without
a GPU it says so in one line and exits with status 2.
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
import threading
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def normalised(name: str) -> str:
    """A distribution's name as pip compares them (``jupyter_server`` and ``Jupyter-Server`` are one)."""
    return name.lower().replace("_", "-").replace(".", "-")


BENCHMARKS = ROOT / "benchmarks"
WHEELS = ROOT / "wheels" / "gpu-check"
PLACE = ROOT / "build" / "gpu-check-env"  # site/ (the wheels a virtual environment lacks) or venv/
KEPT = PLACE / "RESULTS.md"  # the last command's RESULTS.md, on the machine (a warm one keeps it): `resume_from_kept`
LIMIT = 570  # seconds: the device tool stops a command at 600
CPUS = os.cpu_count() or 1
JOBS = max(1, min(6, CPUS // 3))  # notebooks at a time: NVVM compiles on the CPU
JOBS_ALONE = max(JOBS, min(12, CPUS * 2 // 3))  # once the parts beside them are done (on the H200 they took 145-173 s
# of the notebooks' 350)
FUZZ_WORKERS = max(1, min(8, CPUS - JOBS - 4))  # the fuzzing's processes beside them (the differential test, grading)
NOTEBOOK_AT_LEAST = 20  # seconds: a notebook is not started with less time left
BENCHMARK_AT_LEAST = 30  # seconds: nor a benchmark
AGAIN_FROM = 1.5  # a partial benchmark runs again in the time left over when it gets 1.5 times its first run's
STARTUP = 15  # seconds of a benchmark's share kept for its imports and device set-up (outside its --seconds)
NOTEBOOK_PARTS = ("lectures", "solutions")  # the parts that run notebooks, not a script
SIDE_BY_SIDE = ("differential", "simulator_fuzz", "grading")  # check results, time nothing: beside the notebooks
# The benchmarks of the fast-kernels goals first, then the counters of their kernels; the compiler baselines (a cold
# Triton autotune and torch.compile, minutes) last, so that they cannot eat the others' shares.
TIMED_FIRST = ("matmul", "conv", "fusion", "bandwidth", "precision", "tuning", "counters", "compilers")
PARTIAL_MARK = "Not measured within this run's time budget"  # what a benchmark's section says of rows left out
KEEPS_ROWS = ("tuning",)  # benchmarks whose section keeps what an earlier run recorded: any share adds rows to it
RECORDED_MARK = "\nwritten to "  # what a benchmark prints once its section is in RESULTS.md (common.finish)
# Not GPU benchmarks: helpers, this script, and the benchmarks that need no GPU.
NOT_GPU_BENCHMARKS = {"common", "compiled_code", "cost_model", "fuzz_narrowing", "gpu_check", "gpu_grading",
                      "grading_scale", "numba_cuda_conformance", "numba_cuda_conformance_plugin", "simulator_speed"}
# For the device machine: Linux x86_64, CPython 3.12, manylinux wheels.
PLATFORM = ["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "--python-version", "3.12", "--implementation", "cp",
            "--abi", "cp312"]
REQUIREMENTS = ["numpy<2.5", "nbclient>=0.10,<1", "nbformat", "ipykernel>=6.29,<7", "ipywidgets>=8,<9",
                "matplotlib>=3.8", "nbgrader==0.9.*", "dask", "distributed"]
WITHOUT_DEPENDENCIES = ["numba-cuda==0.30.*"]  # its numba and llvmlite (60 MB) are the machine's own
# The device tool's image (KINDS.md, "Python packages already there", 2026-11-17): not carried.
DEVICE_HAS = frozenset(normalised(n) for n in """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson
ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split())
# Carried although the machine has them: its numpy 2.5 breaks numba-cuda 0.30; numba-cuda at the course's version.
CARRIED_ANYWAY = frozenset({"numpy", "numba-cuda"})
# Dependencies that headless notebooks and grading never import (Jupyter's front ends and servers, the debugger,
# the widgets' front ends); proven by grading and running the lectures with them absent (benchmarks/README.md).
HEADLESS_UNUSED = {
    **{n: "JupyterLab and Notebook's front ends (nbgrader's formgrader UI)" for n in (
        "jupyterlab", "jupyterlab-server", "jupyter-lsp", "notebook", "notebook-shim", "babel", "json5",
        "async-lru", "jupyter-builder")},
    **{n: "the widgets' front ends (ipywidgets itself is carried: lectures build widgets)" for n in (
        "widgetsnbextension", "jupyterlab-widgets")},
    **{n: "the debugger and completion of an interactive kernel" for n in ("debugpy", "jedi", "parso")},
    **{n: "jsonschema's optional IRI checker: its import builds a grammar for about 1.5 s in each process" for n in (
        "rfc3987-syntax", "lark")},
    **{n: "Jupyter server's terminals and password hashing" for n in (
        "terminado", "jupyter-server-terminals", "argon2-cffi", "argon2-cffi-bindings", "cffi", "pycparser",
        "send2trash", "websocket-client")},
}
BACKEND_MARK = "GPU_CHECK_BACKEND"
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the NVIDIA driver sees


@dataclass
class Result:
    part: str
    status: str  # passed, failed, not run
    seconds: float = 0.0
    note: str = ""
    notebooks: list = field(default_factory=list)  # (path, line) of each notebook this part ran
    slowest: list = field(default_factory=list)  # (seconds, notebook, cell index, first line): its slowest cells


# -- the parts -----------------------------------------------------------------------------------------------------
def gpu_benchmarks(folder: Path = BENCHMARKS) -> list[str]:
    """The benchmark scripts that need a GPU, by name: every script but the helpers and the CPU-only ones."""
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in NOT_GPU_BENCHMARKS)


def all_parts(folder: Path = BENCHMARKS) -> list[str]:
    """Every part in the order they run: the notebooks and the other parts that check results side by side, then
    the benchmarks that time the GPU, those of the course's goals first (`TIMED_FIRST`), the others after them."""
    timed = [name for name in gpu_benchmarks(folder) if name not in SIDE_BY_SIDE]
    timed.sort(key=lambda name: TIMED_FIRST.index(name) if name in TIMED_FIRST else len(TIMED_FIRST))
    return [*NOTEBOOK_PARTS, *SIDE_BY_SIDE, *timed]


def is_timed(part: str) -> bool:
    """Whether ``part`` times the GPU (a benchmark): it then runs alone, after the parts that share the GPU."""
    return part not in NOTEBOOK_PARTS and part not in SIDE_BY_SIDE


def select_parts(asked: list[str] | None, folder: Path = BENCHMARKS) -> list[str]:
    """The parts to run, in their order (by default all); a clear error for a name that is not a part."""
    parts = all_parts(folder)
    if not asked or asked == ["all"]:
        return parts
    unknown = [p for p in asked if p not in parts]
    if unknown:
        raise SystemExit(f"gpu_check: no part named {', '.join(unknown)}; the parts are: {', '.join(parts)}")
    return [p for p in parts if p in asked]


def notebooks(part: str, match: str | None = None) -> list[Path]:
    found = sorted(ROOT.glob("lectures/*.ipynb")) if part == "lectures" else sorted(ROOT.glob("solutions/*/*.ipynb"))
    return [p for p in found if match is None or match in p.name]


def execute_notebook(path: Path, cell_timeout: float, require_gpu: bool = True, timed: list | None = None) -> list[str]:
    """Run ``path`` in a fresh kernel in its folder; what went wrong (an error, a stalled cell, stderr output,
    no GPU), or []. ``timed``, a list, gets each code cell's `CellTime` (nbclient's timestamps)."""
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
    if timed is not None:
        timed += cell_times(notebook.cells[:-1])
    problems = [f"stderr: {out.get('text', '').strip()[:300]}" for cell in notebook.cells if cell.cell_type == "code"
                for out in cell.get("outputs", []) if out.get("output_type") == "stream" and out.get("name") == "stderr"]
    backend = "".join(out.get("text", "") for out in notebook.cells[-1].outputs).split(BACKEND_MARK)[-1].strip()
    if require_gpu and backend != "gpu":
        problems.append(f"ran on the {backend or 'unknown backend'}, not the GPU")
    return problems


@dataclass(frozen=True)
class CellTime:
    seconds: float
    index: int
    first_line: str


SLOWEST = 3  # cells per notebook named in the log: where a notebook's time on the GPU goes
SLOWEST_LINE = re.compile(r"^slowest cells of ((?:lectures|solutions)/\S+\.ipynb): (.*)$", re.M)
SLOWEST_CELL = re.compile(r"cell (\d+) \(([\d.]+) s\): `([^`]*)`")


def cell_times(cells) -> list[CellTime]:
    """Each executed code cell's time, from the timestamps nbclient records in its metadata."""
    from datetime import datetime  # noqa: PLC0415

    times = []
    for index, cell in enumerate(cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        began, ended = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        if cell.cell_type == "code" and began and ended:
            seconds = (datetime.fromisoformat(ended.replace("Z", "+00:00"))
                       - datetime.fromisoformat(began.replace("Z", "+00:00"))).total_seconds()
            first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
            times.append(CellTime(seconds, index, first[:60].replace("`", "'")))
    return times


def slowest_line(name: str, times: list[CellTime]) -> str:
    """"slowest cells of NOTEBOOK: cell 47 (40.1 s): `def bert_layer(tokens):`, ..." (each cell's longest run)."""
    longest = {}
    for t in times:
        if t.index not in longest or t.seconds > longest[t.index].seconds:
            longest[t.index] = t
    top = sorted(longest.values(), key=lambda t: -t.seconds)[:SLOWEST]
    return f"slowest cells of {name}: " + ", ".join(f"cell {t.index} ({t.seconds:.1f} s): `{t.first_line}`" for t in top)


def execute_repeatedly(path: Path, repeat: int, cell_timeout: float, deadline: float, require_gpu: bool = True,
                       timed: list | None = None) -> str:
    """``repeat`` fresh runs of ``path``; one line, e.g. "lectures/03_matmul.ipynb: ok, 3/3 runs, 17 s". ``timed``,
    a list, gets the `CellTime` of every cell of every run that passed.

    It stops at the first failing run, and starts no run that ``deadline`` (a ``time.monotonic()``) would cut.
    """
    name, seconds, runs = path.relative_to(ROOT).as_posix(), [], 0
    for run in range(1, repeat + 1):
        if seconds and time.monotonic() + max(seconds) > deadline:
            return f"{name}: not finished, {runs}/{repeat} runs (time limit)"
        start = time.monotonic()
        problems = execute_notebook(path, cell_timeout, require_gpu, timed)
        seconds.append(time.monotonic() - start)
        if problems:
            return f"{name}: FAILED in run {run}, {runs}/{repeat} runs: {'; '.join(problems)}"
        runs += 1
    return f"{name}: ok, {runs}/{repeat} runs, {max(seconds):.0f} s"


def combined_runs(path: Path, outputs: list[str]) -> str:
    """One notebook's line from its runs' outputs (each ended by a one-run line, e.g. "...: ok, 1/1 runs, 9 s"):
    "lectures/03_matmul.ipynb: ok, 3/3 runs, 17 s" (the longest run's time), else its first failure or "not
    finished", with the runs that passed."""
    name = path.relative_to(ROOT).as_posix()
    lines = [([m[2] for m in NOTEBOOK_LINE.finditer(output) if m[1] == name] or ["not finished, 0/1 runs"])[-1]
             for output in outputs]
    passed = [line for line in lines if line.startswith("ok")]
    failed = [(k, line) for k, line in enumerate(lines, start=1) if line.startswith("FAILED")]
    if failed:
        k, line = failed[0]
        return f"{name}: FAILED in run {k}, {len(passed)}/{len(lines)} runs: {line.split(' runs: ', 1)[-1]}"
    if len(passed) < len(lines):
        return f"{name}: not finished, {len(passed)}/{len(lines)} runs (time limit)"
    seconds = max(int(re.search(r"(\d+) s$", line)[1]) for line in passed)
    return f"{name}: ok, {len(lines)}/{len(lines)} runs, {seconds} s"


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


def selection(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Of the distributions ``names`` (a download's), those to carry, and why each other one is left out."""
    carried, left_out = [], {}
    for name in names:
        key = normalised(name)
        if key in HEADLESS_UNUSED:
            left_out[name] = f"never imported headless: {HEADLESS_UNUSED[key]}"
        elif key in DEVICE_HAS and key not in CARRIED_ANYWAY:
            left_out[name] = "the GPU machine has it"
        else:
            carried.append(name)
    return carried, left_out


def download_wheels(folder: Path = WHEELS, python: str = sys.executable) -> int:
    """``pip download`` what the GPU machine lacks, and bubblewrap's .deb (the grading's sandbox), into ``folder``;
    print its size."""
    if not pip_download(folder, REQUIREMENTS, python, "gpu_check"):
        return 1
    wheels = {wheel.name.split("-")[0]: wheel for wheel in folder.glob("*.whl")}
    carried, left_out = selection(sorted(wheels))
    for name in left_out:
        wheels[name].unlink()
    if not list(folder.glob("bubblewrap_*.deb")):
        if shutil.which("apt-get") is None or subprocess.run(["apt-get", "download", "bubblewrap"], cwd=folder).returncode:
            print("gpu_check: could not `apt-get download bubblewrap` (a Debian or Ubuntu machine has it): the GPU "
                  "machine grades unsandboxed if it has no bwrap", file=sys.stderr)
    size = sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".whl", ".deb"))
    shown = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    print(f"{len(carried)} wheels in {shown}: {size / 2**20:.1f} MiB with bubblewrap's .deb; left out "
          f"{len(left_out)}: {', '.join(sorted(left_out)) or 'none'} (the working tree travels beside them: the "
          "device tool carries 64 MiB)")
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


MISSING = re.compile(r"^(\S+) \S+ requires (\S+), which is not installed", re.M)
CONFLICT = re.compile(r"^(\S+) \S+ has requirement (.+), but you have", re.M)


def unmet_requirements(python: str, path_first: list[str], wheels: Path) -> list[str]:
    """What ``pip check`` finds missing or in conflict for the carried wheels' packages, less what is left out on
    purpose (`HEADLESS_UNUSED`): a set that no longer fits the machine's image, said before any part runs."""
    carried = {normalised(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path_first, os.environ.get("PYTHONPATH", "")])}
    found = subprocess.run([python, "-m", "pip", "check", "--disable-pip-version-check"], capture_output=True,
                           text=True, env=env).stdout
    missing = [f"{m[1]} needs {m[2]}" for m in MISSING.finditer(found)
               if normalised(m[1]) in carried and normalised(m[2]) not in HEADLESS_UNUSED]
    return missing + [f"{m[1]} needs {m[2]}" for m in CONFLICT.finditer(found) if normalised(m[1]) in carried]


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
PART_ROW = re.compile(r"^\| (\S+) \| (passed|partial|failed|not run) \| (\d+) \|", re.M)


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
        """{part: seconds} of the parts that ran to their end (on any tree): how long each will take, or what share
        a benchmark had. A part that failed is left out (stopped at the time limit, its seconds are the limit's,
        and it would never be started again), and so are the notebook parts: they stop starting notebooks at the
        time limit themselves."""
        return {p: r.seconds for p, r in self.parts.items() if r.status in ("passed", "partial")
                and p not in NOTEBOOK_PARTS}

    def notebook_seconds(self) -> dict:
        """{notebook: seconds of its longest run} as recorded (on any tree): the longest notebooks start first."""
        return {path: int(m[1]) for path, line in self.notebooks.items() if (m := re.search(r"runs, (\d+) s$", line))}

    def partial(self, tree: str) -> dict:
        """{benchmark: seconds} of the benchmarks recorded as partial on ``tree``."""
        return {p: r.seconds for p, r in self.parts.items() if r.status == "partial"} if self.tree == tree else {}

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
    jobs: int = 1  # notebook runs at a time, over both notebook parts, beside the other parts that share the GPU
    jobs_alone: int = 0  # and once those are done (at least ``jobs``)
    expected: dict = field(default_factory=dict)  # part -> seconds it took when it last ran to its end
    partial: dict = field(default_factory=dict)  # benchmark -> seconds of its partial run on this tree (--resume)
    wheels: Path = WHEELS  # the carried wheels and bubblewrap's .deb (the grading's sandbox)
    slots: "Slots | None" = None  # the notebooks' turns, shared by both notebook parts
    notebook_seconds: dict = field(default_factory=dict)  # notebook -> seconds of a run, as last recorded


def run_part(part: str, python: str, seconds_left: float, log, out: Path, settings: Settings,
             share: float | None = None) -> Result:
    """Run one part within ``seconds_left``; a benchmark is given ``share`` seconds for its rows (``--seconds``)."""
    env = {**os.environ, "GPUCOURSE_DEVICE": "gpu", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [*settings.path_first, str(ROOT / "lib"),
                                                       os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    quick = ["--quick"] if settings.quick else []
    if part in NOTEBOOK_PARTS:
        paths = [p for p in notebooks(part, settings.match) if p.relative_to(ROOT).as_posix() not in settings.skip_notebooks]
        command = [python, __file__, "--repeat", "1", "--cell-timeout", str(settings.cell_timeout)]
        slots = settings.slots or Slots(settings.jobs)
        count = len(paths) * settings.repeat or 1
        at_once, wide = min(slots.capacity, count), min(max(slots.capacity, settings.jobs_alone), count)
        note = f"{len(paths)} notebooks, {settings.repeat} runs each, {at_once} at a time"
        if wide > at_once:
            note += f" ({wide} once the parts beside them are done)"
        log.write(f"\n===== {part}: {' '.join(command)} --limit SECONDS --execute NOTEBOOK ({note}; each run in "
                  "its own process, the longest notebooks first)\n")
        # every run of every notebook is a task: a long notebook's runs go side by side, not one after another
        runs = sorted(((path, k) for k in range(settings.repeat) for path in paths),
                      key=lambda run: -settings.notebook_seconds.get(run[0].relative_to(ROOT).as_posix(), 0))

        def execute(run: tuple[Path, int]) -> tuple[int, str]:  # in its own process and kernel, within what is left
            path, _ = run
            name = path.relative_to(ROOT).as_posix()
            unfinished = f"{name}: not finished, 0/1 runs (time limit)\n"
            with slots:
                left = seconds_left - (time.monotonic() - start)
                if left < max(NOTEBOOK_AT_LEAST, settings.notebook_seconds.get(name, 0)):  # it would be cut
                    return 1, unfinished
                code, output = run_command([*command, "--limit", str(left - 5), "--execute", str(path)], env, left)
            if code is None:
                return 1, output + unfinished
            if code and not any(m[1] == name for m in NOTEBOOK_LINE.finditer(output)):  # died before its line
                return code, output + f"{name}: FAILED in run 1, 0/1 runs: its process exited with status {code}\n"
            return code, output

        with ThreadPoolExecutor(max(1, min(wide, len(runs)))) as pool:  # a queue: the longest first
            finished = dict(zip(runs, pool.map(execute, runs)))
        output = "".join(f"run {k + 1} of {path.relative_to(ROOT).as_posix()}:\n"  # not a notebook's line
                         + NOTEBOOK_LINE.sub(r"  \1: \2", text) for (path, k), (_, text) in finished.items())
        output += "".join(combined_runs(path, [finished[path, k][1] for k in range(settings.repeat)]) + "\n"
                          for path in paths)
        returncode = next((code for code, _ in finished.values() if code != 0), 0)
        slowest = slowest_cells("".join(text for _, text in finished.values()))
    else:
        note, slowest = ("quick: nothing recorded" if settings.quick else ""), []
        if part == "differential":
            command = [python, "-m", "gpucourse.grading.differential_cases", "--markdown", str(out / "differential.md")]
        elif part == "grading":
            command = [python, str(BENCHMARKS / "gpu_grading.py"), "--wheels", str(settings.wheels)]
        elif part == "simulator_fuzz":
            command = [python, str(BENCHMARKS / "simulator_fuzz.py"), "--workers", str(FUZZ_WORKERS),
                       "--log", str(out / "fuzz-disagreements.md"), *quick]
        else:
            budget = ["--seconds", f"{max(1.0, share - STARTUP):.0f}"] if share is not None else []
            command = [python, str(BENCHMARKS / f"{part}.py"), *quick, *budget]
        header = f"\n===== {part}: {' '.join(command)}\n"
        returncode, output = run_command(command, env, seconds_left)
        output = header + output  # one write: the parts beside it write to the same log
    log.write(output)
    seconds = time.monotonic() - start
    if returncode is None:
        if is_timed(part) and RECORDED_MARK in output:  # its section is written; only its exit was cut
            # its seconds are the limit's, not its own: recorded as the share it had (the next run's weight)
            return Result(part, "partial", min(seconds, share or seconds), "recorded its section, then stopped at "
                          "the time limit before it exited: --resume measures it again when more time is left")
        return Result(part, "failed", seconds, f"stopped at the time limit: run `--part {part}` alone")
    lines = [(m[1], m[2]) for m in NOTEBOOK_LINE.finditer(output)]
    if returncode:
        unfinished = any("not finished" in line for _, line in lines)
        return Result(part, "not run" if unfinished and not any("FAILED" in line for _, line in lines) else "failed",
                      seconds, "time limit: --resume goes on" if unfinished else f"exit status {returncode}: "
                      "see gpu-check.log", lines, slowest)
    if "needs a CUDA GPU" in output:
        return Result(part, "failed", seconds, "found no usable GPU: see gpu-check.log")
    if part == "differential":
        recorded = subprocess.run([python, __file__, "--record", "differential", str(out / "differential.md")],
                                  env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        if recorded.returncode:
            return Result(part, "failed", seconds, "could not record its section of RESULTS.md")
    if PARTIAL_MARK in output:
        return Result(part, "partial", seconds, f"rows left out for time ({share or 0:.0f} s): its section names them; "
                      "--resume measures it again when more time is left", lines)
    return Result(part, "passed", seconds, note, lines, slowest)


class Slots:
    """The notebooks' turns: ``jobs`` runs at a time, more after `widen` (a semaphore that can grow)."""

    def __init__(self, jobs: int):
        self.capacity, self.taken, self.changed = max(1, jobs), 0, threading.Condition()

    def widen(self, jobs: int) -> None:
        with self.changed:
            self.capacity = max(self.capacity, jobs)
            self.changed.notify_all()

    def __enter__(self):
        with self.changed:
            self.changed.wait_for(lambda: self.taken < self.capacity)
            self.taken += 1

    def __exit__(self, *exc):
        with self.changed:
            self.taken -= 1
            self.changed.notify()


def run_command(command: list[str], env: dict, seconds: float) -> tuple[int | None, str]:
    """(exit status, or None when it ran past ``seconds``; what it printed)."""
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired as stopped:
        output = stopped.stdout or ""
        return None, output.decode(errors="replace") if isinstance(output, bytes) else output
    return done.returncode, done.stdout


def slowest_cells(output: str) -> list[tuple]:
    """(seconds, notebook, cell index, first line) of each cell the `slowest_line`s in ``output`` name, its longest
    run, slowest first."""
    longest = {}
    for notebook, cells in SLOWEST_LINE.findall(output):
        for index, seconds, first in SLOWEST_CELL.findall(cells):
            key = (notebook, int(index))
            longest[key] = max(longest.get(key, (0.0, first)), (float(seconds), first))
    return sorted(((seconds, notebook, index, first) for (notebook, index), (seconds, first) in longest.items()),
                  reverse=True)


def summary(results: list[Result], cells: int = 12) -> str:
    """The table printed last: one row per part, then the notebooks' slowest ``cells`` (where the next run can save
    device time)."""
    rows = ["| part | result | seconds | note |", "|---|---|---:|---|"]
    rows += [f"| {r.part} | {r.status} | {r.seconds:.0f} | {r.note} |" for r in results]
    passed = sum(r.status in ("passed", "partial") for r in results)
    partial = sum(r.status == "partial" for r in results)
    rows += ["", f"gpu-check: {passed} of {len(results)} parts passed"
                 + (f" ({partial} partial: rows left out for time)." if partial else ".")]
    slowest = sorted((cell for r in results for cell in r.slowest), reverse=True)[:cells]
    if slowest:
        rows += ["", "The notebooks' slowest cells (the longest of their runs):", "",
                 "| seconds | notebook | cell | first line |", "|---:|---|---:|---|"]
        rows += [f"| {seconds:.1f} | {notebook} | {index} | `{first}` |" for seconds, notebook, index, first in slowest]
    return "\n".join(rows)


def shares(parts: list[str], seconds: float, expected: dict) -> dict:
    """Each benchmark's share of ``seconds``, in proportion to how long it took when it last ran (a part never run
    counts as the mean of the others, or all alike)."""
    known = [expected[p] for p in parts if expected.get(p)]
    usual = sum(known) / len(known) if known else 1.0
    weights = {p: expected.get(p) or usual for p in parts}
    return {p: seconds * weight / sum(weights.values()) for p, weight in weights.items()}


def check(parts: list[str], python: str, out: Path, limit: float, settings: Settings, runner=run_part,
          record_as: tuple[Record, str, str] | None = None, results_file: Path = BENCHMARKS / "RESULTS.md",
          kept: Path | None = None) -> list[Result]:
    """Run ``parts`` within ``limit`` seconds, logging to ``out``/gpu-check.log; write RESULTS.md and summary.md
    there. The parts that share the GPU run side by side first; the benchmarks then run one at a time, each with its
    share of the time left. ``record_as`` (the record so far, the device, the versions) adds the run to RESULTS.md's
    gpu_check section."""
    out.mkdir(parents=True, exist_ok=True)
    start, results = time.monotonic(), {}
    settings.slots = Slots(settings.jobs)
    with open(out / "gpu-check.log", "a") as log:
        log.write(f"gpu-check {time.strftime('%Y-%m-%d %H:%M:%S')}: {versions(python, settings.path_first)}\n")

        beside, finishing = {p for p in parts if p in SIDE_BY_SIDE}, threading.Lock()  # beside the notebooks
        if not beside:
            settings.slots.widen(settings.jobs_alone)

        def run(part: str) -> Result:  # a part that shares the GPU
            try:
                left = limit - (time.monotonic() - start)
                expected = settings.expected.get(part, 0) if part not in NOTEBOOK_PARTS else 0
                if left < 10 or expected > left:  # a part that would be cut is not started
                    why = f"expected {expected:.0f} s, {left:.0f} s left" if expected > left else "time limit"
                    return Result(part, "not run", 0, f"{why}: run `--part {part}` in another command")
                return report(part, lambda: runner(part, python, left, log, out, settings))
            finally:
                with finishing:
                    beside.discard(part)
                    if not beside:  # the notebooks have the CPUs to themselves now
                        settings.slots.widen(settings.jobs_alone)

        copying = threading.Lock()

        def report(part: str, run_it) -> Result:
            """The part's result (an error of this script's own is its failure, not the whole run's), printed, and
            RESULTS.md copied to ``out`` at once: a command stopped later keeps what ran."""
            began = time.monotonic()
            try:
                result = run_it()
            except Exception as error:  # noqa: BLE001
                result = Result(part, "failed", time.monotonic() - began, f"gpu-check: {type(error).__name__}: {error}")
                log.write(f"\n===== {part}: {result.note}\n")
            print(f"gpu-check: {result.part} {result.status} ({result.seconds:.0f} s)", flush=True)
            log.flush()
            with copying:
                copy_results(results_file, out, kept)
            return result

        side_by_side = [p for p in parts if not is_timed(p)]
        with ThreadPoolExecutor(max(1, len(side_by_side))) as pool:
            results.update(zip(side_by_side, pool.map(run, side_by_side)))
        timed = [p for p in parts if is_timed(p)]
        for k, part in enumerate(timed):
            left = limit - (time.monotonic() - start)
            share = shares(timed[k:], left, settings.expected)[part]
            if left < BENCHMARK_AT_LEAST:
                results[part] = Result(part, "not run", 0, f"time limit: run `--part {part}` in another command")
            elif share <= settings.partial.get(part, 0) and part not in KEEPS_ROWS:
                results[part] = Result(part, "not run", 0, f"kept its partial run of {settings.partial[part]:.0f} s: "
                                       f"{share:.0f} s would measure fewer rows")
            else:
                results[part] = report(part, lambda: runner(part, python, left, log, out, settings, share=share))
        # time the shares left over (benchmarks that finished early): the partial ones again, with more of it
        again = [p for p in timed if results[p].status == "partial"]
        for k, part in enumerate(again):
            left = limit - (time.monotonic() - start)
            share = shares(again[k:], left, {p: results[p].seconds for p in again})[part]
            if left >= BENCHMARK_AT_LEAST and share >= AGAIN_FROM * results[part].seconds:
                rerun = report(part, lambda: runner(part, python, left, log, out, settings, share=share))
                if rerun.status != "failed":  # else the first run's section stands
                    results[part] = rerun
    ordered = [results[p] for p in parts]
    if record_as is not None:
        record_run(ordered, *record_as, settings, results_file)
    copy_results(results_file, out, kept)
    (out / "summary.md").write_text(summary(ordered) + "\n")
    return ordered


def copy_results(results_file: Path, out: Path, kept: Path | None) -> None:
    """RESULTS.md as it is now, to ``out`` (what comes back) and to ``kept`` (what the machine keeps)."""
    if results_file.exists():
        shutil.copy(results_file, out / "RESULTS.md")
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(results_file, kept)


def resume_from_kept(results_file: Path, kept: Path, tree: str) -> bool:
    """Copy ``kept``, the RESULTS.md the last command left on this machine, over ``results_file`` where it records
    more of ``tree`` as passed; whether it did. The device tool copies the working tree again for each command, so
    a second command sent before the first's RESULTS.md was copied back would run every check again (2026-11-30:
    250 s of the 345 left)."""
    from gpucourse.course import recorded  # noqa: PLC0415 (the course is importable by now)

    def passed(path: Path) -> int:
        parts, notebooks = Record.read(recorded(SECTION, path)).passed(tree)
        return len(parts) + len(notebooks)

    if not kept.is_file() or passed(kept) <= passed(results_file):
        return False
    shutil.copy(kept, results_file)
    return True


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
    started = time.monotonic()  # --limit counts from here: installing the wheels and the checks before the parts too
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="+", metavar="PART",
                        help=f"run only these parts (default all): {', '.join(all_parts())}")
    parser.add_argument("--resume", action="store_true",
                        help="skip the parts and notebooks RESULTS.md's gpu_check section records as passed on this tree "
                             "(a partial benchmark runs again when more time is left than it had)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check",
                        help="where the log, RESULTS.md and summary.md go (default build/gpu-check; $OUT on the device)")
    parser.add_argument("--limit", type=float, default=LIMIT, help=f"seconds for the whole command (default {LIMIT})")
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs of each notebook (default 3)")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds a notebook cell may run (default 300)")
    parser.add_argument("--jobs-alone", type=int, default=JOBS_ALONE,
                        help=f"notebook runs at a time once the differential test, the fuzzing and the grading are "
                             f"done (default here {JOBS_ALONE}: two thirds of the CPUs, at most 12)")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"notebook runs at a time, each in its own process and kernel (default here {JOBS}: "
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
        lines = []
        for path in (p.resolve() for p in arguments.execute):
            timed = []
            lines.append(execute_repeatedly(path, arguments.repeat, arguments.cell_timeout, deadline, timed=timed))
            if timed:
                print(slowest_line(path.relative_to(ROOT).as_posix(), timed), flush=True)
            print(lines[-1], flush=True)
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
                        jobs=arguments.jobs, jobs_alone=arguments.jobs_alone, wheels=arguments.wheels)
    python = sys.executable
    if not arguments.use_this_python:
        with open(arguments.out / "gpu-check.log", "a") as log:
            python, settings.path_first = prepare(arguments.wheels, arguments.site, log)
            unmet = unmet_requirements(python, settings.path_first, arguments.wheels)
            if unmet:  # the parts would fail one by one on an import: say once what the carried set lacks
                line = (f"gpu-check: the carried wheels do not fit this machine ({'; '.join(unmet)}): add them to "
                        "REQUIREMENTS or take them out of DEVICE_HAS, `make gpu-wheels` again, and carry the folder")
                print(line, flush=True)
                log.write(line + "\n")
    sys.path[:0] = [*settings.path_first, str(ROOT / "lib")]
    from gpucourse.course import recorded  # noqa: PLC0415 (after the course is importable)

    tree = tree_fingerprint()
    if arguments.resume and resume_from_kept(arguments.results, KEPT, tree):
        print(f"gpu-check: --resume goes on from the last command's RESULTS.md, kept on this machine "
              f"({KEPT.relative_to(ROOT)}): it records more of this tree than {arguments.results.name} here "
              "(copy the RESULTS.md that comes back over benchmarks/RESULTS.md)", flush=True)
    record = Record.read(recorded(SECTION, arguments.results))
    settings.expected, settings.notebook_seconds = record.durations(), record.notebook_seconds()
    if record.tree != tree:
        record = Record(tree)
    if arguments.resume:
        done_parts, settings.skip_notebooks = record.passed(tree)
        parts = [p for p in parts if p not in done_parts]
        settings.partial = record.partial(tree)
    results = check(parts, python, arguments.out, arguments.limit - (time.monotonic() - started), settings,
                    record_as=(record, device_name(), versions(python, settings.path_first)),
                    results_file=arguments.results, kept=KEPT)
    print((arguments.out / "summary.md").read_text(), end="")
    return 0 if all(r.status in ("passed", "partial") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
