"""numba-cuda's own kernel tests (``numba/cuda/tests/cudapy``) on the course simulator and on numba's.

    python benchmarks/numba_cuda_conformance.py                  # every test file, writes RESULTS.md
    python benchmarks/numba_cuda_conformance.py --files test_intrinsics.py test_math.py --no-write
    python benchmarks/numba_cuda_conformance.py --reuse-numba   # numba's side from the last run's cache
    python benchmarks/numba_cuda_conformance.py --jobs 3        # three test files at a time
    python benchmarks/numba_cuda_conformance.py --jobs 3 --save run.json --no-write; ... --load run.json

CPU only. Each test file runs with pytest in its own process twice: once on numba's
simulator (``NUMBA_ENABLE_CUDASIM=1``) and once on the course backend as a student's laptop
has it (``GPUCOURSE_DEVICE=cpu``; the ``sitecustomize`` of `numba_cuda_conformance_site` makes
every Python process of that side, the ones tests start included, import gpucourse first, and
nothing else changes: the test files run as written, taking the branches they take on a GPU). The tests that pass on numba's simulator are the
goal: the share of them that passes on the course backend, and every one that does not, in
buckets: a silent wrong result (a failed assertion: a wrong number, or an exception not
raised), a module that did not import, a fault report (the course's deliberate ones listed
with their reason), a clear course message, anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "numba_cuda_conformance"  # its section of benchmarks/RESULTS.md
GOAL_PASSED = 414
TIMEOUT_S = 900  # per test file and side (test_math and test_intrinsics take 30 s alone, minutes on a busy machine)

sys.path.insert(0, str(Path(__file__).parent))
from common import package_versions, today  # noqa: E402


def test_folder() -> Path:
    import numba_cuda  # noqa: PLC0415

    return Path(numba_cuda.__file__).parent / "numba" / "cuda" / "tests" / "cudapy"


def side_environment(side: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(Path(__file__).parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if side == "numba":
        return {**env, "NUMBA_ENABLE_CUDASIM": "1"}
    site = str(Path(__file__).parent / "numba_cuda_conformance_site")  # its sitecustomize imports gpucourse
    return {**env, "GPUCOURSE_DEVICE": "cpu", "PYTHONPATH": os.pathsep.join([site, env["PYTHONPATH"]])}


def run_file(side: str, path: Path) -> dict[str, tuple[str, str]]:
    """{test id: (outcome, cause)} of one test file on one side; a file that times out gives {path: timeout}."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.xml"
        command = [sys.executable, "-m", "pytest", "--import-mode=importlib", "--pyargs",
                   f"numba.cuda.tests.cudapy.{path.stem}", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                   f"--junitxml={report}", "--rootdir", folder, "-p", "numba_cuda_conformance_plugin"]
        try:
            subprocess.run(command, env=side_environment(side), cwd=folder, capture_output=True,
                           timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {path.name: ("timeout", f"over {TIMEOUT_S} s")}
        if not report.exists():
            return {path.name: ("error", "pytest wrote no report")}
        return outcomes(report, path.stem)


def outcomes(report: Path, stem: str) -> dict[str, tuple[str, str]]:
    """{file stem::class::test: (outcome, cause)} of a junit report (a module that did not import: its stem)."""
    results = {}
    for case in ElementTree.parse(report).iter("testcase"):
        test = f"{stem}::{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}".replace("::::", "::")
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            fallback = any(p.get("name") == "ran_on" for p in case.iter("property"))
            results[test] = ("passed", FALLBACK if fallback else "")
        else:
            outcome = "skipped" if problem.tag == "skipped" else "failed"
            message = problem.get("message") or problem.text or ""
            if message == "collection failure":  # the module did not import: its exception, last in the text
                message = next((s[1:].strip() for s in reversed((problem.text or "").splitlines())
                                if s.startswith("E ")), message)
            results[test] = (outcome, cause(message))
    return results


FALLBACK = "on numba's simulator"  # a kernel without source, which the course simulator hands over


def cause(message: str) -> str:
    """One line that groups failures: the exception and the start of its message, numbers and names blurred."""
    line = next((s.strip() for s in message.splitlines() if s.strip()), "")
    line = re.sub(r"`[^`]*`", "`.`", line)
    line = re.sub(r"line \d+: .*", "line N", line)
    line = re.sub(r"0x[0-9a-f]+|\d+", "N", line)
    return line[:160]


def cache_path() -> Path:
    """Where numba's side is kept between runs: it depends only on the installed numba-cuda."""
    from importlib.metadata import version  # noqa: PLC0415

    return Path.home() / ".cache" / "gpucourse" / f"numba_cuda_conformance_{version('numba-cuda')}_by_file.json"


# Fault reports the course makes on purpose where numba's simulator passes a test: the kernel really does it.
DELIBERATE = {
    "test_freevar::TestFreeVar::test_freevar": "reads shared memory nothing wrote (`A[i] = sdata[i]`)",
    "test_sm::TestSharedMemoryIssue::test_issue_2393": "reads shared memory nothing wrote (`s_initialcost[0]`)",
    "test_sm_creation::TestSharedMemoryCreation::test_global_constants": "reads shared memory nothing wrote",
    "test_sm_creation::TestSharedMemoryCreation::test_global_build_tuple": "reads shared memory nothing wrote",
    "test_sm_creation::TestSharedMemoryCreation::test_global_constant_tuple": "reads shared memory nothing wrote",
    "test_exception::TestException::test_raise_causing_warp_diverge":
        "threads 13 and up read and write `y[0]` with no barrier between: a data race",
    "test_exception::TestException::test_exception":
        "`ary.shape[-x]` indexes past the shape (the GPU reads garbage without debug=True)",
    "test_exception::TestException::test_raise_in_device_function":
        "an 'unexpected success': the course reports the exception a device function raises, which a GPU "
        "loses (numba issue 8036, an expected failure there)",
}
# Why a test file runs past TIMEOUT_S on the course backend: it takes its GPU branch (config.ENABLE_CUDASIM is False),
# a GPU-sized problem, where numba's simulator takes a small one; measured with cProfile, one core, a busy machine.
TIMED_OUT = {
    "test_laplace": "up to 1,000 launches of 65,536 threads (numba's simulator: 20 launches of 16), 0.47 s a launch, "
                    "most of it (8.1 of 9.5 s over 20 launches) in the simulator's checked loads and stores",
    "test_matmul": "one launch of 2,560,000 threads, 50 x 50 blocks of 32 x 32 (numba's simulator: 256 threads); the "
                   "same kernel at 10 x 10 blocks runs 21 s, and this is 125 times its work: about 45 minutes",
}
FAULTS = ("OutOfBounds", "DataRace", "DivergentBarrier", "UninitializedRead", "WarpFault", "EndlessLoop")


def bucket(test: str, outcome: str, why: str) -> str:
    """Where a test of the goal that does not pass on the course backend goes."""
    if test in DELIBERATE:
        return "deliberate fault report"
    if outcome == "timeout":
        return "its file timed out"
    if outcome == "missing":
        return "not run: its module did not import"
    if outcome == "skipped":
        return "skipped"
    if why.startswith("AssertionError") or "Unexpected success" in why:
        return "silent wrong result?"
    if why.startswith("gpucourse.simulator.errors.") and why.split(":")[0].rsplit(".", 1)[1] in FAULTS:
        return "fault report"
    if why.startswith("gpucourse.") or "course's CPU simulator" in why:
        return "course message"
    return "other error"


def import_errors(course: dict) -> dict[str, str]:
    """{file stem: cause} of the test modules that failed to import on the course backend."""
    return {test.split("::")[0]: why for test, (outcome, why) in course.items()
            if outcome == "failed" and test.count("::") == 1}


def compare(numba: dict, course: dict) -> dict:
    """The tests that pass on numba's simulator, and how each does on the course backend, in buckets."""
    goal = [test for test, (outcome, _) in numba.items() if outcome == "passed"]
    passed = [test for test in goal if course.get(test, ("missing", ""))[0] == "passed"]
    handed_over = [test for test in passed if course[test][1] == FALLBACK]
    unimported = import_errors(course)
    failing = defaultdict(list)
    for test in goal:
        stem = test.split("::")[0]
        outcome, why = (course.get(test) or course.get(f"{stem}.py")  # the whole file timed out, or no report
                        or ("missing", unimported.get(stem, "not run")))
        if outcome != "passed":
            failing[(bucket(test, outcome, why), why)].append(test)
    return {"goal": len(goal), "passed": len(passed), "handed_over": len(handed_over), "failing": failing,
            "numba_counts": Counter(o for o, _ in numba.values()), "course_counts": Counter(o for o, _ in course.values())}


def section(result: dict, files: list[str]) -> str:
    rate = result["passed"] / max(result["goal"], 1)
    buckets = Counter()
    for (kind, _), tests in result["failing"].items():
        buckets[kind] += len(tests)
    lines = [
        "## numba-cuda's kernel tests on the course simulator",
        "",
        "`python benchmarks/numba_cuda_conformance.py` (CPU only): numba-cuda's own `numba/cuda/tests/cudapy` "
        "test files as written, run on numba's simulator and on the course backend as a laptop without a GPU "
        "has it.",
        "",
        f"- Date: {today()}",
        f"- Versions: {package_versions('numba', 'numba-cuda', 'numpy')}",
        f"- Test files: {len(files)}.",
        f"- Outcomes on numba's simulator: {dict(result['numba_counts'])}; "
        f"on the course backend: {dict(result['course_counts'])}.",
        f"- Of the {result['goal']} tests that pass on numba's simulator, **{result['passed']} pass** on the course "
        f"backend ({rate:.1%}; goal {GOAL_PASSED / 460:.0%}: {GOAL_PASSED} of the 460 an independent harness counted). "
        f"{result['handed_over']} of them launch kernels built by "
        "`exec` from strings or written in a `python -c` the test starts (test_print), which have no source file "
        "for the course simulator to rewrite: it runs them on numba's simulator, with a warning.",
        "- The others: " + (", ".join(f"{kind} {n}" for kind, n in buckets.most_common()) or "none") + ".",
    ]
    rows = [(kind, why, tests) for (kind, why), tests in sorted(result["failing"].items(),
                                                                key=lambda item: (item[0][0], -len(item[1])))
            if kind != "deliberate fault report"]
    if rows:
        lines += ["", "| outcome on the course backend | cause | tests | examples |", "|---|---|---:|---|"]
    for kind, why, tests in rows:
        examples = ", ".join(f"`{t.split('::', 1)[1]}`" for t in tests[:2])
        lines.append(f"| {kind} | {why.replace('|', '/')} | {len(tests)} | {examples} |")
    timed_out = sorted({t.split("::")[0] for (kind, _), tests in result["failing"].items()
                        if kind == "its file timed out" for t in tests})
    if timed_out:
        lines += ["", "Why the files that time out do (the course backend runs each test's GPU branch):", ""]
        lines += [f"- `{stem}.py`: {TIMED_OUT.get(stem, 'not measured')}" for stem in timed_out]
    deliberate = sorted(t for (kind, _), tests in result["failing"].items() if kind == "deliberate fault report"
                        for t in tests)
    if deliberate:
        lines += ["", "The course's deliberate fault reports (the kernel really does what is reported):", ""]
        lines += [f"- `{test}`: {DELIBERATE[test]}" for test in deliberate]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="*", help="test file names (default: every test_*.py)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md as it is")
    parser.add_argument("--reuse-numba", action="store_true",
                        help="take numba's side from the cache of earlier runs where it has the file")
    parser.add_argument("--jobs", type=int, default=1, help="test files run at a time (default 1)")
    parser.add_argument("--save", type=Path, help="also write every test's outcome on both sides to this JSON file")
    parser.add_argument("--load", type=Path, help="run nothing: the outcomes a run wrote with --save")
    arguments = parser.parse_args()
    if arguments.load:
        saved = json.loads(arguments.load.read_text())
        numba, course = ({test: tuple(outcome) for test, outcome in saved[side].items()} for side in ("numba", "course"))
        report(numba, course, sorted({test.split("::")[0].removesuffix(".py") + ".py" for test in numba}), arguments.no_write)
        return
    folder = test_folder()
    files = [folder / name for name in arguments.files] if arguments.files else sorted(folder.glob("test_*.py"))
    cached = cache_path()
    cache = json.loads(cached.read_text()) if cached.exists() else {}
    reused = {path.name: cache[path.name] for path in files  # not a file that timed out or wrote no report
              if arguments.reuse_numba and path.name in cache and path.name not in cache[path.name]}

    def both_sides(path: Path) -> tuple[dict, dict]:  # in a thread: each side is a pytest process of its own
        numba = reused.get(path.name) or run_file("numba", path)
        return {test: tuple(outcome) for test, outcome in numba.items()}, run_file("course", path)

    numba, course = {}, {}
    with ThreadPoolExecutor(max(arguments.jobs, 1)) as pool:
        for path, (numba_outcomes, course_outcomes) in zip(files, pool.map(both_sides, files)):
            cache[path.name] = numba_outcomes
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(cache))
            numba.update(numba_outcomes)
            course.update(course_outcomes)
            print(f"{path.name}: {len(numba)} tests so far on numba's simulator, {len(course)} on the course's",
                  flush=True)
    if arguments.save:
        arguments.save.write_text(json.dumps({"numba": numba, "course": course}, indent=0))
    report(numba, course, [path.name for path in files], arguments.no_write)


def report(numba: dict, course: dict, files: list[str], no_write: bool) -> None:
    text = section(compare(numba, course), files)
    print(text)
    if not no_write:
        from gpucourse.course import record  # noqa: PLC0415

        record(NAME, text)


if __name__ == "__main__":
    main()
