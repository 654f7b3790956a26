"""Tuning (module 7) on the CPU: a cost model that predicts a launch's time on a named GPU, and its pictures.

`cost_model("H100")` prices one traced launch (the simulator's count of 32-byte global sectors and of shared-
memory wavefronts, bank conflicts included) with the kernel's compiled resources (registers, shared memory, its
SASS) and its FLOPs, on the data-sheet figures of `roofline.DEVICES` and `occupancy.SMS`:

- occupancy: the blocks an SM holds at once (`occupancy.blocks_per_sm`), hence the *waves* of blocks. A launch
  lasts as long as its busiest SM: full waves of that many blocks, then the last wave's blocks dealt out over the
  SMs (the *tail*). Every term below is one SM's share of the work, stretched by the SMs left idle or part-idle;
- four roofs, the slowest wins: FLOPs at the FP32 peak, *instruction issue*, global sectors at the memory
  bandwidth, shared wavefronts at one per SM per clock (the clock is the FP32 peak / 2 / FP32 lanes per SM).
  Instruction issue: each SM issues `ISSUE_PER_CLOCK` warp instructions per clock, and each pipe takes its own
  share at its own rate (`pipe_rates`: on an H100 the ALU's integer and logic instructions and the integer
  multiply-adds at half the FP32 rate, exp2 and conversions at an eighth); the busiest sets the pace. The
  instructions are counted: every one of the SASS, as often as the trace says its loop runs (`run.issue`, from
  the resources' ``issue_code``). Where the SASS has no line table (no nvdisasm; a kernel linked with CUDA C++;
  a line table refused), a main loop whose FMAs are a share s of its instructions stands in: 1/s instructions
  per FMA (``fma_share``), plus the rolled tile copy's (`tile_loads`);
- latency: fewer than `WARPS_TO_HIDE` warps resident per SM (as the grid fills it) cannot hide the latency of memory and arithmetic
  (Volkov: independent instructions within a thread hide it too, which this rule does not see); a rule of thumb
  for kernels whose waits the model cannot read, replaced by the next bound where it can;
- a *block's own time*: a block waits `GLOBAL_LATENCY` for each *round trip* of its warps' global loads (loads in
  flight together share one; the SASS says which, `run.sass.waits`: every loop's, as often as the trace says it
  runs, `run.issue`; without a line table, its tile copy's, `run.sass.global_loads`), and a block of w warps
  issues at most min(w, 4) instructions per clock. The other blocks of its SM overlap it, but no SM finishes
  before its waves of blocks have each taken that time: few warps per block with many loads each (a rolled copy
  loop) are slow however many blocks an SM holds;
- the roofs' time (the slowest roof, over the tail, times the latency rule) and the waves of a block's own time
  join as sqrt(a^2 + b^2) (`math.hypot`), not as the larger: while a warp waits, the SM issues for the others, but
  not always when they need it, so two limits near each other slow a launch more than either alone (41% over
  both where they are equal, 5% over the larger at 3 to 1). A choice, not a law: the ranks of
  benchmarks/cost_model.py's groups moved by at most 0.03 for norms 1.5 to 4 and 350 to 700 clocks a round
  trip (2026-12-01); `bound_by` names the larger;
- each launch costs `LAUNCH_SECONDS` on top.

Where it is wrong: every global sector is priced as DRAM traffic (caches that serve repeats make real kernels
faster), every round trip takes `GLOBAL_LATENCY` (from L2 or DRAM alike, under any load), the waits for barriers,
shared memory and special functions are unseen (the issue roof assumes a warp ready at every clock otherwise; it
counts the code that ran in the traced launch, `run.issue`), and so is instruction-level parallelism beyond the
loads issued together.
Its job is to rank configurations, not to predict microseconds; `spearman` measures how well it ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .occupancy import SMS, blocks_per_sm
from .roofline import DEVICES, SECTOR_BYTES

ISSUE_PER_CLOCK = 4  # warp instructions an SM issues per clock: one per scheduler, four schedulers (Volta to Hopper)
WARPS_TO_HIDE = 16  # resident warps per SM below which latency shows (4 per scheduler, one instruction in flight each)
LAUNCH_SECONDS = 3e-6  # the cost of a launch on the GPU's side, a few microseconds
# clocks from a global load's issue to its value: ~200-300 from L2, ~500-600 from DRAM (Jia et al. 2018, "Dissecting
# the NVIDIA Volta GPU Architecture via Microbenchmarking"; Luo et al. 2024 on Hopper); tiled kernels hit L2 mostly
GLOBAL_LATENCY = 500


@dataclass(frozen=True)
class Prediction:
    seconds: float
    terms: dict  # roof -> seconds (before the tail and latency factors)
    bound_by: str
    blocks_per_sm: int
    waves: int
    tail_efficiency: float  # blocks / (SMs x the blocks its busiest SM runs)
    latency_factor: float  # >= 1: how much too few resident warps slow that SM down
    block_seconds: float = 0.0  # one block's own time (its round trips and its issue), as the module says
    busiest_pipe: str | None = None  # of the issue roof, where the instructions were counted per pipe
    instructions: float = 0.0  # warp instructions the launch issues, where counted (`run.issue`); else 0


def pipe_rates(device: str) -> dict:
    """Warp instructions per clock per SM of each pipe of `run.issue.PIPES` on ``device``, and of the issue."""
    sm = SMS[device]
    return {"issue": ISSUE_PER_CLOCK, "fma": sm.fp32_lanes / 32, "imad": sm.int32_lanes / 32,
            "alu": sm.int32_lanes / 32, "special": sm.special_lanes / 32, "fp64": sm.fp64_lanes / 32,
            "shuffle": sm.shuffle_lanes / 32}


def predict(sectors: int, shared_wavefronts: int, flops: float, blocks: int, threads: int, registers: int,
            shared_bytes: int, device: str = "H100", fma_share: float | None = None, round_trips: float = 0.0,
            copy_instructions: float = 0.0, global_latency: float = GLOBAL_LATENCY,
            issued: dict | None = None) -> Prediction:
    """The cost model on numbers: see the module's docstring. ``issued``: the launch's warp instructions per pipe
    and in all (``"issue"``) and its warps' round trips (``"round_trips"``; `run.issue.IssueCode.issued`);
    without them, ``fma_share``, FMAs per instruction of the main loop (None: no loop of FMAs, no issue roof), and
    ``copy_instructions`` per thread of its tile copy (`tile_loads`) estimate the instructions, and
    ``round_trips``, per thread of its tile copy, the round trips; ``global_latency``: clocks per round trip."""
    roof, sm = DEVICES[device], SMS[device]
    clock = roof.peak_flops / 2 / (sm.sms * sm.fp32_lanes)
    terms = {"FLOPs": flops / roof.peak_flops, "global memory": sectors * SECTOR_BYTES / roof.bandwidth,
             "shared memory": shared_wavefronts / (sm.sms * clock)}
    warps = math.ceil(threads / 32)
    if issued is not None and "round_trips" in issued:  # counted in every loop: they replace the tile copy's
        round_trips = issued["round_trips"] / (blocks * warps)
    busiest_pipe, instructions = None, issued.get("issue", 0) if issued is not None else 0.0
    if issued is not None:  # counted: each pipe takes count / rate clocks, the busiest sets the pace
        clocks = {pipe: issued.get(pipe, 0) / rate for pipe, rate in pipe_rates(device).items()}
        busiest_pipe = max(clocks, key=clocks.get)
        terms["instruction issue"] = clocks[busiest_pipe] / (sm.sms * clock)
        issued = issued.get("issue", 0) / (blocks * warps)  # per warp
    else:  # per thread: FMAs (FLOPs / 2 per lane) over their share of the main loop, and the copy's
        issued = (flops / 2 / (blocks * threads) / fma_share if fma_share else 0.0) + copy_instructions
        if issued:  # a warp issues one instruction for its 32 lanes
            terms["instruction issue"] = blocks * warps * issued / (ISSUE_PER_CLOCK * sm.sms * clock)
    fit = blocks_per_sm(sm, threads, registers, shared_bytes)
    if not fit.blocks:  # a GPU refuses the launch (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES): it has no time
        short = [why for why, blocks in fit.limits.items() if not blocks]
        raise ValueError(f"cannot launch on the {sm.name}: a block of {threads} threads with {registers} registers "
                         f"each and {shared_bytes} bytes of shared memory fits no SM (its {' and '.join(short)} run out)")
    per_sm = fit.blocks
    waves = max(1, math.ceil(blocks / (per_sm * sm.sms)))
    last = math.ceil((blocks - (waves - 1) * per_sm * sm.sms) / sm.sms)  # the last wave's blocks on its busiest SM
    busiest = (waves - 1) * per_sm + last  # blocks that SM runs, in turn

    def slowed(resident: int) -> float:  # too few warps resident to hide latency
        return max(1.0, WARPS_TO_HIDE / (resident * math.ceil(threads / 32)))

    # the rule of thumb, where the compiled code does not say how a block waits (its round trips, below)
    latency = ((waves - 1) * per_sm * slowed(per_sm) + last * slowed(last)) / busiest if not round_trips else 1.0
    tail = blocks / (busiest * sm.sms)  # the share of the SMs' time that holds blocks
    bound = max(terms, key=terms.get)
    roofs = terms[bound] / tail * latency
    block = (round_trips * global_latency + issued * warps / min(warps, ISSUE_PER_CLOCK)) / clock
    own = waves * block  # the busiest SM runs `waves` rounds of blocks, none shorter than one block
    if own > roofs:
        bound = "a block's own time"
    return Prediction(math.hypot(roofs, own) + LAUNCH_SECONDS, terms, bound, per_sm, waves, tail, latency,
                      block, busiest_pipe, instructions)


def tile_loads(loads, launch, scale: float, blocks: int, threads: int) -> tuple[float, float]:
    """(round trips, instructions) per thread of the tile copy of a launch of ``blocks`` x ``threads``, from the
    compiled code's `run.sass.GlobalLoads` ``loads`` (None: (0, 0)) and the traced ``launch``'s global loads and
    barriers times ``scale``: the tile loop runs once per its barriers, its own loads once per pass, and the loads
    left over are the nested copy loops'."""
    if loads is None or not loads.tile_barriers:
        return 0.0, 0.0
    reads = sum(array.instructions["read"].lanes for array in launch.arrays.values() if array.space == "global")
    passes = launch.block_barriers.sum() * scale / blocks / loads.tile_barriers
    nested = max(0.0, reads * scale / (blocks * threads) - loads.tile_loads * passes) / (loads.inner_loads or math.inf)
    return passes * loads.tile_round_trips + nested * loads.inner_round_trips, nested * loads.inner_instructions


