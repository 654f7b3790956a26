"""Helpers shared by the benchmark scripts: versions, dates and Markdown tables; for the GPU
benchmarks (bandwidth.py, matmul.py, ...) the device, its reference libraries, poisoned outputs
and relative errors. They time with the library's timer, `gpucourse.run.timing.measure`.

The scripts import it as ``common`` (each puts its own folder on ``sys.path``). Importing it
imports numba but touches no device: `gpu_problem` (which imports gpucourse, and so picks
the backend) comes first.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
from numba import cuda, float32


def package_versions(*packages: str) -> str:
    """``"Python 3.11.7, numba 0.68.1, ..."``: installed versions (distribution names), or 'not installed'."""
    installed = []
    for package in packages:
        try:
            installed.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            installed.append(f"{package} (not installed)")
    return ", ".join([f"Python {platform.python_version()}", *installed])


def today() -> str:
    return datetime.date.today().isoformat()


def cpu_machine() -> str:
    """``"Intel(R) Xeon(R) ..., 2 cores"``: this machine's CPU model (from /proc/cpuinfo where it has one)."""
    model = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def markdown_table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    """A Markdown table; the columns whose numbers are in ``right`` are right-aligned (numbers)."""
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells, one per column of {header}")
    rule = "|" + "|".join("---:" if k in right else "---" for k in range(len(header))) + "|"
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, *rows]]
    return "\n".join([lines[0], rule, *lines[1:]])


# -- a time budget: gpu-check's share of a device command --------------------------------------------------------
@dataclass
class TimeBudget:
    """``--seconds``: a benchmark's rows (shapes, sizes, layers), the goals' first, measured while its time lasts.

    A row is started only while the time left is at least what the longest row so far took (the first row always
    is); the rows left out are named by `note`, which the section prints, so a table shows what was not measured
    and why. ``seconds`` None: no limit, every row.
    """

    seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    left_out: list = field(default_factory=list)  # the labels of the rows not measured
    longest: float = 0.0
    start: float | None = None

    def rows(self, items: Iterable, label: Callable = str, first: Iterable = ()) -> Iterator:
        """``items`` in their order, those whose label is in ``first`` moved to the front, while time lasts."""
        wanted = set(first)
        ordered = sorted(items, key=lambda item: label(item) not in wanted)  # stable: otherwise the given order
        self.start = self.clock() if self.start is None else self.start
        for k, item in enumerate(ordered):
            if self.seconds is not None and self.clock() - self.start + self.longest > self.seconds:
                self.left_out += [label(rest) for rest in ordered[k:]]
                return
            began = self.clock()
            yield item
            took = self.clock() - began
            self.longest = max(self.longest, took)
            if self.seconds is not None:  # gpu-check's log: where each benchmark's share of the device time went
                print(f"  [{label(item)}: {took:.1f} s]", flush=True)

    def warm_up(self, work: Callable[[], object]) -> None:
        """Run ``work`` (compiling every kernel, say) on the budget's time, before and outside every row: the first
        row's time then is its own, not a guess of every row's that holds the compilation too."""
        self.start = self.clock() if self.start is None else self.start
        work()

    @property
    def complete(self) -> bool:
        return not self.left_out

    def note(self, script: str) -> str:
        """One line naming the rows left out, or "" when every row was measured."""
        if self.complete:
            return ""
        return (f"Not measured within this run's time budget ({self.seconds:.0f} s, `--seconds`): "
                f"{', '.join(self.left_out)}. `python benchmarks/{script}` without `--seconds` measures every row.")


def add_time_budget(parser) -> None:
    """The ``--seconds`` option of a GPU benchmark (gpu-check gives each its share of a device command)."""
    parser.add_argument("--seconds", type=float, default=None, metavar="S",
                        help="measure the rows (the goals' first) while S seconds last, naming those left out "
                             "(gpu-check's share of a device command; default: every row)")


# -- GPU benchmarks: the device, its reference libraries and checks (timing: `gpucourse.run.timing`) ---------
L2_ROTATION = 4  # the buffer sets together fill this many times the L2 cache
MAX_SETS = 128
POISON_THREADS = 256


def buffer_sets(size_bytes: int, l2_bytes: int) -> int:
    """How many sets of buffers to rotate over so that together they fill ``L2_ROTATION`` x the L2."""
    return max(1, min(MAX_SETS, math.ceil(L2_ROTATION * l2_bytes / size_bytes)))


ERROR_CHUNK = 1 << 20  # elements `relative_error` converts to float64 at a time


