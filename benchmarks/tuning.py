"""Module 7 on a GPU: the autotuner over the SGEMM, conv and softmax spaces, and how well the cost model ranks them.

    python benchmarks/tuning.py              # SGEMM 1024^3 and 4096^3, ResNet conv2_x, softmax 4096 x 4096; writes RESULTS.md
    python benchmarks/tuning.py --quick      # smaller shapes, a budget of 8, 3 samples, prints only
    python benchmarks/tuning.py --no-write
    python benchmarks/tuning.py --seconds 300   # each space's largest shape first, the rest while 300 s last;
                                                # measured only: cost_model.py prices them on a CPU

Needs a CUDA GPU; anywhere else it prints one line saying so and exits with status 0.

For each space and shape: `gpucourse.run.tuning.tune` times every candidate on the GPU (each checked against its
NumPy reference first; CUDA events, warm-up, median), random search with a budget for the SGEMM's 135 tile shapes,
the whole space for the others. The tuning time is that search's wall time, compiling included. The best config is
timed again with the same timer (`gpucourse.run.timing`, the GPU held while launches queue; the fastest of many
noisy candidates is biased low) and compared with the library: cuBLAS fp32 (`torch.matmul`, TF32 off), cuDNN
(`torch.nn.functional.conv2d`, TF32 off, benchmark mode), `torch.softmax`. The cost model
(`gpucourse.figures.tuning.cost_model`, for the data sheet of the GPU it runs on when that is a T4, A100, H100 or H200)
then predicts each timed candidate from a traced launch of the same kernel at a small size, scaled by FLOPs;
Spearman's rank correlation between predicted and measured times is the model's score (goal: at least 0.8). With
``--seconds`` (gpu-check's share of a device command) the candidates are timed only, and `benchmarks/cost_model.py`
prices the recorded times on a CPU afterwards (the pricing, a traced launch each, took more than half of the
SGEMM's 54 s on the H200's machine on 2026-11-30, so that no other space had time left). A
candidate that computes a wrong result is reported and nothing is recorded; one that cannot launch (a block that fits
no SM: registers x threads past the register file) is named in the section, as lecture 3 warns a tile search must
expect. TF32 is off as in matmul.py and conv.py (``NVIDIA_TF32_OVERRIDE=0`` before the libraries load, and PyTorch's
switches). Candidates are timed on one set of buffers: at 1024^3 (12 MiB) they stay in the L2, unlike matmul.py's.

A run cut short by ``--seconds`` keeps what an earlier run on the same GPU recorded: the cases the section already
holds for this GPU are measured last, and those this run had no time for stay in the section as they were (each
with the date it was measured), so that short device commands fill the section case by case (`Carried`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402
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

NAME = "tuning"  # its section of benchmarks/RESULTS.md
GOAL = 0.8  # Spearman's rank correlation of the cost model's predictions with the measured times
CANDIDATES = "### Every timed candidate"  # the heading of the table of each candidate's time and prediction
SAMPLES, QUICK_SAMPLES = 5, 3
BUDGET, QUICK_BUDGET = 24, 8


@dataclass(frozen=True)
class Case:
    family: str  # "sgemm" (module 3's register-tiled kernel), "sgemm_warp" (its warp-tiled top rung), "conv", "softmax"
    label: str  # the shape, for the table
    reference: str  # the library it is compared with

    @property
    def name(self) -> str:
        """``"sgemm 4096^3"``: the row's name, in the log and the time budget's note."""
        return f"{self.family} {self.label}"


CASES = [Case("sgemm", "1024^3", "cuBLAS fp32"), Case("sgemm", "4096^3", "cuBLAS fp32"),
         Case("sgemm_warp", "4096^3", "cuBLAS fp32"),  # module 3's top rung, `sgemm.make_warp_tiled`
         Case("conv", "ResNet conv2_x 3x3, batch 32", "cuDNN fp32"), Case("softmax", "4096 x 4096", "torch.softmax")]
QUICK_CASES = [Case("sgemm", "512^3", "cuBLAS fp32"), Case("sgemm_warp", "512^3", "cuBLAS fp32"),
               Case("conv", "ResNet conv2_x 3x3, batch 4", "cuDNN fp32"),
               Case("softmax", "1024 x 1024", "torch.softmax")]


@dataclass
class Row:
    case: Case
    candidates: int  # valid configs of the space
    tried: int
    best: dict | None
    best_ms: float | None  # the best config, timed again after the search
    reference_ms: float | None
    tuning_s: float
    predicted: list = field(default_factory=list)  # seconds, one per timed candidate
    measured: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # "config: error" of the candidates that failed or were wrong
    spearman: float | None = None  # of predicted and measured
    timed: list = field(default_factory=list)  # the timed candidates' configs, in the order of predicted

    @property
    def kernel(self) -> str:
        return self.case.name

    @property
    def wrong(self) -> bool:
        """A candidate computed a wrong result (one that cannot launch is a finding, not a failure)."""
        return any("wrong result" in error for error in self.errors)

    @property
    def not_launched(self) -> list:
        return [error for error in self.errors if "wrong result" not in error]

    @property
    def percent_of_reference(self) -> float | None:
        return 100 * self.reference_ms / self.best_ms if self.best_ms and self.reference_ms else None


CARRIED = "Carried from earlier runs on this GPU, not measured in this one:"  # the section's line naming them


@dataclass(frozen=True)
class Carried:
    """A case an earlier run on the same GPU recorded, kept in the section by a run that had no time for it."""

    name: str  # `Case.name`
    date: str  # when it was measured
    row: str  # its line of the main table
    candidates: list  # its lines of the table of every timed candidate


def carried_cases(recorded: str | None, device_name: str) -> dict[str, Carried]:
    """{case name: `Carried`} of the ``recorded`` section, where it was measured on ``device_name``; {} otherwise."""
    from gpucourse.course import results  # noqa: PLC0415 (importing gpucourse picks the backend)

    if not recorded or not re.search(rf"^`[^`]+` on {re.escape(device_name)} \(", recorded, re.M):
        return {}
    date = re.search(r"^- Date: (\S+)", recorded, re.M)[1]
    earlier = re.search(rf"^{re.escape(CARRIED)} (.*)\.$", recorded, re.M)
    dates = dict((name, day) for name, day in re.findall(r"(.+?) \((\d{4}-\d{2}-\d{2})\)(?:, |$)", earlier[1])) \
        if earlier else {}
    found = results.tables(recorded)
    main = found[0][1][2:] if found else []
    candidates = next((lines[2:] for heading, lines in found if heading == CANDIDATES.lstrip("# ")), [])
    cases = {}
    for line in main:
        space, shape = results.cells(line)[:2]
        name = Case(space, shape, "").name
        cases[name] = Carried(name, dates.get(name, date), line,
                              [c for c in candidates if results.cells(c)[:2] == [space, shape]])
    return cases


def measuring_order(cases: list[Case], carried: dict) -> list[Case]:
    """The cases a run measures, in turn: those the section lacks first (each space's largest shape before its
    others: the goal is a rank correlation in every space), then those it already holds (`Carried`)."""
    largest = {[c for c in cases if c.family == family][-1].name for family in {c.family for c in cases}}
    return sorted(cases, key=lambda case: (case.name in carried, case.name not in largest))


def problem_of(case: Case):
    from gpucourse.grading import tuning as gt  # noqa: PLC0415 (importing gpucourse picks the backend)

    if case.family.startswith("sgemm"):
        from gpucourse.kernels import sgemm  # noqa: PLC0415
        from gpucourse.kernels import matmul as mm  # noqa: PLC0415

        n = int(case.label.split("^")[0])
        factory = sgemm.make_warp_tiled if case.family == "sgemm_warp" else mm.make_register_tiled
        return gt.sgemm_problem(n, n, n, factory=factory, traced=(128, 128, 64))
    if case.family == "conv":
        batch = int(case.label.rsplit(" ", 1)[1])
        return gt.conv_problem(batch, 64, 56, 56, 64, traced=(1, 64, 16, 16, 64))
    rows, columns = (int(v) for v in case.label.split(" x "))
    return gt.softmax_problem(rows, columns, traced=(8, 512))


def reference_launch(case: Case, problem, torch):
    """A function that runs the library's version of ``case`` once, on torch tensors of the same shapes, TF32 off."""
    import conv  # noqa: PLC0415 (benchmarks/: their TF32 switches, one way for every script)
    import matmul  # noqa: PLC0415

    matmul.tf32_off_torch(torch)
    conv.tf32_off_torch(torch)
    torch.backends.cudnn.benchmark = True
    s = problem.shapes
    if case.family.startswith("sgemm"):
        a = torch.randn(s["M"], s["K"], device="cuda")
        b = torch.randn(s["K"], s["N"], device="cuda")
        return lambda: torch.matmul(a, b)
    if case.family == "conv":
        x, w = torch.randn(*s["x"], device="cuda"), torch.randn(*s["w"], device="cuda")
        return lambda: torch.nn.functional.conv2d(x, w, stride=s["stride"], padding=s["padding"])
    x = torch.randn(*s["x"], device="cuda")
    return lambda: torch.softmax(x, dim=1)