def trace_counts(launch) -> tuple[int, int]:
    """(global 32-byte sectors, shared-memory wavefronts) of one traced launch (``t.last``)."""
    counts = {"global": 0, "shared": 0}
    for array in launch.arrays.values():
        if array.space in counts:
            counts[array.space] += sum(stats.sectors for stats in array.instructions.values())
    return counts["global"], counts["shared"]


class CostModel:
    """A callable for `gpucourse.run.tuning.tune`: ``model(trace, resources, launch, flops, scale) -> seconds``."""

    def __init__(self, device: str = "H100", global_latency: float = GLOBAL_LATENCY):
        if device not in DEVICES or device not in SMS:
            raise ValueError(f"the cost model knows {', '.join(SMS)}, not {device!r}")
        self.device = device
        self.global_latency = global_latency
        self.compute_capability = SMS[device].compute_capability
        self.architecture = "sm_{}{}".format(*self.compute_capability)

    def prediction(self, launch_trace, resources, launch, flops: float, scale: float = 1.0) -> Prediction:
        """Of ``launch`` (its grid and block), from ``launch_trace``'s counts times ``scale`` (1 when it is the
        same launch; the ratio of FLOPs when the trace is of the same kernel at a smaller size)."""
        sectors, wavefronts = (count * scale for count in trace_counts(launch_trace))
        if resources is None:
            raise RuntimeError("the cost model needs the kernel's registers: nvJitLink (the course's cu12 or cu13 "
                               "extra) is missing")
        trips, copy = tile_loads(resources.global_loads, launch_trace, scale, launch.blocks, launch.threads)
        issued = None
        if resources.issue_code is not None:
            warps = launch.blocks * math.ceil(launch.threads / 32)
            issued = resources.issue_code.issued(launch_trace.kernel_lines, warps, scale, launch_trace.lines_not_run)
        return predict(sectors, wavefronts, flops, launch.blocks, launch.threads, resources.registers,
                       resources.shared_bytes, self.device, resources.fma_share, trips, copy, self.global_latency,
                       issued)

    def __call__(self, launch_trace, resources, launch, flops: float, scale: float = 1.0) -> float:
        return self.prediction(launch_trace, resources, launch, flops, scale).seconds


