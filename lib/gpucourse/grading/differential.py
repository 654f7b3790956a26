"""The course simulator against a real GPU: the same launches on the same inputs, outputs compared.

A *subject* is one kernel with its cases (random shapes that are not multiples of the block,
several launch configurations) and the bound its outputs must meet. `register` adds one to
`REGISTRY`; the library's kernels are registered in `differential_cases`, one block per course
module, and every kernel a solution notebook's test cells launch becomes a subject too
(`solution_subjects`). `compare` runs each case once on a reference backend (the GPU) and once on
a candidate (the simulator, `simulated()`) and compares every output: integer outputs and float
kernels with a bound of 0 must be bit for bit equal; other float kernels may differ by their
bound in ulps of the output's largest magnitude (`ulps_apart`), for a stated reason (reduction
order, FMA contraction). Any disagreement is a simulator bug.

The runner, on a GPU machine: ``python -m gpucourse.grading.differential_cases`` (`make gpu-check` runs it).
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..run import simulated
from . import core

Backend = Callable[[Callable[[], dict]], dict]  # runs a case's launch somewhere, returns its outputs


@dataclass(frozen=True)
class Case:
    """One launch: ``run()`` launches on the current backend (fresh copies of fixed inputs) and returns
    its outputs by name."""

    label: str
    run: Callable[[], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Subject:
    """A kernel, its cases (built from a random generator) and how far two backends may disagree."""

    name: str
    cases: Callable[[np.random.Generator], list[Case]]
    ulps: int = 0
    why: str = "the same operations in the same order: bit for bit"


REGISTRY: dict[str, Subject] = {}


def register(name: str, cases: Callable[[np.random.Generator], list[Case]], ulps: int = 0, why: str = "") -> Subject:
    """Add a kernel to the differential test. ``ulps > 0`` needs ``why``: the reason results may differ."""
    if name in REGISTRY:
        raise ValueError(f"a kernel named {name!r} is already registered for the differential test")
    if ulps < 0 or (ulps and not why):
        raise ValueError(f"{name}: a bound of {ulps} ulps needs a reason (why= reduction order, FMA contraction, ...)")
    subject = Subject(name, cases, ulps, why) if why else Subject(name, cases, ulps)
    REGISTRY[name] = subject
    return subject


def ulps_apart(a, b) -> float:
    """How far two outputs differ: 0 when equal (+0 and -0 equal, NaN where both are NaN), for floats
    the largest difference in ulps of the largest finite magnitude of either, else infinity (a shape,
    a dtype, an integer value or the place of a NaN or an infinity differs)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return math.inf
    if a.dtype.kind != "f":
        return 0.0 if np.array_equal(a, b) else math.inf
    finite = np.isfinite(a) & np.isfinite(b)
    same_specials = np.array_equal(a[~finite], b[~finite], equal_nan=True)
    if not same_specials or not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return math.inf
    if not finite.any():
        return 0.0
    difference = np.abs(a[finite].astype(np.float64) - b[finite].astype(np.float64)).max()
    if difference == 0:
        return 0.0
    scale = max(np.abs(a[finite]).max(), np.abs(b[finite]).max())
    return float(difference / np.spacing(a.dtype.type(scale)).astype(np.float64))


def first_difference(a, b) -> str:
    """The first index where two outputs differ, with both values."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"shapes {a.shape} and {b.shape}"
    same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
    differs = ~same
    index = tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else ()
    return f"at {index}: {a[index]!r} vs {b[index]!r}" if index else "no element differs"


@dataclass
class Outcome:
    """One subject's result: how many cases ran, the worst distance seen and every disagreement."""

    subject: Subject
    cases: int = 0
    worst: float = 0.0
    disagreements: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.disagreements


def gpu(run: Callable[[], dict]) -> dict:
    """On the backend the course chose (on a GPU machine: the GPU)."""
    return run()


def simulator(run: Callable[[], dict]) -> dict:
    """On the course simulator, also on a GPU machine."""
    with simulated():
        return run()


def _run(case: Case, backend: Backend, side: str) -> tuple[dict | None, str]:
    try:
        return backend(case.run), ""
    except Exception as exc:  # a launch that fails on one side is a disagreement, not a crash
        return None, f"raised on the {side}: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def compare(subject: Subject, reference: Backend = gpu, candidate: Backend = simulator, seed: int = 0) -> Outcome:
    """Every case of ``subject`` on both backends, outputs compared within its bound."""
    outcome = Outcome(subject)
    for case in subject.cases(np.random.default_rng(seed)):
        outcome.cases += 1
        want, failed_reference = _run(case, reference, "reference")
        got, failed_candidate = _run(case, candidate, "candidate")
        if failed_reference or failed_candidate:
            outcome.disagreements.append(f"{case.label}: {failed_reference or failed_candidate}")
            outcome.worst = math.inf
            continue
        for name in want:
            distance = ulps_apart(want[name], got.get(name))
            outcome.worst = max(outcome.worst, distance)
            if distance > subject.ulps:
                outcome.disagreements.append(f"{case.label}, `{name}`: {distance:.3g} ulps apart (bound "
                                             f"{subject.ulps}), first {first_difference(want[name], got.get(name))}")
    return outcome


