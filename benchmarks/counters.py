"""What holds back the kernels whose goals a GPU has not met yet: Nsight Compute's counters, one launch of each.

    python benchmarks/counters.py               # profiles under ncu; writes RESULTS.md's `counters` section
    python benchmarks/counters.py --quick       # the softmaxes at 4096 x 1024 only; prints only
    python benchmarks/counters.py --no-write
    python benchmarks/counters.py --seconds 90  # the softmaxes first, then map, zip and sum while 90 s last

Needs a CUDA GPU and Nsight Compute (``ncu``); without a GPU it prints one line saying so and exits with status 0.
Where ncu is missing or cannot read the counters (the device tool's gVisor machines), the section says so.

The timed benchmarks say how fast a kernel is; the counters say what holds it back. On an H200 (2026-11-29) the
fused softmaxes reached 41-48% of a device copy's bandwidth against issue 22's 90%, and the sum's step 6 83%
against 85%. Each kernel here is launched once, as benchmarks/fusion.py and bandwidth.py launch it (their own
case builders: the same grids and arguments), in a process that ``ncu --clock-control none`` profiles (the clocks
as the timed runs had them; ncu flushes the caches before each replay pass, so the DRAM traffic is a cold
launch's) with its sections SpeedOfLight, Occupancy, LaunchStats, WarpStateStats and MemoryWorkloadAnalysis:

- the softmaxes at 16384 x 4096: `softmax_row_fused`, `softmax_online`, `softmax_registers`, both builds of
  `softmax_vectorised`, `softmax_pipelined`, and ``torch.softmax``;
- map, zip and the sum's steps 6 and 7 at 256 MiB, their top rungs on each grid size bandwidth.py tries;
- two tile shapes of module 3's register-tiled SGEMM at 4096^3 (`SGEMM_TILES`), which the cost model ranks the wrong
  way round, and the top rung `matmul_warp_tiled` beside them: what separates them is what the model misses.

Per launch: its time under the profiler, the DRAM bytes against the least the kernel must move, DRAM GB/s and its
share of the peak as ncu states it, the L2 hit rate, achieved and theoretical occupancy, registers per thread, the
warp instructions executed and the SMs' clock (`benchmarks/cost_model.py` sets them beside the cost model's), and
the three reasons that hold warps most (warps stalled per issued instruction), each reason explained below the
tables. No result is checked here: the timed benchmarks check every kernel's output.
"""

from __future__ import annotations

import argparse
import csv
import functools
import glob
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

import bandwidth  # noqa: E402
import fusion  # noqa: E402
from common import (  # noqa: E402
    Device,
    TimeBudget,
    add_time_budget,
    current_device,
    finish,
    markdown_table,
    reference_libraries,
    today,
    versions,
    without_gpu,
)

NAME = "counters"  # its section of benchmarks/RESULTS.md
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "MemoryWorkloadAnalysis")
# beside the sections': the bytes themselves, the warp instructions executed (what `benchmarks/cost_model.py` sets
# beside the model's count of them) and the SMs' clock (the model assumes the boost clock)
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__inst_executed.sum", "sm__cycles_elapsed.avg.per_second")
SOFTMAX_SHAPE, QUICK_SOFTMAX_SHAPE = (16384, 4096), (4096, 1024)  # fusion.py's goal size; its quick one
BANDWIDTH_MIB = 256  # bandwidth.py's first goal size
SOFTMAX_LEFT_OUT = (fusion.COPY, fusion.NAIVE_SOFTMAX)  # a copy is no kernel; the naive path is three
BANDWIDTH_ROWS = ("map: 16-byte vectors, grid-stride", "zip: 16-byte vectors, grid-stride", "sum 6: ", "sum 7: ")
SGEMM_SIZE = 4096  # tuning.py's largest SGEMM, M = N = K
# The tuner's best on an H200 (9.81 ms at 4096^3, 2026-11-29) and module 3's rung (12.07 ms): the cost model predicts
# 6.35 and 6.22 ms, the wrong way round (2026-11-30). Their SASS inner loops have the same share of FFMAs (32 of 83
# instructions, 16 of 41), and both hold 16 warps per SM: instruction issue and occupancy do not separate them.
SGEMM_TILES = ({"BM": 64, "BN": 64, "TM": 8, "TN": 4, "BK": 8}, {"BM": 64, "BN": 64, "TM": 4, "TN": 4, "BK": 16})
TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "KB": 1e3, "MB": 1e6, "GB": 1e9}
TIMED_OUT = "Not profiled: ncu ran past this run's time budget."
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
NOT_STALLS = {"selected"}  # a warp that issues is not held back
STALLS = {  # ncu's reasons, in a student's words
    "long_scoreboard": "waiting for a global (or local) memory load: too few bytes in flight to cover the memory's "
                       "latency (more loads issued before the first is used, or more warps)",
    "barrier": "waiting at a barrier (cuda.syncthreads) for the block's other warps",
    "short_scoreboard": "waiting for shared memory or a special-function result (exp, reciprocal)",
    "mio_throttle": "the queue of shared-memory and special-function instructions is full",
    "lg_throttle": "the queue of global and local memory instructions is full: fewer, wider (16-byte) accesses",
    "wait": "a fixed wait between dependent instructions (few independent instructions to interleave)",
    "math_pipe_throttle": "an arithmetic pipe is busy: the kernel is near its instruction throughput there",
    "not_selected": "ready, but another warp issued: the scheduler had work every cycle",
    "drain": "waiting at exit for its stores to drain to memory",
    "membar": "waiting at a memory fence",
    "dispatch_stall": "the dispatcher could not issue the selected instruction",
    "no_instruction": "waiting for instructions: an instruction-cache miss or a branch target",
    "branch_resolving": "waiting for a branch's target or its mask",
    "imc_miss": "waiting for a constant-cache miss (kernel arguments, constants)",
    "tex_throttle": "the texture queue is full",
    "sleeping": "asleep (nanosleep) or waiting for the warp's other threads",
    "misc": "a reason ncu does not name",
}


