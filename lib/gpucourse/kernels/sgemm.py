"""Module 3's top SGEMM rung, after Boehm's worklog and CUTLASS: `make_warp_tiled(...)`.

``C[z] = A[a] @ B[b]`` with the (C, A, B) convention of `kernels.matmul`. What each
step adds over `matmul_register_tiled`:

1. **Transposed A tile.** Shared memory holds A's tile as ``tile_a[k, row]``: for one
   ``k`` a thread's rows are consecutive, so it reads them with one 16-byte load,
   like its columns of ``tile_b[k, col]``. (Rows are padded by 4 floats, so the
   transposing stores of neighbouring threads fall in different banks.)
2. **16-byte loads.** Global reads of A and B and shared reads of both tiles are
   `vector.load4` (``ld.global.v4.f32``, ``ld.shared.v4.f32``): a quarter of the
   load instructions. Where a row of A or B is not 16-byte aligned (K or N not a
   multiple of 4, a view) or a chunk of 4 crosses the matrix's edge, the same
   code path falls back to guarded scalar loads with zeros past the edge.
3. **Double buffering.** Two copies of each tile: while the block multiplies
   from one, each thread has already issued the global loads of the next step
   into registers and stores them into the other copy afterwards; one barrier
   per step instead of two, and the loads' latency hides behind the arithmetic.
4. **Warp tiling.** The block's ``BM x BN`` tile of C is split into warp tiles of
   ``WM x WN``; in a warp, lanes form a ``LANES_M x (32 / LANES_M)`` grid and each
   lane holds ``ITER_M x ITER_N`` sub-tiles of 4 x 4, ``WSUB_M = 4 * LANES_M``
   rows apart: a warp's shared reads for one ``k`` are a few 16-byte vectors
   (broadcast within the warp), and each thread's ``(4 ITER_M) x (4 ITER_N)``
   accumulators live in registers: every loop has a constant trip count, so after
   unrolling every ``cuda.local.array`` index is a constant (no local memory).

The tile sizes are the factory's parameters (module 7 tunes them);
`parameter_problem` says why a combination is invalid, `shared_bytes` and
`threads` what a block needs.
"""

from __future__ import annotations

from numba import cuda, float32

from .vector import WIDTH, load4, store4, vector_aligned

WARP = 32
PAD = WIDTH  # floats added to each row of the transposed A tile: 16 banks between k and k + 4, alignment kept


