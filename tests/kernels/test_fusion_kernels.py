"""Module 5's reference kernels: fused GEMM epilogue, softmax naive/fused/online, attention naive/row-fused/flash.

Random non-uniform data against float64 NumPy, sizes that are not multiples of a tile or block, rows of
-inf and large logits, d = 16, 32, 64, poisoned outputs; global traffic from the trace, and allocations
that stay linear in N for the fused attention.
"""

import re

import numpy as np
import pytest
from numba import cuda, float32
from numba.core import types

from gpucourse import simulated, trace
from gpucourse.grading.fusion import global_bytes
from gpucourse.kernels import fusion as fu
from gpucourse.run.ptx import compile_for_gpu
from gpucourse.run.resources import kernel_resources
from gpucourse.run.tuning import innermost_loops, ptx_counts


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


rng = np.random.default_rng(5)


def logits(rows, cols, scale=4.0):
    """Random rows with a masked (-inf) row, a partly masked row and a row of huge values."""
    x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    x[0] = -np.inf
    x[1, rng.random(cols) < 0.5] = -np.inf
    x[2] = x[2] * 1e4 + 3e4  # exp would overflow without the max subtracted
    return x


def qkv(N, d):
    return [(rng.standard_normal((N, d)) * rng.uniform(0.5, 2)).astype(np.float32) for _ in range(3)]


def poisoned(shape):
    return cuda.to_device(np.full(shape, np.nan, np.float32))


def assert_attention_close(got, expected, V):
    """An output is a weighted mean of rows of V: float32's rounding is relative to max |V|, not to an output
    that cancels to near 0 (seen: 1.5e-5 off at -0.047 with |V| up to 6, rows of large logits)."""
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(V).max())


def global_traffic(recorded, name):
    """(reads, writes) of the global array ``name`` over every launch in ``recorded``."""
    reads = sum(int(launch.array(name).per_thread["read"].sum()) for launch in recorded.launches if name in launch.arrays)
    writes = sum(int(launch.array(name).per_thread["write"].sum()) for launch in recorded.launches if name in launch.arrays)
    return reads, writes


def test_references_agree_on_masked_rows_and_large_logits():
    x = logits(4, 9)
    y = fu.softmax_reference(x)
    assert np.all(y[0] == 0) and np.all(np.isfinite(y))  # a fully masked row gives zeros, not NaN
    np.testing.assert_allclose(y[1:].sum(axis=1), 1, rtol=1e-12)
    Q, K, V = qkv(5, 3)
    O = fu.attention_reference(Q, K, V, causal=True)
    np.testing.assert_allclose(O[0], V[0], rtol=1e-12)  # the first query sees only the first key
    np.testing.assert_allclose(fu.attention_reference(Q, K, V)[-1], fu.attention_reference(Q, K, V, True)[-1])


@pytest.mark.parametrize("shape", [(5, 1), (7, 33), (4, 300), (3, 1000)], ids=str)
def test_softmax_paths_match_float64(shape):
    x = logits(max(shape[0], 3), shape[1])
    expected = fu.softmax_reference(x)
    np.testing.assert_allclose(fu.softmax_naive(x), expected, rtol=1e-5, atol=1e-7)
    for kernel in fu.SOFTMAX_KERNELS:
        for threads in (32, 96, 256):
            d_y = poisoned(x.shape)
            fu.launch_softmax(kernel, d_y, cuda.to_device(x), threads)
            np.testing.assert_allclose(d_y.copy_to_host(), expected, rtol=1e-5, atol=1e-7)