# -- the launches (run inside ncu) ----------------------------------------------------------------------------------
@dataclass
class Target:
    """One launch to profile: its row's label and note, the least bytes it must move, how many kernels it launches
    (None: the rest of the group's, for a library whose kernels are its own business), and the launch itself."""

    label: str
    note: str
    least_bytes: int
    kernels: int | None
    launch: object = None

    def manifest(self) -> dict:
        return {"label": self.label, "note": self.note, "least_bytes": self.least_bytes, "kernels": self.kernels}


def softmax_targets(shape, libraries: dict) -> list[Target]:
    """fusion.py's softmax cases at ``shape`` but the copy and the naive path, torch.softmax last."""
    rows, cols = shape
    x = cuda.to_device((np.random.default_rng(0).standard_normal(shape) * 4).astype(np.float32))
    y = cuda.device_array(shape, np.float32)
    cases = [c for c in fusion.softmax_cases([x], [y], libraries) if c.path not in SOFTMAX_LEFT_OUT]
    cases.sort(key=lambda case: case.path == fusion.TORCH_SOFTMAX)
    return [Target(case.path, case.note, 2 * rows * cols * fusion.ITEM,
                   None if case.path == fusion.TORCH_SOFTMAX else case.kernel_launches, case.calls[0])
            for case in cases]


def bandwidth_targets(n: int, device: Device) -> list[Target]:
    """bandwidth.py's top rungs of map, zip and sum (steps 6 and 7) on ``n`` elements, one target per grid size."""
    rng = np.random.default_rng(0)
    host_a, host_b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    buffers = bandwidth.Buffers(n, [cuda.to_device(host_a)], [cuda.to_device(host_b)],
                                [cuda.device_array(n, np.float32)], host_a, host_b)
    rows = [*bandwidth.elementwise_cases(buffers, device), *bandwidth.sum_cases(buffers, device)]
    return [Target(case.kernel, case.note, bandwidth.bytes_moved(case.kind, case.shape, case.axis),
                   case.kernel_launches, case.launches[0])
            for alternatives in rows for case in alternatives if case.kernel.startswith(BANDWIDTH_ROWS)]


def sgemm_targets(n: int) -> list[Target]:
    """`SGEMM_TILES` of `matmul.make_register_tiled` and `matmul_warp_tiled` on C = A @ B, all n x n (float32)."""
    from gpucourse.grading import tuning  # noqa: PLC0415
    from gpucourse.kernels import matmul  # noqa: PLC0415

    least = 3 * n * n * 4  # A and B read once, C written once
    problem = tuning.sgemm_problem(n, n, n)
    targets = [Target("`matmul_register_tiled`, " + ", ".join(f"{k}={v}" for k, v in tiles.items()),
                      f"grid {launch.blocks}, blocks of {launch.threads}", least, 1, launch)
               for tiles in SGEMM_TILES for launch in [problem.build(tiles)]]
    c = cuda.device_array((1, n, n), np.float32)
    a, b = problem.build(SGEMM_TILES[0]).args[1:]
    grid, block = matmul.configuration(matmul.matmul_warp_tiled, c.shape)
    top = functools.partial(matmul.matmul_warp_tiled[grid, block], c, a, b)
    return [*targets, Target("`matmul_warp_tiled` (the top rung)", f"grid {math.prod(grid)}, blocks of "
                             f"{math.prod(block)}", least, 1, top)]


