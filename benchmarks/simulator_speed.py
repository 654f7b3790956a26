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

Times are the median of ``--repeats`` launches of the kernels of
``tests/simulator/conformance_kernels.py`` (the same kernels whose outputs the
conformance tests compare). A full run replaces its section of
``benchmarks/RESULTS.md`` (`gpucourse.course.record`) with the new table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "simulator_speed"  # its section of benchmarks/RESULTS.md
GOAL = 20  # the course simulator should be this many times faster than numba's

for folder in (ROOT / "tests", ROOT / "tests" / "simulator", ROOT / "benchmarks"):  # conformance_kernels, kernels_elsewhere; common
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from common import cpu_machine, markdown_table, package_versions, today  # noqa: E402


@dataclass(frozen=True)
class Benchmark:
    kernel: str
    size: str
    case: str  # name of a factory in conformance_kernels
    parameters: dict


SCALES = {
    "full": [
        Benchmark("tiled matmul, 16x16 tiles", "64x64 @ 64x64", "matmul_case", {"m": 64, "k": 64, "n": 64}),
        Benchmark("block reduction, barrier per step", "1 block x 1024", "block_sum_case",
                  {"n": 1024, "threads": 1024}),
        Benchmark("block reduction, barrier per step", "8 blocks x 1024", "block_sum_case",
                  {"n": 8 * 1024, "threads": 1024}),
        Benchmark("map", "2^16, 256/block", "map_case", {"n": 2**16, "threads": 256}),
    ],
    "quick": [
        Benchmark("tiled matmul, 16x16 tiles", "32x32 @ 32x32", "matmul_case", {"m": 32, "k": 32, "n": 32}),
        Benchmark("block reduction, barrier per step", "1 block x 1024", "block_sum_case",
                  {"n": 1024, "threads": 1024}),
        Benchmark("map", "2^12, 256/block", "map_case", {"n": 2**12, "threads": 256}),
    ],
    "tiny": [  # for the test that keeps this script working
        Benchmark("tiled matmul, 16x16 tiles", "20x18 @ 18x17", "matmul_case", {"m": 20, "k": 18, "n": 17}),
        Benchmark("block reduction, barrier per step", "2 blocks x 64", "block_sum_case", {"n": 100, "threads": 64}),
        Benchmark("map", "300, 128/block", "map_case", {"n": 300, "threads": 128}),
    ],
}


def make_case(benchmark: Benchmark):
    import conformance_kernels  # noqa: PLC0415 (imported once the simulator is chosen)

    return getattr(conformance_kernels, benchmark.case)(**benchmark.parameters)


def median_time(launch, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        launch()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- one side per process ------------------------------------------------------------------------------
def measure_numba(benchmarks: list[Benchmark], repeats: int) -> list[dict]:
    """Seconds per launch on numba's simulator (only in a process started with NUMBA_ENABLE_CUDASIM=1)."""
    results = []
    for benchmark in benchmarks:
        case = make_case(benchmark)
        args = case.inputs()
        results.append({"numba": median_time(lambda: case.launch(args), repeats)})
    return results


def measure_course(benchmarks: list[Benchmark], repeats: int) -> list[dict]:
    """Seconds per launch on the course simulator, plain and traced (after one warm-up launch)."""
    from gpucourse import simulated, trace  # noqa: PLC0415 (importing gpucourse installs the simulator)

    def traced(launch):
        with trace():
            launch()

    results = []
    with simulated():  # the course simulator even on a machine with a GPU
        for benchmark in benchmarks:
            case = make_case(benchmark)
            args = case.inputs()

            def launch():
                case.launch(args)

            launch()  # warm-up: rewrites the kernel once
            results.append({"course": median_time(launch, repeats),
                            "traced": median_time(lambda: traced(launch), repeats)})
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
def table(benchmarks: list[Benchmark], rows: list[dict]) -> str:
    cells = []
    for benchmark, row in zip(benchmarks, rows):
        ratio = row["numba"] / row["course"] if row.get("numba") and row.get("course") else float("nan")
        cells.append([benchmark.kernel, benchmark.size, f"{row.get('numba', float('nan')):.3f}",
                      f"{row['course']:.4f}", f"{ratio:.0f}x", f"{row['traced']:.4f}"])
    header = ["kernel", "size", "numba simulator (s)", "course simulator (s)", "ratio", "course, traced (s)"]
    return markdown_table(header, cells, right={2, 3, 4, 5})


def section(benchmarks: list[Benchmark], rows: list[dict], repeats: int) -> str:
    ratios = [r["numba"] / r["course"] for r in rows]
    reached = all(r >= GOAL for r in ratios)
    verdict = (f"every kernel at least {GOAL}x faster than numba's simulator" if reached else
               f"goal of {GOAL}x not reached on every kernel (lowest {min(ratios):.0f}x)")
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
        "launch inside `with gpucourse.trace():`. Ratio: numba's time / the course simulator's.",
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
    benchmarks = SCALES[scale]

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