def cost_model(device: str = "H100", global_latency: float = GLOBAL_LATENCY) -> CostModel:
    """The cost model for ``device`` (``"T4"``, ``"A100"``, ``"H100"``, ``"H200"``); ``global_latency``: clocks
    of a global load (`GLOBAL_LATENCY`), to see how a ranking depends on it."""
    return CostModel(device, global_latency)


def modelled_device(gpu_name: str | bytes) -> str | None:
    """The cost model's name for the GPU that calls itself ``gpu_name`` (``"NVIDIA H200"``: ``"H200"``; numba
    gives bytes on some versions), or None when the model has no data sheet for it."""
    name = gpu_name.decode() if isinstance(gpu_name, bytes) else gpu_name
    return next((device for device in SMS if device in name), None)


def ranks(values) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    values = np.asarray(values, float)
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        same = values == v
        r[same] = r[same].mean()
    return r


def spearman(a, b) -> float:
    """Spearman's rank correlation of two sequences: 1 when they order the items the same way, -1 reversed."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("spearman needs two sequences of the same length, at least 2")
    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    scale = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / scale) if scale else float("nan")


def one_config_or_one_per_shape(swept: list, shapes: list, tuned_for, label=str) -> tuple[str, dict]:
    """A Markdown table of *version 1*, the one config of ``swept`` (`run.tuning.sweep`) with the least total time
    on the shapes of workload ``tuned_for``, against *version 2*, the fastest config per shape; and version 2's
    speed-up per workload. ``shapes``: (workload, name) of each size of the sweep, in order."""
    version_1 = min(swept, key=lambda pair: sum(t for (w, _), t in zip(shapes, pair[1]) if w == tuned_for))
    rows = [f"Version 1: {label(version_1[0])}.", "", "| workload | product | version 1 µs | version 2's pick | "
            "version 2 µs |", "|---|---|---:|---|---:|"]
    gain = {}
    for workload in dict.fromkeys(w for w, _ in shapes):
        mine = [i for i, (w, _) in enumerate(shapes) if w == workload]
        picks = {i: min([version_1, *swept], key=lambda pair: pair[1][i]) for i in mine}  # a tie keeps version 1
        rows += [f"| {workload} | {shapes[i][1]} | {version_1[1][i] * 1e6:.0f} | {label(picks[i][0])} | "
                 f"{picks[i][1][i] * 1e6:.0f} |" for i in mine]
        old, new = sum(version_1[1][i] for i in mine), sum(picks[i][1][i] for i in mine)
        gain[workload] = old / new
        rows.append(f"| {workload} | **all** | **{old * 1e6:.0f}** | | **{new * 1e6:.0f}** ({gain[workload]:.2f}x) |")
    return "\n".join(rows), gain


# -- pictures --------------------------------------------------------------------------------------------------------
def _plain_numbers(axis) -> None:
    """Ticks of a log axis as plain numbers (20, not 2 x 10^1)."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


