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

Limits (the device tool's): one command under 10 minutes, so parts stop being started when
``--limit`` seconds (570) are spent, each runs with what is left as its timeout, and the summary
is always printed; a part cut off is listed, to run again alone. 64 MiB carried: the wheels
folder (``make gpu-wheels``, about 47 MiB) plus the working tree (about 1.5 MiB).

What the GPU machine lacks comes as wheels (numpy<2.5, numba-cuda 0.30, nbclient, ipykernel,
ipywidgets, matplotlib and their dependencies, Linux x86_64, CPython 3.12), installed offline
(``pip --no-index``) into a virtual environment that sees the machine's own packages (PyTorch,
CuPy, numba). ``--use-this-python`` skips that (Colab: install the course first).

Writes to ``--out``: gpu-check.log (everything every part printed), RESULTS.md (benchmarks/
RESULTS.md after the run) and summary.md (the table printed last). Exit status 0 when every
part passed. Without a GPU it says so in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
WHEELS = ROOT / "wheels" / "gpu-check"
VENV = ROOT / "build" / "gpu-check-venv"
LIMIT = 570  # seconds: the device tool stops a command at 600
# Not GPU benchmarks: helpers, this script, and the benchmarks that need no GPU.
NOT_GPU_BENCHMARKS = {"common", "gpu_check", "numba_cuda_conformance", "numba_cuda_conformance_plugin",
                      "simulator_speed"}
# For the device machine: Linux x86_64, CPython 3.12, manylinux wheels.
PLATFORM = ["--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "--python-version", "3.12", "--implementation", "cp",
            "--abi", "cp312"]
REQUIREMENTS = ["numpy<2.5", "nbclient>=0.10,<1", "nbformat", "ipykernel>=6.29", "ipywidgets>=8,<9",
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


# -- the parts -----------------------------------------------------------------------------------------------------
def gpu_benchmarks(folder: Path = BENCHMARKS) -> list[str]:
    """The benchmark scripts that need a GPU, by name: every script but the helpers and the CPU-only ones."""
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in NOT_GPU_BENCHMARKS)


def all_parts(folder: Path = BENCHMARKS) -> list[str]:
    return ["lectures", "solutions", *gpu_benchmarks(folder), "differential"]


def select_parts(asked: list[str] | None, folder: Path = BENCHMARKS) -> list[str]:
    """The parts to run, in their order; a clear error for a name that is not a part."""
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


def execute_notebook(path: Path, timeout: int, require_gpu: bool = True) -> list[str]:
    """Run ``path`` in a fresh kernel in its folder; what went wrong (an error, stderr output, no GPU), or []."""
    import nbformat  # noqa: PLC0415 (in the prepared environment only)
    from nbclient import NotebookClient  # noqa: PLC0415
    from nbclient.exceptions import CellExecutionError  # noqa: PLC0415

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(f"import gpucourse\nprint('{BACKEND_MARK}', gpucourse.BACKEND.kind)"))
    try:
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as exc:
        return [f"a cell failed: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"]
    except Exception as exc:  # a timeout, a dead kernel
        return [f"{type(exc).__name__}: {str(exc).strip()[:300]}"]
    problems = [f"stderr: {out.get('text', '').strip()[:300]}" for cell in notebook.cells if cell.cell_type == "code"
                for out in cell.get("outputs", []) if out.get("output_type") == "stream" and out.get("name") == "stderr"]
    backend = "".join(out.get("text", "") for out in notebook.cells[-1].outputs).split(BACKEND_MARK)[-1].strip()
    if require_gpu and backend != "gpu":
        problems.append(f"ran on the {backend or 'unknown backend'}, not the GPU")
    return problems


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