def test_softmax_traffic_naive_vs_fused_vs_online():
    x = logits(6, 200)
    d_x, d_y = cuda.to_device(x), poisoned(x.shape)
    with trace() as fused:
        fu.launch_softmax(fu.softmax_row_fused, d_y, d_x)
    fused.assert_reads_per_element("x", exactly=1)
    fused.assert_writes_per_element("y", exactly=1)
    with trace() as online:
        fu.launch_softmax(fu.softmax_online, d_y, d_x)
    online.assert_reads_per_element("x", exactly=2)  # the (m, l) pass and the write pass
    online.assert_writes_per_element("y", exactly=1)
    with trace() as naive:
        fu.softmax_naive(x)
    assert len(naive) == 3
    assert global_traffic(naive, "x") == (2 * x.size, 0) and global_traffic(naive, "e") == (x.size, x.size)
    assert global_bytes(fused) == 2 * x.nbytes  # one read of x, one write of y: the least a softmax can move
    assert global_bytes(online) == 3 * x.nbytes
    assert global_bytes(naive) > 5 * x.nbytes  # x twice, e written and read, y written, and the row statistics


def test_softmax_explains_bad_input():
    x = cuda.to_device(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match="x must be 2-D"):
        fu.launch_softmax(fu.softmax_online, cuda.to_device(np.zeros((2, 4), np.float32)), x)
    with pytest.raises(TypeError, match="must be float32"):
        fu.launch_softmax(fu.softmax_online, cuda.to_device(np.zeros((2, 5))), x)
    with pytest.raises(ValueError, match="multiple of 32"):
        fu.launch_softmax(fu.softmax_online, x, x, threads=48)
    wide = cuda.to_device(np.zeros((1, fu.MAX_COLS + 1), np.float32))
    with pytest.raises(ValueError, match="use softmax_online"):
        fu.launch_softmax(fu.softmax_row_fused, wide, wide)