def draw_waves(device: str = "H100", threads: int = 256, registers=(32, 255), flops_per_block: float = 2.0**23,
               rounds: int = 4, ax=None):
    """Predicted time (`predict`) of launches of 1 to ``rounds`` x the SM count of blocks that each do
    ``flops_per_block`` FLOPs (FLOPs belong to one SM, where bandwidth is shared), one line per register count in
    ``registers`` (which sets the blocks an SM holds at once), against the same work spread evenly over every SM
    at full speed."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    sm = SMS[device]
    blocks = np.arange(1, rounds * sm.sms + 1)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    for count in registers:
        per_sm = blocks_per_sm(sm, threads, count).blocks
        times = [predict(0, 0, b * flops_per_block, int(b), threads, count, 0, device).seconds * 1e6 for b in blocks]
        ax.step(blocks, times, where="post", label=f"{count} registers: {per_sm} block{'s' * (per_sm > 1)} per SM "
                f"at once")
    full_speed = predict(0, 0, sm.sms * flops_per_block, sm.sms, threads, min(registers), 0, device)
    per_block = (full_speed.seconds - LAUNCH_SECONDS) / full_speed.latency_factor  # one SM's block, latency hidden
    ax.plot(blocks, per_block * 1e6 * blocks / sm.sms + LAUNCH_SECONDS * 1e6, ":", color="0.4",
            label="the same work spread evenly over every SM")
    for k in range(1, rounds + 1):
        ax.axvline(k * sm.sms, color="0.85", lw=1)
    ax.set_xticks(sm.sms * np.arange(rounds + 1))
    ax.set_xlabel(f"blocks of {threads} threads, each doing {flops_per_block / 1e6:.1f} MFLOP "
                  f"(lines: multiples of {sm.sms} blocks)")
    ax.set_ylabel("predicted µs")
    ax.set_title(f"{device}: a launch lasts as long as its busiest SM", fontsize=10)
    ax.legend(fontsize=10, loc="upper left", bbox_to_anchor=(0, -0.22), frameon=False)  # in the axes it hid a step
    ax.figure.tight_layout()
    return ax.figure


def heat_map(trials: list, rows: str, columns: str, title: str = "", ax=None):
    """The tuning space as a heat map of time (µs) over two parameters (best of the other parameters per cell)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    timed = [t for t in trials if "seconds" in t]
    ys = sorted({t["config"][rows] for t in timed})
    xs = sorted({t["config"][columns] for t in timed})
    grid = np.full((len(ys), len(xs)), np.nan)
    for t in timed:
        i, j = ys.index(t["config"][rows]), xs.index(t["config"][columns])
        grid[i, j] = np.fmin(grid[i, j], t["seconds"] * 1e6)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    image = ax.imshow(grid, cmap="viridis_r")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(columns)
    ax.set_ylabel(rows)
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isnan(grid[i, j]):  # dark text on the light (fast) end of the colour map
                ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=10,
                        color="black" if image.norm(grid[i, j]) < 0.5 else "white")
    ax.figure.colorbar(image, ax=ax, label="µs, the best over the other parameters\n(blank: not allowed or failed)")
    ax.set_title(title, fontsize=10)
    return ax.figure