def measure(case: Case, samples: int, budget: int, libraries: dict, model, priced: bool = True) -> Row:
    """Tune ``case`` on the GPU: the best config, the reference's time, each timed candidate's time and, where
    ``priced``, the cost model's prediction of it (a traced launch on the CPU: about a second each)."""
    from gpucourse.figures import tuning as ft  # noqa: PLC0415
    from gpucourse.run import timing  # noqa: PLC0415
    from gpucourse.run import tuning as rt  # noqa: PLC0415

    problem = problem_of(case)
    random_search = case.family.startswith("sgemm")
    began = time.perf_counter()
    result = rt.tune(problem, strategy="random" if random_search else "grid", budget=budget if random_search else None,
                     measure=True)
    tuning_s = time.perf_counter() - began
    row = Row(case, len(problem.space.valid()), len(result.trials), result.best, None, None, tuning_s)
    row.errors = [f"{t['config']}: {t['error']}" for t in result.trials if "error" in t]
    if result.best is not None:
        row.best_ms = timing.median_seconds(problem.build(result.best), samples) * 1e3
    if "torch" in libraries:
        row.reference_ms = timing.median_seconds(reference_launch(case, problem, libraries["torch"]), samples) * 1e3
    for t in (t for t in result.trials if "seconds" in t):
        row.measured.append(t["seconds"])
        row.timed.append(t["config"])
        if model is not None and priced:
            row.predicted.append(rt.price(problem, t["config"], model))
    row.spearman = ft.spearman(row.predicted, row.measured) if len(row.predicted) > 1 else None
    return row