def group_targets(group: str, size, device: Device) -> list[Target]:
    if group == "sgemm":
        return sgemm_targets(size)
    if group == "softmax":
        libraries = reference_libraries()
        libraries.pop("cupy", None)
        return softmax_targets(size, libraries)
    return bandwidth_targets(size, device)


def launch_once(targets: list[Target], manifest: Path, profiled=None) -> None:
    """What ncu profiles: each target launched once, in order, inside ``profiled()`` (default `cuda.profiling`: ncu
    runs with --profile-from-start off); before it, each launched once to compile it and warm up, unprofiled."""
    profiled = profiled or cuda.profiling
    for target in targets:
        target.launch()
    cuda.synchronize()
    manifest.write_text(json.dumps([t.manifest() for t in targets]))
    with profiled():
        for target in targets:
            target.launch()
        cuda.synchronize()


# -- ncu and its report --------------------------------------------------------------------------------------------
def ncu_path() -> str | None:
    """Nsight Compute's command line: on PATH, or where CUDA and the Nsight installers put it."""
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) + glob.glob("/usr/local/cuda*/bin/ncu")
    return candidates[-1] if candidates else None


def profile_command(ncu: str, report: Path, group: str, size, manifest: Path) -> list[str]:
    sections = [flag for section in SECTIONS for flag in ("--section", section)]
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            *sections, "--metrics", ",".join(METRICS), "--export", str(report), "--force-overwrite",
            sys.executable, __file__, "--launch", group, json.dumps(size), "--manifest", str(manifest)]


