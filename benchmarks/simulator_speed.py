"""The course simulator's speed against numba's simulator, side by side in one run.

    python benchmarks/simulator_speed.py            # full sizes, writes RESULTS.md
    python benchmarks/simulator_speed.py --quick    # small sizes, one repeat, prints only

Needs no GPU. Each simulator runs in its own process, one after the other:

- numba's simulator with ``NUMBA_ENABLE_CUDASIM=1`` (it reads it when numba is
  first imported); it compiles nothing, so its launches are timed from the first;
- the course simulator with ``GPUCOURSE_DEVICE=cpu`` and ``GPUCOURSE_PTX_CHECK=off``
  (the PTX compilation it does once per kernel is not simulation), ``import
  gpucourse`` first, one warm-up launch (the kernel's rewrite is cached) before
  the timed ones; and again inside ``with gpucourse.trace():``.

The kernels: a few larger launches of the conformance kernels, every launch of
``tests/simulator/conformance_kernels.py`` (the ones whose outputs the conformance
tests compare) and the *holdout* kernels of ``tests/simulator/holdout_kernels.py``,
which the simulator was not tuned on (stencil, scan, histogram, transpose, softmax,
warp shuffles, im2col, a data-dependent while loop); each holdout launch is checked
against its NumPy reference on both simulators. Times are the median of
``--repeats`` launches; the goal is the geometric mean of the ratios. numba's
simulator has no warp shuffles: that kernel gets a course time and no ratio. A full
run replaces its section of ``benchmarks/RESULTS.md`` (`gpucourse.course.record`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "simulator_speed"  # its section of benchmarks/RESULTS.md
GOAL = 300  # geometric mean of (numba's time / the course simulator's) over the kernels both run

for folder in (ROOT / "tests", ROOT / "tests" / "simulator", ROOT / "benchmarks"):  # conformance_kernels, kernels_elsewhere; common
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from common import cpu_machine, markdown_table, package_versions, today  # noqa: E402


@dataclass(frozen=True)
class Benchmark:
    group: str  # "larger", "conformance" or "holdout"
    case: str  # name of a factory in conformance_kernels (holdout: in holdout_kernels)
    parameters: dict = field(default_factory=dict)


def _cases(group: str, module: str, function: str) -> list[Benchmark]:
    """One benchmark per launch of ``module.function()``, with its default sizes."""
    import importlib  # noqa: PLC0415

    source = importlib.import_module(module)
    factories = {getattr(source, name)().name: name for name in dir(source) if name.endswith("_case")}
    return [Benchmark(group, factories[case.name]) for case in getattr(source, function)()]


LARGER = [
    Benchmark("larger", "matmul_case", {"m": 64, "k": 64, "n": 64}),
    Benchmark("larger", "block_sum_case", {"n": 1024, "threads": 1024}),
    Benchmark("larger", "block_sum_case", {"n": 8 * 1024, "threads": 1024}),
    Benchmark("larger", "map_case", {"n": 2**16, "threads": 256}),
]
SCALES = {
    "full": lambda: (LARGER + _cases("conformance", "conformance_kernels", "conformance_cases")
                     + _cases("holdout", "holdout_kernels", "holdout_cases")),
    "quick": lambda: ([Benchmark("larger", "matmul_case", {"m": 32, "k": 32, "n": 32})]
                      + _cases("conformance", "conformance_kernels", "conformance_cases")[:6]
                      + _cases("holdout", "holdout_kernels", "holdout_cases")),
    "tiny": lambda: [  # for the test that keeps this script working
        Benchmark("larger", "matmul_case", {"m": 20, "k": 18, "n": 17}),
        Benchmark("conformance", "block_sum_case", {"n": 100, "threads": 64}),
        Benchmark("holdout", "stencil_case", {"n": 300}),
        Benchmark("holdout", "warp_shuffle_case", {"n": 300, "grid": 2, "threads": 64}),
    ],
}


def make_case(benchmark: Benchmark):
    import conformance_kernels  # noqa: PLC0415 (imported once the simulator is chosen)
    import holdout_kernels  # noqa: PLC0415

    module = holdout_kernels if benchmark.group == "holdout" else conformance_kernels
    return getattr(module, benchmark.case)(**benchmark.parameters)


def label(benchmark: Benchmark) -> tuple[str, str]:
    """(kernel, size) of a benchmark, as its table row names them."""
    case = make_case(benchmark)
    return f"{case.name} ({benchmark.group})", case.size or str(case.grid)


def checked_launch(benchmark: Benchmark, case) -> None:
    """A holdout case launched once on fresh inputs and compared with its NumPy reference."""
    if benchmark.group == "holdout":
        import holdout_kernels  # noqa: PLC0415

        args = case.inputs()
        case.launch(args)
        holdout_kernels.check_outputs(case, args)


def median_time(case, repeats: int, wrap=None) -> float:
    """Median seconds of ``repeats`` launches of ``case``, each on fresh inputs (made outside the timing: a
    launch may leave its outputs where the next one would fault, as a compaction's counter)."""
    times = []
    for _ in range(repeats):
        args = case.inputs()
        start = time.perf_counter()
        if wrap is None:
            case.launch(args)
        else:
            with wrap():
                case.launch(args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- one side per process ------------------------------------------------------------------------------
def measure_numba(benchmarks: list[Benchmark], repeats: int) -> list[dict]:
    """Seconds per launch on numba's simulator (only in a process started with NUMBA_ENABLE_CUDASIM=1);
    None for a kernel it cannot run (warp shuffles)."""
    results = []
    for benchmark in benchmarks:
        case = make_case(benchmark)
        try:
            checked_launch(benchmark, case)
            results.append({"numba": median_time(case, repeats)})
        except (AttributeError, NotImplementedError):  # cuda.shfl_down_sync and the like are missing
            results.append({"numba": None})
    return results


def measure_course(benchmarks: list[Benchmark], repeats: int) -> list[dict]:
    """Seconds per launch on the course simulator, plain and traced (after one warm-up launch)."""
    from gpucourse import simulated, trace  # noqa: PLC0415 (importing gpucourse installs the simulator)

    results = []
    with simulated():  # the course simulator even on a machine with a GPU
        for benchmark in benchmarks:
            case = make_case(benchmark)
            case.launch(case.inputs())  # warm-up: rewrites the kernel once
            checked_launch(benchmark, case)
            results.append({"course": median_time(case, repeats), "traced": median_time(case, repeats, trace)})
    return results


def run_side(side: str, scale: str, repeats: int) -> list[dict]:
    """Run one side in a fresh process with the environment it needs; its results."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if side == "numba":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.update(GPUCOURSE_DEVICE="cpu", GPUCOURSE_PTX_CHECK="off")
    command = [sys.executable, str(Path(__file__).resolve()), "--side", side, "--scale", scale,
               "--repeats", str(repeats)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"the {side} side failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- report --------------------------------------------------------------------------------------------
def ratio(row: dict) -> float | None:
    return row["numba"] / row["course"] if row.get("numba") and row.get("course") else None


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def table(benchmarks: list[Benchmark], rows: list[dict]) -> str:
    cells = []
    for benchmark, row in zip(benchmarks, rows):
        r = ratio(row)
        numba = "n/a" if row.get("numba") is None else f"{row['numba']:.3f}"
        cells.append([*label(benchmark), numba, f"{row['course']:.4f}", "n/a" if r is None else f"{r:.0f}x",
                      f"{row['traced']:.4f}"])
    header = ["kernel (set)", "size", "numba simulator (s)", "course simulator (s)", "ratio", "course, traced (s)"]
    return markdown_table(header, cells, right={2, 3, 4, 5})


def summary(benchmarks: list[Benchmark], rows: list[dict]) -> dict[str, float]:
    """Geometric mean ratio: over every kernel both simulators run, and per set."""
    pairs = [(b.group, ratio(row)) for b, row in zip(benchmarks, rows) if ratio(row) is not None]
    means = {"all": geomean([r for _, r in pairs])}
    for group in dict.fromkeys(g for g, _ in pairs):
        means[group] = geomean([r for g, r in pairs if g == group])
    return means


def section(benchmarks: list[Benchmark], rows: list[dict], repeats: int) -> str:
    means = summary(benchmarks, rows)
    kernels = sum(ratio(row) is not None for row in rows)
    verdict = (f"geometric mean **{means['all']:.0f}x** over {kernels} kernels "
               f"({'reaches' if means['all'] >= GOAL else 'below'} the goal of {GOAL}x); per set: "
               + ", ".join(f"{group} {mean:.0f}x" for group, mean in means.items() if group != "all"))
    return "\n".join([
        "## Course simulator vs numba's simulator",
        "",
        "`python benchmarks/simulator_speed.py` (CPU only, no GPU involved).",
        "",
        f"- Machine: {cpu_machine()}",
        f"- Date: {today()}",
        f"- Versions: {package_versions('numba', 'numba-cuda', 'numpy')}",
        f"- Median of {repeats} launches. numba's simulator: `NUMBA_ENABLE_CUDASIM=1`. Course simulator: "
        "`GPUCOURSE_DEVICE=cpu`, `GPUCOURSE_PTX_CHECK=off`, after one warm-up launch; *traced* is the same "
        "launch inside `with gpucourse.trace():`. Ratio: numba's time / the course simulator's. Sets: *larger* "
        "launches of conformance kernels, every *conformance* launch (`tests/simulator/conformance_kernels.py`), "
        "the *holdout* kernels (`tests/simulator/holdout_kernels.py`, outputs checked against NumPy on both "
        "simulators). numba's simulator has no warp shuffles (n/a).",
        f"- Result: {verdict}.",
        "",
        table(benchmarks, rows),
    ])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, RESULTS.md left alone")
    parser.add_argument("--repeats", type=int, default=None, help="launches per median (default 3, quick 1)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--side", choices=("numba", "course"), help=argparse.SUPPRESS)
    parser.add_argument("--scale", choices=tuple(SCALES), default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    scale = options.scale or ("quick" if options.quick else "full")
    repeats = options.repeats or (1 if options.quick else 3)
    benchmarks = SCALES[scale]()

    if options.side:  # inside a child process: print the results as JSON
        measure = measure_numba if options.side == "numba" else measure_course
        print(json.dumps(measure(benchmarks, repeats)))
        return

    numba_rows = run_side("numba", scale, repeats)
    course_rows = run_side("course", scale, repeats)
    rows = [{**n, **c} for n, c in zip(numba_rows, course_rows)]
    text = section(benchmarks, rows, repeats)
    print(text)
    if scale == "full" and not options.no_write:
        from gpucourse.course import results  # noqa: PLC0415 (imports gpucourse, which picks a backend)

        results.record(NAME, text)
        print(f"\nwritten to {results.RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
