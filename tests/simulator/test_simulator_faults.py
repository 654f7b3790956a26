"""Planted faults: each one stops the launch with a message naming kernel, line, thread, array and index."""

import numpy as np
import pytest
from numba import cuda, float32, int32

from gpucourse import simulated
from gpucourse.simulator import DataRace, DivergentBarrier, OutOfBounds, UninitializedRead, WarpFault

TILE = 32


@pytest.fixture(autouse=True)
def on_the_simulator():
    """Also on a GPU machine: these faults are what the simulator is for."""
    with simulated():
        yield


def data(n, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-2, 2, n).astype(dtype)


@cuda.jit
def copy_unguarded(out, a):
    i = cuda.grid(1)
    out[i] = a[i]


@cuda.jit
def store_a_row_down(out, a):
    i = cuda.grid(1)
    out[i + 1, 0] = a[i]


def test_a_store_past_the_end_of_a_matrix_is_named_as_written():
    """The message quotes the store as the student wrote it, not the simulator's rewriting of its index."""
    a = data(4)
    with pytest.raises(OutOfBounds) as fault:
        store_a_row_down[1, 4](np.zeros((4, 2), np.float32), a)
    message = str(fault.value)
    assert "when it writes `out[i + 1, 0]`: index 4 is past the end of axis 0 (size 4)" in message
    assert "_g_rt" not in message


def test_out_of_bounds_past_the_end():
    a = data(40)
    with pytest.raises(OutOfBounds) as fault:
        copy_unguarded[2, 32](np.zeros_like(a), a)
    message = str(fault.value)
    assert message.startswith("kernel `copy_unguarded`, line ")
    assert "out[i] = a[i]" in message
    assert "thread threadIdx=(8, 0, 0) of block blockIdx=(1, 0, 0): index 40 is out of bounds for `a` of shape (40,)" in message
    assert "past the end" in message


@cuda.jit
def previous_element(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i - 1]


def test_out_of_bounds_negative_index_is_caught_not_wrapped():
    a = data(10)
    with pytest.raises(OutOfBounds, match=r"threadIdx=\(0, 0, 0\) of block blockIdx=\(0, 0, 0\): index -1 .*negative index -1 on axis 0 \(size 10\): numba wraps it.*almost never means that$"):
        previous_element[1, 16](np.zeros_like(a), a)


def make_reverse_blocks(barrier: bool):
    @cuda.jit
    def reverse_blocks(out, a):
        """Reverse each block of 32 elements through a shared tile."""
        tile = cuda.shared.array(TILE, float32)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        tile[t] = a[i]
        if barrier:
            cuda.syncthreads()
        out[i] = tile[TILE - 1 - t]

    return reverse_blocks


def test_missing_barrier_before_reading_a_tile():
    a = data(64)
    out = np.zeros_like(a)
    make_reverse_blocks(True)[2, TILE](out, a)
    np.testing.assert_array_equal(out, a.reshape(2, TILE)[:, ::-1].ravel())
    with pytest.raises(DataRace) as fault:
        make_reverse_blocks(False)[2, TILE](out, a)
    message = str(fault.value)
    assert "out[i] = tile[TILE - 1 - t]" in message
    assert "data race on `tile[31]`: thread threadIdx=(0, 0, 0) of block blockIdx=(0, 0, 0) reads it" in message
    assert "thread threadIdx=(31, 0, 0) of block blockIdx=(0, 0, 0) wrote it" in message
    assert "cuda.syncthreads() after the write and before this read" in message