def config_text(config: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) if config else "none"


def section(rows: list[Row], device, versions_: str, samples: int, model_device: str | None, note: str = "",
            carried: tuple = (), order: tuple = ()) -> str:
    """The report: one row per space and shape, ``note`` (the rows the time budget left out), then the cost model's
    score against the goal. ``carried``: `Carried` cases of an earlier run, tabled among this run's in ``order``
    (case names)."""
    from gpucourse.figures import tuning as ft  # noqa: PLC0415

    table = markdown_table(
        ["space", "shape", "candidates (tried)", "best config", "best ms", "reference", "reference ms",
         "% of reference", "tuning s", "Spearman"],
        [[r.case.family, r.case.label, f"{r.candidates} ({r.tried})", config_text(r.best),
          f"{r.best_ms:.4g}" if r.best_ms else "-", r.case.reference, f"{r.reference_ms:.4g}" if r.reference_ms else "-",
          f"{r.percent_of_reference:.1f}%" if r.percent_of_reference else "-", f"{r.tuning_s:.1f}",
          f"{r.spearman:.2f}" if r.spearman is not None else "-"] for r in rows],
        right={4, 6, 7, 8, 9})
    predicted = [p for r in rows for p in r.predicted]
    if model_device is None:
        verdict = f"no cost model for a {device.name} (it knows {', '.join(ft.SMS)}): no rank correlation"
    elif not predicted and any(r.measured for r in rows):
        verdict = (f"the candidates' times are priced for the {model_device} on a CPU by `benchmarks/cost_model.py` "
                   f"(section `cost_model`, a group per space): this run's share of the GPU's time (`--seconds`) went "
                   "to measuring")
    else:
        scores = [r.spearman for r in rows if r.spearman is not None]
        worst = min(scores) if scores else None
        met = worst is not None and worst >= GOAL
        verdict = (f"the cost model for the {model_device} ranks the candidates of every space with Spearman >= {GOAL}: "
                   f"{'met' if met else 'NOT met'} (lowest {worst:.2f} over {len(predicted)} predictions)"
                   if worst is not None else "too few timed candidates for a rank correlation")
    not_launched = [f"{r.case.name}: {launch_error(error)}" for r in rows for error in r.not_launched]
    candidates = markdown_table(
        ["space", "shape", "config", "measured ms", "predicted ms"],
        [[r.case.family, r.case.label, config_text(config), f"{measured * 1e3:.4g}",
          f"{r.predicted[k] * 1e3:.4g}" if r.predicted else "-"]
         for r in rows for k, (config, measured) in enumerate(zip(r.timed, r.measured))], right={3, 4})
    if carried:
        table, candidates = (_with_carried(text, carried, order, lines) for text, lines in
                             ((table, lambda c: [c.row]), (candidates, lambda c: c.candidates)))
        kept = f"{CARRIED} " + ", ".join(f"{c.name} ({c.date})" for c in carried) + "."
        note = f"{note}\n\n{kept}" if note else kept
    return "\n".join([
        "## Tuning: the autotuner, its cost model, and the vendor libraries",
        "",
        f"`python benchmarks/tuning.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions_}",
        f"- Timing: median of {samples} samples per time; tuning s: the search's wall time, compiling included.",
        f"- Goal: {verdict}. Cost model: {ft.__name__} (roofline of global sectors, shared wavefronts, FLOPs and "
        "the issue of every instruction, counted per pipe; a block's own time; waves and tails from occupancy), priced from a traced launch of "
        "each candidate at a small size, scaled by FLOPs.",
        "",
        table,
        *(["", note] if note else []),
        *(["", "Candidates that could not launch (counted in tried, not timed): " + "; ".join(not_launched)]
          if not_launched else []),
        *(["", CANDIDATES, "", "Each candidate's measured time beside the model's prediction "
           "(`benchmarks/cost_model.py` prices them again with the model as it is now).", "", candidates]
          if any(r.measured for r in rows) or any(c.candidates for c in carried) else []),
    ])


