"""Trace counts on kernels whose counts are known by hand, the budget asserts, and the viewer."""

import matplotlib
import numpy as np
import pytest
from numba import cuda, float32
from on_a_slide import SMALLEST_TEXT, smallest_text

from gpucourse import trace
from gpucourse.kernels.vector import load4, store4
from gpucourse.simulator import BudgetExceeded, show_trace, trace_viewer

matplotlib.use("Agg")

N = 64  # arrays are N x N float32: one row is 256 bytes, 8 sectors


@cuda.jit
def copy_rows(out, a):
    """Thread x walks along a row: a warp reads 32 neighbouring floats."""
    x, y = cuda.grid(2)
    if y < a.shape[0] and x < a.shape[1]:
        out[y, x] = a[y, x]


@cuda.jit
def copy_columns(out, a):
    """Thread x walks down a column: a warp reads 32 floats 256 bytes apart."""
    x, y = cuda.grid(2)
    if y < a.shape[0] and x < a.shape[1]:
        out[x, y] = a[x, y]


def square(seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (N, N)).astype(np.float32)


def test_coalesced_copy_touches_four_sectors_per_warp():
    a, out = square(), np.zeros((N, N), np.float32)
    with trace() as t:
        copy_rows[(2, 8), (32, 8)](out, a)
    np.testing.assert_array_equal(out, a)
    assert t.sectors_per_request("a") == 4.0  # 32 threads x 4 bytes = 128 bytes = 4 sectors
    assert t.sectors_per_request("out", kind="write") == 4.0
    stats = t.array("a").instructions["read"]
    assert (stats.requests, stats.sectors) == (N * N // 32, N * N // 32 * 4)
    t.assert_reads_per_element("a", exactly=1)
    t.assert_writes_per_element("out", exactly=1)
    t.assert_reads_per_thread("a", at_most=1)
    t.assert_sectors_per_request("a", at_most=4)


def test_strided_copy_touches_a_sector_per_thread():
    a, out = square(1), np.zeros((N, N), np.float32)
    with trace() as t:
        copy_columns[(2, 8), (32, 8)](out, a)
    np.testing.assert_array_equal(out, a)
    assert t.sectors_per_request("a") == 32.0
    assert t.sectors_per_request("out", kind="write") == 32.0
    t.assert_reads_per_element("a", exactly=1)  # still each element once: only the pattern is bad
    with pytest.raises(BudgetExceeded, match=r"warp reads of `a` touch 32.0 sectors .* more than 4"):
        t.assert_sectors_per_request("a", at_most=4)


def test_views_count_sectors_with_their_real_strides():
    a = square(2)
    out = np.zeros((N, N), np.float32)
    with trace() as t:
        copy_rows[(2, 8), (32, 8)](out, a.T)  # rows of the transposed view are columns in memory
    np.testing.assert_array_equal(out, a.T)
    assert t.sectors_per_request("a") == 32.0


def make_transpose(padding: int):
    width = 32 + padding

    @cuda.jit
    def transpose_through_tile(out, a):
        tile = cuda.shared.array((32, width), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        bx, by = cuda.blockIdx.x * 32, cuda.blockIdx.y * 32
        tile[ty, tx] = a[by + ty, bx + tx]
        cuda.syncthreads()
        out[bx + ty, by + tx] = tile[tx, ty]

    return transpose_through_tile


@pytest.mark.parametrize("padding, degree", [(0, 32), (1, 1)])
def test_shared_transpose_bank_conflicts(padding, degree):
    a, out = square(3), np.zeros((N, N), np.float32)
    with trace() as t:
        make_transpose(padding)[(2, 2), (32, 32)](out, a)
    np.testing.assert_array_equal(out, a.T)
    assert t.bank_conflicts("tile", kind="write") == 1  # a row of the tile: 32 banks
    assert t.bank_conflicts("tile", kind="read") == degree  # a column: one bank, unless padded
    reads = t.array("tile").instructions["read"]
    assert reads.requests == 4 * 32 and reads.sectors == 4 * 32 * degree  # wavefronts
    assert t.sectors_per_request("a") == 4.0 and t.sectors_per_request("out", kind="write") == 4.0
    if degree == 1:
        t.assert_no_bank_conflicts()
    else:
        with pytest.raises(BudgetExceeded, match="reads of shared array `tile` have 32-way bank conflicts"):
            t.assert_no_bank_conflicts()


@cuda.jit
def sum_each_block_twice(out, a):
    """Reads each element twice: the second pass is wasted."""
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(out, 0, a[i] + a[i])


@cuda.jit
def vector_copy(out, a, spread):
    """Thread t copies a[4 t * spread : + 4] with one 16-byte load through shared memory and one store."""
    t = cuda.threadIdx.x
    tile = cuda.shared.array(1024, float32, alignment=16)
    store4(tile, (4 * t * spread,), load4(a, (4 * t * spread,)))
    cuda.syncthreads()
    store4(out, (4 * t * spread,), load4(tile, (4 * t * spread,)))


@pytest.mark.parametrize("spread, degree", [(1, 1), (2, 2), (8, 8)])
def test_a_vector_access_is_one_warp_instruction_served_8_lanes_at_a_time(spread, degree):
    """A warp's 16-byte loads of 512 neighbouring bytes: one request and 16 sectors, as the GPU counts them (not four
    requests of 16 sectors each: the stand-in reads its 4 floats one by one); in shared memory 8 lanes at a time,
    conflict-free when those 8 lanes' 128 bytes are neighbours, ``spread``-way when each lane skips ahead."""
    a, out = np.arange(1024, dtype=np.float32), np.full(1024, np.nan, np.float32)
    with trace() as t:
        vector_copy[1, 64 // spread](out, a, spread)
    chunks = (np.arange(64 // spread) * 4 * spread)[:, None] + np.arange(4)
    np.testing.assert_array_equal(out[chunks], a[chunks])
    reads = t.arrays["a"].instructions["read"]
    assert (reads.requests, reads.sectors) == (-(-64 // spread // 32), len(np.unique(chunks // 8)))
    assert t.bank_conflicts("tile", "read") == t.bank_conflicts("tile", "write") == degree
    assert "load4(a, (4 * t * spread,))" in t.by_line()  # the kernel's line, not the stand-in's


def test_budget_failures_name_the_array_and_the_worst_offender():
    a = np.arange(1, 41, dtype=np.float32)
    out = np.zeros(1, np.float32)
    with trace() as t:
        sum_each_block_twice[2, 32](out, a)
    assert out[0] == 2 * a.sum()
    assert t.reads_per_thread("a").tolist() == [2] * 40 + [0] * 24
    assert int(t.array("out").per_thread["atomic"].sum()) == 40
    with pytest.raises(BudgetExceeded) as failure:
        t.assert_reads_per_element("a", exactly=1)
    assert "every element of `a` should be read exactly 1 time, but `a[0]` was read 2 times" in str(failure.value)
    assert isinstance(failure.value, AssertionError)  # a failed test cell, as a failed assert
    with pytest.raises(BudgetExceeded, match=r"thread threadIdx=\(0, 0, 0\) of block blockIdx=\(0, 0, 0\) read it 2"):
        t.assert_reads_per_thread("a", at_most=1)
    with pytest.raises(KeyError) as unknown:
        t.reads_per_thread("b")
    assert str(unknown.value) == "`sum_each_block_twice` touched no array called `b` (it touched `out`, `a`)"
    from gpucourse.grading.feedback import COURSE_ERRORS
    assert isinstance(unknown.value, COURSE_ERRORS)  # a notebook shows its message, not a traceback
    for bound in ({"exactly": "2"}, {"at_most": 2.0}):
        name, value = next(iter(bound.items()))
        with pytest.raises(TypeError, match=f"{name} is a count, a whole number such as 1 \\(without quotes\\), not "
                                            f"{value!r}"):
            t.assert_reads_per_element("a", **bound)


def test_trace_outside_a_launch_explains_itself():
    with trace() as t:
        pass
    with pytest.raises(RuntimeError, match="no kernel was launched"):
        t.summary()


def test_summary_and_viewer_show_a_tiled_launch():
    a, out = square(4), np.zeros((N, N), np.float32)
    with trace() as t:
        make_transpose(1)[(2, 2), (32, 32)](out, a)
    assert t.barriers((1, 0)) == t.barriers(3) == 1
    summary = t.summary()
    assert "tile" in summary and "shared" in summary and "transpose_through_tile" in summary
    lines = t.by_line().splitlines()
    assert lines[0].split()[:7] == ["line", "array", "kind", "requests", "threads/req", "sectors/req", "conflicts"]
    column_read = next(row for row in lines if "out[bx + ty, by + tx] = tile[tx, ty]" in row and " tile " in row)
    assert column_read.split()[1:7] == ["tile", "read", "128", "32.0", "-", "none"]
    global_read = next(row for row in lines if " a " in row)
    assert global_read.split()[1:6] == ["a", "read", "128", "32.0", "4.0"]
    figure = show_trace(t, block=(1, 0), phase=0)
    titles = [ax.get_title(loc="left") for ax in figure.axes if ax.get_title(loc="left")]
    assert titles == ["global a (64, 64)", "shared tile (32, 33)"]
    assert figure._suptitle.get_text() == (
        "transpose_through_tile: block (1, 0, 0), phase 0 (after 0 barriers), all threads")
    reads_of_one_thread = show_trace(t, block=3, phase=1, thread=(3, 2))
    assert reads_of_one_thread._suptitle.get_text() == (
        "transpose_through_tile: block (1, 1, 0), phase 1 (after 1 barrier), thread (3, 2), number 67 (reads blue, "
        "writes red)")
    viewer = trace_viewer(t)
    block, phase, thread = viewer.children[0].children
    assert (block.max, phase.max, thread.max) == (3, 1, 1023)
    phase.value = 1  # redraws without error


@cuda.jit
def stencil_through_tile(out, a):
    """Each thread of an 8 x 8 block reads two neighbours of a, so a cell is read once or twice ("r1", "r2")."""
    tile = cuda.shared.array((8, 8), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.grid(2)
    if y < a.shape[0] and x + 1 < a.shape[1]:
        tile[ty, tx] = a[y, x] + a[y, x + 1]
    cuda.syncthreads()
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = tile[tx, ty]


def _labels_fit_their_cells(figure):
    renderer = figure.canvas.get_renderer()
    for axis in figure.axes:
        if not axis.get_images():
            continue
        rows, columns = axis.get_images()[0].get_array().shape[:2]
        box = axis.get_window_extent(renderer)
        for text in axis.texts:
            extent = text.get_window_extent(renderer)
            assert extent.width < box.width / columns and extent.height < box.height / rows, text.get_text()


def test_trace_labels_are_readable_on_a_slide():
    """The cell labels of a small trace fit their cells and, scaled like a slide's figure (1180 x 500 px at
    most), are at least 13 px tall, as are its ticks and titles (lecture 1b's ticks were 12)."""
    a, out = np.random.default_rng(7).standard_normal((16, 17)).astype(np.float32), np.full((16, 16), np.nan, np.float32)
    with trace() as t:
        stencil_through_tile[(2, 2), (8, 8)](out, a)
    figure = show_trace(t, block=(1, 0), phase=0)
    labels = [text for axis in figure.axes for text in axis.texts]
    assert {text.get_text() for text in labels} >= {"r1", "r2", "0", "63"}
    _labels_fit_their_cells(figure)
    assert smallest_text(figure)[0] >= SMALLEST_TEXT, smallest_text(figure)


@cuda.jit
def through_a_16_by_16_tile(out, a):
    """Thread (tx, ty) of a 16 x 16 block copies a[y, x] into tile[ty, tx], and tile[ty, tx] into out[y, x]."""
    tile = cuda.shared.array((16, 16), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x, y = cuda.grid(2)
    tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    out[y, x] = tile[ty, tx] * float32(2)


def test_three_digit_labels_of_a_16_by_16_tile_read_on_a_slide():
    """Lecture 3's two 16 x 16 tiles, labelled by threads 0 to 255, were 10.9 px on its slide (9 pt, scaled 0.87): a
    label is now 13 px at least, its cell wider than tall where it needs; where even that cannot hold it (three such
    tiles side by side), the cells keep their colours and no label is drawn smaller."""
    a = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    with trace() as t:
        through_a_16_by_16_tile[(1, 1), (16, 16)](np.full_like(a, np.nan), a)
    two = show_trace(t, phase=0, arrays=["tile", "a"])
    labels = [text for axis in two.axes for text in axis.texts]
    assert {"0", "255", "r1"} <= {text.get_text() for text in labels}
    assert smallest_text(two, labels)[0] >= SMALLEST_TEXT and smallest_text(two)[0] >= SMALLEST_TEXT, smallest_text(two)
    _labels_fit_their_cells(two)
    three = show_trace(t, phase=1)  # tile read, out written, and a's reads of phase 0 are not in it: two arrays
    assert smallest_text(three)[0] >= SMALLEST_TEXT, smallest_text(three)
    _labels_fit_their_cells(three)
    import matplotlib.pyplot as plt

    plt.close("all")


@cuda.jit
def gather_through_shared(out, a, b, where, n):
    """Thread i adds a[where[i]] (any order) and word where[i] % 256 of a shared copy of b."""
    tile = cuda.shared.array(256, float32)
    for k in range(cuda.threadIdx.x, 256, cuda.blockDim.x):
        tile[k] = b[k]
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < n:
        out[i] = a[where[i]] + tile[where[i] % 256]


def per_warp(warps, places, banks: int) -> tuple[list[int], list[int]]:
    """The oracle for the trace: per warp, how many distinct ``places`` its active lanes touch, and the most of
    those that fall in one of ``banks`` banks."""
    distinct = [np.unique(places[warps == w]) for w in np.unique(warps)]
    return [len(d) for d in distinct], [int(np.bincount(d % banks, minlength=banks).max()) for d in distinct]


@pytest.mark.parametrize("seed, n, threads", [(0, 300, 64), (1, 97, 96), (2, 1000, 128)])
def test_random_gathers_count_each_warps_sectors_and_bank_conflicts(seed, n, threads):
    """Random addresses, in order for some warps and scattered for the others, and a last warp partly idle:
    each warp's sectors and shared-memory bank-conflict degree as counted by hand."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, 2048)).astype(np.float32)
    where = rng.integers(0, a.size, n)
    where[: n // 3] = np.sort(where[: n // 3])
    out = np.full(n, np.nan, np.float32)
    with trace() as t:
        gather_through_shared[-(-n // threads), threads](out, a, b, where, n)
    np.testing.assert_array_equal(out, a[where] + b[where % 256])  # one float32 addition each: exact
    lane = np.arange(n)
    warps = lane // threads * (threads // 32) + lane % threads // 32
    sectors, _ = per_warp(warps, where * 4 // 32, banks=1)
    _, degree = per_warp(warps, where % 256, banks=32)
    reads = t.array("a").instructions["read"]
    assert (reads.requests, reads.sectors) == (len(sectors), sum(sectors))
    shared = t.array("tile").instructions["read"]
    assert (shared.requests, shared.sectors, shared.worst) == (len(degree), sum(degree), max(degree))