def make_tiled_sum(barrier_after_use: bool):
    @cuda.jit
    def tiled_shifted_sum(out, a):
        """out[i] = sum over tiles k of a[k * 32 + (t + 1) % 32]: the tile is reused every iteration."""
        tile = cuda.shared.array(TILE, float32)
        t = cuda.threadIdx.x
        total = float32(0)
        for k in range(a.size // TILE):
            tile[t] = a[k * TILE + t]
            cuda.syncthreads()
            total += tile[(t + 1) % TILE]
            if barrier_after_use:
                cuda.syncthreads()
        out[t] = total

    return tiled_shifted_sum


def test_missing_barrier_after_the_last_use_of_a_tile():
    a = data(4 * TILE)
    out = np.zeros(TILE, np.float32)
    make_tiled_sum(True)[1, TILE](out, a)
    np.testing.assert_allclose(out, np.roll(a.reshape(4, TILE), -1, axis=1).sum(0), rtol=1e-5)
    with pytest.raises(DataRace) as fault:
        make_tiled_sum(False)[1, TILE](out, a)
    message = str(fault.value)
    assert "tile[t] = a[k * TILE + t]" in message and "writes it" in message and "read it" in message
    assert "after their last read and before this write" in message


@cuda.jit
def barrier_in_a_branch(out, a):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    out[t] = a[t]


def test_barrier_inside_a_divergent_branch():
    a = data(32)
    with pytest.raises(DivergentBarrier) as fault:
        barrier_in_a_branch[1, 32](np.zeros_like(a), a)
    message = str(fault.value)
    assert "cuda.syncthreads() reached by 16 of the 32 running threads of block blockIdx=(0, 0, 0)" in message
    assert "thread threadIdx=(0, 0, 0) waits at it, thread threadIdx=(16, 0, 0) never gets there" in message


@cuda.jit
def barrier_after_early_exit(out, a):
    """Threads past the end return before the barrier: allowed, they are not waited for."""
    tile = cuda.shared.array(TILE, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i >= a.size:
        return
    tile[t] = a[i]
    cuda.syncthreads()
    out[i] = tile[t] * 2


def test_threads_that_returned_are_not_waited_for():
    a = data(40)
    out = np.zeros_like(a)
    barrier_after_early_exit[2, TILE](out, a)
    np.testing.assert_array_equal(out, 2 * a)


@cuda.jit
def reads_unwritten_shared(out, a):
    tile = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    if t < TILE - 1:
        tile[t] = a[t]
    cuda.syncthreads()
    out[t] = tile[TILE - 1 - t]


def test_uninitialised_shared_read():
    a = data(TILE)
    with pytest.raises(UninitializedRead) as fault:
        reads_unwritten_shared[1, TILE](np.zeros_like(a), a)
    assert "thread threadIdx=(0, 0, 0) of block blockIdx=(0, 0, 0) reads `tile[31]`, which nothing has written" in str(
        fault.value
    )
    assert str(fault.value).endswith("before reading it)")  # no thread returned: nothing about returns


def line_of(text: str) -> int:
    """The line of this file that starts with ``text`` (once)."""
    with open(__file__) as source:
        lines = [number for number, line in enumerate(source, 1) if line.strip().startswith(text)]
    assert len(lines) == 1, lines
    return lines[0]


HALO = TILE + 2


@cuda.jit
def window_sum_returns_before_copy(out, a):
    window = cuda.shared.array(HALO, float32)
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * cuda.blockDim.x
    if start + t >= a.size: return  # noqa: E701 (the one-line guard a student writes)
    window[t + 1] = a[start + t]
    if t == 0:
        window[0] = a[start - 1] if start > 0 else float32(0)
        window[HALO - 1] = float32(0)
    cuda.syncthreads()
    out[start + t] = window[t] + window[t + 1] + window[t + 2]


def test_unwritten_shared_read_names_the_threads_that_returned_before_the_copy():
    a = data(TILE + 3)
    with pytest.raises(UninitializedRead) as fault:
        window_sum_returns_before_copy[2, TILE](np.zeros_like(a), a)
    line = line_of("if start + t >= a.size: return")
    assert (
        "thread threadIdx=(2, 0, 0) of block blockIdx=(1, 0, 0) reads `window[4]`, which nothing has written (shared "
        "memory starts with leftovers; write it, then syncthreads, before reading it); 29 threads of this block "
        f"(threadIdx.x 3 to 31) had returned before this read, at line {line} (`if start + t >= a.size: return  # "
        "noqa: E701 (the one-line guard a student writes)`): if one of them was to write `window[4]`, every thread "
        "must reach the copy and the barrier before returning (guard the work, not the barrier)"
    ) in str(fault.value)


@cuda.jit
def tile_2d_returns_at_two_lines(out, a):
    s = cuda.shared.array((8, 8), float32)
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    if y >= 6:
        return  # the first return
    if x >= 5:
        return  # the second return
    s[y, x] = a[y * 8 + x]
    cuda.syncthreads()
    out[y * 8 + x] = s[7 - y, 7 - x]


def test_unwritten_shared_read_after_returns_at_two_lines_names_the_first():
    a = data(64)
    with pytest.raises(UninitializedRead) as fault:
        tile_2d_returns_at_two_lines[1, (8, 8)](np.zeros_like(a), a)
    assert (
        "; 34 threads of this block (among them threadIdx=(5, 0, 0) and threadIdx=(7, 7, 0)) had returned before "
        f"this read, at line {line_of('return  # the first return')} (`return  # the first return`) and at 1 other "
        "return: if one of them was to write `s[7, 7]`"
    ) in str(fault.value)


@cuda.jit(device=True)
def clamped(v):
    if v > 0:
        return v
    return float32(0)


@cuda.jit
def skips_the_copy_without_returning(out, a):
    tile = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    if clamped(a[t]) > 0:  # a return in a device function is no thread's exit
        tile[t] = a[t]
    cuda.syncthreads()
    out[t] = tile[TILE - 1 - t]


def test_unwritten_shared_read_without_exited_threads_says_nothing_about_returns():
    a = -np.abs(data(TILE))
    with pytest.raises(UninitializedRead) as fault:
        skips_the_copy_without_returning[1, TILE](np.zeros_like(a), a)
    assert str(fault.value).endswith("which nothing has written (shared memory starts with leftovers; write it, then "
                                     "syncthreads, before reading it)")


@cuda.jit
def block_zero_fills_shared(out):
    s = cuda.shared.array(4, int32)
    if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
        s[0] = 7
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = s[0]


def test_blocks_do_not_see_each_others_shared_memory():
    with pytest.raises(UninitializedRead, match=r"block blockIdx=\(1, 0, 0\) reads `s\[0\]`"):
        block_zero_fills_shared[2, 32](np.zeros(2, np.int32))


@cuda.jit
def uninitialised_local(out):
    scratch = cuda.local.array(4, float32)
    scratch[0] = float32(1)
    out[cuda.threadIdx.x] = scratch[1]


def test_uninitialised_local_read():
    with pytest.raises(UninitializedRead, match="local memory starts undefined"):
        uninitialised_local[1, 4](np.zeros(4, np.float32))


@cuda.jit
def sum_without_atomic(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[0] += a[i]


@cuda.jit
def sum_with_atomic(out, a):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(out, 0, a[i])


def test_unsynchronised_global_accumulation_and_the_atomic_fix():
    a = data(100, dtype=np.float64)
    out = np.zeros(1)
    with pytest.raises(DataRace, match=r"data race on `out\[0\]`.*use an atomic"):
        sum_without_atomic[4, 32](out, a)
    out[:] = 0
    sum_with_atomic[4, 32](out, a)
    np.testing.assert_allclose(out[0], a.sum())


@cuda.jit
def block_adds_into_one_element(out, a):
    out[0] += a[cuda.threadIdx.x]


@cuda.jit
def tree_sum_without_barriers(out, a):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    cuda.syncthreads()
    stride = 1
    while stride < TILE:
        if t % (2 * stride) == 0:
            s[t] += s[t + stride]
        stride *= 2
    if t == 0:
        out[0] = s[0]


def test_threads_of_one_block_adding_into_one_element_are_told_to_use_an_atomic_not_a_barrier():
    told = "all update this one element from its old value.*no barrier fixes. Use an atomic .cuda.atomic.add"
    with pytest.raises(DataRace, match=told):
        block_adds_into_one_element[1, 8](np.zeros(1, np.float32), data(8))
    with pytest.raises(DataRace, match="put cuda.syncthreads"):  # each thread adds into its own element
        tree_sum_without_barriers[1, TILE](np.zeros(1, np.float32), data(TILE))


@cuda.jit
def every_block_writes_the_first_element(out):
    if cuda.threadIdx.x == 0:
        out[0] = cuda.blockIdx.x


def test_writes_from_two_blocks_race():
    with pytest.raises(DataRace, match="different blocks cannot wait for each other"):
        every_block_writes_the_first_element[3, 32](np.zeros(1, np.int32))


@cuda.jit
def stride_by_grid_dim(out, a):  # a grid-stride loop stepping by gridDim.x: threads of a block meet
    for i in range(cuda.grid(1), out.size, cuda.gridDim.x):
        out[i] = a[i] * 2


def test_two_writers_of_one_element_are_told_to_check_the_index():
    a = data(64)
    with pytest.raises(DataRace, match=r"writes it, thread .* wrote it, and if each thread should write its own "
                                       r"element, two computed the same index: check it .*let one thread write it"):
        stride_by_grid_dim[2, 8](np.zeros(64, np.float32), a)


@cuda.jit
def all_threads_write_one_element(out):
    out[0] = cuda.threadIdx.x


def test_writes_in_one_instruction_race():
    with pytest.raises(DataRace, match="write it in the same instruction"):
        all_threads_write_one_element[1, 4](np.zeros(1, np.int32))


def make_warp_tail(sync: bool):
    @cuda.jit
    def warp_tail(out, a):
        """The last 32 sums of a block reduction in one warp, ordered by syncwarp (or not)."""
        s = cuda.shared.array(64, float32)
        t = cuda.threadIdx.x
        s[t] = a[t]
        s[t + 32] = a[t + 32]
        cuda.syncwarp()
        stride = 32
        while stride > 0:
            if t < stride:
                s[t] += s[t + stride]
            if sync:
                cuda.syncwarp()
            stride //= 2
        if t == 0:
            out[0] = s[0]

    return warp_tail


def test_warp_synchronous_code_needs_syncwarp():
    a = data(64)
    out = np.zeros(1, np.float32)
    make_warp_tail(True)[1, 32](out, a)
    np.testing.assert_allclose(out[0], a.sum(), rtol=1e-5)
    with pytest.raises(DataRace, match=r"put cuda\.syncthreads\(\)"):  # a block of one warp: the block's barrier
        make_warp_tail(False)[1, 32](out, a)
    with pytest.raises(DataRace, match=r"put cuda\.syncwarp\(\) \(the two threads are in one warp"):
        last_warp_unrolled[1, 64](out, a)  # a block of two warps: the first one's barrier


@cuda.jit
def tile_read_without_a_barrier(out, a):
    """Every thread copies its element of a shared tile, then all read its first element, with no barrier."""
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    out[t] = s[0]


def test_a_tile_the_block_shares_is_told_the_block_s_barrier_first():
    """Threads 1 to 63 read what thread 0 wrote: threads 1 to 31 share its warp, 32 to 63 do not. The report names a
    thread of the other warp, whose order only cuda.syncthreads() gives (a student's review, 2026-12-02: the first
    hint was syncwarp, and only the next run said syncthreads)."""
    with pytest.raises(DataRace, match=r"threadIdx=\(3\d, 0, 0\) .* reads it, .*threadIdx=\(0, 0, 0\) .* wrote it, "
                                       r"and no barrier orders them: put cuda\.syncthreads\(\) after the write"):
        tile_read_without_a_barrier[1, 64](np.zeros(64, np.float32), data(64))


@cuda.jit
def last_warp_unrolled(out, a):
    """The classic warp-synchronous tail of a block sum (first block only): no barrier in the last warp."""
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = a[t]
    cuda.syncthreads()
    if t < 32:
        s[t] += s[t + 32]
        s[t] += s[t + 16]
        s[t] += s[t + 8]
    if t == 0:
        out[0] = s[0]


@cuda.jit
def shuffle_in_a_branch(out, a):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_down_sync(0xFFFFFFFF, a[t], 1)


@cuda.jit
def shuffle_past_a_partial_warp(out, a):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_down_sync(0xFFFFFFFF, a[t], 8)


def test_warp_primitives_with_absent_lanes():
    a = data(48)
    with pytest.raises(WarpFault, match=r"names lane 16 in its mask.*took another branch.*its operation's identity: "
                                        r"float32\(0\) for a sum, -math.inf for a max"):
        shuffle_in_a_branch[1, 32](np.zeros(32, np.float32), a)
    with pytest.raises(WarpFault, match=r"threadIdx=\(40, 0, 0\).*reads lane 16 of its warp.*only 16 threads"):
        shuffle_past_a_partial_warp[1, 48](np.zeros(48, np.float32), a)


def make_syncwarp_in_a_branch(then_block_barrier: bool):
    @cuda.jit
    def syncwarp_in_a_branch(out, a):
        """Lanes 0 and 1 sync the warp in a branch; the others go on (to the end, or to a block barrier)."""
        s = cuda.shared.array(32, float32)
        t = cuda.threadIdx.x
        s[t] = a[t]
        cuda.syncthreads()
        if t < 2:
            s[t] += s[t + 2]
            cuda.syncwarp()
        if then_block_barrier:
            cuda.syncthreads()
        if t == 0:
            out[0] = s[0] + s[1]

    return syncwarp_in_a_branch


def test_syncwarp_waits_for_the_lanes_of_its_mask_to_return_but_not_at_a_block_barrier():
    """Since Volta the lanes at a syncwarp wait for the others of its mask to sync or return (numba's own
    `cuda.reduce` relies on it); the others reaching a syncthreads first hang both."""
    a = data(32)
    out = np.zeros(1, np.float32)
    make_syncwarp_in_a_branch(False)[1, 32](out, a)
    np.testing.assert_allclose(out[0], a[:4].sum(), rtol=1e-6)
    with pytest.raises(WarpFault, match=r"threadIdx=\(2, 0, 0\).*reaches cuda.syncthreads\(\).*wait for it at "
                                        r"cuda.syncwarp\(\).*line \d+: cuda.syncwarp\(\)"):
        make_syncwarp_in_a_branch(True)[1, 32](out, a)