def download_wheels(folder: Path = WHEELS, python: str = sys.executable) -> int:
    """``pip download`` what the GPU machine lacks into ``folder``; print its size."""
    folder.mkdir(parents=True, exist_ok=True)
    pip = [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", *PLATFORM, "-d", str(folder)]
    for command in ([*pip, *REQUIREMENTS], [*pip, "--no-deps", *WITHOUT_DEPENDENCIES]):
        if subprocess.run(command).returncode:
            print(f"gpu_check: pip download failed (command: {' '.join(command)})", file=sys.stderr)
            return 1
    for wheel in folder.glob("*.whl"):
        if wheel.name.split("-")[0].lower() in LEFT_OUT:
            wheel.unlink()
    size = sum(p.stat().st_size for p in folder.glob("*.whl"))
    print(f"{len(list(folder.glob('*.whl')))} wheels in {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}: "
          f"{size / 2**20:.1f} MiB (the working tree travels beside them: the device tool carries 64 MiB)")
    return 0


def prepare(wheels: Path, environment: Path, log) -> str:
    """The Python of a virtual environment (seeing the machine's packages) with the wheels installed offline."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise SystemExit(f"gpu_check: no wheels in {wheels}: run `make gpu-wheels` on a machine with network and "
                         "carry the folder (or pass --use-this-python where the course is installed)")
    python = environment / "bin" / "python"
    if not python.exists():  # the machine's pip serves it (it sees the machine's packages), else its own
        venv.EnvBuilder(system_site_packages=True, with_pip=False).create(environment)
        if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode:
            if subprocess.run([str(python), "-m", "ensurepip"], stdout=log, stderr=subprocess.STDOUT).returncode:
                raise SystemExit(f"gpu_check: no pip for {python} (neither the machine's nor ensurepip)")
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "--no-index", "--find-links", str(wheels), "--no-deps", *map(str, found)],
                             stdout=log, stderr=subprocess.STDOUT)
    if install.returncode:
        raise SystemExit(f"gpu_check: installing the wheels of {wheels} failed (see the log)")
    return str(python)


def versions(python: str) -> str:
    script = ("from importlib import metadata as m\nimport platform\nnames = ['numpy', 'numba', 'numba-cuda', "
              "'cupy-cuda12x', 'cupy-cuda13x', 'torch', 'nbclient', 'ipykernel', 'matplotlib']\n"
              "found = []\nfor n in names:\n    try:\n        found.append(f'{n} {m.version(n)}')\n"
              "    except m.PackageNotFoundError:\n        pass\nprint('Python', platform.python_version() + ',', ', '.join(found))")
    return subprocess.run([python, "-c", script], capture_output=True, text=True).stdout.strip()


# -- running -----------------------------------------------------------------------------------------------------
def run_part(part: str, python: str, seconds_left: float, log, out: Path, match: str | None,
             quick: bool = False) -> Result:
    env = {**os.environ, "GPUCOURSE_DEVICE": "gpu", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")]))}
    if part in ("lectures", "solutions"):
        paths = notebooks(part, match)
        command = [python, __file__, "--execute", *map(str, paths)]
        note = f"{len(paths)} notebooks"
    elif part == "differential":
        command = [python, "-m", "gpucourse.grading.differential_cases", "--markdown", str(out / "differential.md")]
        note = ""
    else:
        command = [python, str(BENCHMARKS / f"{part}.py"), *(["--quick"] if quick else [])]
        note = "quick: nothing recorded" if quick else ""
    start = time.monotonic()
    log.write(f"\n===== {part}: {' '.join(command)}\n")
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=max(1.0, seconds_left))
    except subprocess.TimeoutExpired as stopped:
        output = stopped.stdout or ""
        log.write(output.decode(errors="replace") if isinstance(output, bytes) else output)
        return Result(part, "failed", time.monotonic() - start, f"stopped at the time limit: run `--part {part}` alone")
    log.write(done.stdout)
    seconds = time.monotonic() - start
    if done.returncode:
        return Result(part, "failed", seconds, f"exit status {done.returncode}: see gpu-check.log")
    if "needs a CUDA GPU" in done.stdout:
        return Result(part, "failed", seconds, "found no usable GPU: see gpu-check.log")
    if part == "differential":
        recorded = subprocess.run([python, __file__, "--record", "differential", str(out / "differential.md")],
                                  env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        if recorded.returncode:
            return Result(part, "failed", seconds, "could not record its section of RESULTS.md")
    return Result(part, "passed", seconds, note)


def summary(results: list[Result]) -> str:
    """The table printed last: one row per part."""
    rows = ["| part | result | seconds | note |", "|---|---|---:|---|"]
    rows += [f"| {r.part} | {r.status} | {r.seconds:.0f} | {r.note} |" for r in results]
    failed = sum(r.status != "passed" for r in results)
    return "\n".join(rows + ["", f"gpu-check: {len(results) - failed} of {len(results)} parts passed."])


def check(parts: list[str], python: str, out: Path, limit: float, match: str | None, quick: bool = False,
          runner=run_part) -> list[Result]:
    """Run ``parts`` in order within ``limit`` seconds, logging to ``out``/gpu-check.log; write RESULTS.md and
    summary.md there."""
    out.mkdir(parents=True, exist_ok=True)
    start, results = time.monotonic(), []
    with open(out / "gpu-check.log", "a") as log:
        log.write(f"gpu-check {time.strftime('%Y-%m-%d %H:%M:%S')}: {versions(python)}\n")
        for part in parts:
            left = limit - (time.monotonic() - start)
            if left < 10:
                results.append(Result(part, "not run", 0, f"time limit: run `--part {part}` in another command"))
                continue
            results.append(runner(part, python, left, log, out, match, quick))
            print(f"gpu-check: {part} {results[-1].status} ({results[-1].seconds:.0f} s)", flush=True)
            log.flush()
    if (BENCHMARKS / "RESULTS.md").exists():
        shutil.copy(BENCHMARKS / "RESULTS.md", out / "RESULTS.md")
    table = summary(results)
    (out / "summary.md").write_text(table + "\n")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="+", metavar="PART",
                        help=f"run only these parts (default all): {', '.join(all_parts())}")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check",
                        help="where the log, RESULTS.md and summary.md go (default build/gpu-check; $OUT on the device)")
    parser.add_argument("--limit", type=float, default=LIMIT, help=f"seconds for the whole command (default {LIMIT})")
    parser.add_argument("--notebooks", metavar="TEXT", help="only the notebooks whose file name contains TEXT")
    parser.add_argument("--quick", action="store_true", help="the benchmarks' quick modes (a smoke run: nothing recorded)")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="the wheels folder (default wheels/gpu-check)")
    parser.add_argument("--venv", type=Path, default=VENV, help="the virtual environment (default build/gpu-check-venv)")
    parser.add_argument("--use-this-python", action="store_true",
                        help="no virtual environment and no wheels: this Python has the course's packages (Colab)")
    parser.add_argument("--download-wheels", action="store_true",
                        help="download the wheels the GPU machine lacks into --wheels (online; make gpu-wheels)")
    parser.add_argument("--execute", nargs="+", type=Path, help=argparse.SUPPRESS)  # notebooks, in the environment
    parser.add_argument("--record", nargs=2, metavar=("SECTION", "FILE"), help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)

    if arguments.download_wheels:
        return download_wheels(arguments.wheels)
    if arguments.execute:
        failed = 0
        for path in arguments.execute:
            start = time.monotonic()
            problems = execute_notebook(path, timeout=600)
            failed += bool(problems)
            print(f"{path.relative_to(ROOT)}: {'; '.join(problems) or 'ok'} ({time.monotonic() - start:.0f} s)",
                  flush=True)
        return 1 if failed else 0
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
    if arguments.use_this_python:
        python = sys.executable
    else:
        with open(arguments.out / "gpu-check.log", "a") as log:
            python = prepare(arguments.wheels, arguments.venv, log)
    results = check(parts, python, arguments.out, arguments.limit, arguments.notebooks, arguments.quick)
    print((arguments.out / "summary.md").read_text(), end="")
    return 0 if all(r.status == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
