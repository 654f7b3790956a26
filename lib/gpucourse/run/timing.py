"""Time launches on a GPU with CUDA events, as the lectures' GPU cells do (`benchmarks/` measure more carefully)."""

from __future__ import annotations


def seconds_per_launch(launch, repeat: int = 20) -> float:
    """Mean time of ``launch()`` over ``repeat`` calls, after one call that compiles and warms up.

    Events recorded on the GPU's stream before and after the calls measure the GPU's time, not
    Python's. Without a GPU the events measure the CPU simulator: meaningless as GPU time.
    """
    from numba import cuda  # noqa: PLC0415 - after the backend is chosen

    launch()
    start, stop = cuda.event(), cuda.event()
    start.record()
    for _ in range(repeat):
        launch()
    stop.record()
    stop.synchronize()
    return cuda.event_elapsed_time(start, stop) / 1e3 / repeat


def median_seconds(launch, samples: int = 7, warmup: int = 2, sample_seconds: float = 2e-3) -> float:
    """Median over ``samples`` of the mean GPU time of ``launch()`` (`seconds_per_launch`), after ``warmup`` calls.

    The first call compiles; the warm-up calls fill caches and raise the clocks. A sample repeats the launch
    enough times to last about ``sample_seconds`` of GPU time, so the events' resolution (about 0.5 µs) and one
    slow launch do not decide it; the median ignores the samples that a clock change or another process spoiled.
    """
    import statistics  # noqa: PLC0415

    for _ in range(warmup):
        launch()
    first = seconds_per_launch(launch, repeat=1)
    repeat = max(1, min(1000, int(sample_seconds / max(first, 1e-7))))
    return statistics.median(seconds_per_launch(launch, repeat) for _ in range(samples))
