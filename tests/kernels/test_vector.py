"""The simulator's stand-ins of `kernels.vector`'s 16-byte accesses check alignment in the lanes that make the
access only: a lane that an ``if`` keeps out is not checked, as on the GPU. The word family of halves: what it moves,
what it compiles to, and which arrays `vector_aligned` lets it read."""

import re

import numpy as np
import pytest
from numba import cuda, types, uint32

from gpucourse import simulated, trace
from gpucourse.kernels.vector import (copy_async16, copy_async_commit, copy_async_wait, ldmatrix4w, ldmatrix4w_trans,
                                      load4, load4w, pack2h, store4, store4w, transpose2h, vector_aligned)

rng = np.random.default_rng(4)


@cuda.jit
def copy_every_fourth_row_start(out, x):
    """Lanes whose column ``j`` is a multiple of 4 copy x[i, j:j + 4]; the others (misaligned j) skip it."""
    i, j = cuda.grid(2)
    if i < x.shape[0] and j + 4 <= x.shape[1]:
        if j % 4 == 0:
            store4(out, (i, j), load4(x, (i, j)))


@cuda.jit
def copy_at(out, x, j):
    i = cuda.grid(1)
    if i < x.shape[0]:
        store4(out, (i, j), load4(x, (i, j)))


def test_lanes_that_skip_a_vector_access_are_not_checked():
    x = rng.standard_normal((5, 12)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with simulated():
        copy_every_fourth_row_start[(2, 1), (4, 16)](out, x)
    np.testing.assert_array_equal(out, x)  # every lane's column covered by the aligned lanes' vectors


def test_an_active_misaligned_lane_still_faults():
    x = rng.standard_normal((3, 8)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with simulated():
        copy_at[1, 4](out, x, 4)
        np.testing.assert_array_equal(out[:, 4:], x[:, 4:])
        with pytest.raises(ValueError, match=r"tid=\[0, 0, 0\].*misaligned"):
            copy_at[1, 4](out, x, 2)


@cuda.jit
def aligned(flags, x):
    if cuda.grid(1) == 0:
        flags[0] = vector_aligned(x)


@pytest.mark.parametrize("view, expected", [
    (lambda a: a, True), (lambda a: a[:, :16], True), (lambda a: a[1:, 8:], True), (lambda a: a[:, 1:17], False),
    (lambda a: a[:, :12].copy(), False), (lambda a: a[:, ::2], False), (lambda a: a[0, 8:], True)],
    ids=["contiguous", "padded rows", "offset 16 bytes", "offset 2 bytes", "rows of 24 bytes", "strided", "1-D"])
def test_vector_aligned_accepts_float16_rows_of_whole_16_byte_vectors(view, expected):
    a = np.zeros((4, 24), np.float16)
    flags = np.zeros(1, np.bool_)
    with simulated():
        aligned[1, 1](flags, view(a))
    assert flags[0] == expected


@cuda.jit
def words_of(out, columns, x, j):
    """Row i: out[i, 0:4] = the words of x[i, j:j + 8] (one 16-byte load, one 16-byte store), out[i, 4] = the
    word packed from x[i, 1] and x[i, 2] (two 2-byte loads); columns[i // 2] = rows i and i + 1 transposed."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        store4w(out, (i, 0), load4w(x, (i, j)))
        out[i, 4] = pack2h(x[i, 1], x[i, 2])
        if i % 2 == 0 and i + 1 < x.shape[0]:
            top, bottom = load4w(x, (i, j)), load4w(x, (i + 1, j))
            for w in range(4):
                columns[i // 2, 2 * w], columns[i // 2, 2 * w + 1] = transpose2h(top[w], bottom[w])


def test_the_word_family_keeps_halves_in_pairs_the_first_in_the_low_bits():
    x = (rng.standard_normal((5, 24)) * rng.uniform(0.5, 8, (5, 1))).astype(np.float16)
    x[0, 9], x[1, 10], x[2, 2] = np.nan, -np.inf, -0.0  # bits, not values, travel
    out = np.full((5, 8), 0xDEADBEEF, np.uint32)
    columns = np.full((2, 8), 0xDEADBEEF, np.uint32)
    with simulated():
        words_of[1, 8](out, columns, x, 8)
        with pytest.raises(ValueError, match=r"tid=\[0, 0, 0\].*float16 is misaligned"):
            words_of[1, 8](out, columns, x, 4)
    bits = x.view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(out[:, :4], bits[:, 8:16:2] | bits[:, 9:16:2] << 16)
    np.testing.assert_array_equal(out[:, 4], bits[:, 1] | bits[:, 2] << 16)
    assert (out[:, 5:] == 0xDEADBEEF).all()
    for r in range(2):  # the words of column n: (x[2r, n], x[2r + 1, n]), an mma's B fragment register
        np.testing.assert_array_equal(columns[r], bits[2 * r, 8:16] | bits[2 * r + 1, 8:16] << 16)


def test_the_word_family_compiles_to_16_byte_accesses_and_byte_permutations():
    signature = (types.uint32[:, ::1], types.uint32[:, ::1], types.float16[:, ::1], types.int64)
    ptx, _ = cuda.compile_ptx(words_of.py_func, signature, cc=(8, 0))
    assert ptx.count("ld.global.v4.u32") == 3 and ptx.count("st.global.v4.u32") == 1
    assert ptx.count("prmt.b32") == 8 and "0x5410" in ptx and "0x7632" in ptx
    assert ptx.count("ld.global.u16") == 2  # pack2h's halves: a load each, joined without a byte permutation


def ldmatrix_kernels(load):
    """Two kernels of ``load`` (ldmatrix4w or ldmatrix4w_trans). The first: a warp copies ``words`` (16 x 16) into
    a shared tile with rows of 20 words; lane l names row rows[l] from word starts[l] and keeps the 4 words it gets
    in out[l]. The second names rows of a global array."""
    @cuda.jit
    def of_shared(out, words, rows, starts):
        tile = cuda.shared.array((16, 20), uint32, alignment=16)
        lane = cuda.threadIdx.x
        for e in range(lane, 16 * 16, 32):
            tile[e // 16, e % 16] = words[e // 16, e % 16]
        cuda.syncthreads()
        got = load(tile, (rows[lane], starts[lane]))
        for m in range(4):
            out[lane, m] = got[m]

    @cuda.jit
    def of_global(out, words):
        got = load(words, (cuda.threadIdx.x % 16, 0))
        out[cuda.threadIdx.x, 0] = got[0]

    return of_shared, of_global


ldmatrix_of, ldmatrix_of_global = ldmatrix_kernels(ldmatrix4w)
ldmatrix_trans_of, ldmatrix_trans_of_global = ldmatrix_kernels(ldmatrix4w_trans)


@pytest.mark.parametrize("name", ["ldmatrix4w", "ldmatrix4w_trans"])
def test_ldmatrix4w_gives_each_lane_the_cells_the_ptx_isa_names(name):
    """PTX ISA, ldmatrix .m8n8.x4.b16: threads 8m to 8m + 7 give the addresses of rows 0 to 7 of matrix m; each
    thread receives, in its register m, row (laneid / 4) of matrix m, elements 2 (laneid % 4) and 2 (laneid % 4)
    + 1; with .trans, of the transpose of matrix m (the matrix read column by column). Rows named in a shuffled
    order, from word 0, 4, 8 or 12 (16-byte rows), halves of random bits."""
    of_shared, of_global = (ldmatrix_of, ldmatrix_of_global) if name == "ldmatrix4w" else \
        (ldmatrix_trans_of, ldmatrix_trans_of_global)
    halves = rng.standard_normal((16, 32)).astype(np.float16)
    words = halves.view(np.uint32)
    rows, starts = rng.permutation(32) % 16, rng.integers(0, 4, 32) * 4
    out = np.zeros((32, 4), np.uint32)
    with simulated():
        with trace() as t:
            of_shared[1, 32](out, words, rows, starts)
        with pytest.raises(ValueError, match=f"{name} reads shared memory only"):
            of_global[1, 32](out, words)
    got = out.view(np.float16).reshape(32, 4, 2)  # lane, matrix, the two halves of a register
    for m in range(4):
        named = [(rows[8 * m + r], 2 * starts[8 * m + r]) for r in range(8)]  # lane 8m + r: row r of matrix m
        matrix = np.stack([halves[i, k:k + 8] for i, k in named])
        matrix = matrix.T if name == "ldmatrix4w_trans" else matrix
        for lane in range(32):
            row, column = lane // 4, 2 * (lane % 4)
            np.testing.assert_array_equal(got[lane, m], matrix[row, column:column + 2], err_msg=f"lane {lane}, m {m}")
    if name == "ldmatrix4w_trans":  # its stand-in reads as the hardware does: each lane the 16 bytes of its row,
        # one matrix (8 lanes, 128 bytes) at a time, each as many wavefronts as its worst bank conflict
        words_read = [{rows[8 * m + r] * 20 + starts[8 * m + r] + w for r in range(8) for w in range(4)}
                      for m in range(4)]
        wavefronts = sum(np.bincount(np.array(sorted(words)) % 32).max() for words in words_read)
        reads = t.array("tile").instructions["read"]
        assert (reads.requests, reads.lanes, reads.sectors) == (1, 32, wavefronts)


def test_ldmatrix4w_compiles_to_one_ldmatrix_from_a_shared_address():
    signature = (types.uint32[:, ::1], types.uint32[:, ::1], types.int64[::1], types.int64[::1])
    ptx, _ = cuda.compile_ptx(ldmatrix_of.py_func, signature, cc=(7, 5))
    found = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \{(%r\d+, %r\d+, %r\d+, %r\d+)\}, \[%r\d+\]", ptx)
    assert len(found) == 1


def test_ldmatrix4w_trans_compiles_to_one_ldmatrix_trans_from_a_shared_address():
    signature = (types.uint32[:, ::1], types.uint32[:, ::1], types.int64[::1], types.int64[::1])
    ptx, _ = cuda.compile_ptx(ldmatrix_trans_of.py_func, signature, cc=(7, 5))
    found = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16 \{(%r\d+, %r\d+, %r\d+, %r\d+)\}, "
                       r"\[%r\d+\]", ptx)
    assert len(found) == 1


WAIT = 0


@cuda.jit
def copy_rows_async(out, a, rows_inside):
    """A warp copies 16 rows of 16 halves of ``a`` (2 chunks of 8 a row) into a shared tile with cp.async, zeros
    from row ``rows_inside`` on (the copy then names row 0, inside ``a``), and writes the tile to ``out``."""
    tile = cuda.shared.array((16, 8), uint32, alignment=16)  # rows of 8 words: 8 lanes write 128 bytes in a row
    t = cuda.threadIdx.x
    r, c = t // 2, t % 2
    inside = r < rows_inside
    copy_async16(tile, (r, 4 * c), a, (r if inside else 0, 8 * c), inside)
    copy_async_commit()
    copy_async_wait(WAIT)
    cuda.syncthreads()
    for w in range(4):
        out[r, 4 * c + w] = tile[r, 4 * c + w]


@cuda.jit
def copy_into_global(out, a):
    copy_async16(out, (0, 0), a, (0, 0), True)


def test_copy_async16_copies_16_bytes_or_fills_zeros_in_one_warp_access_each_way():
    a = rng.standard_normal((16, 16)).astype(np.float16)
    out = np.full((16, 8), 7, np.uint32)
    with simulated():
        with trace() as t:
            copy_rows_async[1, 32](out, a, 11)
        with pytest.raises(ValueError, match="copy_async16 copies into shared memory only"):
            copy_into_global[1, 1](out, a)
    expected = a.view(np.uint32).copy()
    expected[11:] = 0  # src-size 0: 16 zero bytes, nothing read
    np.testing.assert_array_equal(out, expected)
    reads = t.array("a").instructions["read"]
    assert (reads.requests, reads.lanes) == (1, 22)  # one warp instruction, the 22 lanes inside
    assert t.array("a").element_counts("read")[11:].sum() == 0
    assert reads.sectors == 11 * 32 // 32  # 11 rows of 32 bytes: one sector each
    writes = t.array("tile").instructions["write"]
    assert (writes.requests, writes.lanes, writes.worst) == (1, 32, 1)  # one 16-byte store, 8 lanes a phase


def test_copy_async16_compiles_to_cp_async_from_sm_80_and_to_a_load_and_store_before():
    signature = (types.uint32[:, ::1], types.float16[:, ::1], types.int64)
    ptx, _ = cuda.compile_ptx(copy_rows_async.py_func, signature, cc=(8, 0))
    assert re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", ptx)
    assert ptx.index("cp.async.cg") < ptx.index("cp.async.commit_group;") < ptx.index("cp.async.wait_group 0;") \
        < ptx.index("bar.sync")
    assert "ld.global.v4" not in ptx and "st.shared.v4" not in ptx
    ptx, _ = cuda.compile_ptx(copy_rows_async.py_func, signature, cc=(7, 5))  # no cp.async before sm_80
    assert "cp.async" not in ptx
    assert ptx.count("ld.global.v4.u32") == 1 and ptx.count("st.shared.v4.u32") == 1  # the words or zeros, one store


def test_copy_async_wait_needs_a_constant():
    def kernel(out, n):
        copy_async_wait(n)

    with pytest.raises(Exception, match="copy_async_wait: n must be a constant integer"):
        cuda.compile_ptx(kernel, (types.uint32[::1], types.int64), cc=(8, 0))