def _with_carried(table: str, carried: tuple, order: tuple, lines_of) -> str:
    """``table`` with the lines of the ``carried`` cases, its rows in the cases' ``order`` (by space and shape)."""
    from gpucourse.course import results  # noqa: PLC0415

    header, body = table.splitlines()[:2], table.splitlines()[2:] + [line for c in carried for line in lines_of(c)]
    rank = {name: k for k, name in enumerate(order)}
    return "\n".join(header + sorted(body, key=lambda line: rank.get(Case(*results.cells(line)[:2], "").name, 0)))


def launch_error(error: str) -> str:
    """A candidate's launch error in a few words: its config and the CUDA error's name where there is one."""
    parts, name = re.match(r"(\{.*?\}): (.*)", error, re.S), re.search(r"CUDA_ERROR_\w+", error)
    return f"{parts[1]} ({name[0]})" if parts and name else error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes, a budget of 8, 3 samples, prints only")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--budget", type=int, default=None, help=f"SGEMM candidates to time (default {BUDGET})")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("tuning.py"):
        return 0
    from gpucourse.figures import tuning as ft  # noqa: PLC0415

    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # cuBLAS and cuDNN: never TF32, read when they load
    device, libraries = current_device(), reference_libraries()
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    budget = options.budget or (QUICK_BUDGET if options.quick else BUDGET)
    model_device = ft.modelled_device(device.name)
    model = ft.cost_model(model_device) if model_device else None
    print(f"{device.name}: {device.sms} SMs; references through: {', '.join(libraries) or 'none (no PyTorch)'}; "
          f"cost model: {model_device or 'none for this GPU'}")
    time_budget = TimeBudget(options.seconds)
    cases, rows = QUICK_CASES if options.quick else CASES, []
    write = not options.quick and not options.no_write
    carried = carried_cases(recorded_section(), device.name) if write and options.seconds is not None else {}
    for case in time_budget.rows(measuring_order(cases, carried), label=lambda case: case.name):
        rows.append(measure(case, samples, budget, libraries, model, priced=options.seconds is None))
        print(f"  {rows[-1].kernel}: best {config_text(rows[-1].best)} in {rows[-1].tuning_s:.0f} s", flush=True)
    rows.sort(key=lambda row: cases.index(row.case))  # tabled in the order of the cases
    for row in rows:
        for error in row.errors:
            print(f"  {row.kernel}: {error}")
        for k, (config, measured) in enumerate(zip(row.timed, row.measured)):  # to study the model
            predicted = f"predicted {row.predicted[k] * 1e3:.4g} ms, " if row.predicted else ""
            print(f"  {row.kernel}: {config_text(config)}: {predicted}measured {measured * 1e3:.4g} ms")
    kept = tuple(carried[name] for name in time_budget.left_out if name in carried)
    time_budget.left_out = [name for name in time_budget.left_out if name not in carried]
    text = section(rows, device, versions(libraries), samples, model_device, time_budget.note("tuning.py"), kept,
                   tuple(case.name for case in cases))
    return finish(NAME, text, rows, write=write)


def recorded_section() -> str | None:
    """The section RESULTS.md holds now."""
    from gpucourse.course import results  # noqa: PLC0415

    return results.recorded(NAME)


if __name__ == "__main__":
    sys.exit(main())