@pytest.mark.parametrize("N, d", [(1, 16), (45, 16), (70, 32), (97, 64)], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_paths_match_float64(N, d, causal):
    Q, K, V = qkv(N, d)
    Q[-1] *= 60  # large logits in the last query row
    expected = fu.attention_reference(Q, K, V, causal)
    np.testing.assert_allclose(fu.attention_naive(Q, K, V, causal), expected, rtol=1e-4, atol=1e-5)
    for kernel in fu.ATTENTION_KERNELS:
        d_O = poisoned((N, d))
        fu.launch_attention(kernel, d_O, *(cuda.to_device(a) for a in (Q, K, V)), causal)
        np.testing.assert_allclose(d_O.copy_to_host(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel, N, queries, keys", [(fu.attention_flash, 80, fu.BLOCK_ROWS, fu.BLOCK_KEYS),
                                                      (fu.attention_flash2, 150, fu.FLASH_QUERIES, fu.FLASH_KEYS)],
                         ids=["flash", "flash2"])
def test_flash_reads_k_and_v_once_per_block_of_queries_and_skips_masked_tiles(kernel, N, queries, keys):
    d = 16
    arrays = [cuda.to_device(a) for a in qkv(N, d)]
    blocks = -(-N // queries)
    with trace() as full:
        fu.launch_attention(kernel, poisoned((N, d)), *arrays)
    for name in "KV":
        full.assert_reads_per_element(name, exactly=blocks)
    full.assert_reads_per_element("Q", exactly=1)
    full.assert_writes_per_element("O", exactly=1)
    with trace() as causal:
        fu.launch_attention(kernel, poisoned((N, d)), *arrays, True)
    reads = causal.reads_per_element("K").reshape(N, d)[:, 0]  # flash2 sees (1, N, d): one head
    tile = np.arange(N) // keys  # key j is read by the query blocks that end at or after its tile
    np.testing.assert_array_equal(reads, [sum(1 for b in range(blocks) if min(N, (b + 1) * queries) > t * keys)
                                          for t in tile])
    assert reads.sum() < full.reads_per_element("K").sum() / d


@pytest.mark.parametrize("heads, N, d, build", [(3, 75, 20, 32), (2, 130, 48, 64), (4, 33, 16, 64), (2, 64, 8, 16),
                                                (2, 70, 6, 16)], ids=str)  # d = 6: K and V one element per load
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash2_over_heads_and_every_build_that_holds_d(heads, N, d, build, causal):
    Q, K, V = ([qkv(N, d)[0] for _ in range(heads)] for _ in range(3))
    Q, K, V = (np.stack(a) for a in (Q, K, V))
    Q[:, -1] *= 60
    expected = np.stack([fu.attention_reference(q, k, v, causal) for q, k, v in zip(Q, K, V)])
    d_O = poisoned(Q.shape)
    fu.launch_attention(fu.attention_flash2, d_O, *(cuda.to_device(a) for a in (Q, K, V)), causal)
    assert_attention_close(d_O.copy_to_host(), expected, V)
    d_O = poisoned(Q.shape)  # a larger build, zero-padded past d, gives the same answer
    grid, block = fu.flash2_configuration(Q.shape)
    fu.make_flash2(build)[grid, block](d_O, *(cuda.to_device(a) for a in (Q, K, V)), causal)
    assert_attention_close(d_O.copy_to_host(), expected, V)


@pytest.mark.parametrize("heads, N, d, splits", [(1, 200, 16, 3), (2, 130, 24, 4), (1, 100, 62, 2)],
                         ids=str)  # d = 62: one element per load
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash2_split_over_keys(heads, N, d, splits, causal):
    """Slices of 3 tiles (the last partial), of 2 tiles where the 4th slice is empty, and of 2 tiles at d = 62
    (the 64 build, no 16-byte loads); with the mask the slices past a block's last query have nothing to do.
    Outputs and partial results poisoned."""
    Q, K, V = (np.stack([qkv(N, d)[0] for _ in range(heads)]) for _ in range(3))
    Q[:, -1] *= 60
    expected = np.stack([fu.attention_reference(q, k, v, causal) for q, k, v in zip(Q, K, V)])
    d_O = poisoned(Q.shape)
    parts = [poisoned(p.shape) for p in fu.flash2_partials(Q.shape, splits)]
    fu.launch_flash2(d_O, *(cuda.to_device(a) for a in (Q, K, V)), causal, splits, parts)
    assert_attention_close(d_O.copy_to_host(), expected, V)


def test_flash2_splits_the_keys_only_where_its_grid_is_small():
    assert fu.multiprocessors() == fu.H100_SMS  # the simulator plans for an H100
    assert fu.flash2_splits(1, 4096, 132) == 9  # 64 blocks of queries; 4 x 132 blocks fill an H100
    assert fu.flash2_splits(16, 4096, 132) == 1  # 1024 blocks already
    assert fu.flash2_splits(1, 1024, 132) == 8  # at least 4 tiles of keys per slice
    assert fu.flash2_splits(1, 200, 132) == 1 and fu.flash2_splits(1, 65536, 132) == 1
    assert fu.flash2_splits(1, 100000, 40) == fu.flash2_splits(1, 1 << 12, 8) == 1
    assert fu.flash2_splits(1, 4096, 1000) == fu.MAX_SPLITS
    assert fu.flash2_configuration((1, 4096, 64), 9) == ((64, 1, 9), fu.FLASH_THREADS)


@pytest.mark.parametrize("TM, TN, vector_a, vector_b, depth", [(2, 3, False, False, 7), (4, 8, True, True, 6),
                                                             (8, 4, True, False, 9)], ids=str)
def test_micro_tile_product_at_any_depth(TM, TN, vector_a, vector_b, depth):
    """Depths that are not a multiple of K_STEPS (the steps after the last whole pass), and the 16-byte
    fragments of A (given transposed) and of B, at rows and columns that are not the first."""
    product = fu.make_micro_tile(TM, TN, vector_b, vector_a)
    row, row_step, col, col_step = 4, 8, 4, 8
    rows = [row + (i // 4) * row_step + i % 4 if vector_a else row + i * row_step for i in range(TM)]
    cols = [col + (j // 4) * col_step + j % 4 if vector_b else col + j * col_step for j in range(TN)]
    A = rng.standard_normal((max(rows) // 4 * 4 + 8, depth)).astype(np.float32)  # rows of whole 16-byte chunks
    B = rng.standard_normal((depth, max(cols) // 4 * 4 + 8)).astype(np.float32)

    @cuda.jit
    def kernel(out, A, B):
        acc = cuda.local.array((TM, TN), float32)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(i - j)  # the product adds to what acc holds
        product(acc, A, row, row_step, B, col, col_step, depth)
        for i in range(TM):
            for j in range(TN):
                out[i, j] = acc[i, j]

    d_out = poisoned((TM, TN))
    kernel[1, 1](d_out, cuda.to_device(np.ascontiguousarray(A.T) if vector_a else A), cuda.to_device(B))
    expected = np.subtract.outer(np.arange(TM), np.arange(TN)) + A[rows].astype(np.float64) @ B[:, cols]
    np.testing.assert_allclose(d_out.copy_to_host(), expected, rtol=1e-5, atol=1e-5 * np.sqrt(depth + 1))


@pytest.mark.parametrize("D", fu.FLASH_DIMS)
def test_flash2_keeps_everything_in_registers(D):
    signature = (types.float32[:, :, ::1],) * 4 + (types.boolean,)
    split_signature = (types.float32[:, :, :, ::1],) + (types.float32[:, :, ::1],) * 5 + (types.boolean,)
    for kernel, types_ in ((fu.make_flash2(D), signature), (fu.make_flash2(D, True), split_signature)):
        ptx = compile_for_gpu(kernel, types_)
        assert "ld.local" not in ptx and "st.local" not in ptx  # every local index is a constant after unrolling
        assert "ex2.approx" in ptx  # exp2 with the scale folded into Q
        assert "ld.global.v4.f32" in ptx and "st.shared.v4.f32" in ptx and ".shared .align 16" in ptx  # K, V tiles
        products = [loop for loop in innermost_loops(ptx) if loop.count("fma.rn.f32") >= 8]  # S = Q K^T, O += P V
        assert len(products) == 2 and all(ptx_counts(loop)["inner_loop_sign_tests"] == 0 for loop in products)
        # per step of k, a thread's 4 neighbouring rows of Q (in S) or P (in O) in one 16-byte shared load, its 4
        # keys in one, its output columns in one per 4 where d allows (d = 16: V's 2 columns one word at a time)
        for loop, columns in zip(products, (fu.FLASH_KEYS // fu.COLUMN_LANES, D // fu.COLUMN_LANES)):
            steps, vector_b = loop.count("fma.rn.f32") // (4 * columns), columns % 4 == 0
            counts = loop.count("ld.shared.v4.f32"), len(re.findall(r"\bld\.shared\.f32\b", loop))
            assert counts == ((steps * (1 + columns // 4), 0) if vector_b else (steps, steps * columns)), counts
        used = kernel_resources(kernel, types_, "sm_90")
        if used is not None:  # None without nvJitLink
            assert used.spilled_bytes == 0 and used.shared_bytes < 48 * 1024
            assert used.registers <= 128  # launch bounds: 4 blocks of 128 threads per SM
    if D == 64:  # the benchmark's variant at 5 blocks per SM: 96 registers at most, and still none spilled
        five = kernel_resources(fu.make_flash2(D, blocks_per_sm=5), signature, "sm_90")
        assert five is None or (five.spilled_bytes == 0 and five.registers * fu.FLASH_THREADS * 5 <= 65536)


@pytest.mark.parametrize("D", fu.FLASH_DIMS)
def test_flash2_tile_copies_and_fragment_reads_are_free_of_bank_conflicts(D):
    """Every shared access of flash2 is free of bank conflicts as the trace counts them (a 16-byte access served
    8 lanes at a time, `simulator.trace`): the transposed scalar stores of Q and K (K's were 8-way at d = 64),
    the 16-byte stores of V and P, and every fragment read."""
    arrays = [cuda.to_device(np.stack([a])) for a in qkv(40, D)]
    with trace() as t:
        fu.launch_attention(fu.attention_flash2, poisoned((1, 40, D)), *arrays)
    tiles = ("q_tile", "k_tile", "v_tile", "p_tile")
    assert [t.bank_conflicts(name, "write") for name in tiles] == [1] * 4
    assert [t.bank_conflicts(name) for name in tiles] == [1] * 4


def test_flash2_explains_bad_head_dimensions():
    wide = np.zeros((3, fu.FLASH_DIMS[-1] + 1), np.float32)
    with pytest.raises(ValueError, match="use attention_flash for d up to 128"):
        fu.attention(wide, wide, wide, kernel=fu.attention_flash2)
    with pytest.raises(ValueError, match=r"3-D \(batch\*heads, N, d\)"):
        flat = cuda.to_device(np.zeros(5, np.float32))
        fu.launch_attention(fu.attention_flash2, flat, flat, flat, flat)


def test_row_fused_reads_k_and_v_once_per_query():
    N, d = 40, 32
    with trace() as t:
        fu.launch_attention(fu.attention_row_fused, poisoned((N, d)), *(cuda.to_device(a) for a in qkv(N, d)))
    t.assert_reads_per_element("K", exactly=N)
    t.assert_reads_per_element("V", exactly=N)
    t.assert_reads_per_element("Q", exactly=1)


@pytest.mark.parametrize("N", [48, 96, 192])
def test_largest_allocation_is_quadratic_naive_and_linear_fused(N):
    d = 16
    Q, K, V = qkv(N, d)
    with fu.allocations() as naive:
        fu.attention_naive(Q, K, V, causal=True)
    assert naive.largest == N * N * 4
    for kernel in fu.ATTENTION_KERNELS:
        with fu.allocations() as fused:
            fu.attention(Q, K, V, True, kernel)
        assert fused.largest == N * d * 4 and fused.sizes == [N * d * 4] * 4  # Q, K, V and O: nothing else
    with fu.allocations() as softmax:
        fu.softmax(Q)
    assert softmax.sizes == [Q.nbytes] * 2


def test_attention_explains_bad_input():
    Q = np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError, match="of one shape"):
        fu.attention(Q, np.zeros((5, 8), np.float32), Q)
    with pytest.raises(ValueError, match="head dimension d must be between 1 and 128"):
        big = np.zeros((2, 130), np.float32)
        fu.attention(big, big, big)
    long = cuda.to_device(np.zeros((fu.MAX_COLS + 1, 1), np.float32))
    with pytest.raises(ValueError, match="use attention_flash"):
        fu.launch_attention(fu.attention_row_fused, long, long, long, long)


@pytest.mark.parametrize("M, K, N", [(37, 50, 29), (16, 16, 16), (1, 70, 3)], ids=str)
def test_fused_epilogue_matches_and_writes_c_once(M, K, N):
    A, B = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N)))
    bias = rng.standard_normal(N).astype(np.float32)
    expected = np.maximum(A.astype(np.float64) @ B + bias, 0)
    traffic = {}
    for fused in (True, False):
        d_C = poisoned((M, N))
        with trace() as t:
            fu.gemm_bias_relu(d_C, cuda.to_device(A), cuda.to_device(B), cuda.to_device(bias), fused)
        np.testing.assert_allclose(d_C.copy_to_host(), expected, rtol=1e-4, atol=1e-4 * np.sqrt(K))
        traffic[fused] = global_traffic(t, "C")
    assert traffic[True] == (0, M * N)  # the epilogue rides in registers: C written once, never read
    assert traffic[False] == (2 * M * N, 3 * M * N)  # bias and ReLU each read and write C again
    with pytest.raises(ValueError, match=r"A's columns \(50\) must equal B's rows \(5\)"):
        fu.check_gemm(np.zeros((2, 3)), np.zeros((2, 50)), np.zeros((5, 3)), np.zeros(3))


@pytest.mark.parametrize("shape, threads", [((5, 1), 32), ((7, 300), 64), ((4, 1000), 128), ((3, 2000), 256),
                                            ((3, 301), 64), ((4, 1022), 128)], ids=str)  # 301, 1022: scalar path
def test_softmax_registers_matches_and_reads_x_once(shape, threads):
    x = logits(*shape) if shape[0] >= 3 else logits(3, shape[1])
    d_y = poisoned(x.shape)
    with trace() as t:
        fu.launch_softmax(fu.softmax_registers, d_y, cuda.to_device(x), threads)
    np.testing.assert_allclose(d_y.copy_to_host(), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
    assert global_bytes(t) == 2 * x.nbytes  # one read of x, one write of y
    assert fu.registers_threads(x.shape[1]) * fu.SOFTMAX_VALUES >= x.shape[1]


def test_softmax_registers_explains_a_row_too_long_and_keeps_it_in_registers():
    x = cuda.to_device(np.zeros((2, 300), np.float32))
    with pytest.raises(ValueError, match="use threads=128"):
        fu.launch_softmax(fu.softmax_registers, x, x, threads=32)
    ptx = compile_for_gpu(fu.softmax_registers, (types.float32[:, ::1],) * 2)
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx  # 16-byte accesses where rows are aligned


@pytest.mark.parametrize("shape, threads", [((5, 1), 32), ((7, 33), 128), ((4, 300), 64), ((9, 1000), 128),
                                            ((3, 1027), 256), ((5, 4096), 128), ((6, 4099), 96)], ids=str)
def test_softmax_vectorised_matches_and_moves_x_and_y_once(shape, threads):
    """Rows of 1 to 4099 columns (4099: every row starts at another place in a 16-byte vector, its head and tail
    scalars), one to five warps per row, several rows per block and a last block partly past the matrix."""
    x = logits(*shape)
    d_y = poisoned(x.shape)
    with trace() as t:
        fu.launch_softmax(fu.softmax_vectorised, d_y, cuda.to_device(x), threads)
    np.testing.assert_allclose(d_y.copy_to_host(), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
    assert global_bytes(t) == 2 * x.nbytes  # one read of x, one write of y
    t.assert_reads_per_element("x", exactly=1)
    t.assert_writes_per_element("y", exactly=1)
    row_threads, _ = fu.vectorised_configuration(*shape, threads)[1]
    assert t.barriers(0) == (1 if row_threads > 32 else 0)  # a row of one warp merges with shuffles only
    if shape[1] >= 1000:  # 16-byte accesses (16 sectors a warp request), a row's few scalars aside
        assert t.sectors_per_request("x") > 12 and t.sectors_per_request("y", "write") > 12


@pytest.mark.parametrize("rows, cols, threads", [(5, 300, 256), (4, 301, 96), (3, 129, 128)], ids=str)
def test_softmax_vectorised_merges_the_warps_of_a_row(rows, cols, threads):
    """A build with 4 values per thread: 300 columns take 3 warps, 2 rows per block of 256 threads (the third
    block's second row past the matrix); 129 columns take a warp and a few lanes of another."""
    kernel = fu.make_softmax_vectorised(1)
    x = logits(rows, cols)
    grid, block = fu.vectorised_configuration(rows, cols, threads, vectors=1)
    assert block[0] == 32 * -(-cols // 128)
    y = poisoned(x.size)
    with trace() as t:
        kernel[grid, block](y, cuda.to_device(x.ravel()), cols)
    np.testing.assert_allclose(y.copy_to_host().reshape(x.shape), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
    assert t.barriers(0) == 1  # the block's one barrier: each warp's state through shared memory


def test_softmax_vectorised_reads_scalars_where_x_is_not_16_byte_aligned():
    rows, cols = 4, 520
    x = logits(rows, cols)
    storage = cuda.to_device(np.concatenate([[np.float32(7)], x.ravel()]))  # x starts 4 bytes past a boundary
    requests = {}
    for name, flat in (("aligned", cuda.to_device(x.ravel())), ("not aligned", storage[1:])):
        y = poisoned(x.size)
        with trace() as t:
            fu.softmax_vectorised[fu.vectorised_configuration(rows, cols)](y, flat, cols)
        np.testing.assert_allclose(y.copy_to_host().reshape(x.shape), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
        t.assert_reads_per_element("x", exactly=1)
        requests[name] = t.array("x").instructions["read"].requests
    assert requests["not aligned"] >= 3.5 * requests["aligned"]  # each 16-byte vector as four 4-byte loads



def test_softmax_vectorised_refuses_views_it_would_flatten_into_a_copy():
    """A column slice or a Fortran-order matrix flattens into a copy: y would be written nowhere."""
    x, nan = logits(5, 40), np.full((5, 40), np.nan, np.float32)
    cases = [(cuda.to_device(x)[:, :33], cuda.to_device(nan)[:, :33], x[:, :33]),
             (cuda.to_device(np.asfortranarray(x)), cuda.to_device(np.asfortranarray(nan)), x)]
    for source, out, expected in cases:
        with pytest.raises(ValueError, match="both must be C-contiguous"):
            fu.launch_softmax(fu.softmax_vectorised, out, source)
        fu.launch_softmax(fu.softmax_online, out, source)  # the others take views
        np.testing.assert_allclose(out.copy_to_host(), fu.softmax_reference(expected), rtol=1e-5, atol=1e-7)

def test_softmax_vectorised_explains_a_row_too_long_and_keeps_it_in_registers():
    longest = fu.SOFTMAX_VECTORS * 4 * 1024
    assert fu.VECTORISED_MAX_COLS == longest
    x = cuda.to_device(np.zeros((1, longest + 1), np.float32))
    with pytest.raises(ValueError, match=f"at most {longest} columns .* use softmax_online"):
        fu.launch_softmax(fu.softmax_vectorised, x, x)
    signature = (types.float32[::1], types.float32[::1], types.int64)
    ptx = compile_for_gpu(fu.softmax_vectorised, signature)
    assert "ld.local" not in ptx and "st.local" not in ptx  # every index of `values` a constant after unrolling
    assert ptx.count("ld.global.v4.f32") == fu.SOFTMAX_VECTORS and ptx.count("st.global.v4.f32") == fu.SOFTMAX_VECTORS
    assert ptx.count("bar.sync") == 1  # the one barrier, where a row has several warps
    used = kernel_resources(fu.softmax_vectorised, signature, "sm_90")
    if used is not None:  # None without nvJitLink
        assert used.local_bytes == used.spilled_bytes == 0
        assert used.registers * 1024 <= 65536  # its launch bounds: a row of 1024 threads launches


@pytest.mark.parametrize("shape, sms", [((5, 1), 1), ((37, 300), 1), ((6, 2051), 1), ((9, 4099), 1), ((40, 1024), 3),
                                        ((3, 8192), 1)], ids=str)
def test_softmax_pipelined_matches_and_moves_x_and_y_once_over_several_turns(shape, sms):
    """The persistent grid of ``sms`` SMs: each block takes 1 to 5 turns (uneven: 9 rows over 2 blocks), rows of
    one warp (8 per block, the last turn's group partly past the matrix) to 8 warps, 16-byte heads and tails."""
    rows, cols = shape
    x = logits(rows, cols)
    x[-1] = -np.inf  # a masked row in a later turn than logits' own: zeros, nothing carried over from a turn before
    grid, block = fu.pipelined_configuration(rows, cols, sms=sms)
    turns = fu.pipelined_turns(rows, grid, block)
    y = poisoned(x.size)
    with trace() as t:
        fu.softmax_pipelined[grid, block](y, cuda.to_device(x.ravel()), cols)
    np.testing.assert_allclose(y.copy_to_host().reshape(shape), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
    assert grid == min(fu.PIPELINED_BLOCKS_PER_SM * sms, -(-rows // block[1]))
    assert global_bytes(t) == 2 * x.nbytes  # one read of x, one write of y: the rows loaded ahead are the next turn's
    t.assert_reads_per_element("x", exactly=1)
    t.assert_writes_per_element("y", exactly=1)
    assert t.barriers(0) == (turns if block[0] > 32 else 0)  # a barrier per turn where a row has several warps


def test_softmax_pipelined_through_launch_softmax_and_on_unaligned_rows():
    """`launch_softmax` plans for the simulator's stand-in SM count (132): one turn here; x 4 bytes past a 16-byte
    boundary takes the scalar path, each vector as four 4-byte loads."""
    x = logits(7, 1030)
    d_y = poisoned(x.shape)
    fu.launch_softmax(fu.softmax_pipelined, d_y, cuda.to_device(x))
    np.testing.assert_allclose(d_y.copy_to_host(), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
    storage = cuda.to_device(np.concatenate([[np.float32(7)], x.ravel()]))  # x starts 4 bytes past a boundary
    requests = {}
    for name, flat in (("aligned", cuda.to_device(x.ravel())), ("not aligned", storage[1:])):
        y = poisoned(x.size)
        with trace() as t:
            fu.softmax_pipelined[fu.pipelined_configuration(*x.shape, sms=1)](y, flat, x.shape[1])
        np.testing.assert_allclose(y.copy_to_host().reshape(x.shape), fu.softmax_reference(x), rtol=1e-5, atol=1e-7)
        t.assert_reads_per_element("x", exactly=1)
        requests[name] = t.array("x").instructions["read"].requests
    assert requests["not aligned"] >= 3.5 * requests["aligned"]  # each 16-byte vector as four 4-byte loads


def test_softmax_pipelined_explains_a_row_too_long_and_keeps_both_rows_in_registers():
    longest = fu.SOFTMAX_PIPELINED_VECTORS * 4 * fu.PIPELINED_THREADS
    assert fu.PIPELINED_MAX_COLS == longest
    x = cuda.to_device(np.zeros((1, longest + 1), np.float32))
    with pytest.raises(ValueError, match=f"at most {longest} columns .* use softmax_vectorised"):
        fu.launch_softmax(fu.softmax_pipelined, x, x)
    x = cuda.to_device(np.zeros((1, fu.VECTORISED_MAX_COLS + 1), np.float32))
    with pytest.raises(ValueError, match="use softmax_online"):  # too long for softmax_vectorised too
        fu.launch_softmax(fu.softmax_pipelined, x, x)
    signature = (types.float32[::1], types.float32[::1], types.int64)
    ptx = compile_for_gpu(fu.softmax_pipelined, signature)
    assert "ld.local" not in ptx and "st.local" not in ptx  # `now` and `ahead`: constant indices after unrolling
    vectors = fu.SOFTMAX_PIPELINED_VECTORS
    assert ptx.count("ld.global.v4.f32") == 2 * vectors  # the first turn's row, and each next one's in the loop
    assert ptx.count("st.global.v4.f32") == vectors and ptx.count("bar.sync") == 1
    loads = [m.start() for m in re.finditer(r"ld\.global\.v4\.f32", ptx)]
    assert max(loads) < ptx.index("ex2.approx")  # the next row's loads come before this row's first exp
    used = kernel_resources(fu.softmax_pipelined, signature, "sm_90")
    if used is not None:  # None without nvJitLink
        assert used.local_bytes == used.spilled_bytes == 0
        assert used.registers * fu.PIPELINED_THREADS * fu.PIPELINED_BLOCKS_PER_SM <= 65536  # its launch bounds
