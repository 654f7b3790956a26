"""Time launches on a GPU with CUDA events: the one timer of the lectures, the tuner, the grading and `benchmarks/`.

A sample is CUDA events around back-to-back launches, cycling over the launches given (the benchmarks give one
per set of buffers, so that together they fill the L2 several times), queued behind a kernel that sleeps on the
GPU while Python enqueues them, so that Python's launch overhead is not timed. A sample lasts about
`SAMPLE_SECONDS` of GPU time (the events resolve about 0.5 µs); the median of the samples is the time, which a
clock change or another process spoiling one sample cannot move.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass

from .device import chosen_backend

SAMPLE_SECONDS = 10e-3  # the GPU time one sample aims at
MAX_QUEUED = 1000  # kernel launches per sample: about what CUDA queues before the host has to wait
MAX_HOLD_US = 500_000  # the longest the sleeping kernel holds the GPU


@dataclass(frozen=True)
class Timing:
    seconds: float  # the median over the samples of the GPU time per call of a launch
    queued: bool  # every sample's calls were queued while the GPU was still held (no launch gaps timed); on the
    # simulator nothing holds it: False


@functools.cache
def hold_kernel():
    """The kernel that keeps the GPU busy for about ``microseconds`` while the host queues the launches to time."""
    from numba import cuda, uint32  # noqa: PLC0415 - after the backend is chosen

    @cuda.jit
    def hold(microseconds):
        for _ in range(microseconds):
            cuda.nanosleep(uint32(1000))

    return hold


def sample(launches: list, count: int, hold_us: int = 0) -> tuple[float, float, bool]:
    """For ``count`` calls cycling over ``launches``: (GPU seconds per call, host seconds per call, whether the GPU
    was still held when the host had queued them all); ``hold_us``: how long the sleeping kernel holds the GPU."""
    from numba import cuda, uint32  # noqa: PLC0415

    held, start, end = cuda.event(), cuda.event(), cuda.event()
    held.record()
    if hold_us:
        hold_kernel()[1, 1](uint32(hold_us))
    start.record()
    began = time.perf_counter()
    for k in range(count):
        launches[k % len(launches)]()
    host = time.perf_counter() - began
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / count, host / count, held.elapsed_time(start) / 1e3 >= host


def calls_per_sample(seconds: float, sets: int, kernel_launches: int = 1) -> int:
    """Enough calls for `SAMPLE_SECONDS` of GPU time, at most `MAX_QUEUED` kernels, a multiple of ``sets``;
    ``seconds``: one call's time, ``kernel_launches``: the kernels one call launches."""
    count = min(MAX_QUEUED // kernel_launches, math.ceil(SAMPLE_SECONDS / max(seconds, 1e-9)))
    return sets * max(1, count // sets)


def measure(launches: list, samples: int = 7, kernel_launches: int = 1, warmup: int = 2) -> Timing:
    """The median GPU time per call over ``samples`` samples of calls cycling over ``launches`` (each a function
    of no arguments that launches ``kernel_launches`` kernels), after ``warmup`` calls of each (the first
    compiles, the next fill caches and raise the clocks); a first, untimed sample sets the calls per sample
    and how long to hold the GPU. Without a GPU the events time the CPU simulator: meaningless as GPU time.
    """
    for _ in range(warmup):
        for launch in launches:
            launch()
    on_gpu = chosen_backend().on_gpu
    seconds, host, _ = sample(launches, len(launches), 1 if on_gpu else 0)  # 1 µs: compiles the sleeping kernel
    count = calls_per_sample(seconds, len(launches), kernel_launches)
    hold_us = min(MAX_HOLD_US, int(1.5 * host * count * 1e6) + 1000) if on_gpu else 0
    timed = [sample(launches, count, hold_us) for _ in range(samples)]
    # without a GPU nothing is held: the simulator's events, which time the CPU, must not call its calls queued
    return Timing(statistics.median(s for s, _, _ in timed), on_gpu and all(queued for _, _, queued in timed))


def median_seconds(launch, samples: int = 7, warmup: int = 2) -> float:
    """The median GPU time of ``launch()`` (`measure` of the one launch): what the tuner and the grading time."""
    return measure([launch], samples, warmup=warmup).seconds


def seconds_per_launch(launch, repeat: int = 20) -> float:
    """The mean GPU time of ``launch()`` over one `sample` of ``repeat`` calls, queued behind the sleeping kernel
    as `measure` does, after one call that compiles and warms up and one that times the host: a quick look in a
    lecture's GPU cell (`median_seconds` is the careful measurement)."""
    launch()
    if not chosen_backend().on_gpu:
        return sample([launch], repeat)[0]
    _, host, _ = sample([launch], 1, 1)  # 1 µs: compiles the sleeping kernel
    return sample([launch], repeat, min(MAX_HOLD_US, int(1.5 * host * repeat * 1e6) + 1000))[0]