def compare_all(subjects, reference: Backend = gpu, candidate: Backend = simulator, seed: int = 0) -> list[Outcome]:
    return [compare(subject, reference, candidate, seed) for subject in subjects]


def report(outcomes: list[Outcome], reference: str = "GPU", candidate: str = "simulator") -> str:
    """A Markdown table, one row per kernel, then every disagreement (a simulator bug) as a list."""
    rows = ["| kernel | cases | bound (ulps) | why | worst (ulps) | agrees |", "|---|---:|---:|---|---:|---|"]
    for o in outcomes:
        worst = "inf" if math.isinf(o.worst) else f"{o.worst:.3g}"
        rows.append(f"| `{o.subject.name}` | {o.cases} | {o.subject.ulps} | {o.subject.why} | {worst} | "
                    f"{'yes' if o.agrees else '**no**'} |")
    bugs = [f"- `{o.subject.name}`, {d}" for o in outcomes for d in o.disagreements]
    verdict = (f"All {len(outcomes)} kernels agree between the {reference} and the {candidate}." if not bugs else
               f"{len(bugs)} disagreements between the {reference} and the {candidate} (simulator bugs until shown "
               f"otherwise):")
    return "\n".join(rows + ["", verdict, *bugs])


# -- solution kernels: every launch their notebooks' test cells make ----------------------------------------------
def _notebook_code(path: Path) -> list[str]:
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return ["\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
            for c in cells]


@contextlib.contextmanager
def _recording_launches(launches: list):
    """Inside: every `core.launch_on_copies` (what every check runs) is also recorded in ``launches``."""
    original = core.launch_on_copies

    def recorder(kernel, grid, block, out_shape, dtype, arguments):
        copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in arguments]
        launches.append((kernel, grid, block, out_shape, dtype, copies))
        return original(kernel, grid, block, out_shape, dtype, arguments)

    core.launch_on_copies = recorder
    try:
        yield
    finally:
        core.launch_on_copies = original


def kernel_case(kernel, grid, block, out_shape, dtype, arguments, label: str | None = None) -> Case:
    """The case ``kernel[grid, block](out, *arguments)``, as the checks launch it (`core.launch_on_copies`): ``out``
    poisoned with a canary after it; its outputs are ``out``, the canary and every array argument as left."""
    def run():
        out, canary, after = core.launch_on_copies(kernel, grid, block, out_shape, dtype, arguments)
        arrays = {f"argument {k + 2}": a for k, a in enumerate(after) if isinstance(a, np.ndarray)}
        return {"out": out, "past the end of out": canary, **arrays}

    return Case(label or f"grid {grid}, block {block}, out {tuple(out_shape)}", run)


def solution_subjects(notebook: Path, bounds: dict[str, tuple[int, str]]) -> list[Subject]:
    """One subject per kernel the notebook's cells launch through a check, with the cases they ran.

    The cells run on the simulator (their checks pass there); ``bounds`` maps a kernel's name to
    (ulps, why); a kernel without one gets 0 (bit for bit)."""
    launches: list = []
    cwd = os.getcwd()
    namespace = {"__name__": "__main__"}
    try:
        os.chdir(notebook.parent)
        with simulated(), _recording_launches(launches), contextlib.redirect_stdout(io.StringIO()):
            for k, source in enumerate(_notebook_code(notebook)):
                filename = f"<{notebook} cell {k}>"  # in linecache, as IPython does: the simulator reads the source
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the course's own notebooks
    finally:
        os.chdir(cwd)
    by_kernel: dict[str, list[Case]] = {}
    for kernel, *launch in launches:
        by_kernel.setdefault(core.kernel_name(kernel), []).append(kernel_case(kernel, *launch))
    subjects = []
    for name, cases in by_kernel.items():
        ulps, why = bounds.get(name, (0, ""))
        label = f"{notebook.parent.name}/{name}"
        subjects.append(Subject(label, lambda _rng, cases=cases: cases, ulps, why) if why else
                        Subject(label, lambda _rng, cases=cases: cases, ulps))
    return subjects
