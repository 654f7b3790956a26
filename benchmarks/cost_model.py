"""The cost model against the times a GPU recorded, priced again on the CPU: no GPU needed.

    python benchmarks/cost_model.py             # writes its section of RESULTS.md
    python benchmarks/cost_model.py --print     # prints only

The GPU benchmarks record measured times in benchmarks/RESULTS.md. This script prices the same launches with the
cost model as it is now (`gpucourse.figures.tuning.cost_model`, for the GPU that measured them), each from a traced
launch at a small size scaled by FLOPs, as benchmarks/tuning.py prices its candidates, and scores each group of
launches with Spearman's rank correlation of predicted and measured times:

- the SGEMM ladder at 4096^3 (section `matmul`): module 3's five kernels, each at its own launch configuration;
- the convolutions of ResNet conv2_x 3x3, batch 32 (section `conv`): the four algorithms of tuning.py's space
  ``conv``;
- the fused softmaxes at 16384 x 4096 (section `fusion`): row-fused, online, in registers, and both builds of
  `softmax_vectorised` where they were measured;
- the timed candidates of the tuning spaces (section `tuning`, its table "Every timed candidate"), a group per
  space and shape, where a GPU run recorded them.

So a change of the model is scored against a GPU's own times before the next GPU run (goal, as tuning.py's: at least
0.8 in every group). The score of record of the tuning spaces is the `tuning` section's where its GPU run priced
its candidates, and this section's where it timed them only (gpu-check's share, `--seconds`). A group whose section is missing,
or was measured on a GPU the model has no data sheet for, is named and left out. Where the `counters` section
(benchmarks/counters.py, Nsight Compute) holds the warp instructions a launch executed, the model's count of them
(`gpucourse.run.issue`) stands beside it: whether a time the model misses is instructions it did not count or
stalls it does not see. Needs nvJitLink (the cu12 or cu13 extra: the model's registers); a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_machine, finish, markdown_table, package_versions, today  # noqa: E402

NAME = "cost_model"  # its section of benchmarks/RESULTS.md
GOAL = 0.8  # Spearman's rank correlation in every group, as benchmarks/tuning.py's goal
LADDER_SIZE, LADDER_TRACED = 4096, (128, 128, 64)  # the matmul section's shape, and the size the model traces
CONV_LAYER, CONV_CASE = "conv2_x 3x3", "ResNet conv2_x 3x3, batch 32"  # the conv section's row, tuning.py's case
SOFTMAX_SIZE, SOFTMAX_TRACED = (16384, 4096), (8, 4096)  # fusion.py's goal size, and the rows the model traces
# fusion.py's fused softmaxes: None, one block per row (`launch_softmax`); else the build on the flattened matrices
# and its vectors per thread
SOFTMAX_PATHS = {"`softmax_row_fused`": None, "`softmax_online`": None, "`softmax_registers`": None,
                 "`softmax_vectorised`": ("vectorised", 8),
                 "`softmax_vectorised`, 4 vectors per thread": ("vectorised", 4),
                 "`softmax_pipelined`": ("pipelined", 8)}
CONV_ALGORITHMS = {"`conv_direct`": "direct", "`conv_implicit_gemm`": "implicit_gemm",
                   "`conv_implicit_gemm_nhwc`": "implicit_gemm_nhwc",
                   "`conv_implicit_gemm_warp_tiled`": "implicit_gemm_warp_tiled"}


@dataclass
class Launch:
    group: str
    label: str
    measured: float  # seconds, as recorded
    predicted: float | None = None  # seconds, priced here; None: it cannot launch on the modelled GPU
    bound_by: str = ""
    instructions: float = 0.0  # warp instructions, as the model counts them (0: not counted)


@dataclass
class Group:
    name: str
    source: str  # "section `matmul`, on NVIDIA H200, 2026-11-29"
    launches: list

    @property
    def priced(self) -> list:
        return [launch for launch in self.launches if launch.predicted is not None]

    @property
    def spearman(self) -> float | None:
        from gpucourse.figures import tuning as ft  # noqa: PLC0415

        priced = self.priced
        return ft.spearman([p.predicted for p in priced], [p.measured for p in priced]) if len(priced) > 1 else None


def modelled(section: str) -> tuple[str | None, str]:
    """(the cost model's name for the GPU that measured ``section``, or None; "on DEVICE, DATE")."""
    from gpucourse.course import results  # noqa: PLC0415
    from gpucourse.figures import tuning as ft  # noqa: PLC0415

    where = results.measured_on(section) or "on an unnamed device"
    return ft.modelled_device(where.removeprefix("on ").split(",")[0]), where


def first_number(cell: str) -> float:
    """``0.98`` of ``"0.98 (2%)"``; ``1243.0`` of ``"1,243"``."""
    return float(re.match(r"[\d,.]+", cell.strip()).group().replace(",", ""))


def ladder_launches(section: str) -> list[Launch]:
    """The five kernels of module 3's ladder at 4096^3 with their recorded times (from TFLOP/s)."""
    from gpucourse.course import results  # noqa: PLC0415
    from gpucourse.kernels import matmul as mm  # noqa: PLC0415

    lines = results.select_table(section, rows=[f"{LADDER_SIZE}^3"]).markdown.splitlines()
    header, row = results.cells(lines[0]), results.cells(lines[2])  # the first row of that shape
    launches = []
    for kernel in mm.KERNELS:
        name = kernel.py_func.__name__
        column = next(k for k, title in enumerate(header) if title.startswith(f"`{name}`"))
        seconds = 2.0 * LADDER_SIZE**3 / (first_number(row[column]) * 1e12)
        launches.append(Launch(f"SGEMM ladder, {LADDER_SIZE}^3", name, seconds))
    return launches


def one_launch_problem(name: str, geometry, arguments, size: tuple, traced: tuple, flops):
    """A one-launch `run.tuning.Problem` the model prices: ``geometry(shape) -> (kernel, grid, block)`` at the
    recorded ``size`` (priced, never run: no arrays), and at ``traced`` with ``arguments(traced)``, the launch the
    model traces; ``flops(shape)`` of each."""
    from gpucourse.run import tuning as rt  # noqa: PLC0415

    space, args = rt.Space("one launch", {"launch": (0,)}), arguments(traced)
    proxy = rt.Problem(name, space, lambda _: rt.Launch(*geometry(traced), args), lambda: None, flops(traced),
                       {"shape": traced}, ("float32",))
    return rt.Problem(name, space, None, lambda: None, flops(size), {"shape": size}, ("float32",), proxy,
                      geometry=lambda _: geometry(size))


def ladder_problem(kernel, n: int, traced: tuple = LADDER_TRACED):
    """``C = A @ B`` (n^3, float32) by ``kernel`` at its own launch configuration (`kernels.matmul.configuration`),
    traced at ``traced`` (M, N, K)."""
    from gpucourse.kernels import matmul as mm  # noqa: PLC0415

    def arguments(shape):
        M, N, K = shape
        rng = np.random.default_rng(0)
        return (np.zeros((1, M, N), np.float32), rng.standard_normal((1, M, K), np.float32),
                rng.standard_normal((1, K, N), np.float32))

    return one_launch_problem(kernel.py_func.__name__, lambda s: (kernel, *mm.configuration(kernel, (1, s[0], s[1]))),
                              arguments, (n, n, n), traced, lambda s: 2.0 * s[0] * s[1] * s[2])


def softmax_problem(path: str, size: tuple, sms: int, traced: tuple = SOFTMAX_TRACED):
    """The row softmax of fusion.py's row ``path`` at ``size`` (rows, cols), launched as fusion.py launches it on a
    GPU of ``sms`` SMs, traced at ``traced``; FLOPs as `grading.tuning.softmax_problem` counts them (5 per element).
    The pipelined kernel's persistent grid is traced on as many SMs as its rows' share of them (at least one), so
    that its blocks take turns there too (its code for the next turn runs: `run.issue` counts the code that ran)."""
    from gpucourse.kernels import fusion  # noqa: PLC0415

    build = SOFTMAX_PATHS[path]
    if build is None:
        kernel, configure = getattr(fusion, path.strip("`")), None
    else:  # the pipelined kernel: the vectorised one's blocks, on the persistent grid of the GPU's SMs
        family, vectors = build
        make, configure = ((fusion.make_softmax_vectorised, fusion.vectorised_configuration) if family == "vectorised"
                           else (fusion.make_softmax_pipelined, fusion.pipelined_configuration))
        kernel = make(vectors)

    def geometry(shape):
        rows, cols = shape
        if configure is not None:  # the flattened matrices
            share = {"sms": max(1, sms * rows // size[0])} if family == "pipelined" else {}
            blocks, block = configure(rows, cols, vectors=vectors, **share)
            return kernel, (blocks,), block
        threads = fusion.registers_threads(cols) if kernel is fusion.softmax_registers else fusion.THREADS
        return kernel, (rows,), (threads,)  # one block per row, as `launch_softmax` gives it

    def arguments(shape):
        y, x = np.zeros(shape, np.float32), np.random.default_rng(0).standard_normal(shape, np.float32)
        return (y, x) if build is None else (y.ravel(), x.ravel(), shape[1])

    return one_launch_problem(path, geometry, arguments, size, traced, lambda shape: 5.0 * shape[0] * shape[1])


def softmax_launches(section: str) -> list[Launch]:
    """fusion.py's fused softmaxes at 16384 x 4096 with their recorded times (the naive one's three launches and
    the libraries left out)."""
    from gpucourse.course import results  # noqa: PLC0415

    label = f"{SOFTMAX_SIZE[0]} x {SOFTMAX_SIZE[1]}"
    lines = results.select_table(section, "Row softmax").markdown.splitlines()
    header = results.cells(lines[0])
    path, size, ms = (header.index(name) for name in ("softmax", "rows x cols", "time (ms)"))
    return [Launch(f"fused softmaxes, {label}", cells[path], first_number(cells[ms]) / 1e3)
            for cells in map(results.cells, lines[2:]) if cells[path] in SOFTMAX_PATHS and cells[size] == label]


def conv_launches(section: str) -> list[Launch]:
    """The four algorithms of tuning.py's conv space at conv2_x 3x3, batch 32, with their recorded times."""
    from gpucourse.course import results  # noqa: PLC0415

    table = results.select_table(section, "Every measurement", rows=list(CONV_ALGORITHMS))
    lines = table.markdown.splitlines()
    header = results.cells(lines[0])
    kernel, layer, ms = (header.index(name) for name in ("kernel", "layer", "time (ms)"))
    return [Launch(f"convolutions, {CONV_LAYER}", CONV_ALGORITHMS[cells[kernel]], first_number(cells[ms]) / 1e3)
            for cells in map(results.cells, lines[2:])
            if cells[kernel] in CONV_ALGORITHMS and cells[layer] == CONV_LAYER]


def parsed_config(text: str) -> dict:
    """``{"BM": 128, "kernel": "row_fused"}`` of ``"BM=128, kernel=row_fused"`` (tuning.py's `config_text`)."""
    pairs = (item.split("=", 1) for item in text.split(", "))
    return {key: int(value) if re.fullmatch(r"-?\d+", value) else value for key, value in pairs}


def candidate_launches(section: str) -> dict[tuple[str, str], list[Launch]]:
    """The tuning section's timed candidates by (space, shape), with their recorded times; {} where a run recorded
    none (before 2026-11-30 tuning.py printed them to its log only)."""
    from gpucourse.course import results  # noqa: PLC0415
    import tuning  # noqa: PLC0415

    try:
        table = results.select_table(section, tuning.CANDIDATES)
    except LookupError:
        return {}
    lines = table.markdown.splitlines()
    found: dict = {}
    for space, shape, config, measured, _ in map(results.cells, lines[2:]):
        found.setdefault((space, shape), []).append(Launch(f"tuning space {space}, {shape}", config,
                                                          first_number(measured) / 1e3))
    return found


def price(launches: list[Launch], problem, config_of, model) -> None:
    """Each launch's prediction by ``model`` (None where it cannot launch on the modelled GPU)."""
    from gpucourse.run import tuning as rt  # noqa: PLC0415

    for launch in launches:
        try:
            prediction = rt.prediction(problem, config_of(launch), model)
        except ValueError:  # a block that fits no SM
            continue
        launch.predicted, launch.bound_by = prediction.seconds, prediction.bound_by
        launch.instructions = prediction.instructions
        if prediction.bound_by == "instruction issue" and prediction.busiest_pipe not in (None, "issue"):
            launch.bound_by += f" ({prediction.busiest_pipe} pipe)"


def groups(results_path: Path | None = None) -> tuple[list[Group], list[str]]:
    """Every group priced, and a line for each group left out (why)."""
    from gpucourse.course import results  # noqa: PLC0415
    from gpucourse.figures import tuning as ft  # noqa: PLC0415
    from gpucourse.kernels import matmul as mm  # noqa: PLC0415
    import tuning  # noqa: PLC0415

    path = results_path or results.RESULTS
    done, left_out = [], []

    def read(name: str):
        """(section, its model, "section `name`, on DEVICE, DATE"), or None (and why, in left_out)."""
        section = results.recorded(name, path)
        if section is None:
            left_out.append(f"section `{name}`: not recorded")
            return None
        device, where = modelled(section)
        if device is None:
            left_out.append(f"section `{name}` ({where}): the model has no data sheet for that GPU")
            return None
        return section, ft.cost_model(device), f"section `{name}`, {where}"

    if found := read("matmul"):
        section, model, source = found
        launches = ladder_launches(section)
        for kernel, launch in zip(mm.KERNELS, launches):
            price([launch], ladder_problem(kernel, LADDER_SIZE), lambda _: {"launch": 0}, model)
        done.append(Group(launches[0].group, source, launches))
    if found := read("conv"):
        section, model, source = found
        launches = conv_launches(section)
        problem = tuning.problem_of(next(c for c in tuning.CASES if c.family == "conv" and c.label == CONV_CASE))
        price(launches, problem, lambda launch: {"algorithm": launch.label}, model)
        done.append(Group(launches[0].group, source, launches))
    if found := read("fusion"):
        section, model, source = found
        launches = softmax_launches(section)
        for launch in launches:
            problem = softmax_problem(launch.label, SOFTMAX_SIZE, ft.SMS[modelled(section)[0]].sms)
            price([launch], problem, lambda _: {"launch": 0}, model)
        done.append(Group(launches[0].group, source, launches))
    if found := read("tuning"):
        section, model, source = found
        every = candidate_launches(section)
        if not every:
            left_out.append(f"{source}: no table \"{tuning.CANDIDATES.lstrip('# ')}\" (tuning.py records one from "
                            "2026-11-30 on)")
        for (space, shape), launches in every.items():
            case = next(c for c in tuning.CASES + tuning.QUICK_CASES if c.family == space and c.label == shape)
            price(launches, tuning.problem_of(case), lambda launch: parsed_config(launch.label), model)
            done.append(Group(launches[0].group, source, launches))
    return done, left_out


COUNTED_AS = {"tuning space sgemm": "matmul_register_tiled, "}  # group -> what counters.py's label adds before ours


def plain(label: str) -> str:
    """A launch's label without backticks and a note in parentheses: ``matmul_warp_tiled`` of
    ``"`matmul_warp_tiled` (the top rung)"``."""
    return label.replace("`", "").split(" (")[0].strip()


def ncu_counts(results_path: Path | None = None) -> tuple[dict, str | None]:
    """({plain label: (warp instructions, SM clock in Hz)} of the `counters` section's launches, where it recorded
    them; "on DEVICE, DATE" of that section, or None where it is not recorded)."""
    from gpucourse.course import results  # noqa: PLC0415

    section = results.recorded("counters", results_path or results.RESULTS)
    if section is None:
        return {}, None
    where = re.search(r"^Device: (.+?) \(\d+ SMs\), (\d{4}-\d{2}-\d{2})", section, re.M)
    found = {}
    for _, lines in results.tables(section):
        header = results.cells(lines[0])
        if "warp instructions (millions)" not in header:
            continue
        kernel, count, clock = (header.index(name) for name in ("kernel", "warp instructions (millions)",
                                                                 "SM clock (GHz)"))
        for cells in map(results.cells, lines[2:]):
            if cells[count] != "n/a":
                found[plain(cells[kernel])] = (first_number(cells[count]) * 1e6,
                                               first_number(cells[clock]) * 1e9 if cells[clock] != "n/a" else None)
    return found, f"on {where[1]}, {where[2]}" if where else "on an unnamed device"


def instruction_lines(done: list[Group], counts: dict, where: str | None) -> list[str]:
    """The model's count of warp instructions beside Nsight Compute's, for the launches both have."""
    rows = [[g.name, launch.label, f"{launch.instructions / 1e6:,.2f}", f"{counts[key][0] / 1e6:,.2f}",
             f"{launch.instructions / counts[key][0]:.2f}",
             f"{counts[key][1] / 1e9:.2f}" if counts[key][1] else "n/a"]
            for g in done for launch in g.priced
            if launch.instructions and (key := COUNTED_AS.get(g.name, "") + plain(launch.label)) in counts]
    title = ["", "### Instructions: the model's count against Nsight Compute's", ""]
    if not rows:
        return title + [f"Not compared: the `counters` section ({where or 'not recorded'}) has no count of warp "
                        "instructions for these launches (`benchmarks/counters.py` records them from 2026-12-01 on)."]
    return title + [f"Warp instructions of each launch as `gpucourse.run.issue` counts them from a traced launch, "
                    f"beside ncu's `smsp__inst_executed.sum` (section `counters`, {where}), and the SMs' clock ncu "
                    "saw (the model assumes the boost clock).", "",
                    markdown_table(["group", "launch", "model (millions)", "ncu (millions)", "model / ncu",
                                    "SM clock (GHz)"], rows, right={2, 3, 4, 5})]


def fastest(launches: list[Launch], key) -> str:
    return min(launches, key=key).label if launches else "-"


def section(done: list[Group], left_out: list[str], counted: tuple = ({}, None)) -> str:
    """The report; ``counted``: `ncu_counts`."""
    scores = [g.spearman for g in done if g.spearman is not None]
    worst = min(scores) if scores else None
    verdict = ("no group priced" if worst is None else
               f"{'met' if worst >= GOAL else 'NOT met'} (lowest {worst:.2f} over {len(scores)} groups)")
    summary = markdown_table(
        ["group", "measured", "launches (priced)", "Spearman", "the model's fastest", "measured fastest"],
        [[g.name, g.source.removeprefix("section "), f"{len(g.launches)} ({len(g.priced)})",
          f"{g.spearman:.2f}" if g.spearman is not None else "-",
          fastest(g.priced, lambda launch: launch.predicted), fastest(g.launches, lambda launch: launch.measured)]
         for g in done], right={3})
    every = markdown_table(
        ["group", "launch", "measured ms", "predicted ms", "bound by"],
        [[g.name, launch.label, f"{launch.measured * 1e3:.4g}",
          f"{launch.predicted * 1e3:.4g}" if launch.predicted is not None else "cannot launch", launch.bound_by]
         for g in done for launch in g.launches], right={2, 3})
    return "\n".join([
        "## The cost model against the recorded GPU times (priced on a CPU)",
        "",
        f"`python benchmarks/cost_model.py` on {cpu_machine()}, no GPU.",
        "",
        f"- Date: {today()}",
        f"- Versions: {package_versions('numba', 'numba-cuda', 'numpy')}",
        "- Cost model: gpucourse.figures.tuning for the GPU that measured each section, each launch priced from a "
        "traced launch at a small size scaled by FLOPs (benchmarks/tuning.py's proxies; the ladder at "
        f"{'x'.join(map(str, LADDER_TRACED))}, the softmaxes at {SOFTMAX_TRACED[0]} x {SOFTMAX_TRACED[1]}).",
        f"- Goal: Spearman >= {GOAL} in every group: {verdict}. The tuning spaces' score of record (issue 23) is "
        "the `tuning` section's where its GPU run priced the candidates, and this one's where it timed them only.",
        *([f"- Left out: {'; '.join(left_out)}."] if left_out else []),
        "",
        summary,
        "",
        "### Every launch",
        "",
        every,
        *instruction_lines(done, *counted),
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print the section; do not write RESULTS.md")
    arguments = parser.parse_args(argv)
    from gpucourse.run import resources_problem  # noqa: PLC0415 (importing gpucourse picks the backend)

    why = resources_problem()
    if why:
        print(f"cost_model: the model needs the kernels' registers: {why}. Nothing recorded.")
        return 1
    return finish(NAME, section(*groups(), ncu_counts()), [], write=not arguments.print)


if __name__ == "__main__":
    sys.exit(main())