def number(text: str) -> float:
    """A value of ncu's CSV ("1,234.5", "n/a"): a float, NaN where there is none."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def in_base_units(value: float, unit: str) -> float:
    """Seconds for a time, bytes for a size, bytes per second for a rate; anything else as given."""
    if unit.endswith("/second") and unit.split("/")[0] in BYTES:
        return value * BYTES[unit.split("/")[0]]
    return value * TIME.get(unit, BYTES.get(unit, 1.0))


def launches_in(text: str) -> list[dict]:
    """The launches of ``ncu --import REPORT --csv --page raw``, in their order: ``{metric: value}`` with
    ``"Kernel Name"``, values in base units. Reads both of ncu's CSV shapes: a column per metric (a units row
    under the header), or a row per metric ("Metric Name", "Metric Unit", "Metric Value")."""
    lines = [line for line in text.splitlines() if line.startswith('"')]  # not ncu's ==PROF== lines
    table = list(csv.reader(lines))
    if not table:
        raise ValueError("ncu printed no CSV rows")
    header, body = table[0], table[1:]
    if "ID" not in header or "Kernel Name" not in header:
        raise ValueError(f"ncu's CSV has no ID and Kernel Name columns: {header[:6]}")
    id_at, name_at = header.index("ID"), header.index("Kernel Name")
    launches: dict[str, dict] = {}
    if "Metric Name" in header:  # a row per metric
        metric_at, unit_at, value_at = (header.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
        for row in body:
            launch = launches.setdefault(row[id_at], {"Kernel Name": row[name_at]})
            launch[row[metric_at]] = in_base_units(number(row[value_at]), row[unit_at])
        return list(launches.values())
    units = body.pop(0) if body and not body[0][id_at] else [""] * len(header)  # a column per metric
    for row in body:
        launch = {"Kernel Name": row[name_at]}
        for k, metric in enumerate(header):
            if "__" in metric:
                launch[metric] = in_base_units(number(row[k]), units[k])
        launches[row[id_at]] = launch
    return list(launches.values())


def first_of(launch: dict, *metrics: str) -> float:
    """The first of ``metrics`` the launch has (ncu names some differently across GPUs), else NaN."""
    return next((launch[m] for m in metrics if m in launch and launch[m] == launch[m]), float("nan"))


@dataclass(frozen=True)
class Row:
    """One profiled launch (the first kernel of a target that launches several) and what its counters say."""

    label: str
    note: str
    kernel: str  # as ncu names it
    kernels: int  # the target's kernels (a reduction's relaunches, a library's several)
    seconds: float
    dram_bytes: float
    least_bytes: int
    dram_percent: float  # of the DRAM's peak, as ncu states it
    l2_hit_percent: float
    achieved_occupancy: float  # % of the SM's warps
    theoretical_occupancy: float
    registers: float
    stalls: tuple  # ((reason, warps per issued instruction), ...), the largest first
    instructions: float = float("nan")  # warp instructions executed, by all the target's kernels
    clock_hz: float = float("nan")  # the SMs' clock during the (first) launch

    @property
    def dram_gbps(self) -> float:
        return self.dram_bytes / self.seconds / 1e9 if self.seconds else float("nan")


def stalls_of(launch: dict) -> tuple:
    found = [(metric[len(STALL_PREFIX):-len(STALL_SUFFIX)], value) for metric, value in launch.items()
             if metric.startswith(STALL_PREFIX) and metric.endswith(STALL_SUFFIX) and value == value]
    return tuple(sorted(((r, v) for r, v in found if r not in NOT_STALLS), key=lambda rv: -rv[1]))


def rows_of(launches: list[dict], manifest: list[dict]) -> list[Row]:
    """The targets' rows: ``launches`` dealt out over ``manifest`` in order (each its ``kernels``, the last with
    None the rest). A clear error when the counts do not add up: the rows would be another kernel's."""
    fixed = sum(t["kernels"] for t in manifest if t["kernels"] is not None)
    open_ended = [t for t in manifest if t["kernels"] is None]
    if len(launches) < fixed + len(open_ended) or (not open_ended and len(launches) != fixed):
        names = ", ".join(launch["Kernel Name"][:60] for launch in launches)
        raise ValueError(f"ncu profiled {len(launches)} kernels where the targets launch "
                         f"{fixed}{' and more' if open_ended else ''}: {names}")
    rows, at = [], 0
    for target in manifest:
        count = target["kernels"] if target["kernels"] is not None else len(launches) - fixed
        mine, at = launches[at:at + count], at + count
        first = mine[0]
        dram = sum(first_of(launch, "dram__bytes_read.sum") + first_of(launch, "dram__bytes_write.sum")
                   for launch in mine)
        seconds = sum(first_of(launch, "gpu__time_duration.sum") for launch in mine)
        rows.append(Row(target["label"], target["note"], first["Kernel Name"], count, seconds, dram,
                        target["least_bytes"],
                        first_of(first, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                        first_of(first, "lts__t_sector_hit_rate.pct"),
                        first_of(first, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                        first_of(first, "sm__maximum_warps_per_active_cycle_pct"),
                        first_of(first, "launch__registers_per_thread"), stalls_of(first),
                        sum(first_of(launch, "smsp__inst_executed.sum") for launch in mine),
                        first_of(first, "sm__cycles_elapsed.avg.per_second")))
    return rows


# -- the report (pure) ---------------------------------------------------------------------------------------------
def percent(value: float) -> str:
    return f"{value:.0f}%" if value == value else "n/a"


def table(rows: list[Row]) -> str:
    header = ["kernel", "launch", "µs", "DRAM bytes / least", "DRAM GB/s", "DRAM % of peak", "L2 hit",
              "occupancy achieved / theoretical", "registers", "warp instructions (millions)", "SM clock (GHz)",
              "warps stalled most (per issued instruction)"]
    cells = []
    for r in rows:
        kernel = r.label + (f" ({r.kernels} kernels: the counters are the first's)" if r.kernels > 1 else "")
        cells.append([kernel, r.note, f"{r.seconds * 1e6:,.1f}", f"{r.dram_bytes / r.least_bytes:.2f}",
                      f"{r.dram_gbps:,.0f}", percent(r.dram_percent), percent(r.l2_hit_percent),
                      f"{percent(r.achieved_occupancy)} / {percent(r.theoretical_occupancy)}",
                      f"{r.registers:.0f}" if r.registers == r.registers else "n/a",
                      f"{r.instructions / 1e6:,.2f}" if r.instructions == r.instructions else "n/a",
                      f"{r.clock_hz / 1e9:.2f}" if r.clock_hz == r.clock_hz else "n/a",
                      ", ".join(f"{reason} {value:.1f}" for reason, value in r.stalls[:3]) or "n/a"])
    return markdown_table(header, cells, right={2, 3, 4, 5, 6, 8, 9, 10})


def legend(rows: list[Row]) -> str:
    reasons = sorted({reason for r in rows for reason, _ in r.stalls[:3]})
    return "\n".join(f"- `{reason}`: {STALLS.get(reason, 'a reason this script has no words for')}."
                     for reason in reasons)


def section(groups: dict, device: Device, versions_line: str, ncu_line: str, note: str = "") -> str:
    """``groups``: title -> rows, or -> the reason it has none."""
    lines = ["## What holds the kernels back: Nsight Compute's counters", "",
             f"Device: {device.name} ({device.sms} SMs), {today()}. {versions_line}; {ncu_line}.", "",
             "Each kernel launched once as benchmarks/fusion.py, bandwidth.py and tuning.py launch it, profiled by `ncu "
             f"--clock-control none` ({', '.join(SECTIONS)}; caches flushed before each replay pass). DRAM bytes / "
             "least: the DRAM traffic over the least the kernel must move (1.00: every byte once). The time is "
             "the profiled launch's, cold caches: the timed benchmarks' sections give the speeds.", ""]
    everything = []
    for title, rows in groups.items():
        lines += [f"### {title}", ""]
        if isinstance(rows, str):
            lines += [rows, ""]
            continue
        everything += rows
        lines += [table(rows), ""]
    if everything:
        lines += ["What the stall reasons in the tables mean (warps held back by each, per instruction issued):",
                  legend(everything), ""]
    if note:
        lines += [note, ""]
    lines.append("`python benchmarks/counters.py` reproduces it on a GPU with Nsight Compute.")
    return "\n".join(lines)


# -- one group under ncu -------------------------------------------------------------------------------------------
def profile_group(ncu: str, group: str, size, seconds: float | None) -> list[Row] | str:
    """The group's rows, or why ncu gave none (its first error line)."""
    with tempfile.TemporaryDirectory() as folder:
        report, manifest = Path(folder) / "counters", Path(folder) / "manifest.json"
        try:
            ran = subprocess.run(profile_command(ncu, report, group, size, manifest), capture_output=True,
                                 text=True, timeout=seconds)
        except subprocess.TimeoutExpired:
            return TIMED_OUT
        printed = ran.stdout + ran.stderr
        errors = [line for line in printed.splitlines() if "==ERROR==" in line or "Error" in line]
        exported = report.with_suffix(".ncu-rep")
        if ran.returncode or not exported.exists() or not manifest.exists():
            print(printed[-3000:])
            why = errors[0].strip() if errors else f"exit status {ran.returncode}"
            return f"Not profiled: ncu could not read the counters here ({why})."
        imported = subprocess.run([ncu, "--import", str(exported), "--csv", "--page", "raw", "--print-units",
                                   "base"], capture_output=True, text=True, timeout=120)
        try:
            return rows_of(launches_in(imported.stdout), json.loads(manifest.read_text()))
        except ValueError as error:
            print(imported.stdout[:3000] + imported.stderr[-1000:])
            return f"Not read: {error}."


def ncu_version(ncu: str) -> str:
    try:
        printed = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
        return printed.strip().splitlines()[-1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "ncu (version unknown)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the softmaxes at 4096 x 1024 only; prints only")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--launch", nargs=2, metavar=("GROUP", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("counters.py"):
        return 0
    if options.launch:
        group, size = options.launch[0], json.loads(options.launch[1])  # a shape comes back as a list
        size = tuple(size) if isinstance(size, list) else size
        launch_once(group_targets(group, size, current_device()), options.manifest)
        return 0
    device = current_device()
    shape = QUICK_SOFTMAX_SHAPE if options.quick else SOFTMAX_SHAPE
    groups = {f"Softmax, {shape[0]} x {shape[1]}": ("softmax", shape)}
    if not options.quick:
        elements = BANDWIDTH_MIB * bandwidth.MIB // bandwidth.ITEM
        groups[f"Map, zip and sum, {BANDWIDTH_MIB} MiB"] = ("bandwidth", elements)
        groups[f"SGEMM tile shapes, {SGEMM_SIZE}^3"] = ("sgemm", SGEMM_SIZE)
    ncu = ncu_path()
    budget, results = TimeBudget(options.seconds), {}
    for title in budget.rows(groups):
        if ncu is None:
            results[title] = "Not profiled: Nsight Compute's `ncu` is not on this machine."
        else:
            left = None if options.seconds is None else max(1.0, options.seconds - (time.monotonic() - budget.start))
            results[title] = profile_group(ncu, *groups[title], left)
            if results[title] == TIMED_OUT:  # named among the rows left out: the part is partial, --resume goes on
                budget.left_out.append(title)
        print(f"  {title}: {'profiled' if not isinstance(results[title], str) else results[title]}", flush=True)
    text = section(results, device, versions(reference_libraries()), ncu_version(ncu) if ncu else "no ncu",
                   budget.note("counters.py"))
    return finish(NAME, text, [], write=not options.quick and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