def threads(BM: int, BN: int, WM: int, WN: int) -> int:
    """Threads per block: one warp per ``WM x WN`` warp tile."""
    return (BM // WM) * (BN // WN) * WARP


def shared_bytes(BM: int, BN: int, BK: int) -> int:
    """Static shared memory per block: two copies (double buffering) of each tile."""
    return 2 * BK * ((BM + PAD) + BN) * 4


def parameter_problem(BM, BN, BK, WM, WN, LANES_M) -> str | None:
    """None when `make_warp_tiled` accepts these sizes, else what is wrong."""
    if WARP % LANES_M:
        return f"LANES_M = {LANES_M} must divide the warp's 32 lanes"
    LANES_N = WARP // LANES_M
    if BM % WM or BN % WN:
        return f"the warp tile {WM} x {WN} must divide the block tile {BM} x {BN}"
    if WM % (WIDTH * LANES_M) or WN % (WIDTH * LANES_N):
        return f"WM = {WM} must be a multiple of {WIDTH * LANES_M} and WN = {WN} of {WIDTH * LANES_N}"
    if BK % WIDTH:
        return f"BK = {BK} must be a multiple of {WIDTH} (16-byte loads along k)"
    chunks = min(BM, BN) * BK // WIDTH
    if chunks % threads(BM, BN, WM, WN):
        return (f"the {threads(BM, BN, WM, WN)} threads must share each tile's 16-byte chunks evenly "
                f"({BM * BK // WIDTH} of A, {BK * BN // WIDTH} of B)")
    if threads(BM, BN, WM, WN) > 1024:
        return f"{threads(BM, BN, WM, WN)} threads per block: at most 1024"
    if shared_bytes(BM, BN, BK) > 48 * 1024:
        return f"{shared_bytes(BM, BN, BK)} bytes of shared memory per block: at most 49152 (static)"
    accumulators = (WM // LANES_M) * (WN // LANES_N)
    if accumulators > 128:
        return f"{accumulators} accumulators per thread: more than 128 of the 255 registers would spill"
    return None


def make_block_product(BK: int, TM: int, TN: int, WSUB_M: int, WSUB_N: int, ROW_A: int, ROW_B: int,
                       K_PER_PASS: int = 1):
    """The core of a step, shared with `conv`'s implicit GEMM: ``acc += tile_a[now].T @ tile_b[now]`` over this
    thread's ``TM x TN`` outputs, rows ``row, row + 1, row + 2, row + 3, row + WSUB_M, ...`` of the block's tile and
    columns likewise from ``col``; every shared read a 16-byte vector. Inlined, so the arrays stay in registers.

    The tiles are flat: element ``[buffer, k, r]`` of A's is ``tile_a[(buffer * BK + k) * ROW_A + r]``. Each thread
    works out its offset in the buffer once and adds a row length per ``k``, so the ``k`` loop advances two
    addresses by constants. Measured on the PTX of `matmul_warp_tiled` (sm_90, `run.tuning.inspect_compiled`):
    64-bit integer operations per ``k`` 14 -> 3, instructions 89 -> 75 for its 64 FMAs; registers 120 -> 121
    (the same 2 blocks of 256 threads per SM); `conv.conv_implicit_gemm_warp_tiled` 10 -> 7 and 168 -> 162
    registers. With 3-D tiles numba recomputed ``(now * BK + k) * ROW_A + r`` in 64 bits at every ``k``.

    ``K_PER_PASS`` (1 or 2): the ``k`` written out per pass of the loop. NVVM leaves a loop with a body this large
    rolled, whatever its trip count (numba has no unroll pragma; a nested ``range(2)`` stays rolled too), and
    each pass costs a counter, a compare and a branch. sm_90 SASS of `matmul_warp_tiled`: 64 FFMA in 78
    instructions per pass (82%) with 1, 128 in 149 (86%) with 2, at 121 -> 126 registers (2 blocks of 256
    threads per SM either way); four per pass gave 256 in 287 (89%) at 167 registers (one block per SM), and
    spilled when capped at 128 by launch bounds. The conv keeps 1: with 2 it needs 186 registers, not 166,
    and 2 of its 128-thread blocks fit an SM instead of 3."""
    if K_PER_PASS not in (1, 2):
        raise ValueError(f"K_PER_PASS = {K_PER_PASS}: 1 or 2")
    ITER_M, ITER_N = TM // WIDTH, TN // WIDTH

    @cuda.jit(device=True, inline="always")
    def multiply_one_k(tile_a, tile_b, acc, a_values, b_values, a_at, b_at):
        """``acc += `` the outer product of A's column and B's row of one ``k``, at flat offsets a_at and b_at."""
        for i in range(ITER_M):
            values = load4(tile_a, (a_at + i * WSUB_M,))
            for v in range(WIDTH):
                a_values[i * WIDTH + v] = values[v]
        for j in range(ITER_N):
            values = load4(tile_b, (b_at + j * WSUB_N,))
            for v in range(WIDTH):
                b_values[j * WIDTH + v] = values[v]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += a_values[i] * b_values[j]

    @cuda.jit(device=True, inline="always")
    def multiply_step(tile_a, tile_b, now, acc, a_values, b_values, row, col):
        a_at = now * BK * ROW_A + row
        b_at = now * BK * ROW_B + col
        for k in range(0, BK, K_PER_PASS):  # BK is a multiple of 4 (`parameter_problem`)
            multiply_one_k(tile_a, tile_b, acc, a_values, b_values, a_at, b_at)
            if K_PER_PASS == 2:  # a constant: the test is compiled away
                multiply_one_k(tile_a, tile_b, acc, a_values, b_values, a_at + ROW_A, b_at + ROW_B)
            a_at += K_PER_PASS * ROW_A
            b_at += K_PER_PASS * ROW_B

    return multiply_step


def make_warp_tiled(BM: int = 128, BN: int = 128, BK: int = 8, WM: int = 64, WN: int = 32, LANES_M: int = 4):
    """The warp-tiled, double-buffered, vector-load SGEMM kernel for one choice of tile sizes."""
    problem = parameter_problem(BM, BN, BK, WM, WN, LANES_M)
    if problem:
        raise ValueError(f"make_warp_tiled({BM}, {BN}, {BK}, {WM}, {WN}, {LANES_M}): {problem}")
    LANES_N = WARP // LANES_M
    WARPS_N = BN // WN
    WSUB_M, WSUB_N = WIDTH * LANES_M, WIDTH * LANES_N  # a warp's rows (columns) for one sub-tile of 4 each
    ITER_M, ITER_N = WM // WSUB_M, WN // WSUB_N  # sub-tiles per thread along rows and columns
    TM, TN = WIDTH * ITER_M, WIDTH * ITER_N  # each thread's accumulators: TM x TN
    THREADS = threads(BM, BN, WM, WN)
    A_ROWS = BM + PAD  # the transposed A tile's row length
    SIZE_A, SIZE_B = 2 * BK * A_ROWS, 2 * BK * BN  # flat tiles (`make_block_product`)
    LOADS_A, LOADS_B = BM * BK // WIDTH // THREADS, BK * BN // WIDTH // THREADS  # 16-byte chunks per thread per step
    SPLIT_A, SPLIT_B = BK // WIDTH, BN // WIDTH  # chunks per row of A's tile (along k), of B's (along n)

    multiply_step = make_block_product(BK, WIDTH * ITER_M, WIDTH * ITER_N, WSUB_M, WSUB_N, A_ROWS, BN, K_PER_PASS=2)

    @cuda.jit(device=True)
    def load_chunk(X, batch, row, col, rows, cols, vectors):
        """``X[batch, row, col : col + 4]``, zeros past the edges; one 16-byte load where it can be."""
        if vectors and row < rows and col + WIDTH <= cols:
            x0, x1, x2, x3 = load4(X, (batch, row, col))
        else:
            x0 = X[batch, row, col] if row < rows and col < cols else float32(0)
            x1 = X[batch, row, col + 1] if row < rows and col + 1 < cols else float32(0)
            x2 = X[batch, row, col + 2] if row < rows and col + 2 < cols else float32(0)
            x3 = X[batch, row, col + 3] if row < rows and col + 3 < cols else float32(0)
        return x0, x1, x2, x3

    @cuda.jit
    def matmul_warp_tiled(C, A, B):
        # flat tiles (`make_block_product`), 16-byte aligned for their vector accesses (numba's default: 4 bytes)
        tile_a = cuda.shared.array(SIZE_A, float32, alignment=16)  # transposed: [buffer, k, row]
        tile_b = cuda.shared.array(SIZE_B, float32, alignment=16)  # [buffer, k, col]
        acc = cuda.local.array((TM, TN), float32)  # constant indices after unrolling: registers
        a_values = cuda.local.array(TM, float32)
        b_values = cuda.local.array(TN, float32)
        next_a = cuda.local.array((LOADS_A, WIDTH), float32)  # the next step's chunks, on their way
        next_b = cuda.local.array((LOADS_B, WIDTH), float32)
        thread = cuda.threadIdx.x
        warp, lane = thread // WARP, thread % WARP
        wm, wn = (warp // WARPS_N) * WM, (warp % WARPS_N) * WN  # this warp's tile in the block's
        tm, tn = (lane // LANES_N) * WIDTH, (lane % LANES_N) * WIDTH  # this lane's first 4 x 4 in the warp's
        z = cuda.blockIdx.z
        a = z if A.shape[0] > 1 else 0
        b = z if B.shape[0] > 1 else 0
        M, N, K = C.shape[1], C.shape[2], A.shape[2]
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        vectors_a, vectors_b = vector_aligned(A), vector_aligned(B)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)

        # step 0: straight into buffer 0
        for load in range(LOADS_A):
            e = load * THREADS + thread
            r, k = e // SPLIT_A, (e % SPLIT_A) * WIDTH
            values = load_chunk(A, a, row0 + r, k, M, K, vectors_a)
            for v in range(WIDTH):
                tile_a[(k + v) * A_ROWS + r] = values[v]
        for load in range(LOADS_B):
            e = load * THREADS + thread
            k, c = e // SPLIT_B, (e % SPLIT_B) * WIDTH
            store4(tile_b, (k * BN + c,), load_chunk(B, b, k, col0 + c, K, N, vectors_b))
        cuda.syncthreads()

        steps = (K + BK - 1) // BK
        for step in range(steps):
            now = step % 2
            more = step + 1 < steps
            if more:  # issue the next step's global loads now; they complete while we compute
                start = (step + 1) * BK
                for load in range(LOADS_A):
                    e = load * THREADS + thread
                    r, k = e // SPLIT_A, (e % SPLIT_A) * WIDTH
                    values = load_chunk(A, a, row0 + r, start + k, M, K, vectors_a)
                    for v in range(WIDTH):
                        next_a[load, v] = values[v]
                for load in range(LOADS_B):
                    e = load * THREADS + thread
                    k, c = e // SPLIT_B, (e % SPLIT_B) * WIDTH
                    values = load_chunk(B, b, start + k, col0 + c, K, N, vectors_b)
                    for v in range(WIDTH):
                        next_b[load, v] = values[v]
            multiply_step(tile_a, tile_b, now, acc, a_values, b_values, wm + tm, wn + tn)  # from shared memory
            if more:  # the other buffer was last read before the previous barrier: free to fill
                later = 1 - now
                for load in range(LOADS_A):
                    e = load * THREADS + thread
                    r, k = e // SPLIT_A, (e % SPLIT_A) * WIDTH
                    for v in range(WIDTH):
                        tile_a[(later * BK + k + v) * A_ROWS + r] = next_a[load, v]
                for load in range(LOADS_B):
                    e = load * THREADS + thread
                    k, c = e // SPLIT_B, (e % SPLIT_B) * WIDTH
                    store4(tile_b, ((later * BK + k) * BN + c,), (next_b[load, 0], next_b[load, 1],
                                                                  next_b[load, 2], next_b[load, 3]))
            cuda.syncthreads()

        vectors_c = vector_aligned(C)
        for i in range(TM):  # rows wm + tm + (i // 4) * WSUB_M + i % 4 of the block's tile
            r = row0 + wm + (i // WIDTH) * WSUB_M + tm + i % WIDTH
            for j in range(ITER_N):
                c = col0 + wn + j * WSUB_N + tn
                if vectors_c and r < M and c + WIDTH <= N:
                    store4(C, (z, r, c), (acc[i, j * WIDTH], acc[i, j * WIDTH + 1], acc[i, j * WIDTH + 2],
                                          acc[i, j * WIDTH + 3]))
                else:
                    for v in range(WIDTH):
                        if r < M and c + v < N:
                            C[z, r, c + v] = acc[i, j * WIDTH + v]

    matmul_warp_tiled.tiles = dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, LANES_M=LANES_M)
    return matmul_warp_tiled


def configuration(kernel, shape_c) -> tuple[tuple[int, int, int], tuple[int]]:
    """(grid, block) covering C of shape (batch, M, N) for a kernel of `make_warp_tiled`."""
    t = kernel.tiles
    batch, M, N = shape_c
    return (-(-N // t["BN"]), -(-M // t["BM"]), batch), (threads(t["BM"], t["BN"], t["WM"], t["WN"]),)


matmul_warp_tiled = make_warp_tiled()

__all__ = ["configuration", "make_block_product", "make_warp_tiled", "matmul_warp_tiled", "parameter_problem",
           "shared_bytes", "threads"]