def relative_error(got, want) -> float:
    """``||got - want|| / ||want||`` in float64; infinite when a shape differs or ``got`` is not all finite.

    In chunks of `ERROR_CHUNK` elements: a 1 GiB float32 output converted whole takes 4 GiB of float64 temporaries
    and about 12 s on a laptop core (0.4 s in chunks), and bandwidth.py checks about 20 outputs per size."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return math.inf
    got, want = got.reshape(-1), want.reshape(-1)
    difference = magnitude = 0.0
    for start in range(0, got.size, ERROR_CHUNK):
        g, w = got[start:start + ERROR_CHUNK].astype(np.float64), want[start:start + ERROR_CHUNK].astype(np.float64)
        if not np.all(np.isfinite(g)):
            return math.inf
        d = g - w
        difference, magnitude = difference + float(np.dot(d, d)), magnitude + float(np.dot(w, w))
    if magnitude == 0.0:  # nothing to compare against: exact or infinitely wrong
        return 0.0 if difference == 0.0 else math.inf
    return math.sqrt(difference / magnitude)


@dataclass(frozen=True)
class Device:
    name: str
    sms: int
    l2_bytes: int
    real: bool = True  # False: the CPU simulator (tests only; its times mean nothing)
    compute_capability: tuple[int, int] | None = None
    clock_khz: int | None = None  # the SM clock the driver reports (its maximum, boost, clock)


def gpu_problem() -> str | None:
    """None when kernels run on a usable CUDA GPU, else why not."""
    try:
        import gpucourse  # noqa: PLC0415 (picks the backend)
    except RuntimeError as exc:  # GPUCOURSE_DEVICE=gpu without a usable GPU
        return " ".join(str(exc).split())
    if not gpucourse.BACKEND.on_gpu:
        return gpucourse.BACKEND.reason
    if not cuda.is_available():
        return "numba.cuda.is_available() is False"
    return None


def without_gpu(script: str) -> bool:
    """True, having said so in one line, when no usable GPU is here for ``script`` to measure on."""
    problem = gpu_problem()
    if problem:
        print(f"benchmarks/{script} needs a CUDA GPU, and there is none usable here ({problem}); "
              "nothing measured, RESULTS.md left as it was.")
    return problem is not None


def sm_clock_khz(device) -> int | None:
    """The SM clock in kHz: numba's CLOCK_RATE attribute, else nvidia-smi's maximum SM clock, else None."""
    try:
        khz = int(device.CLOCK_RATE)
        if khz > 0:
            return khz
    except Exception:  # an attribute a newer driver may no longer have
        pass
    import subprocess  # noqa: PLC0415

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits",
                              f"--id={device.id}"], capture_output=True, text=True, timeout=20)
        return int(float(out.stdout.split()[0]) * 1000) if out.returncode == 0 else None
    except Exception:
        return None


def current_device() -> Device:
    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else device.name
    return Device(name, device.MULTIPROCESSOR_COUNT, device.L2_CACHE_SIZE, True,
                  tuple(device.compute_capability), sm_clock_khz(device))


def reference_libraries() -> dict:
    """``cupy`` and ``torch`` by name, those that import and see a GPU."""
    found = {}
    try:
        import cupy  # noqa: PLC0415

        cupy.cuda.runtime.getDeviceCount()
        found["cupy"] = cupy
    except Exception:  # not installed, or without a GPU: left out
        pass
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            found["torch"] = torch
    except Exception:
        pass
    return found


def versions(libraries: dict) -> str:
    from numba.cuda.cudadrv import driver, runtime  # noqa: PLC0415

    cuda_versions = []
    for what, get in (("CUDA driver", driver.driver.get_version), ("CUDA toolkit (NVRTC)", runtime.get_version)):
        try:
            major, minor = get()
            cuda_versions.append(f"{what} {major}.{minor}")
        except Exception as exc:  # a version is information, never a reason to fail
            cuda_versions.append(f"{what} unknown ({type(exc).__name__})")
    found = [f"{name} {module.__version__}" for name, module in libraries.items()]
    return ", ".join(cuda_versions + [package_versions("numba", "numba-cuda", "numpy")] + found)


@cuda.jit
def fill(out, value):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = value


def poison(array) -> None:
    """Fill a (contiguous) device array with NaN, so that an element a kernel leaves unwritten shows."""
    flat = array.reshape(array.size) if array.ndim != 1 else array
    fill[max(1, min(1024, -(-flat.size // POISON_THREADS))), POISON_THREADS](flat, float32(np.nan))


def finish(name: str, text: str, measurements, write: bool) -> int:
    """Print the report; record it as section ``name`` of RESULTS.md when ``write`` and nothing is wrong.

    Returns the exit status: 1 when a kernel gave a wrong result (then nothing is recorded).
    """
    print("\n" + text)
    wrong = [m for m in measurements if m.wrong]
    if wrong:
        print(f"\n{len(wrong)} wrong results ({', '.join(sorted({m.kernel for m in wrong}))}): nothing recorded.")
        return 1
    if write:
        from gpucourse.course import results  # noqa: PLC0415 (importing gpucourse picks the backend)

        results.record(name, text)
        print(f"\nwritten to {results.RESULTS}")
    return 0