def predicted_vs_measured(predicted, measured=None, labels=None, ax=None):
    """Predicted times against measured ones (log-log), with Spearman's rank correlation in the title; with no
    measurement, the predictions alone, in rank order, labelled as predictions."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 0.4 * len(predicted)), 4) if measured is None else (5, 4))
    predicted = np.asarray(predicted, float) * 1e6
    if measured is None:
        order = np.argsort(predicted)
        ax.plot(range(len(order)), predicted[order], "o")
        if labels is not None:
            ax.set_xticks(range(len(order)), [labels[k] for k in order], rotation=60, ha="right", fontsize=10)
        ax.set_ylim(0, predicted.max() * 1.1)  # from 0: heights in proportion to the times
        ax.set_xlabel("configurations, the predicted fastest first")
        ax.set_ylabel("predicted µs")
        ax.set_title("Prediction only: no GPU measurement here", fontsize=10)
        return ax.figure
    measured = np.asarray(measured, float) * 1e6
    ax.loglog(measured, predicted, "o")
    low, high = min(measured.min(), predicted.min()) / 1.5, max(measured.max(), predicted.max()) * 1.5
    ax.plot([low, high], [low, high], color="0.6", ls=":")
    _plain_numbers(ax.xaxis)
    _plain_numbers(ax.yaxis)
    ax.set_xlabel("measured µs")
    ax.set_ylabel("predicted µs")
    ax.set_title(f"Spearman rank correlation {spearman(predicted, measured):.2f}", fontsize=10)
    return ax.figure
